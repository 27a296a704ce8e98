// Dispatch result frames (gati.md 5.5 and 14.7): what the FPGA sends back for an OutputBlock with
// DispatchEn = 1. Big-endian 32-bit words:
//   FFFFFFFF | data size (bytes) | DispatchID | payload | FFFFFFFF 00000000 00000000
// The payload is the DRAM bytes [OutputAddr, OutputAddr + size) in address order; the RTL
// footer does not repeat the id.
#pragma once

#include "common/bytes.h"

#include <cstdint>
#include <vector>

namespace npukit::isa {

inline constexpr std::uint32_t kDispatchSof = 0xFFFFFFFFu;
inline constexpr std::size_t kDispatchHeaderBytes = 12;
inline constexpr std::size_t kDispatchFooterBytes = 12;
inline constexpr std::size_t kDispatchOverheadBytes = kDispatchHeaderBytes + kDispatchFooterBytes;

struct DispatchFrame {
  std::uint32_t id = 0;  // OutputBlock.DispatchID, echoed unchanged
  Bytes payload;         // a multiple of 4 bytes (the FPGA emits 32-bit words)
  bool operator==(const DispatchFrame&) const = default;
};

// Throws npukit::Error when the payload is not a multiple of 4 bytes.
Bytes encode_dispatch_frame(std::uint32_t id, ByteSpan payload);
Bytes encode_dispatch_frame(const DispatchFrame& frame);
void append_dispatch_frame(Bytes& out, std::uint32_t id, ByteSpan payload);

// The 12-byte header of one frame: the SOF checked, the size (a multiple of 4) and the id. The
// one place a frame header is read: parse_dispatch_frames uses it, and so does a host reading
// frames off a transport (it needs the size to know how much more to read). Throws
// npukit::Error naming `offset` (the header's byte offset in its stream) for a short header, a
// bad SOF or a size not a multiple of 4.
struct DispatchHeader {
  std::uint32_t size = 0;  // payload bytes
  std::uint32_t id = 0;
};
DispatchHeader parse_dispatch_header(ByteSpan header, std::uint64_t offset = 0);

// Splits back-to-back frames. Throws npukit::Error with the byte offset for a bad SOF, a
// truncated header, payload or footer, a size not a multiple of 4, or a footer other than
// FFFFFFFF 00000000 00000000.
std::vector<DispatchFrame> parse_dispatch_frames(ByteSpan stream);

}  // namespace npukit::isa
