// AVX2 versions of conv2d_deep, fully_connected_8 and conv2d_depthwise. They must equal the scalar
// reference bit for bit, including per-32-product saturation, so a chunk's 32 products are always
// summed exactly (int8 -> int16, vpmaddwd) and added to the accumulator with a saturating add.
//
// When a group of 8 output channels provably cannot saturate (|bias| + 128 * sum|w| <= 2^31-1)
// the chunk sums are kept in vector lanes and reduced once per output: no partial sum can
// saturate, so the result is the same. Otherwise each chunk sum is reduced and saturated.
// Compiled with a target attribute, so only these functions need AVX2; callers check the CPU.
#include "xs3/kernels.h"

#include "common/bytes.h"
#include "xs3/vpu.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NPUKIT_AVX2 __attribute__((target("avx2")))
#else
#define NPUKIT_AVX2
#endif

namespace npukit::xs3::detail {

namespace {

constexpr int kChunk = 32;
constexpr int kGroup = 8;  // output channels per vector of int32 accumulators
constexpr std::int64_t kInt32Max = symmetric_max(32);

// True when no partial sum of bias + products with any int8 input can leave ±(2^31-1).
bool cannot_saturate(std::int32_t bias, const std::int8_t* w, std::size_t n) {
  // |x*w| <= 2^14 for any int8 pair: often enough on its own, and O(1), which matters for
  // fully_connected where the weights are read only once.
  const std::int64_t abs_bias = std::abs(std::int64_t{bias});
  if (abs_bias + (std::int64_t{1} << 14) * std::int64_t(n) <= kInt32Max) return true;
  std::int64_t abs_sum = 0;
  for (std::size_t i = 0; i < n; ++i) abs_sum += std::abs(int{w[i]});
  return abs_bias + 128 * abs_sum <= kInt32Max;
}

}  // namespace

#if defined(__x86_64__) || defined(__i386__)

namespace {

// Products of 32 int8 pairs, summed pairwise into 8 int32 lanes (exact: |lane| <= 4 * 2^14).
NPUKIT_AVX2 inline __m256i dot32(__m256i x_lo, __m256i x_hi, const std::int8_t* w) {
  const __m256i w_lo = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
  const __m256i w_hi =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16)));
  return _mm256_add_epi32(_mm256_madd_epi16(x_lo, w_lo), _mm256_madd_epi16(x_hi, w_hi));
}

// Lane j of the result = sum of the 8 lanes of v[j].
NPUKIT_AVX2 inline __m256i reduce8(const __m256i v[kGroup]) {
  const __m256i s01 = _mm256_hadd_epi32(v[0], v[1]);
  const __m256i s23 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i s45 = _mm256_hadd_epi32(v[4], v[5]);
  const __m256i s67 = _mm256_hadd_epi32(v[6], v[7]);
  const __m256i s0123 = _mm256_hadd_epi32(s01, s23);
  const __m256i s4567 = _mm256_hadd_epi32(s45, s67);
  const __m256i lo = _mm256_permute2x128_si256(s0123, s4567, 0x20);
  const __m256i hi = _mm256_permute2x128_si256(s0123, s4567, 0x31);
  return _mm256_add_epi32(lo, hi);
}

// sat32(acc + chunk) per lane with symmetric bounds; |chunk| < 2^20 so one wrap at most.
NPUKIT_AVX2 inline __m256i saturating_add(__m256i acc, __m256i chunk) {
  const __m256i sum = _mm256_add_epi32(acc, chunk);
  // Overflow iff acc and chunk share a sign that the sum does not.
  const __m256i overflow =
      _mm256_and_si256(_mm256_xor_si256(acc, sum), _mm256_xor_si256(chunk, sum));
  const __m256i limit = _mm256_xor_si256(_mm256_srai_epi32(acc, 31), _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i fixed = _mm256_blendv_epi8(sum, limit, _mm256_srai_epi32(overflow, 31));
  return _mm256_max_epi32(fixed, _mm256_set1_epi32(-0x7FFFFFFF));  // -2^31 -> -(2^31-1)
}

// Accumulates one group of 8 output channels over `segments` input segments of `seg_len` bytes
// (a multiple of 32). x_seg[s] points at segment s of the input; w_rows[j] + s*seg_len at the
// matching weights of channel j. Returns the 8 accumulators.
NPUKIT_AVX2 __m256i accumulate_group(__m256i acc, const std::int8_t* const* x_seg,
                                     std::size_t segments, std::size_t seg_len,
                                     const std::int8_t* const w_rows[kGroup], bool exact_sum) {
  __m256i part[kGroup];
  if (exact_sum) {
    for (auto& v : part) v = _mm256_setzero_si256();
  }
  for (std::size_t s = 0; s < segments; ++s) {
    const std::int8_t* xs = x_seg[s];
    for (std::size_t off = 0; off < seg_len; off += kChunk) {
      const __m256i x_lo =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xs + off)));
      const __m256i x_hi =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xs + off + 16)));
      const std::size_t w_off = s * seg_len + off;
      if (exact_sum) {
        for (int j = 0; j < kGroup; ++j) {
          part[j] = _mm256_add_epi32(part[j], dot32(x_lo, x_hi, w_rows[j] + w_off));
        }
      } else {
        __m256i chunk[kGroup];
        for (int j = 0; j < kGroup; ++j) chunk[j] = dot32(x_lo, x_hi, w_rows[j] + w_off);
        acc = saturating_add(acc, reduce8(chunk));
      }
    }
  }
  if (exact_sum) acc = saturating_add(acc, reduce8(part));
  return acc;
}

// Copies rows of n int8 values into rows of padded_n (a multiple of 32), zero-filled.
std::vector<std::int8_t> pad_rows(const std::int8_t* src, std::size_t rows, std::size_t n,
                                  std::size_t padded_n) {
  std::vector<std::int8_t> out(rows * padded_n, 0);
  for (std::size_t r = 0; r < rows; ++r) std::memcpy(&out[r * padded_n], src + r * n, n);
  return out;
}

}  // namespace

NPUKIT_AVX2 void conv2d_deep_avx2(std::int8_t* y, const std::int8_t* x, const std::int8_t* k,
                                  std::span<const BsoChannel> bso, const ConvParams& p) {
  const std::size_t c_in = std::size_t(p.x.channels);
  const std::size_t cp = ceil_mod(c_in, kChunk);  // channels padded to whole chunks
  const std::size_t c_out = std::size_t(p.y.channels);
  const std::size_t taps = std::size_t(p.window.height) * std::size_t(p.window.width);
  const std::size_t groups = ceil_div(c_out, kGroup);
  // Zero-padded channels contribute 0 to every chunk, so padding preserves the chunk sums.
  const std::vector<std::int8_t> xp =
      pad_rows(x, std::size_t(p.x.height) * std::size_t(p.x.width), c_in, cp);
  std::vector<std::int8_t> kp(groups * kGroup * taps * cp, 0);
  for (std::size_t co = 0; co < c_out; ++co) {
    for (std::size_t t = 0; t < taps; ++t) {
      std::memcpy(&kp[(co * taps + t) * cp], k + (co * taps + t) * c_in, c_in);
    }
  }
  std::vector<std::int8_t> pad_pixel(cp, 0);
  std::fill(pad_pixel.begin(), pad_pixel.begin() + std::ptrdiff_t(c_in), p.zero_point);

  std::vector<bool> group_exact(groups, true);
  std::vector<std::int32_t> bias(groups * kGroup, 0);
  for (std::size_t co = 0; co < c_out; ++co) {
    bias[co] = bso[co].bias;
    if (!cannot_saturate(bso[co].bias, k + co * taps * c_in, taps * c_in)) {
      group_exact[co / kGroup] = false;
    }
  }

  std::vector<const std::int8_t*> x_seg(taps);
  alignas(32) std::int32_t acc_out[kGroup];
  for (int r = 0; r < p.y.height; ++r) {
    for (int c = 0; c < p.y.width; ++c) {
      const std::int64_t row0 = p.window.start_row + std::int64_t{r} * p.window.stride_v;
      const std::int64_t col0 = p.window.start_col + std::int64_t{c} * p.window.stride_h;
      for (int i = 0; i < p.window.height; ++i) {
        for (int j = 0; j < p.window.width; ++j) {
          const std::int64_t row = row0 + i;
          const std::int64_t col = col0 + j;
          const bool in = row >= 0 && col >= 0 && row < p.x.height && col < p.x.width;
          x_seg[std::size_t(i * p.window.width + j)] =
              in ? &xp[(std::size_t(row) * std::size_t(p.x.width) + std::size_t(col)) * cp]
                 : pad_pixel.data();
        }
      }
      std::int8_t* out = y + (std::size_t(r) * std::size_t(p.y.width) + std::size_t(c)) * c_out;
      for (std::size_t g = 0; g < groups; ++g) {
        const std::int8_t* w_rows[kGroup];
        for (int j = 0; j < kGroup; ++j) w_rows[j] = &kp[(g * kGroup + std::size_t(j)) * taps * cp];
        __m256i acc = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&bias[g * kGroup]));
        acc = accumulate_group(acc, x_seg.data(), taps, cp, w_rows, group_exact[g]);
        _mm256_store_si256(reinterpret_cast<__m256i*>(acc_out), acc);
        const std::size_t count = std::min<std::size_t>(kGroup, c_out - g * kGroup);
        for (std::size_t j = 0; j < count; ++j) {
          out[g * kGroup + j] = bso_output8(acc_out[j], bso[g * kGroup + j], p.output);
        }
      }
    }
  }
}

NPUKIT_AVX2 void fully_connected_8_avx2(std::int8_t* y, const std::int8_t* x, const std::int8_t* w,
                                        int c_in_int, std::span<const BsoChannel> bso,
                                        OutputOptions output) {
  const std::size_t c_in = std::size_t(c_in_int);
  const std::size_t full = c_in / kChunk * kChunk;  // weights read in place up to here
  const std::size_t tail = c_in - full;
  const std::size_t c_out = bso.size();
  const std::size_t groups = ceil_div(c_out, kGroup);
  std::vector<std::int8_t> x_tail(kChunk, 0);
  std::memcpy(x_tail.data(), x + full, tail);
  std::vector<std::int8_t> w_tail(kGroup * kChunk, 0);
  const std::vector<std::int8_t> zero_row(c_in, 0);  // stands in for channels past C_out
  alignas(32) std::int32_t acc_out[kGroup];
  alignas(32) std::int32_t bias[kGroup];
  for (std::size_t g = 0; g < groups; ++g) {
    const std::size_t count = std::min<std::size_t>(kGroup, c_out - g * kGroup);
    const std::int8_t* w_rows[kGroup];
    bool exact = true;
    for (std::size_t j = 0; j < kGroup; ++j) {
      const std::size_t co = g * kGroup + j;
      w_rows[j] = j < count ? w + co * c_in : zero_row.data();
      bias[j] = j < count ? bso[co].bias : 0;
      if (j < count && !cannot_saturate(bias[j], w_rows[j], c_in)) exact = false;
      std::memcpy(&w_tail[j * kChunk], w_rows[j] + full, tail);
    }
    __m256i acc = _mm256_load_si256(reinterpret_cast<const __m256i*>(bias));
    const std::int8_t* x_seg[1] = {x};
    if (full > 0) acc = accumulate_group(acc, x_seg, 1, full, w_rows, exact);
    if (tail > 0) {
      // The tail chunk: zero-padded copies, so nothing is read past the end of x or w.
      const std::int8_t* tail_rows[kGroup];
      for (std::size_t j = 0; j < kGroup; ++j) tail_rows[j] = &w_tail[j * kChunk];
      const std::int8_t* tail_seg[1] = {x_tail.data()};
      acc = accumulate_group(acc, tail_seg, 1, kChunk, tail_rows, false);
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(acc_out), acc);
    for (std::size_t j = 0; j < count; ++j) {
      y[g * kGroup + j] = bso_output8(acc_out[j], bso[g * kGroup + j], output);
    }
  }
}

NPUKIT_AVX2 void conv2d_depthwise_avx2(std::int8_t* y, const std::int8_t* x, const std::int8_t* k,
                                       std::span<const BsoChannel> bso, const ConvParams& p) {
  // 8 channels per vector of int32 accumulators; one saturating add per tap, as VLMACC does.
  const std::size_t ch = std::size_t(p.x.channels);
  const std::size_t cp = ceil_mod(ch, kGroup);
  const std::size_t taps = std::size_t(p.window.height) * std::size_t(p.window.width);
  const std::vector<std::int8_t> xp =
      pad_rows(x, std::size_t(p.x.height) * std::size_t(p.x.width), ch, cp);
  const std::vector<std::int8_t> kp = pad_rows(k, taps, ch, cp);
  std::vector<std::int8_t> pad_pixel(cp, 0);
  std::fill(pad_pixel.begin(), pad_pixel.begin() + std::ptrdiff_t(ch), p.zero_point);
  std::vector<std::int32_t> bias(cp, 0);
  for (std::size_t c = 0; c < ch; ++c) bias[c] = bso[c].bias;
  std::vector<const std::int8_t*> x_tap(taps);
  alignas(32) std::int32_t acc_out[kGroup];
  for (int r = 0; r < p.y.height; ++r) {
    for (int c = 0; c < p.y.width; ++c) {
      const std::int64_t row0 = p.window.start_row + std::int64_t{r} * p.window.stride_v;
      const std::int64_t col0 = p.window.start_col + std::int64_t{c} * p.window.stride_h;
      for (int i = 0; i < p.window.height; ++i) {
        for (int j = 0; j < p.window.width; ++j) {
          const std::int64_t row = row0 + i;
          const std::int64_t col = col0 + j;
          const bool in = row >= 0 && col >= 0 && row < p.x.height && col < p.x.width;
          x_tap[std::size_t(i * p.window.width + j)] =
              in ? &xp[(std::size_t(row) * std::size_t(p.x.width) + std::size_t(col)) * cp]
                 : pad_pixel.data();
        }
      }
      std::int8_t* out = y + (std::size_t(r) * std::size_t(p.y.width) + std::size_t(c)) * ch;
      for (std::size_t b = 0; b < cp; b += kGroup) {
        __m256i acc = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&bias[b]));
        for (std::size_t t = 0; t < taps; ++t) {
          const __m256i xv =
              _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x_tap[t] + b)));
          const __m256i kv = _mm256_cvtepi8_epi32(
              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(&kp[t * cp + b])));
          acc = saturating_add(acc, _mm256_mullo_epi32(xv, kv));
        }
        _mm256_store_si256(reinterpret_cast<__m256i*>(acc_out), acc);
        const std::size_t count = std::min<std::size_t>(kGroup, ch - b);
        for (std::size_t j = 0; j < count; ++j) {
          out[b + j] = bso_output8(acc_out[j], bso[b + j], p.output);
        }
      }
    }
  }
}

#else  // not x86: the dispatcher never calls these without AVX2

void conv2d_deep_avx2(std::int8_t* y, const std::int8_t* x, const std::int8_t* k,
                      std::span<const BsoChannel> bso, const ConvParams& p) {
  conv2d_deep_scalar(y, x, k, bso, p);
}
void fully_connected_8_avx2(std::int8_t* y, const std::int8_t* x, const std::int8_t* w, int c_in,
                            std::span<const BsoChannel> bso, OutputOptions output) {
  fully_connected_8_scalar(y, x, w, c_in, bso, output);
}
void conv2d_depthwise_avx2(std::int8_t* y, const std::int8_t* x, const std::int8_t* k,
                           std::span<const BsoChannel> bso, const ConvParams& p) {
  conv2d_depthwise_scalar(y, x, k, bso, p);
}

#endif

}  // namespace npukit::xs3::detail
