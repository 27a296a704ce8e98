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
  const std::uint32_t* w_tile = p.w.data() + kb * p.pairs * taps * kTileK;
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

#else

void tiles_avx2(const Packed&, std::uint64_t, std::uint64_t, std::uint64_t, bool, std::int32_t*) {
  fail("dense_conv: AVX2 tiles on a CPU that is not x86");
}

#endif

}  // namespace npukit::device::conv_kernels::detail
