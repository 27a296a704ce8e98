// space_to_depth (pass 5b): a strided conv whose kernel is wider than the array has rows, or a
// host-fed device conv whose kernel splits into fewer pieces that way (resnet's stem), runs as a
// stride-1 conv over the space-to-depth image. Exactness against independent computations: the
// reference executor's own 11x11 stride-4 QLinearConv on the graph before the rewrite (the
// rewritten graph's Pad/Reshape/Transpose and 3x3 conv must give the same int8 values), and the
// device model on the committed AlexNet-like fixture (fixtures/wide_kernel/make_wide_kernel.py).
#include "common/npy.h"
#include "compiler/device_run.h"
#include "compiler/passes.h"
#include "onnx/onnx_io.h"
#include "quant/quantize.h"
#include "ref/executor.h"

#include <gtest/gtest.h>

#include <random>

namespace npukit::compiler {
namespace {

const std::string kStem = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/wide_kernel/wide_kernel";

std::string scalar_f(ir::Graph& g, const std::string& name, float v) {
  return add_constant(g, name, ir::DType::kFloat32, {}, &v);
}

// int8 x [1, 3, h, w] -> QLinearConv k x k stride s (pads p) with K kernels -> y.
ir::Graph wide_conv(std::int64_t h, std::int64_t w, std::int64_t k, std::int64_t s, std::int64_t p,
                    std::int64_t K) {
  ir::Graph g;
  g.name = "wide_conv";
  g.tensors["x"] = {"x", ir::DType::kInt8, {1, 3, h, w}, {}};
  std::mt19937 rng(7);
  std::vector<std::int8_t> wv(static_cast<std::size_t>(K * 3 * k * k));
  for (auto& e : wv) e = static_cast<std::int8_t>(static_cast<int>(rng() % 255) - 127);
  std::vector<std::int32_t> bias(static_cast<std::size_t>(K));
  for (auto& b : bias) b = static_cast<std::int32_t>(rng() % 20001) - 10000;
  const std::int8_t zero = 0;
  const std::string z = add_constant(g, "zero", ir::DType::kInt8, {}, &zero);
  ir::Node n;
  n.name = "conv";
  n.op_type = "QLinearConv";
  n.inputs = {"x",
              scalar_f(g, "xs", 0.05f),
              z,
              add_constant(g, "w", ir::DType::kInt8, {K, 3, k, k}, wv.data()),
              scalar_f(g, "ws", 0.01f),
              z,
              scalar_f(g, "ys", 0.4f),
              z,
              add_constant(g, "b", ir::DType::kInt32, {K}, bias.data())};
  n.outputs = {"y"};
  n.attributes["kernel_shape"] = std::vector<std::int64_t>{k, k};
  n.attributes["strides"] = std::vector<std::int64_t>{s, s};
  n.attributes["pads"] = std::vector<std::int64_t>{p, p, p, p};
  const std::int64_t oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1;
  g.tensors["y"] = {"y", ir::DType::kInt8, {1, K, oh, ow}, {}};
  g.nodes = {n};
  g.inputs = {"x"};
  g.outputs = {"y"};
  return g;
}

Context rewritten(const ir::Graph& g) {
  Context ctx;
  ctx.graph = g;
  // As assign_devices leaves it (which refuses a model with nothing else for the device).
  ctx.place("conv", Placement::kHost, "host: " + why_not_on_device(g, g.nodes[0], ctx.options));
  space_to_depth(ctx);
  return ctx;
}

TEST(SpaceToDepth, AnElevenByElevenStrideFourConvBecomesAThreeByThreeConvWithTheSameOutputs) {
  // alexnet's first layer shape (11x11 stride 4 pad 2) on 47x47 and 50x45 images (extra bottom
  // and right padding up to whole 4x4 blocks: 3 and 0 rows, 3 and 1 columns), and a 10x10
  // stride-3 kernel without padding (4x4 over 27 channels).
  struct Case {
    std::int64_t h, w, k, s, p;
  };
  for (const Case c : {Case{47, 47, 11, 4, 2}, Case{50, 45, 11, 4, 2}, Case{31, 29, 10, 3, 0}}) {
    SCOPED_TRACE(c.h);
    const ir::Graph before = wide_conv(c.h, c.w, c.k, c.s, c.p, 5);
    const Context ctx = rewritten(before);
    ASSERT_EQ(ctx.graph.nodes.size(), 5u);  // Pad, Reshape, Transpose, Reshape, the conv
    const ir::Node& conv = ctx.graph.nodes.back();
    EXPECT_EQ(conv.name, "conv");
    EXPECT_TRUE(ctx.on_device("conv")) << ctx.placement.at("conv").reason;
    const std::int64_t kb = (c.k + c.s - 1) / c.s;
    EXPECT_EQ(conv.get_ints("kernel_shape", {}), (std::vector<std::int64_t>{kb, kb}));
    EXPECT_EQ(conv.get_ints("strides", {}), (std::vector<std::int64_t>{1, 1}));
    EXPECT_EQ(ctx.graph.tensor(conv.inputs[0]).shape[1], 3 * c.s * c.s);
    for (unsigned seed : {1u, 2u}) {
      std::mt19937 rng(seed);
      std::vector<std::int8_t> v(static_cast<std::size_t>(3 * c.h * c.w));
      for (auto& e : v) e = static_cast<std::int8_t>(static_cast<int>(rng() % 256) - 128);
      const ref::TensorMap in{{"x", testing::int8_tensor("x", {1, 3, c.h, c.w}, v)}};
      EXPECT_EQ(ref::run_graph(before, in).at("y").data,
                ref::run_graph(ctx.graph, in).at("y").data);
    }
  }
}

TEST(SpaceToDepth, LeavesConvsTheArrayCanSplitAndUnstridedWideKernelsAlone) {
  for (const auto& g : {wide_conv(20, 20, 7, 4, 3, 4), wide_conv(20, 20, 11, 1, 5, 4)}) {
    const Context ctx = rewritten(g);
    EXPECT_EQ(ctx.graph.nodes.size(), 1u);
  }
}

TEST(SpaceToDepth, AHostFedStrideTwoStemOnTheDeviceRunsAsFewerPiecesBitExact) {
  // resnet's stem: 7x7 stride 2 pad 3 over 3 channels is 7 one-row pieces on 9,8,8 (int32
  // partial sums through DRAM between them). Over the space-to-depth image it is a 4x4 kernel on
  // 12 channels: 2 channel groups x 2 row bands = 4 pieces (on 9,4,4: 3 x 2 = 6 instead of 7).
  // 36x35 outputs, more than 1024, so the channel groups are needed (split_kernels).
  const ir::Graph before = wide_conv(72, 70, 7, 2, 3, 16);
  EXPECT_EQ(kernel_split(3, 7, 7, 36 * 35, isa::kArch9x8x8).pieces(), 7);
  EXPECT_EQ(kernel_split(12, 4, 4, 36 * 35, isa::kArch9x8x8).pieces(), 4);
  EXPECT_EQ(kernel_split(12, 4, 4, 36 * 35, isa::kArch9x4x4).pieces(), 6);
  Context ctx;
  ctx.graph = before;
  ctx.place("conv", Placement::kDevice, "as assign_devices leaves it");
  space_to_depth(ctx);
  ASSERT_EQ(ctx.graph.nodes.size(), 5u);
  const ir::Node& conv = ctx.graph.nodes.back();
  EXPECT_TRUE(ctx.on_device("conv"));
  EXPECT_EQ(conv.get_ints("kernel_shape", {}), (std::vector<std::int64_t>{4, 4}));
  EXPECT_EQ(ctx.graph.tensor(conv.inputs[0]).shape[1], 12);
  for (std::size_t i = 0; i + 1 < ctx.graph.nodes.size(); ++i)
    EXPECT_FALSE(ctx.on_device(ctx.graph.nodes[i].name)) << ctx.graph.nodes[i].name;

  // Compiled whole, the device's int8 outputs equal the reference executor's on the lowered
  // graph before split_kernels: one 4x4 GatiConv, with the Gati's requantization, over the
  // space-to-depth image of the host's Pad/Reshape/Transpose/Reshape. (The rewrite itself is
  // checked first: the 4x4 QLinearConv gives the 7x7 one's outputs on the reference.)
  for (const isa::SaArch& arch : {isa::kArch9x8x8, isa::kArch9x4x4}) {
    SCOPED_TRACE(arch.str());
    CompileOptions opt;
    opt.arch = arch;
    const CompileResult r = compile(before, opt);
    EXPECT_EQ(r.program.layers.size(), arch == isa::kArch9x8x8 ? 4u : 6u);
    const ir::Graph unsplit = lower_unsplit(before, opt).graph;
    for (unsigned seed : {3u, 4u}) {
      std::mt19937 rng(seed);
      std::vector<std::int8_t> v(3 * 72 * 70);
      for (auto& e : v) e = static_cast<std::int8_t>(static_cast<int>(rng() % 256) - 128);
      const ref::TensorMap sample{{"x", testing::int8_tensor("x", {1, 3, 72, 70}, v)}};
      EXPECT_EQ(ref::run_graph(before, sample).at("y").data,
                ref::run_graph(ctx.graph, sample).at("y").data);
      const auto dev = testing::run_on_device(r, testing::device_inputs(r, sample));
      const ir::Tensor want = ref::run_graph(unsplit, sample).at("y");
      EXPECT_EQ(dev.at("y"), std::vector<std::int8_t>(want.as<std::int8_t>(),
                                                      want.as<std::int8_t>() + want.data.size()));
    }
  }
}

TEST(SpaceToDepth, LeavesDeviceConvsWithoutFewerPiecesAlone) {
  // A 3x3 stride-2 conv is one piece either way; a 5x5 stride-2 conv is 5 pieces, and over the
  // space-to-depth image (3x3 on 12 channels, one piece per channel group and too few outputs
  // for groups) 1: taken. Its 3x3 stride-2 neighbour is not.
  for (const auto& [g, rewritten_nodes] : {std::pair{wide_conv(20, 20, 3, 2, 1, 4), 1u},
                                           std::pair{wide_conv(20, 20, 5, 2, 2, 4), 5u}}) {
    Context ctx;
    ctx.graph = g;
    ctx.place("conv", Placement::kDevice, "as assign_devices leaves it");
    space_to_depth(ctx);
    EXPECT_EQ(ctx.graph.nodes.size(), rewritten_nodes);
  }
}

std::vector<ref::TensorMap> fixture_inputs(const ir::Graph& g) {
  std::vector<ref::TensorMap> v;
  for (int k = 0; k < 4; ++k) {
    ref::TensorMap m;
    m[g.inputs.at(0)] = onnxio::tensor_from_npy(
        read_npy(kStem + ".input_" + std::to_string(k) + ".npy"), g.inputs.at(0));
    v.push_back(m);
  }
  return v;
}

TEST(SpaceToDepth, TheAlexNetLikeFixtureRunsWhollyOnTheDeviceBitExact) {
  const ir::Graph model = onnxio::load_onnx(kStem + ".onnx");
  const ir::Graph q = quant::quantize(model, fixture_inputs(model), {});
  for (const isa::SaArch& arch : {isa::kArch9x8x8, isa::kArch9x4x4}) {
    SCOPED_TRACE(arch.str());
    CompileOptions opt;
    opt.arch = arch;
    const CompileResult r = compile(q, opt);
    EXPECT_EQ(r.manifest.device_segment_count(), 1u);
    EXPECT_EQ(r.manifest.device_macs, r.manifest.model_macs);
    for (const auto& sample : fixture_inputs(q)) {
      const auto dev_in = testing::device_inputs(r, sample);
      const auto dev = testing::run_on_device(r, dev_in);
      const auto ref = testing::run_lowered_on_reference(q, opt, r, dev_in);
      ASSERT_FALSE(ref.empty());
      for (const auto& [name, values] : ref) EXPECT_EQ(dev.at(name), values) << name;
    }
  }
}

}  // namespace
}  // namespace npukit::compiler
