// Pass 2, normalize_quantization: brings every quantized tensor of the model into the native
// scheme (DECISIONS.md 5): per-tensor symmetric int8 activations (zero point 0) and per-tensor
// symmetric int8 weights. Whatever is outside it is requantized from its float meaning,
// (q - zero_point) * scale, which every quantized model defines:
//   1. QOperator nodes outside the scheme (uint8 or zero-point activations, per-channel weights)
//      and integer-preserving ops on such tensors (MaxPool, Reshape, Relu, ...) are expanded into
//      QDQ form, DequantizeLinear -> float op -> QuantizeLinear, which is how ONNX and
//      onnxruntime define them. Native QOperator nodes are left alone.
//   2. weights: DequantizeLinear(constant) -> one symmetric int8 scale, max |w| / 127;
//   3. activations: each QuantizeLinear -> DequantizeLinear pair becomes symmetric int8 with the
//      scale that covers the same float range, s * max(z - qmin, qmax - z) / 127. Consumers that
//      need the original integers (a graph output, an op with no float form) get them back through
//      a host DequantizeLinear -> QuantizeLinear;
//   4. a foreign integer value that no QuantizeLinear produces (a uint8 graph input) is converted
//      to symmetric int8 on the host the same way on its way in.
// canonicalize_qdq then folds the now native QDQ patterns back into QOperator ops (and puts
// biases at input_scale * weight_scale). Each change is reported as a warning, so users see which
// tensors lost precision. Scales or zero points that are not constants cannot be requantized:
// that is an error naming the node and tensor.
#include "common/error.h"
#include "compiler/passes.h"
#include "ir/tensor_util.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace npukit::compiler {

namespace {

using ir::DType;
using ir::Graph;
using ir::Node;
using ir::Tensor;

const Tensor* constant(const Graph& g, const std::string& name) {
  const Tensor* t = name.empty() ? nullptr : g.find(name);
  return t && t->is_constant() ? t : nullptr;
}

bool is_onnx(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

std::string input_or_empty(const Node& n, std::size_t i) {
  return i < n.inputs.size() ? n.inputs[i] : std::string();
}

struct QParams {
  std::vector<float> scales;
  DType dtype = DType::kUInt8;
  std::vector<std::int64_t> zero_points{0};

  bool native() const {
    return scales.size() == 1 && dtype == DType::kInt8 &&
           std::all_of(zero_points.begin(), zero_points.end(), [](auto z) { return z == 0; });
  }
  bool operator==(const QParams& o) const = default;
  std::string describe() const {
    const std::string zps = zero_points.size() == 1
                                ? fmt::format("zero point {}", zero_points[0])
                                : fmt::format("{} zero points", zero_points.size());
    return fmt::format("{}, {} scale{}, {}", ir::dtype_name(dtype), scales.size(),
                       scales.size() == 1 ? "" : "s", zps);
  }
  // The symmetric int8 scale covering the same float range (the widest channel's).
  float symmetric_scale() const {
    const auto [qmin, qmax] = range();
    double limit = 0;
    for (std::size_t c = 0; c < scales.size(); ++c) {
      const auto z = static_cast<double>(zero_points[zero_points.size() == 1 ? 0 : c]);
      limit =
          std::max({limit, std::fabs((qmin - z) * scales[c]), std::fabs((qmax - z) * scales[c])});
    }
    return limit > 0 ? static_cast<float>(limit / 127.0) : 1.0f;
  }
  std::pair<double, double> range() const {
    switch (dtype) {
      case DType::kInt8:
        return {-128, 127};
      case DType::kUInt8:
        return {0, 255};
      case DType::kInt16:
        return {-32768, 32767};
      case DType::kInt32:
        return {-2147483648.0, 2147483647.0};
      default:
        fail("quantized type {} is not supported", ir::dtype_name(dtype));
    }
  }
};

// Scale and zero point as constants. `omitted` is the integer type when the zero point is absent
// (ONNX: uint8 for QuantizeLinear and the QOperator ops, the input's type for DequantizeLinear).
// nullopt when either is not a constant.
std::optional<QParams> read_qparams(const Graph& g, const std::string& scale,
                                    const std::string& zero_point, DType omitted) {
  const Tensor* s = constant(g, scale);
  if (!s) return std::nullopt;
  QParams p;
  p.dtype = omitted;
  p.scales = ir::to_float_vector(*s);
  if (p.scales.empty()) fail("scale '{}' is empty", scale);
  // Above 1e30 a scale times an int16 or uint8 range no longer fits a float.
  for (float v : p.scales)
    if (!std::isfinite(v) || v <= 0 || v > 1e30f)
      fail("scale '{}' holds {}; quantization scales must be positive and at most 1e30", scale, v);
  if (!zero_point.empty()) {
    const Tensor* z = constant(g, zero_point);
    if (!z) return std::nullopt;
    p.dtype = z->dtype;
    p.zero_points = ir::to_int64_vector(*z);
    if (p.zero_points.empty()) fail("zero point '{}' is empty", zero_point);
    if (p.zero_points.size() != 1 && p.zero_points.size() != p.scales.size())
      fail("zero point '{}' has {} values for {} scales", zero_point, p.zero_points.size(),
           p.scales.size());
  }
  return p;
}

// The quantization parameters a QuantizeLinear/DequantizeLinear node applies.
std::optional<QParams> qdq_params(const Graph& g, const Node& n) {
  DType omitted = DType::kUInt8;
  if (n.op_type == "DequantizeLinear")
    if (const Tensor* t = g.find(n.inputs.at(0))) omitted = t->dtype;
  return read_qparams(g, input_or_empty(n, 1), input_or_empty(n, 2), omitted);
}

// One quantized operand of a QOperator node: the input positions of its value, scale and zero
// point, and the axis its per-channel scales run along (negative: from the end).
struct Operand {
  std::size_t value = 0, scale = 0, zero_point = 0;
  std::int64_t axis = 1;
};

// A QOperator op as its float op between DequantizeLinear and QuantizeLinear (the definitions of
// ONNX and of onnxruntime's com.microsoft ops).
struct QOpForm {
  std::string float_op;
  std::vector<Operand> inputs;
  std::optional<Operand> output;    // value unused; nullopt: QGemm without y_scale gives float
  std::optional<std::size_t> bias;  // int32 input at scale inputs[0] * inputs[1] (* alpha)
};

std::optional<QOpForm> qop_form(const Node& n) {
  const std::string& op = n.op_type;
  const bool ms = n.domain == "com.microsoft";
  if (op == "QLinearConv" && is_onnx(n))
    return QOpForm{"Conv", {{0, 1, 2}, {3, 4, 5, 0}}, Operand{0, 6, 7}, 8};
  if (op == "QLinearMatMul" && is_onnx(n))
    return QOpForm{"MatMul", {{0, 1, 2, -2}, {3, 4, 5, -1}}, Operand{0, 6, 7}, std::nullopt};
  if (op == "QGemm" && ms) {
    QOpForm f{"Gemm", {{0, 1, 2, 0}, {3, 4, 5, n.get_int("transB", 0) ? 0 : 1}}, std::nullopt, 6};
    if (!input_or_empty(n, 7).empty()) f.output = Operand{0, 7, 8};
    return f;
  }
  if ((op == "QLinearAdd" || op == "QLinearMul") && ms)
    return QOpForm{op.substr(7), {{0, 1, 2}, {3, 4, 5}}, Operand{0, 6, 7}, std::nullopt};
  if ((op == "QLinearSigmoid" || op == "QLinearLeakyRelu" || op == "QLinearAveragePool" ||
       op == "QLinearGlobalAveragePool") &&
      ms)
    return QOpForm{op.substr(7), {{0, 1, 2}}, Operand{0, 3, 4}, std::nullopt};
  if (op == "QLinearConcat" && ms) {
    QOpForm f{"Concat", {}, Operand{0, 0, 1}, std::nullopt};
    for (std::size_t i = 2; i + 2 < n.inputs.size(); i += 3) f.inputs.push_back({i, i + 1, i + 2});
    return f;
  }
  return std::nullopt;
}

// Ops that compute the same integers as their float form on dequantized values (they select or
// move values, and dequantization is increasing), so on a foreign tensor they become
// DequantizeLinear -> op -> QuantizeLinear with the same scale and zero point. Relu and Clip
// compare with 0 or their bounds in the integer domain: their float form is a Clip at the
// dequantized bounds.
bool value_preserving(const Node& n) {
  static const std::set<std::string> kOps = {"MaxPool", "Flatten",   "Reshape",  "Transpose",
                                             "Squeeze", "Unsqueeze", "Identity", "Relu",
                                             "Clip",    "Resize"};
  if (!is_onnx(n) || !kOps.count(n.op_type) || n.inputs.empty() || n.outputs.size() != 1)
    return false;
  if (n.op_type == "Resize") return n.get_string("mode", "nearest") == "nearest";
  return true;
}

class Normalizer {
 public:
  explicit Normalizer(Context& ctx) : ctx_(ctx), g_(ctx.graph) {}

  void run() {
    for (auto& n : g_.nodes)
      if (n.name.empty()) n.name = unique_name(g_, n.op_type);
    expand_foreign_nodes();
    requantize_weights();
    requantize_activations();
    convert_foreign_inputs();
    drop_unused_constants();
  }

 private:
  void note(std::string line) { ctx_.warnings.push_back(std::move(line)); }

  std::string float_constant(const std::string& base, const std::vector<float>& v) {
    return add_constant(
        g_, base, DType::kFloat32,
        v.size() == 1 ? ir::Shape{} : ir::Shape{static_cast<std::int64_t>(v.size())}, v.data());
  }
  std::string int8_zero(const std::string& base) {
    const std::int8_t z = 0;
    return add_constant(g_, base + "_zero_point", DType::kInt8, {}, &z);
  }
  ir::Shape shape_of(const std::string& v) const {
    const Tensor* t = g_.find(v);
    return t ? t->shape : ir::Shape{};
  }
  Node make(const std::string& op, const std::string& base, std::vector<std::string> in,
            std::vector<std::string> out) const {
    Node n;
    n.op_type = op;
    n.name = unique_name(g_, base);
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    return n;
  }
  Node qdq(const char* op, const std::string& in, const std::string& scale, const std::string& zp,
           std::int64_t axis, const std::string& out) const {
    Node n = make(op, out + (op[0] == 'Q' ? "_quantize" : "_dequantize"), {in, scale}, {out});
    if (!zp.empty()) n.inputs.push_back(zp);
    if (axis != 1) n.attributes["axis"] = axis;
    return n;
  }
  void insert(std::size_t at, const std::vector<Node>& nodes) {
    g_.nodes.insert(g_.nodes.begin() + static_cast<std::ptrdiff_t>(at), nodes.begin(), nodes.end());
  }

  QParams params_of(const Node& n, const Operand& o) const {
    const std::string scale = input_or_empty(n, o.scale), zp = input_or_empty(n, o.zero_point);
    auto p = read_qparams(g_, scale, zp, DType::kUInt8);
    if (!p)
      fail(
          "node '{}' ({}): scale '{}' or zero point '{}' is not a constant, so its float values "
          "cannot be recovered to requantize it into the native scheme; export the model with "
          "constant quantization parameters",
          n.name, n.op_type, scale, zp);
    return *p;
  }

  // Step 1. `quantized` tracks the (scale, zero point) inputs of every integer value produced so
  // far, so an integer-preserving op knows what its input means.
  void expand_foreign_nodes() {
    std::map<std::string, std::pair<std::string, std::string>> quantized;
    std::vector<std::string> expanded;
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node n = g_.nodes[i];
      std::vector<Node> replacement;
      if (n.outputs.empty() || n.inputs.empty()) continue;
      if (n.op_type == "QuantizeLinear" && is_onnx(n) && n.inputs.size() >= 2) {
        quantized[n.outputs[0]] = {n.inputs[1], input_or_empty(n, 2)};
      } else if (auto form = qop_form(n)) {
        if (is_foreign(n, *form)) replacement = expand_qop(n, *form);
        if (form->output)
          quantized[n.outputs[0]] = {input_or_empty(n, form->output->scale),
                                     input_or_empty(n, form->output->zero_point)};
      } else if (value_preserving(n) && quantized.count(n.inputs[0])) {
        const auto [scale, zp] = quantized.at(n.inputs[0]);
        const auto p = read_qparams(g_, scale, zp, DType::kUInt8);
        if (p && !p->native() && p->scales.size() == 1)
          replacement = expand_value_preserving(n, scale, zp, *p);
        quantized[n.outputs[0]] = {scale, zp};
      }
      if (replacement.empty()) continue;
      expanded.push_back(fmt::format("'{}' ({})", n.name, n.op_type));
      g_.nodes.erase(g_.nodes.begin() + static_cast<std::ptrdiff_t>(i));
      const std::size_t count = replacement.size();
      g_.nodes.insert(g_.nodes.begin() + static_cast<std::ptrdiff_t>(i), replacement.begin(),
                      replacement.end());
      i += count - 1;
    }
    if (!expanded.empty())
      note(
          fmt::format("{} node{} outside the native scheme, requantized through their float "
                      "form (DequantizeLinear -> op -> QuantizeLinear): {}",
                      expanded.size(), expanded.size() == 1 ? "" : "s", fmt::join(expanded, ", ")));
  }

  bool is_foreign(const Node& n, const QOpForm& form) const {
    std::vector<Operand> all = form.inputs;
    if (form.output) all.push_back(*form.output);
    for (const Operand& o : all)
      if (!input_or_empty(n, o.scale).empty() && !params_of(n, o).native()) return true;
    return false;
  }

  std::vector<Node> expand_qop(const Node& n, const QOpForm& form) {
    std::vector<Node> out;
    std::vector<std::string> float_inputs;
    std::vector<QParams> params;
    for (const Operand& o : form.inputs) {
      if (o.scale >= n.inputs.size() || n.inputs[o.value].empty())
        fail("node '{}' ({}): input {} is missing", n.name, n.op_type, o.value);
      const std::string& q = n.inputs[o.value];
      const QParams p = params_of(n, o);
      params.push_back(p);
      const auto rank = static_cast<std::int64_t>(shape_of(q).size());
      const std::int64_t axis = o.axis < 0 ? o.axis + rank : o.axis;
      if (p.scales.size() > 1 && (axis < 0 || axis >= rank ||
                                  shape_of(q)[axis] != static_cast<std::int64_t>(p.scales.size())))
        fail("node '{}' ({}): {} scales for '{}' do not match its shape {}", n.name, n.op_type,
             p.scales.size(), q, ir::shape_string(shape_of(q)));
      const std::string f = add_value(g_, q + "_float", DType::kFloat32, shape_of(q));
      out.push_back(qdq("DequantizeLinear", q, n.inputs[o.scale], input_or_empty(n, o.zero_point),
                        p.scales.size() > 1 ? axis : 1, f));
      float_inputs.push_back(f);
    }
    if (form.bias && !input_or_empty(n, *form.bias).empty()) {
      // The int32 bias is at input scale x weight scale (per weight channel), x alpha for QGemm.
      const std::string& b = n.inputs[*form.bias];
      const float alpha = n.op_type == "QGemm" ? n.get_float("alpha", 1.f) : 1.f;
      std::vector<float> scales;
      for (float ws : params.at(1).scales) scales.push_back(alpha * params.at(0).scales.at(0) * ws);
      const std::string f = add_value(g_, b + "_float", DType::kFloat32, shape_of(b));
      out.push_back(qdq("DequantizeLinear", b, float_constant(b + "_scale", scales), "",
                        scales.size() > 1 ? 0 : 1, f));
      float_inputs.push_back(f);
    }
    Node op = make(form.float_op, n.name, float_inputs, {});
    op.name = n.name;  // the user's layer name stays
    op.attributes = n.attributes;
    if (n.op_type == "QLinearMatMul") op.attributes.clear();
    if (n.get_int("channels_last", 0) != 0)
      fail("node '{}' ({}): channels_last = 1 has no float form to requantize through", n.name,
           n.op_type);
    op.attributes.erase("channels_last");
    if (!form.output) {  // float output (QGemm without y_scale)
      op.outputs = n.outputs;
      out.push_back(op);
      return out;
    }
    const std::string& y = n.outputs.at(0);
    const std::string yf = add_value(g_, y + "_float", DType::kFloat32, shape_of(y));
    op.outputs = {yf};
    out.push_back(op);
    out.push_back(qdq("QuantizeLinear", yf, n.inputs[form.output->scale],
                      input_or_empty(n, form.output->zero_point), 1, y));
    return out;
  }

  std::vector<Node> expand_value_preserving(const Node& n, const std::string& scale,
                                            const std::string& zp, const QParams& p) {
    const std::string& x = n.inputs[0];
    const std::string& y = n.outputs[0];
    const std::string xf = add_value(g_, x + "_float", DType::kFloat32, shape_of(x));
    const std::string yf = add_value(g_, y + "_float", DType::kFloat32, shape_of(y));
    Node op = n;
    op.inputs[0] = xf;
    op.outputs = {yf};
    const auto to_float = [&](double q) {
      return static_cast<float>((q - static_cast<double>(p.zero_points[0])) * p.scales[0]);
    };
    if (n.op_type == "Relu" || n.op_type == "Clip") {
      // Integer Relu is max(q, 0), i.e. Clip at the float value of q = 0.
      std::vector<std::string> bounds(2);
      if (n.op_type == "Relu") bounds[0] = float_constant(n.name + "_min", {to_float(0)});
      for (std::size_t k = 1; n.op_type == "Clip" && k < 3 && k < n.inputs.size(); ++k) {
        if (n.inputs[k].empty()) continue;
        const Tensor* c = constant(g_, n.inputs[k]);
        if (!c) return {};  // bounds known only at run time: leave it integer
        bounds[k - 1] = float_constant(n.name + (k == 1 ? "_min" : "_max"),
                                       {to_float(ir::to_int64_vector(*c).at(0))});
      }
      op.op_type = "Clip";
      op.attributes.clear();
      op.inputs = {xf, bounds[0], bounds[1]};
      while (!op.inputs.empty() && op.inputs.back().empty()) op.inputs.pop_back();
    }
    return {qdq("DequantizeLinear", x, scale, zp, 1, xf), op,
            qdq("QuantizeLinear", yf, scale, zp, 1, y)};
  }

  // Step 2: weights (DequantizeLinear of a constant integer tensor) -> per-tensor symmetric int8.
  void requantize_weights() {
    for (Node& n : g_.nodes) {
      if (n.op_type != "DequantizeLinear" || n.inputs.size() < 2) continue;
      const Tensor* w = constant(g_, n.inputs[0]);
      if (!w ||
          (w->dtype != DType::kInt8 && w->dtype != DType::kUInt8 && w->dtype != DType::kInt16))
        continue;  // int32 biases: canonicalize_qdq rescales them
      const auto p = qdq_params(g_, n);
      if (!p)
        fail("DequantizeLinear '{}': the scale or zero point of '{}' is not a constant", n.name,
             w->name);
      if (p->native()) continue;
      const std::vector<float> values = dequantize(*w, *p, n.get_int("axis", 1));
      if (p->scales.size() > 1) record_channel_weights(n, *w, *p, values);
      float max_abs = 0;
      for (float v : values) max_abs = std::max(max_abs, std::fabs(v));
      if (!std::isfinite(max_abs))
        fail("weight '{}': its float values ({}) overflow a float", w->name, p->describe());
      const float scale = max_abs > 0 ? max_abs / 127.0f : 1.0f;
      std::vector<std::int8_t> q(values.size());
      for (std::size_t i = 0; i < values.size(); ++i)
        q[i] = static_cast<std::int8_t>(
            std::clamp(std::nearbyint(values[i] / scale), -127.0f, 127.0f));
      note(fmt::format("weight '{}': {} -> int8 per-tensor symmetric, scale {:.6g}", w->name,
                       p->describe(), scale));
      const std::string base = w->name;
      n.inputs = {add_constant(g_, base + "_native", DType::kInt8, w->shape, q.data()),
                  float_constant(base + "_native_scale", {scale}), int8_zero(base + "_native")};
      n.attributes.erase("axis");
    }
  }

  // A Conv reading per-channel weights (scales along axis 0, its output channels), or a Gemm or
  // MatMul reading them along its output axis (Gemm transB = 1: axis 0 of B [N, K]; transB = 0 and
  // MatMul: axis 1 of B [K, N]): its float weights (output channel major), the model's channel
  // scales and its float bias, for split_channel_scales.
  void record_channel_weights(const Node& dq, const Tensor& w, const QParams& p,
                              const std::vector<float>& values) {
    std::int64_t axis = dq.get_int("axis", 1);
    if (axis < 0) axis += static_cast<std::int64_t>(w.shape.size());
    for (const Node* c : g_.consumers(dq.outputs.at(0))) {
      if (!is_onnx(*c) || c->inputs.size() < 2 || c->inputs[1] != dq.outputs[0] || c->name.empty())
        continue;
      ChannelWeights cw;
      cw.scales = p.scales;
      if (c->op_type == "Conv" && axis == 0 && w.shape.size() == 4) {
        cw.shape = w.shape;
        cw.weights = values;
      } else if ((c->op_type == "Gemm" || c->op_type == "MatMul") && w.shape.size() == 2) {
        const bool trans_b = c->op_type == "Gemm" && c->get_int("transB", 0) != 0;
        if (c->op_type == "Gemm" &&
            (c->get_int("transA", 0) != 0 || c->get_float("alpha", 1.f) != 1.f))
          continue;
        if (axis != (trans_b ? 0 : 1)) continue;
        const std::int64_t kn = trans_b ? w.shape[0] : w.shape[1],
                           k = trans_b ? w.shape[1] : w.shape[0];
        cw.shape = {kn, k};
        cw.weights.resize(values.size());
        for (std::int64_t o = 0; o < kn; ++o)
          for (std::int64_t i = 0; i < k; ++i)
            cw.weights[static_cast<std::size_t>(o * k + i)] =
                values[static_cast<std::size_t>(trans_b ? o * k + i : i * kn + o)];
      } else {
        continue;
      }
      const std::int64_t kn = cw.shape[0];
      if (c->op_type != "MatMul" && c->inputs.size() > 2 && !c->inputs[2].empty()) {
        const std::string& b = c->inputs[2];
        if (const Tensor* f = constant(g_, b); f && f->dtype == DType::kFloat32) {
          cw.bias = ir::to_float_vector(*f);
        } else if (const Node* bq = g_.producer(b);
                   bq && bq->op_type == "DequantizeLinear" && constant(g_, bq->inputs.at(0))) {
          const auto bp = qdq_params(g_, *bq);
          if (!bp) continue;
          cw.bias = dequantize(*constant(g_, bq->inputs[0]), *bp, 0);
        } else {
          continue;  // a bias split_channel_scales could not rescale
        }
        if (static_cast<std::int64_t>(cw.bias.size()) != kn) continue;
      }
      ctx_.channel_weights[c->name] = std::move(cw);
    }
  }

  // Step 3: QuantizeLinear outputs outside the scheme -> symmetric int8. DequantizeLinear consumers
  // with the same parameters read the new value; any other consumer (and a graph output) gets the
  // original integers back from a DequantizeLinear -> QuantizeLinear on the host.
  void requantize_activations() {
    std::set<std::string> conversions;  // nodes this step inserted: already in their final form
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      Node& q = g_.nodes[i];
      if (q.op_type != "QuantizeLinear" || q.inputs.size() < 2 || conversions.count(q.name))
        continue;
      const auto p = qdq_params(g_, q);
      if (!p)
        fail("QuantizeLinear '{}': the scale or zero point of '{}' is not a constant", q.name,
             q.outputs[0]);
      if (p->native()) continue;
      const std::string y = q.outputs[0];
      const float scale = p->symmetric_scale();
      const std::string s = float_constant(y + "_native_scale", {scale});
      const std::string z = int8_zero(y + "_native");
      const std::string y8 = add_value(g_, y + "_int8", DType::kInt8, shape_of(y));
      bool keep_original = std::find(g_.outputs.begin(), g_.outputs.end(), y) != g_.outputs.end();
      for (Node& m : g_.nodes) {
        if (&m == &g_.nodes[i] || std::find(m.inputs.begin(), m.inputs.end(), y) == m.inputs.end())
          continue;
        const bool same = m.op_type == "DequantizeLinear" && m.inputs[0] == y &&
                          qdq_params(g_, m) == p && m.get_int("axis", 1) == q.get_int("axis", 1);
        if (!same) {
          keep_original = true;
          continue;
        }
        m.inputs = {y8, s, z};
        m.attributes.erase("axis");
      }
      Node& qn = g_.nodes[i];  // g_.nodes did not change size above
      const std::string original_scale = qn.inputs[1], original_zp = input_or_empty(qn, 2);
      const std::int64_t original_axis = qn.get_int("axis", 1);
      qn.inputs = {qn.inputs[0], s, z};
      qn.outputs = {y8};
      qn.attributes.erase("axis");
      // The original type saturated at [(qmin - z) s, (qmax - z) s], the symmetric grid reaches
      // [-127 s', 127 s']. A floor at exactly 0 (uint8 with zero point 0, as onnxruntime quantizes
      // ReLU outputs) is the layer's ReLU and stays one: a Relu before the quantizer, which
      // canonicalize_qdq folds into the producer's tail. Any other bound only saturated values
      // outside the calibrated range; say so.
      bool relu = false;
      std::string unsaturated;
      if (p->scales.size() == 1) {
        const auto [qmin, qmax] = p->range();
        const double lo = (qmin - static_cast<double>(p->zero_points[0])) * p->scales[0];
        const double hi = (qmax - static_cast<double>(p->zero_points[0])) * p->scales[0];
        const bool nonnegative = floored_at_zero(g_.nodes[i].inputs[0]);
        relu = lo == 0 && !nonnegative;
        if (!relu && ((lo > -126.5 * scale && !(lo <= 0 && nonnegative)) || hi < 126.5 * scale))
          unsaturated = fmt::format("; values outside [{:.6g}, {:.6g}] no longer saturate", lo, hi);
      }
      note(fmt::format("activation '{}': {} -> symmetric int8, scale {:.6g}{}{}", y, p->describe(),
                       scale, relu ? ", its floor at 0 kept as a Relu" : "", unsaturated));
      std::size_t inserted = 0;
      if (keep_original) {
        const std::string yf = add_value(g_, y + "_float", DType::kFloat32, shape_of(y));
        std::vector<Node> back = {
            qdq("DequantizeLinear", y8, s, z, 1, yf),
            qdq("QuantizeLinear", yf, original_scale, original_zp, original_axis, y)};
        for (const auto& b : back) conversions.insert(b.name);
        insert(i + 1, back);
        inserted += back.size();
      }
      if (relu) {
        const std::string x = g_.nodes[i].inputs[0];
        const std::string xr = add_value(g_, x + "_relu", DType::kFloat32, shape_of(x));
        g_.nodes[i].inputs[0] = xr;
        insert(i, {make("Relu", xr, {x}, {xr})});
        inserted += 1;
      }
      i += inserted;
    }
  }

  // True when `x` cannot be negative: it comes from a Relu, a Clip whose lower bound is a constant
  // >= 0, a DequantizeLinear whose integers cannot go below its zero point (uint8 with zero point
  // 0, or the output of a QuantizeLinear of such a value with the same or a larger zero point), or
  // an op that only selects, moves or averages the values of such inputs (MaxPool, Flatten,
  // Reshape, Concat, ...). torch.ao's QDQ export wraps every MaxPool and Flatten after a ReLU in
  // its own DequantizeLinear / QuantizeLinear pair: their uint8 zero-point-0 output is the ReLU's
  // range, not a second ReLU to invent.
  bool floored_at_zero(const std::string& x, int depth = 0) const {
    const Node* p = g_.producer(x);
    if (!p || !is_onnx(*p) || depth > 64) return false;
    const std::string& op = p->op_type;
    if (op == "Relu") return true;
    if (op == "Clip") {
      const Tensor* lo = constant(g_, input_or_empty(*p, 1));
      return lo && !ir::to_float_vector(*lo).empty() && ir::to_float_vector(*lo)[0] >= 0;
    }
    if (op == "DequantizeLinear" || op == "QuantizeLinear") {
      const auto q = qdq_params(g_, *p);
      if (!q || q->zero_points.size() != 1) return false;
      const double z = static_cast<double>(q->zero_points[0]);
      if (q->range().first >= z) return true;  // the integer type cannot go below the zero point
      if (op == "QuantizeLinear") return floored_at_zero(p->inputs[0], depth + 1);
      // DequantizeLinear(q) >= 0 when q >= z: q from a QuantizeLinear of a non-negative value
      // (q >= its zero point z') with z' >= z.
      const Node* qn = g_.producer(p->inputs[0]);
      if (!qn || qn->op_type != "QuantizeLinear" || !is_onnx(*qn)) return false;
      const auto qq = qdq_params(g_, *qn);
      return qq && qq->zero_points.size() == 1 && static_cast<double>(qq->zero_points[0]) >= z &&
             floored_at_zero(qn->inputs[0], depth + 1);
    }
    static const std::set<std::string> kSelecting = {
        "MaxPool", "GlobalMaxPool", "AveragePool", "GlobalAveragePool", "Flatten",
        "Reshape", "Transpose",     "Squeeze",     "Unsqueeze",         "Identity",
        "Slice",   "SpaceToDepth",  "DepthToSpace"};
    if (kSelecting.count(op)) return !p->inputs.empty() && floored_at_zero(p->inputs[0], depth + 1);
    if (op == "Resize")  // nearest and linear interpolate between the values; cubic overshoots
      return p->get_string("mode", "nearest") != "cubic" &&
             floored_at_zero(p->inputs[0], depth + 1);
    if (op == "Concat") {
      for (const auto& in : p->inputs)
        if (in.empty() || !floored_at_zero(in, depth + 1)) return false;
      return !p->inputs.empty();
    }
    return false;
  }

  // Step 4: integer values outside the scheme that no QuantizeLinear produced (a uint8 graph
  // input, a host op's uint8 output) are converted to symmetric int8 right after they appear.
  void convert_foreign_inputs() {
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      Node& dq = g_.nodes[i];
      if (dq.op_type != "DequantizeLinear" || dq.inputs.size() < 2) continue;
      const std::string x = dq.inputs[0];
      const Tensor* t = g_.find(x);
      if (!t || t->is_constant() || t->dtype == DType::kInt32) continue;
      const auto p = qdq_params(g_, dq);
      if (!p)
        fail("DequantizeLinear '{}': the scale or zero point of '{}' is not a constant", dq.name,
             x);
      if (p->native()) continue;
      const float scale = p->symmetric_scale();
      const std::string s = float_constant(x + "_native_scale", {scale});
      const std::string z = int8_zero(x + "_native");
      const std::string xf = add_value(g_, x + "_float", DType::kFloat32, shape_of(x));
      const std::string x8 = add_value(g_, x + "_int8", DType::kInt8, shape_of(x));
      std::vector<Node> conv = {qdq("DequantizeLinear", x, dq.inputs[1], input_or_empty(dq, 2),
                                    dq.get_int("axis", 1), xf),
                                qdq("QuantizeLinear", xf, s, z, 1, x8)};
      // Every DequantizeLinear of x with these parameters reads the converted value.
      for (Node& m : g_.nodes)
        if (m.op_type == "DequantizeLinear" && !m.inputs.empty() && m.inputs[0] == x &&
            qdq_params(g_, m) == p) {
          m.inputs = {x8, s, z};
          m.attributes.erase("axis");
        }
      note(fmt::format("input '{}': {} -> symmetric int8, scale {:.6g}, converted on the host", x,
                       p->describe(), scale));
      insert(i, conv);
      i += conv.size();
    }
  }

  // Float values of a quantized constant: (q - zero_point) * scale, per `axis` when per-channel.
  std::vector<float> dequantize(const Tensor& q, const QParams& p, std::int64_t axis) const {
    const std::vector<std::int64_t> v = ir::to_int64_vector(q);
    std::vector<float> out(v.size());
    const std::size_t channels = p.scales.size();
    const auto rank = static_cast<std::int64_t>(q.shape.size());
    if (axis < 0) axis += rank;
    std::int64_t inner = 1;
    if (channels > 1) {
      if (axis < 0 || axis >= rank || q.shape[axis] != static_cast<std::int64_t>(channels))
        fail("tensor '{}': {} scales do not match axis {} of shape {}", q.name, channels, axis,
             ir::shape_string(q.shape));
      for (std::int64_t d = axis + 1; d < rank; ++d) inner *= q.shape[d];
    }
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::size_t c = channels > 1 ? (i / static_cast<std::size_t>(inner)) % channels : 0;
      const std::int64_t zp = p.zero_points[p.zero_points.size() == 1 ? 0 : c];
      out[i] = static_cast<float>(static_cast<double>(v[i] - zp) * p.scales[c]);
    }
    return out;
  }

  void drop_unused_constants() {
    std::set<std::string> used(g_.outputs.begin(), g_.outputs.end());
    for (const auto& n : g_.nodes) used.insert(n.inputs.begin(), n.inputs.end());
    for (auto it = g_.tensors.begin(); it != g_.tensors.end();)
      it =
          it->second.is_constant() && !used.count(it->first) ? g_.tensors.erase(it) : std::next(it);
  }

  Context& ctx_;
  Graph& g_;
};

}  // namespace

void normalize_quantization(Context& ctx) { Normalizer(ctx).run(); }

}  // namespace npukit::compiler
