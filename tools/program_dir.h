// What the commands that take "model.onnx or a compiled DIR" share: the compile options, writing
// a compiled program directory, and compiling on demand.
#pragma once

#include "compiler/compiler.h"
#include "isa/manifest.h"
#include "ref/executor.h"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace npukit::tools {

struct ProgramOptions {
  std::string sa_arch = "9,8,8";
  std::uint64_t ramsize_mb = 512;
  bool allow_errata = false;
  std::vector<std::string> dispatch;
  compiler::CompileOptions compile_options() const;
};

// --sa-arch, --ramsize, --allow-errata, --dispatch.
void add_program_options(CLI::App& sub, ProgramOptions& options);

// Writes DIR/model.gml, DIR/manifest.json and the host subgraphs.
void write_program_dir(const compiler::CompileResult& result, const std::string& dir);

// `path` is either a compiled program directory (holding manifest.json), returned as is, or an
// ONNX model, compiled into `out_dir` (returned).
std::string ensure_program_dir(const std::string& path, const ProgramOptions& options,
                               const std::string& out_dir);

// --input values: NAME=FILE (.npy or ONNX TensorProto .pb), or FILE alone when the model has one
// input. Throws npukit::Error naming the spec for unknown names or unreadable files.
ref::TensorMap load_inputs(const std::vector<std::string>& specs,
                           const std::vector<isa::ManifestTensor>& model_inputs);

}  // namespace npukit::tools
