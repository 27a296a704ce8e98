#include "compiler/pointwise.h"

#include "ir/tensor_util.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace npukit::compiler {

namespace {

bool onnx_op(const ir::Node* n, const char* op) {
  return n && n->op_type == op && (n->domain.empty() || n->domain == "ai.onnx");
}

std::optional<double> scalar(const ir::Graph& g, const std::string& name) {
  const ir::Tensor* t = name.empty() ? nullptr : g.find(name);
  if (!t || !t->is_constant() || ir::element_count(t->shape) != 1) return std::nullopt;
  return constant_values(*t).at(0);
}

// A zero point input that is absent or a constant 0 of type int8: its name (made when absent).
std::optional<std::string> int8_zero(ir::Graph& g, const ir::Node& n, std::size_t input,
                                     const std::string& like) {
  if (input >= n.inputs.size() || n.inputs[input].empty()) {
    const std::int8_t zero = 0;
    return add_constant(g, like + "_zero_point", ir::DType::kInt8, {}, &zero);
  }
  const ir::Tensor* z = g.find(n.inputs[input]);
  if (!z || !z->is_constant() || z->dtype != ir::DType::kInt8) return std::nullopt;
  for (double v : constant_values(*z))
    if (v != 0) return std::nullopt;
  return n.inputs[input];
}

}  // namespace

std::string float_scalar(ir::Graph& g, const std::string& base, float v) {
  return add_constant(g, base, ir::DType::kFloat32, {}, &v);
}

std::optional<PointwiseMatch> match_pointwise(ir::Graph& g, const ir::Node& op, std::size_t input) {
  if (input >= op.inputs.size() || op.outputs.empty() || op.outputs[0].empty()) return std::nullopt;
  for (std::size_t k = 1; k < op.outputs.size(); ++k)
    if (!op.outputs[k].empty()) return std::nullopt;
  const ir::Node* dq = g.producer(op.inputs[input]);
  if (!onnx_op(dq, "DequantizeLinear") || dq->inputs.size() < 2) return std::nullopt;
  const ir::Tensor* x = g.find(dq->inputs[0]);
  if (!x || x->is_constant() || x->dtype != ir::DType::kInt8 || x->shape.size() != 4)
    return std::nullopt;
  for (auto d : x->shape)
    if (d <= 0) return std::nullopt;
  const std::string& y = op.outputs[0];
  if (std::find(g.outputs.begin(), g.outputs.end(), y) != g.outputs.end()) return std::nullopt;
  auto cons = g.consumers(y);
  if (cons.size() != 1 || !onnx_op(cons[0], "QuantizeLinear") || cons[0]->inputs.size() < 2 ||
      cons[0]->outputs.size() != 1)
    return std::nullopt;
  const ir::Node* q = cons[0];
  const ir::Tensor* yt = g.find(q->outputs[0]);
  if (!yt || yt->dtype != ir::DType::kInt8 || yt->shape != x->shape) return std::nullopt;
  const auto sx = scalar(g, dq->inputs[1]);
  const auto sy = scalar(g, q->inputs[1]);
  if (!sx || !sy || !(*sx > 0) || !(*sy > 0) || !std::isfinite(*sx) || !std::isfinite(*sy))
    return std::nullopt;
  PointwiseMatch m;
  m.xq = dq->inputs[0];
  m.x_scale = dq->inputs[1];
  m.sx = *sx;
  m.yq = q->outputs[0];
  m.y_scale = q->inputs[1];
  m.sy = *sy;
  m.q_node = q->name;
  // Names first (add_constant may grow g.tensors but never moves nodes).
  const std::string dq_name = dq->name, xq = m.xq;
  const ir::Node dq_copy = *dq, q_copy = *q;
  auto xz = int8_zero(g, dq_copy, 2, xq);
  auto yz = int8_zero(g, q_copy, 2, m.yq);
  if (!xz || !yz) return std::nullopt;
  m.x_zero = *xz;
  m.y_zero = *yz;
  return m;
}

std::optional<ir::Node> depthwise_affine(ir::Graph& g, const std::string& name,
                                         const PointwiseMatch& m, const std::vector<double>& a,
                                         const std::vector<double>& b, const std::string& yq,
                                         const std::string& y_scale, const std::string& y_zero) {
  const ir::Tensor& x = g.tensor(m.xq);
  const std::int64_t c = x.shape[1];
  auto at = [c](const std::vector<double>& v, std::int64_t i) {
    return v.size() == 1 ? v[0] : v.at(static_cast<std::size_t>(i));
  };
  if ((a.size() != 1 && static_cast<std::int64_t>(a.size()) != c) ||
      (b.size() != 1 && static_cast<std::int64_t>(b.size()) != c))
    return std::nullopt;
  double max_a = 0;
  for (std::int64_t i = 0; i < c; ++i) {
    if (!std::isfinite(at(a, i)) || !std::isfinite(at(b, i))) return std::nullopt;
    max_a = std::max(max_a, std::fabs(at(a, i)));
  }
  const double sw = max_a > 0 ? max_a / 127.0 : 1.0;
  const double sy = constant_values(g.tensor(y_scale)).at(0);
  const double multiplier = m.sx * sw / sy;
  if (!(multiplier > 1e-9 && multiplier < 32000)) return std::nullopt;  // no QuantScale/Shift
  std::vector<std::int8_t> w(static_cast<std::size_t>(c));
  std::vector<std::int32_t> bias(static_cast<std::size_t>(c));
  for (std::int64_t i = 0; i < c; ++i) {
    w[static_cast<std::size_t>(i)] =
        static_cast<std::int8_t>(std::clamp(std::nearbyint(at(a, i) / sw), -127.0, 127.0));
    const double r = std::nearbyint(at(b, i) / (m.sx * sw));
    if (!(std::fabs(r) <= 2147483647.0)) return std::nullopt;
    bias[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(r);
  }
  ir::Node n;
  n.name = unique_name(g, name);
  n.op_type = "QLinearConv";
  const std::string wq =
      add_constant(g, n.name + "_weight", ir::DType::kInt8, {c, 1, 1, 1}, w.data());
  const std::string ws = float_scalar(g, n.name + "_weight_scale", static_cast<float>(sw));
  const std::int8_t zero = 0;
  const std::string wz =
      add_constant(g, n.name + "_weight_zero_point", ir::DType::kInt8, {}, &zero);
  const std::string bq = add_constant(g, n.name + "_bias", ir::DType::kInt32, {c}, bias.data());
  n.inputs = {m.xq, m.x_scale, m.x_zero, wq, ws, wz, y_scale, y_zero, bq};
  n.outputs = {yq};
  n.attributes["group"] = c;
  n.attributes["kernel_shape"] = std::vector<std::int64_t>{1, 1};
  n.attributes["strides"] = std::vector<std::int64_t>{1, 1};
  n.attributes["pads"] = std::vector<std::int64_t>{0, 0, 0, 0};
  return n;
}

void rewrite_until_done(ir::Graph& g, const std::function<bool(const ir::Node&)>& rewrite) {
  for (auto& n : g.nodes)
    if (n.name.empty()) n.name = unique_name(g, n.op_type);
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t i = 0; i < g.nodes.size() && !changed; ++i) {
      const ir::Node n = g.nodes[i];  // copy: a rewrite replaces it
      changed = rewrite(n);
    }
  }
}

void replace_pointwise(ir::Graph& g, const std::string& old_node, const std::string& q_node,
                       std::vector<ir::Node> replacement) {
  std::vector<ir::Node> out;
  out.reserve(g.nodes.size() + replacement.size());
  std::string float_out;
  for (auto& n : g.nodes) {
    if (n.name == q_node) continue;
    if (n.name == old_node) {
      if (!n.outputs.empty()) float_out = n.outputs[0];
      for (auto& r : replacement) out.push_back(std::move(r));
      continue;
    }
    out.push_back(std::move(n));
  }
  g.nodes = std::move(out);
  if (!q_node.empty() && !float_out.empty()) g.tensors.erase(float_out);  // the float value
  // DequantizeLinear nodes whose float value nobody reads any more.
  std::set<std::string> used(g.outputs.begin(), g.outputs.end());
  for (const auto& n : g.nodes) used.insert(n.inputs.begin(), n.inputs.end());
  std::vector<ir::Node> kept;
  for (auto& n : g.nodes) {
    if (n.op_type == "DequantizeLinear" && n.outputs.size() == 1 && !used.count(n.outputs[0])) {
      g.tensors.erase(n.outputs[0]);
      continue;
    }
    kept.push_back(std::move(n));
  }
  g.nodes = std::move(kept);
}

}  // namespace npukit::compiler
