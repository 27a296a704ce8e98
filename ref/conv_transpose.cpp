// The float ConvTranspose kernel and its geometry (see conv_transpose.h).
#include "ref/conv_transpose.h"

#include "ir/tensor_util.h"
#include "ref/kernel_registry.h"
#include "ref/onnx_common.h"

namespace npukit::ref {

ir::Shape TransposeGeometry::output_shape(std::int64_t batch) const {
  if (one_d) return {batch, out_channels, w.out};
  return {batch, out_channels, h.out, w.out};
}

TransposeGeometry conv_transpose_geometry(const ir::Node& node, const ir::Shape& x,
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

namespace {

Outputs conv_transpose(const ir::Node& node, const OpInputs& in) {
  const Tensor &x = in.at(0), &w = in.at(1);
  const float* xp = float_data(x, "input X");
  const float* wp = float_data(w, "input W");
  const TransposeGeometry g = conv_transpose_geometry(node, x.shape, w.shape);
  const std::int64_t n = x.shape[0];
  Tensor out = ir::make_tensor(DType::kFloat32, g.output_shape(n));
  float* y = out.as_mutable<float>();
  const std::int64_t area = g.h.out * g.w.out;
  if (const Tensor* b = in.optional(2)) {
    const float* bp = float_data(*b, "input B");
    if (ir::element_count(b->shape) != g.out_channels)
      fail("B has {} values for {} output channels", ir::element_count(b->shape), g.out_channels);
    for (std::int64_t i = 0; i < n * g.out_channels; ++i)
      std::fill_n(y + i * area, area, bp[i % g.out_channels]);
  }
  // Accumulated in double, then rounded once: closer to onnxruntime's GEMM + col2im than a float
  // scatter whose rounding depends on the visiting order.
  std::vector<double> acc(y, y + ir::element_count(out.shape));
  std::vector<double> xd(xp, xp + ir::element_count(x.shape)),
      wd(wp, wp + ir::element_count(w.shape));
  conv_transpose_scatter<double, double, double>(xd.data(), wd.data(), acc.data(), n, g, 0.0,
                                                 {0.0});
  for (std::size_t i = 0; i < acc.size(); ++i) y[i] = static_cast<float>(acc[i]);
  return one(std::move(out));
}

}  // namespace

void add_conv_transpose_kernels(KernelTable& t) { t[{"", "ConvTranspose"}] = conv_transpose; }

}  // namespace npukit::ref
