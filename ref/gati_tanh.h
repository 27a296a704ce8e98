// Gati's piecewise-linear tanh/sigmoid engine in Q16 (gati.md 7.4, DECISIONS.md 7).
#pragma once

#include <array>
#include <cstdint>

namespace npukit::ref::gati {

constexpr std::int64_t kTanhInputMax = 229376;  // 3.5 in Q16: |x| is clamped here

// The 129-entry tables (Q16 words).
const std::array<std::uint32_t, 129>& tanh_points();
const std::array<std::uint32_t, 129>& tanh_values();
const std::array<std::uint32_t, 129>& tanh_slopes();

// The RTL's table index for a clamped magnitude in [0, kTanhInputMax]: 0..128.
int tanh_segment(std::int64_t magnitude);
// tanh of a signed Q16 value, result in Q16 (|result| <= 65535 or so).
std::int64_t tanh_q16(std::int64_t x);
// (tanh(x >> 1) + 65535) >> 1: sigmoid in Q16.
std::int64_t sigmoid_q16(std::int64_t x);

}  // namespace npukit::ref::gati
