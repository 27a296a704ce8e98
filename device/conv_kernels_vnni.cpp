// AVX-512 VNNI tiles of device/conv_kernels.h's GEMM form (GemmOperands): the same operands and
// y rows as the AVX2 tiles (8 output channels of a pixel in a ymm vector), with one instruction
// per product quad where AVX2 takes two or three: vpdpbusd multiplies a pixel's 4 u8 channel
// inputs by 4 s8 weights of each output channel and adds the 4 products into its int32 lane. The
// inputs are x (all 0..127) or x + 128 (any int8; the sums then start at -128 times the weights'
// sum, GemmOperands::offset_first / offset_all). vpdpbusd wraps in 32 bits and the sums fit
// int32 by the bound in conv_kernels.cpp, so they are exact. The paired steps of the AVX2 u8
// tiles (pair_steps) are not needed: there is no int16 stage.
//
// Tiles of 2 blocks (16 channels) hold a pixel's sums in ymm vectors; tiles of 4 and 8 blocks
// (32 and 64 channels) in zmm ones, two blocks' weights joined per vector: each broadcast input
// then feeds 32 or 64 channels, fewer loads per product, which the 1x1 convs with long sums
// (the 7x7 and 14x14 layers of resnet50) need more than the 3x3 ones (BM_DenseConv, one thread:
// 1x1 2048 -> 512 on 7x7 165 -> 194 G MAC/s at 4 blocks; inside `npukit eval` resnet50's layer4
// convs 8-23 % faster). A work unit's 64 channels go in one call of 8 blocks: 6 pixels x 4
// vectors, 24 sums, take 10 loads (4 weight vectors, 6 broadcasts) per 24 vpdpbusd where 8 x 2
// take 10 per 16 (AVX-512 Xeon, best of 12 runs: 1x1 1024 -> 256 on 14x14 261 -> 288 G MAC/s,
// 2048 -> 512 on 7x7 229 -> 260, 3x3 256 on 14x14 330 -> 339; summing the steps in chunks, as
// the AVX2 tiles do, gained nothing on top).
//
// Compiled with their own target attribute; dense_conv only calls them after the resolver
// (common/cpu.h) has seen the CPU support AVX-512 VNNI.
#include "device/conv_kernels.h"

#include "common/error.h"

#include <type_traits>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npukit::device::conv_kernels::detail {

#if defined(__x86_64__) || defined(__i386__)

#define NPUKIT_AVX512VNNI __attribute__((target("avx2,avx512f,avx512bw,avx512vl,avx512vnni")))

// The two vector widths of the tiles: a ymm vector holds one block of 8 output channels, a zmm
// vector two (blocks 2z and 2z + 1 in vector z, one row of GemmOperands::w_joined a step).
struct Ymm {
  using Vec = __m256i;
  static constexpr int kBlocks = 1;
  NPUKIT_AVX512VNNI static Vec zero() { return _mm256_setzero_si256(); }
  NPUKIT_AVX512VNNI static Vec load(const void* p) {
    return _mm256_loadu_si256(static_cast<const __m256i*>(p));
  }
  NPUKIT_AVX512VNNI static void store(void* p, Vec v) {
    _mm256_storeu_si256(static_cast<__m256i*>(p), v);
  }
  NPUKIT_AVX512VNNI static Vec add(Vec a, Vec b) { return _mm256_add_epi32(a, b); }
  NPUKIT_AVX512VNNI static Vec broadcast(std::uint32_t x) {
    return _mm256_set1_epi32(static_cast<int>(x));
  }
  NPUKIT_AVX512VNNI static Vec dot(Vec acc, Vec x, Vec w) { return _mm256_dpbusd_epi32(acc, x, w); }
  // Block kb's weight rows: [steps][8].
  static const std::uint32_t* rows(const GemmOperands& op, std::uint64_t kb) {
    return op.w + kb * op.steps * kGemmBlock;
  }
};
struct Zmm {
  using Vec = __m512i;
  static constexpr int kBlocks = 2;
  NPUKIT_AVX512VNNI static Vec zero() { return _mm512_setzero_si512(); }
  NPUKIT_AVX512VNNI static Vec load(const void* p) { return _mm512_loadu_si512(p); }
  NPUKIT_AVX512VNNI static void store(void* p, Vec v) { _mm512_storeu_si512(p, v); }
  NPUKIT_AVX512VNNI static Vec add(Vec a, Vec b) { return _mm512_add_epi32(a, b); }
  NPUKIT_AVX512VNNI static Vec broadcast(std::uint32_t x) {
    return _mm512_set1_epi32(static_cast<int>(x));
  }
  NPUKIT_AVX512VNNI static Vec dot(Vec acc, Vec x, Vec w) { return _mm512_dpbusd_epi32(acc, x, w); }
  // Blocks kb and kb + 1 (kb even) side by side: [steps][16] (join_block_pairs).
  static const std::uint32_t* rows(const GemmOperands& op, std::uint64_t kb) {
    if (!op.w_joined) fail("dense_conv: AVX-512 VNNI zmm tiles without joined weights");
    return op.w_joined + kb / 2 * op.steps * 2 * kGemmBlock;
  }
};

// A register tile of P pixels x V blocks of 8 output channels over steps [s_begin, s_end): per
// step, the V blocks' weights loaded and each pixel's input word broadcast once into all of
// them. `start` (8 V lanes, or null) is added to every pixel's sums first. P = 8 with V = 2 in
// ymm or V = 4 in zmm is 16 sums, 2 weight vectors and a broadcast of the 32 registers; P = 6
// with V = 8 is 24 sums, 4 weight vectors and a broadcast.
// kContiguous: the pixels' words are consecutive (q[i] = q[0] + i), so every broadcast reads
// from one pointer at a fixed displacement; with 8 pointers the general registers run out and
// one is moved in from a vector register on every step.
template <int P, int V, typename W, bool kContiguous>
NPUKIT_AVX512VNNI static inline void gemm_tile(const GemmOperands& op, std::uint64_t kb,
                                               const std::int32_t* start, const std::uint64_t* q,
                                               std::uint64_t s_begin, std::uint64_t s_end,
                                               bool accumulate, std::int32_t* y) {
  constexpr int N = V / W::kBlocks;  // vectors per pixel
  constexpr std::uint64_t kLanes = kGemmBlock * W::kBlocks;
  const std::uint64_t w_vector = op.steps * kLanes;  // from one vector's rows to the next's
  typename W::Vec acc[P][N];
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < N; ++v) {
      const std::int32_t* row = y + static_cast<std::uint64_t>(i) * kGemmK + kLanes * v;
      acc[i][v] = accumulate ? W::load(row) : W::zero();
      if (start) acc[i][v] = W::add(acc[i][v], W::load(start + kLanes * v));
    }
  const std::uint32_t* xi[P];
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i) xi[i] = op.x + q[i];
  const std::uint32_t* wp = W::rows(op, kb) + s_begin * kLanes;
  for (std::uint64_t j = s_begin; j < s_end; ++j, wp += kLanes) {
    const std::int64_t off = op.offset[j];
    typename W::Vec wv[N];
#pragma GCC unroll 8
    for (int v = 0; v < N; ++v) wv[v] = W::load(wp + v * w_vector);
#pragma GCC unroll 16
    for (int i = 0; i < P; ++i) {
      const typename W::Vec b = W::broadcast(kContiguous ? xi[0][off + i] : xi[i][off]);
#pragma GCC unroll 8
      for (int v = 0; v < N; ++v) acc[i][v] = W::dot(acc[i][v], b, wv[v]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < N; ++v)
      W::store(y + static_cast<std::uint64_t>(i) * kGemmK + kLanes * v, acc[i][v]);
}

// The tile of V blocks: zmm vectors for 4 and 8, ymm for 1 and 2; the contiguous form when the
// pixels lie in one output row (q increases, so a span of P - 1 means consecutive words).
template <int P, int V>
NPUKIT_AVX512VNNI static inline void gemm_tile_vnni(const GemmOperands& op, std::uint64_t kb,
                                                    const std::int32_t* start,
                                                    const std::uint64_t* q, std::uint64_t s_begin,
                                                    std::uint64_t s_end, bool accumulate,
                                                    std::int32_t* y) {
  using Vec = std::conditional_t<(V % 2 == 0 && V > 2), Zmm, Ymm>;
  if (q[P - 1] - q[0] == P - 1)
    gemm_tile<P, V, Vec, true>(op, kb, start, q, s_begin, s_end, accumulate, y);
  else
    gemm_tile<P, V, Vec, false>(op, kb, start, q, s_begin, s_end, accumulate, y);
}

template <int V>
NPUKIT_AVX512VNNI static void gemm_blocks_vnni(const GemmOperands& op, std::uint64_t kb,
                                               const std::uint64_t* q, std::uint64_t n,
                                               std::uint64_t s_begin, std::uint64_t s_end,
                                               bool accumulate, std::int32_t* y) {
  constexpr int P = V == 8 ? 6 : 8;  // the largest tile (gemm_tile)
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
      tile(op, kb, start, q + i, s_begin, s_end, accumulate, y + i * kGemmK);
    };
    // The tile of this size, one compile-time size per alternative (1..P).
    [&]<std::size_t... S>(std::index_sequence<S...>) NPUKIT_AVX512VNNI {
      (void)((size == S + 1 && (run(gemm_tile_vnni<S + 1, V>), true)) || ...);
    }
    (std::make_index_sequence<P>{});
    i += size;
  }
}

void gemm_quads_avx512vnni(const GemmOperands& op, std::uint64_t kb, std::uint64_t blocks,
                           const std::uint64_t* q, std::uint64_t n, std::uint64_t s_begin,
                           std::uint64_t s_end, bool accumulate, std::int32_t* y) {
  if (blocks > 4 && blocks < 8) {  // a unit's last channels: 4 blocks, then the rest
    gemm_blocks_vnni<4>(op, kb, q, n, s_begin, s_end, accumulate, y);
    return gemm_quads_avx512vnni(op, kb + 4, blocks - 4, q, n, s_begin, s_end, accumulate,
                                 y + 4 * kGemmBlock);
  }
  switch (blocks) {
    case 8:
      return gemm_blocks_vnni<8>(op, kb, q, n, s_begin, s_end, accumulate, y);
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
