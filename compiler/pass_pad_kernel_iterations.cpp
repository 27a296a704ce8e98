// Pass 11, pad_kernel_iterations: on v1.0.0 9,4,4 a conv that follows a conv whose KernelItr is
// odd produces wrong output (gati.md 14.6, DECISIONS.md 18). The earlier conv computes extra
// all-zero kernels (zero weights, zero bias) up to an even KernelItr: attribute
// kernel_count_padded, which conv_geometry reads. Its real output channels are unchanged, the
// extra channel groups land after them in the 6.1 layout and nobody reads them (readers take a
// prefix of channel groups), so the lowered graph's meaning is unchanged. A depthwise conv's
// kernels are its input channels (the RTL's depthwise needs KN = IC): padded, it also reads the
// extra input channel groups (conv_geometry's ic), whatever bytes lie there, and multiplies them
// by its all-zero padding weights; its input's buffer reserves those bytes (DeviceTensor::
// reserved), so the read stays in memory the program owns. Kernel-split pieces chained through
// their int32 sums are padded alike, since each piece reads the previous piece's sums for its own
// kernel count. With --allow-errata (simulation only) nothing changes.
//
// (The other errata workarounds: transpose_tall_images, and the empty TailBlock a first-layer
// POOL gets in generate_instructions.)
#include "compiler/geometry.h"
#include "compiler/passes.h"

#include <algorithm>

namespace npukit::compiler {

namespace {

// The GatiConv whose int32 sums `n` reads (a kernel-split piece's acc input), or nullptr.
ir::Node* acc_producer(ir::Graph& g, const ir::Node& n) {
  if (n.inputs.size() < 4 || n.inputs[3].empty()) return nullptr;
  for (auto& p : g.nodes)
    if (p.op_type == "GatiConv" && !p.outputs.empty() && p.outputs[0] == n.inputs[3]) return &p;
  return nullptr;
}

}  // namespace

void pad_kernel_iterations(Context& ctx) {
  if (ctx.options.allow_errata || ctx.options.arch != isa::kArch9x4x4) return;
  ir::Graph& g = ctx.graph;
  const isa::SaArch& arch = ctx.options.arch;
  std::vector<ir::Node*> megablocks;
  for (auto& n : g.nodes)
    if (is_gati(n) && ctx.on_device(n.name)) megablocks.push_back(&n);
  bool changed = false;
  for (std::size_t i = 0; i + 1 < megablocks.size(); ++i) {
    ir::Node& n = *megablocks[i];
    if (n.op_type != "GatiConv" || megablocks[i + 1]->op_type != "GatiConv") continue;
    const ConvGeometry c = conv_geometry(g, n, arch);
    if (c.kitr % 2 == 0) continue;
    // Kernels per kernel iteration: COLS for a regular conv, N_SA channels for a depthwise one.
    const std::int64_t even_kernels =
        2 * static_cast<std::int64_t>(c.depthwise ? arch.n_sa : arch.cols);
    n.attributes["kernel_count_padded"] = (c.kn + even_kernels - 1) / even_kernels * even_kernels;
    changed = true;
  }
  // Kernel-split chains: every piece computes as many kernels as the widest one.
  while (changed) {
    changed = false;
    for (auto& n : g.nodes) {
      if (n.op_type != "GatiConv") continue;
      ir::Node* p = acc_producer(g, n);
      if (!p) continue;
      const std::int64_t a = n.get_int("kernel_count_padded", 0),
                         b = p->get_int("kernel_count_padded", 0);
      if (a == b) continue;
      n.attributes["kernel_count_padded"] = p->attributes["kernel_count_padded"] = std::max(a, b);
      changed = true;
    }
  }
  for (auto* n : megablocks)
    if (n->has("kernel_count_padded"))
      ctx.warnings.push_back(
          "layer '" + n->name + "': computes " +
          std::to_string(n->get_int("kernel_count_padded", 0)) +
          (conv_geometry(g, *n, arch).depthwise
               ? " channels (a depthwise conv: the extra input channels meet all-zero weights)"
               : " kernels (the extra ones all zero)") +
          " so the next conv avoids the 9,4,4 odd-KernelItr erratum");
}

}  // namespace npukit::compiler
