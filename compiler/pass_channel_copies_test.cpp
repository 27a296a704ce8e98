// channel_copies (pass 3f) and fold_channel_copies (pass 9d): a channel shuffle and channel Slices
// as 1x1 copy convs, then folded into their neighbours. Exactness is checked against independent
// computations: the reference executor's own Reshape/Transpose/Slice on the graph before the
// rewrite, the reference executor on the unfolded lowered graph, and the device model on the
// committed ShuffleNet-like fixture (fixtures/shuffle/make_shuffle.py).
#include "common/npy.h"
#include "compiler/device_run.h"
#include "compiler/errata_passes.h"
#include "compiler/passes.h"
#include "onnx/onnx_io.h"
#include "quant/quantize.h"
#include "ref/executor.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

namespace npukit::compiler {
namespace {

const std::string kStem = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/shuffle/shuffle_net";

std::string int64s(ir::Graph& g, const std::string& name, std::vector<std::int64_t> v) {
  return add_constant(g, name, ir::DType::kInt64, {static_cast<std::int64_t>(v.size())}, v.data());
}

// int8 x [1, 10, 3, 4] -> channel shuffle (2 groups) -> y; x -> Slice channels 3..7 -> z.
ir::Graph shuffle_and_slice() {
  ir::Graph g;
  g.name = "shuffle_and_slice";
  g.tensors["x"] = {"x", ir::DType::kInt8, {1, 10, 3, 4}, {}};
  g.tensors["r"] = {"r", ir::DType::kInt8, {1, 2, 5, 3, 4}, {}};
  g.tensors["t"] = {"t", ir::DType::kInt8, {1, 5, 2, 3, 4}, {}};
  g.tensors["y"] = {"y", ir::DType::kInt8, {1, 10, 3, 4}, {}};
  g.tensors["z"] = {"z", ir::DType::kInt8, {1, 4, 3, 4}, {}};
  ir::Node r{"reshape", "Reshape", "", {"x", int64s(g, "s5", {1, 2, 5, 3, 4})}, {"r"}, {}};
  ir::Node t{"transpose", "Transpose", "", {"r"}, {"t"}, {}};
  t.attributes["perm"] = std::vector<std::int64_t>{0, 2, 1, 3, 4};
  ir::Node b{"reshape_back", "Reshape", "", {"t", int64s(g, "s4", {1, 10, 3, 4})}, {"y"}, {}};
  ir::Node s{
      "slice", "Slice",
      "",      {"x", int64s(g, "starts", {3}), int64s(g, "ends", {7}), int64s(g, "axes", {1})},
      {"z"},   {}};
  g.nodes = {r, t, b, s};
  g.inputs = {"x"};
  g.outputs = {"y", "z"};
  return g;
}

ref::TensorMap random_int8(const std::string& name, const ir::Shape& shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::int8_t> v(static_cast<std::size_t>(ir::element_count(shape)));
  for (auto& e : v) e = static_cast<std::int8_t>(static_cast<int>(rng() % 256) - 128);
  return {{name, testing::int8_tensor(name, shape, v)}};
}

TEST(ChannelCopies, ShuffleAndSliceBecomeCopyConvsThatMoveTheSameInt8Values) {
  const ir::Graph before = shuffle_and_slice();
  Context ctx;
  ctx.graph = before;
  channel_copies(ctx);
  ASSERT_EQ(ctx.graph.nodes.size(), 2u);
  for (const auto& n : ctx.graph.nodes) EXPECT_EQ(n.op_type, "QLinearConv") << n.name;
  const auto shuffle = channel_copy_sources(ctx.graph, ctx.graph.nodes[0]);
  EXPECT_EQ(shuffle, (std::vector<std::int64_t>{0, 5, 1, 6, 2, 7, 3, 8, 4, 9}));
  EXPECT_EQ(channel_copy_sources(ctx.graph, ctx.graph.nodes[1]),
            (std::vector<std::int64_t>{3, 4, 5, 6}));
  // The reference executor's Reshape/Transpose/Slice against its QLinearConv, every int8 value
  // (-128 and 127 included).
  for (unsigned seed : {1u, 2u, 3u}) {
    const auto in = random_int8("x", {1, 10, 3, 4}, seed);
    const auto a = ref::run_graph(before, in);
    const auto b = ref::run_graph(ctx.graph, in);
    for (const char* out : {"y", "z"}) EXPECT_EQ(a.at(out).data, b.at(out).data) << out;
  }
  // A copy is data movement: no model MACs.
  EXPECT_EQ(node_macs(ctx.graph, ctx.graph.nodes[0]), 0u);
}

TEST(ChannelCopies, LeavesOtherTransposesAndSlicesAlone) {
  ir::Graph g = shuffle_and_slice();
  g.nodes[1].attributes["perm"] = std::vector<std::int64_t>{0, 1, 2, 4, 3};
  g.tensors["t"].shape = {1, 2, 5, 4, 3};
  g.nodes[3].inputs[3] = int64s(g, "axes2", {2});  // a Slice over rows
  g.tensors["z"].shape = {1, 10, 0, 4};
  Context ctx;
  ctx.graph = g;
  channel_copies(ctx);
  EXPECT_EQ(ctx.graph.nodes.size(), 4u);
  for (const auto& n : ctx.graph.nodes) EXPECT_NE(n.op_type, "QLinearConv");
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

const ir::Graph& quantized_fixture() {
  static const ir::Graph q = [] {
    const ir::Graph model = onnxio::load_onnx(kStem + ".onnx");
    return quant::quantize(model, fixture_inputs(model), {});
  }();
  return q;
}

// The passes of lower_unsplit up to (not including) fold_channel_copies.
Context lowered_before_fold(const ir::Graph& model, const isa::SaArch& arch) {
  Context ctx;
  ctx.options.arch = arch;
  ctx.graph = model;
  for (auto pass : {remove_noops,           reduce_mean_to_pool, fuse_batchnorm,
                    normalize_quantization, canonicalize_qdq,    hard_activations,
                    constant_arithmetic,    broadcast_mul,       decompose_conv_transpose,
                    quant_params,           channel_copies,      check_shapes,
                    assign_devices,         partition,           legalize_host_ops,
                    lower_to_gati,          fuse_tail,           pools_as_convs,
                    lower_concat,           clear_resize_padding})
    pass(ctx);
  return ctx;
}

std::size_t copies(const ir::Graph& g) {
  std::size_t n = 0;
  for (const auto& node : g.nodes) n += !channel_copy_sources(g, node).empty();
  return n;
}

TEST(ChannelCopies, OnTheFixtureTheRewrittenModelEqualsTheOriginalOnTheReference) {
  const ir::Graph& q = quantized_fixture();
  Context ctx;
  ctx.graph = q;
  quant_params(ctx);
  channel_copies(ctx);
  EXPECT_EQ(copies(ctx.graph), 3u + 4u);  // three shuffles, two chunks of two Slices
  for (const auto& in : fixture_inputs(q)) {
    const auto a = ref::run_graph(q, in);
    const auto b = ref::run_graph(ctx.graph, in);
    EXPECT_EQ(a.at(q.outputs[0]).data, b.at(q.outputs[0]).data);
  }
}

TEST(FoldChannelCopies, FoldsShufflesIntoTheConcatCopiesAndSlicesIntoTheirConvsExactly) {
  const ir::Graph& q = quantized_fixture();
  for (const isa::SaArch& arch : {isa::kArch9x8x8, isa::kArch9x4x4}) {
    SCOPED_TRACE(arch.str());
    const Context unfolded = lowered_before_fold(q, arch);
    Context folded = unfolded;
    fold_channel_copies(folded);
    // Before: three shuffles and the two second-half Slices are copies (the first-half Slices
    // carry their concat input's requantization, fuse_tail). After: the shuffles live in the
    // concat copies' kernel order, the Slices in the branch convs' weight columns.
    EXPECT_EQ(copies(unfolded.graph), 5u);
    EXPECT_EQ(copies(folded.graph), 0u);
    EXPECT_EQ(folded.graph.nodes.size() + 5, unfolded.graph.nodes.size());
    for (const auto& in : fixture_inputs(q)) {
      const auto a = ref::run_graph(unfolded.graph, in);
      const auto b = ref::run_graph(folded.graph, in);
      EXPECT_EQ(a.at(q.outputs[0]).data, b.at(q.outputs[0]).data);
    }
  }
}

TEST(FoldChannelCopies, TheFixtureRunsWhollyOnTheDeviceBitExact) {
  const ir::Graph& q = quantized_fixture();
  // (16,1,16 refuses this fixture for its chained-program limit, an erratum of its own; on 9,4,4
  // pad_kernel_iterations pads the depthwise convs with an odd KernelItr.)
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
