// Constant folding of shape arithmetic at import; see proto_util.h. Exporters compute reshape
// targets from the input's shape at run time (Shape -> Gather -> Unsqueeze -> Concat -> Reshape);
// once the input shape is known those chains are constants, and folding them lets every later
// step (shape inference, quantizer, compiler) see a plain Reshape.
#include "common/error.h"
#include "ir/tensor_util.h"
#include "onnx/proto_util.h"
#include "ref/executor.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <set>

namespace npukit::onnxio {

namespace {

using ::onnx::ModelProto;
using ::onnx::NodeProto;

// Ops folded when all their inputs are constants: the ones exporters use for shape arithmetic.
// QuantizeLinear/DequantizeLinear are deliberately absent.
const std::set<std::string>& foldable() {
  static const std::set<std::string> ops = {
      "Shape",     "Size",      "Gather",     "Cast",    "Slice",    "Concat",
      "Unsqueeze", "Squeeze",   "Reshape",    "Flatten", "Identity", "ConstantOfShape",
      "Add",       "Sub",       "Mul",        "Div",     "Neg",      "Floor",
      "Ceil",      "Sqrt",      "Equal",      "Where",   "Expand",   "Max",
      "Min",       "Transpose", "ReduceProd", "Tile",    "Pow",      "Reciprocal",
      "Abs",       "Less",      "Greater",    "Dropout", "Split"};
  return ops;
}

// Larger results stay computed at run time rather than bloat the model.
constexpr std::size_t kMaxFoldedBytes = 16u << 20;

}  // namespace

int fold_constants(ModelProto& model, const std::string& what) {
  auto& graph = *model.mutable_graph();
  std::set<std::string> graph_outputs;
  for (const auto& v : graph.output()) graph_outputs.insert(v.name());

  std::map<std::string, int> initializer_index;
  for (int i = 0; i < graph.initializer_size(); ++i)
    initializer_index[graph.initializer(i).name()] = i;
  std::map<std::string, ir::Tensor> cache;
  auto constant = [&](const std::string& name) -> const ir::Tensor* {
    auto c = cache.find(name);
    if (c != cache.end()) return &c->second;
    auto it = initializer_index.find(name);
    if (it == initializer_index.end()) return nullptr;
    ir::Tensor t = tensor_from_proto(graph.initializer(it->second), what);
    return &(cache[name] = std::move(t));
  };
  auto add_initializer = [&](ir::Tensor t) {
    tensor_to_proto(t, *graph.add_initializer());
    initializer_index[t.name] = graph.initializer_size() - 1;
    cache[t.name] = std::move(t);
  };

  // Fully known shapes of non-constant values (for Shape and Size).
  std::map<std::string, ir::Shape> shapes;
  auto note = [&](const ::onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return;
    ir::Shape s;
    for (const auto& d : v.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value()) return;
      s.push_back(d.dim_value());
    }
    shapes[v.name()] = s;
  };
  for (const auto& v : graph.input()) note(v);
  for (const auto& v : graph.value_info()) note(v);
  for (const auto& v : graph.output()) note(v);

  ir::Graph sub;
  for (const auto& op : model.opset_import()) {
    std::string domain = op.domain() == "ai.onnx" ? "" : op.domain();
    sub.opsets[domain] = op.version();
    if (domain.empty()) sub.opset = op.version();
  }

  int folded = 0;
  std::vector<NodeProto> kept;
  for (int i = 0; i < graph.node_size(); ++i) {
    const NodeProto& n = graph.node(i);
    const bool onnx_domain = n.domain().empty() || n.domain() == "ai.onnx";
    bool feeds_output = false;
    for (const auto& o : n.output()) feeds_output |= graph_outputs.count(o) != 0;
    if (!onnx_domain || feeds_output) {
      kept.push_back(n);
      continue;
    }
    const std::string where = fmt::format(
        "{}: node '{}' ({}, #{})", what, n.name().empty() ? "<unnamed>" : n.name(), n.op_type(), i);
    if (n.op_type() == "Constant") {
      ir::Tensor t = constant_value(n, where);
      add_initializer(std::move(t));
      ++folded;
      continue;
    }
    if (!foldable().count(n.op_type())) {
      kept.push_back(n);
      continue;
    }
    std::vector<ir::Tensor> results;
    if ((n.op_type() == "Shape" || n.op_type() == "Size") && n.input_size() == 1) {
      const ir::Tensor* c = constant(n.input(0));
      auto it = shapes.find(n.input(0));
      if (!c && it == shapes.end()) {
        kept.push_back(n);
        continue;
      }
      const ir::Shape shape = c ? c->shape : it->second;
      if (n.op_type() == "Size") {
        results.push_back(ir::make_scalar<std::int64_t>(ir::element_count(shape)));
      } else {
        const auto rank = static_cast<std::int64_t>(shape.size());
        std::int64_t start = 0, end = rank;
        for (const auto& a : n.attribute()) {
          if (a.name() == "start") start = a.i();
          if (a.name() == "end") end = a.i();
        }
        auto clamp = [&](std::int64_t a) {
          return std::clamp<std::int64_t>(a < 0 ? a + rank : a, 0, rank);
        };
        std::vector<std::int64_t> dims;
        for (std::int64_t d = clamp(start); d < clamp(end); ++d) dims.push_back(shape[d]);
        results.push_back(
            ir::make_tensor<std::int64_t>({static_cast<std::int64_t>(dims.size())}, dims));
      }
    } else {
      bool all_constant = true;
      sub.tensors.clear();
      for (const auto& in : n.input()) {
        if (in.empty()) continue;
        const ir::Tensor* c = constant(in);
        if (!c) {
          all_constant = false;
          break;
        }
        sub.tensors[in] = *c;
      }
      if (!all_constant) {
        kept.push_back(n);
        continue;
      }
      ir::Node node;
      node.name = n.name();
      node.op_type = n.op_type();
      node.inputs.assign(n.input().begin(), n.input().end());
      node.outputs.assign(n.output().begin(), n.output().end());
      for (const auto& a : n.attribute())
        node.attributes[a.name()] = attribute_from_proto(a, where);
      sub.nodes = {node};
      sub.outputs.clear();
      for (const auto& o : n.output())
        if (!o.empty()) sub.outputs.push_back(o);
      try {
        ref::TensorMap out = ref::run_graph(sub, {});
        for (const auto& o : n.output())
          if (!o.empty()) results.push_back(out.at(o));
      } catch (const std::exception&) {
        // Not foldable here (an op form the reference kernels lack): it stays a node.
        kept.push_back(n);
        continue;
      }
    }
    std::size_t bytes = 0;
    for (const auto& r : results) bytes += r.data.size();
    if (bytes > kMaxFoldedBytes) {
      kept.push_back(n);
      continue;
    }
    std::size_t k = 0;
    for (const auto& o : n.output()) {
      if (o.empty()) continue;
      ir::Tensor t = std::move(results[k++]);
      t.name = o;
      add_initializer(std::move(t));
    }
    ++folded;
  }
  if (folded) {
    graph.clear_node();
    for (auto& n : kept) *graph.add_node() = std::move(n);
    // Values that became initializers no longer need a value_info entry.
    auto* vi = graph.mutable_value_info();
    for (int i = vi->size() - 1; i >= 0; --i)
      if (initializer_index.count(vi->Get(i).name())) vi->DeleteSubrange(i, 1);
  }
  return folded;
}

}  // namespace npukit::onnxio
