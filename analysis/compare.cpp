#include "analysis/compare.h"

#include "common/error.h"
#include "ir/tensor_util.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace npukit::analysis {
namespace {

using ref::TensorMap;

// Integer or float values of a tensor as double, for differences.
std::vector<double> values_of(const ir::Tensor& t) {
  std::vector<double> v;
  if (t.dtype == ir::DType::kFloat32 || t.dtype == ir::DType::kFloat64) {
    for (float f : ir::to_float_vector(t)) v.push_back(f);
  } else {
    for (std::int64_t i : ir::to_int64_vector(t)) v.push_back(static_cast<double>(i));
  }
  return v;
}

// The index of flat position i in `shape`.
std::vector<std::int64_t> unravel(std::int64_t i, const ir::Shape& shape) {
  std::vector<std::int64_t> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    const std::int64_t n = std::max<std::int64_t>(shape[d], 1);
    idx[d] = i % n;
    i /= n;
  }
  return idx;
}

TensorDiff diff(const ir::Tensor& device, const ir::Tensor& reference) {
  TensorDiff d;
  d.shape = reference.shape;
  d.compared = true;
  const auto a = values_of(device);
  const auto b = values_of(reference);
  if (a.size() != b.size()) {
    d.note = fmt::format("device gave {} values, the reference {}", a.size(), b.size());
    d.differ = static_cast<std::int64_t>(std::max(a.size(), b.size()));
    return d;
  }
  d.elements = static_cast<std::int64_t>(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double e = std::abs(a[i] - b[i]);
    if (e != 0) {
      if (d.differ == 0) {
        d.first_index = unravel(static_cast<std::int64_t>(i), reference.shape);
        d.first_device = a[i];
        d.first_reference = b[i];
      }
      ++d.differ;
      d.max_abs_diff = std::max(d.max_abs_diff, e);
    }
  }
  return d;
}

bool manifest_has_input(const isa::Manifest& m, const std::string& name) {
  const auto inputs = m.device_inputs();
  return std::any_of(inputs.begin(), inputs.end(), [&](const auto& t) { return t.name == name; });
}

}  // namespace

compiler::CompileOptions dispatch_every_layer(const ir::Graph& model,
                                              compiler::CompileOptions options) {
  const auto lowered = compiler::lower(model, options);
  for (const auto& n : lowered.graph.nodes)
    if (compiler::is_gati(n))
      for (const auto& o : n.outputs)
        if (const ir::Tensor* t = lowered.graph.find(o); t && t->dtype == ir::DType::kInt8)
          options.dispatch.push_back(o);
  return options;
}

compiler::CompileOptions options_of(const isa::Manifest& m, compiler::CompileOptions options) {
  options.arch = m.arch();
  options.ramsize_mb = m.ramsize_mb;
  options.allow_errata = m.allow_errata;
  options.weight_scales = compiler::parse_weight_scales(m.weight_scales, "manifest weight_scales");
  options.dispatch.clear();
  for (const auto& out : m.device_outputs()) options.dispatch.push_back(out.name);
  return options;
}

bool CompareResult::pass() const {
  for (const auto& d : layers)
    if (!d.ok()) return false;
  for (const auto& d : outputs)
    if (!d.ok()) return false;
  return first_failing_alone() == nullptr;
}

std::int64_t CompareResult::layers_compared() const {
  std::int64_t n = 0;
  for (const auto& d : layers) n += d.compared && d.differ >= 0 ? 1 : 0;
  return n;
}

std::int64_t CompareResult::layers_compared_alone() const {
  std::int64_t n = 0;
  for (const auto& d : alone) n += d.compared ? 1 : 0;
  return n;
}

const TensorDiff* CompareResult::first_failing() const {
  for (const auto& d : layers)
    if (!d.ok()) return &d;
  return nullptr;
}

const TensorDiff* CompareResult::first_failing_alone() const {
  for (std::size_t i = 0; i < alone.size() && i < layers.size(); ++i)
    if (!alone[i].ok()) return &layers[i];
  return nullptr;
}

nlohmann::json CompareResult::to_json(const std::string& model) const {
  auto one = [](const TensorDiff& d) {
    nlohmann::json j{{"tensor", d.tensor},     {"shape", d.shape},
                     {"compared", d.compared}, {"elements", d.elements},
                     {"differ", d.differ},     {"max_abs_diff", d.max_abs_diff},
                     {"note", d.note}};
    if (!d.layer.empty()) {
      j["layer"] = d.layer;
      j["opcode"] = d.opcode;
    }
    if (d.differ > 0 && !d.first_index.empty())
      j["first_diff"] = {
          {"index", d.first_index}, {"device", d.first_device}, {"reference", d.first_reference}};
    return j;
  };
  nlohmann::json j;
  j["model"] = model;
  j["sa_arch"] = sa_arch;
  j["batch"] = batch;
  j["pass"] = pass();
  j["layers_compared"] = layers_compared();
  const TensorDiff* bad = first_failing();
  j["first_failing_layer"] = bad ? nlohmann::json(bad->layer) : nlohmann::json();
  if (!reference_error.empty()) j["reference_error"] = reference_error;
  j["layers_compared_alone"] = layers_compared_alone();
  const TensorDiff* bad_alone = first_failing_alone();
  j["first_failing_layer_alone"] = bad_alone ? nlohmann::json(bad_alone->layer) : nlohmann::json();
  j["layers"] = nlohmann::json::array();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    auto lj = one(layers[i]);
    lj["alone"] = one(alone[i]);
    j["layers"].push_back(lj);
  }
  j["outputs"] = nlohmann::json::array();
  for (const auto& d : outputs) j["outputs"].push_back(one(d));
  return j;
}

CompareResult compare(const ir::Graph& model, const compiler::CompileOptions& options,
                      runtime::Session& session, const TensorMap& feeds) {
  const auto ctx = compiler::lower(model, options);
  const auto& manifest = session.manifest();
  CompareResult r;
  r.sa_arch = manifest.sa_arch;
  r.device = session.run(feeds);
  const auto& device = r.device;

  // The reference, image by image as the device runs them, keeping every device tensor.
  std::set<std::string> wanted;
  for (const auto& out : manifest.device_outputs()) wanted.insert(out.name);
  for (const auto& in : manifest.device_inputs()) wanted.insert(in.name);
  for (const auto& l : manifest.layers)
    for (const auto& o : l.outputs) wanted.insert(o);
  std::int64_t batch = 1;
  for (const auto& [name, t] : feeds) batch = t.shape.empty() ? 1 : t.shape[0];
  r.batch = batch;
  TensorMap reference, reference_outputs;
  // When the reference executor cannot run a node, the layers before it are still compared and
  // the failure is reported at that node (its layer, when it is a device layer).
  std::string reference_failed_node;
  for (std::int64_t n = 0; n < batch && r.reference_error.empty(); ++n) {
    TensorMap image;
    for (const auto& [name, t] : feeds) image[name] = runtime::image_of(t, n);
    TensorMap seen;
    std::size_t done = 0;
    ref::RunOptions ro;
    ro.after_node = [&](const ir::Node& node, const TensorMap& values) {
      ++done;
      for (const auto& o : node.outputs)
        if (wanted.count(o))
          if (auto it = values.find(o); it != values.end()) seen[o] = it->second;
    };
    TensorMap outs;
    try {
      outs = ref::run_graph(ctx.graph, image, ro);
    } catch (const Error& e) {
      r.reference_error = e.what();
      if (done < ctx.graph.nodes.size()) reference_failed_node = ctx.graph.nodes[done].name;
      if (n > 0) break;  // keep only complete batches
    }
    for (auto& [name, t] : seen) runtime::append_image(reference[name], t);
    for (auto& [name, t] : outs) runtime::append_image(reference_outputs[name], t);
  }

  for (const auto& l : manifest.layers) {
    for (const auto& o : l.outputs) {
      TensorDiff d;
      auto dev = device.device_outputs.find(o);
      auto ref = reference.find(o);
      if (!r.reference_error.empty() &&
          (l.name == reference_failed_node || ref == reference.end())) {
        d.note = "the reference executor did not compute it: " + r.reference_error;
        d.compared = true;
        d.differ = -1;  // unknown
      } else if (dev == device.device_outputs.end()) {
        d.note = "not dispatched";
      } else if (ref == reference.end()) {
        d.note = "the reference graph has no such value";
        d.compared = true;
        d.differ = 1;
      } else if (ref->second.dtype != ir::DType::kInt8) {
        d.note = fmt::format("{} output (accumulants) not dispatched as int8",
                             ir::dtype_name(ref->second.dtype));
      } else {
        d = diff(dev->second, ref->second);
      }
      d.layer = l.name;
      d.opcode = l.opcode;
      d.tensor = o;
      r.layers.push_back(std::move(d));
    }
  }
  for (const auto& out : manifest.outputs) {
    TensorDiff d;
    auto dev = device.outputs.find(out.name);
    auto ref = reference_outputs.find(out.name);
    if (dev == device.outputs.end() || ref == reference_outputs.end()) {
      d.note = r.reference_error.empty() ? "missing" : "the reference executor stopped";
      d.compared = true;
      d.differ = -1;  // unknown
    } else {
      d = diff(dev->second, ref->second);
    }
    d.tensor = out.name;
    r.outputs.push_back(std::move(d));
  }

  // Each device layer alone: the reference runs just that node from the device's own values of
  // its inputs.
  r.alone.resize(r.layers.size());
  for (std::size_t i = 0; i < r.layers.size(); ++i) {
    TensorDiff& d = r.alone[i];
    const auto node_it =
        std::find_if(ctx.graph.nodes.begin(), ctx.graph.nodes.end(),
                     [&](const ir::Node& n) { return n.name == r.layers[i].layer; });
    auto dev_out = device.device_outputs.find(r.layers[i].tensor);
    if (node_it == ctx.graph.nodes.end() || dev_out == device.device_outputs.end()) {
      d.note = "not dispatched";
      continue;
    }
    TensorMap layer_feeds;
    std::string missing;
    for (const auto& in : node_it->inputs) {
      if (in.empty()) continue;
      if (const ir::Tensor* t = ctx.graph.find(in); t && t->is_constant()) continue;
      if (auto it = device.device_outputs.find(in); it != device.device_outputs.end())
        layer_feeds[in] = it->second;
      else if (auto ri = reference.find(in); ri != reference.end() &&
                                             ri->second.dtype == ir::DType::kInt8 &&
                                             manifest_has_input(manifest, in))
        layer_feeds[in] = ri->second;
      else
        missing = in;
    }
    if (!missing.empty()) {
      d.note = fmt::format("input '{}' is not dispatched (int32 accumulants)", missing);
      continue;
    }
    try {
      const ir::Graph one =
          compiler::extract_subgraph(ctx.graph, {node_it->name}, {r.layers[i].tensor}, "layer");
      ir::Tensor out;  // image by image, as the graph declares batch 1
      for (std::int64_t n = 0; n < batch; ++n) {
        TensorMap image;
        for (const auto& [name, t] : layer_feeds) image[name] = runtime::image_of(t, n);
        runtime::append_image(out, ref::run_graph(one, image).at(r.layers[i].tensor));
      }
      d = diff(dev_out->second, out);
    } catch (const Error& e) {
      d.note = std::string("the reference executor cannot run it alone: ") + e.what();
    }
  }
  return r;
}

}  // namespace npukit::analysis
