#include "compiler/compiler.h"

#include "common/error.h"
#include "compiler/dump.h"
#include "compiler/errata_passes.h"
#include "compiler/geometry.h"
#include "compiler/passes.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <set>

namespace npukit::compiler {

namespace {

using Pass = void (*)(Context&);

// Runs one named pass and, when --dump-after names it (or "all"), prints the graph it left.
void run(Context& ctx, const char* name, Pass pass) {
  pass(ctx);
  const auto& want = ctx.options.dump_after;
  if (std::find(want.begin(), want.end(), name) != want.end() ||
      std::find(want.begin(), want.end(), "all") != want.end()) {
    std::ostream& out = ctx.options.dump_to ? *ctx.options.dump_to : std::cerr;
    out << "; after " << name << "\n" << dump_graph(ctx) << std::flush;
  }
}

}  // namespace

const std::vector<std::string>& graph_pass_names() {
  static const std::vector<std::string> names = {"remove_noops",
                                                 "reduce_mean_to_pool",
                                                 "fuse_batchnorm",
                                                 "normalize_quantization",
                                                 "canonicalize_qdq",
                                                 "hard_activations",
                                                 "constant_arithmetic",
                                                 "broadcast_mul",
                                                 "decompose_conv_transpose",
                                                 "quant_params",
                                                 "channel_copies",
                                                 "check_shapes",
                                                 "assign_devices",
                                                 "space_to_depth",
                                                 "partition",
                                                 "legalize_host_ops",
                                                 "lower_to_gati",
                                                 "fuse_tail",
                                                 "pools_as_convs",
                                                 "lower_concat",
                                                 "clear_resize_padding",
                                                 "fold_channel_copies",
                                                 "transpose_tall_images",
                                                 "split_grouped_convs",
                                                 "split_channel_scales",
                                                 "split_kernels",
                                                 "pad_kernel_iterations",
                                                 "check_limits"};
  return names;
}

ir::Graph extract_subgraph(const ir::Graph& graph, const std::vector<std::string>& names,
                           const std::vector<std::string>& outputs, const std::string& name) {
  ir::Graph sub;
  sub.name = name;
  sub.opset = graph.opset;
  sub.opsets = graph.opsets;
  std::set<std::string> wanted(names.begin(), names.end()), produced;
  for (const auto& n : graph.nodes)
    if (wanted.count(n.name)) {
      sub.nodes.push_back(n);
      for (const auto& o : n.outputs) produced.insert(o);
    }
  std::set<std::string> seen;
  for (const auto& n : sub.nodes)
    for (const auto& in : n.inputs) {
      if (in.empty() || seen.count(in)) continue;
      seen.insert(in);
      const ir::Tensor* t = graph.find(in);
      if (t) sub.tensors[in] = *t;
      if (!produced.count(in) && !(t && t->is_constant())) sub.inputs.push_back(in);
    }
  for (const auto& n : sub.nodes)
    for (const auto& o : n.outputs)
      if (const ir::Tensor* t = graph.find(o)) sub.tensors[o] = *t;
  sub.outputs = outputs;
  return sub;
}

Context lower_unsplit(const ir::Graph& model, const CompileOptions& options) {
  Context ctx;
  ctx.options = options;
  ctx.graph = model;
  for (const auto& name : options.dump_after)
    if (name != "all" && std::find(graph_pass_names().begin(), graph_pass_names().end(), name) ==
                             graph_pass_names().end())
      fail("--dump-after '{}': no such graph pass (passes: all, {})", name, [] {
        std::string s;
        for (const auto& n : graph_pass_names()) s += (s.empty() ? "" : ", ") + n;
        return s;
      }());
  run(ctx, "remove_noops", remove_noops);
  run(ctx, "reduce_mean_to_pool", reduce_mean_to_pool);
  run(ctx, "fuse_batchnorm", fuse_batchnorm);
  run(ctx, "normalize_quantization", normalize_quantization);
  run(ctx, "canonicalize_qdq", canonicalize_qdq);
  run(ctx, "hard_activations", hard_activations);
  run(ctx, "constant_arithmetic", constant_arithmetic);
  run(ctx, "broadcast_mul", broadcast_mul);
  run(ctx, "decompose_conv_transpose", decompose_conv_transpose);
  run(ctx, "quant_params", quant_params);
  run(ctx, "channel_copies", channel_copies);
  run(ctx, "check_shapes", check_shapes);
  run(ctx, "assign_devices", assign_devices);
  run(ctx, "space_to_depth", space_to_depth);
  run(ctx, "partition", partition);
  run(ctx, "legalize_host_ops", legalize_host_ops);
  run(ctx, "lower_to_gati", lower_to_gati);
  run(ctx, "fuse_tail", fuse_tail);
  run(ctx, "pools_as_convs", pools_as_convs);
  run(ctx, "lower_concat", lower_concat);
  run(ctx, "clear_resize_padding", clear_resize_padding);
  run(ctx, "fold_channel_copies", fold_channel_copies);
  run(ctx, "transpose_tall_images", transpose_tall_images);
  run(ctx, "split_grouped_convs", split_grouped_convs);
  run(ctx, "split_channel_scales", split_channel_scales);
  run(ctx, "partition", partition);  // the lowered nodes' segments
  return ctx;
}

Context lower(const ir::Graph& model, const CompileOptions& options) {
  Context ctx = lower_unsplit(model, options);
  run(ctx, "split_kernels", split_kernels);
  run(ctx, "pad_kernel_iterations", pad_kernel_iterations);
  run(ctx, "check_limits", check_limits);
  run(ctx, "partition", partition);
  return ctx;
}

CompileResult compile(const ir::Graph& model, const CompileOptions& options) {
  CompileResult r;
  r.ctx = lower(model, options);
  Context& ctx = r.ctx;
  r.program = collect_device_program(ctx);
  DeviceProgram& prog = r.program;
  convert_layouts(ctx, prog);
  allocate_buffers(ctx, prog);
  assign_addresses(ctx, prog);
  generate_instructions(ctx, prog);
  r.gml = emit_gml(prog);

  r.manifest = build_manifest(ctx, prog, model, r.gml.size(), r.host_graphs);
  return r;
}

const ir::Graph* CompileResult::host_first() const {
  return manifest.segments.empty() || manifest.segments.front().is_device() ? nullptr
                                                                            : host_graph(0);
}

const ir::Graph* CompileResult::host_last() const {
  if (manifest.segments.size() < 2 || manifest.segments.back().is_device()) return nullptr;
  return host_graph(manifest.segments.size() - 1);
}

std::string mac_share_line(const isa::Manifest& m) {
  return fmt::format(
      "{:.1f} % of the model's MACs on the device ({} of {}), {} segments ({} on the "
      "device)",
      100.0 * m.device_mac_share(), m.device_macs, m.model_macs, m.segments.size(),
      m.device_segment_count());
}

std::string explain(const CompileResult& r) {
  const Context& ctx = r.ctx;
  const DeviceProgram& prog = r.program;
  const ir::Graph& g = ctx.graph;
  std::string s;
  s += fmt::format(
      "Gati program for '{}' on sa_arch {} (ISA v16), {} device layers, {} instructions\n", g.name,
      prog.arch.str(), prog.layers.size(), prog.instructions.size());
  s += "\nPlacement (every node of the model and of the lowering; seg = its segment):\n";
  for (const auto& name : ctx.placement_order) {
    const auto& p = ctx.placement.at(name);
    auto seg = ctx.segment_of.find(name);
    s += fmt::format(
        "  {:<32} {:<6} {:>4} {}\n", name, p.placement == Placement::kDevice ? "device" : "host",
        seg == ctx.segment_of.end() ? std::string("-") : std::to_string(seg->second), p.reason);
  }
  s += "\nSegments (" + mac_share_line(r.manifest) + "):\n";
  for (std::size_t i = 0; i < r.manifest.segments.size(); ++i) {
    const auto& ms = r.manifest.segments[i];
    if (ms.is_device())
      s += fmt::format("  [{}] device: layers {}..{}, instructions {}..{}, {} B in, {} B out\n", i,
                       ms.first_layer, ms.first_layer + ms.layer_count - 1, ms.first_instruction,
                       ms.first_instruction + ms.instruction_count - 1, ms.bytes_in, ms.bytes_out);
    else
      s += fmt::format("  [{}] host: {} nodes in {}, {} MACs\n", i, ms.host->nodes.size(),
                       ms.host->file, ms.macs);
    s += "      " + ms.why + "\n";
  }
  s += "\nDevice layers:\n";
  int index = 0;
  for (const auto& l : prog.layers) {
    const ir::Node& n = g.nodes[l.node];
    s += fmt::format("\n[{}] {} {} ({})", ++index, l.name, isa::name(l.opcode), n.op_type);
    if (l.dispatch) s += fmt::format("  dispatch id {}", l.dispatch_id);
    s += "\n";
    std::uint64_t reads = 0, writes = 0;
    for (const auto& in : n.inputs)
      if (auto it = prog.tensors.find(in); it != prog.tensors.end()) {
        reads += it->second.bytes;
        s += fmt::format("  reads  {:<28} {:>9} B at 0x{:08x} ({} {}x{}x{})\n", in,
                         it->second.bytes, it->second.address, kind_name(it->second.kind),
                         it->second.c, it->second.h, it->second.w);
      }
    const auto& out = prog.tensors.at(n.outputs[0]);
    writes = out.footprint;
    s += fmt::format("  writes {:<28} {:>9} B at 0x{:08x} ({} {}x{}x{})\n", out.name, out.footprint,
                     out.address, kind_name(out.kind), out.c, out.h, out.w);
    for (int b : {l.weights, l.bias})
      if (b >= 0) {
        const auto& blob = prog.blobs[static_cast<std::size_t>(b)];
        reads += blob.bytes.size();
        s += fmt::format("  {:<6} {:>38} B at 0x{:08x}\n", blob.what, blob.bytes.size(),
                         blob.address);
      }
    s += fmt::format("  DRAM footprint: {} B read, {} B written\n", reads, writes);
    for (const auto& inst : l.instructions) {
      const auto& info = isa::info(inst.opcode());
      s += fmt::format("    {}", info.name);
      for (const auto& f : info.fields) {
        const auto v = inst.get(f.id);
        if (v != 0) s += fmt::format(" {}={}", f.name, v);
      }
      s += "\n";
    }
  }
  s += fmt::format(
      "\nDRAM map: instructions [0, 0x{:x}), weights+biases up to 0x{:x}, I/O arena "
      "[0x{:x}, 0x{:x}), accumulants [0x{:x}, 0x{:x}); {} bytes of {} MB\n",
      isa::instruction_region_bytes(prog.instructions.size()), prog.arena_address,
      prog.arena_address, prog.arena_address + prog.arena_bytes, prog.accumulant_address,
      prog.accumulant_address + prog.accumulant_bytes, prog.dram_end, ctx.options.ramsize_mb);
  for (const auto& w : ctx.warnings) s += "warning: " + w + "\n";
  return s;
}

}  // namespace npukit::compiler
