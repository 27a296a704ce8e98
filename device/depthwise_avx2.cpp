// The planar depthwise form (device/depthwise.h) with AVX2: per channel, its int8 plane to int16
// pair words in a per-thread buffer, then per output row 8 pixels per vector, one
// _mm256_madd_epi16 per tap pair (|lane| <= 2 * 2^14; the pairs' sum <= 16 * 2^14, exact).
// Compiled with target attributes, so only these functions need AVX2; depthwise() checks the
// CPU first.
#include "device/depthwise.h"

#include "common/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>
#endif

namespace npukit::device::conv_kernels::detail {

#if defined(__x86_64__) || defined(__i386__)

namespace {

struct WordsTag;

// out[2f] = in[f], out[2f + 1] = in[f + 1] for f < n: bytes (f, f + 1) interleaved, then
// widened; in 16-word chunks, the last one reading up to in[n + 15] when `overread` (another
// plane follows) and a zero-padded copy of the rest otherwise (in[n] is then read as 0; either
// way it only meets weight 0).
__attribute__((target("avx2"))) void pair_words(const std::int8_t* in, std::uint64_t n,
                                                bool overread, std::int16_t* out) {
  std::uint64_t f = 0;
  for (; overread ? f < n : f + 17 <= n; f += 16) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + f));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + f + 1));
    __m256i* o = reinterpret_cast<__m256i*>(out + 2 * f);
    _mm256_storeu_si256(o, _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, b)));
    _mm256_storeu_si256(o + 1, _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(a, b)));
  }
  if (f >= n) return;
  alignas(16) std::int8_t tmp[48] = {};
  std::memcpy(tmp, in + f, n - f);  // n - f <= 16
  const __m128i a = _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(tmp + 1));
  __m256i* o = reinterpret_cast<__m256i*>(out + 2 * f);
  _mm256_storeu_si256(o, _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, b)));
  _mm256_storeu_si256(o + 1, _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(a, b)));
}

// out[e] = in[e] for e < n, in 16-element chunks: the last one reads up to in[n + 14] when
// `overread` (another plane follows), else a zero-padded copy of the rest.
__attribute__((target("avx2"))) void widen(const std::int8_t* in, std::uint64_t n, bool overread,
                                           std::int16_t* out) {
  std::uint64_t e = 0;
  for (; overread ? e < n : e + 16 <= n; e += 16)
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(out + e),
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + e))));
  if (e >= n) return;
  alignas(16) std::int8_t tmp[16] = {};
  std::memcpy(tmp, in + e, n - e);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + e),
                      _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(tmp))));
}

// 8 pair words from p: int16 elements as they are, or int8 ones widened on the way.
template <typename T>
__attribute__((target("avx2"), always_inline)) inline __m256i words_at(const T* p) {
  if constexpr (sizeof(T) == 2)
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  else
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// The 8 sums of output pixels whose pair words start at p (see rows).
template <int NP, typename T>
__attribute__((target("avx2"), always_inline)) inline __m256i sum8(const __m256i* w,
                                                                   const std::int64_t* off,
                                                                   std::uint64_t np, const T* p) {
  __m256i s = _mm256_madd_epi16(words_at(p + off[0]), w[0]);
#pragma GCC unroll 16
  for (std::uint64_t q = 1; q < (NP > 0 ? static_cast<std::uint64_t>(NP) : np); ++q)
    s = _mm256_add_epi32(s, _mm256_madd_epi16(words_at(p + off[q]), w[q]));
  return s;
}

// One channel's output rows. Output (y, x)'s tap pair q reads the word at int16 element
// 2 * y * W + 2 * x + off[q] of the buffer (both strides; see depthwise.h) and multiplies it by
// weight word q of `words` (words 0-7 in words[0], 8-15 in words[1]), broadcast here. NP > 0
// fixes the pair count at compile time (weights and offsets then stay in registers), NP = 0
// reads n_pairs. A row's last vector may run past the row: its extra lanes land on later rows
// of the channel or of the next channels of the call, all written after it; a vector that would
// reach `limit` (elements from `out`: past the call's channels) stores its row's pixels alone
// (masked).
template <int NP, typename T>
__attribute__((target("avx2"))) void rows(const T* X, std::uint64_t W, std::uint64_t oh,
                                          std::uint64_t ow, const __m256i* words,
                                          const std::int64_t* offsets, std::uint64_t n_pairs,
                                          std::uint64_t limit, std::int32_t* out) {
  const std::uint64_t np = NP > 0 ? static_cast<std::uint64_t>(NP) : n_pairs;
  constexpr int kCount = NP > 0 ? NP : 16;
  __m256i w[kCount];
  std::int64_t off[kCount];
#pragma GCC unroll 16
  for (int q = 0; q < kCount; ++q) {
    w[q] = _mm256_permutevar8x32_epi32(words[q / 8], _mm256_set1_epi32(q % 8));
    off[q] = offsets[q];
  }
  auto store = [&](std::int32_t * o, __m256i v, std::uint64_t pos, std::uint64_t valid)
      __attribute__((target("avx2"), always_inline)) {
    if (pos + 8 <= limit) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), v);
    } else {
      const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(valid)),
                                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      _mm256_maskstore_epi32(o, mask, v);
    }
  };
  if (ow <= 8) {  // small planes: one vector per row
    for (std::uint64_t y = 0; y < oh; ++y)
      store(out + y * ow, sum8<NP, T>(w, off, np, X + 2 * y * W), y * ow, ow);
    return;
  }
  for (std::uint64_t y = 0; y < oh; ++y) {
    const T* row = X + 2 * y * W;
    std::int32_t* o = out + y * ow;
    std::uint64_t x = 0;
    for (; x + 16 <= ow; x += 16) {
      const __m256i s0 = sum8<NP, T>(w, off, np, row + 2 * x);
      const __m256i s1 = sum8<NP, T>(w, off, np, row + 2 * x + 16);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + x), s0);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + x + 8), s1);
    }
    for (; x < ow; x += 8) store(o + x, sum8<NP, T>(w, off, np, row + 2 * x), y * ow + x, ow - x);
  }
}

// rows with the pair count fixed at compile time for the counts the split kernels of the zoo
// give (3x3: 6; 5x5 split into 5x3 + 5x2 pieces: 10 and 5; 1xN, Nx1 and the rest), else read.
template <typename T>
__attribute__((target("avx2"))) void rows_fixed(const T* X, std::uint64_t W, std::uint64_t oh,
                                                std::uint64_t ow, const __m256i* words,
                                                const std::int64_t* off, std::uint64_t n_pairs,
                                                std::uint64_t limit, std::int32_t* out) {
  switch (n_pairs) {
    case 1:
      return rows<1, T>(X, W, oh, ow, words, off, n_pairs, limit, out);
    case 2:
      return rows<2, T>(X, W, oh, ow, words, off, n_pairs, limit, out);
    case 3:
      return rows<3, T>(X, W, oh, ow, words, off, n_pairs, limit, out);
    case 4:
      return rows<4, T>(X, W, oh, ow, words, off, n_pairs, limit, out);
    case 5:
      return rows<5, T>(X, W, oh, ow, words, off, n_pairs, limit, out);
    case 6:
      return rows<6, T>(X, W, oh, ow, words, off, n_pairs, limit, out);
    case 8:
      return rows<8, T>(X, W, oh, ow, words, off, n_pairs, limit, out);
    case 9:
      return rows<9, T>(X, W, oh, ow, words, off, n_pairs, limit, out);
    case 10:
      return rows<10, T>(X, W, oh, ow, words, off, n_pairs, limit, out);
    default:
      return rows<0, T>(X, W, oh, ow, words, off, n_pairs, limit, out);
  }
}

}  // namespace

__attribute__((target("avx2"))) void depthwise_planar_avx2(const DepthwiseLanes& c,
                                                           std::uint64_t k_begin,
                                                           std::uint64_t k_end, std::int32_t* acc) {
  if (!depthwise_planar_fits(c))
    fail("depthwise: the planar form got a {}x{} kernel with stride {} on a {}x{} plane", c.kh,
         c.kw, c.stride, c.padded_h, c.padded_w);
  const std::uint64_t H = c.padded_h, W = c.padded_w, s = c.stride, n = H * W;
  const std::uint64_t oh = c.oh(), ow = c.ow(), P = oh * ow, taps = c.kh * c.kw;
  const std::uint64_t half = (c.kw + 1) / 2, n_pairs = c.kh * half;  // <= 16
  // Per pair q (kernel row i, taps 2m and 2m + 1): its element offset from the row base (at
  // stride 1 word (y + i) * W + x + 2m of the pair plane, at stride 2 element
  // (2y + i) * W + 2x + 2m of the widened plane), and where its two weights are among a
  // channel's taps (pick: bytes 2q, 2q + 1 of the shuffle; 0x80 gives the 0 of an odd row's
  // last pair). Pairs past n_pairs multiply nothing (offset 0, weights 0).
  std::int64_t off[16] = {};
  alignas(16) std::uint8_t pick[32];
  std::fill_n(pick, 32, std::uint8_t{0x80});
  for (std::uint64_t i = 0; i < c.kh; ++i)
    for (std::uint64_t m = 0; m < half; ++m) {
      const std::uint64_t q = i * half + m;
      off[q] = static_cast<std::int64_t>(s == 1 ? 2 * (i * W + 2 * m) : i * W + 2 * m);
      pick[2 * q] = static_cast<std::uint8_t>(i * c.kw + 2 * m);
      if (2 * m + 1 < c.kw) pick[2 * q + 1] = static_cast<std::uint8_t>(i * c.kw + 2 * m + 1);
    }
  const __m128i pick_lo = _mm_load_si128(reinterpret_cast<const __m128i*>(pick));
  const __m128i pick_hi = _mm_load_si128(reinterpret_cast<const __m128i*>(pick + 16));
  // The word buffers (two, see `ahead` below). Every element a vector can read is written or was
  // zeroed when the buffer grew; past the plane it only meets weight 0 or lanes not stored.
  std::vector<std::int16_t>& buffer = thread_buffer<std::int16_t, WordsTag>();
  const std::uint64_t elements = ((s == 1 ? 2 * n : n) + 64 + 15) / 16 * 16;
  if (buffer.size() < 2 * elements) buffer.resize(2 * elements);  // zeros when it grows
  std::int16_t* const X[2] = {buffer.data(), buffer.data() + elements};
  // Loads may run 16 bytes past plane k when another plane of the layer follows. At stride 2
  // the int8 plane is then read directly (widened by the loads, 16 bytes for 8 outputs), else
  // its words are built in a buffer first.
  auto overread = [&](std::uint64_t k) { return (c.channels - k - 1) * n >= 16; };
  auto direct = [&](std::uint64_t k) { return s == 2 && overread(k); };
  auto build = [&](std::uint64_t k, std::int16_t* x) {
    if (direct(k)) return;
    const std::int8_t* plane = c.planes + k * n;
    if (s == 1)
      pair_words(plane, n, overread(k), x);
    else
      widen(plane, n, overread(k), x);
  };
  // Small planes: channel k + 1's words are built while channel k's are read, so the loads never
  // wait on stores just made; large ones: one buffer, built just before it is read (two would
  // not stay in L1, and the first stores are long done when the sums reach them).
  const bool ahead = elements <= 4096;
  if (ahead) build(k_begin, X[0]);
  for (std::uint64_t k = k_begin; k < k_end; ++k) {
    const std::int16_t* x = X[ahead ? (k - k_begin) % 2 : 0];
    if (!ahead)
      build(k, X[0]);
    else if (k + 1 < k_end)
      build(k + 1, X[(k + 1 - k_begin) % 2]);
    // The channel's taps (16 bytes read when the layer's taps go on that far) to weight words.
    __m128i t;
    if ((c.channels - k) * taps >= 16) {
      t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(c.taps + k * taps));
    } else {
      alignas(16) std::int8_t tmp[16] = {};
      std::memcpy(tmp, c.taps + k * taps, taps);
      t = _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
    }
    const __m256i words[2] = {_mm256_cvtepi8_epi16(_mm_shuffle_epi8(t, pick_lo)),
                              _mm256_cvtepi8_epi16(_mm_shuffle_epi8(t, pick_hi))};
    std::int32_t* out = acc + k * P;
    const std::uint64_t limit = (k_end - k) * P;  // this channel's plane and the call's next ones
    const std::int8_t* plane = c.planes + k * n;
    if (direct(k))
      rows_fixed(plane, W, oh, ow, words, off, n_pairs, limit, out);
    else
      rows_fixed(x, W, oh, ow, words, off, n_pairs, limit, out);
  }
}

// 16 int8 values at p widened to int16; through a zeroed buffer when fewer than 16 bytes are
// left before end.
__attribute__((target("avx2"), always_inline)) inline __m256i widen16(const std::int8_t* p,
                                                                      const std::int8_t* end) {
  if (end - p >= 16)
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  alignas(16) std::int8_t b[16] = {};
  std::memcpy(b, p, static_cast<std::size_t>(end - p));
  return _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(b)));
}

// The windows form: per output pixel, each kernel row's kw <= 16 inputs and taps widened to
// int16 side by side, one _mm256_madd_epi16 for the row (taps past kw masked to 0, so whatever
// the 16-byte load picked up past the row adds nothing), the rows' int32 lanes added, then the
// 8 lanes summed. A load that would run past the last plane (or the last channel's taps) goes
// through a zeroed buffer.
__attribute__((target("avx2"))) void depthwise_windows_avx2(const DepthwiseLanes& c,
                                                            std::uint64_t k_begin,
                                                            std::uint64_t k_end,
                                                            std::int32_t* acc) {
  if (c.kh * c.kw > 16 || c.padded_h < c.kh || c.padded_w < c.kw || c.stride < 1)
    fail("depthwise: the windows form got a {}x{} kernel with stride {} on a {}x{} plane", c.kh,
         c.kw, c.stride, c.padded_h, c.padded_w);
  const std::uint64_t H = c.padded_h, W = c.padded_w, s = c.stride, taps = c.kh * c.kw;
  const std::uint64_t oh = c.oh(), ow = c.ow(), P = oh * ow;
  const std::int8_t* const planes_end = c.planes + c.channels * H * W;
  const std::int8_t* const taps_end = c.taps + c.channels * taps;
  const __m256i keep =
      _mm256_cmpgt_epi16(_mm256_set1_epi16(static_cast<std::int16_t>(c.kw)),
                         _mm256_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  auto sum_lanes = [](__m256i v) __attribute__((target("avx2"), always_inline)) {
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
    return _mm_cvtsi128_si32(_mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1)));
  };
  if (c.kh == 1 && P == 1) {  // one row into one pixel (a global pool's pieces): no loops inside
    for (std::uint64_t k = k_begin; k < k_end; ++k)
      acc[k] = sum_lanes(
          _mm256_madd_epi16(widen16(c.planes + k * H * W, planes_end),
                            _mm256_and_si256(widen16(c.taps + k * taps, taps_end), keep)));
    return;
  }
  __m256i w[16];
  for (std::uint64_t k = k_begin; k < k_end; ++k) {
    const std::int8_t* plane = c.planes + k * H * W;
    for (std::uint64_t i = 0; i < c.kh; ++i)
      w[i] = _mm256_and_si256(widen16(c.taps + k * taps + i * c.kw, taps_end), keep);
    for (std::uint64_t y = 0; y < oh; ++y)
      for (std::uint64_t x = 0; x < ow; ++x) {
        const std::int8_t* window = plane + y * s * W + x * s;
        __m256i sum = _mm256_setzero_si256();
        for (std::uint64_t i = 0; i < c.kh; ++i)
          sum = _mm256_add_epi32(sum, _mm256_madd_epi16(widen16(window + i * W, planes_end), w[i]));
        acc[k * P + y * ow + x] = sum_lanes(sum);
      }
  }
}

#else

void depthwise_planar_avx2(const DepthwiseLanes&, std::uint64_t, std::uint64_t, std::int32_t*) {
  fail("depthwise: AVX2 on a CPU that is not x86");
}

void depthwise_windows_avx2(const DepthwiseLanes&, std::uint64_t, std::uint64_t, std::int32_t*) {
  fail("depthwise: AVX2 on a CPU that is not x86");
}

#endif

}  // namespace npukit::device::conv_kernels::detail
