// AVX2 path of pool_plane (device/pool.h) for max pool and global average; the same integers as
// the scalar path. Max pool is separable: per output row, the maxima of its window rows (clipped
// to the image) for every input column, 32 columns at a time (_mm256_max_epi8), then the maxima
// of the window columns of that row, 32 output pixels at a time at strides 1 and 2. Global average
// sums the plane 32 values at a time: x ^ 0x80 is x + 128 as an unsigned byte, _mm256_sad_epu8
// against zero adds 8 of them into each 64-bit lane, and 128 * n comes off at the end.
#include "device/pool.h"

#include <algorithm>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npukit::device::detail {

#if defined(__x86_64__) || defined(__i386__)

namespace {

// 32 window maxima as int32 at out.
__attribute__((target("avx2"))) inline void store32(std::int32_t* out, __m256i m) {
  const __m128i lo = _mm256_castsi256_si128(m), hi = _mm256_extracti128_si256(m, 1);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_cvtepi8_epi32(lo));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8),
                      _mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16), _mm256_cvtepi8_epi32(hi));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 24),
                      _mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)));
}

__attribute__((target("avx2"))) void max_pool(const PoolShape& s, const std::int8_t* in,
                                              std::int32_t* out) {
  const auto w = static_cast<std::int64_t>(s.iw), ow = static_cast<std::int64_t>(s.ow);
  const auto sw = static_cast<std::int64_t>(s.stride_w), kw = static_cast<std::int64_t>(s.kw);
  const auto pl = static_cast<std::int64_t>(s.pad_left);
  // The column maxima of an output row with -128 on both sides, as far as any window reaches:
  // a window's maximum over them is its maximum over its columns clipped to the image (values
  // are >= -128, and a window wholly in the padding gives -128 either way). Output ox's window
  // is then padded[ox * sw, ox * sw + kw), never clipped.
  const std::int64_t span = std::max(pl + w, (ow - 1) * sw + kw);
  // Kept between calls: no allocation. The column maxima, then (stride 2) their even and odd
  // columns, each with room for a 32-byte load past its end.
  thread_local std::vector<std::int8_t> buffer;
  buffer.resize(static_cast<std::size_t>(2 * span + 160));
  std::int8_t* padded = buffer.data();
  std::int8_t* even = padded + span + 64;
  std::int8_t* odd = even + span / 2 + 48;
  std::fill(padded, padded + pl, std::int8_t{-128});
  std::fill(padded + pl + w, padded + span + 64, std::int8_t{-128});
  std::int8_t* col = padded + pl;
  const std::int64_t halves = (span + 1) / 2;  // even and odd columns kept per row
  const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2,
                                         4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  for (std::uint64_t oy = 0; oy < s.oh; ++oy) {
    const auto [y_begin, y_end] = pool_window(oy, s.stride_h, s.pad_top, s.kh, s.ih);
    std::int64_t x = 0;
    for (; x + 32 <= w; x += 32) {
      __m256i m = _mm256_set1_epi8(-128);
      for (std::int64_t y = y_begin; y < y_end; ++y)
        m = _mm256_max_epi8(m,
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + y * w + x)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(col + x), m);
    }
    for (; x < w; ++x) {
      std::int8_t m = -128;
      for (std::int64_t y = y_begin; y < y_end; ++y) m = std::max(m, in[y * w + x]);
      col[x] = m;
    }
    std::int32_t* row = out + oy * s.ow;
    std::int64_t ox = 0;
    if (sw == 1) {
      for (; ox + 32 <= ow; ox += 32) {
        __m256i m = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(padded + ox));
        for (std::int64_t k = 1; k < kw; ++k)
          m = _mm256_max_epi8(
              m, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(padded + ox + k)));
        store32(row + ox, m);
      }
    } else if (sw == 2 && ow >= 32) {
      // Even and odd columns apart (within each 16-byte lane, then across): window column
      // ox * 2 + k is column ox + k / 2 of the even (k even) or odd (k odd) ones.
      for (std::int64_t i = 0; i < halves; i += 32) {
        const __m256i a = _mm256_permute4x64_epi64(
            _mm256_shuffle_epi8(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(padded + 2 * i)), split),
            0xD8);
        const __m256i b = _mm256_permute4x64_epi64(
            _mm256_shuffle_epi8(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(padded + 2 * i + 32)), split),
            0xD8);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(even + i),
                            _mm256_permute2x128_si256(a, b, 0x20));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(odd + i),
                            _mm256_permute2x128_si256(a, b, 0x31));
      }
      for (; ox + 32 <= ow; ox += 32) {
        __m256i m = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(even + ox));
        for (std::int64_t k = 1; k < kw; ++k)
          m = _mm256_max_epi8(m, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                     (k % 2 ? odd : even) + ox + k / 2)));
        store32(row + ox, m);
      }
    }
    for (; ox < ow; ++ox) {
      const std::int8_t* window = padded + ox * sw;
      std::int8_t m = window[0];
      for (std::int64_t k = 1; k < kw; ++k) m = std::max(m, window[k]);
      row[ox] = m;
    }
  }
}

__attribute__((target("avx2"))) std::int64_t plane_sum(const std::int8_t* in, std::uint64_t n) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80)), zero = _mm256_setzero_si256();
  __m256i acc = zero;  // 4 x 64-bit sums of unsigned bytes: no overflow below 2^56 values
  std::uint64_t i = 0;
  for (; i + 32 <= n; i += 32)
    acc = _mm256_add_epi64(
        acc,
        _mm256_sad_epu8(
            _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)), flip),
            zero));
  alignas(32) std::int64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
  std::int64_t sum = lanes[0] + lanes[1] + lanes[2] + lanes[3] - 128 * static_cast<std::int64_t>(i);
  for (; i < n; ++i) sum += in[i];
  return sum;
}

}  // namespace

// Words to pixels and back: per 128-bit half (4 channels x 4 pixels, byte c * 4 + i) a 4 x 4
// byte transpose to pixel-major (byte i * 4 + c); the halves' 4-byte pieces interleaved give each
// pixel its 8 channels in 8 bytes (channels 0-3 from the low half, 4-7 from the high one).
__attribute__((target("avx2"))) void max_pool_words_avx2(const PoolShape& s,
                                                         const conv_kernels::ImageWords& in,
                                                         std::uint64_t first, std::uint8_t* out,
                                                         std::uint64_t channels) {
  const std::uint64_t pixels = s.ih * s.iw, out_pixels = s.oh * s.ow;
  const auto iw = static_cast<std::int64_t>(s.iw);
  const __m128i transpose = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m256i lowest = _mm256_set1_epi8(-128);
  // Pixel-major input (8 bytes a pixel), the output row's window-row maxima and the result, each
  // with room for a last 4-pixel vector. The row holds pad_left columns of -128 before the image
  // and -128 after it up to the last window of the last 4-output block: -128 never wins a max,
  // and a window wholly in the padding gives -128, so every window can be taken whole (the
  // clipped window of pool_window has the same maximum).
  const std::uint64_t ow4 = (s.ow + 3) / 4 * 4;
  const std::uint64_t row_len = std::max(s.pad_left + s.iw, (ow4 - 1) * s.stride_w + s.kw) + 8;
  thread_local std::vector<std::uint64_t> image_buffer, row_buffer, result_buffer;
  image_buffer.resize(pixels + 4);
  row_buffer.resize(row_len);
  result_buffer.resize(out_pixels + 4);
  // Plain pointers: stores through a vector's data() would make the compiler reload it.
  std::uint64_t* const image = image_buffer.data();
  std::uint64_t* const row = row_buffer.data();
  std::uint64_t* const result = result_buffer.data();
  for (std::uint64_t w = 0; w * 4 < pixels; ++w) {
    const std::uint8_t* word = in.word(first + w);
    const __m128i lo =
        _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(word)), transpose);
    const __m128i hi =
        _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(word + 16)), transpose);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(image + w * 4), _mm_unpacklo_epi32(lo, hi));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(image + w * 4 + 2), _mm_unpackhi_epi32(lo, hi));
  }
  std::fill(row, row + row_len, ~std::uint64_t{0} / 0xFF * 0x80);  // every byte -128
  std::uint64_t* const image_row = row + s.pad_left;
  for (std::uint64_t oy = 0; oy < s.oh; ++oy) {
    const auto [y_begin, y_end] = pool_window(oy, s.stride_h, s.pad_top, s.kh, s.ih);
    for (std::int64_t x = 0; x < iw; x += 4) {  // 4 pixels a vector
      __m256i m = lowest;
      for (std::int64_t y = y_begin; y < y_end; ++y)
        m = _mm256_max_epi8(
            m, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(image + y * iw + x)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(image_row + x), m);
    }
    // The last vector's pixels past the row (the next row's, or the slack) back to -128.
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(image_row + iw), lowest);
    std::uint64_t* const r = result + oy * s.ow;
    if (s.stride_w == 1) {
      for (std::uint64_t ox = 0; ox < s.ow; ox += 4) {  // 4 outputs a vector
        const std::uint64_t* b = row + ox;
        __m256i m = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
        for (std::uint64_t j = 1; j < s.kw; ++j)
          m = _mm256_max_epi8(m, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + j)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(r + ox), m);
      }
    } else if (s.stride_w == 2) {
      // 4 outputs from two vectors: the window maxima of pixels 2i + j in lanes 0 and 2 of each.
      for (std::uint64_t ox = 0; ox < s.ow; ox += 4) {
        const std::uint64_t* b = row + ox * 2;
        __m256i m0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
        __m256i m1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 4));
        for (std::uint64_t j = 1; j < s.kw; ++j) {
          m0 = _mm256_max_epi8(m0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + j)));
          m1 = _mm256_max_epi8(m1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 4 + j)));
        }
        // (m0[0], m1[0], m0[2], m1[2]) to (m0[0], m0[2], m1[0], m1[2]).
        const __m256i m = _mm256_permute4x64_epi64(_mm256_unpacklo_epi64(m0, m1), 0xD8);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(r + ox), m);
      }
    } else {
      for (std::uint64_t ox = 0; ox < s.ow; ++ox) {
        const std::uint64_t* b = row + ox * s.stride_w;
        __m128i m = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b));
        for (std::uint64_t j = 1; j < s.kw; ++j)
          m = _mm_max_epi8(m, _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + j)));
        _mm_storel_epi64(reinterpret_cast<__m128i*>(r + ox), m);
      }
    }
  }
  // The last output word's pixels past the end: 0 (the blocks above wrote past it).
  std::fill(result + out_pixels, result + out_pixels + 4, 0);
  // Channels past `channels` and pixels past the last are padding: 0 in the words.
  alignas(16) std::uint8_t keep_bytes[16];
  for (int i = 0; i < 16; ++i)
    keep_bytes[i] = static_cast<std::uint64_t>(i % 8) < channels ? 0xFF : 0;
  const __m128i keep = _mm_load_si128(reinterpret_cast<const __m128i*>(keep_bytes));
  for (std::uint64_t w = 0; w * 4 < out_pixels; ++w) {
    const __m128i a =
        _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(result + w * 4)), keep);
    const __m128i b =
        _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(result + w * 4 + 2)), keep);
    // a = pixels 0, 1 and b = 2, 3, each channels 0-3 then 4-7: the 4-byte pieces of pixels
    // 0..3 for channels 0-3 (low) and 4-7 (high), then the byte transpose back.
    const __m128i t0 = _mm_unpacklo_epi32(a, b), t1 = _mm_unpackhi_epi32(a, b);
    const __m128i lo = _mm_shuffle_epi8(_mm_unpacklo_epi32(t0, t1), transpose);
    const __m128i hi = _mm_shuffle_epi8(_mm_unpackhi_epi32(t0, t1), transpose);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + w * 32), lo);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + w * 32 + 16), hi);
  }
}

void pool_plane_avx2(const PoolShape& s, std::span<const std::int8_t> in,
                     std::span<std::int32_t> out) {
  if (s.type == isa::PoolType::kGlobalAverage) {
    out[0] = pool_scaled_average(plane_sum(in.data(), in.size()), s);
    return;
  }
  if (s.type == isa::PoolType::kMax) return max_pool(s, in.data(), out.data());
  pool_plane(s, in, out, Isa::kScalar);
}

#else

void max_pool_words_avx2(const PoolShape&, const conv_kernels::ImageWords&, std::uint64_t,
                         std::uint8_t*, std::uint64_t) {
  fail("max_pool_words: AVX2 on a CPU that is not x86");
}

void pool_plane_avx2(const PoolShape&, std::span<const std::int8_t>, std::span<std::int32_t>) {
  fail("pool_plane: AVX2 on a CPU that is not x86");
}

#endif

}  // namespace npukit::device::detail
