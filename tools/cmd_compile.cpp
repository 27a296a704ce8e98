// npukit compile model.onnx -o DIR [--sa-arch 9,8,8] [--dispatch L1,L2] [--ramsize MB]
//                                 [--allow-errata] [--explain] [--dump-after PASS,...]
// Writes DIR/model.gml, DIR/manifest.json and DIR/segmentN_host.onnx for every host segment
// (docs/compiler.md); prints the share of the model's MACs that run on the device.
#include "common/error.h"
#include "compiler/compiler.h"
#include "compiler/errata_passes.h"
#include "device/device.h"
#include "device/timing.h"
#include "isa/dwp.h"
#include "onnx/onnx_io.h"
#include "tools/command_registry.h"
#include "tools/program_dir.h"

#include <fmt/core.h>

#include <iostream>
#include <memory>

namespace {

struct CompileArgs {
  std::string model, out_dir;
  npukit::tools::ProgramOptions program;
  std::vector<std::string> input_shapes;
  bool explain = false;
  std::vector<std::string> dump_after;
};

// Cycles of each device layer on the device model (timing does not depend on the data, so the
// inputs are zeros); empty when the program does not run (a refused model never gets here).
// Every device layer's cycles on the device model, each device segment started as the runtime
// starts it (zeroth instruction at its range when there are several, zero inputs: timing does not
// depend on the data).
std::vector<std::uint64_t> layer_cycles(const npukit::compiler::CompileResult& r) {
  try {
    npukit::device::DeviceConfig cfg;
    cfg.arch = r.program.arch;
    npukit::device::Device dev(cfg);
    const auto& m = r.manifest;
    bool first = true;
    std::vector<std::uint64_t> cycles;
    for (const auto& seg : m.segments) {
      if (!seg.is_device()) continue;
      npukit::Bytes stream = first ? r.gml : npukit::Bytes{};
      first = false;
      if (m.device_segment_count() > 1) {
        npukit::isa::Zeroth z;
        z.start = seg.zeroth_start();
        z.end = seg.zeroth_end();
        const auto word = z.encode();
        npukit::isa::append_dwp_packet(stream, 0, npukit::ByteSpan(word.data(), word.size()));
      }
      for (const auto& in : seg.device_inputs) {
        const auto& t = r.program.tensors.at(in.name);
        npukit::isa::append_dwp_packet(stream, t.address, npukit::Bytes(t.bytes, 0));
      }
      npukit::isa::append_dwp_start(stream);
      dev.receive_dwp(stream);
      for (const auto& l : dev.stats().layers) cycles.push_back(l.timing.cycles);  // this run's
    }
    return cycles;
  } catch (const npukit::Error&) {
    return {};
  }
}

void run(const CompileArgs& a) {
  if (a.program.ramsize_mb == 0) npukit::fail("--ramsize must be at least 1 MB");
  npukit::tools::ProgramOptions load = a.program;
  load.input_shapes = a.input_shapes;
  const npukit::ir::Graph model = npukit::tools::load_model(a.model, load);
  auto options = a.program.compile_options();
  options.dump_after = a.dump_after;
  options.dump_to = &std::cout;
  const auto result = npukit::compiler::compile(model, options);
  if (a.explain) {
    std::cout << npukit::compiler::explain(result);
    const auto timer = [&](const std::vector<npukit::isa::Instruction>& ins) {
      npukit::device::timing::LayerInput in;
      in.arch = result.program.arch;
      in.mega = &ins.at(0);
      in.output = &ins.at(1);
      in.tail =
          ins.size() > 2 && ins[2].opcode() == npukit::isa::Opcode::TailBlock ? &ins[2] : nullptr;
      return npukit::device::timing::time_layer(in).cycles;
    };
    std::cout << npukit::compiler::explain_errata(result, layer_cycles(result), timer);
  }
  std::cout << npukit::compiler::mac_share_line(result.manifest) << "\n";
  for (const auto& w : result.ctx.warnings) std::cerr << "npukit compile: warning: " << w << "\n";
  if (a.out_dir.empty()) {
    if (!a.explain && a.dump_after.empty())
      npukit::fail(
          "give an output directory with -o DIR (or --explain / --dump-after to only print)");
    return;
  }
  npukit::tools::write_program_dir(result, a.out_dir);
  std::cout << fmt::format(
      "compiled {}: {} device layers, {} instructions, {} bytes of GML, {} bytes of DRAM -> {}\n",
      a.model, result.program.layers.size(), result.program.instructions.size(), result.gml.size(),
      result.program.dram_end, a.out_dir);
}

const npukit::tools::CommandRegistrar kReg{
    "compile", "Compile an int8 ONNX model into a Gati program (GML + manifest)",
    [](CLI::App& sub) {
      auto args = std::make_shared<CompileArgs>();
      sub.add_option("model", args->model, "ONNX model (int8 QOperator or QDQ)")->required();
      sub.add_option("-o,--output", args->out_dir,
                     "output directory for model.gml, manifest.json and host subgraphs");
      npukit::tools::add_program_options(sub, args->program);
      sub.add_option("--input-shape", args->input_shapes,
                     "NAME=1,3,320,320: the shape of an input with symbolic dimensions");
      sub.add_flag("--explain", args->explain,
                   "print each layer's placement and why, its instructions and DRAM footprint");
      sub.add_option("--dump-after", args->dump_after,
                     "print the graph after these passes (compiler/passes.h names, or all), like "
                     "LLVM's -print-after")
          ->delimiter(',');
      sub.callback([args] { run(*args); });
    }};

}  // namespace
