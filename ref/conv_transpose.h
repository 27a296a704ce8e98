// ConvTranspose (ONNX): geometry and the direct scatter form, shared by the float kernel, the
// quantizer and the compiler's lowering to zero insertion + Conv.
#pragma once

#include "ir/graph.h"

#include <cstdint>
#include <vector>

namespace npukit::ref {

// One spatial axis of a ConvTranspose: out = stride * (in - 1) + output_padding +
// (kernel - 1) * dilation + 1 - pad_begin - pad_end.
struct TransposeAxis {
  std::int64_t in = 1, out = 1, kernel = 1, stride = 1, dilation = 1, pad_begin = 0, pad_end = 0,
               output_padding = 0;
};
struct TransposeGeometry {
  TransposeAxis h, w;  // 1-D runs as H = 1
  bool one_d = false;
  std::int64_t group = 1;
  std::int64_t in_channels = 0, out_channels = 0;
  ir::Shape output_shape(std::int64_t batch) const;
};

// Geometry of a ConvTranspose node for input shape `x` ([N, C, spatial...], 1 or 2 spatial axes)
// and weight shape `w` ([C, M / group, k...]). Supports auto_pad NOTSET and VALID, pads,
// output_padding, dilations, strides, group and output_shape (its padding split as onnxruntime
// does: the larger half at the beginning). Throws npukit::Error naming the attribute otherwise.
TransposeGeometry conv_transpose_geometry(const ir::Node& node, const ir::Shape& x,
                                          const ir::Shape& w);

// y[n][m][oy][ox] += (x[n][c][iy][ix] - x_zero) * (w[c][m'][ky][kx] - w_zero[m or 0]) for every
// oy = iy * stride - pad_begin + ky * dilation inside the output. `acc` must be zero- or
// bias-initialised (out_channels x out area per image).
template <typename X, typename W, typename Acc>
void conv_transpose_scatter(const X* x, const W* w, Acc* acc, std::int64_t batch,
                            const TransposeGeometry& g, Acc x_zero,
                            const std::vector<Acc>& w_zero) {
  const std::int64_t cg = g.in_channels / g.group, mg = g.out_channels / g.group;
  const std::int64_t in_area = g.h.in * g.w.in, out_area = g.h.out * g.w.out;
  const std::int64_t k_area = g.h.kernel * g.w.kernel;
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t c = 0; c < g.in_channels; ++c) {
      const std::int64_t grp = c / cg;
      const X* plane = x + (b * g.in_channels + c) * in_area;
      for (std::int64_t ml = 0; ml < mg; ++ml) {
        const std::int64_t m = grp * mg + ml;
        const Acc wz = w_zero.size() == 1 ? w_zero[0] : w_zero[m];
        Acc* out = acc + (b * g.out_channels + m) * out_area;
        const W* kernel = w + (c * mg + ml) * k_area;
        for (std::int64_t ky = 0; ky < g.h.kernel; ++ky)
          for (std::int64_t kx = 0; kx < g.w.kernel; ++kx) {
            const Acc weight = static_cast<Acc>(kernel[ky * g.w.kernel + kx]) - wz;
            if (weight == Acc{0}) continue;
            for (std::int64_t iy = 0; iy < g.h.in; ++iy) {
              const std::int64_t oy = iy * g.h.stride - g.h.pad_begin + ky * g.h.dilation;
              if (oy < 0 || oy >= g.h.out) continue;
              for (std::int64_t ix = 0; ix < g.w.in; ++ix) {
                const std::int64_t ox = ix * g.w.stride - g.w.pad_begin + kx * g.w.dilation;
                if (ox < 0 || ox >= g.w.out) continue;
                out[oy * g.w.out + ox] +=
                    (static_cast<Acc>(plane[iy * g.w.in + ix]) - x_zero) * weight;
              }
            }
          }
      }
    }
}

}  // namespace npukit::ref
