// collect_device_program: the boundary between the lowered graph and the back end. The device
// layers are the Gati nodes placed on the device, in graph (execution) order, grouped by the
// partition pass's segments; a segment's inputs are the values its nodes read that the host
// provides (graph inputs or host segments' outputs) and no earlier segment wrote, its outputs the
// values it makes that the host needs (graph outputs, host nodes' inputs, --dispatch requests).
// Values one device segment makes and a later one reads stay in DRAM.
#include "common/error.h"
#include "compiler/backend.h"
#include "compiler/geometry.h"
#include "compiler/layout.h"
#include "compiler/passes.h"
#include "isa/host_layout.h"

#include <algorithm>
#include <map>
#include <set>

namespace npukit::compiler {

const char* kind_name(TensorKind k) {
  switch (k) {
    case TensorKind::kActivation:
      return "activation";
    case TensorKind::kActivation32:
      return "activation32";
    case TensorKind::kVector:
      return "vector";
  }
  return "?";
}

isa::Opcode megablock_of(const std::string& op) {
  if (op == "GatiConv") return isa::Opcode::CONV;
  if (op == "GatiFC") return isa::Opcode::FC;
  if (op == "GatiPool") return isa::Opcode::POOL;
  if (op == "GatiEltwise") return isa::Opcode::EltWise;
  if (op == "GatiResize") return isa::Opcode::RESIZE;
  if (op == "GatiConcat") return isa::Opcode::CONCAT;
  if (op == "GatiTranspose") return isa::Opcode::TRANSPOSE;
  fail("npukit.gati op '{}' has no megablock in this compiler", op);
}

std::uint32_t dispatch_hash(const std::string& name) {
  std::uint32_t sum = 0;
  for (unsigned char ch : name) sum += ch;
  return sum;
}

namespace {

DeviceTensor make_tensor(const ir::Tensor& t, bool vector) {
  DeviceTensor d;
  d.name = t.name;
  const Chw s = chw_of(t);
  d.c = s.c;
  d.h = s.h;
  d.w = s.w;
  if (t.dtype == ir::DType::kInt32)
    d.kind = TensorKind::kActivation32;
  else if (vector)
    d.kind = TensorKind::kVector;
  else
    d.kind = TensorKind::kActivation;
  return d;
}

}  // namespace

DeviceProgram collect_device_program(const Context& ctx) {
  const ir::Graph& g = ctx.graph;
  DeviceProgram prog;
  prog.arch = ctx.options.arch;
  std::set<std::string> produced;
  // Views (is_device_view): value -> (the value it is a view of, first channel).
  std::map<std::string, std::pair<std::string, std::int64_t>> views;
  for (const auto& n : g.nodes) {
    if (!ctx.on_device(n.name) || !is_device_view(n)) continue;
    if (n.op_type == "Slice") {
      views[n.outputs[0]] = {n.inputs[0], constant_values(g.tensor(n.inputs[1])).at(0)};
    } else {
      std::int64_t c0 = 0;
      for (const auto& in : n.inputs) {
        views[in] = {n.outputs[0], c0};
        c0 += g.tensor(in).shape.at(1);
      }
    }
  }
  // A view's tensor aliases its root at the byte offset of its first channel (whole N_SA groups,
  // gati.md 6.1: each group of N_SA channels is one contiguous P' * N_SA byte range; an FC vector
  // is linear, one byte per output, and split_channel_scales cuts it at multiples of 32).
  auto alias = [&](DeviceTensor& d) {
    auto it = views.find(d.name);
    if (it == views.end()) return;
    const auto& [root, c0] = it->second;
    const ir::Tensor& rt = g.tensor(root);
    d.alias_of = root;
    d.alias_offset = d.kind == TensorKind::kVector
                         ? static_cast<std::uint64_t>(c0)
                         : isa::activation_bytes(c0, rt.shape.at(2), rt.shape.at(3), prog.arch);
  };
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (!is_gati(n) || !ctx.on_device(n.name)) continue;
    DeviceLayer layer;
    layer.name = n.name;
    layer.node = i;
    layer.opcode = megablock_of(n.op_type);
    const int index = static_cast<int>(prog.layers.size());
    if (auto it = ctx.segment_of.find(n.name); it != ctx.segment_of.end())
      layer.segment = it->second;
    if (prog.segments.empty() || prog.segments.back().segment != layer.segment) {
      DeviceSegment seg;
      seg.segment = layer.segment;
      seg.first_layer = prog.layers.size();
      prog.segments.push_back(seg);
    }
    DeviceSegment& seg = prog.segments.back();
    ++seg.layer_count;
    // Activation inputs: input 0 always; EltWise b, concat inputs, the split-kernel acc input.
    std::vector<std::string> reads;
    if (n.op_type == "GatiConv") {
      reads.push_back(n.inputs[0]);
      if (n.inputs.size() > 3 && !n.inputs[3].empty()) reads.push_back(n.inputs[3]);
    } else if (n.op_type == "GatiFC") {
      reads.push_back(n.inputs[0]);
    } else {
      for (const auto& in : n.inputs)
        if (!in.empty()) reads.push_back(in);
    }
    for (const auto& in : reads) {
      auto it = prog.tensors.find(in);
      if (it == prog.tensors.end() && views.count(in) && prog.tensors.count(views.at(in).first)) {
        // A view of a tensor an earlier layer made (split_grouped_convs checked that).
        DeviceTensor d = make_tensor(g.tensor(in), false);
        alias(d);
        d.produced_at = prog.tensors.at(d.alias_of).produced_at;
        it = prog.tensors.emplace(in, d).first;
      }
      if (it == prog.tensors.end()) {
        const ir::Tensor& t = g.tensor(in);
        DeviceTensor d = make_tensor(t, t.shape.size() == 2);
        d.device_input = true;
        // Written by the host before its segment starts: alive from the segment's first layer
        // (-1 for the first segment, the host writes it before anything runs).
        d.produced_at = seg.first_layer == 0 ? -1 : static_cast<int>(seg.first_layer);
        it = prog.tensors.emplace(in, d).first;
        prog.inputs.push_back(in);
        seg.inputs.push_back(in);
      }
      it->second.last_used_at = index;
    }
    const ir::Tensor& out = g.tensor(n.outputs.at(0));
    // An EltWise on an FC vector (an FC's activation left unfused, e.g. --dispatch FC_LAYER)
    // works on the vector's bytes as they are and writes a vector.
    const bool vector_eltwise =
        n.op_type == "GatiEltwise" && prog.tensors.at(reads.at(0)).kind == TensorKind::kVector;
    DeviceTensor d = make_tensor(out, n.op_type == "GatiFC" || vector_eltwise);
    d.produced_at = index;
    d.last_used_at = index;
    alias(d);
    if (!d.alias_of.empty() && !prog.tensors.count(d.alias_of)) {
      // The first piece writing into a view's root: the root's buffer starts to live here.
      DeviceTensor root = make_tensor(g.tensor(d.alias_of), d.kind == TensorKind::kVector);
      root.produced_at = index;
      root.last_used_at = index;
      prog.tensors[root.name] = root;
    }
    prog.tensors[out.name] = d;
    produced.insert(out.name);
    prog.layers.push_back(std::move(layer));
  }
  // Outputs: produced on the device and needed by the host (or asked for with --dispatch).
  std::set<std::string> needed(g.outputs.begin(), g.outputs.end());
  for (const auto& n : g.nodes)
    if (!ctx.on_device(n.name))
      for (const auto& in : n.inputs) needed.insert(in);
  for (const auto& req : ctx.options.dispatch) {
    bool found = produced.count(req) != 0;
    if (found) needed.insert(req);
    for (const auto& l : prog.layers)
      if (l.name == req) {
        needed.insert(g.nodes[l.node].outputs[0]);
        found = true;
      }
    if (!found)
      fail("--dispatch '{}': no device layer or device tensor has that name (device layers: {})",
           req, [&] {
             std::string s;
             for (const auto& l : prog.layers) s += (s.empty() ? "" : ", ") + l.name;
             return s;
           }());
  }
  for (auto& l : prog.layers) {
    const std::string& out = g.nodes[l.node].outputs[0];
    if (needed.count(out)) {
      auto& t = prog.tensors.at(out);
      if (t.kind == TensorKind::kActivation32)
        fail("layer '{}': its int32 partial sums cannot leave the device", l.name);
      t.device_output = true;
      t.last_used_at = static_cast<int>(prog.layers.size());  // kept until the run ends
      prog.outputs.push_back(out);
      l.dispatch = true;
      for (auto& seg : prog.segments)
        if (seg.segment == l.segment) seg.outputs.push_back(out);
    }
  }
  auto size_of = [&](const DeviceTensor& t, std::int64_t channels) -> std::uint64_t {
    switch (t.kind) {
      case TensorKind::kActivation:
        return isa::activation_bytes(channels, t.h, t.w, prog.arch);
      case TensorKind::kActivation32:
        return 4 * isa::activation_bytes(channels, t.h, t.w, prog.arch);
      case TensorKind::kVector:
        return isa::vector_bytes(channels * t.h * t.w);
    }
    return 0;
  };
  for (auto& [name, t] : prog.tensors) t.footprint = t.bytes = size_of(t, t.c);
  // A view's root lives as long as any view of it is used (allocate_buffers places the root).
  for (auto& [name, t] : prog.tensors) {
    if (t.alias_of.empty()) continue;
    DeviceTensor& root = prog.tensors.at(t.alias_of);
    root.produced_at = std::min(root.produced_at, t.produced_at);
    root.last_used_at = std::max(root.last_used_at, t.last_used_at);
  }
  for (const auto& l : prog.layers) {
    const ir::Node& n = g.nodes[l.node];
    if (l.opcode != isa::Opcode::CONV) continue;
    const ConvGeometry c = conv_geometry(g, n, prog.arch);
    DeviceTensor& out = prog.tensors.at(n.outputs[0]);
    out.footprint = size_of(out, c.kn);
    // A padded conv writing a view (the last slice of a concat, lower_concat) writes past its
    // root's channels: the root's buffer reserves those bytes.
    if (!out.alias_of.empty()) {
      DeviceTensor& root = prog.tensors.at(out.alias_of);
      root.reserved = std::max(root.reserved, out.alias_offset + out.footprint);
    }
    // A padded depthwise conv reads c.ic > C channels of its input: the buffer (the root's, for a
    // view) reserves those bytes too, so the read stays inside memory the program owns.
    DeviceTensor& in = prog.tensors.at(n.inputs[0]);
    if (c.depthwise && c.ic > in.c) {
      DeviceTensor& root = in.alias_of.empty() ? in : prog.tensors.at(in.alias_of);
      const std::uint64_t offset = in.alias_of.empty() ? 0 : in.alias_offset;
      root.reserved = std::max(root.reserved, offset + size_of(in, c.ic));
    }
  }
  return prog;
}

}  // namespace npukit::compiler
