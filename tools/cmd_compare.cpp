// npukit compare model.onnx|DIR --input NAME=FILE ... [--json] [--sa-arch ...]
// Runs a model on the device model with every device layer's output dispatched back, and the
// compiler's lowered graph (npukit.gati ops, docs/ref-ops.md) on the reference executor, and
// reports per device layer how many int8 values differ and by how much. Layers are listed in the
// order the device runs them, so a mismatch shows up at the first layer that computes it.
// Exit status 1 when any value differs.
#include "common/error.h"
#include "common/file_io.h"
#include "compiler/compiler.h"
#include "ir/tensor_util.h"
#include "isa/manifest.h"
#include "onnx/onnx_io.h"
#include "ref/executor.h"
#include "runtime/session.h"
#include "tools/command_registry.h"
#include "tools/program_dir.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <random>
#include <set>

namespace {

namespace fs = std::filesystem;
using npukit::fail;
using npukit::ref::TensorMap;
namespace ir = npukit::ir;

struct CompareArgs {
  std::string model;
  std::string onnx;  // for a compiled DIR: the ONNX model it was compiled from
  std::vector<std::string> inputs;
  bool json = false;
  std::string stats_json;
  std::string keep_dir;  // keep the compiled all-layers program here
  npukit::tools::ProgramOptions program;
};

// A directory removed when the comparison ends (the compiled all-layers program).
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() / fmt::format("npukit-compare-{:08x}", rd());
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// NAME=FILE pairs; a bare FILE is allowed when the model has exactly one input.
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

// "[n, c, h, w]" of flat index i in shape.
std::vector<std::int64_t> unravel(std::int64_t i, const ir::Shape& shape) {
  std::vector<std::int64_t> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    const std::int64_t n = std::max<std::int64_t>(shape[d], 1);
    idx[d] = i % n;
    i /= n;
  }
  return idx;
}

struct Diff {
  std::string layer, opcode, tensor;
  ir::Shape shape;
  std::int64_t elements = 0;
  std::int64_t differ = 0;
  double max_abs_diff = 0;
  std::vector<std::int64_t> first_index;  // of the first differing value
  double first_device = 0, first_reference = 0;
  std::string note;  // why a tensor was not compared
  bool compared = false;
  bool ok() const { return !compared || differ == 0; }  // differ -1: could not be compared
};

Diff diff(const ir::Tensor& device, const ir::Tensor& reference) {
  Diff d;
  d.shape = reference.shape;
  const auto a = values_of(device);
  const auto b = values_of(reference);
  if (a.size() != b.size()) {
    d.compared = true;
    d.note = fmt::format("device gave {} values, the reference {}", a.size(), b.size());
    d.differ = static_cast<std::int64_t>(std::max(a.size(), b.size()));
    return d;
  }
  d.compared = true;
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

bool manifest_has_input(const npukit::isa::Manifest& m, const std::string& name) {
  const auto inputs = m.device_inputs();
  return std::any_of(inputs.begin(), inputs.end(), [&](const auto& t) { return t.name == name; });
}

std::string index_string(const std::vector<std::int64_t>& idx) {
  std::string s = "[";
  for (std::size_t i = 0; i < idx.size(); ++i) s += (i ? ", " : "") + std::to_string(idx[i]);
  return s + "]";
}

void run(const CompareArgs& a) {
  npukit::compiler::CompileOptions options = a.program.compile_options();
  ir::Graph model;
  std::string program_dir;
  std::unique_ptr<TempDir> temp;
  std::unique_ptr<npukit::PendingDirectory> kept;
  std::vector<std::string> dispatch = options.dispatch;

  if (fs::is_directory(a.model)) {
    // A compiled program: its manifest gives the options; the ONNX model it came from gives the
    // lowered graph. Only the layers it dispatches can be compared.
    if (a.onnx.empty())
      fail(
          "'{}' is a compiled directory: also give the ONNX model it was compiled from with "
          "--onnx MODEL.onnx (the reference needs the lowered graph), or pass the ONNX model "
          "instead of the directory to compare every layer",
          a.model);
    program_dir = a.model;
    const auto m = npukit::isa::load_manifest((fs::path(a.model) / "manifest.json").string());
    options.arch = m.arch();
    options.ramsize_mb = m.ramsize_mb;
    options.allow_errata = m.allow_errata;
    dispatch.clear();
    for (const auto& out : m.device_outputs()) dispatch.push_back(out.name);
    options.dispatch = dispatch;
    model = npukit::onnxio::load_onnx(a.onnx);
  } else {
    if (!fs::exists(a.model)) fail("'{}' does not exist", a.model);
    model = npukit::onnxio::load_onnx(a.model);
    // Every device layer's int8 output dispatched back, so each can be compared. Named by tensor,
    // not layer: dispatching a layer by name asks for its pre-activation value and so unfuses its
    // tail, while tensor names keep the program the device normally runs. int32 accumulant
    // pieces of split kernels are not dispatchable as int8 and stay on the device.
    const auto lowered = npukit::compiler::lower(model, options);
    for (const auto& n : lowered.graph.nodes)
      if (npukit::compiler::is_gati(n))
        for (const auto& o : n.outputs)
          if (const ir::Tensor* t = lowered.graph.find(o); t && t->dtype == ir::DType::kInt8)
            dispatch.push_back(o);
    options.dispatch = dispatch;
    const auto compiled = npukit::compiler::compile(model, options);
    if (!a.keep_dir.empty()) {
      // Moved into place at the end, only when the whole comparison ran.
      kept = std::make_unique<npukit::PendingDirectory>(a.keep_dir);
      program_dir = kept->path();
    } else {
      temp = std::make_unique<TempDir>();
      program_dir = temp->path().string();
    }
    npukit::tools::write_program_dir(compiled, program_dir);
  }

  const auto ctx = npukit::compiler::lower(model, options);
  npukit::runtime::SessionOptions so;
  so.warnings = &std::cerr;
  npukit::runtime::Session session(program_dir, so);
  const auto& manifest = session.manifest();
  const TensorMap feeds = npukit::tools::load_inputs(a.inputs, manifest.inputs);

  const auto device = session.run(feeds);
  const std::int64_t images =
      feeds.empty() || feeds.begin()->second.shape.empty() ? 1 : feeds.begin()->second.shape[0];
  if (!a.stats_json.empty())
    npukit::tools::write_stats_json(a.stats_json, manifest, device.segments, device.layers, images);

  // The reference, image by image as the device runs them, keeping every device tensor.
  std::set<std::string> wanted;
  for (const auto& out : manifest.device_outputs()) wanted.insert(out.name);
  for (const auto& in : manifest.device_inputs()) wanted.insert(in.name);
  for (const auto& l : manifest.layers)
    for (const auto& o : l.outputs) wanted.insert(o);
  std::int64_t batch = 1;
  for (const auto& [name, t] : feeds) batch = t.shape.empty() ? 1 : t.shape[0];
  TensorMap reference, reference_outputs;
  // When the reference executor cannot run a node, the layers before it are still compared and
  // the failure is reported at that node (its layer, when it is a device layer).
  std::string reference_error, reference_failed_node;
  for (std::int64_t n = 0; n < batch && reference_error.empty(); ++n) {
    TensorMap image;
    for (const auto& [name, t] : feeds) image[name] = npukit::runtime::image_of(t, n);
    TensorMap seen;
    std::size_t done = 0;
    npukit::ref::RunOptions ro;
    ro.after_node = [&](const ir::Node& node, const TensorMap& values) {
      ++done;
      for (const auto& o : node.outputs)
        if (wanted.count(o))
          if (auto it = values.find(o); it != values.end()) seen[o] = it->second;
    };
    TensorMap outs;
    try {
      outs = npukit::ref::run_graph(ctx.graph, image, ro);
    } catch (const npukit::Error& e) {
      reference_error = e.what();
      if (done < ctx.graph.nodes.size()) reference_failed_node = ctx.graph.nodes[done].name;
      if (n > 0) break;  // keep only complete batches
    }
    for (auto& [name, t] : seen) npukit::runtime::append_image(reference[name], t);
    for (auto& [name, t] : outs) npukit::runtime::append_image(reference_outputs[name], t);
  }

  std::vector<Diff> layers;
  for (const auto& l : manifest.layers) {
    for (const auto& o : l.outputs) {
      Diff d;
      auto dev = device.device_outputs.find(o);
      auto ref = reference.find(o);
      if (!reference_error.empty() && (l.name == reference_failed_node || ref == reference.end())) {
        d.note = "the reference executor did not compute it: " + reference_error;
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
      layers.push_back(std::move(d));
    }
  }
  std::vector<Diff> outputs;
  for (const auto& out : manifest.outputs) {
    Diff d;
    auto dev = device.outputs.find(out.name);
    auto ref = reference_outputs.find(out.name);
    if (dev == device.outputs.end() || ref == reference_outputs.end()) {
      d.note = reference_error.empty() ? "missing" : "the reference executor stopped";
      d.compared = true;
      d.differ = -1;  // unknown
    } else {
      d = diff(dev->second, ref->second);
    }
    d.tensor = out.name;
    outputs.push_back(std::move(d));
  }

  // Each device layer alone: the reference runs just that node from the device's own values of
  // its inputs, so a layer is checked even when an earlier one differs or the reference cannot
  // run an earlier node (the chained comparison above stops being informative there).
  std::vector<Diff> alone(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    Diff& d = alone[i];
    const auto node_it = std::find_if(ctx.graph.nodes.begin(), ctx.graph.nodes.end(),
                                      [&](const ir::Node& n) { return n.name == layers[i].layer; });
    auto dev_out = device.device_outputs.find(layers[i].tensor);
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
      else if (auto r = reference.find(in); r != reference.end() &&
                                            r->second.dtype == ir::DType::kInt8 &&
                                            manifest_has_input(manifest, in))
        layer_feeds[in] = r->second;
      else
        missing = in;
    }
    if (!missing.empty()) {
      d.note = fmt::format("input '{}' is not dispatched (int32 accumulants)", missing);
      continue;
    }
    try {
      const ir::Graph one = npukit::compiler::extract_subgraph(ctx.graph, {node_it->name},
                                                               {layers[i].tensor}, "layer");
      ir::Tensor out;  // image by image, as the graph declares batch 1
      for (std::int64_t n = 0; n < batch; ++n) {
        TensorMap image;
        for (const auto& [name, t] : layer_feeds) image[name] = npukit::runtime::image_of(t, n);
        npukit::runtime::append_image(out, npukit::ref::run_graph(one, image).at(layers[i].tensor));
      }
      d = diff(dev_out->second, out);
    } catch (const npukit::Error& e) {
      d.note = std::string("the reference executor cannot run it alone: ") + e.what();
    }
  }

  const Diff* first_bad = nullptr;
  for (const auto& d : layers)
    if (!d.ok()) {
      first_bad = &d;
      break;
    }
  bool all_ok = first_bad == nullptr;
  for (const auto& d : outputs) all_ok = all_ok && d.ok();
  const Diff* first_bad_alone = nullptr;
  std::int64_t compared_alone = 0;
  for (std::size_t i = 0; i < alone.size(); ++i) {
    compared_alone += alone[i].compared ? 1 : 0;
    if (!alone[i].ok() && !first_bad_alone) first_bad_alone = &layers[i];
  }
  all_ok = all_ok && first_bad_alone == nullptr;
  std::int64_t compared = 0;
  for (const auto& d : layers) compared += d.compared && d.differ >= 0 ? 1 : 0;

  if (a.json) {
    auto to_json = [](const Diff& d) {
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
    j["model"] = a.model;
    j["sa_arch"] = manifest.sa_arch;
    j["batch"] = batch;
    j["pass"] = all_ok;
    j["layers_compared"] = compared;
    j["first_failing_layer"] = first_bad ? nlohmann::json(first_bad->layer) : nlohmann::json();
    if (!reference_error.empty()) j["reference_error"] = reference_error;
    j["layers_compared_alone"] = compared_alone;
    j["first_failing_layer_alone"] =
        first_bad_alone ? nlohmann::json(first_bad_alone->layer) : nlohmann::json();
    j["layers"] = nlohmann::json::array();
    for (std::size_t i = 0; i < layers.size(); ++i) {
      auto lj = to_json(layers[i]);
      lj["alone"] = to_json(alone[i]);
      j["layers"].push_back(lj);
    }
    j["outputs"] = nlohmann::json::array();
    for (const auto& d : outputs) j["outputs"].push_back(to_json(d));
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format("{} on sa-arch {}, batch {}: device model vs reference executor\n",
                             a.model, manifest.sa_arch, batch);
    // "alone": values differing when the reference runs the layer by itself from the device's
    // own inputs ("-" when that is not possible).
    std::cout << fmt::format("{:<4} {:<36} {:<8} {:<18} {:>9} {:>9} {:>8} {:>7}\n", "#", "layer",
                             "opcode", "shape", "values", "differ", "max|d|", "alone");
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const Diff& d = layers[i];
      const std::string a1 = alone[i].compared ? std::to_string(alone[i].differ) : "-";
      const bool bad = !d.ok() || !alone[i].ok();
      if (!d.compared) {
        std::cout << fmt::format("{:<4} {:<36} {:<8} {:<18} {:>9} {:>9} {:>8} {:>7}{}  ({})\n",
                                 i + 1, d.layer, d.opcode, "", "-", "-", "-", a1,
                                 bad ? "  MISMATCH" : "", d.note);
      } else if (d.differ < 0) {
        std::cout << fmt::format("{:<4} {:<36} {:<8} {:<18} {:>9} {:>9} {:>8} {:>7}  {}\n", i + 1,
                                 d.layer, d.opcode, "", "?", "?", "?", a1,
                                 bad && alone[i].compared && !alone[i].ok()
                                     ? "MISMATCH (alone)"
                                     : "NOT COMPARED in the chain");
      } else {
        std::cout << fmt::format("{:<4} {:<36} {:<8} {:<18} {:>9} {:>9} {:>8} {:>7}{}\n", i + 1,
                                 d.layer, d.opcode, ir::shape_string(d.shape), d.elements, d.differ,
                                 d.max_abs_diff, a1, bad ? "  MISMATCH" : "");
      }
    }
    for (const auto& d : outputs)
      if (d.differ < 0)
        std::cout << fmt::format("output {:<44} {:<18} {:>9} {:>9} {:>8}  NOT COMPARED ({})\n",
                                 d.tensor, "", "?", "?", "?", d.note);
      else
        std::cout << fmt::format("output {:<44} {:<18} {:>9} {:>9} {:>8}{}\n", d.tensor,
                                 ir::shape_string(d.shape), d.elements, d.differ, d.max_abs_diff,
                                 d.ok() ? "" : "  MISMATCH");
    if (first_bad) {
      std::cout << fmt::format("first {}: layer '{}' ({}), tensor '{}'",
                               first_bad->differ < 0 ? "failure" : "mismatch", first_bad->layer,
                               first_bad->opcode, first_bad->tensor);
      if (!first_bad->first_index.empty())
        std::cout << fmt::format(" at {}: device {}, reference {}",
                                 index_string(first_bad->first_index), first_bad->first_device,
                                 first_bad->first_reference);
      if (!first_bad->note.empty()) std::cout << " (" << first_bad->note << ")";
      std::cout << "\n";
    }
    if (first_bad_alone)
      std::cout << fmt::format("first mismatch of a layer run alone: '{}' ({})\n",
                               first_bad_alone->layer, first_bad_alone->opcode);
    std::cout << fmt::format("{}: {} of {} layer outputs compared ({} alone){}\n",
                             all_ok ? "PASS" : "FAIL", compared, layers.size(), compared_alone,
                             all_ok ? ", all bit-exact" : "");
    std::cout << npukit::tools::segment_table(manifest, device.segments, images);
  }
  if (kept) kept->commit();  // kept on a mismatch too: that is when it is wanted
  if (!all_ok) npukit::tools::set_exit_status(1);
}

const npukit::tools::CommandRegistrar kReg{
    "compare",
    "Run every device layer on the device model and the reference executor; report differences",
    [](CLI::App& sub) {
      auto args = std::make_shared<CompareArgs>();
      sub.add_option("model", args->model,
                     "int8 ONNX model, or a directory from `npukit compile` (then also --onnx)")
          ->required();
      sub.add_option(
             "-i,--input", args->inputs,
             "NAME=FILE input (.npy or ONNX TensorProto .pb); FILE alone for a single input")
          ->required();
      sub.add_option("--onnx", args->onnx,
                     "with a compiled DIR: the ONNX model it was compiled from");
      sub.add_flag("--json", args->json, "print the per-layer results as JSON");
      sub.add_option("--stats-json", args->stats_json,
                     "write per-segment (where, cycles or host time, bytes each way) and "
                     "per-layer stats of the device run as JSON");
      sub.add_option("--keep-program", args->keep_dir,
                     "write the all-layers-dispatched program here instead of a temporary dir");
      npukit::tools::add_program_options(sub, args->program);
      sub.callback([args] { run(*args); });
    }};

}  // namespace
