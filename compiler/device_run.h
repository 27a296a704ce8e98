// Test support: runs a compiled program on the device model exactly as a board would receive it
// (GML, one DWP packet per device input at its manifest address, the start packet) and the
// lowered device subgraph on the reference executor, so tests can compare them bit for bit.
#pragma once

#include "compiler/compiler.h"
#include "compiler/passes.h"
#include "device/device.h"
#include "isa/dispatch.h"
#include "isa/dwp.h"
#include "isa/host_layout.h"
#include "ref/executor.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace npukit::compiler::testing {

inline ir::Tensor int8_tensor(const std::string& name, const ir::Shape& shape,
                              std::vector<std::int8_t> v) {
  ir::Tensor t;
  t.name = name;
  t.dtype = ir::DType::kInt8;
  t.shape = shape;
  t.data.assign(reinterpret_cast<const std::uint8_t*>(v.data()),
                reinterpret_cast<const std::uint8_t*>(v.data()) + v.size());
  return t;
}

// Device outputs by tensor name, unpacked to logical [C][H*W] int8 values.
inline std::map<std::string, std::vector<std::int8_t>> run_on_device(
    const CompileResult& r, const std::map<std::string, ir::Tensor>& inputs,
    device::RunStats* stats = nullptr) {
  const isa::SaArch& arch = r.program.arch;
  Bytes stream = r.gml;
  for (const auto& name : r.program.inputs) {
    const DeviceTensor& t = r.program.tensors.at(name);
    const ir::Tensor& v = inputs.at(name);
    std::span<const std::int8_t> values(reinterpret_cast<const std::int8_t*>(v.data.data()),
                                        v.data.size());
    const Bytes packed = t.kind == TensorKind::kVector
                             ? isa::pack_vector(values)
                             : isa::pack_activation(values, t.c, t.h, t.w, arch);
    isa::append_dwp_packet(stream, t.address, packed);
  }
  isa::append_dwp_start(stream);
  device::DeviceConfig cfg;
  cfg.arch = arch;
  device::Device dev(cfg);
  dev.receive_dwp(stream);
  if (stats) *stats = dev.stats();
  // A program compiled for the hardware (no --allow-errata) must not hit any known erratum; the
  // device model recognises them independently of the compiler.
  if (!r.ctx.options.allow_errata) {
    for (const auto& w : dev.diagnostics().warnings()) {
      EXPECT_TRUE(w.erratum.empty()) << w.text();
    }
  }
  const auto frames = isa::parse_dispatch_frames(dev.take_dispatch_output());
  std::map<std::string, std::vector<std::int8_t>> out;
  for (const auto& name : r.program.outputs) {
    const DeviceTensor& t = r.program.tensors.at(name);
    std::uint32_t id = 0;
    for (const auto& l : r.program.layers)
      if (r.ctx.graph.nodes[l.node].outputs[0] == name) id = l.dispatch_id;
    bool found = false;
    for (const auto& f : frames)
      if (f.id == id) {
        found = true;
        EXPECT_EQ(f.payload.size(), t.footprint) << name;  // all its producer wrote
        if (t.kind == TensorKind::kVector)
          out[name].assign(reinterpret_cast<const std::int8_t*>(f.payload.data()),
                           reinterpret_cast<const std::int8_t*>(f.payload.data()) + t.c);
        else
          out[name] = isa::unpack_activation(f.payload, t.c, t.h, t.w, arch);
      }
    EXPECT_TRUE(found) << "no dispatch frame with id " << id << " for " << name;
  }
  return out;
}

// The lowered device part (npukit.gati nodes) run on the reference executor.
inline std::map<std::string, std::vector<std::int8_t>> run_on_reference(
    const Context& ctx, const DeviceProgram& prog,
    const std::map<std::string, ir::Tensor>& inputs) {
  std::vector<std::string> names;
  for (const auto& l : prog.layers) names.push_back(l.name);
  for (const auto& n : ctx.graph.nodes)  // channel views (split_grouped_convs, lower_concat)
    if (is_device_view(n) && ctx.on_device(n.name)) names.push_back(n.name);
  const ir::Graph sub = extract_subgraph(ctx.graph, names, prog.outputs, "device_part");
  ref::TensorMap in;
  for (const auto& name : sub.inputs) in[name] = inputs.at(name);
  const auto out = ref::run_graph(sub, in);
  std::map<std::string, std::vector<std::int8_t>> result;
  for (const auto& [name, t] : out)
    result[name].assign(reinterpret_cast<const std::int8_t*>(t.data.data()),
                        reinterpret_cast<const std::int8_t*>(t.data.data()) + t.data.size());
  return result;
}

// For programs with split kernels: the lowering before split_kernels (one GatiConv per original
// conv; the reference has no row-skip pieces), run on the reference executor. The device part's
// outputs keep their names through the split, so the results compare one to one.
inline std::map<std::string, std::vector<std::int8_t>> run_unsplit_on_reference(
    const ir::Graph& model, const CompileOptions& options, const DeviceProgram& prog,
    const std::map<std::string, ir::Tensor>& inputs) {
  const Context ctx = lower_unsplit(model, options);
  std::vector<std::string> names;
  for (const auto& n : ctx.graph.nodes)
    if ((is_gati(n) || is_device_view(n)) && ctx.on_device(n.name)) names.push_back(n.name);
  const ir::Graph sub = extract_subgraph(ctx.graph, names, prog.outputs, "device_part");
  ref::TensorMap in;
  for (const auto& name : sub.inputs) in[name] = inputs.at(name);
  std::map<std::string, std::vector<std::int8_t>> result;
  for (const auto& [name, t] : ref::run_graph(sub, in))
    result[name].assign(reinterpret_cast<const std::int8_t*>(t.data.data()),
                        reinterpret_cast<const std::int8_t*>(t.data.data()) + t.data.size());
  return result;
}

inline bool has_split_kernels(const DeviceProgram& prog, const Context& ctx) {
  for (const auto& l : prog.layers) {
    const ir::Node& n = ctx.graph.nodes[l.node];
    if (n.inputs.size() > 3 && !n.inputs[3].empty()) return true;
  }
  return false;
}

// The reference for a compiled device part: the lowered graph, or the lowering before
// split_kernels when kernels were split (the reference has no row-band pieces).
inline std::map<std::string, std::vector<std::int8_t>> run_lowered_on_reference(
    const ir::Graph& model, const CompileOptions& options, const CompileResult& r,
    const std::map<std::string, ir::Tensor>& inputs) {
  return has_split_kernels(r.program, r.ctx)
             ? run_unsplit_on_reference(model, options, r.program, inputs)
             : run_on_reference(r.ctx, r.program, inputs);
}

// The device part's inputs for one model sample: the host prefix (input quantization, host
// rewrites) run on the reference executor, plus the sample's own tensors.
inline std::map<std::string, ir::Tensor> device_inputs(const CompileResult& r,
                                                       const ref::TensorMap& sample) {
  std::map<std::string, ir::Tensor> dev_in;
  if (r.host_first()) {
    ref::TensorMap in;
    for (const auto& name : r.host_first()->inputs) in[name] = sample.at(name);
    for (auto& [k, v] : ref::run_graph(*r.host_first(), in)) dev_in[k] = v;
  }
  for (const auto& [k, v] : sample) dev_in.emplace(k, v);
  return dev_in;
}

}  // namespace npukit::compiler::testing
