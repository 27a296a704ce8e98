#include "onnx/normalize.h"

#include "common/error.h"
#include "ir/tensor_util.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace npukit::onnxio {

namespace {

using ir::DType;
using ir::Graph;
using ir::Node;
using ir::Tensor;

constexpr const char* kAdvice =
    "quantize the float model with `npukit quantize`, or export it in QDQ form "
    "(QuantizeLinear/DequantizeLinear around float ops) so npukit can requantize it";

const Tensor* constant(const Graph& g, const std::string& name) {
  const Tensor* t = name.empty() ? nullptr : g.find(name);
  return t && t->is_constant() ? t : nullptr;
}

// (scale, zero point) input positions of a QOperator node, in order.
std::vector<std::pair<std::size_t, std::size_t>> qparam_slots(const Node& n) {
  const std::string& op = n.op_type;
  if (op == "QLinearConv" || op == "QLinearMatMul" || op == "QLinearAdd" || op == "QLinearMul")
    return {{1, 2}, {4, 5}, {6, 7}};
  if (op == "QGemm") return {{1, 2}, {4, 5}, {7, 8}};
  if (op == "QLinearSigmoid" || op == "QLinearLeakyRelu" || op == "QLinearAveragePool" ||
      op == "QLinearGlobalAveragePool" || op == "QLinearSoftmax")
    return {{1, 2}, {3, 4}};
  if (op == "QLinearConcat") {
    std::vector<std::pair<std::size_t, std::size_t>> slots = {{0, 1}};
    for (std::size_t i = 2; i + 2 < n.inputs.size(); i += 3) slots.push_back({i + 1, i + 2});
    return slots;
  }
  return {};
}

// The tensor a (scale, zero point) pair quantizes: the input before it, or the node's output.
std::string quantized_value(const Node& n, std::size_t scale_slot) {
  if (n.op_type == "QLinearConcat")
    return scale_slot == 0 ? n.outputs[0] : n.inputs[scale_slot - 1];
  bool output_slot = (n.op_type == "QGemm" && scale_slot == 7) ||
                     (scale_slot == 6 && n.op_type != "QGemm") ||
                     (scale_slot == 3 && qparam_slots(n).size() == 2);
  return output_slot ? n.outputs[0] : n.inputs[scale_slot - 1];
}

struct QParams {
  std::vector<float> scales;
  DType dtype = DType::kUInt8;  // ONNX default when the zero point is omitted
  std::vector<std::int64_t> zero_points{0};
};

std::optional<QParams> read_qparams(const Graph& g, const std::string& scale,
                                    const std::string& zero_point) {
  const Tensor* s = constant(g, scale);
  if (!s) return std::nullopt;
  QParams p;
  p.scales = ir::to_float_vector(*s);
  if (p.scales.empty()) fail("scale '{}' is empty", scale);
  for (float v : p.scales)
    if (!std::isfinite(v) || v <= 0)
      fail("scale '{}' holds {}; quantization scales must be finite and positive", scale, v);
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

bool is_native(const QParams& p, DType int_type = DType::kInt8) {
  return p.scales.size() == 1 && p.dtype == int_type &&
         std::all_of(p.zero_points.begin(), p.zero_points.end(), [](auto z) { return z == 0; });
}

std::string describe(const QParams& p) {
  std::string zps;
  if (p.zero_points.size() == 1)
    zps = fmt::format("zero point {}", p.zero_points[0]);
  else
    zps = fmt::format("{} zero points", p.zero_points.size());
  return fmt::format("{}, {} scale{}, {}", ir::dtype_name(p.dtype), p.scales.size(),
                     p.scales.size() == 1 ? "" : "s", zps);
}

std::pair<double, double> int_range(DType t) {
  switch (t) {
    case DType::kInt8:
      return {-128, 127};
    case DType::kUInt8:
      return {0, 255};
    case DType::kInt16:
      return {-32768, 32767};
    case DType::kInt32:
      return {-2147483648.0, 2147483647.0};
    default:
      fail("quantized type {} is not supported", ir::dtype_name(t));
  }
}

class Normalizer {
 public:
  Normalizer(const Graph& g, NormalizeReport* report) : g_(g), report_(report) {}

  Graph run() {
    check_qoperator_nodes();
    requantize_weights();
    requantize_activations();
    requantize_biases();
    drop_unused_constants();
    return std::move(g_);
  }

 private:
  void note(std::string line) {
    if (report_) report_->changes.push_back(std::move(line));
  }

  std::string add_scalar_scale(const std::string& base, float scale) {
    std::string name = base + "_native_scale";
    g_.tensors[name] = ir::make_scalar<float>(scale, name);
    return name;
  }
  std::string add_zero(const std::string& base, DType type) {
    std::string name = base + "_native_zero_point";
    g_.tensors[name] = type == DType::kInt32 ? ir::make_scalar<std::int32_t>(0, name)
                                             : ir::make_scalar<std::int8_t>(0, name);
    return name;
  }

  // QOperator nodes hold integer activations only: anything outside the scheme is fatal.
  void check_qoperator_nodes() {
    for (const Node& n : g_.nodes) {
      for (auto [s, z] : qparam_slots(n)) {
        if (s >= n.inputs.size() || n.inputs[s].empty()) continue;  // optional (QGemm y_scale)
        std::string zp = z < n.inputs.size() ? n.inputs[z] : "";
        std::string value = quantized_value(n, s);
        auto p = read_qparams(g_, n.inputs[s], zp);
        if (!p)
          fail("node '{}' ({}): scale '{}' or zero point '{}' of '{}' is not a constant", n.name,
               n.op_type, n.inputs[s], zp, value);
        if (is_native(*p)) continue;
        bool weight = constant(g_, value) != nullptr;
        if (p->scales.size() != 1)
          fail(
              "node '{}' ({}): {} '{}' is quantized per channel ({}); the native scheme is "
              "per-tensor and a QOperator model has no float values to requantize from: {}",
              n.name, n.op_type, weight ? "weight" : "tensor", value, describe(*p), kAdvice);
        fail(
            "node '{}' ({}): {} '{}' is asymmetric ({}); the native scheme is symmetric int8 "
            "with zero point 0 and a QOperator model has no float values to requantize from: {}",
            n.name, n.op_type, weight ? "weight" : "activation", value, describe(*p), kAdvice);
      }
    }
  }

  // DequantizeLinear(constant int8/uint8 weight) -> per-tensor symmetric int8.
  void requantize_weights() {
    for (Node& n : g_.nodes) {
      if (n.op_type != "DequantizeLinear") continue;
      const Tensor* w = constant(g_, n.inputs[0]);
      if (!w || w->dtype == DType::kInt32) continue;  // activations; biases come later
      auto p = read_qparams(g_, n.inputs[1], n.inputs.size() > 2 ? n.inputs[2] : "");
      if (!p)
        fail("DequantizeLinear '{}': scale or zero point of '{}' is not constant", n.name, w->name);
      if (is_native(*p)) continue;
      std::vector<float> values = dequantize(*w, *p, n.get_int("axis", 1));
      float max_abs = 0;
      for (float v : values) max_abs = std::max(max_abs, std::fabs(v));
      float scale = max_abs > 0 ? max_abs / 127.0f : 1.0f;
      Tensor q = ir::make_tensor(DType::kInt8, w->shape, w->name + "_native");
      for (std::size_t i = 0; i < values.size(); ++i)
        q.as_mutable<std::int8_t>()[i] = static_cast<std::int8_t>(
            std::clamp(std::nearbyint(values[i] / scale), -127.0f, 127.0f));
      note(fmt::format("weight '{}': {} -> int8 per-tensor symmetric, scale {:.6g}", w->name,
                       describe(*p), scale));
      std::string base = w->name;
      n.inputs.resize(3);
      n.inputs[0] = q.name;
      g_.tensors[q.name] = std::move(q);
      n.inputs[1] = add_scalar_scale(base, scale);
      n.inputs[2] = add_zero(base, DType::kInt8);
      n.attributes.erase("axis");
      native_scale_[n.outputs[0]] = scale;
    }
  }

  // QuantizeLinear(activation) whose every consumer is a DequantizeLinear: the pair describes a
  // float range; re-express it as symmetric int8.
  void requantize_activations() {
    for (Node& n : g_.nodes) {
      if (n.op_type != "QuantizeLinear") continue;
      const std::string& y = n.outputs[0];
      auto p = read_qparams(g_, n.inputs[1], n.inputs.size() > 2 ? n.inputs[2] : "");
      if (!p) fail("QuantizeLinear '{}': scale or zero point of '{}' is not constant", n.name, y);
      if (is_native(*p)) {
        record_dq_scales(y, p->scales[0]);
        continue;
      }
      std::vector<Node*> users;
      for (Node& m : g_.nodes)
        if (std::find(m.inputs.begin(), m.inputs.end(), y) != m.inputs.end()) users.push_back(&m);
      for (Node* m : users)
        if (m->op_type != "DequantizeLinear" || m->inputs[0] != y)
          fail(
              "activation '{}' is quantized asymmetrically ({}) and feeds node '{}' ({}), which "
              "has no float form to requantize: {}",
              y, describe(*p), m->name, m->op_type, kAdvice);
      auto [qmin, qmax] = int_range(p->dtype);
      double limit = 0;
      for (std::size_t c = 0; c < p->scales.size(); ++c) {
        double z = static_cast<double>(p->zero_points[p->zero_points.size() == 1 ? 0 : c]);
        limit = std::max(
            {limit, std::fabs((qmin - z) * p->scales[c]), std::fabs((qmax - z) * p->scales[c])});
      }
      float scale = limit > 0 ? static_cast<float>(limit / 127.0) : 1.0f;
      std::string s = add_scalar_scale(y, scale), z = add_zero(y, DType::kInt8);
      note(fmt::format("activation '{}': {} -> symmetric int8, scale {:.6g} (same float range)", y,
                       describe(*p), scale));
      for (Node* m : {&n}) {
        m->inputs.resize(3);
        m->inputs[1] = s;
        m->inputs[2] = z;
        m->attributes.erase("axis");
      }
      for (Node* m : users) {
        m->inputs.resize(3);
        m->inputs[1] = s;
        m->inputs[2] = z;
        m->attributes.erase("axis");
      }
      if (Tensor* t = g_.find(y)) t->dtype = DType::kInt8;
      record_dq_scales(y, scale);
    }
  }

  void record_dq_scales(const std::string& quantized, float scale) {
    for (const Node& m : g_.nodes)
      if (m.op_type == "DequantizeLinear" && m.inputs[0] == quantized)
        native_scale_[m.outputs[0]] = scale;
  }

  // DequantizeLinear(int32 bias) feeding Conv/Gemm input 2: int32 at input_scale * weight_scale.
  void requantize_biases() {
    std::map<std::string, Node*> dq_of;
    for (Node& n : g_.nodes)
      if (n.op_type == "DequantizeLinear") dq_of[n.outputs[0]] = &n;
    for (const Node& n : g_.nodes) {
      if ((n.op_type != "Conv" && n.op_type != "Gemm") || n.inputs.size() < 3) continue;
      auto it = dq_of.find(n.inputs[2]);
      if (it == dq_of.end()) continue;
      Node& dq = *it->second;
      const Tensor* b = constant(g_, dq.inputs[0]);
      if (!b || b->dtype != DType::kInt32) continue;
      auto sx = native_scale_.find(n.inputs[0]);
      auto sw = native_scale_.find(n.inputs[1]);
      if (sx == native_scale_.end() || sw == native_scale_.end()) continue;
      auto p = read_qparams(g_, dq.inputs[1], dq.inputs.size() > 2 ? dq.inputs[2] : "");
      if (!p) continue;
      const double scale = static_cast<double>(sx->second) * sw->second;
      if (is_native(*p, DType::kInt32) && p->scales[0] == static_cast<float>(scale)) continue;
      std::vector<float> values = dequantize(*b, *p, dq.get_int("axis", 1));
      Tensor q = ir::make_tensor(DType::kInt32, b->shape, b->name + "_native");
      for (std::size_t i = 0; i < values.size(); ++i) {
        double r = std::nearbyint(values[i] / scale);
        if (std::fabs(r) > 2147483647.0)
          fail("bias '{}' does not fit int32 at scale {} after requantization", b->name, scale);
        q.as_mutable<std::int32_t>()[i] = static_cast<std::int32_t>(r);
      }
      note(fmt::format("bias '{}': {} -> int32 at input scale x weight scale {:.6g}", b->name,
                       describe(*p), scale));
      std::string base = b->name;
      dq.inputs.resize(3);
      dq.inputs[0] = q.name;
      g_.tensors[q.name] = std::move(q);
      dq.inputs[1] = add_scalar_scale(base, static_cast<float>(scale));
      dq.inputs[2] = add_zero(base, DType::kInt32);
      dq.attributes.erase("axis");
    }
  }

  // Float values of a quantized constant: (q - zero_point) * scale, per `axis` when per-channel.
  std::vector<float> dequantize(const Tensor& q, const QParams& p, std::int64_t axis) const {
    std::vector<std::int64_t> v = ir::to_int64_vector(q);
    std::vector<float> out(v.size());
    std::size_t channels = p.scales.size();
    std::int64_t rank = static_cast<std::int64_t>(q.shape.size());
    if (axis < 0) axis += rank;
    std::int64_t inner = 1;
    if (channels > 1) {
      if (axis < 0 || axis >= rank || q.shape[axis] != static_cast<std::int64_t>(channels))
        fail("tensor '{}': {} scales do not match axis {} of shape {}", q.name, channels, axis,
             ir::shape_string(q.shape));
      for (std::int64_t d = axis + 1; d < rank; ++d) inner *= q.shape[d];
    }
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::size_t c = channels > 1 ? (i / static_cast<std::size_t>(inner)) % channels : 0;
      std::int64_t zp = p.zero_points[p.zero_points.size() == 1 ? 0 : c];
      out[i] = static_cast<float>((v[i] - zp) * static_cast<double>(p.scales[c]));
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

  Graph g_;
  NormalizeReport* report_;
  std::map<std::string, float> native_scale_;  // DequantizeLinear output -> its (new) scale
};

}  // namespace

ir::Graph normalize_quantization(const ir::Graph& graph, NormalizeReport* report) {
  return Normalizer(graph, report).run();
}

}  // namespace npukit::onnxio
