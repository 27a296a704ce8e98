// Pass 3, canonicalize_qdq: QDQ models wrap float ops in DequantizeLinear/QuantizeLinear pairs.
// This pass rewrites each wrapped op into the equivalent QOperator op (QLinearConv, QGemm,
// QLinearAdd, ...) so the rest of the compiler sees one form, the one onnxruntime's own quantizer
// writes in QOperator mode. Int8-preserving ops (MaxPool, Resize, Flatten, Reshape, Relu, Clip)
// whose input and output quantization agree simply run on the int8 tensors.
//
// The native scheme (DECISIONS.md 5) is per-tensor symmetric int8. Per-channel weights are
// requantized here to one per-tensor scale (max |w| / 127) with the bias recomputed, since the
// float values are recoverable. Asymmetric activations are left alone; lowering rejects them with a
// message naming the tensor.
#include "common/error.h"
#include "compiler/passes.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace npukit::compiler {

namespace {

struct Dq {  // what a DequantizeLinear node says about its int8 input
  const ir::Node* node = nullptr;
  std::string q;  // the quantized tensor
  std::vector<double> scales;
  std::int64_t zero_point = 0;
  std::string scale_name, zp_name;
};

const ir::Node* producer_of(const ir::Graph& g, const std::string& v, const char* op) {
  const ir::Node* p = g.producer(v);
  return (p && p->op_type == op && (p->domain.empty() || p->domain == "ai.onnx")) ? p : nullptr;
}

std::optional<Dq> dequantized(const ir::Graph& g, const std::string& v) {
  const ir::Node* dq = producer_of(g, v, "DequantizeLinear");
  if (!dq || dq->inputs.size() < 2) return std::nullopt;
  const ir::Tensor* s = g.find(dq->inputs[1]);
  if (!s || !s->is_constant()) return std::nullopt;
  Dq d;
  d.node = dq;
  d.q = dq->inputs[0];
  d.scales = constant_values(*s);
  d.scale_name = dq->inputs[1];
  if (dq->inputs.size() > 2 && !dq->inputs[2].empty()) {
    const ir::Tensor* z = g.find(dq->inputs[2]);
    if (!z || !z->is_constant()) return std::nullopt;
    auto zs = constant_values(*z);
    for (double x : zs)
      if (x != zs[0]) return std::nullopt;  // per-channel zero points: leave to the host
    d.zero_point = zs.empty() ? 0 : static_cast<std::int64_t>(zs[0]);
    d.zp_name = dq->inputs[2];
  }
  return d;
}

struct Q {
  const ir::Node* node = nullptr;
  std::string out;
  float scale = 1;
  std::int64_t zero_point = 0;
  std::string scale_name, zp_name;
};

// The single QuantizeLinear consuming v (and nothing else consuming v).
std::optional<Q> quantized_by(const ir::Graph& g, const std::string& v) {
  auto cons = g.consumers(v);
  if (cons.size() != 1 || cons[0]->op_type != "QuantizeLinear") return std::nullopt;
  if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) return std::nullopt;
  const ir::Node* q = cons[0];
  if (q->inputs.size() < 2 || q->outputs.empty()) return std::nullopt;
  const ir::Tensor* s = g.find(q->inputs[1]);
  if (!s || !s->is_constant()) return std::nullopt;
  auto sv = constant_values(*s);
  if (sv.size() != 1) return std::nullopt;
  Q r;
  r.node = q;
  r.out = q->outputs[0];
  r.scale = static_cast<float>(sv[0]);
  r.scale_name = q->inputs[1];
  if (q->inputs.size() > 2 && !q->inputs[2].empty()) {
    const ir::Tensor* z = g.find(q->inputs[2]);
    if (!z || !z->is_constant()) return std::nullopt;
    r.zero_point = static_cast<std::int64_t>(constant_values(*z).at(0));
    r.zp_name = q->inputs[2];
  }
  return r;
}

std::string zp_or_zero(ir::Graph& g, const std::string& name, const std::string& like) {
  if (!name.empty()) return name;
  const ir::Tensor* t = g.find(like);
  const std::int8_t zero = 0;
  return add_constant(g, like + "_zero_point",
                      t && t->dtype == ir::DType::kUInt8 ? ir::DType::kUInt8 : ir::DType::kInt8, {},
                      &zero);
}

std::string float_scalar(ir::Graph& g, const std::string& base, float v) {
  return add_constant(g, base, ir::DType::kFloat32, {}, &v);
}

// Weights given as DQ(int8 constant), maybe per-channel along axis 0: returns the int8 weight
// tensor name, its per-tensor scale name and value, requantizing per-channel weights (DECISIONS 5).
struct Weights {
  std::string q, scale_name, zp_name;
  double scale = 1;
};

std::optional<Weights> weights_of(ir::Graph& g, const std::string& v, const std::string& layer) {
  auto d = dequantized(g, v);
  if (!d) return std::nullopt;
  const ir::Tensor* wq = g.find(d->q);
  if (!wq || !wq->is_constant()) return std::nullopt;
  if (d->scales.size() == 1 && d->zero_point == 0 && wq->dtype == ir::DType::kInt8)
    return Weights{d->q, d->scale_name, zp_or_zero(g, d->zp_name, d->q), d->scales[0]};
  // Requantize: recover the float weights, one symmetric scale for the whole tensor.
  const auto raw = constant_values(*wq);
  const std::size_t channels = d->scales.size();
  const std::size_t per = channels ? raw.size() / channels : raw.size();
  std::vector<double> wf(raw.size());
  double maxabs = 0;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const double s = d->scales[channels == 1 ? 0 : i / per];
    wf[i] = (raw[i] - static_cast<double>(d->zero_point)) * s;
    maxabs = std::max(maxabs, std::fabs(wf[i]));
  }
  const double scale = maxabs > 0 ? maxabs / 127.0 : 1.0;
  std::vector<std::int8_t> q(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i)
    q[i] = static_cast<std::int8_t>(std::clamp<double>(std::nearbyint(wf[i] / scale), -127, 127));
  Weights w;
  w.q = add_constant(g, layer + "_weight_per_tensor", ir::DType::kInt8, wq->shape, q.data());
  w.scale = scale;
  w.scale_name = float_scalar(g, layer + "_weight_scale", static_cast<float>(scale));
  const std::int8_t zero = 0;
  w.zp_name = add_constant(g, layer + "_weight_zero_point", ir::DType::kInt8, {}, &zero);
  return w;
}

// The bias as int32 in the scale x_scale * w_scale, from DQ(int32) or a float constant.
std::optional<std::string> bias_of(ir::Graph& g, const std::string& v, double acc_scale,
                                   const std::string& layer) {
  std::vector<double> bf;
  if (auto d = dequantized(g, v)) {
    const ir::Tensor* bq = g.find(d->q);
    if (!bq || !bq->is_constant()) return std::nullopt;
    const auto raw = constant_values(*bq);
    bf.resize(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i)
      bf[i] =
          (raw[i] - static_cast<double>(d->zero_point)) * d->scales[d->scales.size() == 1 ? 0 : i];
  } else if (const ir::Tensor* t = g.find(v); t && t->is_constant()) {
    bf = constant_values(*t);
  } else {
    return std::nullopt;
  }
  std::vector<std::int32_t> b(bf.size());
  for (std::size_t i = 0; i < bf.size(); ++i) {
    const double r = std::nearbyint(bf[i] / acc_scale);
    if (std::fabs(r) > 2147483647.0)
      fail("layer '{}': bias element {} ({}) does not fit int32 at scale {}", layer, i, bf[i],
           acc_scale);
    b[i] = static_cast<std::int32_t>(r);
  }
  return add_constant(g, layer + "_bias_int32", ir::DType::kInt32,
                      {static_cast<std::int64_t>(b.size())}, b.data());
}

void set_output(ir::Graph& g, ir::Node& n, const std::string& out) {
  n.outputs.assign(1, out);
  (void)g;
}

// Removes nodes whose outputs nobody uses (the orphaned DQ/Q nodes).
void remove_dead_nodes(ir::Graph& g) {
  bool changed = true;
  while (changed) {
    changed = false;
    std::set<std::string> used(g.outputs.begin(), g.outputs.end());
    for (const auto& n : g.nodes)
      for (const auto& i : n.inputs) used.insert(i);
    for (std::size_t i = g.nodes.size(); i-- > 0;) {
      bool live = false;
      for (const auto& o : g.nodes[i].outputs) live = live || (!o.empty() && used.count(o));
      if (!live) {
        g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(i));
        changed = true;
      }
    }
  }
}

// Rewrites node index i if it is a DQ -> op -> Q pattern. Returns true when rewritten.
bool rewrite(ir::Graph& g, std::size_t i) {
  ir::Node n = g.nodes[i];  // copy: g.nodes may change while we add constants
  if (!(n.domain.empty() || n.domain == "ai.onnx") || n.outputs.size() != 1) return false;
  const std::string& op = n.op_type;
  static const std::set<std::string> kHandled = {"Conv",      "Gemm",        "MatMul",
                                                 "Add",       "Mul",         "Sigmoid",
                                                 "LeakyRelu", "AveragePool", "GlobalAveragePool",
                                                 "Concat",    "MaxPool",     "Resize",
                                                 "Flatten",   "Reshape",     "Relu",
                                                 "Clip"};
  if (!kHandled.count(op)) return false;

  // Conv/Gemm may have a Relu/Clip between them and the Q: keep it as an int8 op afterwards.
  std::string result = n.outputs[0];
  const ir::Node* act = nullptr;
  if (op == "Conv" || op == "Gemm" || op == "MatMul") {
    auto cons = g.consumers(result);
    if (cons.size() == 1 && (cons[0]->op_type == "Relu" || cons[0]->op_type == "Clip") &&
        quantized_by(g, cons[0]->outputs.at(0))) {
      act = cons[0];
      result = act->outputs[0];
    }
  }
  auto q = quantized_by(g, result);
  if (!q) return false;
  const std::string y_zp = zp_or_zero(g, q->zp_name, q->out);
  ir::Node out;
  out.name = n.name.empty() ? unique_name(g, op + "_q") : n.name;
  out.attributes = n.attributes;

  auto x = n.inputs.empty() ? std::nullopt : dequantized(g, n.inputs[0]);
  const bool passthrough = op == "MaxPool" || op == "Resize" || op == "Flatten" ||
                           op == "Reshape" || op == "Relu" || op == "Clip";
  if (passthrough) {
    if (!x || x->scales.size() != 1) return false;
    if (std::fabs(x->scales[0] - q->scale) > 1e-6 * q->scale || x->zero_point != q->zero_point)
      return false;  // scale changes: leave the float op on the host
    out.op_type = op;
    out.inputs = n.inputs;
    out.inputs[0] = x->q;
    if (op == "Clip") {  // min/max move into the int8 domain
      for (std::size_t k = 1; k < out.inputs.size() && k < 3; ++k) {
        if (out.inputs[k].empty()) continue;
        const ir::Tensor* c = g.find(out.inputs[k]);
        if (!c || !c->is_constant()) return false;
        const double v = std::clamp<double>(
            std::nearbyint(constant_values(*c).at(0) / q->scale) + q->zero_point, -128, 127);
        const std::int8_t b = static_cast<std::int8_t>(v);
        out.inputs[k] =
            add_constant(g, out.name + (k == 1 ? "_min" : "_max"), ir::DType::kInt8, {}, &b);
      }
    }
  } else if (op == "Conv") {
    if (!x || x->scales.size() != 1 || n.inputs.size() < 2) return false;
    auto w = weights_of(g, n.inputs[1], out.name);
    if (!w) return false;
    out.op_type = "QLinearConv";
    out.inputs = {x->q,          x->scale_name, zp_or_zero(g, x->zp_name, x->q),
                  w->q,          w->scale_name, w->zp_name,
                  q->scale_name, y_zp};
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
      auto b = bias_of(g, n.inputs[2], x->scales[0] * w->scale, out.name);
      if (!b) return false;
      out.inputs.push_back(*b);
    }
  } else if (op == "Gemm" || op == "MatMul") {
    if (!x || x->scales.size() != 1 || n.inputs.size() < 2) return false;
    auto w = weights_of(g, n.inputs[1], out.name);
    if (!w) return false;
    out.op_type = "QGemm";
    out.domain = "com.microsoft";
    std::string bias;
    if (op == "Gemm" && n.inputs.size() > 2 && !n.inputs[2].empty()) {
      auto b = bias_of(g, n.inputs[2], x->scales[0] * w->scale, out.name);
      if (!b) return false;
      bias = *b;
    }
    if (op == "Gemm" && n.get_float("beta", 1.f) != 1.f) return false;
    out.inputs = {x->q, x->scale_name, zp_or_zero(g, x->zp_name, x->q),
                  w->q, w->scale_name, w->zp_name,
                  bias, q->scale_name, y_zp};
    if (op == "MatMul") out.attributes.clear();
  } else if (op == "Add" || op == "Mul") {
    if (n.inputs.size() != 2 || !x) return false;
    auto b = dequantized(g, n.inputs[1]);
    if (!b || x->scales.size() != 1 || b->scales.size() != 1) return false;
    out.op_type = op == "Add" ? "QLinearAdd" : "QLinearMul";
    out.domain = "com.microsoft";
    out.inputs = {x->q,          x->scale_name, zp_or_zero(g, x->zp_name, x->q),
                  b->q,          b->scale_name, zp_or_zero(g, b->zp_name, b->q),
                  q->scale_name, y_zp};
  } else if (op == "Sigmoid" || op == "LeakyRelu" || op == "AveragePool" ||
             op == "GlobalAveragePool") {
    if (!x || x->scales.size() != 1) return false;
    out.op_type = "QLinear" + op;
    out.domain = "com.microsoft";
    out.inputs = {x->q, x->scale_name, zp_or_zero(g, x->zp_name, x->q), q->scale_name, y_zp};
  } else if (op == "Concat") {
    out.op_type = "QLinearConcat";
    out.domain = "com.microsoft";
    out.inputs = {q->scale_name, y_zp};
    for (const auto& in : n.inputs) {
      auto d = dequantized(g, in);
      if (!d || d->scales.size() != 1) return false;
      out.inputs.insert(out.inputs.end(), {d->q, d->scale_name, zp_or_zero(g, d->zp_name, d->q)});
    }
  }

  // Install: the QOperator node produces the Q's output; an activation follows on int8.
  const std::string q_out = q->out;
  const ir::Node* q_node = q->node;
  std::string q_name = q_node->name;
  if (act) {
    ir::Node a = *act;
    const std::string mid = unique_name(g, out.name + "_int8");
    ir::Tensor t = g.tensor(q_out);
    t.name = mid;
    g.tensors[mid] = t;
    set_output(g, out, mid);
    a.inputs[0] = mid;
    a.outputs = {q_out};
    if (a.op_type == "Clip") {
      for (std::size_t k = 1; k < a.inputs.size() && k < 3; ++k) {
        if (a.inputs[k].empty()) continue;
        const ir::Tensor* c = g.find(a.inputs[k]);
        if (!c || !c->is_constant()) return false;
        const double v = std::clamp<double>(
            std::nearbyint(constant_values(*c).at(0) / q->scale) + q->zero_point, -128, 127);
        const std::int8_t b = static_cast<std::int8_t>(v);
        a.inputs[k] =
            add_constant(g, a.name + (k == 1 ? "_min" : "_max"), ir::DType::kInt8, {}, &b);
      }
    }
    g.nodes[i] = out;
    g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(i) + 1, a);
  } else {
    set_output(g, out, q_out);
    g.nodes[i] = out;
  }
  // The Q node now produces nothing anyone needs; drop it (its output is produced by `out`).
  for (std::size_t k = 0; k < g.nodes.size(); ++k)
    if (g.nodes[k].op_type == "QuantizeLinear" && g.nodes[k].name == q_name &&
        g.nodes[k].outputs.size() == 1 && g.nodes[k].outputs[0] == q_out) {
      g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(k));
      break;
    }
  return true;
}

// Asymmetric uint8 activations of a QDQ model (QuantizeLinear -> DequantizeLinear pairs) become
// symmetric int8 (DECISIONS.md 5): the float value is what both ends agree on, so the pair can
// use scale s' = s * max(z, 255 - z) / 127 and zero point 0, which covers the same float range.
void symmetrize_uint8_activations(Context& ctx) {
  ir::Graph& g = ctx.graph;
  for (auto& q : g.nodes) {
    if (q.op_type != "QuantizeLinear" || q.inputs.size() < 3 || q.outputs.size() != 1) continue;
    ir::Tensor* out = g.find(q.outputs[0]);
    const ir::Tensor* zt = g.find(q.inputs[2]);
    const ir::Tensor* st = g.find(q.inputs[1]);
    if (!out || !zt || !st || zt->dtype != ir::DType::kUInt8 || !zt->is_constant() ||
        !st->is_constant())
      continue;
    const auto sv = constant_values(*st);
    if (sv.size() != 1) continue;
    auto cons = g.consumers(q.outputs[0]);
    if (cons.empty() ||
        std::find(g.outputs.begin(), g.outputs.end(), q.outputs[0]) != g.outputs.end())
      continue;
    bool all_dq = true;
    for (const auto* c : cons)
      all_dq = all_dq && c->op_type == "DequantizeLinear" && c->inputs.size() >= 2 &&
               c->inputs[1] == q.inputs[1] && (c->inputs.size() < 3 || c->inputs[2] == q.inputs[2]);
    if (!all_dq) continue;
    const double z = constant_values(*zt).at(0);
    const double scale = sv[0] * std::max(z, 255.0 - z) / 127.0;
    const std::string base = q.outputs[0] + "_int8";
    const std::string s_name = float_scalar(g, base + "_scale", static_cast<float>(scale));
    const std::int8_t zero = 0;
    const std::string z_name = add_constant(g, base + "_zero_point", ir::DType::kInt8, {}, &zero);
    out = g.find(q.outputs[0]);
    out->dtype = ir::DType::kInt8;
    const std::string value = q.outputs[0];
    q.inputs[1] = s_name;
    q.inputs[2] = z_name;
    for (auto& n : g.nodes)
      if (n.op_type == "DequantizeLinear" && !n.inputs.empty() && n.inputs[0] == value) {
        n.inputs.resize(3);
        n.inputs[1] = s_name;
        n.inputs[2] = z_name;
      }
    ctx.warnings.push_back("activation '" + value + "' was uint8 with zero point " +
                           std::to_string(static_cast<int>(z)) +
                           "; requantized to symmetric int8 (scale " + std::to_string(scale) + ")");
  }
}

}  // namespace

void canonicalize_qdq(Context& ctx) {
  ir::Graph& g = ctx.graph;
  bool any = false;
  symmetrize_uint8_activations(ctx);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].name.empty()) g.nodes[i].name = unique_name(g, g.nodes[i].op_type);
  }
  for (std::size_t i = 0; i < g.nodes.size(); ++i) any = rewrite(g, i) || any;
  if (any) {
    remove_dead_nodes(g);
    if (!g.opsets.count("com.microsoft")) g.opsets["com.microsoft"] = 1;
  }
}

}  // namespace npukit::compiler
