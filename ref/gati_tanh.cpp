// The Gati sigmoid/tanh engine (gati.md 7.4, DECISIONS.md 7), written from the spec text.
// The tables are isa/tanh_tables (data); this arithmetic shares nothing with device/.
#include "ref/gati_tanh.h"

#include "isa/tanh_tables.h"

#include <array>
#include <cstdlib>

namespace npukit::ref::gati {

const std::array<std::uint32_t, 129>& tanh_points() { return isa::tanh_tables().points; }
const std::array<std::uint32_t, 129>& tanh_values() { return isa::tanh_tables().tanh; }
const std::array<std::uint32_t, 129>& tanh_slopes() { return isa::tanh_tables().slope; }

int tanh_segment(std::int64_t magnitude) {
  // idx = seg * 36.5625 / 65536 ~ (x + step/2) / step with step 1792: the nearest sample point.
  // 36.5625 = 32 + 4 + 9/16, and the RTL truncates seg/16 before multiplying by 9.
  std::int64_t seg = magnitude + 896;
  std::int64_t sixteenth = seg >> 4;
  return static_cast<int>(((seg << 5) + (seg << 2) + (sixteenth << 3) + sixteenth) >> 16);
}

std::int64_t tanh_q16(std::int64_t x) {
  std::int64_t m = x < 0 ? -x : x;
  if (m > kTanhInputMax) m = kTanhInputMax;
  int idx = tanh_segment(m);
  // The RTL interpolator holds the slope in an unsigned 16-bit register, so entry 0 (0x10000,
  // slope 1.0) reads as 0: tanh(|x| <= 896) = 0 on the hardware (docs/decisions.md D1).
  const std::int64_t slope = tanh_slopes()[idx] & 0xFFFF;
  std::int64_t t =
      std::int64_t{tanh_values()[idx]} + (((m - std::int64_t{tanh_points()[idx]}) * slope) >> 16);
  return x < 0 ? -t : t;
}

std::int64_t sigmoid_q16(std::int64_t x) { return (tanh_q16(x >> 1) + 65535) >> 1; }

}  // namespace npukit::ref::gati
