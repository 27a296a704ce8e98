// Pass 19, build_manifest: the program's manifest.json (isa/manifest.h) from the compiled
// program: the model's inputs and outputs with their scales (ctx.quantization), the segments in
// order (a device segment's layers, instructions and the tensors the host writes and receives,
// with their DRAM addresses, layouts and dispatch ids; a host segment's subgraph, cut out of the
// lowered graph with the values later segments read as its outputs), the device layers, the MAC
// counts and the compiler's warnings. The runtime needs nothing else to run the program
// (runtime/session.h).
#include "common/error.h"
#include "compiler/backend.h"
#include "compiler/compiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace npukit::compiler {

isa::Manifest build_manifest(const Context& ctx, const DeviceProgram& prog, const ir::Graph& model,
                             std::size_t gml_bytes, std::map<std::size_t, ir::Graph>& host_graphs) {
  const ir::Graph& g = ctx.graph;
  isa::Manifest m;
  const CompileOptions& options = ctx.options;
  const auto& qparams = ctx.quantization;
  m.model = model.name;
  m.sa_arch = options.arch.str();
  m.ramsize_mb = options.ramsize_mb;
  m.allow_errata = options.allow_errata;
  m.weight_scales = weight_scales_name(options.weight_scales);
  m.gml_bytes = gml_bytes;
  m.model_macs = ctx.model_macs;
  m.device_macs = ctx.device_macs;
  auto model_tensor = [&](const std::string& name) {
    isa::ManifestTensor t;
    t.name = name;
    const ir::Tensor* tt = g.find(name);
    t.shape = tt ? tt->shape : std::vector<std::int64_t>{};
    t.dtype = tt ? ir::dtype_name(tt->dtype) : "undefined";
    if (auto it = qparams.find(name);
        it != qparams.end() && tt && tt->dtype != ir::DType::kFloat32) {
      t.scale = it->second.scale;
      t.zero_point = it->second.zero_point;
    }
    return t;
  };
  for (const auto& in : model.inputs) m.inputs.push_back(model_tensor(in));
  for (const auto& out : model.outputs) m.outputs.push_back(model_tensor(out));
  auto device_tensor = [&](const std::string& name) {
    isa::ManifestTensor t = model_tensor(name);
    const DeviceTensor& d = prog.tensors.at(name);
    t.layout = d.kind == TensorKind::kVector ? "vector" : "activation";
    t.address = d.address;
    t.bytes = d.bytes;
    return t;
  };

  // Which values later segments (or the model's outputs) read: what each host segment must hand on.
  std::map<std::string, int> made_in;
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs) made_in[o] = ctx.segment_of.at(n.name);
  std::map<std::string, int> last_read;  // value -> last segment reading it (outputs: past the end)
  const int end_segment = static_cast<int>(ctx.segments.size());
  for (const auto& n : g.nodes)
    for (const auto& in : n.inputs)
      if (!in.empty()) last_read[in] = std::max(last_read[in], ctx.segment_of.at(n.name));
  for (const auto& o : model.outputs) last_read[o] = end_segment;
  std::map<std::string, const ir::Node*> by_name;
  for (const auto& n : g.nodes) by_name[n.name] = &n;

  std::size_t device_index = 0;
  for (std::size_t s = 0; s < ctx.segments.size(); ++s) {
    const Segment& S = ctx.segments[s];
    isa::ManifestSegment ms;
    ms.macs = S.macs;
    ms.bytes_in = S.bytes_in;
    ms.bytes_out = S.bytes_out;
    ms.compute_cycles = S.compute_cycles;
    ms.transfer_cycles = S.transfer_cycles;
    ms.why = S.why;
    if (S.placement == Placement::kDevice) {
      if (device_index >= prog.segments.size() ||
          prog.segments[device_index].segment != static_cast<int>(s))
        fail("internal: device segment {} has no device layers", s);
      const DeviceSegment& ds = prog.segments[device_index++];
      ms.kind = isa::ManifestSegment::Kind::kDevice;
      ms.first_layer = static_cast<int>(ds.first_layer);
      ms.layer_count = static_cast<int>(ds.layer_count);
      ms.first_instruction = static_cast<int>(ds.first_instruction);
      ms.instruction_count = static_cast<int>(ds.instruction_count);
      for (const auto& in : ds.inputs) ms.device_inputs.push_back(device_tensor(in));
      for (const auto& out : ds.outputs) {
        isa::ManifestTensor t = device_tensor(out);
        for (const auto& l : prog.layers)
          if (g.nodes[l.node].outputs[0] == out) {
            t.dispatch_id = l.dispatch_id;
            t.layer = l.name;
          }
        ms.device_outputs.push_back(t);
      }
    } else {
      std::vector<std::string> outs;
      for (const auto& name : S.nodes)
        for (const auto& o : by_name.at(name)->outputs)
          if (!o.empty() && last_read.count(o) && last_read[o] > static_cast<int>(s))
            outs.push_back(o);
      const std::string file = fmt::format("segment{}_host.onnx", s);
      ir::Graph sub =
          extract_subgraph(g, S.nodes, outs, fmt::format("{}_segment{}_host", model.name, s));
      ms.host = isa::ManifestSubgraph{file, sub.inputs, outs, S.nodes};
      host_graphs[s] = std::move(sub);
    }
    m.segments.push_back(std::move(ms));
  }
  int first = 0;
  for (const auto& l : prog.layers) {
    isa::ManifestLayer ml;
    ml.name = l.name;
    ml.opcode = std::string(isa::name(l.opcode));
    const ir::Node& n = g.nodes[l.node];
    for (const auto& in : n.inputs)
      if (!in.empty() && prog.tensors.count(in)) ml.inputs.push_back(in);
    ml.outputs = n.outputs;
    ml.first_instruction = first;
    ml.instruction_count = static_cast<int>(l.instructions.size());
    first += ml.instruction_count;
    m.layers.push_back(ml);
  }
  m.instruction_count = prog.instructions.size();
  m.dram_bytes = prog.dram_end;
  m.warnings = ctx.warnings;
  return m;
}

}  // namespace npukit::compiler
