#include "isa/meta.h"

#include "common/error.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <string>

namespace npukit::isa {

std::string_view name(MetaType type) {
  switch (type) {
    case MetaType::kReset:
      return "RESET";
    case MetaType::kDispatch:
      return "DISPATCH";
    case MetaType::kPayloadSize:
      return "PAYLOAD_SIZE";
    case MetaType::kInstOrigin:
      return "INST_ORIGIN";
  }
  return "?";
}

std::string_view name(DispatchTarget target) {
  switch (target) {
    case DispatchTarget::kRah:
      return "rah";
    case DispatchTarget::kUart:
      return "uart";
    case DispatchTarget::kSpi:
      return "spi";
  }
  return "?";
}

DispatchTarget parse_dispatch_target(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (auto t : {DispatchTarget::kRah, DispatchTarget::kUart, DispatchTarget::kSpi})
    if (lower == name(t)) return t;
  fail("unknown dispatch target '{}': use rah, uart or spi", text);
}

namespace {
void append_header(Bytes& out, std::uint32_t data_bytes, MetaType type) {
  append_be48(out, kMetaSop);
  append_be48(out, data_bytes);
  append_be48(out, static_cast<std::uint64_t>(type));
}
}  // namespace

void append_meta_reset(Bytes& out) { append_header(out, 0, MetaType::kReset); }

void append_meta_dispatch(Bytes& out, DispatchTarget target) {
  append_header(out, kMetaWordBytes, MetaType::kDispatch);
  append_be48(out, static_cast<std::uint64_t>(target));
}

void append_meta_payload_size(Bytes& out, std::uint32_t bytes) {
  append_header(out, kMetaWordBytes, MetaType::kPayloadSize);
  append_be48(out, bytes);
}

std::vector<MetaPacket> parse_meta_stream(ByteSpan stream) {
  if (stream.size() % kMetaWordBytes != 0)
    fail(
        "META stream of {} bytes is not a whole number of 6-byte words (truncated at byte offset "
        "{})",
        stream.size(), stream.size() - stream.size() % kMetaWordBytes);
  const std::size_t words = stream.size() / kMetaWordBytes;
  auto word = [&](std::size_t i) { return load_be48(stream.data() + i * kMetaWordBytes); };
  std::vector<MetaPacket> packets;
  std::size_t i = 0;
  while (i < words) {
    const std::uint64_t at = i * kMetaWordBytes;
    if (word(i) != kMetaSop)
      fail("bad META start-of-packet at byte offset {}: 0x{:012X}, expected 0xFFFFFFFFFFFF", at,
           word(i));
    if (words - i < 3)
      fail(
          "truncated META packet at byte offset {}: a header needs 3 words (SOP, SIZE, TYPE), "
          "{} left",
          at, words - i);
    const std::uint64_t size = word(i + 1);
    const std::uint64_t type = word(i + 2);
    MetaPacket packet;
    packet.offset = at;
    if (size == 0) {
      if (type != static_cast<std::uint64_t>(MetaType::kReset))
        fail(
            "META packet at byte offset {}: SIZE 0 with TYPE {}; only RESET has no data (the "
            "FPGA ignores this packet)",
            at, type);
      packet.type = MetaType::kReset;
      packets.push_back(packet);
      i += 3;
      continue;
    }
    if (type != static_cast<std::uint64_t>(MetaType::kDispatch) &&
        type != static_cast<std::uint64_t>(MetaType::kPayloadSize))
      fail(
          "META packet at byte offset {}: TYPE {} with SIZE {} is not acted on by the FPGA "
          "(RESET needs SIZE 0; DISPATCH 1 and PAYLOAD_SIZE 2 carry one data word)",
          at, type, size);
    if (words - i < 4)
      fail("truncated META packet at byte offset {}: {} needs a data word at byte offset {}", at,
           type == 1 ? "DISPATCH" : "PAYLOAD_SIZE", at + 3 * kMetaWordBytes);
    const std::uint64_t data = word(i + 3);
    if (type == static_cast<std::uint64_t>(MetaType::kDispatch)) {
      if (data > 2)
        fail(
            "META DISPATCH at byte offset {}: unknown target {} at byte offset {} (0 Rah, 1 UART, "
            "2 SPI)",
            at, data, at + 3 * kMetaWordBytes);
      packet.type = MetaType::kDispatch;
      packet.target = static_cast<DispatchTarget>(data);
    } else {
      if (data > 0xFFFFFFFFull)
        fail("META PAYLOAD_SIZE at byte offset {}: size 0x{:012X} does not fit 32 bits", at, data);
      packet.type = MetaType::kPayloadSize;
      packet.payload_size = static_cast<std::uint32_t>(data);
    }
    packets.push_back(packet);
    i += 4;
  }
  return packets;
}

}  // namespace npukit::isa
