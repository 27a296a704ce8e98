// META packets (gati.md 5.3, platform meta_app.v): control messages on Rah app 2, made of
// 48-bit big-endian words:
//   [SOP FFFFFFFFFFFF] [SIZE = 0000 + u32 data bytes] [TYPE] [DATA]
// RESET has SIZE 0 and no data. DISPATCH and PAYLOAD_SIZE have SIZE 6 and one 48-bit data
// word: the dispatch target (0 Rah, 1 UART, 2 SPI), or 0000 + u32 byte count of the next app-1
// write. meta_app.v reads exactly one data word whenever SIZE != 0 and resets only when SIZE == 0
// and TYPE == RESET; anything else it silently skips, so the reader rejects it.
#pragma once

#include "common/bytes.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace npukit::isa {

inline constexpr std::uint64_t kMetaSop = 0xFFFF'FFFF'FFFFull;
inline constexpr std::size_t kMetaWordBytes = 6;
inline constexpr std::uint8_t kMetaAppId = 2;  // META travels on Rah app 2

enum class MetaType : std::uint8_t { kReset = 0, kDispatch = 1, kPayloadSize = 2, kInstOrigin = 3 };
enum class DispatchTarget : std::uint8_t { kRah = 0, kUart = 1, kSpi = 2 };

std::string_view name(MetaType type);
std::string_view name(DispatchTarget target);  // "rah", "uart", "spi"
// Accepts "rah", "uart", "spi" (any case); throws npukit::Error otherwise.
DispatchTarget parse_dispatch_target(std::string_view text);

struct MetaPacket {
  std::uint64_t offset = 0;  // byte offset of the SOP word
  MetaType type = MetaType::kReset;
  DispatchTarget target = DispatchTarget::kRah;  // kDispatch only
  std::uint32_t payload_size = 0;                // kPayloadSize only
  bool operator==(const MetaPacket&) const = default;
};

void append_meta_reset(Bytes& out);
void append_meta_dispatch(Bytes& out, DispatchTarget target);
void append_meta_payload_size(Bytes& out, std::uint32_t bytes);

// Parses back-to-back META packets. Throws npukit::Error with the byte offset for a length that
// is not a multiple of 6, a truncated packet, a bad SOP, a type meta_app.v does not act on
// (including INST_ORIGIN), an unknown dispatch target or a payload size above 32 bits.
std::vector<MetaPacket> parse_meta_stream(ByteSpan stream);

}  // namespace npukit::isa
