#include "ref/executor.h"

#include <algorithm>

#include "common/error.h"
#include "ir/tensor_util.h"
#include "ref/kernel_registry.h"

namespace npukit::ref {

namespace {

std::string normal_domain(const std::string& domain) {
  return domain == "ai.onnx" ? std::string() : domain;
}

const KernelTable& kernels() {
  static const KernelTable table = [] {
    KernelTable t;
    add_float_kernels(t);
    add_extra_kernels(t);
    add_conv_transpose_kernels(t);
    add_quant_kernels(t);
    add_gati_kernels(t);
    return t;
  }();
  return table;
}

std::string node_label(const ir::Node& node) {
  std::string op = node.domain.empty() ? node.op_type : node.domain + "." + node.op_type;
  return fmt::format("node '{}' ({})", node.name, op);
}

}  // namespace

ir::Tensor OpInputs::output_over(std::size_t i, ir::DType dtype, const ir::Shape& shape) const {
  if (i < donatable.size() && donatable[i] && donatable[i]->dtype == dtype &&
      donatable[i]->shape == shape && !donatable[i]->data.empty()) {
    ir::Tensor out = std::move(*donatable[i]);
    out.name.clear();
    return out;
  }
  return ir::make_tensor(dtype, shape);
}

bool is_supported(const std::string& domain, const std::string& op_type) {
  return kernels().count({normal_domain(domain), op_type}) != 0;
}

TensorMap run_graph(const ir::Graph& graph, const TensorMap& inputs, const RunOptions& options) {
  TensorMap values;
  for (const auto& name : graph.inputs) {
    auto it = inputs.find(name);
    if (it == inputs.end()) {
      const ir::Tensor* declared = graph.find(name);
      if (declared && declared->is_constant()) continue;  // an input with a default initializer
      fail("graph '{}': no value given for input '{}'", graph.name, name);
    }
    ir::Tensor value = it->second;
    value.name = name;
    if (const ir::Tensor* declared = graph.find(name)) {
      if (declared->dtype != ir::DType::kUndefined && declared->dtype != value.dtype)
        fail("graph '{}': input '{}' must be {}, got {}", graph.name, name,
             ir::dtype_name(declared->dtype), ir::dtype_name(value.dtype));
      bool fits = declared->shape.empty() || declared->shape.size() == value.shape.size();
      for (std::size_t i = 0; fits && i < declared->shape.size(); ++i)
        fits = declared->shape[i] < 0 || declared->shape[i] == value.shape[i];
      if (!fits)
        fail("graph '{}': input '{}' has shape {}, the model expects {}", graph.name, name,
             ir::shape_string(value.shape), ir::shape_string(declared->shape));
    }
    if (ir::stored_count(value) != ir::element_count(value.shape))
      fail("graph '{}': input '{}' holds {} values for shape {}", graph.name, name,
           ir::stored_count(value), ir::shape_string(value.shape));
    values[name] = std::move(value);
  }
  // The value of `name`: computed or fed this run, else a constant of the graph (then
  // *is_constant, when asked, is set).
  auto lookup = [&](const std::string& name, bool* is_constant = nullptr) -> const ir::Tensor* {
    if (is_constant) *is_constant = false;
    auto it = values.find(name);
    if (it != values.end()) return &it->second;
    const ir::Tensor* constant = graph.find(name);
    if (!constant || !constant->is_constant()) return nullptr;
    if (is_constant) *is_constant = true;
    return constant;
  };

  // With release_dead_values: the index of the last node reading each value; graph outputs,
  // which outlive the run, are left out.
  std::map<std::string, std::size_t> last_reader;
  if (options.release_dead_values) {
    for (std::size_t k = 0; k < graph.nodes.size(); ++k)
      for (const auto& name : graph.nodes[k].inputs)
        if (!name.empty()) last_reader[name] = k;
    for (const auto& name : graph.outputs) last_reader.erase(name);
  }
  // Whether `name` may be dropped after node k (read by no later node, not kept).
  auto dead_after = [&](const std::string& name, std::size_t k) {
    if (!options.release_dead_values || name.empty()) return false;
    auto it = last_reader.find(name);
    if (it != last_reader.end()) return it->second == k;
    // Read by no node: dropped after it is made unless it is a graph output.
    return std::find(graph.outputs.begin(), graph.outputs.end(), name) == graph.outputs.end();
  };

  for (std::size_t k = 0; k < graph.nodes.size(); ++k) {
    const ir::Node& node = graph.nodes[k];
    auto kernel = kernels().find({normal_domain(node.domain), node.op_type});
    if (kernel == kernels().end())
      fail("{}: op is not supported by the reference executor", node_label(node));
    OpInputs in;
    const std::string domain = normal_domain(node.domain);
    auto opset = graph.opsets.find(domain.empty() ? std::string() : domain);
    if (opset == graph.opsets.end() && domain.empty()) opset = graph.opsets.find("ai.onnx");
    in.opset = opset != graph.opsets.end() ? opset->second : (domain.empty() ? graph.opset : 1);
    in.conv_weights = options.conv_weights;
    for (const auto& name : node.inputs) {
      if (name.empty()) {
        in.tensors.push_back(nullptr);
        in.constant.push_back(false);
        in.donatable.push_back(nullptr);
        continue;
      }
      bool is_constant = false;
      const ir::Tensor* t = lookup(name, &is_constant);
      if (!t)
        fail("{}: input '{}' has no value (not a graph input, constant or earlier output)",
             node_label(node), name);
      in.tensors.push_back(t);
      in.constant.push_back(is_constant);
      ir::Tensor* donatable = nullptr;
      if (!is_constant && dead_after(name, k) &&
          std::count(node.inputs.begin(), node.inputs.end(), name) == 1)
        donatable = &values.find(name)->second;
      in.donatable.push_back(donatable);
    }
    std::vector<ir::Tensor> outs;
    try {
      outs = kernel->second(node, in);
    } catch (const Error& e) {
      fail("{}: {}", node_label(node), e.what());
    }
    if (outs.size() < node.outputs.size())
      fail("{}: produced {} outputs, the node names {}", node_label(node), outs.size(),
           node.outputs.size());
    for (std::size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i].empty()) continue;
      outs[i].name = node.outputs[i];
      values[node.outputs[i]] = std::move(outs[i]);
    }
    if (options.after_node) options.after_node(node, values);
    if (options.release_dead_values) {
      for (const auto& name : node.inputs)
        if (dead_after(name, k)) values.erase(name);
      for (const auto& name : node.outputs)
        if (dead_after(name, k)) values.erase(name);
    }
  }

  TensorMap result;
  for (const auto& name : graph.outputs) {
    const ir::Tensor* t = lookup(name);
    if (!t) fail("graph '{}': output '{}' was never computed", graph.name, name);
    result[name] = *t;
  }
  return result;
}

}  // namespace npukit::ref
