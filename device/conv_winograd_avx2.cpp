// AVX2 transforms of the Winograd path (device/conv_winograd.h). The int16 adds of the input
// transform cannot overflow (|V| <= 512); the int32 adds of the output transform wrap, which is
// what the exactness argument in the header needs. Compiled with target attributes, so only these
// functions need AVX2; dense_conv checks the CPU first.
#include "device/conv_lanes_avx2.h"
#include "device/conv_winograd.h"

#include "common/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#endif

namespace npukit::device::conv_kernels::detail {

#if defined(__x86_64__) || defined(__i386__)

// 16 positions of a row at a time: both planes widened to int16 and interleaved into pair words
// (unpacklo/hi work per 128-bit half; the permutes put the words back in order).
__attribute__((target("avx2"))) void winograd_pack_avx2(const std::int8_t* lo,
                                                        const std::int8_t* hi, std::uint64_t ph,
                                                        std::uint64_t pw, std::uint64_t xh,
                                                        std::uint64_t xw, std::uint32_t* x) {
  for (std::uint64_t y = 0; y < xh; ++y) {
    std::uint32_t* row = x + y * xw;
    if (y >= ph) {
      std::fill(row, row + xw, 0u);
      continue;
    }
    const std::int8_t* a = lo ? lo + y * pw : nullptr;
    const std::int8_t* b = hi ? hi + y * pw : nullptr;
    std::uint64_t i = 0;
    for (; i + 16 <= pw; i += 16) {
      const __m256i va =
          a ? _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)))
            : _mm256_setzero_si256();
      const __m256i vb =
          b ? _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)))
            : _mm256_setzero_si256();
      const __m256i l = _mm256_unpacklo_epi16(va, vb), h = _mm256_unpackhi_epi16(va, vb);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + i),
                          _mm256_permute2x128_si256(l, h, 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + i + 8),
                          _mm256_permute2x128_si256(l, h, 0x31));
    }
    for (; i < pw; ++i)
      row[i] = static_cast<std::uint32_t>(static_cast<std::uint16_t>(a ? a[i] : 0)) |
               (static_cast<std::uint32_t>(static_cast<std::uint16_t>(b ? b[i] : 0)) << 16);
    std::fill(row + pw, row + xw, 0u);
  }
  std::fill(x + xh * xw, x + xh * xw + kWinogradSlack, 0u);
}

// 8 tiles of a tile row at a time. B^T d is element-wise on the 4 input rows, so it runs on the
// words as loaded (columns 2 tx .. 2 tx + 17); then the words of even and odd columns are
// separated (e[t] = column 2t, o[t] = column 2t + 1), and (B^T d) B of tile t is e[t] - e[t+1],
// o[t] + e[t+1], e[t+1] - o[t], o[t] - o[t+1]. Reads at most 2 tiles_w + 16 words past a row's
// start (within the next rows or the slack) and writes up to 8 tiles past a row.
__attribute__((target("avx2"))) void winograd_input_avx2(const std::uint32_t* x, std::uint64_t xw,
                                                         std::uint64_t tiles_h,
                                                         std::uint64_t tiles_w, std::uint32_t* v,
                                                         std::uint64_t xi_stride) {
  const __m256i even_odd = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  for (std::uint64_t ty = 0; ty < tiles_h; ++ty) {
    const std::uint32_t* p0 = x + 2 * ty * xw;
    const std::uint32_t *p1 = p0 + xw, *p2 = p1 + xw, *p3 = p2 + xw;
    std::uint32_t* out = v + ty * tiles_w;
    for (std::uint64_t tx = 0; tx < tiles_w; tx += 8) {
      // t[s][h][r]: row r of B^T d, for the words at 2 tx + 2 s + 8 h.
      __m256i t[2][2][4];
      for (std::uint64_t s = 0; s < 2; ++s)
        for (std::uint64_t h = 0; h < 2; ++h) {
          const std::uint64_t at = 2 * tx + 2 * s + 8 * h;
          const __m256i d0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0 + at));
          const __m256i d1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p1 + at));
          const __m256i d2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p2 + at));
          const __m256i d3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p3 + at));
          t[s][h][0] = _mm256_sub_epi16(d0, d2);
          t[s][h][1] = _mm256_add_epi16(d1, d2);
          t[s][h][2] = _mm256_sub_epi16(d2, d1);
          t[s][h][3] = _mm256_sub_epi16(d1, d3);
        }
      for (std::uint64_t r = 0; r < 4; ++r) {
        const __m256i a0 = _mm256_permutevar8x32_epi32(t[0][0][r], even_odd);
        const __m256i a1 = _mm256_permutevar8x32_epi32(t[0][1][r], even_odd);
        const __m256i b0 = _mm256_permutevar8x32_epi32(t[1][0][r], even_odd);
        const __m256i b1 = _mm256_permutevar8x32_epi32(t[1][1][r], even_odd);
        const __m256i e = _mm256_permute2x128_si256(a0, a1, 0x20);   // e[tx .. tx + 7]
        const __m256i o = _mm256_permute2x128_si256(a0, a1, 0x31);   // o[tx .. tx + 7]
        const __m256i e1 = _mm256_permute2x128_si256(b0, b1, 0x20);  // e[tx + 1 .. tx + 8]
        const __m256i o1 = _mm256_permute2x128_si256(b0, b1, 0x31);  // o[tx + 1 .. tx + 8]
        std::uint32_t* dst = out + 4 * r * xi_stride + tx;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm256_sub_epi16(e, e1));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + xi_stride), _mm256_add_epi16(o, e1));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 2 * xi_stride),
                            _mm256_sub_epi16(e1, o));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 3 * xi_stride),
                            _mm256_sub_epi16(o, o1));
      }
    }
  }
}

// The GEMM as conv_kernels_avx2.cpp's channels-in-lanes tiles, specialised to one tap and one
// stream of pairs: a register tile of P tiles x V vectors of 8 output channels; per pair, V
// weight vectors loaded and each tile's V word broadcast once. P = 6, V = 2 fills the 16
// registers (12 sums, 2 weights, the broadcast, its product); the pairs need no vector of ones.
template <int P, int V>
__attribute__((target("avx2"))) static inline void winograd_gemm_tile(
    const std::uint32_t* v, std::uint64_t tile_stride, const std::uint32_t* u,
    std::uint64_t u_block, std::uint64_t g_begin, std::uint64_t g_end, bool accumulate,
    std::int32_t* y) {
  __m256i acc[P][V];
  load_sums(acc, y, accumulate);
  const std::uint32_t* x = v + g_begin * tile_stride;
  const std::uint32_t* w = u + g_begin * kGemmBlock;
  for (std::uint64_t g = g_begin; g < g_end; ++g, x += tile_stride, w += kGemmBlock) {
    __m256i wv[V];
#pragma GCC unroll 8
    for (int b = 0; b < V; ++b)
      wv[b] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + b * u_block));
#pragma GCC unroll 8
    for (int i = 0; i < P; ++i) {
      const __m256i bx = _mm256_set1_epi32(static_cast<int>(x[i]));
#pragma GCC unroll 8
      for (int b = 0; b < V; ++b)
        acc[i][b] = _mm256_add_epi32(acc[i][b], _mm256_madd_epi16(bx, wv[b]));
    }
  }
  store_sums(acc, y);
}

template <int V>
__attribute__((target("avx2"))) static void winograd_gemm_blocks(
    const std::uint32_t* v, std::uint64_t tile_stride, std::uint64_t n, const std::uint32_t* u,
    std::uint64_t u_block, std::uint64_t g_begin, std::uint64_t g_end, bool accumulate,
    std::int32_t* y) {
  constexpr std::uint64_t P = 6;
  std::uint64_t t = 0;
  auto tile = [&](auto p) {
    winograd_gemm_tile<decltype(p)::value, V>(v + t, tile_stride, u, u_block, g_begin, g_end,
                                              accumulate, y + t * kGemmK);
  };
  for (; t + P <= n; t += P) tile(std::integral_constant<int, P>{});
  switch (n - t) {
    case 5:
      return tile(std::integral_constant<int, 5>{});
    case 4:
      return tile(std::integral_constant<int, 4>{});
    case 3:
      return tile(std::integral_constant<int, 3>{});
    case 2:
      return tile(std::integral_constant<int, 2>{});
    case 1:
      return tile(std::integral_constant<int, 1>{});
    default:
      return;
  }
}

__attribute__((target("avx2"))) void winograd_gemm_avx2(const std::uint32_t* v,
                                                        std::uint64_t tile_stride, std::uint64_t n,
                                                        const std::uint32_t* u, std::uint64_t pairs,
                                                        std::uint64_t blocks, std::uint64_t g_begin,
                                                        std::uint64_t g_end, bool accumulate,
                                                        std::int32_t* y) {
  const std::uint64_t u_block = pairs * kGemmBlock;
  std::uint64_t b = 0;
  for (; b + 2 <= blocks; b += 2)
    winograd_gemm_blocks<2>(v, tile_stride, n, u + b * u_block, u_block, g_begin, g_end, accumulate,
                            y + b * kGemmBlock);
  if (b < blocks)
    winograd_gemm_blocks<1>(v, tile_stride, n, u + b * u_block, u_block, g_begin, g_end, accumulate,
                            y + b * kGemmBlock);
}

// 8 lanes (output channels) of 4 tiles of a tile row at a time: A^T M, then the columns and the
// arithmetic shift give each tile's outputs (row a, column b) with the channels in the lanes;
// output row a of the 4 tiles is 8 consecutive outputs, one transpose away from a vector per
// channel.
__attribute__((target("avx2"))) void winograd_output_avx2(
    const std::int32_t* y, std::uint64_t xi_stride, std::uint64_t rows, std::uint64_t tiles_w,
    std::uint64_t out_rows, std::uint64_t ow, std::uint64_t k_first, std::uint64_t k_count,
    std::int32_t* out, std::uint64_t out_stride) {
  const std::uint64_t k_end = k_first + k_count;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint64_t kb = k_first / 8 * 8; kb < k_end; kb += 8)
      for (std::uint64_t tx = 0; tx < tiles_w; tx += 4) {
        // yo[a][2 t + b]: tile tx + t's output (row a, column b), 8 channels.
        __m256i yo[2][8];
        for (std::uint64_t t = 0; t < 4; ++t) {
          const std::int32_t* m = y + (r * tiles_w + tx + t) * kGemmK + kb;
          __m256i tt[2][4];
          for (std::uint64_t col = 0; col < 4; ++col) {
            const __m256i m0 =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m + col * xi_stride));
            const __m256i m1 =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m + (4 + col) * xi_stride));
            const __m256i m2 =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m + (8 + col) * xi_stride));
            const __m256i m3 =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m + (12 + col) * xi_stride));
            tt[0][col] = _mm256_add_epi32(_mm256_add_epi32(m0, m1), m2);
            tt[1][col] = _mm256_sub_epi32(_mm256_sub_epi32(m1, m2), m3);
          }
          for (std::uint64_t a = 0; a < 2; ++a) {
            yo[a][2 * t] = _mm256_srai_epi32(
                _mm256_add_epi32(_mm256_add_epi32(tt[a][0], tt[a][1]), tt[a][2]), 2);
            yo[a][2 * t + 1] = _mm256_srai_epi32(
                _mm256_sub_epi32(_mm256_sub_epi32(tt[a][1], tt[a][2]), tt[a][3]), 2);
          }
        }
        const std::uint64_t ox = 2 * tx, count = std::min<std::uint64_t>(8, ow - ox);
        // The lanes of the outputs inside the row (the last group of a row may hang over).
        const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), lane);
        for (std::uint64_t a = 0; a < 2; ++a) {
          const std::uint64_t oy = 2 * r + a;
          if (oy >= out_rows) break;
          __m256i* ch = yo[a];
          transpose8(ch);  // ch[j]: channel kb + j's 8 outputs
          for (std::uint64_t j = 0; j < 8; ++j) {
            const std::uint64_t k = kb + j;
            if (k < k_first || k >= k_end) continue;
            std::int32_t* dst = out + (k - k_first) * out_stride + oy * ow + ox;
            if (count == 8)
              _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), ch[j]);
            else
              _mm256_maskstore_epi32(dst, tail, ch[j]);
          }
        }
      }
}

#else

void winograd_pack_avx2(const std::int8_t*, const std::int8_t*, std::uint64_t, std::uint64_t,
                        std::uint64_t, std::uint64_t, std::uint32_t*) {
  fail("dense_conv: AVX2 on a CPU that is not x86");
}
void winograd_input_avx2(const std::uint32_t*, std::uint64_t, std::uint64_t, std::uint64_t,
                         std::uint32_t*, std::uint64_t) {
  fail("dense_conv: AVX2 on a CPU that is not x86");
}
void winograd_gemm_avx2(const std::uint32_t*, std::uint64_t, std::uint64_t, const std::uint32_t*,
                        std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, bool,
                        std::int32_t*) {
  fail("dense_conv: AVX2 on a CPU that is not x86");
}
void winograd_output_avx2(const std::int32_t*, std::uint64_t, std::uint64_t, std::uint64_t,
                          std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, std::int32_t*,
                          std::uint64_t) {
  fail("dense_conv: AVX2 on a CPU that is not x86");
}

#endif

}  // namespace npukit::device::conv_kernels::detail
