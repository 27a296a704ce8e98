// DWP, the DRAM Write Protocol (gati.md 5.2, DECISIONS.md 2): the byte stream the host sends on
// Rah app 1. A packet is three big-endian 32-bit words SOP = 0xFFFFFFFF, DS = payload bytes,
// ADDR = DRAM byte address, then DS payload bytes that land in DRAM in stream order. DS = 0 is
// the start command (no payload; the address word is present and ignored).
#pragma once

#include "common/bytes.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace npukit::isa {

inline constexpr std::uint32_t kDwpSop = 0xFFFFFFFFu;
inline constexpr std::size_t kDwpHeaderBytes = 12;
inline constexpr std::uint8_t kRahAppId = 1;  // DWP travels on Rah app 1

struct DwpPacket {
  std::uint64_t offset = 0;  // byte offset of the SOP word in the stream
  std::uint32_t address = 0;
  std::uint32_t size = 0;  // payload bytes (DS)
  ByteSpan payload;        // points into the parsed stream
  bool is_start() const { return size == 0; }
  std::uint64_t end_offset() const { return offset + kDwpHeaderBytes + size; }
};

// Splits a DWP byte stream into packets. Throws npukit::Error naming the byte offset and the
// problem for anything the RTL decoder would mis-read or that the real board would not accept:
// a bad SOP, a truncated header or payload, DS not a multiple of 32 (the write controller
// writes whole 32-byte DRAM words), an address not 32-byte aligned, or address + DS past 4 GiB.
// An empty stream gives no packets. Questionable but well-formed streams parse; see
// dwp_warnings().
std::vector<DwpPacket> parse_dwp_stream(ByteSpan stream);

// Things the RTL would accept but that are probably mistakes, each naming a byte offset: a start
// packet with a non-zero address word, a start packet not right after a data packet (the RTL
// ignores it, gati.md 14.4), and data packets that overwrite each other.
std::vector<std::string> dwp_warnings(const std::vector<DwpPacket>& packets);

// Appends one data packet. Throws npukit::Error when the payload is empty (DS = 0 would be the
// start command), not a multiple of 32 bytes, or the address is not 32-byte aligned.
void append_dwp_packet(Bytes& out, std::uint32_t address, ByteSpan payload);
// The same for a payload of `size` bytes written in place: returns it, zeroed, inside `out` (valid
// until `out` grows again).
std::span<std::uint8_t> append_dwp_packet(Bytes& out, std::uint32_t address, std::size_t size);
// Appends the start command FFFFFFFF 00000000 00000000.
void append_dwp_start(Bytes& out);

}  // namespace npukit::isa
