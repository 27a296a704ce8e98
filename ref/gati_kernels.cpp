#include "ref/gati_kernels.h"

#include <algorithm>
#include <initializer_list>
#include <numeric>
#include <string_view>
#include <utility>

#include "common/error.h"
#include "ir/tensor_util.h"
#include "ref/gati_tanh.h"
#include "ref/int_conv.h"
#include "ref/onnx_common.h"

namespace npukit::ref::gati {

using ir::DType;
using ir::Tensor;

std::int64_t round_shift(std::int64_t v, int shift) {
  if (shift == 0) return v;
  return (v + (std::int64_t{1} << (shift - 1))) >> shift;
}

std::int8_t clamp_int8(std::int64_t v) {
  return static_cast<std::int8_t>(std::clamp<std::int64_t>(v, -128, 127));
}

std::int8_t quantize(std::int64_t acc, std::int32_t quant_scale, int quant_shift, int fp_cast) {
  std::int64_t q = round_shift(acc * quant_scale, quant_shift);
  if (fp_cast) q = round_shift(q, fp_cast);
  return clamp_int8(q);
}

std::int8_t activate(std::int8_t y, const Tail& tail) {
  switch (tail.act) {
    case Act::kNone:
      return y;
    case Act::kRelu:
      return y < 0 ? 0 : y;
    case Act::kClip:
      // Unsigned 8-bit compare against ActParam, after negatives became 0.
      if (y < 0) return 0;
      return static_cast<std::uint8_t>(y) > tail.act_param
                 ? static_cast<std::int8_t>(tail.act_param)
                 : y;
    case Act::kLeaky: {
      std::int64_t alpha = y < 0 ? tail.neg_alpha : tail.pos_alpha;
      return clamp_int8((alpha * y) >> 8);
    }
  }
  return y;
}

namespace {

void expect(const Tensor& t, DType dtype, std::size_t rank, const char* what, const char* op) {
  if (t.dtype != dtype)
    fail("{}: input {} '{}' must be {}, got {}", op, what, t.name, ir::dtype_name(dtype),
         ir::dtype_name(t.dtype));
  if (rank && t.shape.size() != rank)
    fail("{}: input {} '{}' must have rank {}, got shape {}", op, what, t.name, rank,
         ir::shape_string(t.shape));
  if (ir::stored_count(t) != ir::element_count(t.shape))
    fail("{}: input {} '{}' holds {} values for shape {}", op, what, t.name, ir::stored_count(t),
         ir::shape_string(t.shape));
}

// Applies quantizer + activation (+ global pool) to int64 accumulators of shape [N,K,OH,OW].
Tensor finish_tail(const std::vector<std::int64_t>& acc, const ir::Shape& shape, const Tail& tail,
                   int fp_cast, const char* op) {
  if (!tail.quant_en) {
    Tensor out = ir::make_tensor(DType::kInt32, shape);
    auto* y = out.as_mutable<std::int32_t>();
    for (std::size_t i = 0; i < acc.size(); ++i) y[i] = static_cast<std::int32_t>(acc[i]);
    return out;
  }
  std::vector<std::int8_t> q(acc.size());
  for (std::size_t i = 0; i < acc.size(); ++i)
    q[i] = activate(quantize(acc[i], tail.quant_scale, tail.quant_shift, fp_cast), tail);
  if (!tail.global_pool) return ir::make_tensor<std::int8_t>(shape, q);
  if (shape.size() != 4) fail("{}: the global pool needs an NCHW output", op);
  std::int64_t planes = shape[0] * shape[1], area = shape[2] * shape[3];
  std::vector<std::int8_t> pooled(static_cast<std::size_t>(planes));
  for (std::int64_t p = 0; p < planes; ++p) {
    std::int64_t sum = 0;
    for (std::int64_t i = 0; i < area; ++i) sum += q[p * area + i];
    pooled[p] = clamp_int8(round_shift(sum * tail.global_pool_scale, tail.global_pool_shift));
  }
  return ir::make_tensor<std::int8_t>({shape[0], shape[1], 1, 1}, pooled);
}

}  // namespace

Tensor conv(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* acc_in,
            const ConvParams& p) {
  const char* op = "GatiConv";
  expect(x, DType::kInt8, 4, "x", op);
  expect(w, DType::kInt8, 4, "w", op);
  const std::int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const std::int64_t kn = w.shape[0], kc = w.shape[1], kh = w.shape[2], kw = w.shape[3];
  if (p.group < 1 || c % p.group || kn % p.group || kc * p.group != c)
    fail("{}: x has {} channels, w is {}, group {}: w must be [KN, C/group, KH, KW]", op, c,
         ir::shape_string(w.shape), p.group);
  if (p.stride_h < 1 || p.stride_w < 1) fail("{}: strides must be >= 1", op);
  const std::int64_t oh = (h + p.pad_top + p.pad_bottom - kh) / p.stride_h + 1;
  const std::int64_t ow = (wd + p.pad_left + p.pad_right - kw) / p.stride_w + 1;
  if (h + p.pad_top + p.pad_bottom < kh || wd + p.pad_left + p.pad_right < kw)
    fail("{}: kernel {}x{} is larger than the padded input {}", op, kh, kw,
         ir::shape_string(x.shape));
  if (bias) {
    expect(*bias, DType::kInt32, 1, "bias", op);
    if (bias->shape[0] != kn) fail("{}: bias has {} values for {} kernels", op, bias->shape[0], kn);
  }
  if (acc_in) {
    expect(*acc_in, DType::kInt32, 4, "acc", op);
    if (acc_in->shape != ir::Shape{n, kn, oh, ow})
      fail("{}: accumulant shape {} differs from the output shape {}", op,
           ir::shape_string(acc_in->shape), ir::shape_string({n, kn, oh, ow}));
  }
  // The exact integer convolution shared with QLinearConv (ref/int_conv.h), zero padding.
  WindowGeometry g;
  g.in_h = h, g.in_w = wd, g.out_h = oh, g.out_w = ow, g.kernel_h = kh, g.kernel_w = kw;
  g.stride_h = p.stride_h, g.stride_w = p.stride_w;
  g.pad_top = p.pad_top, g.pad_left = p.pad_left, g.pad_bottom = p.pad_bottom,
  g.pad_right = p.pad_right;
  std::vector<std::int64_t> acc(static_cast<std::size_t>(n * kn * oh * ow), 0);
  convolve_int<std::int8_t, std::int8_t>(x.as<std::int8_t>(), w.as<std::int8_t>(), acc.data(), n, c,
                                         kn, p.group, g, 0, {0});
  // Accumulant add, then bias add (gati.md 7.2).
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t k = 0; k < kn; ++k)
      for (std::int64_t i = 0; i < oh * ow; ++i) {
        const std::int64_t at = (b * kn + k) * oh * ow + i;
        if (acc_in) acc[at] += acc_in->as<std::int32_t>()[at];
        if (bias) acc[at] += bias->as<std::int32_t>()[k];
      }
  return finish_tail(acc, {n, kn, oh, ow}, p.tail, 0, op);
}

Tensor fully_connected(const Tensor& x, const Tensor& w, const Tensor* bias, const Tail& tail) {
  const char* op = "GatiFC";
  expect(x, DType::kInt8, 0, "x", op);
  expect(w, DType::kInt8, 2, "w", op);
  if (x.shape.size() < 2)
    fail("{}: x must be [N, K] or [N, C, H, W], got {}", op, ir::shape_string(x.shape));
  if (tail.global_pool) fail("{}: the FC tail has no global pool", op);
  const std::int64_t n = x.shape[0], k = ir::element_count(x.shape) / std::max<std::int64_t>(n, 1);
  const std::int64_t m = w.shape[0];
  if (w.shape[1] != k)
    fail("{}: x {} flattens to {} features but w is {}", op, ir::shape_string(x.shape), k,
         ir::shape_string(w.shape));
  if (bias) {
    expect(*bias, DType::kInt32, 1, "bias", op);
    if (bias->shape[0] != m) fail("{}: bias has {} values for {} outputs", op, bias->shape[0], m);
  }
  std::vector<std::int64_t> acc(static_cast<std::size_t>(n * m));
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t r = 0; r < m; ++r) {
      std::int64_t s = bias ? bias->as<std::int32_t>()[r] : 0;
      for (std::int64_t i = 0; i < k; ++i)
        s += std::int64_t{x.as<std::int8_t>()[b * k + i]} * w.as<std::int8_t>()[r * k + i];
      acc[b * m + r] = s;
    }
  return finish_tail(acc, {n, m}, tail, 0, op);
}

std::int64_t pool_output_size(std::int64_t in, int kernel, int stride, int pad_begin, int pad_end,
                              bool ceil_mode) {
  const std::int64_t span = in + pad_begin + pad_end - kernel;
  if (span < 0) return 0;
  std::int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  // A ceil window must start inside the image or the begin padding.
  if (ceil_mode && (out - 1) * stride >= in + pad_begin) --out;
  return out;
}

Tensor pool(const Tensor& x, const PoolParams& p) {
  const char* op = "GatiPool";
  expect(x, DType::kInt8, 4, "x", op);
  const std::int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const auto* xp = x.as<std::int8_t>();
  if (p.mode == PoolMode::kGlobalAverage) {
    std::vector<std::int8_t> out(static_cast<std::size_t>(n * c));
    for (std::int64_t plane = 0; plane < n * c; ++plane) {
      std::int64_t sum = 0;
      for (std::int64_t i = 0; i < h * wd; ++i) sum += xp[plane * h * wd + i];
      out[plane] = clamp_int8(round_shift(sum * p.scale, p.shift));
    }
    return ir::make_tensor<std::int8_t>({n, c, 1, 1}, out);
  }
  if (p.kernel_h < 1 || p.kernel_w < 1 || p.stride_h < 1 || p.stride_w < 1)
    fail("{}: kernel and strides must be >= 1", op);
  const std::int64_t oh =
      pool_output_size(h, p.kernel_h, p.stride_h, p.pad_top, p.pad_bottom, p.ceil_mode);
  const std::int64_t ow =
      pool_output_size(wd, p.kernel_w, p.stride_w, p.pad_left, p.pad_right, p.ceil_mode);
  if (oh < 1 || ow < 1)
    fail("{}: window {}x{} does not fit the padded input {}", op, p.kernel_h, p.kernel_w,
         ir::shape_string(x.shape));
  std::vector<std::int8_t> out(static_cast<std::size_t>(n * c * oh * ow));
  for (std::int64_t plane = 0; plane < n * c; ++plane) {
    const std::int8_t* in = xp + plane * h * wd;
    for (std::int64_t oy = 0; oy < oh; ++oy)
      for (std::int64_t ox = 0; ox < ow; ++ox) {
        std::int64_t best = -128, sum = 0;
        for (std::int64_t i = 0; i < p.kernel_h; ++i) {
          const std::int64_t iy = oy * p.stride_h - p.pad_top + i;
          if (iy < 0 || iy >= h) continue;  // padding never takes part / adds zero
          for (std::int64_t j = 0; j < p.kernel_w; ++j) {
            const std::int64_t ix = ox * p.stride_w - p.pad_left + j;
            if (ix < 0 || ix >= wd) continue;
            best = std::max<std::int64_t>(best, in[iy * wd + ix]);
            sum += in[iy * wd + ix];
          }
        }
        out[(plane * oh + oy) * ow + ox] = p.mode == PoolMode::kMax
                                               ? static_cast<std::int8_t>(best)
                                               : clamp_int8(round_shift(sum * p.scale, p.shift));
      }
  }
  return ir::make_tensor<std::int8_t>({n, c, oh, ow}, out);
}

std::int64_t eltwise_value(std::int8_t a, std::int8_t b, const EltwiseParams& p) {
  const std::int64_t left = (std::int64_t{a} - p.a_zero_point) * p.a_scale;
  const std::int64_t right = (std::int64_t{b} - p.b_zero_point) * p.b_scale;
  switch (p.op) {
    case EltOp::kAdd:
      return left + right;
    case EltOp::kSub:
      return left - right;
    case EltOp::kMult:
      return round_shift(left * right, 10);
    case EltOp::kTanh:
      return tanh_q16(left);
    case EltOp::kSigmoid:
      return sigmoid_q16(left);
  }
  return 0;
}

Tensor eltwise(const Tensor& a, const Tensor* b, const EltwiseParams& p) {
  const char* op = "GatiEltwise";
  expect(a, DType::kInt8, 0, "a", op);
  if (b) {
    expect(*b, DType::kInt8, 0, "b", op);
    if (b->shape != a.shape)
      fail("{}: operands differ in shape: {} and {} (the device has no broadcasting)", op,
           ir::shape_string(a.shape), ir::shape_string(b->shape));
  }
  if (p.tail.global_pool) fail("{}: the EltWise tail has no global pool", op);
  const int fp_cast = (p.op == EltOp::kSigmoid || p.op == EltOp::kTanh) ? 16 : 10;
  const std::int64_t count = ir::element_count(a.shape);
  std::vector<std::int64_t> values(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i)
    values[i] = eltwise_value(a.as<std::int8_t>()[i], b ? b->as<std::int8_t>()[i] : 0, p);
  if (!p.tail.quant_en) fail("{}: quant_en = 0 is not supported for EltWise", op);
  return finish_tail(values, a.shape, p.tail, fp_cast, op);
}

Tensor resize2x(const Tensor& x) {
  expect(x, DType::kInt8, 4, "x", "GatiResize");
  const std::int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], w = x.shape[3];
  Tensor out = ir::make_tensor(DType::kInt8, {n, c, 2 * h, 2 * w});
  auto* y = out.as_mutable<std::int8_t>();
  const auto* xp = x.as<std::int8_t>();
  for (std::int64_t plane = 0; plane < n * c; ++plane)
    for (std::int64_t i = 0; i < 2 * h; ++i)
      for (std::int64_t j = 0; j < 2 * w; ++j)
        y[(plane * 2 * h + i) * 2 * w + j] = xp[(plane * h + i / 2) * w + j / 2];
  return out;
}

Tensor concat_channels(const std::vector<const Tensor*>& inputs) {
  const char* op = "GatiConcat";
  if (inputs.empty() || inputs.size() > 4)
    fail("{}: takes 1 to 4 inputs, got {}", op, inputs.size());
  std::int64_t channels = 0;
  for (const Tensor* t : inputs) {
    expect(*t, DType::kInt8, 4, "x", op);
    const auto& s0 = inputs[0]->shape;
    if (t->shape[0] != s0[0] || t->shape[2] != s0[2] || t->shape[3] != s0[3])
      fail("{}: inputs {} and {} differ outside the channel axis", op, ir::shape_string(s0),
           ir::shape_string(t->shape));
    channels += t->shape[1];
  }
  const auto& s0 = inputs[0]->shape;
  const std::int64_t n = s0[0], area = s0[2] * s0[3];
  Tensor out = ir::make_tensor(DType::kInt8, {n, channels, s0[2], s0[3]});
  auto* y = out.as_mutable<std::int8_t>();
  for (std::int64_t b = 0; b < n; ++b) {
    std::int64_t offset = 0;
    for (const Tensor* t : inputs) {
      const std::int64_t block = t->shape[1] * area;
      std::copy_n(t->as<std::int8_t>() + b * block, block, y + (b * channels) * area + offset);
      offset += block;
    }
  }
  return out;
}

Tensor transpose_chw_to_hwc(const Tensor& x) {
  expect(x, DType::kInt8, 4, "x", "GatiTranspose");
  const std::int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], w = x.shape[3];
  Tensor out = ir::make_tensor(DType::kInt8, {n, h, w, c});
  auto* y = out.as_mutable<std::int8_t>();
  const auto* xp = x.as<std::int8_t>();
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t ci = 0; ci < c; ++ci)
      for (std::int64_t i = 0; i < h; ++i)
        for (std::int64_t j = 0; j < w; ++j)
          y[((b * h + i) * w + j) * c + ci] = xp[((b * c + ci) * h + i) * w + j];
  return out;
}

Tensor nms(const Tensor& boxes, const Tensor& scores, const NmsParams& p) {
  const char* op = "GatiNms";
  expect(boxes, DType::kInt8, 3, "boxes", op);
  expect(scores, DType::kInt8, 3, "scores", op);
  if (boxes.shape[0] != 1 || boxes.shape[2] != 4 || scores.shape[0] != 1 ||
      scores.shape[2] != boxes.shape[1])
    fail("{}: boxes must be [1, B, 4] and scores [1, K, B], got {} and {}", op,
         ir::shape_string(boxes.shape), ir::shape_string(scores.shape));
  const std::int64_t count = boxes.shape[1], classes = scores.shape[1];
  // Doubled corner coordinates so the centre format stays integral.
  struct Box {
    std::int64_t y1, x1, y2, x2;
  };
  std::vector<Box> doubled(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int8_t* v = boxes.as<std::int8_t>() + i * 4;
    Box b;
    if (p.center_point_box) {  // (cx, cy, w, h)
      b = {2 * v[1] - v[3], 2 * v[0] - v[2], 2 * v[1] + v[3], 2 * v[0] + v[2]};
    } else {  // (y1, x1, y2, x2)
      b = {2 * v[0], 2 * v[1], 2 * v[2], 2 * v[3]};
    }
    if (b.y1 > b.y2) std::swap(b.y1, b.y2);
    if (b.x1 > b.x2) std::swap(b.x1, b.x2);
    doubled[i] = b;
  }
  auto suppresses = [&](const Box& a, const Box& b) {
    const std::int64_t ih = std::max<std::int64_t>(0, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
    const std::int64_t iw = std::max<std::int64_t>(0, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
    const std::int64_t inter = ih * iw;
    const std::int64_t uni = (a.y2 - a.y1) * (a.x2 - a.x1) + (b.y2 - b.y1) * (b.x2 - b.x1) - inter;
    if (inter == 0 || uni <= 0) return false;
    return (inter << p.iou_shift) > p.iou_threshold * uni;
  };
  std::vector<std::int64_t> rows;
  for (std::int64_t k = 0; k < classes; ++k) {
    const std::int8_t* s = scores.as<std::int8_t>() + k * count;
    std::vector<std::int64_t> order;
    for (std::int64_t i = 0; i < count; ++i)
      if (s[i] > p.score_threshold) order.push_back(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int64_t a, std::int64_t b) { return s[a] > s[b]; });
    std::vector<std::int64_t> kept;
    for (std::int64_t i : order) {
      if (static_cast<int>(kept.size()) >= p.max_output_boxes_per_class) break;
      bool keep = std::none_of(kept.begin(), kept.end(),
                               [&](std::int64_t j) { return suppresses(doubled[j], doubled[i]); });
      if (keep) kept.push_back(i);
    }
    for (std::int64_t i : kept) rows.insert(rows.end(), {0, k, i});
  }
  return ir::make_tensor<std::int64_t>({static_cast<std::int64_t>(rows.size() / 3), 3}, rows);
}

// ---- attribute parsing -------------------------------------------------------------------

namespace {

std::int64_t int_in(const ir::Node& node, const std::string& attr, std::int64_t fallback,
                    std::int64_t lo, std::int64_t hi) {
  const std::int64_t v = node.get_int(attr, fallback);
  if (v < lo || v > hi)
    fail("node '{}' ({}): attribute {} = {} is outside [{}, {}]", node.name, node.op_type, attr, v,
         lo, hi);
  return v;
}

std::vector<std::int64_t> ints_in(const ir::Node& node, const std::string& attr,
                                  const std::vector<std::int64_t>& fallback, std::size_t count,
                                  std::int64_t lo, std::int64_t hi) {
  auto v = node.get_ints(attr, fallback);
  if (v.size() != count)
    fail("node '{}' ({}): attribute {} needs {} values, got {}", node.name, node.op_type, attr,
         count, v.size());
  for (auto e : v)
    if (e < lo || e > hi)
      fail("node '{}' ({}): attribute {} value {} is outside [{}, {}]", node.name, node.op_type,
           attr, e, lo, hi);
  return v;
}

// [top, left, bottom, right], each a 3-bit pad field in [0, 7]. With row skips (GatiConv only),
// top and bottom may be negative down to -15: a kernel-split piece skips that many input rows
// (CONV.StartRowSkip/EndRowSkip, docs/compiler.md).
std::vector<std::int64_t> pads_in(const ir::Node& node, bool allow_row_skips) {
  auto pads = ints_in(node, "pads", {0, 0, 0, 0}, 4, allow_row_skips ? -15 : 0, 7);
  if (pads[1] < 0 || pads[3] < 0)
    fail("node '{}' ({}): left/right pads {} and {} must be in [0, 7]", node.name, node.op_type,
         pads[1], pads[3]);
  return pads;
}

// The enum value named by string attribute `attr`; any other name is an error listing them all.
template <typename E>
E choice_in(const ir::Node& node, const std::string& attr, const std::string& fallback,
            std::initializer_list<std::pair<std::string_view, E>> names) {
  const std::string v = node.get_string(attr, fallback);
  std::string all;
  for (const auto& [name, e] : names) {
    if (name == v) return e;
    all += (all.empty() ? "" : ", ") + std::string(name);
  }
  fail("node '{}' ({}): {} '{}' is not one of {}", node.name, node.op_type, attr, v, all);
}

// strides [h, w] and pads [top, left, bottom, right] into a ConvParams or PoolParams.
template <typename P>
void window_in(P& p, const std::vector<std::int64_t>& strides,
               const std::vector<std::int64_t>& pads) {
  p.stride_h = static_cast<int>(strides[0]);
  p.stride_w = static_cast<int>(strides[1]);
  p.pad_top = static_cast<int>(pads[0]);
  p.pad_left = static_cast<int>(pads[1]);
  p.pad_bottom = static_cast<int>(pads[2]);
  p.pad_right = static_cast<int>(pads[3]);
}

}  // namespace

Tail tail_params(const ir::Node& node, bool allow_global_pool) {
  Tail t;
  t.quant_en = int_in(node, "quant_en", 1, 0, 1) != 0;
  t.quant_scale = static_cast<std::int32_t>(int_in(node, "quant_scale", 1, -32768, 32767));
  t.quant_shift = static_cast<int>(int_in(node, "quant_shift", 0, 0, 31));
  t.act = choice_in<Act>(
      node, "act", "none",
      {{"none", Act::kNone}, {"relu", Act::kRelu}, {"clip", Act::kClip}, {"leaky", Act::kLeaky}});
  t.act_param = static_cast<int>(int_in(node, "act_param", 0, 0, 255));
  t.neg_alpha = static_cast<int>(int_in(node, "neg_alpha", 0, 0, 1023));
  t.pos_alpha = static_cast<int>(int_in(node, "pos_alpha", 256, 0, 1023));
  t.global_pool = int_in(node, "global_pool", 0, 0, 1) != 0;
  t.global_pool_scale = int_in(node, "global_pool_scale", 0, 0, 65535);
  t.global_pool_shift = static_cast<int>(int_in(node, "global_pool_shift", 0, 0, 31));
  if (t.global_pool && !allow_global_pool)
    fail("node '{}' ({}): global_pool is only available on GatiConv", node.name, node.op_type);
  if (!t.quant_en && (t.act != Act::kNone || t.global_pool))
    fail("node '{}' ({}): quant_en = 0 (int32 output) allows no activation or global pool",
         node.name, node.op_type);
  return t;
}

ConvParams conv_params(const ir::Node& node) {
  ConvParams p;
  window_in(p, ints_in(node, "strides", {1, 1}, 2, 1, 15), pads_in(node, /*allow_row_skips=*/true));
  p.group = static_cast<int>(int_in(node, "group", 1, 1, 4095));
  if (node.has("dilations")) {
    for (auto d : node.get_ints("dilations", {}))
      if (d != 1)
        fail("node '{}' (GatiConv): dilation is not supported by the hardware", node.name);
  }
  p.tail = tail_params(node, true);
  return p;
}

PoolParams pool_params(const ir::Node& node) {
  PoolParams p;
  p.mode = choice_in<PoolMode>(node, "mode", "",
                               {{"max", PoolMode::kMax},
                                {"average", PoolMode::kAverage},
                                {"global_average", PoolMode::kGlobalAverage}});
  p.scale = int_in(node, "pool_scale", 0, 0, 65535);
  p.shift = static_cast<int>(int_in(node, "pool_shift", 0, 0, 31));
  if (p.mode == PoolMode::kGlobalAverage) return p;
  auto kernel = ints_in(node, "kernel_shape", {}, 2, 1, 15);
  p.kernel_h = static_cast<int>(kernel[0]);
  p.kernel_w = static_cast<int>(kernel[1]);
  window_in(p, ints_in(node, "strides", kernel, 2, 1, 15),
            pads_in(node, /*allow_row_skips=*/false));
  p.ceil_mode = int_in(node, "ceil_mode", 0, 0, 1) != 0;
  return p;
}

EltwiseParams eltwise_params(const ir::Node& node) {
  EltwiseParams p;
  p.op = choice_in<EltOp>(node, "op", "",
                          {{"add", EltOp::kAdd},
                           {"sub", EltOp::kSub},
                           {"mult", EltOp::kMult},
                           {"sigmoid", EltOp::kSigmoid},
                           {"tanh", EltOp::kTanh}});
  p.a_scale = static_cast<std::int32_t>(int_in(node, "a_scale", 0, -131072, 131071));
  p.b_scale = static_cast<std::int32_t>(int_in(node, "b_scale", 0, -131072, 131071));
  p.a_zero_point = static_cast<int>(int_in(node, "a_zero_point", 0, -128, 127));
  p.b_zero_point = static_cast<int>(int_in(node, "b_zero_point", 0, -128, 127));
  p.tail = tail_params(node, false);
  return p;
}

NmsParams nms_params(const ir::Node& node) {
  NmsParams p;
  p.center_point_box = int_in(node, "center_point_box", 0, 0, 1) != 0;
  p.iou_threshold = int_in(node, "iou_threshold", 0, 0, 65535);
  p.iou_shift = static_cast<int>(int_in(node, "iou_shift", 0, 0, 15));
  p.score_threshold = static_cast<int>(int_in(node, "score_threshold", -128, -128, 127));
  p.max_output_boxes_per_class =
      static_cast<int>(int_in(node, "max_output_boxes_per_class", 0, 0, 255));
  return p;
}

}  // namespace npukit::ref::gati
