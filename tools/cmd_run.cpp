// npukit run model.onnx|DIR --input NAME=FILE.npy ... --output-dir OUT
// Runs a model end to end the way the board's host does: host prefix on the reference executor,
// the device part on a device (the in-process model, or one served over TCP), the host suffix.
#include "common/error.h"
#include "common/file_io.h"
#include "isa/arch.h"
#include "onnx/onnx_io.h"
#include "runtime/session.h"
#include "tools/command_registry.h"
#include "tools/program_dir.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

namespace {

namespace fs = std::filesystem;
using npukit::fail;

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::string output_dir;
  std::string transport = "inproc";
  std::string stats_json;
  npukit::tools::ProgramOptions program;
};

std::string safe_file_name(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') c = '_';
  return s;
}

void run(const RunArgs& a) {
  // Everything is written under temporary names and moved into place only when the whole run
  // succeeded: a bad input or a failing --stats-json leaves nothing behind.
  npukit::PendingDirectory out(a.output_dir);
  npukit::PendingOutputs stats;
  if (!a.stats_json.empty()) npukit::check_output_path(a.stats_json, "--stats-json");
  // A model with symbolic dimensions takes the shapes of the --input files (unless --input-shape).
  npukit::tools::ProgramOptions program = a.program;
  for (const auto& spec : a.inputs) {
    const auto eq = spec.find('=');
    const std::string name = eq == std::string::npos ? "" : spec.substr(0, eq);
    const std::string file = eq == std::string::npos ? spec : spec.substr(eq + 1);
    if (!fs::is_directory(a.model) && fs::exists(file))
      program.data_shapes[name] = npukit::onnxio::load_tensor_file(file).shape;
  }
  const std::string program_dir = npukit::tools::ensure_program_dir(
      a.model, program, (fs::path(out.path()) / "program").string());
  npukit::runtime::SessionOptions so;
  so.transport = a.transport;
  so.warnings = &std::cerr;
  npukit::runtime::Session session(program_dir, so);
  auto feeds = npukit::tools::load_inputs(a.inputs, session.manifest().inputs);
  auto result = session.run(feeds);

  std::vector<std::string> written;
  for (const auto& [name, t] : result.outputs) {
    const std::string file = safe_file_name(name) + ".npy";
    npukit::onnxio::save_tensor_npy(t, (fs::path(out.path()) / file).string());
    written.push_back(
        fmt::format("output {} -> {}\n", name, (fs::path(a.output_dir) / file).string()));
  }
  if (!result.layers.empty()) {
    std::cout << "device cycles (last image):\n";
    std::uint64_t total = 0;
    for (const auto& l : result.layers) {
      std::cout << fmt::format("  {:<32} {:<12} {:>12}\n", l.name, l.opcode, l.cycles);
      total += l.cycles;
    }
    const double clock_hz = static_cast<double>(npukit::isa::kClockHz);
    std::cout << fmt::format("  {:<45} {:>12}  ({:.3f} ms at {:g} MHz)\n", "total", total,
                             1e3 * static_cast<double>(total) / clock_hz, clock_hz / 1e6);
  }
  std::cout << npukit::tools::segment_table(
      session.manifest(), result.segments,
      feeds.begin()->second.shape.empty() ? 1 : feeds.begin()->second.shape[0]);
  if (!a.stats_json.empty()) {
    // Written beside the outputs first, then staged under its own name with them.
    const std::string scratch = (fs::path(out.path()) / ".stats.json").string();
    npukit::tools::write_stats_json(
        scratch, session.manifest(), result.segments, result.layers,
        feeds.begin()->second.shape.empty() ? 1 : feeds.begin()->second.shape[0]);
    stats.write(a.stats_json, npukit::read_file_bytes(scratch));
    fs::remove(scratch);
  }
  out.commit();
  stats.commit();
  for (const auto& line : written) std::cout << line;
}

const npukit::tools::CommandRegistrar kReg{
    "run", "Run a model (ONNX or compiled DIR) end to end on a Gati device", [](CLI::App& sub) {
      auto args = std::make_shared<RunArgs>();
      sub.add_option("model", args->model, "int8 ONNX model, or a directory from `npukit compile`")
          ->required();
      sub.add_option(
             "-i,--input", args->inputs,
             "NAME=FILE input (.npy or ONNX TensorProto .pb); FILE alone for a single input")
          ->required();
      sub.add_option("-o,--output-dir", args->output_dir, "where outputs are written as NAME.npy")
          ->required();
      sub.add_option("--transport", args->transport,
                     "inproc (device model in this process) or tcp://HOST:PORT (npukit serve)")
          ->capture_default_str();
      sub.add_option("--stats-json", args->stats_json,
                     "write per-segment (where, cycles or host time, bytes each way) and per-layer "
                     "stats as JSON");
      npukit::tools::add_program_options(sub, args->program);
      npukit::tools::add_input_shape_option(sub, args->program);
      sub.callback([args] { run(*args); });
    }};

}  // namespace
