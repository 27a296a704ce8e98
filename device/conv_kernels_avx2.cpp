// AVX2 paths of device/conv_kernels.h. dense_conv's are the channels-in-lanes (GEMM) tiles:
// per (channel pair or quad, tap), the weight words of 8 output channels in a vector, each
// pixel's input word broadcast and multiplied by them: _mm256_madd_epi16 on int16 pairs adds a
// pixel's 2 products into an int32 lane (|lane| <= 2 * 2^14, exact), or, for inputs 0..127,
// _mm256_maddubs_epi16 on u8 quads adds products pairwise into int16 (|pair| <= 2 * 127 * 128,
// no saturation) and _mm256_madd_epi16 by ones the two pairs into the lane; the adds then stay
// exact by the bound in conv_kernels.cpp. Compiled with target attributes, so only these
// functions need AVX2; the dispatchers check the CPU first.
#include "device/conv_kernels.h"
#include "device/conv_lanes_avx2.h"
#include "device/quantizer_avx2.h"

#include "common/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>
#endif

namespace npukit::device::conv_kernels::detail {

#if defined(__x86_64__) || defined(__i386__)

// The GEMM form (conv_kernels.h GemmOperands): a register tile of P pixels x V vectors of 8
// output channels. Per (group, tap): V weight vectors loaded, each pixel's input word broadcast
// once and multiplied by every weight vector. P = 5, V = 2 holds 10 accumulators, 2 weights, the
// broadcast, its product and the ones of the u8 path in the 16 registers; the int16 pairs, with
// no ones, take P = 6 (12 sums: the stem's tiles 12-18 % faster than at 5). The u8 quads take their
// paired steps (pair_steps) two at a time: both steps' _mm256_maddubs_epi16 lanes added in int16,
// then one _mm256_madd_epi16 by ones, 3 multiplies for 2 steps instead of 4.
template <int P, int V, bool kQuads, bool kPairs>
__attribute__((target("avx2"), always_inline)) static inline void gemm_tile_inline(
    const GemmOperands& op, const std::uint32_t* w, const std::uint32_t* singles,
    const std::uint32_t* singles_end, const std::uint64_t* q, std::uint64_t s_begin,
    std::uint64_t s_end, bool accumulate, std::int32_t* y) {
  const std::uint64_t w_block = op.steps * kGemmBlock;
  __m256i acc[P][V];
  load_sums(acc, y, accumulate);
  const __m256i ones = _mm256_set1_epi16(1);
  // One pointer per pixel and one offset per (group, tap) (GemmOperands::offset): the loop
  // keeps the pixels' pointers in registers.
  const std::uint32_t* xi[P];
#pragma GCC unroll 8
  for (int i = 0; i < P; ++i) xi[i] = op.x + q[i];
  auto one_at_a_time = [&](std::uint64_t begin, std::uint64_t end)
      __attribute__((target("avx2"), always_inline)) {
    const std::uint32_t* wp = w + begin * kGemmBlock;
    for (std::uint64_t j = begin; j < end; ++j, wp += kGemmBlock) {
      const std::int64_t off = op.offset[j];
      __m256i wv[V];
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v)
        wv[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + v * w_block));
#pragma GCC unroll 8
      for (int i = 0; i < P; ++i) {
        const __m256i b = _mm256_set1_epi32(static_cast<int>(xi[i][off]));
#pragma GCC unroll 8
        for (int v = 0; v < V; ++v) {
          const __m256i prod = kQuads ? _mm256_madd_epi16(_mm256_maddubs_epi16(b, wv[v]), ones)
                                      : _mm256_madd_epi16(b, wv[v]);
          acc[i][v] = _mm256_add_epi32(acc[i][v], prod);
        }
      }
    }
  };
  auto two_at_a_time = [&](std::uint64_t begin, std::uint64_t end)
      __attribute__((target("avx2"), always_inline)) {
    const std::uint32_t* wp = w + begin * kGemmBlock;
    for (std::uint64_t j = begin; j < end; j += 2, wp += 2 * kGemmBlock) {
      const std::int64_t off0 = op.offset[j], off1 = op.offset[j + 1];
#pragma GCC unroll 8
      for (int i = 0; i < P; ++i) {
        const __m256i b0 = _mm256_set1_epi32(static_cast<int>(xi[i][off0]));
        const __m256i b1 = _mm256_set1_epi32(static_cast<int>(xi[i][off1]));
#pragma GCC unroll 8
        for (int v = 0; v < V; ++v) {
          const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + v * w_block));
          const __m256i w1 =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + v * w_block + kGemmBlock));
          const __m256i sum16 =
              _mm256_add_epi16(_mm256_maddubs_epi16(b0, w0), _mm256_maddubs_epi16(b1, w1));
          acc[i][v] = _mm256_add_epi32(acc[i][v], _mm256_madd_epi16(sum16, ones));
        }
      }
    }
  };
  // Only the tiles that take pairs hold their loop: in the same function it spilled sums of the
  // other loop too.
  if constexpr (!kPairs) {
    one_at_a_time(s_begin, s_end);
  } else {
    // Whole pairs from s_begin (a phase's start) and after each single (pair_steps); singles
    // starts at the first single >= s_begin.
    for (std::uint64_t j = s_begin; j < s_end;) {
      const std::uint64_t single = singles < singles_end && *singles < s_end ? *singles++ : s_end;
      two_at_a_time(j, single);
      if (single < s_end) one_at_a_time(single, single + 1);
      j = single + 1;
    }
  }
  store_sums(acc, y);
}

// The same as a call: gemm_blocks inlines only the u8 quad tiles of its main loop. Their call
// cost short groups 7 % (a 1x1 conv over 64 channels: 8 step pairs a tile); the int16 pair
// tiles, inlined, spilled (the stem's pieces ran 10-18 % slower).
template <int P, int V, bool kQuads, bool kPairs>
__attribute__((target("avx2"), noinline)) static void gemm_tile(
    const GemmOperands& op, const std::uint32_t* w, const std::uint32_t* singles,
    const std::uint32_t* singles_end, const std::uint64_t* q, std::uint64_t s_begin,
    std::uint64_t s_end, bool accumulate, std::int32_t* y) {
  gemm_tile_inline<P, V, kQuads, kPairs>(op, w, singles, singles_end, q, s_begin, s_end, accumulate,
                                         y);
}

template <int P, int V, bool kQuads, bool kPairs>
__attribute__((target("avx2"))) static void gemm_blocks(const GemmOperands& op, std::uint64_t kb,
                                                        const std::uint64_t* q, std::uint64_t n,
                                                        std::uint64_t s_begin, std::uint64_t s_end,
                                                        bool accumulate, std::int32_t* y) {
  const std::uint32_t* w = op.w + kb * op.steps * kGemmBlock;
  const std::uint32_t* singles = nullptr;
  const std::uint32_t* singles_end = nullptr;
  if constexpr (kPairs) {  // the group's singles from s_begin on, once for all its tiles
    if (op.singles) {      // else no step is single
      singles_end = op.singles + op.single_begin[kb / 2 + 1];
      singles = std::lower_bound(op.singles + op.single_begin[kb / 2], singles_end, s_begin);
    }
  }
  std::uint64_t i = 0;
  for (; i + P <= n; i += P) {
    if constexpr (kQuads)
      gemm_tile_inline<P, V, kQuads, kPairs>(op, w, singles, singles_end, q + i, s_begin, s_end,
                                             accumulate, y + i * kGemmK);
    else
      gemm_tile<P, V, kQuads, kPairs>(op, w, singles, singles_end, q + i, s_begin, s_end,
                                      accumulate, y + i * kGemmK);
  }
  auto rest = [&](auto tile) __attribute__((target("avx2"), always_inline)) {
    tile(op, w, singles, singles_end, q + i, s_begin, s_end, accumulate, y + i * kGemmK);
  };
  switch (n - i) {
    case 5:
      if constexpr (P > 5) rest(gemm_tile<5, V, kQuads, kPairs>);
      return;
    case 4:
      if constexpr (P > 4) rest(gemm_tile<4, V, kQuads, kPairs>);
      return;
    case 3:
      return rest(gemm_tile<3, V, kQuads, kPairs>);
    case 2:
      return rest(gemm_tile<2, V, kQuads, kPairs>);
    case 1:
      return rest(gemm_tile<1, V, kQuads, kPairs>);
    default:
      return;
  }
}

template <bool kQuads>
__attribute__((target("avx2"))) static void gemm_avx2(const GemmOperands& op, std::uint64_t kb,
                                                      std::uint64_t blocks, const std::uint64_t* q,
                                                      std::uint64_t n, std::uint64_t s_begin,
                                                      std::uint64_t s_end, bool accumulate,
                                                      std::int32_t* y) {
  if (op.offset_first)  // _mm256_maddubs_epi16 would saturate on x + 128
    fail("dense_conv: the AVX2 tiles were given u8 quads of x + 128");
  if (kQuads && op.single_begin &&
      (kb % 2 || pair_boundary(op, kb, s_begin) != s_begin ||
       pair_boundary(op, kb, s_end) != s_end))
    fail(
        "dense_conv: u8 quad pairs from block {} over steps [{}, {}) (an odd block, or a pair cut)",
        kb, s_begin, s_end);
  // The pairs' loop holds 2 broadcasts and their 2 products per pixel: it takes 4 pixels a tile
  // (with 5 it spilled 2 of its 10 sums), when most of the group's steps pair.
  const bool paired = kQuads && takes_pairs(op, kb);
  if (blocks == 2 && paired)
    gemm_blocks<4, 2, true, true>(op, kb, q, n, s_begin, s_end, accumulate, y);
  else if (blocks == 2)
    gemm_blocks<kQuads ? 5 : 6, 2, kQuads, false>(op, kb, q, n, s_begin, s_end, accumulate, y);
  else if (blocks == 1 && paired)
    gemm_blocks<4, 1, true, true>(op, kb, q, n, s_begin, s_end, accumulate, y);
  else if (blocks == 1)
    gemm_blocks<5, 1, kQuads, false>(op, kb, q, n, s_begin, s_end, accumulate, y);
  else
    fail("dense_conv: {} blocks of output channels in one GEMM tile call", blocks);
}

void gemm_pairs_avx2(const GemmOperands& op, std::uint64_t kb, std::uint64_t blocks,
                     const std::uint64_t* q, std::uint64_t n, std::uint64_t s_begin,
                     std::uint64_t s_end, bool accumulate, std::int32_t* y) {
  gemm_avx2<false>(op, kb, blocks, q, n, s_begin, s_end, accumulate, y);
}

void gemm_quads_avx2(const GemmOperands& op, std::uint64_t kb, std::uint64_t blocks,
                     const std::uint64_t* q, std::uint64_t n, std::uint64_t s_begin,
                     std::uint64_t s_end, bool accumulate, std::int32_t* y) {
  gemm_avx2<true>(op, kb, blocks, q, n, s_begin, s_end, accumulate, y);
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

// 32 values of 4 planes at a time: unpack bytes (a, b) and (c, d) into pairs, pairs into words
// (in each 128-bit half), then the halves put back in order; the OR of the inputs keeps any
// sign bit for the check.
__attribute__((target("avx2"))) bool interleave_quads_avx2(const std::int8_t* const* src,
                                                           std::uint64_t n, std::uint32_t* dst) {
  __m256i any = _mm256_setzero_si256();
  std::uint64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i v[4];
    for (int p = 0; p < 4; ++p)
      v[p] = src[p] ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src[p] + i))
                    : _mm256_setzero_si256();
    const __m256i a = v[0], b = v[1], c = v[2], d = v[3];
    any = _mm256_or_si256(any, _mm256_or_si256(_mm256_or_si256(a, b), _mm256_or_si256(c, d)));
    const __m256i ab_lo = _mm256_unpacklo_epi8(a, b), ab_hi = _mm256_unpackhi_epi8(a, b);
    const __m256i cd_lo = _mm256_unpacklo_epi8(c, d), cd_hi = _mm256_unpackhi_epi8(c, d);
    const __m256i w0 = _mm256_unpacklo_epi16(ab_lo, cd_lo);  // values 0-3 | 16-19
    const __m256i w1 = _mm256_unpackhi_epi16(ab_lo, cd_lo);  // 4-7 | 20-23
    const __m256i w2 = _mm256_unpacklo_epi16(ab_hi, cd_hi);  // 8-11 | 24-27
    const __m256i w3 = _mm256_unpackhi_epi16(ab_hi, cd_hi);  // 12-15 | 28-31
    __m256i* out = reinterpret_cast<__m256i*>(dst + i);
    _mm256_storeu_si256(out, _mm256_permute2x128_si256(w0, w1, 0x20));
    _mm256_storeu_si256(out + 1, _mm256_permute2x128_si256(w2, w3, 0x20));
    _mm256_storeu_si256(out + 2, _mm256_permute2x128_si256(w0, w1, 0x31));
    _mm256_storeu_si256(out + 3, _mm256_permute2x128_si256(w2, w3, 0x31));
  }
  const std::int8_t* rest[4];
  for (int b = 0; b < 4; ++b) rest[b] = src[b] ? src[b] + i : nullptr;
  const bool tail = interleave_quads_scalar(rest, n - i, dst + i);
  return tail && _mm256_movemask_epi8(any) == 0;
}

// The shuffle of a DRAM word's bytes at `at` for output words [k0, k1) (byte 4k + b, or 2k + b
// for pairs): channel b's pixel first + (k - k0) * step, i.e. byte 4b + that pixel; -128 (a zero
// byte) for the other words and the lanes not listed.
__attribute__((target("avx2"))) static __m128i word_order(unsigned lanes, unsigned channels,
                                                          unsigned k0, unsigned k1, unsigned first,
                                                          unsigned step) {
  alignas(16) std::int8_t order[16];
  for (unsigned i = 0; i < 16; ++i) {
    const unsigned k = i / channels, b = i % channels;
    order[i] = k >= k0 && k < k1 && (lanes >> b & 1)
                   ? static_cast<std::int8_t>(4 * b + first + (k - k0) * step)
                   : std::int8_t{-128};
  }
  return _mm_load_si128(reinterpret_cast<const __m128i*>(order));
}

// Where the words of a row's pixels [p, p + (n - 1) * step] lie: when they are in one piece (a
// DRAM page: almost every row), word w is at first + (w - w0) * 32 with no piece lookup (whose
// loads the vector stores, which may alias anything, would otherwise repeat per word).
struct RowWords {
  const ImageWords& im;
  std::uint64_t w0, at;
  const std::uint8_t* first;
  bool one_piece;
  RowWords(const ImageWords& im, std::uint64_t group, std::uint64_t at, std::uint64_t p,
           std::uint64_t n, std::uint64_t step)
      : im(im), w0(group + p / 4), at(at), first(im.word(w0) + at) {
    const std::uint64_t w1 = group + (p + (n ? n - 1 : 0) * step) / 4;
    one_piece = (w0 + im.skew) >> im.piece_shift == (w1 + im.skew) >> im.piece_shift;
  }
  const std::uint8_t* operator()(std::uint64_t w) const {
    return one_piece ? first + (w - w0) * 32 : im.word(w) + at;
  }
};

// Runs f(p, n, dst) over the pieces of the run of pixels p, p + step, ... (n of them) whose
// words lie in one DRAM piece each (a group's 784 words at 56x56 span two 64 KiB pages about
// half the time), so each call takes RowWords' one-piece addressing instead of a page lookup per
// word (the standalone row packer, 256 channels of 56x56 in cache: 58 -> 44 us). Returns whether
// every call did.
template <typename F>
bool by_pieces(const ImageWords& im, std::uint64_t group, std::uint64_t p, std::uint64_t n,
               std::uint64_t step, std::uint32_t* dst, F&& f) {
  bool ok = true;
  while (n > 0) {
    const std::uint64_t at = group + p / 4 + im.skew;  // the first word's place in the pieces
    const std::uint64_t next_piece = (at >> im.piece_shift) + 1;
    // The first pixel whose word is in the next piece, and how many of the run come before it.
    const std::uint64_t limit = ((next_piece << im.piece_shift) - im.skew - group) * 4;
    const std::uint64_t count = std::min(n, (limit - p + step - 1) / step);
    ok &= f(p, count, dst);
    p += count * step, dst += count, n -= count;
  }
  return ok;
}

// Step 1: one shuffle per DRAM word, the words the run starts or ends inside of stored under a
// mask of their count of pixels (the shuffle's order moved on by the first pixel's place in the
// word, masked out of the check too). Step 2: from p % 4 = 0 or 1, two words' pixels p % 4 and
// p % 4 + 2 (shuffled apart, then ORed) per 4 outputs; the pixels before and after (and other
// steps) by the scalar loop. Quads: channel c0 + b's pixel i of a word is byte 4b + i of its
// half, output word k's byte b.
__attribute__((target("avx2"))) bool quad_row_avx2(const ImageWords& im, std::uint64_t c0,
                                                   unsigned lanes, std::uint64_t p, std::uint64_t n,
                                                   std::uint64_t step, std::uint32_t* dst) {
  if (step > 2) return quad_row_scalar(im, c0, lanes, p, n, step, dst);
  const std::uint64_t group = c0 / 8 * im.group_words();
  const RowWords words(im, group, (c0 % 8) * 4, p, n, step);
  if (!words.one_piece)
    return by_pieces(im, group, p, n, step, dst,
                     [&](std::uint64_t from, std::uint64_t count, std::uint32_t* out) {
                       return quad_row_avx2(im, c0, lanes, from, count, step, out);
                     });
  auto half = [&](std::uint64_t pixel) __attribute__((target("avx2"), always_inline)) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(words(group + pixel / 4)));
  };
  __m128i any = _mm_setzero_si128();
  if (step == 1) {
    const __m128i order = word_order(lanes, 4, 0, 4, 0, 1);
    const __m128i index = _mm_setr_epi32(0, 1, 2, 3);
    // Outputs [k, k + count) from the word of pixel p + k, starting at its pixel `first`.
    auto part = [&](std::uint64_t k, std::uint64_t first, std::uint64_t count)
        __attribute__((target("avx2"), always_inline)) {
      const __m128i mask = _mm_cmpgt_epi32(_mm_set1_epi32(static_cast<int>(count)), index);
      const __m128i v = _mm_and_si128(
          _mm_shuffle_epi8(half(p + k),
                           _mm_add_epi8(order, _mm_set1_epi8(static_cast<char>(first)))),
          mask);
      any = _mm_or_si128(any, v);
      _mm_maskstore_epi32(reinterpret_cast<int*>(dst + k), mask, v);
    };
    std::uint64_t k = 0;
    if (p % 4 && n) {
      k = std::min(n, 4 - p % 4);
      part(0, p % 4, k);
    }
    for (; k + 4 <= n; k += 4) {
      const __m128i v = _mm_shuffle_epi8(half(p + k), order);
      any = _mm_or_si128(any, v);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + k), v);
    }
    if (k < n) part(k, 0, n - k);
    return _mm_movemask_epi8(any) == 0;
  }
  std::uint64_t head = 0;
  while (head < n && (p + head * step) % 4 >= 2) ++head;
  bool ok = quad_row_scalar(im, c0, lanes, p, head, step, dst);
  p += head * step, dst += head, n -= head;
  const auto first = static_cast<unsigned>(p % 4);
  const __m128i lo = word_order(lanes, 4, 0, 2, first, 2);
  const __m128i hi = word_order(lanes, 4, 2, 4, first, 2);
  std::uint64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const std::uint64_t pixel = p + 2 * k;
    const __m128i v =
        _mm_or_si128(_mm_shuffle_epi8(half(pixel), lo), _mm_shuffle_epi8(half(pixel + 4), hi));
    any = _mm_or_si128(any, v);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + k), v);
  }
  ok &= quad_row_scalar(im, c0, lanes, p + k * step, n - k, step, dst + k);
  return ok && _mm_movemask_epi8(any) == 0;
}

// Pairs: the 8 bytes of channels c0 and c0 + 1 (two words' 8 bytes side by side at step 2)
// shuffled into (c0, c0 + 1) byte pairs per pixel, then widened to int16; partial words at step
// 1 as for the quads.
__attribute__((target("avx2"))) void pair_row_avx2(const ImageWords& im, std::uint64_t c0,
                                                   unsigned lanes, std::uint64_t p, std::uint64_t n,
                                                   std::uint64_t step, std::uint32_t* dst) {
  if (step > 2) return pair_row_scalar(im, c0, lanes, p, n, step, dst);
  const std::uint64_t group = c0 / 8 * im.group_words();
  const RowWords words(im, group, (c0 % 8) * 4, p, n, step);
  if (!words.one_piece) {
    by_pieces(im, group, p, n, step, dst,
              [&](std::uint64_t from, std::uint64_t count, std::uint32_t* out) {
                pair_row_avx2(im, c0, lanes, from, count, step, out);
                return true;
              });
    return;
  }
  auto bytes8 = [&](std::uint64_t pixel) __attribute__((target("avx2"), always_inline)) {
    return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(words(group + pixel / 4)));
  };
  if (step == 1) {
    const __m128i order = word_order(lanes & 3, 2, 0, 4, 0, 1);
    const __m128i index = _mm_setr_epi32(0, 1, 2, 3);
    auto part = [&](std::uint64_t k, std::uint64_t first, std::uint64_t count)
        __attribute__((target("avx2"), always_inline)) {
      const __m128i mask = _mm_cmpgt_epi32(_mm_set1_epi32(static_cast<int>(count)), index);
      const __m128i v = _mm_shuffle_epi8(
          bytes8(p + k), _mm_add_epi8(order, _mm_set1_epi8(static_cast<char>(first))));
      _mm_maskstore_epi32(reinterpret_cast<int*>(dst + k), mask, _mm_cvtepi8_epi16(v));
    };
    std::uint64_t k = 0;
    if (p % 4 && n) {
      k = std::min(n, 4 - p % 4);
      part(0, p % 4, k);
    }
    for (; k + 4 <= n; k += 4)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + k),
                       _mm_cvtepi8_epi16(_mm_shuffle_epi8(bytes8(p + k), order)));
    if (k < n) part(k, 0, n - k);
    return;
  }
  std::uint64_t head = 0;
  while (head < n && (p + head * step) % 4 >= 2) ++head;
  pair_row_scalar(im, c0, lanes, p, head, step, dst);
  p += head * step, dst += head, n -= head;
  const auto first = static_cast<unsigned>(p % 4);
  // Word w's 8 bytes in bytes 0-7, word w + 1's in 8-15: the second pair of outputs reads 8
  // bytes further on.
  alignas(16) std::int8_t order[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(order), word_order(lanes & 3, 2, 0, 2, first, 2));
  for (unsigned i = 4; i < 8; ++i)
    order[i] = order[i - 4] < 0 ? order[i - 4] : static_cast<std::int8_t>(order[i - 4] + 8);
  const __m128i both = _mm_load_si128(reinterpret_cast<const __m128i*>(order));
  std::uint64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const std::uint64_t pixel = p + 2 * k;
    const __m128i v = _mm_unpacklo_epi64(bytes8(pixel), bytes8(pixel + 4));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + k),
                     _mm_cvtepi8_epi16(_mm_shuffle_epi8(v, both)));
  }
  pair_row_scalar(im, c0, lanes, p + k * step, n - k, step, dst + k);
}

// y rows (pixel-major, kGemmK lanes) to output planes: 8 pixels x 8 channels per transpose.
__attribute__((target("avx2"))) void lanes_out_avx2(const std::int32_t* y, std::uint64_t n,
                                                    std::uint64_t k_count, std::int32_t* out,
                                                    std::uint64_t out_stride) {
  // Channel blocks outer: each output row is written front to back (a channel block's 8 rows at
  // a time), which the store path takes far better than 64 rows advancing together.
  const std::uint64_t n8 = n / 8 * 8;
  for (std::uint64_t k = 0; k < k_count; k += 8) {
    for (std::uint64_t i = 0; i < n8; i += 8) {
      __m256i r[8];
      for (std::uint64_t j = 0; j < 8; ++j)
        r[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + (i + j) * kGemmK + k));
      transpose8(r);
      for (std::uint64_t j = 0; j < 8 && k + j < k_count; ++j)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (k + j) * out_stride + i), r[j]);
    }
    for (std::uint64_t j = k; j < k + 8 && j < k_count; ++j)
      for (std::uint64_t i = n8; i < n; ++i) out[j * out_stride + i] = y[i * kGemmK + j];
  }
}

// 8 pixels at a time: a vector from each plane (zeros past `count`), transposed to one vector per
// pixel, bytes reversed per lane; the last pixels one by one.
__attribute__((target("avx2"))) void planes_to_be32_rows_avx2(const std::int32_t* planes,
                                                              std::uint64_t count,
                                                              std::uint64_t pixels,
                                                              std::uint8_t* out) {
  const __m256i bswap = device::detail::int32_byte_swap();
  std::uint64_t p = 0;
  for (; p + 8 <= pixels; p += 8) {
    __m256i r[8];
    for (std::uint64_t j = 0; j < 8; ++j)
      r[j] = j < count
                 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(planes + j * pixels + p))
                 : _mm256_setzero_si256();
    transpose8(r);
    for (std::uint64_t i = 0; i < 8; ++i)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (p + i) * 32),
                          _mm256_shuffle_epi8(r[i], bswap));
  }
  planes_to_be32_rows_scalar(planes, count, pixels, 8, out, p);
}

// Channels [k0, k0 + 8) in the 8 int32 lanes. Packed input: word (y * W + x) * 8 + j holds
// plane k0 + j's values at (y, x) and (y, x + 1) as an int16 pair (0 past the row's end), so one
// load gives 8 channels' horizontally adjacent tap pair and one _mm256_madd_epi16 with the
// channels' weight pairs adds 16 products; a kernel row of kw taps is ceil(kw / 2) pairs. The
// packing is itself vector work: 16 columns of a channel's row widened and paired, then 8
// channels transposed into 8-lane words.
__attribute__((target("avx2"))) void depthwise_lanes_avx2(const DepthwiseLanes& c, std::uint64_t k0,
                                                          std::int32_t* acc) {
  const std::uint64_t H = c.padded_h, W = c.padded_w, s = c.stride;
  const std::uint64_t oh = c.oh(), ow = c.ow(), P = oh * ow, taps = c.kh * c.kw;
  const std::uint64_t cn = std::min<std::uint64_t>(8, c.channels - k0);
  const std::uint64_t row_chunks = (W + 15) / 16;
  thread_local std::vector<std::uint32_t> xbuf;
  thread_local std::vector<std::int32_t> tbuf;
  thread_local std::vector<std::int8_t> rows;
  xbuf.resize(H * W * 8 + row_chunks * 16 * 8);  // the last row's chunk writes past W
  tbuf.resize(P * 8 + 8);
  const std::uint64_t rb = row_chunks * 16 + 16;  // a channel's row, zero-padded for the loads
  rows.assign(8 * rb, 0);
  std::uint32_t* X = xbuf.data();
  for (std::uint64_t y = 0; y < H; ++y) {
    for (std::uint64_t j = 0; j < cn; ++j)
      std::memcpy(rows.data() + j * rb, c.planes + ((k0 + j) * H + y) * W, W);
    for (std::uint64_t x = 0; x < W; x += 16) {
      __m256i lo[8], hi[8];
      for (std::uint64_t j = 0; j < 8; ++j) {
        const std::int8_t* r = rows.data() + j * rb + x;
        const __m256i a =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r)));
        const __m256i b =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 1)));
        const __m256i l = _mm256_unpacklo_epi16(a, b), h = _mm256_unpackhi_epi16(a, b);
        lo[j] = _mm256_permute2x128_si256(l, h, 0x20);  // pairs at x .. x + 7
        hi[j] = _mm256_permute2x128_si256(l, h, 0x31);  // x + 8 .. x + 15
      }
      transpose8(lo);
      transpose8(hi);
      __m256i* out = reinterpret_cast<__m256i*>(X + (y * W + x) * 8);
      for (std::uint64_t i = 0; i < 8; ++i) _mm256_storeu_si256(out + i, lo[i]);
      for (std::uint64_t i = 0; i < 8; ++i) _mm256_storeu_si256(out + 8 + i, hi[i]);
    }
  }
  // Weight pairs per (kernel row, pair): lanes j = (w[dx], w[dx + 1]) of channel k0 + j.
  const std::uint64_t kw2 = (c.kw + 1) / 2, n_pairs = c.kh * kw2;
  __m256i wv[16];
  std::int64_t off[16];
  for (std::uint64_t i = 0; i < c.kh; ++i)
    for (std::uint64_t m = 0; m < kw2; ++m) {
      alignas(32) std::uint32_t lanes[8] = {};
      for (std::uint64_t j = 0; j < cn; ++j) {
        const std::int8_t* w = c.taps + (k0 + j) * taps + i * c.kw;
        const std::int16_t a = w[2 * m], b = 2 * m + 1 < c.kw ? w[2 * m + 1] : 0;
        lanes[j] = static_cast<std::uint16_t>(a) |
                   (static_cast<std::uint32_t>(static_cast<std::uint16_t>(b)) << 16);
      }
      wv[i * kw2 + m] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
      off[i * kw2 + m] = static_cast<std::int64_t>((i * W + 2 * m) * 8);
    }
  std::int32_t* T = tbuf.data();
  // 4 pixels of a row at a time: 4 independent sums share each weight pair and the loop.
  const std::uint64_t step = s * 8;  // words from one output pixel's inputs to the next's
  for (std::uint64_t y = 0; y < oh; ++y) {
    std::uint64_t x = 0;
    for (; x + 4 <= ow; x += 4) {
      const std::uint32_t* base = X + (y * s * W + x * s) * 8;
      __m256i sum[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                        _mm256_setzero_si256()};
      for (std::uint64_t q = 0; q < n_pairs; ++q) {
        const std::uint32_t* b = base + off[q];
        const __m256i w = wv[q];
#pragma GCC unroll 4
        for (std::uint64_t i = 0; i < 4; ++i)
          sum[i] = _mm256_add_epi32(
              sum[i], _mm256_madd_epi16(
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i * step)), w));
      }
#pragma GCC unroll 4
      for (std::uint64_t i = 0; i < 4; ++i)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(T + (y * ow + x + i) * 8), sum[i]);
    }
    for (; x < ow; ++x) {
      const std::uint32_t* base = X + (y * s * W + x * s) * 8;
      __m256i sum = _mm256_setzero_si256();
      for (std::uint64_t q = 0; q < n_pairs; ++q)
        sum = _mm256_add_epi32(
            sum, _mm256_madd_epi16(
                     _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base + off[q])), wv[q]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(T + (y * ow + x) * 8), sum);
    }
  }
  // [pixel][channel] -> acc[channel][pixel], 8 pixels at a time.
  std::uint64_t p = 0;
  for (; p + 8 <= P; p += 8) {
    __m256i r[8];
    for (std::uint64_t i = 0; i < 8; ++i)
      r[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(T + (p + i) * 8));
    transpose8(r);
    for (std::uint64_t j = 0; j < cn; ++j)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + (k0 + j) * P + p), r[j]);
  }
  for (; p < P; ++p)
    for (std::uint64_t j = 0; j < cn; ++j) acc[(k0 + j) * P + p] = T[p * 8 + j];
}

#else

void connection_avx2(const PlaneSet&, std::uint64_t, const std::int8_t*, std::int32_t*) {
  fail("connection_conv: AVX2 on a CPU that is not x86");
}

void depthwise_lanes_avx2(const DepthwiseLanes&, std::uint64_t, std::int32_t*) {
  fail("depthwise_lanes: AVX2 on a CPU that is not x86");
}

void gemm_pairs_avx2(const GemmOperands&, std::uint64_t, std::uint64_t, const std::uint64_t*,
                     std::uint64_t, std::uint64_t, std::uint64_t, bool, std::int32_t*) {
  fail("dense_conv: AVX2 tiles on a CPU that is not x86");
}

void gemm_quads_avx2(const GemmOperands&, std::uint64_t, std::uint64_t, const std::uint64_t*,
                     std::uint64_t, std::uint64_t, std::uint64_t, bool, std::int32_t*) {
  fail("dense_conv: AVX2 tiles on a CPU that is not x86");
}

bool interleave_quads_avx2(const std::int8_t* const*, std::uint64_t, std::uint32_t*) {
  fail("dense_conv: AVX2 on a CPU that is not x86");
}

bool quad_row_avx2(const ImageWords&, std::uint64_t, unsigned, std::uint64_t, std::uint64_t,
                   std::uint64_t, std::uint32_t*) {
  fail("dense_conv: AVX2 on a CPU that is not x86");
}

void pair_row_avx2(const ImageWords&, std::uint64_t, unsigned, std::uint64_t, std::uint64_t,
                   std::uint64_t, std::uint32_t*) {
  fail("dense_conv: AVX2 on a CPU that is not x86");
}

void planes_to_be32_rows_avx2(const std::int32_t*, std::uint64_t, std::uint64_t, std::uint8_t*) {
  fail("planes_to_be32_rows: AVX2 on a CPU that is not x86");
}

void lanes_out_avx2(const std::int32_t*, std::uint64_t, std::uint64_t, std::int32_t*,
                    std::uint64_t) {
  fail("dense_conv: AVX2 on a CPU that is not x86");
}

#endif

}  // namespace npukit::device::conv_kernels::detail
