// EltWise megablock (opcode 0x5; gati.md 3.2, 7.3, 7.4; DECISIONS.md 4, 6, 7): per-lane
// add / sub / mult / sigmoid / tanh of two int8 activation tensors in the activation layout,
// producing one 32-bit value per element that the tail quantizer turns back into int8 with an
// extra fp_cast rounding shift.
#pragma once

#include "device/block.h"
#include "isa/isa.h"

#include <algorithm>
#include <cstdint>
#include <string_view>

namespace npukit::device {

// The arithmetic fields of one EltWise instruction, decoded and checked.
struct EltwiseLaneParams {
  isa::EltType type = isa::EltType::kAdd;
  std::int32_t a_scale = 0;  // signed, low 18 bits of AScale (Q10; Q16 engine input for SIG/TANH)
  std::int32_t b_scale = 0;
  std::int32_t a_zero = 0;  // AZeroPoint read as int8
  std::int32_t b_zero = 0;
};

// Reads EltType, AScale, BScale, AZeroPoint, BZeroPoint. Throws npukit::Error naming
// "EltWise.EltType" for a type above 4 (`where` says which instruction, e.g. "layer 2").
EltwiseLaneParams eltwise_lane_params(const isa::Instruction& inst, std::string_view where);

// Scales are signed fixed point in the low 18 bits of the 32-bit field (DECISIONS.md 6).
std::int32_t eltwise_scale_from_field(std::uint64_t field);

// Rounding shift the tail quantizer applies after QuantScale/QuantShift for an EltWise result:
// 10 for add/sub/mult (Q10 results), 16 for sigmoid/tanh (Q16 results). DECISIONS.md 4.
int eltwise_fp_cast_shift(isa::EltType type);

// One lane: L = (a - a_zero) * a_scale, R = (b - b_zero) * b_scale, then
//   ADD  L + R,  SUB  L - R,  MULT (L * R + 2^9) >> 10,  SIG/TANH  engine(L) (b ignored),
// truncated to the 32-bit output bus as the hardware does.
std::int32_t eltwise_lane(const EltwiseLaneParams& p, std::int8_t a, std::int8_t b);

// True when (x - zero) leaves int8: the v1.0.0 RTL subtracts the zero point in an 8-bit register
// and would wrap there. We compute the intended value and warn (DECISIONS.md 18).
bool eltwise_zero_point_wraps(std::int8_t x, std::int32_t zero);

// n lanes at once: out[i] = eltwise_lane(p, a[i], b[i]); b is not read for sigmoid / tanh (it may
// be null). Returns how many elements have eltwise_zero_point_wraps(a[i], a_zero) or (add, sub,
// mult) eltwise_zero_point_wraps(b[i], b_zero). Paths (common/cpu.h): scalar, and AVX2 for add,
// sub and mult (sigmoid and tanh run the engine value by value on every path).
std::uint64_t eltwise_span(const EltwiseLaneParams& p, const std::int8_t* a, const std::int8_t* b,
                           std::int32_t* out, std::uint64_t n, Isa isa = Isa::kAuto);
namespace detail {
// Add and sub with both zero points 0 (the compiler's symmetric activations), in 16-bit limbs.
// The quantizer's input is v = a * A + b * B (a, b the int8 operands, A and B their scales, B
// negated for sub), and its output floor((v * s + h) / 2^T) before the int8 clamp, so with
// C_a = A * s and C_b = B * s the whole product is a * C_a + b * C_b + h. Split each C into
// c1 * 2^16 + c0, c0 in [-2^15, 2^15) and c1 in int16 (checked: |C| below about 2^31), and
// h into H * 2^16 + h0, h0 in [0, 2^16). Then, for T >= 16,
//   floor((v * s + h) / 2^T) = floor((S1 + H + floor((S0 + h0) / 2^16)) / 2^(T - 16)),
// S_k = a * c_k,a + b * c_k,b: one _mm256_madd_epi16 on the operands as int16 pairs each. Every
// sum fits int32 (|S_k| <= 2^23, |H| <= 2^25), so the result is exact for every input without
// the clamp to the quantizer's input bounds; the saturating packs then clamp it to int8.
struct LimbPlan {
  bool usable = false;
  std::int16_t c0_a = 0, c0_b = 0, c1_a = 0, c1_b = 0;
  std::int32_t h0 = 0, h_high = 0;
  int count = 0;  // T - 16
  // The limbs' multipliers as int16 pairs in one word (a's low, b's high): an operand pair
  // (a, b) in the same order multiplied and summed with them gives S0 and S1.
  std::int32_t low_pair() const { return pair(c0_a, c0_b); }
  std::int32_t high_pair() const { return pair(c1_a, c1_b); }

 private:
  static std::int32_t pair(std::int16_t for_a, std::int16_t for_b) {
    return static_cast<std::int32_t>(
        (static_cast<std::uint32_t>(static_cast<std::uint16_t>(for_b)) << 16) |
        static_cast<std::uint16_t>(for_a));
  }
};
LimbPlan limb_plan(const EltwiseLaneParams& p, std::int32_t scale, int shift, int fp_cast_shift);
// Clip's upper end as the byte the packed int8 outputs are held under (ActParam 0..127).
inline char clip_byte(std::int32_t clip) {
  return static_cast<char>(std::clamp(clip, std::int32_t{0}, std::int32_t{127}));
}
// The plan's values 64 a step in zmm vectors (vpdpwssd for each limb's multiply and add), the
// AVX-512 VNNI level's part of eltwise_quantized_bytes_avx2: returns how many it did (n rounded
// down to 64); act as there.
std::uint64_t limb_bytes_avx512(const LimbPlan& plan, const std::int8_t* a, const std::int8_t* b,
                                std::uint8_t* out, std::uint64_t n, int act, std::int32_t clip);
std::uint64_t eltwise_span_avx2(const EltwiseLaneParams& p, const std::int8_t* a,
                                const std::int8_t* b, std::int32_t* out, std::uint64_t n);
// out[i] = the low byte of values[i], for values in [-128, 127] (the quantizer's output).
void int8_values_to_bytes_avx2(const std::int32_t* values, std::uint8_t* out, std::uint64_t n);
// eltwise_span_avx2, then quantize_span_avx2 with bias 0 (the tail's quantizer and ReLU / Clip,
// act as there), then int8_values_to_bytes_avx2, in one pass for add and sub: 32 values a step
// from the operands' bytes to the output's in registers (the output may be an operand: each
// step reads its bytes before writing them). Other types, and the last n % 32 values, go
// through the three passes. Returns the wrapped count, as eltwise_span. avx512 (the AVX-512 VNNI
// level only): a LimbPlan's values 64 a step first (limb_bytes_avx512), the AVX2 ones after.
std::uint64_t eltwise_quantized_bytes_avx2(const EltwiseLaneParams& p, const std::int8_t* a,
                                           const std::int8_t* b, std::uint8_t* out, std::uint64_t n,
                                           std::int32_t scale, int shift, int fp_cast_shift,
                                           int act, std::int32_t clip, bool avx512 = false);
}  // namespace detail

// Registers run_eltwise with the block registry (block.h).
#define NPUKIT_DEVICE_RUN_ELTWISE 1

// Lanes of the EltWise datapath: one element per lane per cycle, N_SA lanes (gati.md 7.3).
// Pipeline depths (cycles from operand in to result out) of the first timing model.
inline constexpr std::uint64_t kEltwisePipelineCycles = 6;
inline constexpr std::uint64_t kTanhPipelineCycles = 12;

// ---------------------------------------------------------------------------------------------
// Field checks shared by the device-blocks megablocks (eltwise, pool, reshape/transpose, concat,
// resize, nms). Each throws npukit::Error naming the layer, instruction and field.

// `field` of the megablock must be non-zero (a zero-sized image or count).
std::uint64_t require_nonzero(const LayerContext& ctx, isa::Field field, std::string_view what);
// An input region [Start, End): Start 32-byte aligned, End == Start + bytes (exclusive end, the
// convention of gati.md 14.9), inside DRAM. Returns Start.
std::uint64_t check_input_region(const LayerContext& ctx, isa::Field start, isa::Field end,
                                 std::uint64_t bytes);
// An input region given only by its start address (RESHAPE, TRANSPOSE, CONCAT).
std::uint64_t check_input_start(const LayerContext& ctx, isa::Field start, std::uint64_t bytes);
// OutputBlock OH/OW, when non-zero, must equal the megablock's own output size.
void check_output_dims(const LayerContext& ctx, std::uint64_t oh, std::uint64_t ow);
// The output region [OutputAddr, OutputAddr + bytes) must lie inside DRAM; checked before any
// work so a huge bogus output never gets computed.
void check_output_fits(const LayerContext& ctx, std::uint64_t bytes);
// Blocks that move int8 bytes unchanged (pool, concat, resize) write OpWidth 1 only.
void require_int8_output(const LayerContext& ctx);

}  // namespace npukit::device
