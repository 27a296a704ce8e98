// Pass 3d, constant_arithmetic: a per-element affine map of one int8 activation by constants
// becomes a depthwise 1x1 QLinearConv (per-channel weight and bias, one requantization), which
// runs on the Gati (docs/compiler.md, "Pointwise functions"):
//
//   Add / Sub / Mul / Div of DequantizeLinear(x) and a float constant, between DQ and Q
//     (x + c, c + x, x - c, c - x, x * c, c * x, x / c; c a scalar or one value per channel)
//   com.microsoft QLinearAdd / QLinearMul with a constant int8 operand (dequantized)
//   BatchNormalization not after a conv (inference mode): a = gamma / sqrt(var + eps),
//     b = beta - mean a
//
// y = a_c x + b_c: weights int8 at max|a| / 127 (a scalar a is exact), bias int32 at s_x s_w, the
// QuantScale/QuantShift of s_x s_w / s_y; one rounding where onnxruntime's QLinear forms round
// the constant and the result. A form whose bias does not fit int32 or whose multiplier has no
// QuantScale stays as it was (host).
#include "compiler/passes.h"
#include "compiler/pointwise.h"

#include "ir/tensor_util.h"

#include <cmath>

namespace npukit::compiler {

namespace {

// The values of constant `name` (float, or DequantizeLinear of an integer constant) if it
// broadcasts against `x` as a scalar or one value per channel (shape [C], [C,1,1] or [1,C,1,1]
// aligned right against NCHW). Otherwise nullopt.
std::optional<std::vector<double>> channel_constant(const ir::Graph& g, const std::string& name,
                                                    const ir::Shape& x) {
  const ir::Tensor* t = name.empty() ? nullptr : g.find(name);
  std::vector<double> v;
  ir::Shape shape;
  if (t && t->is_constant()) {
    v = constant_values(*t);
    shape = t->shape;
  } else if (const ir::Node* dq = g.producer(name);
             dq && dq->op_type == "DequantizeLinear" && dq->inputs.size() >= 2) {
    const ir::Tensor* q = g.find(dq->inputs[0]);
    const ir::Tensor* s = g.find(dq->inputs[1]);
    const ir::Tensor* z =
        dq->inputs.size() > 2 && !dq->inputs[2].empty() ? g.find(dq->inputs[2]) : nullptr;
    if (!q || !q->is_constant() || !s || !s->is_constant() || ir::element_count(s->shape) != 1 ||
        (z && (!z->is_constant() || ir::element_count(z->shape) != 1)) ||
        dq->get_int("axis", 1) != 1)
      return std::nullopt;
    const double sc = constant_values(*s).at(0), zp = z ? constant_values(*z).at(0) : 0;
    v = constant_values(*q);
    for (double& e : v) e = (e - zp) * sc;
    shape = q->shape;
  } else {
    return std::nullopt;
  }
  if (v.empty() || shape.size() > x.size()) return std::nullopt;
  const std::size_t off = x.size() - shape.size();
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1 && !(d + off == 1 && shape[d] == x[1])) return std::nullopt;
  if (v.size() != 1 && static_cast<std::int64_t>(v.size()) != x[1]) return std::nullopt;
  return v;
}

struct Affine {
  std::vector<double> a, b;
};

// y = op(x, c) or op(c, x) as a_c x + b_c; nullopt for c / x.
std::optional<Affine> arithmetic(const std::string& op, const std::vector<double>& c,
                                 bool x_first) {
  Affine f;
  if (op == "Add") {
    f.a = {1.0};
    f.b = c;
  } else if (op == "Sub") {
    f.a = {x_first ? 1.0 : -1.0};
    f.b = c;
    if (x_first)
      for (double& v : f.b) v = -v;
  } else if (op == "Mul") {
    f.a = c;
    f.b = {0.0};
  } else if (op == "Div" && x_first) {
    for (double v : c) {
      if (v == 0) return std::nullopt;
      f.a.push_back(1.0 / v);
    }
    f.b = {0.0};
  } else {
    return std::nullopt;
  }
  return f;
}

std::optional<Affine> batch_norm(const ir::Graph& g, const ir::Node& n, std::int64_t channels) {
  if (n.inputs.size() < 5 || n.get_int("training_mode", 0) != 0) return std::nullopt;
  std::vector<std::vector<double>> p;
  for (std::size_t k = 1; k < 5; ++k) {
    const ir::Tensor* t = g.find(n.inputs[k]);
    if (!t || !t->is_constant()) return std::nullopt;
    p.push_back(constant_values(*t));
    if (static_cast<std::int64_t>(p.back().size()) != channels) return std::nullopt;
  }
  const double eps = n.get_float("epsilon", 1e-5f);
  Affine f;
  for (std::int64_t c = 0; c < channels; ++c) {
    const double a = p[0][c] / std::sqrt(p[3][c] + eps);
    f.a.push_back(a);
    f.b.push_back(p[1][c] - p[2][c] * a);
  }
  return f;
}

bool rewrite_float(ir::Graph& g, const ir::Node& n) {
  if (!(n.domain.empty() || n.domain == "ai.onnx")) return false;
  const std::string& op = n.op_type;
  std::optional<PointwiseMatch> m;
  std::optional<Affine> f;
  if (op == "BatchNormalization") {
    m = match_pointwise(g, n, 0);
    if (m) f = batch_norm(g, n, g.tensor(m->xq).shape[1]);
  } else if ((op == "Add" || op == "Sub" || op == "Mul" || op == "Div") && n.inputs.size() == 2) {
    for (std::size_t k = 0; k < 2 && !f; ++k) {
      const ir::Node* p = g.producer(n.inputs[k]);
      if (!p || p->op_type != "DequantizeLinear") continue;
      const ir::Tensor* xq = g.find(p->inputs[0]);
      if (!xq || xq->is_constant()) continue;
      m = match_pointwise(g, n, k);
      if (!m) continue;
      auto c = channel_constant(g, n.inputs[1 - k], g.tensor(m->xq).shape);
      if (c) f = arithmetic(op, *c, k == 0);
    }
  }
  if (!m || !f) return false;
  auto conv = depthwise_affine(g, n.name, *m, f->a, f->b, m->yq, m->y_scale, m->y_zero);
  if (!conv) return false;
  conv->name = n.name;  // the node it replaces goes away
  replace_pointwise(g, n.name, m->q_node, {std::move(*conv)});
  return true;
}

// com.microsoft QLinearAdd / QLinearMul (A, As, Az, B, Bs, Bz, Cs, Cz) with one constant operand.
bool rewrite_qlinear(ir::Graph& g, const ir::Node& n) {
  if (n.domain != "com.microsoft" || (n.op_type != "QLinearAdd" && n.op_type != "QLinearMul") ||
      n.inputs.size() < 8 || n.outputs.size() != 1)
    return false;
  auto zero = [&](const std::string& name) {
    if (name.empty()) return true;
    const ir::Tensor* z = g.find(name);
    if (!z || !z->is_constant() || z->dtype != ir::DType::kInt8) return false;
    for (double v : constant_values(*z))
      if (v != 0) return false;
    return true;
  };
  for (std::size_t k = 0; k < 2; ++k) {
    const std::size_t xi = 3 * k, ci = 3 - 3 * k;
    const ir::Tensor* x = g.find(n.inputs[xi]);
    const ir::Tensor* c = g.find(n.inputs[ci]);
    const ir::Tensor* y = g.find(n.outputs[0]);
    if (!x || x->is_constant() || x->dtype != ir::DType::kInt8 || x->shape.size() != 4 || !c ||
        !c->is_constant() || !y || y->dtype != ir::DType::kInt8 || y->shape != x->shape)
      continue;
    const ir::Tensor* xs = g.find(n.inputs[xi + 1]);
    const ir::Tensor* cs = g.find(n.inputs[ci + 1]);
    const ir::Tensor* cz = n.inputs[ci + 2].empty() ? nullptr : g.find(n.inputs[ci + 2]);
    if (!xs || !xs->is_constant() || ir::element_count(xs->shape) != 1 || !cs ||
        !cs->is_constant() || ir::element_count(cs->shape) != 1 ||
        (cz && (!cz->is_constant() || ir::element_count(cz->shape) != 1)) ||
        !zero(n.inputs[xi + 2]) || n.inputs[7].empty() || !zero(n.inputs[7]) ||
        !g.find(n.inputs[6]))
      return false;
    std::vector<double> v = constant_values(*c);
    const double sc = constant_values(*cs).at(0), zc = cz ? constant_values(*cz).at(0) : 0;
    for (double& e : v) e = (e - zc) * sc;
    // Same broadcast rule as for float constants.
    if (v.size() != 1 && static_cast<std::int64_t>(v.size()) != x->shape[1]) return false;
    const std::size_t off = x->shape.size() - std::min(x->shape.size(), c->shape.size());
    if (c->shape.size() > x->shape.size()) return false;
    for (std::size_t d = 0; d < c->shape.size(); ++d)
      if (c->shape[d] != 1 && !(d + off == 1 && c->shape[d] == x->shape[1])) return false;
    auto f = arithmetic(n.op_type == "QLinearAdd" ? "Add" : "Mul", v, true);
    if (!f) return false;
    PointwiseMatch m;
    m.xq = n.inputs[xi];
    m.x_scale = n.inputs[xi + 1];
    m.sx = constant_values(*xs).at(0);
    if (n.inputs[xi + 2].empty()) {
      const std::int8_t z = 0;
      m.x_zero = add_constant(g, m.xq + "_zero_point", ir::DType::kInt8, {}, &z);
    } else {
      m.x_zero = n.inputs[xi + 2];
    }
    const std::string yq = n.outputs[0], ys = n.inputs[6], yz = n.inputs[7];
    auto conv = depthwise_affine(g, n.name, m, f->a, f->b, yq, ys, yz);
    if (!conv) return false;
    conv->name = n.name;  // the node it replaces goes away
    replace_pointwise(g, n.name, "", {std::move(*conv)});
    return true;
  }
  return false;
}

}  // namespace

void constant_arithmetic(Context& ctx) {
  ir::Graph& g = ctx.graph;
  rewrite_until_done(
      g, [&](const ir::Node& n) { return rewrite_float(g, n) || rewrite_qlinear(g, n); });
}

}  // namespace npukit::compiler
