// The float convolution of the reference executor (calibration and host segments), where almost
// all of `npukit quantize`'s time goes. With oneDNN (Debian libdnnl-dev, found at configure time)
// it runs oneDNN's convolution, which picks its kernel for the CPU at run time; without it, or
// for a geometry oneDNN cannot take, the plain direct loop of ref/onnx_common.h.
#pragma once

#include <cstdint>
#include <memory>

#include "ref/onnx_common.h"

namespace npukit::ref {

// Convolution weights already reordered into the layout oneDNN chose, kept from call to call (a
// network run image after image reordered all its weights for every image: about a fifth of
// the float executor's time). Keyed by the weights' address, so a cache may serve only weights
// that stay where they are and unchanged while it lives: one graph's constants (run_graph passes
// RunOptions::conv_weights for those alone). Threads may share one (calibration's do).
class ConvWeightCache {
 public:
  ConvWeightCache();
  ~ConvWeightCache();
  ConvWeightCache(const ConvWeightCache&) = delete;
  ConvWeightCache& operator=(const ConvWeightCache&) = delete;
  struct Entries;
  std::unique_ptr<Entries> entries;
};

// y[n][m][oy][ox] = bias[m] + sum over the window of x * w, NCHW / OIHW (group g: W is
// [M, C/g, KH, KW]). `bias` may be null. Results agree with the direct loop to float rounding
// (the summation order differs) and do not depend on the thread count.
// `weights_cache`, when given, keeps w's reordered copy (see ConvWeightCache).
void conv2d_float(const float* x, const float* w, const float* bias, float* y, std::int64_t batch,
                  std::int64_t channels, std::int64_t kernels, std::int64_t group,
                  const WindowGeometry& g, ConvWeightCache* weights_cache = nullptr);

// The plain direct loop alone (the executable specification; tests compare the two).
void conv2d_float_direct(const float* x, const float* w, const float* bias, float* y,
                         std::int64_t batch, std::int64_t channels, std::int64_t kernels,
                         std::int64_t group, const WindowGeometry& g);

// Whether conv2d_float uses oneDNN in this build.
bool float_conv_uses_onednn();

}  // namespace npukit::ref
