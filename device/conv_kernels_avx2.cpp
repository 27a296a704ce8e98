// AVX2 tiles of device/conv_kernels.h: kTileK = 4 output channels x kTileQ = 24 virtual outputs
// (3 vectors of 8) held in 12 int32 registers for the whole sum over channel pairs and taps, so
// each accumulator is loaded and stored once per phase instead of once per input channel.
//
// Per (pair, tap): 3 unaligned loads of 8 input words (each 2 int16 channels of one pixel), 4
// broadcast weight words (each 2 int16 weights of one output channel) and 12 _mm256_madd_epi16,
// which multiply the int16 halves and add each pixel's 2 products into an int32 lane: |lane| <=
// 2 * 2^14, exact; the 12 adds then stay exact by the bound in conv_kernels.cpp. Compiled with a
// target attribute, so only this function needs AVX2; dense_conv checks the CPU first.
#include "device/conv_kernels.h"

#include "common/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npukit::device::conv_kernels::detail {

static_assert(kTileK == 4 && kTileQ == 24, "the AVX2 tile is written for 4 x 24");

#if defined(__x86_64__) || defined(__i386__)

__attribute__((target("avx2"))) void tiles_avx2(const Packed& p, std::uint64_t kb,
                                                std::uint64_t pair_begin, std::uint64_t pair_end,
                                                bool accumulate, std::int32_t* y) {
  const std::uint64_t taps = p.taps, qp = p.q_padded;
  const std::int64_t* offsets = p.tap_offset.data();
  const std::uint32_t* w_tile = p.w_data + kb * p.pairs * taps * kTileK;
  const std::uint32_t* x_base = p.x.data();
  for (std::uint64_t q0 = 0; q0 < qp; q0 += kTileQ) {
    __m256i acc[kTileK][3];
    for (std::uint64_t kk = 0; kk < kTileK; ++kk)
      for (int v = 0; v < 3; ++v)
        acc[kk][v] = accumulate ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                      y + kk * qp + q0 + 8 * static_cast<std::uint64_t>(v)))
                                : _mm256_setzero_si256();
    for (std::uint64_t pr = pair_begin; pr < pair_end; ++pr) {
      const std::uint32_t* xp = x_base + pr * p.plane_words + q0;
      const std::uint32_t* wp = w_tile + pr * taps * kTileK;
      for (std::uint64_t t = 0; t < taps; ++t, wp += kTileK) {
        const std::uint32_t* xt = xp + offsets[t];
        const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xt));
        const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xt + 8));
        const __m256i x2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xt + 16));
        for (std::uint64_t kk = 0; kk < kTileK; ++kk) {
          const __m256i w = _mm256_set1_epi32(static_cast<int>(wp[kk]));
          acc[kk][0] = _mm256_add_epi32(acc[kk][0], _mm256_madd_epi16(x0, w));
          acc[kk][1] = _mm256_add_epi32(acc[kk][1], _mm256_madd_epi16(x1, w));
          acc[kk][2] = _mm256_add_epi32(acc[kk][2], _mm256_madd_epi16(x2, w));
        }
      }
    }
    for (std::uint64_t kk = 0; kk < kTileK; ++kk)
      for (int v = 0; v < 3; ++v)
        _mm256_storeu_si256(
            reinterpret_cast<__m256i*>(y + kk * qp + q0 + 8 * static_cast<std::uint64_t>(v)),
            acc[kk][v]);
  }
}

// The u8 path (operands of pack_quads with bias 0, every input 0..127): per (quad, tap) a word
// is 4 channels of one pixel as u8; _mm256_maddubs_epi16 multiplies them by the broadcast 4 s8
// weights and adds products pairwise into int16 (|pair| <= 2 * 127 * 128 = 32512: no saturation),
// _mm256_madd_epi16 by ones adds the two pairs into the pixel's int32 lane. The 8 x 48 tile runs
// as sub-tiles of 4 output channels x 16 outputs: 8 accumulators, 2 inputs, weight, ones.
__attribute__((target("avx2"))) void quad_tiles_avx2(const PackedQuads& p, std::uint64_t kb,
                                                     std::uint64_t quad_begin,
                                                     std::uint64_t quad_end, bool accumulate,
                                                     std::int32_t* y) {
  const std::uint64_t taps = p.taps, qp = p.q_padded;
  const std::int64_t* offsets = p.tap_offset.data();
  const std::uint32_t* w_tile = p.w_data + kb * p.quads * taps * kTileK4;
  const __m256i ones = _mm256_set1_epi16(1);
  for (std::uint64_t q0 = 0; q0 < qp; q0 += 16)
    for (std::uint64_t k0 = 0; k0 < kTileK4; k0 += 4) {
      __m256i acc[4][2];
      for (std::uint64_t kk = 0; kk < 4; ++kk)
        for (std::uint64_t v = 0; v < 2; ++v)
          acc[kk][v] = accumulate ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                        y + (k0 + kk) * qp + q0 + 8 * v))
                                  : _mm256_setzero_si256();
      for (std::uint64_t qd = quad_begin; qd < quad_end; ++qd) {
        const std::uint32_t* xp = p.x.data() + qd * p.plane_words + q0;
        const std::uint32_t* wp = w_tile + qd * taps * kTileK4 + k0;
        for (std::uint64_t t = 0; t < taps; ++t, wp += kTileK4) {
          const std::uint32_t* xt = xp + offsets[t];
          const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xt));
          const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xt + 8));
          for (std::uint64_t kk = 0; kk < 4; ++kk) {
            const __m256i w = _mm256_set1_epi32(static_cast<int>(wp[kk]));
            acc[kk][0] =
                _mm256_add_epi32(acc[kk][0], _mm256_madd_epi16(_mm256_maddubs_epi16(x0, w), ones));
            acc[kk][1] =
                _mm256_add_epi32(acc[kk][1], _mm256_madd_epi16(_mm256_maddubs_epi16(x1, w), ones));
          }
        }
      }
      for (std::uint64_t kk = 0; kk < 4; ++kk)
        for (std::uint64_t v = 0; v < 2; ++v)
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + (k0 + kk) * qp + q0 + 8 * v),
                              acc[kk][v]);
    }
}

// One connection (depthwise): per output row, 16 outputs at a time, the taps in pairs (a, b):
// the int16 inputs of tap a and tap b are interleaved (unpacklo/hi) so one _mm256_madd_epi16
// with the broadcast weight pair (w_a, w_b) adds both products per output into an int32 lane
// (|lane| <= 2^15, exact; an odd last tap pairs with weight 0). unpacklo holds outputs 0-3 and
// 8-11, unpackhi 4-7 and 12-15; the permutes put them back in order before the add to acc.
__attribute__((target("avx2"))) void connection_avx2(const PlaneSet& set, std::uint64_t plane,
                                                     const std::int8_t* taps, std::int32_t* acc) {
  const std::int16_t* base = set.x.data() + plane * set.plane_words;
  const std::uint64_t n_taps = set.kh * set.kw;
  constexpr std::uint64_t kMaxPairs = 32;  // up to 64 taps (the array has at most 16 rows)
  std::int64_t off_a[kMaxPairs], off_b[kMaxPairs];
  __m256i wpair[kMaxPairs];
  std::uint64_t pairs = 0;
  std::int64_t pending = -1;
  for (std::uint64_t t = 0; t <= n_taps; ++t) {
    const bool last = t == n_taps;
    if (!last && taps[t] == 0) continue;
    if (pending < 0 && !last) {
      pending = static_cast<std::int64_t>(t);
      continue;
    }
    if (pending < 0) break;
    if (pairs == kMaxPairs) fail("connection_conv: more than {} taps", 2 * kMaxPairs);
    const std::uint64_t a = static_cast<std::uint64_t>(pending);
    const std::int16_t wb = last ? std::int16_t{0} : std::int16_t{taps[t]};
    off_a[pairs] = set.tap_offset[a];
    off_b[pairs] = last ? set.tap_offset[a] : set.tap_offset[t];
    wpair[pairs] = _mm256_set1_epi32(static_cast<int>(
        static_cast<std::uint32_t>(static_cast<std::uint16_t>(std::int16_t{taps[a]})) |
        (static_cast<std::uint32_t>(static_cast<std::uint16_t>(wb)) << 16)));
    ++pairs;
    pending = -1;
  }
  if (pairs == 0) return;
  const std::uint64_t ow = set.ow;
  for (std::uint64_t r = 0; r < set.oh; ++r) {
    const std::int16_t* row = base + r * set.wq;
    std::int32_t* a = acc + r * ow;
    for (std::uint64_t i = 0; i < ow; i += 16) {
      __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
      for (std::uint64_t k = 0; k < pairs; ++k) {
        const __m256i xa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + off_a[k] + i));
        const __m256i xb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + off_b[k] + i));
        lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(xa, xb), wpair[k]));
        hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(xa, xb), wpair[k]));
      }
      const __m256i first = _mm256_permute2x128_si256(lo, hi, 0x20);
      const __m256i second = _mm256_permute2x128_si256(lo, hi, 0x31);
      if (i + 16 <= ow) {
        __m256i* out = reinterpret_cast<__m256i*>(a + i);
        _mm256_storeu_si256(out, _mm256_add_epi32(_mm256_loadu_si256(out), first));
        _mm256_storeu_si256(out + 1, _mm256_add_epi32(_mm256_loadu_si256(out + 1), second));
      } else {
        alignas(32) std::int32_t tmp[16];
        _mm256_store_si256(reinterpret_cast<__m256i*>(tmp), first);
        _mm256_store_si256(reinterpret_cast<__m256i*>(tmp + 8), second);
        for (std::uint64_t j = 0; i + j < ow; ++j) a[i + j] += tmp[j];
      }
    }
  }
}

#else

void connection_avx2(const PlaneSet&, std::uint64_t, const std::int8_t*, std::int32_t*) {
  fail("connection_conv: AVX2 on a CPU that is not x86");
}

void tiles_avx2(const Packed&, std::uint64_t, std::uint64_t, std::uint64_t, bool, std::int32_t*) {
  fail("dense_conv: AVX2 tiles on a CPU that is not x86");
}

void quad_tiles_avx2(const PackedQuads&, std::uint64_t, std::uint64_t, std::uint64_t, bool,
                     std::int32_t*) {
  fail("dense_conv: AVX2 tiles on a CPU that is not x86");
}

#endif

}  // namespace npukit::device::conv_kernels::detail
