// The GEMM form's vpdpbusd register tiles (conv_kernels.h GemmOperands), written once for every
// level that has the instruction: each per-ISA kernel file (conv_kernels_vnni.cpp, EVEX on ymm
// and zmm; conv_kernels_avxvnni.cpp, VEX on ymm) defines NPUKIT_TILE_TARGET, its target
// attribute, and its vector traits, then includes this, so each gets its own copy compiled for
// its own instructions (internal linkage: nothing here is shared between the copies).
//
// Vector traits W: Vec, kBlocks (8-channel blocks per vector), zero, load, store, add,
// broadcast, dot (vpdpbusd) and rows (a block's weight rows); YmmOf below gives them for ymm
// vectors from the level's ymm vpdpbusd. Widths: Vec<V>, the traits for tiles of V blocks,
// kLargestTile<V>, the most pixels a tile of V blocks holds in registers, and kMaxBlocks, the
// widest tile (8, 4 or 2 blocks).
#pragma once

#ifndef NPUKIT_TILE_TARGET
#error "define NPUKIT_TILE_TARGET (the including kernel file's target attribute) first"
#endif

#include "common/error.h"
#include "device/conv_kernels.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npukit::device::conv_kernels::detail {
namespace {

// Vector traits of ymm vectors, one block of 8 output channels each, its own weight rows
// ([steps][8] from block kb); Dot::ymm is the including level's vpdpbusd on them.
template <typename Dot>
struct YmmOf {
  using Vec = __m256i;
  static constexpr int kBlocks = 1;
  NPUKIT_TILE_TARGET static Vec zero() { return _mm256_setzero_si256(); }
  NPUKIT_TILE_TARGET static Vec load(const void* p) {
    return _mm256_loadu_si256(static_cast<const __m256i*>(p));
  }
  NPUKIT_TILE_TARGET static void store(void* p, Vec v) {
    _mm256_storeu_si256(static_cast<__m256i*>(p), v);
  }
  NPUKIT_TILE_TARGET static Vec add(Vec a, Vec b) { return _mm256_add_epi32(a, b); }
  NPUKIT_TILE_TARGET static Vec broadcast(std::uint32_t x) {
    return _mm256_set1_epi32(static_cast<int>(x));
  }
  NPUKIT_TILE_TARGET static Vec dot(Vec acc, Vec x, Vec w) { return Dot::ymm(acc, x, w); }
  static const std::uint32_t* rows(const GemmOperands& op, std::uint64_t kb) {
    return op.w + kb * op.steps * kGemmBlock;
  }
};

// A register tile of P pixels x V blocks of 8 output channels over steps [s_begin, s_end): per
// step, the V blocks' weights loaded and each pixel's input word broadcast once into all of
// them. `start` (8 V lanes, or null) is added to every pixel's sums first. Of AVX-512's 32
// registers, P = 8 with V = 2 in ymm or V = 4 in zmm takes 16 sums, 2 weight vectors and a
// broadcast, P = 6 with V = 8 in zmm 24 sums, 4 weight vectors and a broadcast; of AVX-VNNI's
// 16, P = 6 with V = 2 in ymm takes 12 sums, 2 weight vectors and a broadcast.
// kContiguous: the pixels' words are consecutive (q[i] = q[0] + i), so every broadcast reads
// from one pointer at a fixed displacement; with 8 pointers the general registers run out and
// one is moved in from a vector register on every step. Lines [pf, pf_end) are prefetched into
// L2, spread over the steps (GemmOperands::prefetch).
template <int P, int V, typename W, bool kContiguous>
NPUKIT_TILE_TARGET inline void gemm_tile(const GemmOperands& op, std::uint64_t kb,
                                         const std::int32_t* start, const std::uint64_t* q,
                                         std::uint64_t s_begin, std::uint64_t s_end,
                                         bool accumulate, std::int32_t* y, const char* pf,
                                         const char* pf_end) {
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
  // One line every `every` steps, spread over the tile's steps: in bursts the prefetches hold
  // the fill buffers the tile's own loads from L2 need, and the tile slows down.
  const std::uint64_t lines = static_cast<std::uint64_t>(pf_end - pf) / 64;
  const std::uint64_t every = lines ? std::max<std::uint64_t>(1, (s_end - s_begin) / lines) : ~0ull;
  std::uint64_t countdown = every;
  const std::uint32_t* wp = W::rows(op, kb) + s_begin * kLanes;
  for (std::uint64_t j = s_begin; j < s_end; ++j, wp += kLanes) {
    const std::int64_t off = op.offset[j];
    if (--countdown == 0) {
      countdown = every;
      if (pf < pf_end) _mm_prefetch(pf, _MM_HINT_T1), pf += 64;
    }
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

// The tile of V blocks in the vectors Widths::Vec<V>; the contiguous form when the pixels lie
// in one output row (q increases, so a span of P - 1 means consecutive words).
template <typename Widths, int P, int V>
NPUKIT_TILE_TARGET inline void gemm_tile_of(const GemmOperands& op, std::uint64_t kb,
                                            const std::int32_t* start, const std::uint64_t* q,
                                            std::uint64_t s_begin, std::uint64_t s_end,
                                            bool accumulate, std::int32_t* y, const char* pf,
                                            const char* pf_end) {
  using Vec = typename Widths::template Vec<V>;
  if (q[P - 1] - q[0] == P - 1)
    gemm_tile<P, V, Vec, true>(op, kb, start, q, s_begin, s_end, accumulate, y, pf, pf_end);
  else
    gemm_tile<P, V, Vec, false>(op, kb, start, q, s_begin, s_end, accumulate, y, pf, pf_end);
}

// y rows (+)= the sums of V blocks from kb for the n pixels at q, in tiles of up to
// Widths::kLargestTile<V> pixels (gemm_tile).
template <typename Widths, int V>
NPUKIT_TILE_TARGET void gemm_blocks(const GemmOperands& op, std::uint64_t kb,
                                    const std::uint64_t* q, std::uint64_t n, std::uint64_t s_begin,
                                    std::uint64_t s_end, bool accumulate, std::int32_t* y) {
  constexpr int P = Widths::template kLargestTile<V>;
  // The offset quads' start of these steps' sums (GemmOperands::offset_first / offset_all).
  alignas(32) std::int32_t start_lanes[V * kGemmBlock];
  const std::int32_t* start = op.starts(s_begin, s_end) ? start_lanes : nullptr;
  if (start) op.starts_of(kb * kGemmBlock, V * kGemmBlock, s_begin, s_end, start_lanes);
  // Pixels in ceil(n / P) tiles of as equal a size as can be (49 = 7 x 7, not 6 x 8 + 1): a
  // tile of few pixels has few independent sums, and its steps wait on vpdpbusd's latency.
  const std::uint64_t tiles = (n + P - 1) / P;
  const char* const pf = reinterpret_cast<const char*>(op.prefetch);
  for (std::uint64_t t = 0, i = 0; t < tiles; ++t) {
    const std::uint64_t size = (n - i) / (tiles - t) + ((n - i) % (tiles - t) != 0);
    const auto run = [&](auto tile) NPUKIT_TILE_TARGET {
      tile(op, kb, start, q + i, s_begin, s_end, accumulate, y + i * kGemmK,
           pf + op.prefetch_bytes * t / tiles, pf + op.prefetch_bytes * (t + 1) / tiles);
    };
    // The tile of this size, one compile-time size per alternative (1..P).
    [&]<std::size_t... S>(std::index_sequence<S...>) NPUKIT_TILE_TARGET {
      (void)((size == S + 1 && (run(gemm_tile_of<Widths, S + 1, V>), true)) || ...);
    }
    (std::make_index_sequence<P>{});
    i += size;
  }
}

// A GemmTilesFn: `blocks` blocks from kb in the widest tiles the level has, 8, 4, 2 then 1
// block at a time (a unit's last 5-7 blocks as 4 and the rest).
template <typename Widths>
NPUKIT_TILE_TARGET void gemm_block_calls(const GemmOperands& op, std::uint64_t kb,
                                         std::uint64_t blocks, const std::uint64_t* q,
                                         std::uint64_t n, std::uint64_t s_begin,
                                         std::uint64_t s_end, bool accumulate, std::int32_t* y) {
  if (blocks < 1 || blocks > Widths::kMaxBlocks)
    fail("dense_conv: {} blocks of output channels in one GEMM tile call (1 to {} here)", blocks,
         Widths::kMaxBlocks);
  // Blocks kb.. in a tile of V, then on past them.
  const auto tile = [&]<int V>() NPUKIT_TILE_TARGET {
    gemm_blocks<Widths, V>(op, kb, q, n, s_begin, s_end, accumulate, y);
    kb += V, blocks -= V, y += V * kGemmBlock;
  };
  while (blocks > 0) {
    if constexpr (Widths::kMaxBlocks >= 8)
      if (blocks >= 8) {
        tile.template operator()<8>();
        continue;
      }
    if constexpr (Widths::kMaxBlocks >= 4)
      if (blocks >= 4) {
        tile.template operator()<4>();
        continue;
      }
    if (blocks >= 2)
      tile.template operator()<2>();
    else
      tile.template operator()<1>();
  }
}

}  // namespace
}  // namespace npukit::device::conv_kernels::detail
