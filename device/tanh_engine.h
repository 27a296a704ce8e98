// The Gati sigmoid/tanh engine (gati.md 7.4, DECISIONS.md 7): a 128-segment piecewise-linear tanh
// on Q16 integers, reproducing the v1.0.0 RTL datapath bit for bit, including its index
// arithmetic and register widths. Pure functions; the tables are embedded facts.
#pragma once

#include <array>
#include <cstdint>

#include "isa/tanh_tables.h"

namespace npukit::device {

inline constexpr int kTanhFracBits = 16;                // Q16 in and out
inline constexpr std::int32_t kTanhOne = 65535;         // what the engine calls 1.0 in sigmoid
inline constexpr std::uint32_t kTanhInputMax = 229376;  // 3.5 * 2^16: |x| is clamped here
using isa::kTanhTableSize;
inline constexpr std::uint32_t kTanhIndexRound = 896;  // half a segment (0x700 / 2)

using isa::tanh_tables;  // the three RTL tables, as stored

// Table index the RTL picks for a clamped magnitude |x| <= kTanhInputMax: the shift-and-add
// approximation of (|x| + 896) * 36.5625 >> 16, i.e. roughly the nearest sample point.
unsigned tanh_segment_index(std::uint32_t magnitude);

// Interpolated tanh of a non-negative magnitude (before the sign is restored), as the
// interpolator engine outputs it. Magnitudes above 3.5 are clamped first.
std::int32_t tanh_magnitude_q16(std::uint32_t magnitude);

// tanh(x) with x and result in Q16 (odd: the sign of x is restored with two's complement).
std::int32_t tanh_q16(std::int32_t x);
// sigmoid(x) = (tanh(x >>> 1) + 65535) >>> 1, in Q16.
std::int32_t sigmoid_q16(std::int32_t x);

}  // namespace npukit::device
