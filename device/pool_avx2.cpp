// AVX2 path of pool_plane (device/pool.h) for max pool and global average; the same integers as
// the scalar path. Max pool is separable: per output row, the maxima of its window rows (clipped
// to the image) for every input column, 32 columns at a time (_mm256_max_epi8), then per output
// pixel the maximum of its window columns (clipped) from that row, starting at -128 like the
// scalar path (a window wholly in the padding gives -128). Global average sums the plane 32
// values at a time: x ^ 0x80 is x + 128 as an unsigned byte, _mm256_sad_epu8 against zero adds 8
// of them into each 64-bit lane, and 128 * n comes off at the end.
#include "device/pool.h"

#include <algorithm>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npukit::device::detail {

#if defined(__x86_64__) || defined(__i386__)

namespace {

__attribute__((target("avx2"))) void max_pool(const PoolShape& s, const std::int8_t* in,
                                              std::int32_t* out) {
  const auto w = static_cast<std::int64_t>(s.iw);
  thread_local std::vector<std::int8_t> column_max;  // kept between calls: no allocation
  column_max.resize(s.iw);
  std::int8_t* col = column_max.data();
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
    for (std::uint64_t ox = 0; ox < s.ow; ++ox) {
      const auto [x_begin, x_end] = pool_window(ox, s.stride_w, s.pad_left, s.kw, s.iw);
      std::int8_t m = -128;
      for (std::int64_t xx = x_begin; xx < x_end; ++xx) m = std::max(m, col[xx]);
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
