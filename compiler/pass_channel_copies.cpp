// Pass 3f, channel_copies: int8 data movement along channels that has no Gati instruction becomes a
// 1x1 "channel copy" QLinearConv that the Gati runs exactly (docs/compiler.md, "Channel shuffle"):
//
//   Reshape [N, C, H, W] -> [N, g, C/g, H, W], Transpose perm [0, 2, 1, 3, 4], Reshape back to
//     [N, C, H, W] (ShuffleNet's channel shuffle): out[o] = in[(o % g) (C/g) + o / g];
//   Slice of an [N, C, H, W] tensor along axis 1 with constant starts/ends and step 1 (torch's
//     chunk): out[o] = in[start + o].
//
// The copy has weights w[o, src(o)] = 1 (0 elsewhere) at weight scale 1, no bias, and equal input
// and output scales and zero points 0: every output value is one input value times 1, requantized
// by exactly 1, so it is the moved int8 value bit for bit. The Gati's TRANSPOSE is a CHW -> HWC
// layout change (gati.md, Reshape-Transpose), not a channel permutation, and channel views need
// whole N_SA channel groups (a shuffle interleaves single channels, shufflenet's chunk cuts at 58),
// so this is the form that always works; fold_channel_copies (pass 9d) then removes most copies on
// the lowered graph by permuting the producer's kernels or the consumer's weight columns.
// A copy moves data and multiplies nothing the model asked for: node_macs counts it as 0 MACs.
#include "compiler/passes.h"
#include "compiler/pointwise.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace npukit::compiler {

namespace {

bool onnx_node(const ir::Node* n, const char* op) {
  return n && (n->domain.empty() || n->domain == "ai.onnx") && n->op_type == op;
}

bool is_output(const ir::Graph& g, const std::string& v) {
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

const ir::Tensor* int8_image(const ir::Graph& g, const std::string& v) {
  const ir::Tensor* t = v.empty() ? nullptr : g.find(v);
  if (!t || t->is_constant() || t->dtype != ir::DType::kInt8 || t->shape.size() != 4)
    return nullptr;
  for (auto d : t->shape)
    if (d <= 0) return nullptr;
  return t;
}

// The integer values of constant input `i` of `n` (empty when absent or not a constant).
std::vector<std::int64_t> const_ints(const ir::Graph& g, const ir::Node& n, std::size_t i) {
  std::vector<std::int64_t> v;
  const ir::Tensor* t = i < n.inputs.size() && !n.inputs[i].empty() ? g.find(n.inputs[i]) : nullptr;
  if (!t || !t->is_constant()) return v;
  for (double d : constant_values(*t)) v.push_back(static_cast<std::int64_t>(d));
  return v;
}

// The channel sources of a shuffle whose Transpose is `t`, and the nodes it replaces.
struct Shuffle {
  std::vector<std::int64_t> src;
  std::string first, last, x, y;
};

std::optional<Shuffle> match_shuffle(const ir::Graph& g, const ir::Node& t) {
  if (!onnx_node(&t, "Transpose") || t.inputs.empty() || t.outputs.empty() ||
      t.get_ints("perm", {}) != std::vector<std::int64_t>{0, 2, 1, 3, 4})
    return std::nullopt;
  const ir::Node* r1 = g.producer(t.inputs[0]);
  const auto after = g.consumers(t.outputs[0]);
  if (!onnx_node(r1, "Reshape") || after.size() != 1 || !onnx_node(after[0], "Reshape") ||
      g.consumers(t.inputs[0]).size() != 1 || is_output(g, t.inputs[0]) ||
      is_output(g, t.outputs[0]))
    return std::nullopt;
  const ir::Node* r2 = after[0];
  const ir::Tensor* x = int8_image(g, r1->inputs[0]);
  const ir::Tensor* y = int8_image(g, r2->outputs[0]);
  const ir::Tensor* mid = g.find(r1->outputs[0]);
  if (!x || !y || !mid || y->shape != x->shape || mid->shape.size() != 5) return std::nullopt;
  const std::int64_t n = x->shape[0], c = x->shape[1], groups = mid->shape[1];
  if (groups <= 0 || c % groups != 0 ||
      mid->shape != ir::Shape{n, groups, c / groups, x->shape[2], x->shape[3]})
    return std::nullopt;
  Shuffle s;
  const std::int64_t per = c / groups;
  for (std::int64_t o = 0; o < c; ++o) s.src.push_back((o % groups) * per + o / groups);
  s.first = r1->name;
  s.last = r2->name;
  s.x = r1->inputs[0];
  s.y = r2->outputs[0];
  return s;
}

// The source channels of a channel Slice (constant starts/ends, axis 1, step 1).
std::optional<std::vector<std::int64_t>> match_slice(const ir::Graph& g, const ir::Node& n) {
  if (!onnx_node(&n, "Slice") || n.inputs.empty() || n.outputs.empty()) return std::nullopt;
  const ir::Tensor* x = int8_image(g, n.inputs[0]);
  const ir::Tensor* y = n.outputs.size() == 1 ? int8_image(g, n.outputs[0]) : nullptr;
  if (!x || !y) return std::nullopt;
  std::vector<std::int64_t> starts, ends, axes, steps;
  if (n.has("starts")) {  // opset < 10: attributes
    starts = n.get_ints("starts", {});
    ends = n.get_ints("ends", {});
    axes = n.get_ints("axes", {});
  } else {
    starts = const_ints(g, n, 1);
    ends = const_ints(g, n, 2);
    axes = const_ints(g, n, 3);
    steps = const_ints(g, n, 4);
    const bool axes_given = n.inputs.size() > 3 && !n.inputs[3].empty();
    const bool steps_given = n.inputs.size() > 4 && !n.inputs[4].empty();
    if ((axes_given && axes.empty()) || (steps_given && steps.empty())) return std::nullopt;
  }
  if (axes.empty())
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  if (starts.size() != 1 || ends.size() != 1 || axes.size() != 1 ||
      (axes[0] != 1 && axes[0] != -3) || (!steps.empty() && (steps.size() != 1 || steps[0] != 1)))
    return std::nullopt;
  const std::int64_t c = x->shape[1];
  auto clamp = [c](std::int64_t v) { return std::clamp<std::int64_t>(v < 0 ? v + c : v, 0, c); };
  const std::int64_t s = clamp(starts[0]), e = clamp(ends[0]);
  if (e <= s || y->shape != ir::Shape{x->shape[0], e - s, x->shape[2], x->shape[3]})
    return std::nullopt;
  std::vector<std::int64_t> src;
  for (std::int64_t o = s; o < e; ++o) src.push_back(o);
  return src;
}

// The copy QLinearConv `name` reading `x` and writing `y` (out[o] = x[src[o]]).
ir::Node copy_conv(Context& ctx, const std::string& name, const std::string& x,
                   const std::string& y, const std::vector<std::int64_t>& src) {
  ir::Graph& g = ctx.graph;
  const std::int64_t ci = g.tensor(x).shape[1], co = static_cast<std::int64_t>(src.size());
  std::vector<std::int8_t> w(static_cast<std::size_t>(ci * co), 0);
  for (std::int64_t o = 0; o < co; ++o) w[static_cast<std::size_t>(o * ci + src[o])] = 1;
  // Any scale works (the copy multiplies by w_scale x_scale / y_scale = 1 exactly); the input's
  // own keeps --dump-after readable.
  double s = 1.0;
  if (auto it = ctx.quantization.find(x); it != ctx.quantization.end() && it->second.scale > 0)
    s = it->second.scale;
  ir::Node n;
  n.name = name;
  n.op_type = "QLinearConv";
  const std::string xs = float_scalar(g, name + "_io_scale", static_cast<float>(s));
  const std::int8_t zero = 0;
  const std::string z = add_constant(g, name + "_zero_point", ir::DType::kInt8, {}, &zero);
  const std::string wq =
      add_constant(g, name + "_copy", ir::DType::kInt8, {co, ci, 1, 1}, w.data());
  const std::string ws = float_scalar(g, name + "_copy_scale", 1.0f);
  n.inputs = {x, xs, z, wq, ws, z, xs, z};
  n.outputs = {y};
  n.attributes["group"] = std::int64_t{1};
  n.attributes["kernel_shape"] = std::vector<std::int64_t>{1, 1};
  n.attributes["strides"] = std::vector<std::int64_t>{1, 1};
  n.attributes["pads"] = std::vector<std::int64_t>{0, 0, 0, 0};
  return n;
}

}  // namespace

std::vector<std::int64_t> channel_copy_sources(const ir::Graph& g, const ir::Node& n) {
  const bool qlinear = n.op_type == "QLinearConv" && (n.domain.empty() || n.domain == "ai.onnx");
  const bool gati = n.op_type == "GatiConv" && n.domain == kGatiDomain;
  if (!qlinear && !gati) return {};
  if (n.get_int("group", 1) != 1 ||
      n.get_ints("kernel_shape", {1, 1}) != std::vector<std::int64_t>{1, 1} ||
      n.get_ints("strides", {1, 1}) != std::vector<std::int64_t>{1, 1} ||
      n.get_ints("pads", {0, 0, 0, 0}) != std::vector<std::int64_t>{0, 0, 0, 0})
    return {};
  const std::size_t wi = qlinear ? 3 : 1, bi = qlinear ? 8 : 2;
  if (n.inputs.size() <= wi || (n.inputs.size() > bi && !n.inputs[bi].empty())) return {};
  if (qlinear) {
    if (n.inputs.size() < 8) return {};
    for (std::size_t i : {1u, 4u, 6u})
      if (!g.find(n.inputs[i]) || !g.tensor(n.inputs[i]).is_constant()) return {};
    for (std::size_t i : {2u, 5u, 7u})
      if (n.inputs[i].empty() || !g.find(n.inputs[i]) || !g.tensor(n.inputs[i]).is_constant() ||
          constant_values(g.tensor(n.inputs[i])) != std::vector<double>{0})
        return {};
    const auto xs = constant_values(g.tensor(n.inputs[1]));
    const auto ws = constant_values(g.tensor(n.inputs[4]));
    const auto ys = constant_values(g.tensor(n.inputs[6]));
    if (xs.size() != 1 || ws != std::vector<double>{1.0} || ys != xs) return {};
  } else {
    if ((n.inputs.size() > 3 && !n.inputs[3].empty()) || n.get_int("quant_en", 1) != 1 ||
        n.has("act") || n.has("global_pool") || n.has("kernel_rows"))
      return {};
    const std::int64_t scale = n.get_int("quant_scale", 1), shift = n.get_int("quant_shift", 0);
    if (shift < 0 || shift > 30 || scale != (std::int64_t{1} << shift)) return {};
  }
  const ir::Tensor* w = g.find(n.inputs[wi]);
  if (!w || !w->is_constant() || w->dtype != ir::DType::kInt8 || w->shape.size() != 4 ||
      w->shape[2] != 1 || w->shape[3] != 1)
    return {};
  const std::int64_t co = w->shape[0], ci = w->shape[1];
  const auto* wv = w->as<std::int8_t>();
  std::vector<std::int64_t> src(static_cast<std::size_t>(co), -1);
  std::vector<bool> used(static_cast<std::size_t>(ci), false);
  for (std::int64_t o = 0; o < co; ++o)
    for (std::int64_t c = 0; c < ci; ++c) {
      const std::int8_t v = wv[o * ci + c];
      if (v == 0) continue;
      if (v != 1 || src[o] >= 0 || used[c]) return {};
      src[o] = c;
      used[c] = true;
    }
  for (auto s : src)
    if (s < 0) return {};
  return src;
}

void channel_copies(Context& ctx) {
  ir::Graph& g = ctx.graph;
  rewrite_until_done(g, [&](const ir::Node& n) {
    if (auto s = match_shuffle(g, n)) {
      const std::string first = s->first, last = s->last;
      ir::Node copy = copy_conv(ctx, unique_name(g, n.name + "_shuffle"), s->x, s->y, s->src);
      std::vector<ir::Node> out;
      for (auto& m : g.nodes) {
        if (m.name == first || m.name == n.name) continue;
        if (m.name == last) {
          out.push_back(copy);
          continue;
        }
        out.push_back(std::move(m));
      }
      g.nodes = std::move(out);
      return true;
    }
    if (auto src = match_slice(g, n)) {
      ir::Node copy =
          copy_conv(ctx, unique_name(g, n.name + "_channels"), n.inputs[0], n.outputs[0], *src);
      for (auto& m : g.nodes)
        if (m.name == n.name) m = copy;
      return true;
    }
    return false;
  });
}

}  // namespace npukit::compiler
