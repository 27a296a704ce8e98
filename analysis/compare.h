// Layer-by-layer comparison of the device model with the reference executor (what `npukit
// compare` and npukit.compare() report). The program runs with every device layer's int8 output
// dispatched back; the compiler's lowered graph (npukit.gati ops, docs/ref-ops.md) runs on the
// reference executor image by image, and each device layer is compared twice: in the chain (the
// reference's own values all the way) and alone (the reference runs just that node from the
// device's own values of its inputs), so a mismatch shows up at the first layer that computes
// it even when an earlier one differs.
#pragma once

#include "compiler/compiler.h"
#include "ir/graph.h"
#include "program/program.h"
#include "ref/executor.h"
#include "runtime/session.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace npukit::analysis {

struct TensorDiff {
  std::string layer, opcode, tensor;  // layer and opcode empty for model outputs
  ir::Shape shape;
  std::int64_t elements = 0;
  std::int64_t differ = 0;  // -1: could not be compared
  double max_abs_diff = 0;
  std::vector<std::int64_t> first_index;  // of the first differing value
  double first_device = 0, first_reference = 0;
  std::string note;  // why a tensor was not compared
  bool compared = false;
  bool ok() const { return !compared || differ == 0; }
};

struct CompareResult {
  std::string sa_arch;
  std::int64_t batch = 1;
  std::vector<TensorDiff> layers;   // one per device layer output, in the device's order
  std::vector<TensorDiff> alone;    // the same layers, each run alone on the reference
  std::vector<TensorDiff> outputs;  // the model's outputs
  std::string reference_error;      // when the reference executor stopped at a node
  runtime::RunResult device;        // the device run (segments, cycles, dispatched values)

  bool pass() const;
  std::int64_t layers_compared() const;
  std::int64_t layers_compared_alone() const;
  const TensorDiff* first_failing() const;        // in the chain
  const TensorDiff* first_failing_alone() const;  // the layer (from `layers`) failing alone
  // The `npukit compare --json` document; `model` names the model in it.
  nlohmann::json to_json(const std::string& model) const;
};

// The compile options with every device layer's int8 output added to options.dispatch (by
// tensor name, so the program stays the one the device normally runs: naming a layer would ask
// for its pre-activation value and unfuse its tail; int32 accumulant pieces of split kernels
// are not dispatchable as int8 and stay on the device).
compiler::CompileOptions dispatch_every_layer(const ir::Graph& model,
                                              compiler::CompileOptions options);

// The options a compiled program was made with (arch, DRAM, errata) and, as its dispatch list,
// the device outputs it dispatches: the options that lower `model` to the graph it runs.
compiler::CompileOptions options_of(const isa::Manifest& manifest,
                                    compiler::CompileOptions options = {});

// Runs `feeds` (batch on axis 0) on `session`, whose program was compiled from `model` with
// `options` (dispatch_every_layer or options_of), and on the reference executor, and compares.
CompareResult compare(const ir::Graph& model, const compiler::CompileOptions& options,
                      runtime::Session& session, const ref::TensorMap& feeds);

}  // namespace npukit::analysis
