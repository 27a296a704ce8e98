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

bool OpInputs::keeps(std::size_t k, ir::DType dtype) const {
  return k < recycled.size() && recycled[k] && recycled[k]->dtype == dtype;
}

ir::Tensor OpInputs::output_for_overwrite(std::size_t k, ir::DType dtype,
                                          const ir::Shape& shape) const {
  if (!keeps(k, dtype)) return ir::make_tensor(dtype, shape);
  const std::int64_t n = ir::element_count(shape);
  if (n < 0) return ir::make_tensor(dtype, shape);  // which names the error
  ir::Tensor out = std::move(*recycled[k]);
  out.name.clear();
  out.shape = shape;
  out.data.resize(static_cast<std::size_t>(n) * ir::dtype_size(dtype));
  return out;
}

ir::Tensor OpInputs::output(std::size_t k, ir::DType dtype, const ir::Shape& shape) const {
  const bool kept = keeps(k, dtype);  // a new tensor comes zeroed already
  ir::Tensor out = output_for_overwrite(k, dtype, shape);
  if (kept) std::fill(out.data.begin(), out.data.end(), std::uint8_t{0});
  return out;
}

struct RunBuffersAccess {
  static TensorMap& kept(RunBuffers& b, const ir::Graph& graph) {
    if (b.graph_ && b.graph_ != &graph)
      fail("graph '{}': RunBuffers kept for graph '{}' (use one per graph)", graph.name,
           b.graph_->name);
    b.graph_ = &graph;
    return b.kept_;
  }
};

std::size_t RunBuffers::kept_bytes() const {
  std::size_t n = 0;
  for (const auto& [name, t] : kept_) n += t.data.capacity();
  return n;
}

bool is_supported(const std::string& domain, const std::string& op_type) {
  return kernels().count({normal_domain(domain), op_type}) != 0;
}

namespace {

// Runs the graph; inputs are copied into the values when `copy_inputs` (then after_node sees
// them, and they may be written over), else looked up where they are. With `outputs`, the graph
// outputs are swapped into it and nothing is returned.
TensorMap run(const ir::Graph& graph, const TensorRefs& inputs, bool copy_inputs,
              const RunOptions& options, TensorMap* outputs) {
  TensorMap values;
  TensorRefs fed;  // inputs not copied
  TensorMap* kept = options.buffers ? &RunBuffersAccess::kept(*options.buffers, graph) : nullptr;
  for (const auto& name : graph.inputs) {
    auto it = inputs.find(name);
    if (it == inputs.end()) {
      const ir::Tensor* declared = graph.find(name);
      if (declared && declared->is_constant()) continue;  // an input with a default initializer
      fail("graph '{}': no value given for input '{}'", graph.name, name);
    }
    const ir::Tensor& value = *it->second;
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
    if (copy_inputs) {
      ir::Tensor& copy = values[name] = value;
      copy.name = name;
    } else {
      fed[name] = &value;
    }
  }
  // The value of `name`: computed or fed this run, else a constant of the graph (then
  // *is_constant, when asked, is set).
  auto lookup = [&](const std::string& name, bool* is_constant = nullptr) -> const ir::Tensor* {
    if (is_constant) *is_constant = false;
    auto it = values.find(name);
    if (it != values.end()) return &it->second;
    if (auto f = fed.find(name); f != fed.end()) return f->second;
    const ir::Tensor* constant = graph.find(name);
    if (!constant || !constant->is_constant()) return nullptr;
    if (is_constant) *is_constant = true;
    return constant;
  };

  auto is_output = [&](const std::string& name) {
    return std::find(graph.outputs.begin(), graph.outputs.end(), name) != graph.outputs.end();
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
      if (!is_constant && values.count(name) && dead_after(name, k) &&
          std::count(node.inputs.begin(), node.inputs.end(), name) == 1)
        donatable = &values.find(name)->second;
      in.donatable.push_back(donatable);
    }
    if (kept)
      for (const auto& name : node.outputs) {
        // A graph output is made in the caller's storage for it, anything else in the storage
        // kept from the last run.
        TensorMap* from = outputs && is_output(name) ? outputs : kept;
        auto it = name.empty() ? from->end() : from->find(name);
        in.recycled.push_back(it != from->end() ? &it->second : nullptr);
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
      auto release = [&](const std::string& name) {
        if (!dead_after(name, k)) return;
        auto it = values.find(name);
        if (it == values.end()) return;
        if (kept && !it->second.data.empty()) (*kept)[name] = std::move(it->second);
        values.erase(it);
      };
      for (const auto& name : node.inputs) release(name);
      for (const auto& name : node.outputs) release(name);
    }
  }

  TensorMap result;
  for (auto o = graph.outputs.begin(); o != graph.outputs.end(); ++o) {
    const std::string& name = *o;
    const ir::Tensor* t = lookup(name);
    if (!t) fail("graph '{}': output '{}' was never computed", graph.name, name);
    if (!outputs) {
      result[name] = *t;
    } else if (std::find(graph.outputs.begin(), o, name) == o) {  // once per name
      auto it = values.find(name);
      // A computed output's storage goes to the caller, the caller's old storage to the next run.
      if (it != values.end())
        std::swap((*outputs)[name], it->second);
      else
        (*outputs)[name] = *t;  // an input or a constant
    }
  }
  if (kept)
    for (auto& [name, t] : values)
      if (!t.data.empty() && !inputs.count(name)) (*kept)[name] = std::move(t);
  return result;
}

}  // namespace

TensorMap run_graph(const ir::Graph& graph, const TensorMap& inputs, const RunOptions& options) {
  TensorRefs refs;
  for (const auto& [name, t] : inputs) refs[name] = &t;
  return run(graph, refs, /*copy_inputs=*/true, options, nullptr);
}

void run_graph(const ir::Graph& graph, const TensorRefs& inputs, const RunOptions& options,
               TensorMap& outputs) {
  run(graph, inputs, /*copy_inputs=*/options.after_node != nullptr, options, &outputs);
}

}  // namespace npukit::ref
