// npukit compare model.onnx|DIR --input NAME=FILE ... [--json] [--sa-arch ...]
// Runs a model on the device model with every device layer's output dispatched back, and the
// compiler's lowered graph (npukit.gati ops, docs/ref-ops.md) on the reference executor, and
// reports per device layer how many int8 values differ and by how much. Layers are listed in the
// order the device runs them, so a mismatch shows up at the first layer that computes it.
// Exit status 1 when any value differs. Options and printing only: the comparison is
// analysis::compare (analysis/compare.h).
#include "analysis/compare.h"
#include "common/error.h"
#include "common/file_io.h"
#include "compiler/compiler.h"
#include "ir/tensor_util.h"
#include "isa/manifest.h"
#include "onnx/onnx_io.h"
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
    options = npukit::analysis::options_of(
        npukit::isa::load_manifest((fs::path(a.model) / "manifest.json").string()), options);
    model = npukit::onnxio::load_onnx(a.onnx);
  } else {
    if (!fs::exists(a.model)) fail("'{}' does not exist", a.model);
    model = npukit::onnxio::load_onnx(a.model);
    options = npukit::analysis::dispatch_every_layer(model, options);
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

  npukit::runtime::SessionOptions so;
  so.warnings = &std::cerr;
  npukit::runtime::Session session(program_dir, so);
  const auto& manifest = session.manifest();
  const TensorMap feeds = npukit::tools::load_inputs(a.inputs, manifest.inputs);
  const auto r = npukit::analysis::compare(model, options, session, feeds);
  const std::int64_t images =
      feeds.empty() || feeds.begin()->second.shape.empty() ? 1 : feeds.begin()->second.shape[0];
  if (!a.stats_json.empty())
    npukit::tools::write_stats_json(a.stats_json, manifest, r.device.segments, r.device.layers,
                                    images);
  const bool all_ok = r.pass();

  if (a.json) {
    std::cout << r.to_json(a.model).dump(2) << "\n";
  } else {
    std::cout << fmt::format("{} on sa-arch {}, batch {}: device model vs reference executor\n",
                             a.model, r.sa_arch, r.batch);
    // "alone": values differing when the reference runs the layer by itself from the device's
    // own inputs ("-" when that is not possible).
    std::cout << fmt::format("{:<4} {:<36} {:<8} {:<18} {:>9} {:>9} {:>8} {:>7}\n", "#", "layer",
                             "opcode", "shape", "values", "differ", "max|d|", "alone");
    for (std::size_t i = 0; i < r.layers.size(); ++i) {
      const auto& d = r.layers[i];
      const auto& alone = r.alone[i];
      const std::string a1 = alone.compared ? std::to_string(alone.differ) : "-";
      const bool bad = !d.ok() || !alone.ok();
      if (!d.compared) {
        std::cout << fmt::format("{:<4} {:<36} {:<8} {:<18} {:>9} {:>9} {:>8} {:>7}{}  ({})\n",
                                 i + 1, d.layer, d.opcode, "", "-", "-", "-", a1,
                                 bad ? "  MISMATCH" : "", d.note);
      } else if (d.differ < 0) {
        std::cout << fmt::format("{:<4} {:<36} {:<8} {:<18} {:>9} {:>9} {:>8} {:>7}  {}\n", i + 1,
                                 d.layer, d.opcode, "", "?", "?", "?", a1,
                                 bad && alone.compared && !alone.ok()
                                     ? "MISMATCH (alone)"
                                     : "NOT COMPARED in the chain");
      } else {
        std::cout << fmt::format("{:<4} {:<36} {:<8} {:<18} {:>9} {:>9} {:>8} {:>7}{}\n", i + 1,
                                 d.layer, d.opcode, ir::shape_string(d.shape), d.elements, d.differ,
                                 d.max_abs_diff, a1, bad ? "  MISMATCH" : "");
      }
    }
    for (const auto& d : r.outputs)
      if (d.differ < 0)
        std::cout << fmt::format("output {:<44} {:<18} {:>9} {:>9} {:>8}  NOT COMPARED ({})\n",
                                 d.tensor, "", "?", "?", "?", d.note);
      else
        std::cout << fmt::format("output {:<44} {:<18} {:>9} {:>9} {:>8}{}\n", d.tensor,
                                 ir::shape_string(d.shape), d.elements, d.differ, d.max_abs_diff,
                                 d.ok() ? "" : "  MISMATCH");
    if (const auto* first_bad = r.first_failing()) {
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
    if (const auto* first_bad_alone = r.first_failing_alone())
      std::cout << fmt::format("first mismatch of a layer run alone: '{}' ({})\n",
                               first_bad_alone->layer, first_bad_alone->opcode);
    std::cout << fmt::format("{}: {} of {} layer outputs compared ({} alone){}\n",
                             all_ok ? "PASS" : "FAIL", r.layers_compared(), r.layers.size(),
                             r.layers_compared_alone(), all_ok ? ", all bit-exact" : "");
    std::cout << npukit::tools::segment_table(manifest, r.device.segments, images);
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
