// The tail quantizer on 8 int32 lanes at the AVX2 level, shared by the blocks whose AVX2 paths
// quantize in registers (device/block_avx2.cpp's tails, device/eltwise_avx2.cpp's fused
// add/sub), and the vector forms of the DRAM words' int8 and big-endian int32 values that those
// and the conv kernels (device/conv_kernels_avx2.cpp's partial sums) write. Why it is exact: the
// comment at the top of device/block_avx2.cpp. For x86 AVX2 translation units only (functions with
// target attributes).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <limits>

namespace npukit::device::detail {

// Rounding shift of 4 64-bit products (the low 32 bits of each lane hold the result when it fits
// in int32).
__attribute__((target("avx2"))) inline __m256i shift_lanes(__m256i p, __m256i add, __m256i sub,
                                                           __m128i count) {
  return _mm256_sub_epi64(_mm256_srl_epi64(_mm256_add_epi64(p, add), count), sub);
}

// The input range of Quantizer below: low is the last v whose q(v) clamps to one int8 end and high
// the first whose q(v) clamps to the other (clamped to int32).
struct InputBounds {
  std::int32_t low, high;
};
// The bounds for these parameters (remembered per thread for the last ones asked for), and the
// two rounding shifts' addends as one (block_avx2.cpp).
InputBounds input_bounds(std::int32_t scale, int shift, int fp_cast_shift);
std::int64_t rounding_addend(int shift, int fp_cast_shift);

// Whether these parameters take the quantizer's narrow form (Quantizer below): every clamped v
// has v * scale + h in int32 and the shift is at most 31.
inline bool narrow_form(std::int32_t scale, int shift, int fp_cast_shift, InputBounds bounds) {
  const std::int64_t h = rounding_addend(shift, fp_cast_shift);
  // |v| <= 2^31, |scale| <= 2^31 and 0 <= h < 2^62: each end fits int64.
  const std::int64_t at_low = std::int64_t{bounds.low} * scale + h;
  const std::int64_t at_high = std::int64_t{bounds.high} * scale + h;
  return shift + fp_cast_shift <= 31 &&
         std::min(at_low, at_high) >= std::numeric_limits<std::int32_t>::min() &&
         std::max(at_low, at_high) <= std::numeric_limits<std::int32_t>::max();
}

// The quantizer (rounding shift, int8 clamp) and activation of 8 int32 values, bias added.
// The clamp to int8 happens before the product, on v in 32 bits: q(v) = floor((v * scale + h) /
// 2^T) is monotone in v, so v is first clamped to [v_low, v_high], the last value whose q clamps
// to one int8 end and the first whose q clamps to the other (input_bounds, exact); outside that
// range the clamped result is the end's, inside it |q| <= 128 + 2^15 fits the lanes' low 32 bits,
// so the 64-bit lanes need no compares and the int8 clamp and ReLU / Clip are one 32-bit max and
// min.
//
// Narrow: when every clamped v has v * scale + h in int32 and T <= 31, floor((v * scale + h) /
// 2^T) is a 32-bit multiply, add and arithmetic shift: the same integers in half the
// operations (the multiply and the add wrap, but a sum that fits int32 comes out right modulo
// 2^32). v * scale + h is monotone in v, so its extremes are at the clamp bounds. A conv's tail
// has it: the bounds sit where q reaches -128 and 127, so v * scale stays within about 128 * 2^T,
// which fits for T <= 24 (at T = 24 the low end is -2^31 + 2^23 + h, where a test of |v * scale|
// + h against 2^31 would fail by the addend: resnet50's layer3 and layer4 tails).
struct Quantizer {
  __m256i vscale, add, sub, v_low, v_high, out_low, out_high_none, out_high_clip, add32;
  __m128i count;
  bool narrow;
  __attribute__((target("avx2")))
  Quantizer(std::int32_t scale, int shift, int fp_cast_shift, std::int32_t clip) {
    const int total = shift + fp_cast_shift;
    const std::int64_t h = rounding_addend(shift, fp_cast_shift);
    vscale = _mm256_set1_epi32(scale);
    add = _mm256_set1_epi64x(h + (std::int64_t{1} << 62));
    sub = _mm256_set1_epi64x(std::int64_t{1} << (62 - total));
    count = _mm_cvtsi32_si128(total);
    const InputBounds bounds = input_bounds(scale, shift, fp_cast_shift);
    v_low = _mm256_set1_epi32(bounds.low);
    v_high = _mm256_set1_epi32(bounds.high);
    narrow = narrow_form(scale, shift, fp_cast_shift, bounds);
    add32 = _mm256_set1_epi32(static_cast<std::int32_t>(narrow ? h : 0));
    out_low = _mm256_set1_epi32(-128);
    out_high_none = _mm256_set1_epi32(127);
    out_high_clip = _mm256_set1_epi32(std::min(clip, std::int32_t{127}));
  }
  // q(v) before the int8 clamp and the activation, with `narrow` as kNarrow: |q| <= 128 + 2^15,
  // so saturating packs to int8 (which clamp) may finish the work instead of operator().
  template <bool kNarrow>
  __attribute__((target("avx2"))) __m256i unclamped(__m256i v) const {
    v = _mm256_min_epi32(_mm256_max_epi32(v, v_low), v_high);
    if constexpr (kNarrow)
      return _mm256_sra_epi32(_mm256_add_epi32(_mm256_mullo_epi32(v, vscale), add32), count);
    const __m256i even = shift_lanes(_mm256_mul_epi32(v, vscale), add, sub, count);
    const __m256i odd =
        shift_lanes(_mm256_mul_epi32(_mm256_srli_epi64(v, 32), vscale), add, sub, count);
    return _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  }
  template <int kAct>
  __attribute__((target("avx2"))) __m256i operator()(__m256i v) const {
    const __m256i r = narrow ? unclamped<true>(v) : unclamped<false>(v);
    // int8 clamp and activation: ReLU and Clip raise the low end to 0, Clip lowers the high end.
    const __m256i lowered = _mm256_min_epi32(r, kAct == 1 ? out_high_clip : out_high_none);
    return _mm256_max_epi32(lowered, kAct >= 0 ? _mm256_setzero_si256() : out_low);
  }
};

// The _mm256_shuffle_epi8 mask that reverses the bytes of each int32 (DRAM holds them big-endian).
__attribute__((target("avx2"))) inline __m256i int32_byte_swap() {
  return _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12, 3, 2, 1, 0, 7, 6, 5,
                          4, 11, 10, 9, 8, 15, 14, 13, 12);
}

// 32 int8 values, 8 per vector in int32 lanes (the quantizer's output), as 32 bytes in the same
// order: the saturating packs are exact on int8 values; they interleave the 128-bit halves, which
// the permute puts back in order.
__attribute__((target("avx2"))) inline __m256i int8_lanes_to_bytes(__m256i v0, __m256i v1,
                                                                   __m256i v2, __m256i v3) {
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(v0, v1), _mm256_packs_epi32(v2, v3));
  return _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

}  // namespace npukit::device::detail

#endif
