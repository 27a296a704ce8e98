#include "tools/program_dir.h"

#include "common/error.h"
#include "common/npy.h"
#include "onnx/onnx_io.h"

#include <algorithm>
#include <filesystem>
#include <iostream>

namespace npukit::tools {

namespace fs = std::filesystem;

compiler::CompileOptions ProgramOptions::compile_options() const {
  compiler::CompileOptions o;
  o.arch = isa::SaArch::parse(sa_arch);
  if (ramsize_mb == 0) fail("--ramsize must be at least 1 MB");
  o.ramsize_mb = ramsize_mb;
  o.allow_errata = allow_errata;
  o.dispatch = dispatch;
  return o;
}

void add_program_options(CLI::App& sub, ProgramOptions& o) {
  sub.add_option("--sa-arch", o.sa_arch, "systolic array ROW,COLS,N_SA: 9,4,4 | 9,8,8 | 16,1,16")
      ->capture_default_str();
  sub.add_option("--ramsize", o.ramsize_mb, "board DRAM in MB")->capture_default_str();
  sub.add_flag("--allow-errata", o.allow_errata,
               "emit programs that hit known v1.0.0 hardware errata (simulation only)");
  sub.add_option("--dispatch", o.dispatch, "also dispatch these layers' outputs (names)")
      ->delimiter(',');
}

void write_program_dir(const compiler::CompileResult& result, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create output directory '{}': {}", dir, ec.message());
  const fs::path d(dir);
  write_file_bytes((d / result.manifest.gml).string(), result.gml);
  if (result.host_before)
    onnxio::save_onnx(*result.host_before, (d / result.manifest.host_before->file).string());
  if (result.host_after)
    onnxio::save_onnx(*result.host_after, (d / result.manifest.host_after->file).string());
  isa::save_manifest(result.manifest, (d / "manifest.json").string());
}

std::string ensure_program_dir(const std::string& path, const ProgramOptions& options,
                               const std::string& out_dir) {
  if (fs::is_directory(path)) {
    if (!fs::exists(fs::path(path) / "manifest.json"))
      fail(
          "'{}' is a directory without manifest.json: give an ONNX model or a directory written "
          "by `npukit compile`",
          path);
    return path;
  }
  if (!fs::exists(path)) fail("'{}' does not exist", path);
  const ir::Graph model = onnxio::load_onnx(path);
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

}  // namespace npukit::tools
