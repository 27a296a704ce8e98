#include "tools/program_dir.h"

#include "common/error.h"
#include "common/file_io.h"
#include "common/npy.h"
#include "ir/tensor_util.h"
#include "onnx/onnx_io.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

namespace npukit::tools {

namespace fs = std::filesystem;

compiler::CompileOptions ProgramOptions::compile_options() const {
  compiler::CompileOptions o;
  o.arch = isa::SaArch::parse(sa_arch);
  if (ramsize_mb == 0) fail("--ramsize must be at least 1 MB");
  o.ramsize_mb = ramsize_mb;
  o.allow_errata = allow_errata;
  o.weight_scales = compiler::parse_weight_scales(weight_scales);
  o.dispatch = dispatch;
  return o;
}

void add_program_options(CLI::App& sub, ProgramOptions& o) {
  o.sa_arch_option = sub.add_option("--sa-arch", o.sa_arch,
                                    "systolic array ROW,COLS,N_SA: 9,4,4 | 9,8,8 | 16,1,16")
                         ->capture_default_str();
  o.ramsize_option = sub.add_option("--ramsize", o.ramsize_mb, "board DRAM in MB (1..4096)")
                         ->check(CLI::Range(1, 4096))
                         ->capture_default_str();
  sub.add_flag("--allow-errata", o.allow_errata,
               "emit programs that hit known v1.0.0 hardware errata (simulation only)");
  o.weight_scales_option =
      sub.add_option(
             "--weight-scales", o.weight_scales,
             "convs and FCs with per-channel weight scales: auto | per-tensor | per-channel "
             "(docs/quantization.md)")
          ->capture_default_str();
  sub.add_option("--dispatch", o.dispatch, "also dispatch these layers' outputs (names)")
      ->delimiter(',');
}

void add_input_shape_option(CLI::App& sub, ProgramOptions& o) {
  sub.add_option("--input-shape", o.input_shapes,
                 "NAME=1,3,320,320: the shape of an input with symbolic dimensions (ONNX models; "
                 "without it, the shape of the data given)");
}

ir::Graph load_model(const std::string& path, const ProgramOptions& options) {
  onnxio::LoadOptions load;
  for (const auto& spec : options.input_shapes) onnxio::add_input_shape(load, spec);
  ir::Graph model = onnxio::load_onnx(path, load);
  const auto symbolic = onnxio::symbolic_inputs(model);
  bool changed = false;
  // A symbolic batch alone (torch's dynamic_axes {0: "N"}): the device runs one image at a time.
  for (const auto& name : model.inputs) {
    const ir::Shape& shape = model.tensor(name).shape;
    if (shape.empty() || shape[0] >= 0 || load.input_shapes.count(name) ||
        std::find(symbolic.begin(), symbolic.end(), name) != symbolic.end())
      continue;
    ir::Shape one = shape;
    one[0] = 1;
    load.input_shapes[name] = one;
    changed = true;
  }
  for (const auto& name : symbolic) {
    auto it = options.data_shapes.find(name);
    if (it == options.data_shapes.end() && model.inputs.size() == 1)
      it = options.data_shapes.find("");
    if (it == options.data_shapes.end()) continue;
    load.input_shapes[name] =
        onnxio::shape_from_sample(model.tensor(name), it->second, options.data_what);
    changed = true;
  }
  if (!changed) return model;
  model = onnxio::load_onnx(path, load);
  for (const auto& name : symbolic)
    if (load.input_shapes.count(name))
      std::cerr << fmt::format(
          "npukit: input '{}' has symbolic dimensions; using the shape {} of {}\n", name,
          ir::shape_string(model.tensor(name).shape), options.data_what);
  return model;
}

void write_program_dir(const compiler::CompileResult& result, const std::string& dir) {
  program::save(result.artifact(), dir);
}

std::string ensure_program_dir(const std::string& path, const ProgramOptions& options,
                               const std::string& out_dir) {
  if (fs::is_directory(path)) {
    if (!fs::exists(fs::path(path) / "manifest.json"))
      fail(
          "'{}' is a directory without manifest.json: give an ONNX model or a directory written "
          "by `npukit compile`",
          path);
    // A compiled program runs only on the board it was compiled for: options that disagree are
    // an error, not silently ignored.
    const auto m = isa::load_manifest((fs::path(path) / "manifest.json").string());
    if (options.sa_arch_option && options.sa_arch_option->count() > 0 &&
        isa::SaArch::parse(options.sa_arch).str() != m.arch().str())
      fail("--sa-arch {}: '{}' was compiled for a {} array; recompile it or drop --sa-arch",
           options.sa_arch, path, m.arch().str());
    if (options.ramsize_option && options.ramsize_option->count() > 0 &&
        options.ramsize_mb != m.ramsize_mb)
      fail("--ramsize {}: '{}' was compiled for {} MB of DRAM; recompile it or drop --ramsize",
           options.ramsize_mb, path, m.ramsize_mb);
    if (options.weight_scales_option && options.weight_scales_option->count() > 0 &&
        compiler::parse_weight_scales(options.weight_scales) !=
            compiler::parse_weight_scales(m.weight_scales, "manifest weight_scales"))
      fail(
          "--weight-scales {}: '{}' was compiled with --weight-scales {}; recompile it or drop "
          "--weight-scales",
          options.weight_scales, path, m.weight_scales);
    if (!options.input_shapes.empty())
      fail(
          "--input-shape {}: '{}' was compiled with fixed shapes; give it to `npukit compile` "
          "or run the ONNX model",
          options.input_shapes[0], path);
    return path;
  }
  if (!fs::exists(path)) fail("'{}' does not exist", path);
  (void)options.compile_options();  // option errors before the (slow) import
  const ir::Graph model = load_model(path, options);
  auto result = compiler::compile(model, options.compile_options());
  for (const auto& w : result.ctx.warnings) std::cerr << "npukit: compile warning: " << w << "\n";
  write_program_dir(result, out_dir);
  return out_dir;
}

ref::TensorMap load_inputs(const std::vector<std::string>& specs,
                           const std::vector<isa::ManifestTensor>& model_inputs) {
  ref::TensorMap feeds;
  for (const auto& spec : specs) {
    std::string name, file;
    if (auto eq = spec.find('='); eq != std::string::npos) {
      name = spec.substr(0, eq);
      file = spec.substr(eq + 1);
    } else if (model_inputs.size() == 1) {
      name = model_inputs[0].name;
      file = spec;
    } else {
      fail("--input '{}': the model has {} inputs, write NAME=FILE", spec, model_inputs.size());
    }
    const bool known = std::any_of(model_inputs.begin(), model_inputs.end(),
                                   [&](const auto& in) { return in.name == name; });
    if (!known) {
      std::string names;
      for (const auto& in : model_inputs) names += (names.empty() ? "'" : "', '") + in.name;
      fail("--input '{}': the model has no input '{}' (its inputs: {}')", spec, name, names);
    }
    ir::Tensor t = npukit::onnxio::load_tensor_file(file);
    t.name = name;
    feeds[name] = std::move(t);
  }
  return feeds;
}

namespace {

std::string segment_what(const isa::Manifest& m, const runtime::SegmentStats& s) {
  if (s.index >= m.segments.size()) return "";
  const auto& seg = m.segments[s.index];
  if (!seg.is_device()) return seg.host ? seg.host->file : "";
  if (seg.layer_count < 1) return "";
  const auto first = static_cast<std::size_t>(seg.first_layer);
  const auto last = first + static_cast<std::size_t>(seg.layer_count) - 1;
  if (last >= m.layers.size()) return "";
  return fmt::format("{} layers, {}..{}", seg.layer_count, m.layers[first].name,
                     m.layers[last].name);
}

}  // namespace

std::string segment_table(const isa::Manifest& m, const std::vector<runtime::SegmentStats>& s,
                          std::int64_t images) {
  const double n = static_cast<double>(std::max<std::int64_t>(images, 1));
  std::string out =
      fmt::format("segments ({:.1f} % of the model's MACs on the device), per image:\n",
                  100.0 * m.device_mac_share());
  for (const auto& seg : s) {
    const std::string cost =
        seg.device ? fmt::format("{:>12.0f} cycles", static_cast<double>(seg.cycles) / n)
                   : fmt::format("{:>9.3f} ms host", 1e3 * seg.host_seconds / n);
    out += fmt::format("  [{}] {:<6} {}  {:>10.0f} B to device  {:>10.0f} B from device  {}\n",
                       seg.index, seg.device ? "device" : "host", cost,
                       static_cast<double>(seg.bytes_to_device) / n,
                       static_cast<double>(seg.bytes_from_device) / n, segment_what(m, seg));
  }
  return out;
}

void write_stats_json(const std::string& path, const isa::Manifest& m,
                      const std::vector<runtime::SegmentStats>& s,
                      const std::vector<runtime::LayerCycles>& layers, std::int64_t images) {
  const double n = static_cast<double>(std::max<std::int64_t>(images, 1));
  nlohmann::json j;
  j["images"] = images;
  double cycles = 0;
  nlohmann::json segs = nlohmann::json::array();
  for (const auto& seg : s) {
    nlohmann::json js{{"index", seg.index},
                      {"where", seg.device ? "device" : "host"},
                      {"bytes_to_device", static_cast<double>(seg.bytes_to_device) / n},
                      {"bytes_from_device", static_cast<double>(seg.bytes_from_device) / n},
                      {"what", segment_what(m, seg)}};
    if (seg.device) {
      js["cycles"] = static_cast<double>(seg.cycles) / n;
      cycles += static_cast<double>(seg.cycles) / n;
    } else {
      js["host_seconds"] = seg.host_seconds / n;
    }
    segs.push_back(js);
  }
  j["device_cycles"] = cycles;
  j["model_macs"] = m.model_macs;
  j["device_macs"] = m.device_macs;
  j["device_mac_share"] = m.device_mac_share();
  j["segments"] = segs;
  nlohmann::json lj = nlohmann::json::array();
  for (const auto& l : layers)
    lj.push_back({{"name", l.name},
                  {"opcode", l.opcode},
                  {"cycles", l.cycles},
                  {"model_seconds", l.model_seconds}});
  j["layers"] = lj;
  std::ofstream f(path);
  f << j.dump(2) << "\n";
  if (!f) fail("cannot write '{}'", path);
}

}  // namespace npukit::tools
