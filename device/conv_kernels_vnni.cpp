// VNNI tiles of device/conv_kernels.h (the quad operands of pack_quads): vpdpbusd multiplies 4
// u8 inputs (x + 128) by 4 s8 weights and adds the 4 products to an int32 lane with a 32-bit
// wrap; dense_conv_quads subtracts 128 * sum(w) afterwards, so the result is the exact signed
// sum (it fits int32 by the bound in conv_kernels.cpp, so the wrapping arithmetic lands on it).
// quad_tiles_scalar in conv_kernels.cpp is the same arithmetic in plain C++.
//
// Each function is compiled with its own target attribute; dense_conv only calls one after the
// resolver (common/cpu.h) has seen the CPU support it.
#include "device/conv_kernels.h"

#include "common/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npukit::device::conv_kernels::detail {

static_assert(kTileK4 == 8 && kTileQ4 == 48, "the VNNI tiles are written for 8 x 48");

#if defined(__x86_64__) || defined(__i386__)

// 8 output channels x 48 virtual outputs (3 vectors of 16 lanes): 24 zmm accumulators.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void quad_tiles_avx512vnni(
    const PackedQuads& p, std::uint64_t kb, std::uint64_t quad_begin, std::uint64_t quad_end,
    bool accumulate, std::int32_t* y) {
  const std::uint64_t taps = p.taps, qp = p.q_padded;
  const std::int64_t* offsets = p.tap_offset.data();
  const std::uint32_t* w_tile = p.w_data + kb * p.quads * taps * kTileK4;
  for (std::uint64_t q0 = 0; q0 < qp; q0 += kTileQ4) {
    __m512i acc[kTileK4][3];
    for (std::uint64_t kk = 0; kk < kTileK4; ++kk)
      for (std::uint64_t v = 0; v < 3; ++v)
        acc[kk][v] =
            accumulate ? _mm512_loadu_si512(y + kk * qp + q0 + 16 * v) : _mm512_setzero_si512();
    for (std::uint64_t qd = quad_begin; qd < quad_end; ++qd) {
      const std::uint32_t* xp = p.x.data() + qd * p.plane_words + q0;
      const std::uint32_t* wp = w_tile + qd * taps * kTileK4;
      for (std::uint64_t t = 0; t < taps; ++t, wp += kTileK4) {
        const std::uint32_t* xt = xp + offsets[t];
        const __m512i x0 = _mm512_loadu_si512(xt);
        const __m512i x1 = _mm512_loadu_si512(xt + 16);
        const __m512i x2 = _mm512_loadu_si512(xt + 32);
        for (std::uint64_t kk = 0; kk < kTileK4; ++kk) {
          const __m512i w = _mm512_set1_epi32(static_cast<int>(wp[kk]));
          acc[kk][0] = _mm512_dpbusd_epi32(acc[kk][0], x0, w);
          acc[kk][1] = _mm512_dpbusd_epi32(acc[kk][1], x1, w);
          acc[kk][2] = _mm512_dpbusd_epi32(acc[kk][2], x2, w);
        }
      }
    }
    for (std::uint64_t kk = 0; kk < kTileK4; ++kk)
      for (std::uint64_t v = 0; v < 3; ++v)
        _mm512_storeu_si512(y + kk * qp + q0 + 16 * v, acc[kk][v]);
  }
}

// AVX-VNNI (VEX, 16 ymm registers): the 8 x 48 tile as 2 x 2 sub-tiles of 4 output channels x
// 24 outputs (3 vectors of 8 lanes): 12 accumulators, 3 inputs, 1 weight.
__attribute__((target("avx2,avxvnni"))) void quad_tiles_avxvnni(const PackedQuads& p,
                                                                std::uint64_t kb,
                                                                std::uint64_t quad_begin,
                                                                std::uint64_t quad_end,
                                                                bool accumulate, std::int32_t* y) {
  const std::uint64_t taps = p.taps, qp = p.q_padded;
  const std::int64_t* offsets = p.tap_offset.data();
  const std::uint32_t* w_tile = p.w_data + kb * p.quads * taps * kTileK4;
  for (std::uint64_t q0 = 0; q0 < qp; q0 += 24)
    for (std::uint64_t k0 = 0; k0 < kTileK4; k0 += 4) {
      __m256i acc[4][3];
      for (std::uint64_t kk = 0; kk < 4; ++kk)
        for (std::uint64_t v = 0; v < 3; ++v)
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
          const __m256i x2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xt + 16));
          for (std::uint64_t kk = 0; kk < 4; ++kk) {
            const __m256i w = _mm256_set1_epi32(static_cast<int>(wp[kk]));
            acc[kk][0] = _mm256_dpbusd_avx_epi32(acc[kk][0], x0, w);
            acc[kk][1] = _mm256_dpbusd_avx_epi32(acc[kk][1], x1, w);
            acc[kk][2] = _mm256_dpbusd_avx_epi32(acc[kk][2], x2, w);
          }
        }
      }
      for (std::uint64_t kk = 0; kk < 4; ++kk)
        for (std::uint64_t v = 0; v < 3; ++v)
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + (k0 + kk) * qp + q0 + 8 * v),
                              acc[kk][v]);
    }
}

#else

void quad_tiles_avx512vnni(const PackedQuads&, std::uint64_t, std::uint64_t, std::uint64_t, bool,
                           std::int32_t*) {
  fail("dense_conv: AVX-512 VNNI tiles on a CPU that is not x86");
}
void quad_tiles_avxvnni(const PackedQuads&, std::uint64_t, std::uint64_t, std::uint64_t, bool,
                        std::int32_t*) {
  fail("dense_conv: AVX-VNNI tiles on a CPU that is not x86");
}

#endif

}  // namespace npukit::device::conv_kernels::detail
