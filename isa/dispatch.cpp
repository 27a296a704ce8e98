#include "isa/dispatch.h"

#include "common/error.h"

#include <fmt/core.h>

namespace npukit::isa {

void append_dispatch_frame(Bytes& out, std::uint32_t id, ByteSpan payload) {
  if (payload.size() % 4 != 0)
    fail("dispatch frame for id 0x{:X}: payload of {} bytes is not a multiple of 4", id,
         payload.size());
  if (payload.size() > 0xFFFFFFFFull)
    fail("dispatch frame for id 0x{:X}: payload of {} bytes does not fit the 32-bit size", id,
         payload.size());
  append_be32(out, kDispatchSof);
  append_be32(out, static_cast<std::uint32_t>(payload.size()));
  append_be32(out, id);
  out.insert(out.end(), payload.begin(), payload.end());
  append_be32(out, 0xFFFFFFFFu);
  append_be32(out, 0);
  append_be32(out, 0);
}

Bytes encode_dispatch_frame(std::uint32_t id, ByteSpan payload) {
  Bytes out;
  out.reserve(payload.size() + kDispatchOverheadBytes);
  append_dispatch_frame(out, id, payload);
  return out;
}

Bytes encode_dispatch_frame(const DispatchFrame& frame) {
  return encode_dispatch_frame(frame.id, frame.payload);
}

DispatchHeader parse_dispatch_header(ByteSpan header, std::uint64_t offset) {
  if (header.size() < kDispatchHeaderBytes)
    fail(
        "truncated dispatch header at byte offset {}: {} byte(s) left, a header needs 12 (SOF, "
        "size, id)",
        offset, header.size());
  const std::uint8_t* p = header.data();
  const std::uint32_t sof = load_be32(p);
  if (sof != kDispatchSof)
    fail("bad dispatch start-of-frame at byte offset {}: 0x{:08X}, expected 0xFFFFFFFF", offset,
         sof);
  DispatchHeader h;
  h.size = load_be32(p + 4);
  h.id = load_be32(p + 8);
  if (h.size % 4 != 0)
    fail("dispatch frame at byte offset {} (id 0x{:X}): size {} is not a multiple of 4", offset,
         h.id, h.size);
  return h;
}

std::vector<DispatchFrame> parse_dispatch_frames(ByteSpan stream) {
  std::vector<DispatchFrame> frames;
  const std::uint64_t total = stream.size();
  std::uint64_t pos = 0;
  while (pos < total) {
    const DispatchHeader h = parse_dispatch_header(stream.subspan(pos), pos);
    const std::uint32_t size = h.size;
    const std::uint32_t id = h.id;
    const std::uint64_t payload_at = pos + kDispatchHeaderBytes;
    if (total - payload_at < size)
      fail(
          "truncated dispatch payload: frame at byte offset {} (id 0x{:X}) declares {} bytes, "
          "only {} remain after byte offset {}",
          pos, id, size, total - payload_at, payload_at);
    const std::uint64_t footer_at = payload_at + size;
    if (total - footer_at < kDispatchFooterBytes)
      fail(
          "truncated dispatch footer at byte offset {} (frame at byte offset {}, id 0x{:X}): {} "
          "byte(s) left, the footer is 12 (FFFFFFFF 00000000 00000000)",
          footer_at, pos, id, total - footer_at);
    const std::uint8_t* f = stream.data() + footer_at;
    const std::uint32_t expected[3] = {0xFFFFFFFFu, 0, 0};
    for (int w = 0; w < 3; ++w)
      if (load_be32(f + 4 * w) != expected[w])
        fail(
            "bad dispatch footer at byte offset {} (frame at byte offset {}, id 0x{:X}): word {} "
            "is 0x{:08X}, expected 0x{:08X} (footer FFFFFFFF 00000000 00000000; is the size "
            "right?)",
            footer_at + 4 * w, pos, id, w, load_be32(f + 4 * w), expected[w]);
    frames.push_back({id, Bytes(stream.begin() + payload_at, stream.begin() + footer_at)});
    pos = footer_at + kDispatchFooterBytes;
  }
  return frames;
}

}  // namespace npukit::isa
