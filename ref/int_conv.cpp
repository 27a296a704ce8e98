#include "ref/int_conv.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

namespace npukit::ref {

namespace {

thread_local bool g_used_int32 = false;

// Output pixels per im2col block: 32 pixels x K int16 values stay in the L1/L2 caches while every
// output channel of the group is computed from them.
constexpr std::int64_t kPixelBlock = 32;

// out[m * out_stride + p] += sum over k of w[m * k_count + k] * col[p * k_count + k], the sum in
// int32 (the caller has checked that no partial sum can overflow). A plain loop the compiler
// vectorises (pmaddwd); built for AVX2 and for the baseline x86-64, chosen when the program loads.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx2", "default")))
#endif
void dot_block(const std::int16_t* w, const std::int16_t* col, std::int64_t m_count,
               std::int64_t p_count, std::int64_t k_count, std::int64_t* out,
               std::int64_t out_stride) {
  for (std::int64_t m = 0; m < m_count; ++m) {
    const std::int16_t* wm = w + m * k_count;
    for (std::int64_t p = 0; p < p_count; ++p) {
      const std::int16_t* cp = col + p * k_count;
      std::int32_t sum = 0;
      for (std::int64_t k = 0; k < k_count; ++k) sum += wm[k] * cp[k];
      out[m * out_stride + p] += sum;
    }
  }
}

}  // namespace

bool convolve_int_used_int32() { return g_used_int32; }

template <typename X, typename W>
void convolve_int(const X* x, const W* w, std::int64_t* acc, std::int64_t batch,
                  std::int64_t channels, std::int64_t kernels, std::int64_t group,
                  const WindowGeometry& g, std::int32_t x_zero,
                  const std::vector<std::int32_t>& w_zero) {
  const std::int64_t cg = channels / group, kg = kernels / group;
  const std::int64_t k_count = cg * g.kernel_h * g.kernel_w;
  const std::int64_t in_area = g.in_h * g.in_w, out_area = g.out_h * g.out_w;
  auto w_zero_of = [&](std::int64_t m) -> std::int64_t {
    return w_zero.size() == 1 ? w_zero[0] : w_zero[static_cast<std::size_t>(m)];
  };
  // The int32 bound: every |term| <= max_x * max_w, K terms per output.
  std::int64_t max_x = 0, max_w = 0;
  for (std::int64_t i = 0; i < batch * channels * in_area; ++i)
    max_x = std::max(max_x, std::abs(std::int64_t{x[i]} - x_zero));
  for (std::int64_t m = 0; m < kernels; ++m)
    for (std::int64_t k = 0; k < k_count; ++k)
      max_w = std::max(max_w, std::abs(std::int64_t{w[m * k_count + k]} - w_zero_of(m)));
  constexpr std::int64_t kInt16Max = std::numeric_limits<std::int16_t>::max();
  constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();
  const std::int64_t term = max_x * max_w;  // <= 2^30 once both fit int16
  g_used_int32 =
      max_x <= kInt16Max && max_w <= kInt16Max && (term == 0 || k_count <= kInt32Max / term);
  if (!g_used_int32) {
    convolve<X, W, std::int64_t>(x, w, acc, batch, channels, kernels, group, g, x_zero,
                                 std::vector<std::int64_t>(w_zero.begin(), w_zero.end()));
    return;
  }
  if (k_count == 0 || out_area == 0) return;

  // Weights minus their zero point, [m][k] with k = (c * KH + i) * KW + j as in w.
  std::vector<std::int16_t> wt(static_cast<std::size_t>(kernels * k_count));
  for (std::int64_t m = 0; m < kernels; ++m)
    for (std::int64_t k = 0; k < k_count; ++k)
      wt[static_cast<std::size_t>(m * k_count + k)] =
          static_cast<std::int16_t>(std::int64_t{w[m * k_count + k]} - w_zero_of(m));
  // im2col block: col[p][k] = x - x_zero at the input pixel tap k of output pixel p reads, 0 in
  // the padding (which takes no part).
  std::vector<std::int16_t> col(static_cast<std::size_t>(kPixelBlock * k_count));
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t gi = 0; gi < group; ++gi) {
      const X* planes = x + (b * channels + gi * cg) * in_area;
      for (std::int64_t p0 = 0; p0 < out_area; p0 += kPixelBlock) {
        const std::int64_t count = std::min(kPixelBlock, out_area - p0);
        for (std::int64_t p = 0; p < count; ++p) {
          const std::int64_t oy = (p0 + p) / g.out_w, ox = (p0 + p) % g.out_w;
          std::int16_t* dst = col.data() + p * k_count;
          for (std::int64_t c = 0; c < cg; ++c)
            for (std::int64_t i = 0; i < g.kernel_h; ++i) {
              const std::int64_t iy = oy * g.stride_h - g.pad_top + i * g.dilation_h;
              for (std::int64_t j = 0; j < g.kernel_w; ++j, ++dst) {
                const std::int64_t ix = ox * g.stride_w - g.pad_left + j * g.dilation_w;
                *dst = iy < 0 || iy >= g.in_h || ix < 0 || ix >= g.in_w
                           ? std::int16_t{0}
                           : static_cast<std::int16_t>(
                                 std::int64_t{planes[c * in_area + iy * g.in_w + ix]} - x_zero);
              }
            }
        }
        dot_block(wt.data() + gi * kg * k_count, col.data(), kg, count, k_count,
                  acc + (b * kernels + gi * kg) * out_area + p0, out_area);
      }
    }
}

template void convolve_int<std::int8_t, std::int8_t>(const std::int8_t*, const std::int8_t*,
                                                     std::int64_t*, std::int64_t, std::int64_t,
                                                     std::int64_t, std::int64_t,
                                                     const WindowGeometry&, std::int32_t,
                                                     const std::vector<std::int32_t>&);
template void convolve_int<std::int32_t, std::int32_t>(const std::int32_t*, const std::int32_t*,
                                                       std::int64_t*, std::int64_t, std::int64_t,
                                                       std::int64_t, std::int64_t,
                                                       const WindowGeometry&, std::int32_t,
                                                       const std::vector<std::int32_t>&);

}  // namespace npukit::ref
