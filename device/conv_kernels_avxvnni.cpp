// AVX-VNNI tiles of device/conv_kernels.h's GEMM form (GemmOperands): the VEX-encoded vpdpbusd
// of Alder Lake and later Intel cores and of Zen 5, on ymm vectors, where the AVX-512 VNNI level
// runs the EVEX one (conv_kernels_vnni.cpp). The same operands, u8 quads of x or of x + 128 with
// the sums' starts, the same y rows, the same tile loop (conv_gemm_tiles.h); only the vectors
// differ: 16 ymm registers, so a tile holds 6 pixels x 16 channels (12 sums, 2 weight vectors, a
// broadcast) and each call takes 2 blocks.
//
// Compiled with its own target attribute; dense_conv only calls it after the resolver
// (common/cpu.h) has seen the CPU support AVX-VNNI.
#include "device/conv_kernels.h"

#include "common/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npukit::device::conv_kernels::detail {

#if defined(__x86_64__) || defined(__i386__)

#define NPUKIT_AVXVNNI __attribute__((target("avx2,avxvnni")))

}  // namespace npukit::device::conv_kernels::detail

#define NPUKIT_TILE_TARGET NPUKIT_AVXVNNI
#include "device/conv_gemm_tiles.h"

namespace npukit::device::conv_kernels::detail {

namespace {
struct VexDot {
  NPUKIT_AVXVNNI static __m256i ymm(__m256i acc, __m256i x, __m256i w) {
    return _mm256_dpbusd_avx_epi32(acc, x, w);
  }
};
// ymm vectors only; 6 pixels a tile at 2 blocks (12 sums, 2 weight vectors and a broadcast of
// the 16 registers), 8 at 1.
struct Widths {
  template <int V>
  using Vec = YmmOf<VexDot>;
  template <int V>
  static constexpr int kLargestTile = V == 2 ? 6 : 8;
  static constexpr int kMaxBlocks = 2;
};
}  // namespace

void gemm_quads_avxvnni(const GemmOperands& op, std::uint64_t kb, std::uint64_t blocks,
                        const std::uint64_t* q, std::uint64_t n, std::uint64_t s_begin,
                        std::uint64_t s_end, bool accumulate, std::int32_t* y) {
  gemm_block_calls<Widths>(op, kb, blocks, q, n, s_begin, s_end, accumulate, y);
}

#undef NPUKIT_TILE_TARGET
#undef NPUKIT_AVXVNNI

#else

void gemm_quads_avxvnni(const GemmOperands&, std::uint64_t, std::uint64_t, const std::uint64_t*,
                        std::uint64_t, std::uint64_t, std::uint64_t, bool, std::int32_t*) {
  fail("dense_conv: AVX-VNNI tiles on a CPU that is not x86");
}

#endif

}  // namespace npukit::device::conv_kernels::detail
