// AVX-512 VNNI tiles of device/conv_kernels.h's GEMM form (GemmOperands): the same operands and
// y rows as the AVX2 tiles (8 output channels of a pixel in a ymm vector), with one instruction
// per product quad where AVX2 takes two or three: vpdpbusd multiplies a pixel's 4 u8 channel
// inputs by 4 s8 weights of each output channel and adds the 4 products into its int32 lane. The
// inputs are x (all 0..127) or x + 128 (any int8; the sums then start at -128 times the weights'
// sum, GemmOperands::offset_first / offset_all). vpdpbusd wraps in 32 bits and the sums fit
// int32 by the bound in conv_kernels.cpp, so they are exact. The paired steps of the AVX2 u8
// tiles (pair_steps) are not needed: there is no int16 stage.
//
// Tiles of 2 blocks (16 channels) hold a pixel's sums in ymm vectors; tiles of 4 blocks (32
// channels) in zmm ones, two blocks' weights joined per vector: each broadcast input then feeds
// 32 channels, half the loads per product, which the 1x1 convs with long sums (the 7x7 and
// 14x14 layers of resnet50) need more than the 3x3 ones (BM_DenseConv, one thread: 1x1 2048 ->
// 512 on 7x7 165 -> 194 G MAC/s; inside `npukit eval` resnet50's layer4 convs 8-23 % faster).
//
// Compiled with their own target attribute; dense_conv only calls them after the resolver
// (common/cpu.h) has seen the CPU support AVX-512 VNNI.
#include "device/conv_kernels.h"
#include "device/conv_lanes_avx2.h"

#include "common/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npukit::device::conv_kernels::detail {

#if defined(__x86_64__) || defined(__i386__)

#define NPUKIT_AVX512VNNI __attribute__((target("avx2,avx512f,avx512bw,avx512vl,avx512vnni")))

// A register tile of P pixels x V blocks of 8 output channels over steps [s_begin, s_end): per
// step, the V blocks' weights loaded and each pixel's input word broadcast once into all of
// them. `start` (8 V lanes, or null) is added to every pixel's sums first. In ymm vectors, a
// block each: P = 8, V = 2 is 16 sums, 2 weight vectors and a broadcast of the 32 registers.
template <int P, int V>
NPUKIT_AVX512VNNI static inline void gemm_tile_ymm(const GemmOperands& op, const std::uint32_t* w,
                                                   const std::int32_t* start,
                                                   const std::uint64_t* q, std::uint64_t s_begin,
                                                   std::uint64_t s_end, bool accumulate,
                                                   std::int32_t* y) {
  const std::uint64_t w_block = op.steps * kGemmBlock;
  __m256i acc[P][V];
  load_sums(acc, y, accumulate);
  if (start) {
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      const __m256i s = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(start + 8 * v));
#pragma GCC unroll 16
      for (int i = 0; i < P; ++i) acc[i][v] = _mm256_add_epi32(acc[i][v], s);
    }
  }
  const std::uint32_t* xi[P];
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i) xi[i] = op.x + q[i];
  const std::uint32_t* wp = w + s_begin * kGemmBlock;
  for (std::uint64_t j = s_begin; j < s_end; ++j, wp += kGemmBlock) {
    const std::int64_t off = op.offset[j];
    __m256i wv[V];
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v)
      wv[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + v * w_block));
#pragma GCC unroll 16
    for (int i = 0; i < P; ++i) {
      const __m256i b = _mm256_set1_epi32(static_cast<int>(xi[i][off]));
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) acc[i][v] = _mm256_dpbusd_epi32(acc[i][v], b, wv[v]);
    }
  }
  store_sums(acc, y);
}

// The same in zmm vectors, blocks 2z and 2z + 1 in vector z (V even): P = 8, V = 4 is 16 sums of
// 32 channels.
template <int P, int V>
NPUKIT_AVX512VNNI static inline void gemm_tile_zmm(const GemmOperands& op, const std::uint32_t* w,
                                                   const std::int32_t* start,
                                                   const std::uint64_t* q, std::uint64_t s_begin,
                                                   std::uint64_t s_end, bool accumulate,
                                                   std::int32_t* y) {
  constexpr int Z = V / 2;  // zmm vectors per pixel
  const std::uint64_t w_block = op.steps * kGemmBlock;
  __m512i acc[P][Z];
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i)
#pragma GCC unroll 4
    for (int z = 0; z < Z; ++z) {
      std::int32_t* row = y + static_cast<std::uint64_t>(i) * kGemmK + 16 * z;
      acc[i][z] = accumulate ? _mm512_loadu_si512(row) : _mm512_setzero_si512();
      if (start) acc[i][z] = _mm512_add_epi32(acc[i][z], _mm512_loadu_si512(start + 16 * z));
    }
  const std::uint32_t* xi[P];
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i) xi[i] = op.x + q[i];
  const std::uint32_t* wp = w + s_begin * kGemmBlock;
  for (std::uint64_t j = s_begin; j < s_end; ++j, wp += kGemmBlock) {
    const std::int64_t off = op.offset[j];
    __m512i wv[Z];
#pragma GCC unroll 4
    for (int z = 0; z < Z; ++z) {
      const std::uint32_t* lo = wp + 2 * z * w_block;
      // Block 2z in the low half, 2z + 1 in the high one (masked broadcasts: no undefined half).
      wv[z] = _mm512_mask_broadcast_i64x4(
          _mm512_maskz_broadcast_i64x4(0x0F,
                                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo))),
          0xF0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo + w_block)));
    }
#pragma GCC unroll 16
    for (int i = 0; i < P; ++i) {
      const __m512i b = _mm512_set1_epi32(static_cast<int>(xi[i][off]));
#pragma GCC unroll 4
      for (int z = 0; z < Z; ++z) acc[i][z] = _mm512_dpbusd_epi32(acc[i][z], b, wv[z]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i)
#pragma GCC unroll 4
    for (int z = 0; z < Z; ++z)
      _mm512_storeu_si512(y + static_cast<std::uint64_t>(i) * kGemmK + 16 * z, acc[i][z]);
}

// The tile of V blocks: zmm for 4, ymm for 1 and 2.
template <int P, int V>
NPUKIT_AVX512VNNI static inline void gemm_tile_vnni(const GemmOperands& op, const std::uint32_t* w,
                                                    const std::int32_t* start,
                                                    const std::uint64_t* q, std::uint64_t s_begin,
                                                    std::uint64_t s_end, bool accumulate,
                                                    std::int32_t* y) {
  if constexpr (V == 4)
    gemm_tile_zmm<P, V>(op, w, start, q, s_begin, s_end, accumulate, y);
  else
    gemm_tile_ymm<P, V>(op, w, start, q, s_begin, s_end, accumulate, y);
}

template <int V>
NPUKIT_AVX512VNNI static void gemm_blocks_vnni(const GemmOperands& op, std::uint64_t kb,
                                               const std::uint64_t* q, std::uint64_t n,
                                               std::uint64_t s_begin, std::uint64_t s_end,
                                               bool accumulate, std::int32_t* y) {
  constexpr int P = 8;  // the largest tile: the switch below has a case per size up to it
  const std::uint32_t* w = op.w + kb * op.steps * kGemmBlock;
  // The offset quads' start of these steps' sums (GemmOperands::offset_first / offset_all).
  alignas(32) std::int32_t start_lanes[V * kGemmBlock];
  const std::int32_t* start = op.starts(s_begin, s_end) ? start_lanes : nullptr;
  for (std::uint64_t j = 0; start && j < V * kGemmBlock; ++j)
    start_lanes[j] = op.start(kb * kGemmBlock + j, s_begin, s_end);
  // Pixels in ceil(n / P) tiles of as equal a size as can be (49 = 7 x 7, not 6 x 8 + 1): a
  // tile of few pixels has few independent sums, and its steps wait on vpdpbusd's latency.
  const std::uint64_t tiles = (n + P - 1) / P;
  for (std::uint64_t t = 0, i = 0; t < tiles; ++t) {
    const std::uint64_t size = (n - i) / (tiles - t) + ((n - i) % (tiles - t) != 0);
    const auto run = [&](auto tile) NPUKIT_AVX512VNNI {
      tile(op, w, start, q + i, s_begin, s_end, accumulate, y + i * kGemmK);
    };
    switch (size) {
      case 8:
        run(gemm_tile_vnni<8, V>);
        break;
      case 7:
        run(gemm_tile_vnni<7, V>);
        break;
      case 6:
        run(gemm_tile_vnni<6, V>);
        break;
      case 5:
        run(gemm_tile_vnni<5, V>);
        break;
      case 4:
        run(gemm_tile_vnni<4, V>);
        break;
      case 3:
        run(gemm_tile_vnni<3, V>);
        break;
      case 2:
        run(gemm_tile_vnni<2, V>);
        break;
      default:
        run(gemm_tile_vnni<1, V>);
        break;
    }
    i += size;
  }
}

void gemm_quads_avx512vnni(const GemmOperands& op, std::uint64_t kb, std::uint64_t blocks,
                           const std::uint64_t* q, std::uint64_t n, std::uint64_t s_begin,
                           std::uint64_t s_end, bool accumulate, std::int32_t* y) {
  switch (blocks) {
    case 4:
      return gemm_blocks_vnni<4>(op, kb, q, n, s_begin, s_end, accumulate, y);
    case 3:
      gemm_blocks_vnni<2>(op, kb, q, n, s_begin, s_end, accumulate, y);
      return gemm_blocks_vnni<1>(op, kb + 2, q, n, s_begin, s_end, accumulate, y + 2 * kGemmBlock);
    case 2:
      return gemm_blocks_vnni<2>(op, kb, q, n, s_begin, s_end, accumulate, y);
    case 1:
      return gemm_blocks_vnni<1>(op, kb, q, n, s_begin, s_end, accumulate, y);
    default:
      fail("dense_conv: {} blocks of output channels in one GEMM tile call", blocks);
  }
}

#undef NPUKIT_AVX512VNNI

#else

void gemm_quads_avx512vnni(const GemmOperands&, std::uint64_t, std::uint64_t, const std::uint64_t*,
                           std::uint64_t, std::uint64_t, std::uint64_t, bool, std::int32_t*) {
  fail("dense_conv: AVX-512 VNNI tiles on a CPU that is not x86");
}

#endif

}  // namespace npukit::device::conv_kernels::detail
