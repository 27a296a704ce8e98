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

}  // namespace npukit::device::conv_kernels::detail

#define NPUKIT_TILE_TARGET NPUKIT_AVX512VNNI
#include "device/conv_gemm_tiles.h"

namespace npukit::device::conv_kernels::detail {

namespace {
// The two vector widths of the tiles: a ymm vector holds one block of 8 output channels, a zmm
// vector two (blocks 2z and 2z + 1 in vector z, one row of GemmOperands::w_joined a step).
struct EvexDot {
  NPUKIT_AVX512VNNI static __m256i ymm(__m256i acc, __m256i x, __m256i w) {
    return _mm256_dpbusd_epi32(acc, x, w);
  }
};
using Ymm = YmmOf<EvexDot>;
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

// The tiles of V blocks: zmm vectors for 4 and 8 (two blocks joined per vector), ymm for 1 and
// 2; 6 pixels a tile at 8 blocks (24 sums, 4 weight vectors and a broadcast of the 32
// registers), 8 otherwise (16 sums).
struct Widths {
  template <int V>
  using Vec = std::conditional_t<(V % 2 == 0 && V > 2), Zmm, Ymm>;
  template <int V>
  static constexpr int kLargestTile = V == 8 ? 6 : 8;
  static constexpr int kMaxBlocks = 8;
};
}  // namespace

void gemm_quads_avx512vnni(const GemmOperands& op, std::uint64_t kb, std::uint64_t blocks,
                           const std::uint64_t* q, std::uint64_t n, std::uint64_t s_begin,
                           std::uint64_t s_end, bool accumulate, std::int32_t* y) {
  gemm_block_calls<Widths>(op, kb, blocks, q, n, s_begin, s_end, accumulate, y);
}

#undef NPUKIT_TILE_TARGET
#undef NPUKIT_AVX512VNNI

#else

void gemm_quads_avx512vnni(const GemmOperands&, std::uint64_t, std::uint64_t, const std::uint64_t*,
                           std::uint64_t, std::uint64_t, std::uint64_t, bool, std::int32_t*) {
  fail("dense_conv: AVX-512 VNNI tiles on a CPU that is not x86");
}

#endif

}  // namespace npukit::device::conv_kernels::detail
