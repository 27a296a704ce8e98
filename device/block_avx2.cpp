// AVX2 paths of quantize_span and bias_span (device/block.h): 8 values at a time, the same
// integers as the scalar quantize(). The product acc * scale (|.| <= 2^46) is formed in 64-bit
// lanes with _mm256_mul_epi32 (even and odd lanes separately). The quantizer's two rounding
// shifts (QuantShift s, then EltWise's fp_cast f) are one: for integers
//   floor((floor((p + h1) / 2^s) + h2) / 2^f) = floor((p + h1 + h2 * 2^s) / 2^(s+f)),
// h1 = s ? 2^(s-1) : 0, h2 = f ? 2^(f-1) : 0. AVX2 has no 64-bit arithmetic shift, so the shift
// by T = s + f adds 2^62 first, shifts logically and subtracts 2^(62 - T): exact while the sum
// stays in [0, 2^63), which holds for T <= 62 (p + 2^62 >= 2^62 - 2^46, and h1 + h2 * 2^s <=
// 2^(T-1) + 2^(T-2) <= 2^61 + 2^60 when f > 0, h1 <= 2^61 when f = 0). The clamp to int8 happens
// in 64 bits, then the lanes are put back together and ReLU / Clip applied in 32 bits.
#include "device/block.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npukit::device::detail {

#if defined(__x86_64__) || defined(__i386__)

namespace {
// Rounding shift and int8 clamp of 4 64-bit products.
__attribute__((target("avx2"))) inline __m256i lanes(__m256i p, __m256i add, __m256i sub,
                                                     __m128i count, __m256i lo, __m256i hi) {
  p = _mm256_sub_epi64(_mm256_srl_epi64(_mm256_add_epi64(p, add), count), sub);
  p = _mm256_blendv_epi8(p, lo, _mm256_cmpgt_epi64(lo, p));
  return _mm256_blendv_epi8(p, hi, _mm256_cmpgt_epi64(p, hi));
}

// Loop over 8-value blocks with the activation fixed at compile time (no branch in the body).
template <int kAct>
__attribute__((target("avx2"))) inline std::uint64_t quantize_blocks(
    const std::int32_t* acc, std::int32_t* out, std::uint64_t n, std::int32_t bias,
    std::int32_t scale, int shift, int fp_cast_shift, std::int32_t clip) {
  const int total = shift + fp_cast_shift;
  const __m256i vbias = _mm256_set1_epi32(bias);
  const __m256i vscale = _mm256_set1_epi32(scale);
  const std::int64_t h1 = shift > 0 ? std::int64_t{1} << (shift - 1) : 0;
  const std::int64_t h2 = fp_cast_shift > 0 ? std::int64_t{1} << (fp_cast_shift - 1) : 0;
  const __m256i add = _mm256_set1_epi64x(h1 + (h2 << shift) + (std::int64_t{1} << 62));
  const __m256i sub = _mm256_set1_epi64x(std::int64_t{1} << (62 - total));
  const __m128i count = _mm_cvtsi32_si128(total);
  const __m256i lo = _mm256_set1_epi64x(-128), hi = _mm256_set1_epi64x(127);
  const __m256i zero = _mm256_setzero_si256(), vclip = _mm256_set1_epi32(clip);
  std::uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i v =
        _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i)), vbias);
    const __m256i even = lanes(_mm256_mul_epi32(v, vscale), add, sub, count, lo, hi);
    const __m256i odd =
        lanes(_mm256_mul_epi32(_mm256_srli_epi64(v, 32), vscale), add, sub, count, lo, hi);
    __m256i r = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
    if constexpr (kAct == 0) r = _mm256_max_epi32(r, zero);
    if constexpr (kAct == 1) r = _mm256_min_epi32(_mm256_max_epi32(r, zero), vclip);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), r);
  }
  return i;
}
}  // namespace

__attribute__((target("avx2"))) void quantize_span_avx2(const std::int32_t* acc, std::int32_t* out,
                                                        std::uint64_t n, std::int32_t bias,
                                                        std::int32_t scale, int shift,
                                                        int fp_cast_shift, int act,
                                                        std::int32_t clip) {
  std::uint64_t i = 0;
  if (act == 0)
    i = quantize_blocks<0>(acc, out, n, bias, scale, shift, fp_cast_shift, clip);
  else if (act == 1)
    i = quantize_blocks<1>(acc, out, n, bias, scale, shift, fp_cast_shift, clip);
  else
    i = quantize_blocks<-1>(acc, out, n, bias, scale, shift, fp_cast_shift, clip);
  if (i < n)
    quantize_span(acc + i, out + i, n - i, bias, scale, shift, fp_cast_shift, act, clip,
                  Isa::kScalar);
}

__attribute__((target("avx2"))) void bias_span_avx2(const std::int32_t* acc, std::int32_t* out,
                                                    std::uint64_t n, std::int32_t bias) {
  const __m256i vbias = _mm256_set1_epi32(bias);
  std::uint64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(out + i),
        _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i)), vbias));
  if (i < n) bias_span(acc + i, out + i, n - i, bias, Isa::kScalar);
}

#else

void quantize_span_avx2(const std::int32_t*, std::int32_t*, std::uint64_t, std::int32_t,
                        std::int32_t, int, int, int, std::int32_t) {
  fail("quantize_span: AVX2 on a CPU that is not x86");
}

void bias_span_avx2(const std::int32_t*, std::int32_t*, std::uint64_t, std::int32_t) {
  fail("bias_span: AVX2 on a CPU that is not x86");
}

#endif

}  // namespace npukit::device::detail
