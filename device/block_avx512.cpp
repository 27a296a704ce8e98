// AVX-512 part of the tail's row writer (device/block.h tail_rows_avx2): a conv's int8 output
// words, two 8-channel groups at a time. The arithmetic is the AVX2 Quantizer's narrow form
// (device/quantizer_avx2.h: the input clamped to the bounds where the result saturates, then a
// 32-bit multiply, add and arithmetic shift, exact when those bounds keep the product in int32),
// on 16 lanes: a pixel's 16 channels in one zmm vector. The two packs to bytes work per 128-bit
// lane, so lane L holds channels 4L..4L+3 of the word's 4 pixels, pixel-major, and the byte
// shuffle that makes each lane channel-major leaves lanes 0-1 as the first group's 32-byte word
// and lanes 2-3 as the second's. The quantizer's vector work is most of the tail's time, and at
// 512 bits it is half the instructions per value of the AVX2 form.
//
// Compiled with its own target attribute; called only at the AVX-512 VNNI level (common/cpu.h).
#include "device/block.h"
#include "device/quantizer_avx2.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
// GCC 12 takes the plain AVX-512 intrinsics' undefined pass-through operand for an uninitialized
// read (a false positive: every lane is written).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>
#include <cstdint>

namespace npukit::device::detail {

#if defined(__x86_64__) || defined(__i386__)

#define NPUKIT_AVX512 __attribute__((target("avx2,avx512f,avx512bw,avx512vl")))

namespace {
template <int kAct>
NPUKIT_AVX512 void int8_group_pairs(const TailWords& t, const std::int32_t* y, std::uint64_t stride,
                                    std::uint64_t p0, std::uint64_t words, std::uint64_t k0,
                                    std::uint64_t pairs, std::uint8_t* const* out_pages,
                                    std::uint64_t out_start, InputBounds bounds) {
  const int total = t.shift + t.fp_cast_shift;
  const __m512i scale = _mm512_set1_epi32(t.scale);
  const __m512i add =
      _mm512_set1_epi32(static_cast<std::int32_t>(rounding_addend(t.shift, t.fp_cast_shift)));
  const __m128i count = _mm_cvtsi32_si128(total);
  const __m512i v_low = _mm512_set1_epi32(bounds.low), v_high = _mm512_set1_epi32(bounds.high);
  const __m512i zero = _mm512_setzero_si512();
  const __m512i clip8 = _mm512_set1_epi8(static_cast<char>(std::clamp(t.clip, 0, 127)));
  // Byte p * 4 + c of each lane to c * 4 + p.
  const __m512i bytes_t =  // bytes 0 4 8 12, 1 5 9 13, 2 6 10 14, 3 7 11 15 in every lane
      _mm512_setr4_epi32(0x0C080400, 0x0D090501, 0x0E0A0602, 0x0F0B0703);
  const std::uint64_t per_group = t.padded_pixels / 4;
  // The words of group g for these pixels lie side by side: one page lookup for them when they
  // are on one page (else one per word).
  const auto group_words = [&](std::uint64_t g) {
    return run_on_one_page(out_pages, out_start, (g * per_group + p0 / 4) * 32, words * 32);
  };
  const auto word_at = [&](std::uint8_t* base, std::uint64_t g, std::uint64_t w) {
    return base ? base + w * 32
                : region_byte(out_pages, out_start, (g * per_group + p0 / 4 + w) * 32);
  };
  for (std::uint64_t j = 0; j < pairs; ++j) {
    const std::uint64_t c0 = k0 + 16 * j, g = c0 / 8;
    const __m512i bias = t.bias ? _mm512_loadu_si512(t.bias + c0) : zero;
    std::uint8_t* const base0 = group_words(g);
    std::uint8_t* const base1 = group_words(g + 1);
    const std::int32_t* const yg = y + 16 * j;
    for (std::uint64_t w = 0; w < words; ++w) {
      __m512i r[4];
#pragma GCC unroll 4
      for (std::uint64_t i = 0; i < 4; ++i) {
        __m512i v = _mm512_add_epi32(_mm512_loadu_si512(yg + (4 * w + i) * stride), bias);
        v = _mm512_min_epi32(_mm512_max_epi32(v, v_low), v_high);
        r[i] = _mm512_sra_epi32(_mm512_add_epi32(_mm512_mullo_epi32(v, scale), add), count);
      }
      __m512i p =
          _mm512_packs_epi16(_mm512_packs_epi32(r[0], r[1]), _mm512_packs_epi32(r[2], r[3]));
      if constexpr (kAct == 1) p = _mm512_min_epi8(p, clip8);
      if constexpr (kAct >= 0) p = _mm512_max_epi8(p, zero);
      p = _mm512_shuffle_epi8(p, bytes_t);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(word_at(base0, g, w)),
                          _mm512_castsi512_si256(p));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(word_at(base1, g + 1, w)),
                          _mm512_extracti64x4_epi64(p, 1));
    }
  }
}
}  // namespace

NPUKIT_AVX512 std::uint64_t tail_rows_int8_avx512(const TailWords& t, const std::int32_t* y,
                                                  std::uint64_t stride, std::uint64_t p0,
                                                  std::uint64_t n, std::uint64_t k0,
                                                  std::uint64_t k_count,
                                                  std::uint8_t* const* out_pages,
                                                  std::uint64_t out_start) {
  if (t.kind != TailWords::Kind::kQuantize || t.width != 1 || t.channel_group != 8 ||
      t.pixels_per_word != 4)
    return 0;
  const std::uint64_t channels = std::min(k_count, t.channels > k0 ? t.channels - k0 : 0);
  const std::uint64_t pairs = channels / 16, words = n / 4;
  if (pairs == 0 || words == 0) return 0;
  // The narrow form only (Quantizer::narrow): the bounds keep v * scale + h in int32.
  const InputBounds bounds = input_bounds(t.scale, t.shift, t.fp_cast_shift);
  if (!narrow_form(t.scale, t.shift, t.fp_cast_shift, bounds)) return 0;
  if (t.act == 0)
    int8_group_pairs<0>(t, y, stride, p0, words, k0, pairs, out_pages, out_start, bounds);
  else if (t.act == 1)
    int8_group_pairs<1>(t, y, stride, p0, words, k0, pairs, out_pages, out_start, bounds);
  else
    int8_group_pairs<-1>(t, y, stride, p0, words, k0, pairs, out_pages, out_start, bounds);
  return 16 * pairs;
}

#undef NPUKIT_AVX512

#else

std::uint64_t tail_rows_int8_avx512(const TailWords&, const std::int32_t*, std::uint64_t,
                                    std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t,
                                    std::uint8_t* const*, std::uint64_t) {
  return 0;
}

#endif

}  // namespace npukit::device::detail
