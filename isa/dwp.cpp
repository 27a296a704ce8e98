#include "isa/dwp.h"

#include "common/error.h"
#include "isa/arch.h"

#include <fmt/core.h>

#include <algorithm>

namespace npukit::isa {

std::vector<DwpPacket> parse_dwp_stream(ByteSpan stream) {
  std::vector<DwpPacket> packets;
  std::uint64_t pos = 0;
  const std::uint64_t total = stream.size();
  while (pos < total) {
    const std::uint64_t left = total - pos;
    if (left < kDwpHeaderBytes)
      fail(
          "truncated DWP header at byte offset {}: {} byte(s) left, a header needs 12 (SOP, size, "
          "address)",
          pos, left);
    const std::uint8_t* p = stream.data() + pos;
    const std::uint32_t sop = load_be32(p);
    if (sop != kDwpSop)
      fail(
          "bad DWP start-of-packet at byte offset {}: 0x{:08X}, expected 0xFFFFFFFF (the stream "
          "is corrupted, or the previous packet's size is wrong)",
          pos, sop);
    DwpPacket packet;
    packet.offset = pos;
    packet.size = load_be32(p + 4);
    packet.address = load_be32(p + 8);
    if (packet.size % 4 != 0)
      fail(
          "DWP packet at byte offset {}: size {} is not a multiple of 4 (the RTL decoder counts "
          "32-bit words)",
          pos, packet.size);
    if (packet.size % kDramWordBytes != 0)
      fail(
          "DWP packet at byte offset {}: size {} is not a multiple of 32 (the RTL writes whole "
          "32-byte DRAM words; pad the payload)",
          pos, packet.size);
    if (!packet.is_start()) {
      if (packet.address % kDramWordBytes != 0)
        fail("DWP packet at byte offset {}: DRAM address 0x{:X} is not 32-byte aligned", pos,
             packet.address);
      if (std::uint64_t{packet.address} + packet.size > (std::uint64_t{1} << 32))
        fail(
            "DWP packet at byte offset {}: address 0x{:X} + size {} runs past the 4 GiB address "
            "space",
            pos, packet.address, packet.size);
    }
    const std::uint64_t payload_at = pos + kDwpHeaderBytes;
    if (total - payload_at < packet.size)
      fail(
          "truncated DWP payload: packet at byte offset {} (address 0x{:X}) declares {} bytes, "
          "only {} remain after its header at byte offset {}",
          pos, packet.address, packet.size, total - payload_at, payload_at);
    packet.payload = stream.subspan(payload_at, packet.size);
    packets.push_back(packet);
    pos = payload_at + packet.size;
  }
  return packets;
}

std::vector<std::string> dwp_warnings(const std::vector<DwpPacket>& packets) {
  std::vector<std::string> warnings;
  for (std::size_t i = 0; i < packets.size(); ++i) {
    const auto& packet = packets[i];
    if (!packet.is_start()) continue;
    if (packet.address != 0)
      warnings.push_back(fmt::format(
          "start packet at byte offset {} has address word 0x{:X}; the RTL ignores it, senders "
          "write 0",
          packet.offset, packet.address));
    if (i == 0 || packets[i - 1].is_start())
      warnings.push_back(fmt::format(
          "start packet at byte offset {} does not follow a data packet; the v1.0.0 RTL ignores "
          "such a start (send the input tensor packet right before it)",
          packet.offset));
  }
  // Overlaps: sort data packets by address and compare neighbours.
  std::vector<const DwpPacket*> data;
  for (const auto& packet : packets)
    if (!packet.is_start()) data.push_back(&packet);
  std::sort(data.begin(), data.end(), [](const DwpPacket* a, const DwpPacket* b) {
    return a->address != b->address ? a->address < b->address : a->offset < b->offset;
  });
  for (std::size_t i = 1; i < data.size(); ++i) {
    const auto& a = *data[i - 1];
    const auto& b = *data[i];
    if (std::uint64_t{a.address} + a.size > b.address)
      warnings.push_back(fmt::format(
          "DWP packets at byte offsets {} and {} overlap in DRAM: [0x{:X}, 0x{:X}) and [0x{:X}, "
          "0x{:X})",
          a.offset, b.offset, a.address, std::uint64_t{a.address} + a.size, b.address,
          std::uint64_t{b.address} + b.size));
  }
  return warnings;
}

std::span<std::uint8_t> append_dwp_packet(Bytes& out, std::uint32_t address, std::size_t size) {
  if (size == 0)
    fail("DWP packet for DRAM 0x{:X}: empty payload (size 0 is the start command)", address);
  if (size % kDramWordBytes != 0)
    fail("DWP packet for DRAM 0x{:X}: payload of {} bytes is not a multiple of 32; pad it", address,
         size);
  if (address % kDramWordBytes != 0)
    fail("DWP packet: DRAM address 0x{:X} is not 32-byte aligned", address);
  if (std::uint64_t{address} + size > (std::uint64_t{1} << 32))
    fail("DWP packet for DRAM 0x{:X}: {} bytes run past the 4 GiB address space", address, size);
  append_be32(out, kDwpSop);
  append_be32(out, static_cast<std::uint32_t>(size));
  append_be32(out, address);
  out.resize(out.size() + size, 0);
  return {out.data() + out.size() - size, size};
}

void append_dwp_packet(Bytes& out, std::uint32_t address, ByteSpan payload) {
  const auto at = append_dwp_packet(out, address, payload.size());
  std::copy(payload.begin(), payload.end(), at.begin());
}

void append_dwp_start(Bytes& out) {
  append_be32(out, kDwpSop);
  append_be32(out, 0);
  append_be32(out, 0);
}

}  // namespace npukit::isa
