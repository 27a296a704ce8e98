// build_manifest: the manifest of a program with a device segment and a host segment
// (fixtures/qop/perchannel_fc32 with --weight-scales per-channel: fc2's two groups of 32 outputs
// are device outputs, a host Concat joins them into the model's output), checked against what the
// ONNX file and the back end's own records say, field by field.
#include "compiler/backend.h"
#include "compiler/compiler.h"
#include "compiler/passes.h"
#include "ir/tensor_util.h"
#include "onnx/onnx_io.h"

#include <gtest/gtest.h>

namespace npukit::compiler {
namespace {

const std::string kModel = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/qop/perchannel_fc32.onnx";

double scale_of(const ir::Graph& g, const std::string& initializer) {
  return ir::to_float_vector(g.tensor(initializer)).at(0);
}

TEST(BuildManifest, DeviceThenHostSegmentWithBoundaryTensors) {
  const ir::Graph model = onnxio::load_onnx(kModel);
  CompileOptions opt;
  opt.arch = isa::kArch9x8x8;
  opt.weight_scales = WeightScales::kPerChannel;
  Context ctx = lower(model, opt);
  DeviceProgram prog = collect_device_program(ctx);
  convert_layouts(ctx, prog);
  allocate_buffers(ctx, prog);
  assign_addresses(ctx, prog);
  generate_instructions(ctx, prog);
  const Bytes gml = emit_gml(prog);
  std::map<std::size_t, ir::Graph> host;
  const isa::Manifest m = build_manifest(ctx, prog, model, gml.size(), host);

  EXPECT_EQ(m.model, model.name);
  EXPECT_EQ(m.sa_arch, "9,8,8");
  EXPECT_EQ(m.weight_scales, "per-channel");
  EXPECT_EQ(m.gml_bytes, gml.size());
  // The model's own input and output, with the scales the ONNX file gives them.
  ASSERT_EQ(m.inputs.size(), 1u);
  EXPECT_EQ(m.inputs[0].name, "x");
  EXPECT_EQ(m.inputs[0].dtype, "int8");
  EXPECT_EQ(m.inputs[0].shape, (std::vector<std::int64_t>{1, 96}));
  EXPECT_FLOAT_EQ(m.inputs[0].scale, scale_of(model, "x_scale"));
  ASSERT_EQ(m.outputs.size(), 1u);
  EXPECT_EQ(m.outputs[0].name, "y");
  EXPECT_FLOAT_EQ(m.outputs[0].scale, scale_of(model, "y_scale"));
  // 96 x 128 + 128 x 64 MACs, all on the device.
  EXPECT_EQ(m.model_macs, 96u * 128 + 128u * 64);
  EXPECT_EQ(m.device_macs, m.model_macs);

  ASSERT_EQ(m.segments.size(), 2u);
  const isa::ManifestSegment& dev = m.segments[0];
  ASSERT_TRUE(dev.is_device());
  EXPECT_EQ(dev.first_layer, 0);
  EXPECT_EQ(dev.layer_count, 6);  // fc1 in 4 groups, fc2 in 2
  EXPECT_EQ(dev.first_instruction, 0);
  EXPECT_EQ(static_cast<std::size_t>(dev.instruction_count), prog.instructions.size());
  ASSERT_EQ(dev.device_inputs.size(), 1u);
  EXPECT_EQ(dev.device_inputs[0].name, "x");
  EXPECT_EQ(dev.device_inputs[0].layout, "vector");
  EXPECT_EQ(dev.device_inputs[0].bytes, 96u);
  EXPECT_EQ(dev.device_inputs[0].address, prog.tensors.at("x").address);
  ASSERT_EQ(dev.device_outputs.size(), 2u);
  for (int q = 0; q < 2; ++q) {
    const isa::ManifestTensor& t = dev.device_outputs[static_cast<std::size_t>(q)];
    const std::string layer = "fc2_channels" + std::to_string(q);
    EXPECT_EQ(t.layer, layer);
    EXPECT_EQ(t.name, layer + "_out");
    EXPECT_EQ(t.layout, "vector");
    EXPECT_EQ(t.bytes, 32u);
    EXPECT_EQ(t.shape, (std::vector<std::int64_t>{1, 32}));
    EXPECT_EQ(t.address, prog.tensors.at(t.name).address);
    ASSERT_TRUE(t.dispatch_id.has_value());
    EXPECT_EQ(*t.dispatch_id, dispatch_hash(layer));
    EXPECT_FLOAT_EQ(t.scale, scale_of(model, "y_scale"));  // the groups write y's integers
  }
  // The host segment: the Concat of the two groups, its subgraph handed back by segment index.
  const isa::ManifestSegment& hs = m.segments[1];
  ASSERT_FALSE(hs.is_device());
  ASSERT_TRUE(hs.host.has_value());
  EXPECT_EQ(hs.host->file, "segment1_host.onnx");
  EXPECT_EQ(hs.host->inputs, (std::vector<std::string>{"fc2_channels0_out", "fc2_channels1_out"}));
  EXPECT_EQ(hs.host->outputs, (std::vector<std::string>{"y"}));
  ASSERT_EQ(host.size(), 1u);
  ASSERT_TRUE(host.count(1));
  ASSERT_EQ(host.at(1).nodes.size(), 1u);
  EXPECT_EQ(host.at(1).nodes[0].op_type, "Concat");
  EXPECT_EQ(host.at(1).outputs, (std::vector<std::string>{"y"}));

  // One manifest layer per device layer, instruction ranges back to back.
  ASSERT_EQ(m.layers.size(), prog.layers.size());
  int first = 0;
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    EXPECT_EQ(m.layers[i].name, prog.layers[i].name);
    EXPECT_EQ(m.layers[i].opcode, "FC");
    EXPECT_EQ(m.layers[i].first_instruction, first);
    first += m.layers[i].instruction_count;
  }
  EXPECT_EQ(static_cast<std::size_t>(first), prog.instructions.size());
  EXPECT_EQ(m.instruction_count, prog.instructions.size());
  EXPECT_EQ(m.warnings, ctx.warnings);
  // compile() builds the same manifest.
  EXPECT_EQ(compile(model, opt).manifest, m);
}

}  // namespace
}  // namespace npukit::compiler
