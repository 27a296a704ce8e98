// Exact integer convolution of 8-bit data for the quantized reference kernels (GatiConv,
// QLinearConv): the arithmetic of convolve<X, W, std::int64_t> (ref/onnx_common.h), computed as
// int32 dot products over an im2col copy of the input so the compiler can vectorise them.
#pragma once

#include <cstdint>
#include <vector>

#include "ref/onnx_common.h"

namespace npukit::ref {

// acc[n][m][oy][ox] += sum over (c, i, j) of (x - x_zero) * (w[m] - w_zero[m]), padding taking no
// part (w_zero has 1 or `kernels` values). Exact: the int32 path runs only when every term fits
// int16 and K * max|x - x_zero| * max|w - w_zero| <= 2^31 - 1 (K = channels / group * kernel
// area), so no partial sum in any order can overflow; otherwise it is convolve<X, W, int64_t>.
template <typename X, typename W>
void convolve_int(const X* x, const W* w, std::int64_t* acc, std::int64_t batch,
                  std::int64_t channels, std::int64_t kernels, std::int64_t group,
                  const WindowGeometry& g, std::int32_t x_zero,
                  const std::vector<std::int32_t>& w_zero);

extern template void convolve_int<std::int8_t, std::int8_t>(
    const std::int8_t*, const std::int8_t*, std::int64_t*, std::int64_t, std::int64_t, std::int64_t,
    std::int64_t, const WindowGeometry&, std::int32_t, const std::vector<std::int32_t>&);
extern template void convolve_int<std::int32_t, std::int32_t>(const std::int32_t*,
                                                              const std::int32_t*, std::int64_t*,
                                                              std::int64_t, std::int64_t,
                                                              std::int64_t, std::int64_t,
                                                              const WindowGeometry&, std::int32_t,
                                                              const std::vector<std::int32_t>&);

// Whether the int32 path ran on the last convolve_int call of this thread (for tests).
bool convolve_int_used_int32();

}  // namespace npukit::ref
