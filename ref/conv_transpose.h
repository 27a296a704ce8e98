// ConvTranspose (ONNX): geometry and the direct scatter form, shared by the float and int8
// kernels, shape inference of com.microsoft.QLinearConvTranspose and the compiler's
// decompose_conv_transpose pass (header-only, so the compiler needs no executor).
#pragma once

#include "common/error.h"
#include "ir/graph.h"
#include "ir/tensor_util.h"

#include <algorithm>
#include <string>

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
inline TransposeGeometry conv_transpose_geometry(const ir::Node& node, const ir::Shape& x,
                                                 const ir::Shape& w);

// (Header-only, so the compiler uses the same rules without linking the executor.)
inline ir::Shape TransposeGeometry::output_shape(std::int64_t batch) const {
  if (one_d) return {batch, out_channels, w.out};
  return {batch, out_channels, h.out, w.out};
}

inline TransposeGeometry conv_transpose_geometry(const ir::Node& node, const ir::Shape& x,
                                                 const ir::Shape& w) {
  if (x.size() != w.size() || x.size() < 3)
    fail("X {} and W {} must both be [N, C, spatial...]", ir::shape_string(x), ir::shape_string(w));
  if (x.size() > 4) fail("{}-D ConvTranspose is not supported (1-D and 2-D are)", x.size() - 2);
  const std::size_t spatial = x.size() - 2;
  TransposeGeometry g;
  g.one_d = spatial == 1;
  g.group = node.get_int("group", 1);
  g.in_channels = x[1];
  if (g.group < 1 || w[0] != x[1] || x[1] % g.group)
    fail("X has {} channels, W is {} (must be [C, M / group, k...]), group {}", x[1],
         ir::shape_string(w), g.group);
  g.out_channels = w[1] * g.group;
  std::vector<std::int64_t> kernel(w.begin() + 2, w.end());
  kernel = node.get_ints("kernel_shape", kernel);
  auto strides = node.get_ints("strides", std::vector<std::int64_t>(spatial, 1));
  auto dilations = node.get_ints("dilations", std::vector<std::int64_t>(spatial, 1));
  auto pads = node.get_ints("pads", std::vector<std::int64_t>(2 * spatial, 0));
  auto out_pad = node.get_ints("output_padding", std::vector<std::int64_t>(spatial, 0));
  auto out_shape = node.get_ints("output_shape", {});
  if (kernel.size() != spatial || strides.size() != spatial || dilations.size() != spatial ||
      pads.size() != 2 * spatial || out_pad.size() != spatial ||
      (!out_shape.empty() && out_shape.size() != spatial))
    fail(
        "kernel_shape/strides/dilations/pads/output_padding/output_shape do not match {} spatial "
        "axes",
        spatial);
  for (std::size_t i = 0; i < spatial; ++i)
    if (kernel[i] != w[2 + i])
      fail("kernel_shape {} disagrees with W {}", kernel[i], ir::shape_string(w));
  const std::string auto_pad = node.get_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID")
    fail("auto_pad '{}' is not supported (NOTSET and VALID are; give explicit pads)", auto_pad);
  std::vector<TransposeAxis> axes(spatial);
  for (std::size_t i = 0; i < spatial; ++i) {
    TransposeAxis& a = axes[i];
    a.in = x[2 + i], a.kernel = kernel[i], a.stride = strides[i], a.dilation = dilations[i];
    a.output_padding = out_pad[i];
    if (a.kernel < 1 || a.stride < 1 || a.dilation < 1 || pads[i] < 0 || pads[i + spatial] < 0 ||
        a.output_padding < 0)
      fail("kernel, strides and dilations must be >= 1, pads and output_padding >= 0");
    if (a.output_padding >= std::max(a.stride, a.dilation))
      fail("output_padding {} must be smaller than the stride or the dilation", a.output_padding);
    const std::int64_t full =
        a.stride * (a.in - 1) + a.output_padding + (a.kernel - 1) * a.dilation + 1;
    if (!out_shape.empty()) {
      const std::int64_t total = std::max<std::int64_t>(0, full - out_shape[i]);
      a.pad_end = total / 2;  // onnxruntime: the odd element of padding at the beginning
      a.pad_begin = total - a.pad_end;
      a.out = out_shape[i];
    } else {
      if (auto_pad == "NOTSET") a.pad_begin = pads[i], a.pad_end = pads[i + spatial];
      a.out = full - a.pad_begin - a.pad_end;
    }
    if (a.out < 1) fail("the output would have {} elements along a spatial axis", a.out);
  }
  if (g.one_d) {
    g.w = axes[0];
  } else {
    g.h = axes[0];
    g.w = axes[1];
  }
  return g;
}

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
