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

void pool_plane_avx2(const PoolShape&, std::span<const std::int8_t>, std::span<std::int32_t>) {
  fail("pool_plane: AVX2 on a CPU that is not x86");
}

#endif

}  // namespace npukit::device::detail
