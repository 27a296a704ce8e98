// Pass 3a, decompose_conv_transpose: an int8 ConvTranspose (com.microsoft.QLinearConvTranspose,
// which canonicalize_qdq makes of DequantizeLinear -> ConvTranspose -> QuantizeLinear) becomes
// its sub-pixel form, a regular int8 conv the Gati runs followed by an exact int8 interleave:
//
//   QLinearConv(x, W', stride 1)  ->  DepthToSpace(DCR, blocksize s)  ->  Slice (the pads)
//
// Per spatial axis (stride s, kernel K, dilation 1) the uncropped output is
//   y_full[s*q + r] = sum_t x[q - t] * w[s*t + r],   t = 0 .. T-1,  T = ceil(K / s),
// which for each phase r is a correlation of x with the kernel v_r[j] = w[s*(T-1-j) + r]
// (0 past the end of w), pads T-1 before and Q - in after, Q = ceil((pad_begin + out) / s).
// The s*s phases are the conv's s*s*M output channels, phase (r_h, r_w) at channels
// (r_h*s + r_w)*M .. +M (DepthToSpace's DCR order); the bias repeats per phase. Every output
// element sums exactly the products the ConvTranspose sums, at the same scales, so the integers
// are identical (tested against the int8 QLinearConvTranspose kernel).
//
// The interleave has no Gati instruction (an output block writes a dense OH x OW image,
// gati.md 6.1; there is no strided or interleaved write), so DepthToSpace and the Slice run on the
// host: pure int8 data movement. An int8 Relu/Clip that alone reads the output moves in front of
// the interleave (it commutes with data movement), so the conv's TailBlock applies it. Left as it
// is (int8 on the host): groups, dilations, unequal strides, 1-D, zero points other than 0 and
// shapes not known.
#include "common/error.h"
#include "compiler/passes.h"
#include "ref/conv_transpose.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

namespace npukit::compiler {

namespace {

bool zero_constant(const ir::Graph& g, const ir::Node& n, std::size_t i) {
  if (i >= n.inputs.size() || n.inputs[i].empty()) return true;
  const ir::Tensor* t = g.find(n.inputs[i]);
  if (!t || !t->is_constant()) return false;
  for (double v : constant_values(*t))
    if (v != 0) return false;
  return true;
}

// The replacement nodes, or empty when `n` stays as it is.
// The int8 Relu or Clip (constant bounds) that is the only reader of `y`, or nullptr.
const ir::Node* sole_activation(const ir::Graph& g, const std::string& y) {
  if (std::find(g.outputs.begin(), g.outputs.end(), y) != g.outputs.end()) return nullptr;
  const auto readers = g.consumers(y);
  if (readers.size() != 1) return nullptr;
  const ir::Node* a = readers[0];
  if (!(a->domain.empty() || a->domain == "ai.onnx") || a->outputs.size() != 1 ||
      (a->op_type != "Relu" && a->op_type != "Clip") || a->inputs.empty() || a->inputs[0] != y)
    return nullptr;
  for (std::size_t k = 1; k < a->inputs.size(); ++k)
    if (!a->inputs[k].empty() && !(g.find(a->inputs[k]) && g.find(a->inputs[k])->is_constant()))
      return nullptr;
  const ir::Tensor* t = g.find(a->outputs[0]);
  return t && t->dtype == ir::DType::kInt8 ? a : nullptr;
}

// The replacement nodes, or empty when `n` stays as it is. `act` (if not null) is the activation
// that alone reads n's output; it is then part of the replacement.
std::vector<ir::Node> decompose(ir::Graph& g, const ir::Node& n, const ir::Node* act) {
  if (n.op_type != "QLinearConvTranspose" || n.domain != "com.microsoft" || n.inputs.size() < 8 ||
      n.outputs.size() != 1)
    return {};
  const ir::Tensor* x = g.find(n.inputs[0]);
  const ir::Tensor* w = g.find(n.inputs[3]);
  const ir::Tensor* y = g.find(n.outputs[0]);
  if (!x || !w || !y || x->shape.size() != 4 || w->shape.size() != 4 || !w->is_constant() ||
      w->dtype != ir::DType::kInt8 || x->dtype != ir::DType::kInt8 || y->dtype != ir::DType::kInt8)
    return {};
  for (auto d : x->shape)
    if (d < 1) return {};
  if (!zero_constant(g, n, 2) || !zero_constant(g, n, 5) || !zero_constant(g, n, 7)) return {};
  const ir::Tensor* ws = g.find(n.inputs[4]);
  if (!ws || !ws->is_constant() || ir::element_count(ws->shape) != 1) return {};
  const ref::TransposeGeometry geo = ref::conv_transpose_geometry(n, x->shape, w->shape);
  if (geo.group != 1 || geo.one_d || geo.h.dilation != 1 || geo.w.dilation != 1 ||
      geo.h.stride != geo.w.stride)
    return {};
  const std::int64_t s = geo.h.stride, c = geo.in_channels, m = geo.out_channels;
  const ir::Tensor* bias =
      n.inputs.size() > 8 && !n.inputs[8].empty() ? g.find(n.inputs[8]) : nullptr;
  if (bias && (!bias->is_constant() || bias->dtype != ir::DType::kInt32 ||
               ir::element_count(bias->shape) != m))
    return {};
  struct Axis {
    std::int64_t taps, pad_end, conv_out;
  };
  auto axis = [&](const ref::TransposeAxis& a) {
    Axis r;
    r.taps = (a.kernel + s - 1) / s;
    const std::int64_t q = (a.pad_begin + a.out + s - 1) / s;  // phase rows needed
    r.pad_end = std::max<std::int64_t>(0, q - a.in);
    r.conv_out = a.in + r.pad_end;
    return r;
  };
  const Axis ah = axis(geo.h), aw = axis(geo.w);

  // W'[(rh*s + rw)*M + m][c][jh][jw] = w[c][m][s*(Th-1-jh) + rh][s*(Tw-1-jw) + rw].
  const std::int64_t kh = geo.h.kernel, kw = geo.w.kernel;
  const ir::Shape wshape = {s * s * m, c, ah.taps, aw.taps};
  std::vector<std::int8_t> wp(static_cast<std::size_t>(ir::element_count(wshape)), 0);
  const auto* wsrc = w->as<std::int8_t>();
  for (std::int64_t rh = 0; rh < s; ++rh)
    for (std::int64_t rw = 0; rw < s; ++rw)
      for (std::int64_t mo = 0; mo < m; ++mo)
        for (std::int64_t ci = 0; ci < c; ++ci)
          for (std::int64_t jh = 0; jh < ah.taps; ++jh)
            for (std::int64_t jw = 0; jw < aw.taps; ++jw) {
              const std::int64_t ky = s * (ah.taps - 1 - jh) + rh, kx = s * (aw.taps - 1 - jw) + rw;
              if (ky >= kh || kx >= kw) continue;
              const std::int64_t oc = (rh * s + rw) * m + mo;
              wp[((oc * c + ci) * ah.taps + jh) * aw.taps + jw] =
                  wsrc[((ci * m + mo) * kh + ky) * kw + kx];
            }

  ir::Node conv;
  conv.name = unique_name(g, n.name + "_phases");
  conv.op_type = "QLinearConv";
  conv.inputs = {n.inputs[0], n.inputs[1], n.inputs[2], "",
                 n.inputs[4], n.inputs[5], n.inputs[6], n.inputs[7]};
  conv.inputs[3] = add_constant(g, n.name + "_phase_weights", ir::DType::kInt8, wshape, wp.data());
  if (bias) {
    std::vector<std::int32_t> bp(static_cast<std::size_t>(s * s * m));
    const std::vector<std::int32_t> b = ir::to_vector<std::int32_t>(*bias);
    for (std::size_t i = 0; i < bp.size(); ++i) bp[i] = b[i % m];
    conv.inputs.push_back(
        add_constant(g, n.name + "_phase_bias", ir::DType::kInt32, {s * s * m}, bp.data()));
  }
  conv.attributes["kernel_shape"] = std::vector<std::int64_t>{ah.taps, aw.taps};
  conv.attributes["strides"] = std::vector<std::int64_t>{1, 1};
  conv.attributes["pads"] =
      std::vector<std::int64_t>{ah.taps - 1, aw.taps - 1, ah.pad_end, aw.pad_end};
  const std::int64_t batch = x->shape[0];
  const ir::Shape phase_shape = {batch, s * s * m, ah.conv_out, aw.conv_out};
  std::string phases = add_value(g, n.name + "_phases", ir::DType::kInt8, phase_shape);
  conv.outputs = {phases};
  std::vector<ir::Node> out{conv};
  // An int8 Relu/Clip that alone reads y commutes with the interleave and the crop: it moves in
  // front of them, onto the conv, whose TailBlock then applies it (fuse_tail).
  std::string result = n.outputs[0];
  if (act) {
    ir::Node a = *act;
    a.inputs[0] = phases;
    phases = add_value(g, a.name + "_phases", ir::DType::kInt8, phase_shape);
    a.outputs = {phases};
    out.push_back(a);
    result = act->outputs[0];
  }

  std::string full = phases;
  if (s > 1) {
    ir::Node d2s;
    d2s.name = unique_name(g, n.name + "_interleave");
    d2s.op_type = "DepthToSpace";
    d2s.attributes["blocksize"] = s;
    d2s.attributes["mode"] = std::string("DCR");
    d2s.inputs = {phases};
    full = add_value(g, n.name + "_interleaved", ir::DType::kInt8,
                     {batch, m, s * ah.conv_out, s * aw.conv_out});
    d2s.outputs = {full};
    out.push_back(d2s);
  }
  const bool crop = geo.h.pad_begin != 0 || geo.w.pad_begin != 0 || s * ah.conv_out != geo.h.out ||
                    s * aw.conv_out != geo.w.out;
  if (crop) {
    ir::Node slice;
    slice.name = unique_name(g, n.name + "_crop");
    slice.op_type = "Slice";
    const std::int64_t starts[] = {geo.h.pad_begin, geo.w.pad_begin};
    const std::int64_t ends[] = {geo.h.pad_begin + geo.h.out, geo.w.pad_begin + geo.w.out};
    const std::int64_t axes[] = {2, 3};
    slice.inputs = {full, add_constant(g, n.name + "_crop_starts", ir::DType::kInt64, {2}, starts),
                    add_constant(g, n.name + "_crop_ends", ir::DType::kInt64, {2}, ends),
                    add_constant(g, n.name + "_crop_axes", ir::DType::kInt64, {2}, axes)};
    slice.outputs = {result};
    out.push_back(slice);
  } else {
    out.back().outputs = {result};
    g.tensors.erase(full);
  }
  return out;
}

}  // namespace

void decompose_conv_transpose(Context& ctx) {
  ir::Graph& g = ctx.graph;
  std::vector<ir::Node> nodes;
  nodes.reserve(g.nodes.size());
  std::set<std::string> moved;  // activations now inside a decomposition
  for (const ir::Node& n : g.nodes) {
    if (moved.count(n.name)) continue;
    const bool candidate = n.op_type == "QLinearConvTranspose" && n.outputs.size() == 1;
    const ir::Node* act = candidate ? sole_activation(g, n.outputs[0]) : nullptr;
    std::vector<ir::Node> parts = decompose(g, n, act);
    if (parts.empty()) {
      nodes.push_back(n);
      continue;
    }
    nodes.insert(nodes.end(), parts.begin(), parts.end());
    if (act) {
      moved.insert(act->name);
      g.tensors.erase(n.outputs[0]);  // y itself is no longer computed
    }
  }
  g.nodes = std::move(nodes);
}

}  // namespace npukit::compiler
