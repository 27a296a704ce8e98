// npukit's Gati compiler: ONNX graph (ir::Graph from onnx/load_onnx) in; GML, manifest, host
// subgraphs and the lowered npukit.gati graph out. compile() runs the passes of
// compiler/passes.h in order; docs/compiler.md explains each.
#pragma once

#include "common/bytes.h"
#include "compiler/backend.h"
#include "compiler/context.h"
#include "ir/graph.h"
#include "isa/manifest.h"
#include "program/program.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace npukit::compiler {

struct CompileResult {
  Context ctx;  // ctx.graph is the lowered graph (host ops + npukit.gati device ops)
  DeviceProgram program;
  Bytes gml;
  // The host segments' subgraphs, by segment index (manifest.segments[i].host->file names them).
  std::map<std::size_t, ir::Graph> host_graphs;
  isa::Manifest manifest;

  // The program artifact the runtime runs (program/program.h): manifest, GML, host subgraphs.
  program::Program artifact() const { return {manifest, gml, host_graphs}; }

  // The host subgraph of segment `s`, or nullptr when segment s is not a host segment.
  const ir::Graph* host_graph(std::size_t s) const {
    auto it = host_graphs.find(s);
    return it == host_graphs.end() ? nullptr : &it->second;
  }
  // The first segment's host subgraph when the model starts on the host (the old "host before"),
  // and the last segment's when it ends there ("host after"); nullptr otherwise.
  const ir::Graph* host_first() const;
  const ir::Graph* host_last() const;
};

// Front end and lowering only (passes 1-12): what `npukit compare` runs on the reference
// executor. The graph's device nodes are npukit.gati ops, the rest unchanged ONNX.
Context lower(const ir::Graph& model, const CompileOptions& options);

// The lowering up to, not including, split_kernels (passes 1-9): one GatiConv per model conv.
// For kernel-split programs the reference runs this as the ground truth the pieces must add up to.
Context lower_unsplit(const ir::Graph& model, const CompileOptions& options);

// The whole pipeline. Throws npukit::Error naming the layer and the limit for anything the Gati
// cannot run (and errata, unless options.allow_errata).
CompileResult compile(const ir::Graph& model, const CompileOptions& options);

// The per-layer report of `npukit compile --explain`: every node's placement and why, each device
// layer's instructions (field by field) and DRAM footprint.
std::string explain(const CompileResult& result);

// "83.2 % of the model's MACs on the device (...), 5 segments (2 on the device)".
std::string mac_share_line(const isa::Manifest& m);

// Extracts the nodes of `graph` listed in `names` as a stand-alone graph whose inputs are the
// values they read from outside and whose outputs are `outputs`.
ir::Graph extract_subgraph(const ir::Graph& graph, const std::vector<std::string>& names,
                           const std::vector<std::string>& outputs, const std::string& name);

}  // namespace npukit::compiler
