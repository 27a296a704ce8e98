// What the commands that take "model.onnx or a compiled DIR" share: the compile options, writing
// a compiled program directory, and compiling on demand.
#pragma once

#include "compiler/compiler.h"
#include "isa/manifest.h"
#include "ref/executor.h"
#include "runtime/session.h"

#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <vector>

namespace npukit::tools {

struct ProgramOptions {
  std::string sa_arch = "9,8,8";
  std::uint64_t ramsize_mb = 512;
  bool allow_errata = false;
  std::string weight_scales = "auto";  // --weight-scales (compiler::WeightScales)
  std::vector<std::string> dispatch;
  // Set by add_program_options: whether the user gave --sa-arch / --ramsize (a compiled
  // directory must then match them).
  const CLI::Option* sa_arch_option = nullptr;
  const CLI::Option* ramsize_option = nullptr;
  const CLI::Option* weight_scales_option = nullptr;
  // --input-shape NAME=1,3,320,320 (add_input_shape_option), for an ONNX model only.
  std::vector<std::string> input_shapes;
  // The shapes of the data the command feeds, by input name ("" = the model's only input): an
  // input still symbolic after --input-shape takes its shape from them (shape_from_sample).
  std::map<std::string, ir::Shape> data_shapes;
  std::string data_what = "--input";  // named in errors about data_shapes
  compiler::CompileOptions compile_options() const;
};

// --sa-arch, --ramsize, --allow-errata, --dispatch.
void add_program_options(CLI::App& sub, ProgramOptions& options);

// --input-shape NAME=1,3,320,320 (repeatable; NAME= may be left out for a one-input model).
void add_input_shape_option(CLI::App& sub, ProgramOptions& options);

// Loads an ONNX model with options.input_shapes, then gives inputs that are still symbolic the
// shape of options.data_shapes (docs/import.md, "Input shapes").
ir::Graph load_model(const std::string& path, const ProgramOptions& options);

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

// The per-segment report of run/eval/compare: where each segment ran, its device cycles or host
// time, and the bytes moved each way; `images` divides the sums into per-image figures.
std::string segment_table(const isa::Manifest& m, const std::vector<runtime::SegmentStats>& s,
                          std::int64_t images);

// --stats-json: {"images", "device_cycles", "device_mac_share", "segments": [{"index", "where",
// "cycles" | "host_seconds", "bytes_to_device", "bytes_from_device", ...}], "layers": [{"name",
// "opcode", "cycles", "model_seconds"}]}, per image. model_seconds is what the in-process device
// model took for the layer on this host (0 over a transport to a board).
void write_stats_json(const std::string& path, const isa::Manifest& m,
                      const std::vector<runtime::SegmentStats>& s,
                      const std::vector<runtime::LayerCycles>& layers, std::int64_t images);

}  // namespace npukit::tools
