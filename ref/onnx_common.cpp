#include "ref/onnx_common.h"

namespace npukit::ref {

ir::Shape broadcast_shapes(const ir::Shape& a, const ir::Shape& b) {
  const std::size_t rank = std::max(a.size(), b.size());
  ir::Shape out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const std::int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      fail("shapes {} and {} do not broadcast", ir::shape_string(a), ir::shape_string(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<std::int64_t> broadcast_strides(const ir::Shape& shape, const ir::Shape& out) {
  std::vector<std::int64_t> strides(out.size(), 0);
  std::int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    const std::size_t o = i + (out.size() - shape.size());
    strides[o] = shape[i] == 1 ? 0 : stride;
    stride *= shape[i];
  }
  return strides;
}

void check_data(const ir::Tensor& t, const char* what) {
  if (ir::element_count(t.shape) < 0)
    fail("{} '{}' has unknown dimensions {}", what, t.name, ir::shape_string(t.shape));
  if (ir::stored_count(t) != ir::element_count(t.shape))
    fail("{} '{}' holds {} values for shape {}", what, t.name, ir::stored_count(t),
         ir::shape_string(t.shape));
}

const float* float_data(const ir::Tensor& t, const char* what) {
  if (t.dtype != ir::DType::kFloat32)
    fail("{} '{}' must be float32, got {}", what, t.name, ir::dtype_name(t.dtype));
  check_data(t, what);
  return t.as<float>();
}

std::int64_t normalize_axis(std::int64_t axis, std::int64_t rank, const char* what, bool extra) {
  const std::int64_t top = extra ? rank : rank - 1;  // Flatten's axis may equal the rank
  if (axis < -rank || axis > top) fail("{} {} is out of range for rank {}", what, axis, rank);
  return axis < 0 ? axis + rank : axis;
}

ir::Shape WindowGeometry::output_shape(std::int64_t n, std::int64_t c) const {
  if (one_d) return {n, c, out_w};
  return {n, c, out_h, out_w};
}

WindowGeometry window_geometry(const ir::Node& node, const ir::Shape& x_shape,
                               const std::vector<std::int64_t>& kernel_from_weights,
                               bool ceil_allowed) {
  const std::size_t spatial = x_shape.size() >= 2 ? x_shape.size() - 2 : 0;
  if (spatial != 1 && spatial != 2)
    fail("input shape {}: {}-D spatial inputs are not supported (1-D and 2-D are)", spatial,
         ir::shape_string(x_shape));
  auto kernel = node.get_ints("kernel_shape", kernel_from_weights);
  auto strides = node.get_ints("strides", std::vector<std::int64_t>(spatial, 1));
  auto dilations = node.get_ints("dilations", std::vector<std::int64_t>(spatial, 1));
  auto pads = node.get_ints("pads", std::vector<std::int64_t>(2 * spatial, 0));
  if (kernel.size() != spatial || strides.size() != spatial || dilations.size() != spatial ||
      pads.size() != 2 * spatial)
    fail("kernel_shape/strides/dilations/pads do not match {} spatial axes", spatial);
  for (std::size_t i = 0; i < spatial; ++i)
    if (kernel[i] < 1 || strides[i] < 1 || dilations[i] < 1 || pads[i] < 0 || pads[i + spatial] < 0)
      fail("kernel, strides and dilations must be >= 1 and pads >= 0");
  const bool ceil_mode = node.get_int("ceil_mode", 0) != 0;
  if (ceil_mode && !ceil_allowed) fail("ceil_mode is not an attribute of this op");
  const std::string auto_pad = node.get_string("auto_pad", "NOTSET");

  std::vector<std::int64_t> in(x_shape.begin() + 2, x_shape.end()), out(spatial);
  for (std::size_t i = 0; i < spatial; ++i) {
    const std::int64_t extent = (kernel[i] - 1) * dilations[i] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out[i] = (in[i] + strides[i] - 1) / strides[i];
      const std::int64_t total =
          std::max<std::int64_t>(0, (out[i] - 1) * strides[i] + extent - in[i]);
      const std::int64_t small = total / 2;
      pads[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      pads[i + spatial] = total - pads[i];
      continue;
    }
    if (auto_pad == "VALID") {
      pads[i] = pads[i + spatial] = 0;
    } else if (auto_pad != "NOTSET") {
      fail("auto_pad '{}' is not supported", auto_pad);
    }
    const std::int64_t span = in[i] + pads[i] + pads[i + spatial] - extent;
    if (span < 0)
      fail("window of {} does not fit the padded input {}", extent, ir::shape_string(x_shape));
    out[i] = (ceil_mode ? (span + strides[i] - 1) / strides[i] : span / strides[i]) + 1;
    // ONNX/PyTorch: the last ceil window must start inside the image or the begin padding.
    if (ceil_mode && (out[i] - 1) * strides[i] >= in[i] + pads[i]) --out[i];
  }
  WindowGeometry g;
  g.one_d = spatial == 1;
  const std::size_t h = 0, w = spatial - 1;  // in 1-D, the single axis is W
  if (!g.one_d) {
    g.in_h = in[h], g.out_h = out[h], g.kernel_h = kernel[h], g.stride_h = strides[h];
    g.dilation_h = dilations[h], g.pad_top = pads[h], g.pad_bottom = pads[h + spatial];
  }
  g.in_w = in[w], g.out_w = out[w], g.kernel_w = kernel[w], g.stride_w = strides[w];
  g.dilation_w = dilations[w], g.pad_left = pads[w], g.pad_right = pads[w + spatial];
  return g;
}

MatMulShape matmul_shape(const ir::Shape& a_in, const ir::Shape& b_in) {
  if (a_in.empty() || b_in.empty()) fail("MatMul operands must have rank >= 1");
  ir::Shape a = a_in, b = b_in;
  const bool a_vector = a.size() == 1, b_vector = b.size() == 1;
  if (a_vector) a.insert(a.begin(), 1);
  if (b_vector) b.push_back(1);
  MatMulShape r;
  r.m = a[a.size() - 2], r.k = a.back(), r.n = b.back();
  if (b[b.size() - 2] != r.k)
    fail("MatMul shapes {} and {} disagree on the inner dimension", ir::shape_string(a_in),
         ir::shape_string(b_in));
  ir::Shape a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  ir::Shape batch = broadcast_shapes(a_batch, b_batch);
  for_each_broadcast(batch, a_batch, b_batch, [&](std::int64_t, std::int64_t ia, std::int64_t ib) {
    r.a_offsets.push_back(ia * r.m * r.k);
    r.b_offsets.push_back(ib * r.k * r.n);
  });
  if (batch.empty() && r.a_offsets.empty()) {  // for_each over a scalar shape runs once already
    r.a_offsets.push_back(0);
    r.b_offsets.push_back(0);
  }
  r.out = batch;
  if (!a_vector) r.out.push_back(r.m);
  if (!b_vector) r.out.push_back(r.n);
  return r;
}

}  // namespace npukit::ref
