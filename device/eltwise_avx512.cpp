// AVX-512 VNNI part of the EltWise block's fused add / sub (device/eltwise.h LimbPlan): the
// limb arithmetic of eltwise_avx2.cpp's limb_blocks on 64 values a step, each limb's
// multiply-add one vpdpwssd (the int16 pair products summed into the addend, as
// _mm256_madd_epi16 then _mm256_add_epi32 sum them: the same integers modulo 2^32). On
// resnet50's residual adds that is under half the instructions per value of the AVX2 step.
//
// Compiled with its own target attribute; called only at the AVX-512 VNNI level (common/cpu.h).
#include "device/eltwise.h"

#include "common/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
// GCC 12 takes the plain AVX-512 intrinsics' undefined pass-through operand for an uninitialized
// read (a false positive: every lane is written).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>

namespace npukit::device::detail {

#if defined(__x86_64__) || defined(__i386__)

#define NPUKIT_AVX512VNNI __attribute__((target("avx2,avx512f,avx512bw,avx512vl,avx512vnni")))

namespace {
// 32 int8 values widened to int16.
NPUKIT_AVX512VNNI inline __m512i widen(const std::int8_t* p) {
  return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// 64 values a step: the operands' bytes widened to int16 (a, b) pairs, 16 per vector, 128-bit
// lane L of the four vectors holding values 8L..8L+3, 8L+4..8L+7, 32+8L..32+8L+3 and
// 32+8L+4..32+8L+7; the two packs give lane L values 8L..8L+7 then 32+8L..32+8L+7, which the
// 64-bit permute puts in order.
template <int kAct>
NPUKIT_AVX512VNNI std::uint64_t limb_steps(const LimbPlan& plan, const std::int8_t* a,
                                           const std::int8_t* b, std::uint8_t* out, std::uint64_t n,
                                           std::int32_t clip) {
  const __m512i c0 = _mm512_set1_epi32(plan.low_pair());
  const __m512i c1 = _mm512_set1_epi32(plan.high_pair());
  const __m512i h0 = _mm512_set1_epi32(plan.h0), h_high = _mm512_set1_epi32(plan.h_high);
  const __m128i count = _mm_cvtsi32_si128(plan.count);
  const __m512i zero = _mm512_setzero_si512();
  const __m512i high = _mm512_set1_epi8(clip_byte(clip));
  const __m512i order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
  const auto quantize = [&](__m512i pairs) NPUKIT_AVX512VNNI {
    const __m512i carry = _mm512_srai_epi32(_mm512_dpwssd_epi32(h0, pairs, c0), 16);
    return _mm512_sra_epi32(_mm512_dpwssd_epi32(_mm512_add_epi32(h_high, carry), pairs, c1), count);
  };
  std::uint64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i a_lo = widen(a + i), a_hi = widen(a + i + 32);
    const __m512i b_lo = widen(b + i), b_hi = widen(b + i + 32);
    const __m512i r0 = quantize(_mm512_unpacklo_epi16(a_lo, b_lo));
    const __m512i r1 = quantize(_mm512_unpackhi_epi16(a_lo, b_lo));
    const __m512i r2 = quantize(_mm512_unpacklo_epi16(a_hi, b_hi));
    const __m512i r3 = quantize(_mm512_unpackhi_epi16(a_hi, b_hi));
    __m512i bytes = _mm512_permutexvar_epi64(
        order, _mm512_packs_epi16(_mm512_packs_epi32(r0, r1), _mm512_packs_epi32(r2, r3)));
    if constexpr (kAct == 1) bytes = _mm512_min_epi8(bytes, high);
    if constexpr (kAct >= 0) bytes = _mm512_max_epi8(bytes, zero);
    _mm512_storeu_si512(out + i, bytes);
  }
  return i;
}
}  // namespace

NPUKIT_AVX512VNNI std::uint64_t limb_bytes_avx512(const LimbPlan& plan, const std::int8_t* a,
                                                  const std::int8_t* b, std::uint8_t* out,
                                                  std::uint64_t n, int act, std::int32_t clip) {
  if (!plan.usable) fail("eltwise: the AVX-512 limb steps without a usable limb plan");
  return act == 0   ? limb_steps<0>(plan, a, b, out, n, clip)
         : act == 1 ? limb_steps<1>(plan, a, b, out, n, clip)
                    : limb_steps<-1>(plan, a, b, out, n, clip);
}

#undef NPUKIT_AVX512VNNI

#else

std::uint64_t limb_bytes_avx512(const LimbPlan&, const std::int8_t*, const std::int8_t*,
                                std::uint8_t*, std::uint64_t, int, std::int32_t) {
  fail("eltwise: AVX-512 on a CPU that is not x86");
}

#endif

}  // namespace npukit::device::detail
