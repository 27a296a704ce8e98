// Pass 1, remove_noops: nodes whose output equals their input are dropped before anything places
// them, so they cost no megablock and trip no erratum check (vgg11 and alexnet end their features
// with a 1x1 stride-1 pool after a max pool: conv -> pool -> pool, gati.md 14.6):
//   * Identity;
//   * Cast to the type its input already has;
//   * Pad (constant mode) whose pads are all 0;
//   * MaxPool / AveragePool / QLinearAveragePool with a 1x1 window, stride 1, no pads and no
//     dilation (QLinearAveragePool only when its input and output scale and zero point agree).
// Consumers read the input instead. When the removed node's output is a graph output, the input
// takes that name instead (its producer writes the output directly); when the input is itself a
// graph input or a constant the node stays (ONNX needs a node between the two names).
#include "common/error.h"
#include "compiler/passes.h"

#include <algorithm>

namespace npukit::compiler {

namespace {

bool all_zero(const std::vector<std::int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [](std::int64_t x) { return x == 0; });
}

bool same_constant(const ir::Graph& g, const std::string& a, const std::string& b) {
  if (a == b) return true;
  const ir::Tensor* ta = g.find(a);
  const ir::Tensor* tb = g.find(b);
  if (!ta || !tb || !ta->is_constant() || !tb->is_constant()) return a.empty() && b.empty();
  return constant_values(*ta) == constant_values(*tb);
}

bool unit_window(const ir::Node& n) {
  const auto k = n.get_ints("kernel_shape", {});
  if (k.size() != 2 || k[0] != 1 || k[1] != 1) return false;
  const auto s = n.get_ints("strides", {1, 1});
  if (!std::all_of(s.begin(), s.end(), [](std::int64_t x) { return x == 1; })) return false;
  const auto d = n.get_ints("dilations", {1, 1});
  if (!std::all_of(d.begin(), d.end(), [](std::int64_t x) { return x == 1; })) return false;
  const auto pad = n.get_string("auto_pad", "NOTSET");
  if (pad != "NOTSET" && pad != "VALID") return false;  // SAME_* with 1x1 pads 0 too, but be safe
  return all_zero(n.get_ints("pads", {}));
}

// Why `n` is a no-op, or empty when it is not.
std::string noop_reason(const ir::Graph& g, const ir::Node& n) {
  if (n.outputs.size() != 1 || n.inputs.empty() || n.inputs[0].empty()) return "";
  const std::string& op = n.op_type;
  const bool onnx = n.domain.empty() || n.domain == "ai.onnx";
  if (onnx && op == "Identity") return "Identity";
  if (onnx && op == "Cast") {
    const ir::Tensor* x = g.find(n.inputs[0]);
    const ir::Tensor* y = g.find(n.outputs[0]);
    if (x && y && x->dtype != ir::DType::kUndefined && x->dtype == y->dtype)
      return "Cast to the type its input has";
    return "";
  }
  if (onnx && op == "Pad") {
    if (n.get_string("mode", "constant") != "constant") return "";
    std::vector<std::int64_t> pads;
    if (n.inputs.size() > 1 && !n.inputs[1].empty()) {  // opset >= 11: pads is an input
      const ir::Tensor* p = g.find(n.inputs[1]);
      if (!p || !p->is_constant()) return "";
      for (double v : constant_values(*p)) pads.push_back(static_cast<std::int64_t>(v));
    } else {
      pads = n.get_ints("pads", {1});
    }
    return all_zero(pads) ? "Pad with all pads 0" : "";
  }
  if (onnx && (op == "MaxPool" || op == "AveragePool")) {
    if (n.outputs.size() != 1) return "";
    return unit_window(n) ? op + " with a 1x1 window, stride 1 and no padding" : "";
  }
  if (op == "QLinearAveragePool" && n.domain == "com.microsoft" && n.inputs.size() >= 5 &&
      unit_window(n) && same_constant(g, n.inputs[1], n.inputs[3]) &&
      same_constant(g, n.inputs[2], n.inputs[4]))
    return "QLinearAveragePool with a 1x1 window, stride 1, no padding and equal scales";
  return "";
}

bool is_graph_input_or_constant(const ir::Graph& g, const std::string& v) {
  if (std::find(g.inputs.begin(), g.inputs.end(), v) != g.inputs.end()) return true;
  const ir::Tensor* t = g.find(v);
  return t && t->is_constant();
}

void rename_value(ir::Graph& g, const std::string& from, const std::string& to) {
  for (auto& n : g.nodes) {
    for (auto& in : n.inputs)
      if (in == from) in = to;
    for (auto& out : n.outputs)
      if (out == from) out = to;
  }
  for (auto& o : g.outputs)
    if (o == from) o = to;
}

}  // namespace

void remove_noops(Context& ctx) {
  ir::Graph& g = ctx.graph;
  for (std::size_t i = 0; i < g.nodes.size();) {
    const ir::Node& n = g.nodes[i];
    const std::string reason = noop_reason(g, n);
    if (reason.empty()) {
      ++i;
      continue;
    }
    const std::string x = n.inputs[0], y = n.outputs[0], name = n.name;
    const bool y_is_output = std::find(g.outputs.begin(), g.outputs.end(), y) != g.outputs.end();
    const bool x_is_output = std::find(g.outputs.begin(), g.outputs.end(), x) != g.outputs.end();
    if (y_is_output && (is_graph_input_or_constant(g, x) || x_is_output)) {
      ++i;  // two names the model exposes (or an input and an output): keep the node between them
      continue;
    }
    g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(i));
    if (y_is_output) {
      ir::Tensor t = g.tensor(x);  // x's producer now writes y (y keeps its declared type)
      rename_value(g, x, y);
      g.tensors.erase(x);
      if (ir::Tensor* ty = g.find(y); ty && ty->shape.empty()) ty->shape = t.shape;
    } else {
      rename_value(g, y, x);
      g.tensors.erase(y);
    }
    ctx.place(name, Placement::kHost, "removed: " + reason + " (remove_noops)");
  }
}

}  // namespace npukit::compiler
