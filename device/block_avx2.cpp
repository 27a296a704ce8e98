// AVX2 paths of quantize_span and bias_span (device/block.h): 8 values at a time, the same
// integers as the scalar quantize(). The product acc * scale (|.| <= 2^46) is formed in 64-bit
// lanes with _mm256_mul_epi32 (even and odd lanes separately). The quantizer's two rounding
// shifts (QuantShift s, then EltWise's fp_cast f) are one: for integers
//   floor((floor((p + h1) / 2^s) + h2) / 2^f) = floor((p + h1 + h2 * 2^s) / 2^(s+f)),
// h1 = s ? 2^(s-1) : 0, h2 = f ? 2^(f-1) : 0. AVX2 has no 64-bit arithmetic shift, so the shift
// by T = s + f adds 2^62 first, shifts logically and subtracts 2^(62 - T): exact while the sum
// stays in [0, 2^63), which holds for T <= 62 (p + 2^62 >= 2^62 - 2^46, and h1 + h2 * 2^s <=
// 2^(T-1) + 2^(T-2) <= 2^61 + 2^60 when f > 0, h1 <= 2^61 when f = 0). The clamp to int8 is
// done on the input instead (Quantizer), so the lanes need no 64-bit compares.
#include "device/block.h"
#include "device/quantizer_avx2.h"

#include <algorithm>
#include <limits>
#include <type_traits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npukit::device::detail {

#if defined(__x86_64__) || defined(__i386__)

// h = h1 + h2 * 2^s of the file comment: the two rounding shifts' addends as one.
std::int64_t rounding_addend(int shift, int fp_cast_shift) {
  const std::int64_t h1 = shift > 0 ? std::int64_t{1} << (shift - 1) : 0;
  const std::int64_t h2 = fp_cast_shift > 0 ? std::int64_t{1} << (fp_cast_shift - 1) : 0;
  return h1 + (h2 << shift);
}

namespace {
__int128 floor_div(__int128 a, __int128 b) {  // b > 0
  const __int128 q = a / b;
  return q - ((a % b != 0) && (a < 0) ? 1 : 0);
}
__int128 ceil_div(__int128 a, __int128 b) { return -floor_div(-a, b); }  // b > 0

InputBounds compute_input_bounds(std::int32_t scale, int shift, int fp_cast_shift) {
  const int total = shift + fp_cast_shift;
  const std::int64_t h = rounding_addend(shift, fp_cast_shift);
  // q(v) <= -128 <=> v * scale + h <= -127 * 2^T - 1; q(v) >= 127 <=> v * scale + h >= 127 * 2^T.
  const __int128 unit = static_cast<__int128>(1) << total;
  const __int128 below = -127 * unit - 1 - h, above = 127 * unit - h;
  __int128 low = std::numeric_limits<std::int32_t>::min();
  __int128 high = std::numeric_limits<std::int32_t>::max();
  if (scale > 0) {
    low = floor_div(below, scale);  // the last v with q(v) <= -128
    high = ceil_div(above, scale);  // the first v with q(v) >= 127
  } else if (scale < 0) {           // q decreases: u = -v has the scale -scale
    low = -ceil_div(above, -static_cast<__int128>(scale));    // the last v with q(v) >= 127
    high = -floor_div(below, -static_cast<__int128>(scale));  // the first v with q(v) <= -128
  }
  const auto to_int32 = [](__int128 v) {
    return static_cast<std::int32_t>(std::clamp<__int128>(
        v, std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max()));
  };
  return {to_int32(low), to_int32(high)};
}
}  // namespace

// The same, remembered for the last parameters this thread asked for: the tails call per channel
// span (49 values on a 7x7 plane), and the two 128-bit divisions would cost more than the span.
InputBounds input_bounds(std::int32_t scale, int shift, int fp_cast_shift) {
  thread_local std::int32_t last_scale = 0;
  thread_local int last_shift = -1, last_fp_cast_shift = -1;
  thread_local InputBounds last{};
  if (scale != last_scale || shift != last_shift || fp_cast_shift != last_fp_cast_shift) {
    last = compute_input_bounds(scale, shift, fp_cast_shift);
    last_scale = scale, last_shift = shift, last_fp_cast_shift = fp_cast_shift;
  }
  return last;
}

namespace {
// Loop over 8-value blocks with the activation fixed at compile time (no branch in the body).
template <int kAct>
__attribute__((target("avx2"))) inline std::uint64_t quantize_blocks(
    const std::int32_t* acc, std::int32_t* out, std::uint64_t n, std::int32_t bias,
    std::int32_t scale, int shift, int fp_cast_shift, std::int32_t clip) {
  const Quantizer quant(scale, shift, fp_cast_shift, clip);
  const __m256i vbias = _mm256_set1_epi32(bias);
  std::uint64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        quant.template operator()<kAct>(_mm256_add_epi32(
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i)), vbias)));
  return i;
}
}  // namespace

__attribute__((target("avx2"))) void quantize_span_avx2(const std::int32_t* acc, std::int32_t* out,
                                                        std::uint64_t n, std::int32_t bias,
                                                        std::int32_t scale, int shift,
                                                        int fp_cast_shift, int act,
                                                        std::int32_t clip) {
  std::uint64_t i = 0;
  if (act == 0)
    i = quantize_blocks<0>(acc, out, n, bias, scale, shift, fp_cast_shift, clip);
  else if (act == 1)
    i = quantize_blocks<1>(acc, out, n, bias, scale, shift, fp_cast_shift, clip);
  else
    i = quantize_blocks<-1>(acc, out, n, bias, scale, shift, fp_cast_shift, clip);
  if (i < n)
    quantize_span(acc + i, out + i, n - i, bias, scale, shift, fp_cast_shift, act, clip,
                  Isa::kScalar);
}

__attribute__((target("avx2"))) void bias_span_avx2(const std::int32_t* acc, std::int32_t* out,
                                                    std::uint64_t n, std::int32_t bias) {
  const __m256i vbias = _mm256_set1_epi32(bias);
  std::uint64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(out + i),
        _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i)), vbias));
  if (i < n) bias_span(acc + i, out + i, n - i, bias, Isa::kScalar);
}

namespace {

// Checks that `t` has the vector form (the 9,8,8 layout, a vector tail kind) and calls
// f(quantize, act) with the kind and activation as compile-time constants
// (std::bool_constant, std::integral_constant<int>), as tail_words and tail_rows take them.
template <typename F>
void with_vector_tail(const TailWords& t, const char* what, F&& f) {
  using Kind = TailWords::Kind;
  if (t.channel_group != 8 || t.pixels_per_word != 4 || t.kind == Kind::kOther ||
      (t.kind == Kind::kBias && t.width != 4))
    fail("{}: not a 9,8,8 layout with a vector tail", what);
  using None = std::integral_constant<int, -1>;
  if (t.kind == Kind::kBias) return f(std::false_type{}, None{});
  if (t.act == 0) return f(std::true_type{}, std::integral_constant<int, 0>{});
  if (t.act == 1) return f(std::true_type{}, std::integral_constant<int, 1>{});
  return f(std::true_type{}, None{});
}

// Words [first, end) of the 9,8,8 layout with the tail's kind and activation fixed at compile
// time. A whole word is 8 channels x 4 pixels: channels j and j + 1 go in one vector (4 pixels
// each, 16 contiguous bytes of planar acc per channel), which is also the order of their 32
// bytes of big-endian accumulants in the OpWidth-4 word.
template <bool kQuant, int kAct>
__attribute__((target("avx2"))) void tail_words(const TailWords& t, std::uint64_t first,
                                                std::uint64_t end, std::uint8_t* out,
                                                const std::uint8_t* accumulants) {
  const Quantizer quant(t.scale, t.shift, t.fp_cast_shift, t.clip);
  const __m256i bswap = int32_byte_swap();
  const std::uint64_t per_group = t.padded_pixels / 4, P = t.pixels, width = t.width;
  std::uint64_t c0 = first / per_group * 8, w = first % per_group;
  __m256i bias[4];
  std::uint64_t bias_group = ~std::uint64_t{0};
  for (std::uint64_t word = first; word < end; ++word) {
    const std::uint64_t p0 = w * 4, cn = std::min<std::uint64_t>(8, t.channels - c0);
    std::uint8_t* o = out + (word - first) * 32 * width;
    const std::uint8_t* a = accumulants ? accumulants + (word - first) * 128 : nullptr;
    // A word's pixels past the last (the last word of a group: a 7x7 plane's 49th pixel, the 1x1
    // output of a global pool's pieces) are read as 0 and written as 0.
    const std::uint64_t real = std::min<std::uint64_t>(4, P - p0);
    if (cn < 8) {
      tail_word_scalar(t, c0, cn, p0, real, o, a);
    } else {
      if (bias_group != c0) {
        bias_group = c0;
        for (int jj = 0; jj < 4; ++jj)
          bias[jj] = t.bias ? _mm256_setr_m128i(_mm_set1_epi32(t.bias[c0 + 2 * jj]),
                                                _mm_set1_epi32(t.bias[c0 + 2 * jj + 1]))
                            : _mm256_setzero_si256();
      }
      const std::int32_t* x = t.acc + c0 * P + p0;
      const __m128i pixel_ok =
          _mm_cmpgt_epi32(_mm_set1_epi32(static_cast<int>(real)), _mm_setr_epi32(0, 1, 2, 3));
      auto pixels = [&](const std::int32_t* from) __attribute__((target("avx2"), always_inline)) {
        return real == 4 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(from))
                         : _mm_maskload_epi32(from, pixel_ok);
      };
      __m256i r[4];
      for (int jj = 0; jj < 4; ++jj) {
        const std::int32_t* x0 = x + 2 * jj * P;
        __m256i v = _mm256_setr_m128i(pixels(x0), pixels(x0 + P));
        if (a)
          v = _mm256_add_epi32(
              v, _mm256_shuffle_epi8(
                     _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + jj * 32)), bswap));
        v = _mm256_add_epi32(v, bias[jj]);
        if constexpr (kQuant) v = quant.template operator()<kAct>(v);
        r[jj] = v;
      }
      // Lanes and bytes are pixel-minor in both widths (element c * 4 + pixel).
      const __m256i keep = _mm256_setr_m128i(pixel_ok, pixel_ok);
      if (width == 4) {
        for (int jj = 0; jj < 4; ++jj) {
          const __m256i v = real == 4 ? r[jj] : _mm256_and_si256(r[jj], keep);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + jj * 32),
                              _mm256_shuffle_epi8(v, bswap));
        }
      } else {
        // int8 values (the quantizer clamped them), channel by channel, 4 bytes each.
        __m256i bytes = int8_lanes_to_bytes(r[0], r[1], r[2], r[3]);
        if (real < 4) {
          // Byte c * 4 + i for i < real: from each 32-bit lane's mask, the bytes of pixel i.
          const __m256i byte_keep =
              _mm256_cmpgt_epi8(_mm256_set1_epi8(static_cast<char>(real)),
                                _mm256_setr_epi8(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0,
                                                 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3));
          bytes = _mm256_and_si256(bytes, byte_keep);
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), bytes);
      }
    }
    if (++w == per_group) w = 0, c0 += 8;
  }
}

// The 4x4 int32 transpose in each 128-bit half: rows a, b, c, d become columns.
__attribute__((target("avx2"))) inline void transpose4(__m256i& a, __m256i& b, __m256i& c,
                                                       __m256i& d) {
  const __m256i t0 = _mm256_unpacklo_epi32(a, b), t1 = _mm256_unpackhi_epi32(a, b);
  const __m256i t2 = _mm256_unpacklo_epi32(c, d), t3 = _mm256_unpackhi_epi32(c, d);
  a = _mm256_unpacklo_epi64(t0, t2), b = _mm256_unpackhi_epi64(t0, t2);
  c = _mm256_unpacklo_epi64(t1, t3), d = _mm256_unpackhi_epi64(t1, t3);
}

// One OpWidth-4 word from its 4 pixel rows r (8 channels each, the bias not yet added) to o,
// its accumulants at a (or null). Channel-major first (the bias, a wrapping add, commutes with
// the accumulants'): halves (0 4) (1 5) (2 6) (3 7), then pairs (0 1) (2 3) (4 5) (6 7), each 4
// pixels, which is the order of the word's 4 x 32 bytes and of its accumulants. keep (or null)
// masks each 32 bytes' padding lanes to 0. kStream: non-temporal stores (o 32-byte aligned).
template <bool kQuant, int kAct, bool kStream = false>
__attribute__((target("avx2"), always_inline)) inline void int32_word(__m256i (&r)[4], __m256i bias,
                                                                      const Quantizer& quant,
                                                                      std::uint8_t* o,
                                                                      const std::uint8_t* a,
                                                                      const __m256i* keep) {
  const __m256i bswap = int32_byte_swap();
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) r[j] = _mm256_add_epi32(r[j], bias);
  transpose4(r[0], r[1], r[2], r[3]);
  const __m256i v[4] = {
      _mm256_permute2x128_si256(r[0], r[1], 0x20), _mm256_permute2x128_si256(r[2], r[3], 0x20),
      _mm256_permute2x128_si256(r[0], r[1], 0x31), _mm256_permute2x128_si256(r[2], r[3], 0x31)};
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    __m256i x = v[j];
    if (a)
      x = _mm256_add_epi32(
          x, _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + j * 32)),
                                 bswap));
    if constexpr (kQuant) x = quant.template operator()<kAct>(x);
    if (keep) x = _mm256_and_si256(x, keep[j]);
    if constexpr (kStream)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(o + j * 32), _mm256_shuffle_epi8(x, bswap));
    else
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + j * 32), _mm256_shuffle_epi8(x, bswap));
  }
}

// Words of whole 8-channel blocks from y rows (tail_rows_avx2). A word is 8 channels x 4 pixels;
// its 4 pixel rows are 4 vectors of 8 channels, one lane per channel, so the bias and the
// quantizer work on them as they are. The word's order is channel-major (element c * 4 + p):
// OpWidth 1 packs the rows to bytes (p * 4 + c in each half) and one byte shuffle transposes
// each half's 4x4, its accumulants (128 bytes: channel pairs, 4 pixels each) are brought to rows
// by the 4x4 int32 transpose of each half plus a swap of halves; OpWidth 4 goes the other way,
// the rows to channel pairs, and works there (the quantizer is the same in every lane).
template <bool kQuant, int kAct>
__attribute__((target("avx2"))) void tail_rows(
    const TailWords& t, const std::int32_t* y, std::uint64_t stride, std::uint64_t p0,
    std::uint64_t n, std::uint64_t k0, std::uint64_t k_count, std::uint8_t* const* out_pages,
    std::uint64_t out_start, const std::uint8_t* const* accumulant_pages,
    std::uint64_t accumulant_start) {
  const Quantizer quant(t.scale, t.shift, t.fp_cast_shift, t.clip);
  const __m256i bswap = int32_byte_swap();
  // Byte p * 4 + c of each half to c * 4 + p.
  const __m256i bytes_t = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0,
                                           4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const std::uint64_t per_group = t.padded_pixels / 4, width = t.width;
  const std::uint64_t word_bytes = 32 * width;
  for (std::uint64_t g = 0; g * 8 < k_count; ++g) {
    const std::uint64_t c0 = k0 + g * 8;
    // Lanes of channels past the last are padding: 0 in the word.
    const __m256i cn =
        _mm256_set1_epi32(static_cast<std::int32_t>(std::min<std::uint64_t>(8, t.channels - c0)));
    const __m256i valid = _mm256_cmpgt_epi32(cn, lane);
    const __m256i bias =
        t.bias ? _mm256_maskload_epi32(t.bias + c0, valid) : _mm256_setzero_si256();
    // The same per channel pair (OpWidth 4's channel-major vectors): channels 2j, 2j + 1.
    __m256i pair_ok[4];
    for (int j = 0; j < 4; ++j)
      pair_ok[j] = _mm256_cmpgt_epi32(cn, _mm256_setr_epi32(2 * j, 2 * j, 2 * j, 2 * j, 2 * j + 1,
                                                            2 * j + 1, 2 * j + 1, 2 * j + 1));
    const std::int32_t* yg = y + g * 8;
    std::uint64_t i = 0;
    if (width == 1 && !accumulant_pages && c0 + 8 <= t.channels) {
      // Whole words (4 pixels, 8 channels, no accumulants): the packs clamp to int8, so the
      // activation is one or two byte compares per word, and nothing is masked.
      const __m256i zero = _mm256_setzero_si256();
      const __m256i clip8 = _mm256_set1_epi8(static_cast<char>(std::clamp(t.clip, 0, 127)));
      // The group's words of these pixels lie side by side: one page lookup for all of them
      // when they are on one page (else one per word).
      std::uint8_t* const base =
          run_on_one_page(out_pages, out_start, (c0 / 8 * per_group + p0 / 4) * 32, n / 4 * 32);
      const auto words = [&](auto narrow) __attribute__((target("avx2"))) {
        for (; i + 4 <= n; i += 4) {
          __m256i r[4];
#pragma GCC unroll 4
          for (std::uint64_t j = 0; j < 4; ++j) {
            r[j] = _mm256_add_epi32(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yg + (i + j) * stride)), bias);
            if constexpr (kQuant) r[j] = quant.template unclamped<decltype(narrow)::value>(r[j]);
          }
          __m256i p =
              _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
          if constexpr (kAct == 1) p = _mm256_min_epi8(p, clip8);
          if constexpr (kAct >= 0) p = _mm256_max_epi8(p, zero);
          const std::uint64_t word = c0 / 8 * per_group + (p0 + i) / 4;
          std::uint8_t* const o =
              base ? base + i * 8 : region_byte(out_pages, out_start, word * 32);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), _mm256_shuffle_epi8(p, bytes_t));
        }
      };
      if (quant.narrow)
        words(std::true_type{});
      else
        words(std::false_type{});
    } else if (width == 4 && c0 + 8 <= t.channels) {
      // Whole words of int32 (the partial sums a split kernel chains through DRAM): nothing to
      // mask, and whether there are accumulants, and whether the stores stream, is fixed for
      // the loop.
      const auto words = [&](auto with_accumulants, auto stream) __attribute__((target("avx2"))) {
        for (; i + 4 <= n; i += 4) {
          __m256i r[4];
#pragma GCC unroll 4
          for (std::uint64_t j = 0; j < 4; ++j)
            r[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yg + (i + j) * stride));
          const std::uint64_t word = c0 / 8 * per_group + (p0 + i) / 4;
          const std::uint8_t* a = nullptr;
          if constexpr (decltype(with_accumulants)::value)
            a = region_byte(accumulant_pages, accumulant_start, word * 128);
          int32_word<kQuant, kAct, decltype(stream)::value>(
              r, bias, quant, region_byte(out_pages, out_start, word * 128), a, nullptr);
        }
      };
      if (accumulant_pages && t.stream)
        words(std::true_type{}, std::true_type{});
      else if (accumulant_pages)
        words(std::true_type{}, std::false_type{});
      else if (t.stream)
        words(std::false_type{}, std::true_type{});
      else
        words(std::false_type{}, std::false_type{});
    }
    for (; i < n; i += 4) {
      const std::uint64_t word = c0 / 8 * per_group + (p0 + i) / 4;
      const std::uint64_t rows = std::min<std::uint64_t>(4, n - i);  // the others are padding
      __m256i r[4];
#pragma GCC unroll 4
      for (std::uint64_t j = 0; j < 4; ++j)
        r[j] = j < rows
                   ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yg + (i + j) * stride))
                   : _mm256_setzero_si256();
      std::uint8_t* o = region_byte(out_pages, out_start, word * word_bytes);
      const std::uint8_t* a =
          accumulant_pages ? region_byte(accumulant_pages, accumulant_start, word * 128) : nullptr;
      if (width == 4) {
        const __m256i pixel_ok = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(rows)),
                                                    _mm256_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3));
        __m256i keep[4];
        for (int j = 0; j < 4; ++j) keep[j] = _mm256_and_si256(pixel_ok, pair_ok[j]);
        int32_word<kQuant, kAct>(r, bias, quant, o, a, keep);
        continue;
      }
      if (a) {
        __m256i v[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j)
          v[j] = _mm256_shuffle_epi8(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + j * 32)), bswap);
        // Channel pairs (0 1) (2 3) (4 5) (6 7) to halves (0 4) (1 5) (2 6) (3 7), then pixels.
        __m256i c04 = _mm256_permute2x128_si256(v[0], v[2], 0x20);
        __m256i c15 = _mm256_permute2x128_si256(v[0], v[2], 0x31);
        __m256i c26 = _mm256_permute2x128_si256(v[1], v[3], 0x20);
        __m256i c37 = _mm256_permute2x128_si256(v[1], v[3], 0x31);
        transpose4(c04, c15, c26, c37);
        r[0] = _mm256_add_epi32(r[0], c04), r[1] = _mm256_add_epi32(r[1], c15);
        r[2] = _mm256_add_epi32(r[2], c26), r[3] = _mm256_add_epi32(r[3], c37);
      }
#pragma GCC unroll 4
      for (std::uint64_t j = 0; j < 4; ++j) {
        __m256i v = _mm256_add_epi32(r[j], bias);
        if constexpr (kQuant) v = quant.template operator()<kAct>(v);
        r[j] = j < rows ? _mm256_and_si256(v, valid) : _mm256_setzero_si256();
      }
      // int8 values (the quantizer clamped them, kBias is OpWidth 4): packs cannot saturate.
      const __m256i p =
          _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), _mm256_shuffle_epi8(p, bytes_t));
    }
  }
  // Streamed stores are weakly ordered; they are fenced by parallel_for, which runs every work
  // unit that writes them, when this thread's share is done (common/parallel.h). A fence here,
  // after each unit's rows, made the next unit's tiles wait for those rows to reach memory: the
  // stem's two streamed outputs took 0.28 ms more of resnet18's 7.7 ms per image that way.
}
}  // namespace

__attribute__((target("avx2"))) void tail_words_avx2(const TailWords& t, std::uint64_t first,
                                                     std::uint64_t end, std::uint8_t* out,
                                                     const std::uint8_t* accumulants) {
  with_vector_tail(t, "tail_words_avx2", [&](auto quant, auto act) {
    tail_words<decltype(quant)::value, decltype(act)::value>(t, first, end, out, accumulants);
  });
}

__attribute__((target("avx2"))) void tail_rows_avx2(
    const TailWords& t, const std::int32_t* y, std::uint64_t stride, std::uint64_t p0,
    std::uint64_t n, std::uint64_t k0, std::uint64_t k_count, std::uint8_t* const* out_pages,
    std::uint64_t out_start, const std::uint8_t* const* accumulant_pages,
    std::uint64_t accumulant_start) {
  if (t.avx512 && !accumulant_pages) {
    const std::uint64_t done =
        tail_rows_int8_avx512(t, y, stride, p0, n, k0, k_count, out_pages, out_start);
    if (done > 0) {  // the rest: the last pixels of those channels, then the other channels
      const std::uint64_t whole = n / 4 * 4;
      if (whole < n)
        tail_rows_avx2(t, y + whole * stride, stride, p0 + whole, n - whole, k0, done, out_pages,
                       out_start, nullptr, 0);
      if (done < k_count)
        tail_rows_avx2(t, y + done, stride, p0, n, k0 + done, k_count - done, out_pages, out_start,
                       nullptr, 0);
      return;
    }
  }
  with_vector_tail(t, "tail_rows_avx2", [&](auto quant, auto act) {
    tail_rows<decltype(quant)::value, decltype(act)::value>(
        t, y, stride, p0, n, k0, k_count, out_pages, out_start, accumulant_pages, accumulant_start);
  });
}

#else

void tail_words_avx2(const TailWords&, std::uint64_t, std::uint64_t, std::uint8_t*,
                     const std::uint8_t*) {
  fail("tail write_output: AVX2 on a CPU that is not x86");
}

void tail_rows_avx2(const TailWords&, const std::int32_t*, std::uint64_t, std::uint64_t,
                    std::uint64_t, std::uint64_t, std::uint64_t, std::uint8_t* const*,
                    std::uint64_t, const std::uint8_t* const*, std::uint64_t) {
  fail("tail row_writer: AVX2 on a CPU that is not x86");
}

void quantize_span_avx2(const std::int32_t*, std::int32_t*, std::uint64_t, std::int32_t,
                        std::int32_t, int, int, int, std::int32_t) {
  fail("quantize_span: AVX2 on a CPU that is not x86");
}

void bias_span_avx2(const std::int32_t*, std::int32_t*, std::uint64_t, std::int32_t) {
  fail("bias_span: AVX2 on a CPU that is not x86");
}

#endif

}  // namespace npukit::device::detail
