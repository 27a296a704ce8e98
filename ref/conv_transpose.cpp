// The float ConvTranspose kernel and its geometry (see conv_transpose.h).
#include "ref/conv_transpose.h"

#include "ir/tensor_util.h"
#include "ref/kernel_registry.h"
#include "ref/onnx_common.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace npukit::ref {

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

// A QLinear* parameter that must be one value (per-tensor), widened to int32.
std::int32_t scalar_int(const Tensor* t, const char* what) {
  if (!t) return 0;
  check_data(*t, what);
  if (ir::element_count(t->shape) != 1)
    fail("{} '{}' must be a single value (per-tensor), has shape {}", what, t->name,
         ir::shape_string(t->shape));
  switch (t->dtype) {
    case DType::kInt8:
      return t->as<std::int8_t>()[0];
    case DType::kUInt8:
      return t->as<std::uint8_t>()[0];
    default:
      fail("{} '{}' must be int8 or uint8, got {}", what, t->name, ir::dtype_name(t->dtype));
  }
}

float positive_scale(const Tensor& t, const char* what) {
  const float* p = float_data(t, what);
  if (ir::element_count(t.shape) != 1)
    fail("{} '{}' must be a single value (per-tensor), has shape {}", what, t.name,
         ir::shape_string(t.shape));
  if (!(p[0] > 0) || !std::isfinite(p[0]))
    fail("{} '{}' holds {}, scales must be positive", what, t.name, p[0]);
  return p[0];
}

// com.microsoft QLinearConvTranspose (onnxruntime's contrib schema: x, x_scale, x_zero_point, w,
// w_scale, w_zero_point, y_scale, y_zero_point, B), per-tensor: the integer scatter of
// conv_transpose_scatter into an int32 accumulator started at the int32 bias, then requantized as
// QLinearConv is (float32 multiplier x_scale * w_scale / y_scale, round half to even, saturate).
Outputs qlinear_conv_transpose(const ir::Node& node, const OpInputs& in) {
  const Tensor &x = in.at(0), &w = in.at(3);
  check_data(x, "x");
  check_data(w, "w");
  auto is8 = [](DType t) { return t == DType::kInt8 || t == DType::kUInt8; };
  if (!is8(x.dtype) || !is8(w.dtype)) fail("x and w must be int8 or uint8");
  const std::vector<std::int32_t> xv = [&] {
    std::vector<std::int32_t> v(static_cast<std::size_t>(ir::element_count(x.shape)));
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = x.dtype == DType::kInt8 ? x.as<std::int8_t>()[i] : x.as<std::uint8_t>()[i];
    return v;
  }();
  std::vector<std::int32_t> wv(static_cast<std::size_t>(ir::element_count(w.shape)));
  for (std::size_t i = 0; i < wv.size(); ++i)
    wv[i] = w.dtype == DType::kInt8 ? w.as<std::int8_t>()[i] : w.as<std::uint8_t>()[i];
  const float x_scale = positive_scale(in.at(1), "x_scale");
  const float w_scale = positive_scale(in.at(4), "w_scale");
  const float y_scale = positive_scale(in.at(6), "y_scale");
  const std::int32_t x_zero = scalar_int(in.optional(2), "x_zero_point");
  const std::int32_t w_zero = scalar_int(in.optional(5), "w_zero_point");
  const Tensor* yz = in.optional(7);
  const std::int32_t y_zero = scalar_int(yz, "y_zero_point");
  const DType out_type = yz ? yz->dtype : DType::kUInt8;
  const TransposeGeometry g = conv_transpose_geometry(node, x.shape, w.shape);
  const std::int64_t n = x.shape[0];
  Tensor out = ir::make_tensor(out_type, g.output_shape(n));
  const std::int64_t area = g.h.out * g.w.out;
  std::vector<std::int64_t> acc(static_cast<std::size_t>(ir::element_count(out.shape)), 0);
  if (const Tensor* b = in.optional(8)) {
    check_data(*b, "B");
    if (b->dtype != DType::kInt32 || ir::element_count(b->shape) != g.out_channels)
      fail("B must be int32 with {} values (one per output channel)", g.out_channels);
    for (std::int64_t i = 0; i < n * g.out_channels; ++i)
      std::fill_n(acc.data() + i * area, area, b->as<std::int32_t>()[i % g.out_channels]);
  }
  conv_transpose_scatter<std::int32_t, std::int32_t, std::int64_t>(xv.data(), wv.data(), acc.data(),
                                                                   n, g, x_zero, {w_zero});
  const float multiplier = x_scale * w_scale / y_scale;
  for (std::size_t i = 0; i < acc.size(); ++i) {
    // onnxruntime's int32 accumulator (wrapping), requantized in float32.
    const float v =
        round_half_even(static_cast<float>(static_cast<std::int32_t>(acc[i])) * multiplier) +
        static_cast<float>(y_zero);
    if (out_type == DType::kInt8)
      out.as_mutable<std::int8_t>()[i] = static_cast<std::int8_t>(std::clamp(v, -128.f, 127.f));
    else
      out.as_mutable<std::uint8_t>()[i] = static_cast<std::uint8_t>(std::clamp(v, 0.f, 255.f));
  }
  return one(std::move(out));
}

// DepthToSpace (any element type; the interleave of the sub-pixel form of ConvTranspose, see
// compiler/pass_decompose_conv_transpose.cpp). DCR: input channel (b1 * bs + b2) * C + c; CRD:
// c * bs * bs + b1 * bs + b2.
Outputs depth_to_space(const ir::Node& node, const OpInputs& in) {
  const Tensor& x = in.at(0);
  check_data(x, "input");
  if (x.shape.size() != 4) fail("input must be 4-D, has shape {}", ir::shape_string(x.shape));
  const std::int64_t bs = node.get_int("blocksize", 0);
  const std::string mode = node.get_string("mode", "DCR");
  if (bs < 1) fail("blocksize {} must be >= 1", bs);
  if (mode != "DCR" && mode != "CRD") fail("mode '{}' must be DCR or CRD", mode);
  const std::int64_t n = x.shape[0], cin = x.shape[1], h = x.shape[2], w = x.shape[3];
  if (cin % (bs * bs)) fail("{} channels are not a multiple of blocksize^2 = {}", cin, bs * bs);
  const std::int64_t c = cin / (bs * bs);
  Tensor out = ir::make_tensor(x.dtype, {n, c, h * bs, w * bs});
  const std::size_t es = ir::dtype_size(x.dtype);
  const std::uint8_t* src = x.data.data();
  std::uint8_t* dst = out.data.data();
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t oy = 0; oy < h * bs; ++oy)
        for (std::int64_t ox = 0; ox < w * bs; ++ox) {
          const std::int64_t b1 = oy % bs, b2 = ox % bs;
          const std::int64_t ic =
              mode == "DCR" ? (b1 * bs + b2) * c + ch : ch * bs * bs + b1 * bs + b2;
          const std::int64_t from = ((b * cin + ic) * h + oy / bs) * w + ox / bs;
          const std::int64_t to = ((b * c + ch) * h * bs + oy) * w * bs + ox;
          std::memcpy(dst + to * es, src + from * es, es);
        }
  return one(std::move(out));
}

}  // namespace

void add_conv_transpose_kernels(KernelTable& t) {
  t[{"", "ConvTranspose"}] = conv_transpose;
  t[{"com.microsoft", "QLinearConvTranspose"}] = qlinear_conv_transpose;
  t[{"", "DepthToSpace"}] = depth_to_space;
}

}  // namespace npukit::ref
