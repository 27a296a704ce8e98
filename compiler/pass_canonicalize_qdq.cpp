// Pass 3, canonicalize_qdq: QDQ models wrap float ops in DequantizeLinear/QuantizeLinear pairs.
// This pass rewrites each wrapped op into the equivalent QOperator op (QLinearConv, QGemm,
// QLinearAdd, ...) so the rest of the compiler sees one form, the one onnxruntime's own quantizer
// writes in QOperator mode. Int8-preserving ops (MaxPool, Resize, Flatten, Reshape, Relu, Clip)
// whose input and output quantization agree simply run on the int8 tensors. Biases become int32
// at input_scale * weight_scale.
//
// normalize_quantization (pass 2) has already put every quantized tensor into the native scheme
// (DECISIONS.md 5); a pattern that is still outside it (its parameters are not constants) is left
// in float form for the host.
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

// Moves a Clip's float min/max inputs into the int8 domain of its quantized output `q`. False
// when a bound is not a constant (the Clip then stays float).
bool clip_bounds_to_int8(ir::Graph& g, ir::Node& clip, const Q& q) {
  for (std::size_t k = 1; k < clip.inputs.size() && k < 3; ++k) {
    if (clip.inputs[k].empty()) continue;
    const ir::Tensor* c = g.find(clip.inputs[k]);
    if (!c || !c->is_constant()) return false;
    const double v = std::clamp<double>(
        std::nearbyint(constant_values(*c).at(0) / q.scale) + q.zero_point, -128, 127);
    const std::int8_t b = static_cast<std::int8_t>(v);
    clip.inputs[k] =
        add_constant(g, clip.name + (k == 1 ? "_min" : "_max"), ir::DType::kInt8, {}, &b);
  }
  return true;
}

// Weights given as DQ(int8 constant) with one scale and zero point 0: the int8 weight tensor, its
// scale (name and value) and zero point.
struct Weights {
  std::string q, scale_name, zp_name;
  double scale = 1;
};

std::optional<Weights> weights_of(ir::Graph& g, const std::string& v) {
  auto d = dequantized(g, v);
  if (!d) return std::nullopt;
  const ir::Tensor* wq = g.find(d->q);
  if (!wq || !wq->is_constant() || d->scales.size() != 1 || d->zero_point != 0 ||
      wq->dtype != ir::DType::kInt8)
    return std::nullopt;
  return Weights{d->q, d->scale_name, zp_or_zero(g, d->zp_name, d->q), d->scales[0]};
}

// The bias as int32 in the scale x_scale * w_scale, from DQ(int32) or a float constant.
std::optional<std::string> bias_of(ir::Graph& g, const std::string& v, double acc_scale,
                                   const std::string& layer) {
  std::vector<double> bf;
  if (auto d = dequantized(g, v)) {
    const ir::Tensor* bq = g.find(d->q);
    if (!bq || !bq->is_constant()) return std::nullopt;
    const auto raw = constant_values(*bq);
    if (d->scales.size() != 1 && d->scales.size() != raw.size()) return std::nullopt;
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
    if (!(std::fabs(r) <= 2147483647.0))  // also NaN
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
  static const std::set<std::string> kHandled = {"Conv",      "Gemm",         "MatMul",
                                                 "Add",       "Mul",          "Sigmoid",
                                                 "LeakyRelu", "AveragePool",  "GlobalAveragePool",
                                                 "Concat",    "MaxPool",      "Resize",
                                                 "Flatten",   "Reshape",      "Relu",
                                                 "Clip",      "ConvTranspose"};
  if (!kHandled.count(op)) return false;

  const bool passthrough = op == "MaxPool" || op == "Resize" || op == "Flatten" ||
                           op == "Reshape" || op == "Relu" || op == "Clip";
  // A computing op may have a Relu/Clip between it and the Q: keep it as an int8 op afterwards
  // (fuse_tail puts it in the layer's TailBlock).
  std::string result = n.outputs[0];
  const ir::Node* act = nullptr;
  if (!passthrough) {
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
  if (passthrough) {
    if (!x || x->scales.size() != 1) return false;
    if (std::fabs(x->scales[0] - q->scale) > 1e-6 * q->scale || x->zero_point != q->zero_point)
      return false;  // scale changes: leave the float op on the host
    out.op_type = op;
    out.inputs = n.inputs;
    out.inputs[0] = x->q;
    if (op == "Clip" && !clip_bounds_to_int8(g, out, *q)) return false;
  } else if (op == "Conv") {
    if (!x || x->scales.size() != 1 || n.inputs.size() < 2) return false;
    auto w = weights_of(g, n.inputs[1]);
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
  } else if (op == "ConvTranspose") {
    // No ai.onnx int8 form: onnxruntime's contrib QLinearConvTranspose (per-tensor here), which
    // the reference executor runs in integers and decompose_conv_transpose rewrites into a conv.
    if (!x || x->scales.size() != 1 || n.inputs.size() < 2) return false;
    auto w = weights_of(g, n.inputs[1]);
    if (!w) return false;
    out.op_type = "QLinearConvTranspose";
    out.domain = "com.microsoft";
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
    auto w = weights_of(g, n.inputs[1]);
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
    if (a.op_type == "Clip" && !clip_bounds_to_int8(g, a, *q)) return false;
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

}  // namespace

void canonicalize_qdq(Context& ctx) {
  ir::Graph& g = ctx.graph;
  bool any = false;
  for (auto& n : g.nodes)
    if (n.name.empty()) n.name = unique_name(g, n.op_type);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) any = rewrite(g, i) || any;
  if (any) {
    remove_dead_nodes(g);
    if (!g.opsets.count("com.microsoft")) g.opsets["com.microsoft"] = 1;
  }
}

}  // namespace npukit::compiler
