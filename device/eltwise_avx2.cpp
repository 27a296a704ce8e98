// AVX2 path of eltwise_span (device/eltwise.h) for add, sub and mult: 8 lanes at a time, the
// same integers as eltwise_lane(). The operands minus their zero points (|d| <= 255) times the
// signed 18-bit scales fit in 26 bits, so L and R are exact 32-bit products (_mm256_mullo_epi32)
// and L +- R fits in 32 bits. For mult, L * R (|.| < 2^50) is formed in 64-bit lanes with
// _mm256_mul_epi32 (even and odd lanes separately); the output bus keeps the low 32 bits of
// (L * R + 2^9) >> 10, which are bits 10..41 of the sum, the same for a logical shift (AVX2 has
// no 64-bit arithmetic one). Zero-point wraps (d outside int8) are counted from the same d.
#include "device/eltwise.h"
#include "device/quantizer_avx2.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npukit::device::detail {

#if defined(__x86_64__) || defined(__i386__)

namespace {

// The lanes of 8 operand pairs: the operands minus their zero points times their scales, then
// added, subtracted or (mult) multiplied, with the lanes whose operands left int8 counted into
// `wrapped`. kZeroPoints false: both zero points are 0, so no operand can leave int8 and the
// subtraction and the count are left out.
struct Lanes {
  __m256i a_zero, b_zero, a_scale, b_scale, hi, lo, round;
  __attribute__((target("avx2"))) explicit Lanes(const EltwiseLaneParams& p)
      : a_zero(_mm256_set1_epi32(p.a_zero)),
        b_zero(_mm256_set1_epi32(p.b_zero)),
        a_scale(_mm256_set1_epi32(p.a_scale)),
        b_scale(_mm256_set1_epi32(p.b_scale)),
        hi(_mm256_set1_epi32(127)),
        lo(_mm256_set1_epi32(-128)),
        round(_mm256_set1_epi64x(std::int64_t{1} << 9)) {}
  template <isa::EltType kType, bool kZeroPoints>
  __attribute__((target("avx2"))) __m256i operator()(const std::int8_t* a, const std::int8_t* b,
                                                     std::uint64_t& wrapped) const {
    __m256i da = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a)));
    __m256i db = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b)));
    if constexpr (kZeroPoints) {
      da = _mm256_sub_epi32(da, a_zero), db = _mm256_sub_epi32(db, b_zero);
      const __m256i outside =
          _mm256_or_si256(_mm256_or_si256(_mm256_cmpgt_epi32(da, hi), _mm256_cmpgt_epi32(lo, da)),
                          _mm256_or_si256(_mm256_cmpgt_epi32(db, hi), _mm256_cmpgt_epi32(lo, db)));
      wrapped += static_cast<std::uint64_t>(__builtin_popcount(
          static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(outside)))));
    }
    const __m256i left = _mm256_mullo_epi32(da, a_scale);
    const __m256i right = _mm256_mullo_epi32(db, b_scale);
    if constexpr (kType == isa::EltType::kAdd) {
      return _mm256_add_epi32(left, right);
    } else if constexpr (kType == isa::EltType::kSub) {
      return _mm256_sub_epi32(left, right);
    } else {
      const __m256i even =
          _mm256_srli_epi64(_mm256_add_epi64(_mm256_mul_epi32(left, right), round), 10);
      const __m256i odd = _mm256_srli_epi64(
          _mm256_add_epi64(
              _mm256_mul_epi32(_mm256_srli_epi64(left, 32), _mm256_srli_epi64(right, 32)), round),
          10);
      return _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
    }
  }
};

template <isa::EltType kType>
__attribute__((target("avx2"))) std::uint64_t span_blocks(const EltwiseLaneParams& p,
                                                          const std::int8_t* a,
                                                          const std::int8_t* b, std::int32_t* out,
                                                          std::uint64_t n, std::uint64_t& wrapped) {
  const Lanes lanes(p);
  std::uint64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        lanes.template operator()<kType, true>(a + i, b + i, wrapped));
  return i;
}

}  // namespace

std::uint64_t eltwise_span_avx2(const EltwiseLaneParams& p, const std::int8_t* a,
                                const std::int8_t* b, std::int32_t* out, std::uint64_t n) {
  std::uint64_t wrapped = 0, i = 0;
  switch (p.type) {
    case isa::EltType::kAdd:
      i = span_blocks<isa::EltType::kAdd>(p, a, b, out, n, wrapped);
      break;
    case isa::EltType::kSub:
      i = span_blocks<isa::EltType::kSub>(p, a, b, out, n, wrapped);
      break;
    case isa::EltType::kMult:
      i = span_blocks<isa::EltType::kMult>(p, a, b, out, n, wrapped);
      break;
    default:  // sigmoid / tanh: the engine, value by value
      return eltwise_span(p, a, b, out, n, Isa::kScalar);
  }
  if (i < n) wrapped += eltwise_span(p, a + i, b + i, out + i, n - i, Isa::kScalar);
  return wrapped;
}

namespace {
// 32 values a step: 4 x 8 lanes of the sum (Lanes), quantized, packed to bytes as
// int8_values_to_bytes_avx2 packs them.
template <isa::EltType kType, int kAct, bool kZeroPoints>
__attribute__((target("avx2"))) std::uint64_t quantized_blocks(
    const EltwiseLaneParams& p, const std::int8_t* a, const std::int8_t* b, std::uint8_t* out,
    std::uint64_t n, const Quantizer& quant, std::uint64_t& wrapped) {
  const Lanes lanes(p);
  std::uint64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i q[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k)
      q[k] = quant.template operator()<kAct>(
          lanes.template operator()<kType, kZeroPoints>(a + i + 8 * k, b + i + 8 * k, wrapped));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        int8_lanes_to_bytes(q[0], q[1], q[2], q[3]));
  }
  return i;
}

template <isa::EltType kType, int kAct>
__attribute__((target("avx2"))) std::uint64_t quantized_blocks(
    const EltwiseLaneParams& p, const std::int8_t* a, const std::int8_t* b, std::uint8_t* out,
    std::uint64_t n, const Quantizer& quant, std::uint64_t& wrapped) {
  return p.a_zero == 0 && p.b_zero == 0
             ? quantized_blocks<kType, kAct, false>(p, a, b, out, n, quant, wrapped)
             : quantized_blocks<kType, kAct, true>(p, a, b, out, n, quant, wrapped);
}

}  // namespace

LimbPlan limb_plan(const EltwiseLaneParams& p, std::int32_t scale, int shift, int fp_cast_shift) {
  LimbPlan plan;
  const int total = shift + fp_cast_shift;
  if (p.a_zero != 0 || p.b_zero != 0 || total < 16 || total > 62 ||
      (p.type != isa::EltType::kAdd && p.type != isa::EltType::kSub))
    return plan;
  const std::int64_t b_scale = p.type == isa::EltType::kSub ? -std::int64_t{p.b_scale} : p.b_scale;
  bool fits = true;
  auto split = [&](std::int64_t c, std::int16_t& low, std::int16_t& high) {
    const std::int64_t c0 = ((c + 0x8000) & 0xFFFF) - 0x8000;
    const std::int64_t c1 = (c - c0) >> 16;
    fits = fits && c1 >= -32768 && c1 <= 32767;
    low = static_cast<std::int16_t>(c0);
    high = static_cast<std::int16_t>(std::clamp<std::int64_t>(c1, -32768, 32767));
  };
  split(std::int64_t{p.a_scale} * scale, plan.c0_a, plan.c1_a);
  split(b_scale * scale, plan.c0_b, plan.c1_b);
  const std::int64_t h = rounding_addend(shift, fp_cast_shift);
  plan.h0 = static_cast<std::int32_t>(h & 0xFFFF);
  plan.h_high = static_cast<std::int32_t>(h >> 16);  // < 2^45 / 2^16: see the bound above
  plan.count = total - 16;
  plan.usable = fits && (h >> 16) < (std::int64_t{1} << 26);
  return plan;
}

namespace {

// 32 values a step (LimbPlan): the operands' bytes widened to int16 (a, b) pairs, 8 per vector
// in the order [0..3 | 8..11], [4..7 | 12..15], [16..19 | 24..27], [20..23 | 28..31], which the
// two packs put back in order but for the 64-bit quarters' swap the permute undoes.
template <int kAct>
__attribute__((target("avx2"))) std::uint64_t limb_blocks(const LimbPlan& plan,
                                                          const std::int8_t* a,
                                                          const std::int8_t* b, std::uint8_t* out,
                                                          std::uint64_t n, std::int32_t clip) {
  const __m256i c0 = _mm256_set1_epi32(plan.low_pair());
  const __m256i c1 = _mm256_set1_epi32(plan.high_pair());
  const __m256i h0 = _mm256_set1_epi32(plan.h0), h_high = _mm256_set1_epi32(plan.h_high);
  const __m128i count = _mm_cvtsi32_si128(plan.count);
  const __m256i zero = _mm256_setzero_si256();
  const __m256i high = _mm256_set1_epi8(clip_byte(clip));
  const auto quantize = [&](__m256i pairs) __attribute__((target("avx2"))) {
    const __m256i carry = _mm256_srai_epi32(_mm256_add_epi32(_mm256_madd_epi16(pairs, c0), h0), 16);
    const __m256i sum =
        _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(pairs, c1), h_high), carry);
    return _mm256_sra_epi32(sum, count);
  };
  std::uint64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i va = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    const __m256i a_lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(va));
    const __m256i a_hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(va, 1));
    const __m256i b_lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(vb));
    const __m256i b_hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(vb, 1));
    const __m256i r0 = quantize(_mm256_unpacklo_epi16(a_lo, b_lo));
    const __m256i r1 = quantize(_mm256_unpackhi_epi16(a_lo, b_lo));
    const __m256i r2 = quantize(_mm256_unpacklo_epi16(a_hi, b_hi));
    const __m256i r3 = quantize(_mm256_unpackhi_epi16(a_hi, b_hi));
    __m256i bytes = _mm256_permute4x64_epi64(
        _mm256_packs_epi16(_mm256_packs_epi32(r0, r1), _mm256_packs_epi32(r2, r3)), 0xD8);
    if constexpr (kAct == 1) bytes = _mm256_min_epi8(bytes, high);
    if constexpr (kAct >= 0) bytes = _mm256_max_epi8(bytes, zero);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), bytes);
  }
  return i;
}
}  // namespace

__attribute__((target("avx2"))) std::uint64_t eltwise_quantized_bytes_avx2(
    const EltwiseLaneParams& p, const std::int8_t* a, const std::int8_t* b, std::uint8_t* out,
    std::uint64_t n, std::int32_t scale, int shift, int fp_cast_shift, int act, std::int32_t clip,
    bool avx512) {
  std::uint64_t wrapped = 0, i = 0;
  const LimbPlan plan = limb_plan(p, scale, shift, fp_cast_shift);
  if (plan.usable) {
    if (avx512) i = limb_bytes_avx512(plan, a, b, out, n, act, clip);
    i += act == 0   ? limb_blocks<0>(plan, a + i, b + i, out + i, n - i, clip)
         : act == 1 ? limb_blocks<1>(plan, a + i, b + i, out + i, n - i, clip)
                    : limb_blocks<-1>(plan, a + i, b + i, out + i, n - i, clip);
  } else if (p.type == isa::EltType::kAdd || p.type == isa::EltType::kSub) {
    const Quantizer quant(scale, shift, fp_cast_shift, clip);
    const bool add = p.type == isa::EltType::kAdd;
    using isa::EltType;
    if (act == 0)
      i = add ? quantized_blocks<EltType::kAdd, 0>(p, a, b, out, n, quant, wrapped)
              : quantized_blocks<EltType::kSub, 0>(p, a, b, out, n, quant, wrapped);
    else if (act == 1)
      i = add ? quantized_blocks<EltType::kAdd, 1>(p, a, b, out, n, quant, wrapped)
              : quantized_blocks<EltType::kSub, 1>(p, a, b, out, n, quant, wrapped);
    else
      i = add ? quantized_blocks<EltType::kAdd, -1>(p, a, b, out, n, quant, wrapped)
              : quantized_blocks<EltType::kSub, -1>(p, a, b, out, n, quant, wrapped);
  }
  // The rest (other types, the last values) in the three passes, through small buffers.
  constexpr std::uint64_t kChunk = 512;
  alignas(32) std::int32_t lanes[kChunk], values[kChunk];
  for (; i < n; i += kChunk) {
    const std::uint64_t m = std::min(kChunk, n - i);
    wrapped += eltwise_span_avx2(p, a + i, b + i, lanes, m);
    quantize_span_avx2(lanes, values, m, 0, scale, shift, fp_cast_shift, act, clip);
    int8_values_to_bytes_avx2(values, out + i, m);
  }
  return wrapped;
}

__attribute__((target("avx2"))) void int8_values_to_bytes_avx2(const std::int32_t* values,
                                                               std::uint8_t* out, std::uint64_t n) {
  std::uint64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const auto* v = reinterpret_cast<const __m256i*>(values + i);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        int8_lanes_to_bytes(_mm256_loadu_si256(v), _mm256_loadu_si256(v + 1),
                                            _mm256_loadu_si256(v + 2), _mm256_loadu_si256(v + 3)));
  }
  for (; i < n; ++i) out[i] = static_cast<std::uint8_t>(values[i]);
}

#else

std::uint64_t eltwise_quantized_bytes_avx2(const EltwiseLaneParams&, const std::int8_t*,
                                           const std::int8_t*, std::uint8_t*, std::uint64_t,
                                           std::int32_t, int, int, int, std::int32_t, bool) {
  fail("eltwise: AVX2 on a CPU that is not x86");
}

void int8_values_to_bytes_avx2(const std::int32_t*, std::uint8_t*, std::uint64_t) {
  fail("int8_values_to_bytes: AVX2 on a CPU that is not x86");
}

std::uint64_t eltwise_span_avx2(const EltwiseLaneParams&, const std::int8_t*, const std::int8_t*,
                                std::int32_t*, std::uint64_t) {
  fail("eltwise_span: AVX2 on a CPU that is not x86");
}

#endif

}  // namespace npukit::device::detail
