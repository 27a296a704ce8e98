// AVX2 pieces of the channels-in-lanes GEMM form (conv_kernels.h GemmOperands) shared by its tiles
// (conv_kernels_avx2.cpp) and the Winograd path's (conv_winograd_avx2.cpp): a register tile's
// sums (P y rows of kGemmK lanes, V vectors of 8 output channels each) and the 8x8 transpose
// that turns channels in the lanes into pixels in the lanes. Only for files that check the CPU
// before calling (the functions carry the AVX2 target attribute).
#pragma once

#include "device/conv_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace npukit::device::conv_kernels::detail {

// acc[i][v] = lanes 8 v .. 8 v + 7 of y row i, or 0 when not accumulating.
template <int P, int V>
__attribute__((target("avx2"))) inline void load_sums(__m256i (&acc)[P][V], const std::int32_t* y,
                                                      bool accumulate) {
#pragma GCC unroll 8
  for (int i = 0; i < P; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v)
      acc[i][v] = accumulate ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                   y + static_cast<std::uint64_t>(i) * kGemmK + 8 * v))
                             : _mm256_setzero_si256();
}

template <int P, int V>
__attribute__((target("avx2"))) inline void store_sums(const __m256i (&acc)[P][V],
                                                       std::int32_t* y) {
#pragma GCC unroll 8
  for (int i = 0; i < P; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v)
      _mm256_storeu_si256(
          reinterpret_cast<__m256i*>(y + static_cast<std::uint64_t>(i) * kGemmK + 8 * v),
          acc[i][v]);
}

// r[i][j] -> r[j][i] for 8 vectors of 8 int32.
__attribute__((target("avx2"))) inline void transpose8(__m256i r[8]) {
  const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
  const __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
  const __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
  const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
  const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
  r[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
  r[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
  r[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
  r[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
  r[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
  r[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
  r[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
  r[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

}  // namespace npukit::device::conv_kernels::detail

#endif
