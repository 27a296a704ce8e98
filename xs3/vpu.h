// The XS3 vector unit's arithmetic, one function per instruction behaviour (xs3-arithmetic.md §1).
// Everything saturates to SYMMETRIC bounds (±127, ±32767, ±(2^31-1), ±(2^39-1)); nothing wraps.
// Shifts use 64-bit intermediates, so no input can overflow (lib_nn's int32 form could).
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace npukit::xs3 {

// Element width of the VPU mode. Accumulators are 32-bit in 8- and 16-bit modes (16 of them) and
// 40-bit in 32-bit mode (8 of them).
enum class VpuMode { k8, k16, k32 };

int element_bits(VpuMode mode);
int accumulator_count(VpuMode mode);

// Largest magnitude representable at `bits` under symmetric saturation: 2^(bits-1) - 1.
constexpr std::int64_t symmetric_max(int bits) { return (std::int64_t{1} << (bits - 1)) - 1; }

// Clamp to [-(2^(bits-1)-1), 2^(bits-1)-1]; bits in {8, 16, 32, 40}.
std::int64_t saturate(std::int64_t x, int bits);
inline std::int8_t sat8(std::int64_t x) { return static_cast<std::int8_t>(saturate(x, 8)); }
inline std::int16_t sat16(std::int64_t x) { return static_cast<std::int16_t>(saturate(x, 16)); }
inline std::int32_t sat32(std::int64_t x) { return static_cast<std::int32_t>(saturate(x, 32)); }

// floor((x + 2^(shift-1)) / 2^shift) for shift > 0 (round to nearest, ties toward +inf); x for
// shift == 0. Exact for every int64 x and every shift >= 0. Throws npukit::Error for shift < 0.
std::int64_t rshr_round(std::int64_t x, int shift);

// Arithmetic (floor) right shift, exact for any shift >= 0 (shift >= 63 gives 0 or -1).
std::int64_t floor_shift(std::int64_t x, int shift);

// VLSAT: rounding right shift of an accumulator, saturated to the mode's element width.
// Negative shifts are rejected (DECISIONS.md 16).
std::int32_t vlsat(std::int64_t accumulator, int shift, VpuMode mode);

// VLASHR: floor shift right by shr (DECISIONS.md 17); shr < 0 is a left shift by -shr saturated to
// the element bounds. The input is first saturated to the element width.
std::int32_t vlashr(std::int32_t x, int shr, VpuMode mode);

// VLMUL: x*y rounded (ties toward +inf) right by 6 / 14 / 30 bits (Q1.6, Q1.14, Q2.30 y) and
// saturated to the element width.
std::int32_t vlmul(std::int32_t x, std::int32_t y, VpuMode mode);

// VDEPTH8 of a 16-bit element: round_half_up(x / 2^8) saturated to ±127.
std::int8_t vdepth8_from16(std::int32_t x);
// VDEPTH8 of a 32-bit element: round_half_up(x / 2^24) saturated to ±127.
std::int8_t vdepth8_from32(std::int64_t x);
// VDEPTH16 of a 32-bit element: round_half_up(x / 2^16) saturated to ±32767.
std::int16_t vdepth16_from32(std::int64_t x);

// VLADD: vr + mem, saturated. VLSUB: mem - vr (operand order as in lib_nn's vpu_sim), saturated.
std::int32_t vladd(std::int32_t vr, std::int32_t mem, VpuMode mode);
std::int32_t vlsub(std::int32_t vr, std::int32_t mem, VpuMode mode);
// VPOS: max(x, 0).
std::int32_t vpos(std::int32_t x);

// The accumulator file (vD:vR) with the two multiply-accumulate instructions.
class VpuAccumulators {
 public:
  explicit VpuAccumulators(VpuMode mode);

  VpuMode mode() const { return mode_; }
  // Accumulator i (i < accumulator_count(mode)).
  std::int64_t get(int i) const;
  void set(int i, std::int64_t value);  // saturated to the accumulator width
  void clear();

  // VLMACC: lane-wise acc[i] = sat(acc[i] + vc[i]*mem[i]) over 16 lanes (8/16-bit mode) or
  // 8 lanes (32-bit mode, product rounded >> 30 into a 40-bit accumulator).
  // vc and mem must hold accumulator_count(mode) elements.
  void vlmacc(std::span<const std::int32_t> vc, std::span<const std::int32_t> mem);

  // VLMACCR: s = sat(acc[last] + sum_i vc[i]*mem[i]) over 32 (8-bit), 16 (16-bit) or 8 (32-bit,
  // products rounded >> 30) elements; then the accumulators rotate up by one and s lands in acc[0].
  // After accumulator_count VLMACCRs each accumulator got one dot product and is back in place;
  // the first VLMACCR of a rotation therefore feeds the LAST accumulator (channel 15).
  void vlmaccr(std::span<const std::int32_t> vc, std::span<const std::int32_t> mem);

 private:
  int accumulator_bits() const;
  VpuMode mode_;
  std::array<std::int64_t, 16> acc_{};
};

// Elements a VLMACCR reads in this mode: 32, 16 or 8.
int vlmaccr_elements(VpuMode mode);

}  // namespace npukit::xs3
