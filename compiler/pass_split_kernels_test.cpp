// split_kernels and check_limits on small lowered graphs.
#include "common/error.h"
#include "compiler/device_run.h"
#include "compiler/geometry.h"
#include "compiler/passes.h"
#include "compiler/test_graphs.h"

#include <gtest/gtest.h>

#include <random>

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;

Context lowered(const ir::Graph& g, CompileOptions opt = {}) {
  Context ctx;
  ctx.options = opt;
  ctx.graph = g;
  assign_devices(ctx);
  lower_to_gati(ctx);
  fuse_tail(ctx);
  split_kernels(ctx);
  return ctx;
}

TEST(SplitKernels, FiveByFiveBecomesFiveRowPiecesOn9x8x8) {
  // KW = 5: a band holds floor(9 / 5) = 1 row. pads 2: piece r has pads [2 - r, 2, r - 2, 2].
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 3, 10, 9});
  std::vector<std::int8_t> w(4 * 3 * 25);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<std::int8_t>(i % 50);
  auto y = b.qconv("conv", "x", 0.02f, w, {4, 3, 5, 5}, 0.01f, 0.05f, {5, 6, 7, 8}, {2, 2, 2, 2});
  auto r = b.relu("relu", y);
  b.g.outputs = {r};
  const Context ctx = lowered(b.g);
  ASSERT_EQ(ctx.graph.nodes.size(), 5u);
  for (int p = 0; p < 5; ++p) {
    const ir::Node& n = ctx.graph.nodes[p];
    EXPECT_EQ(n.op_type, "GatiConv");
    // The lowered piece keeps the 5x5 shape and pads (the reference runs it as is) with only
    // kernel row p non-zero; the hardware piece is row p alone with pads [2 - p, 2, p - 2, 2].
    EXPECT_EQ(n.get_ints("pads", {}), (std::vector<std::int64_t>{2, 2, 2, 2}));
    EXPECT_EQ(n.get_ints("kernel_rows", {}), (std::vector<std::int64_t>{p, p + 1}));
    const ir::Tensor& piece_w = ctx.graph.tensor(n.inputs[1]);
    EXPECT_EQ(piece_w.shape, (ir::Shape{4, 3, 5, 5}));
    for (int r = 0; r < 5; ++r)
      EXPECT_EQ(piece_w.as<std::int8_t>()[((2 * 3 + 1) * 5 + r) * 5 + 3],
                r == p ? w[((2 * 3 + 1) * 5 + p) * 5 + 3] : 0);
    const auto geo = conv_geometry(ctx.graph, n, isa::kArch9x8x8);
    EXPECT_EQ(geo.kh, 1);
    EXPECT_EQ(geo.kw, 5);
    EXPECT_EQ(geo.pad_top, 2 - p);
    EXPECT_EQ(geo.pad_bottom, p - 2);
    EXPECT_EQ(geo.oh, 10);
    EXPECT_EQ(geo.ow, 9);
    if (p < 4) {
      EXPECT_EQ(n.get_int("quant_en", 1), 0);
      EXPECT_EQ(n.inputs[2], "");  // bias only once, in the last piece
      EXPECT_EQ(ctx.graph.tensor(n.outputs[0]).dtype, ir::DType::kInt32);
      EXPECT_FALSE(n.has("act"));
    } else {
      EXPECT_EQ(n.name, "conv");
      EXPECT_EQ(n.inputs[2], "conv_b");
      EXPECT_EQ(n.get_string("act", ""), "relu");
      EXPECT_EQ(n.outputs[0], r);
    }
    if (p > 0) {
      ASSERT_EQ(n.inputs.size(), 4u);
      EXPECT_EQ(n.inputs[3], ctx.graph.nodes[p - 1].outputs[0]);
    }
  }
}

TEST(SplitKernels, WideInputsWithManyOutputsSplitByChannelGroupIntoViewsBitExact) {
  // A 5x5 conv over 16 channels with 40x40 = 1600 outputs: row pieces over all 16 channels would
  // need the accumulant region for their channel iterations and for the previous piece's sums
  // at once, which v16 cannot give. Per 8-channel group (a view of the device-made input, no
  // copy) it is 5 one-row pieces each, 10 chained through int32 sums.
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 3, 40, 40});
  std::mt19937 rng(11);
  auto weights = [&](std::size_t n) {
    std::vector<std::int8_t> w(n);
    for (auto& e : w) e = static_cast<std::int8_t>(static_cast<int>(rng() % 255) - 127);
    return w;
  };
  auto a = b.relu("relu_a", b.qconv("a", "x", 0.05f, weights(16 * 3 * 9), {16, 3, 3, 3}, 0.01f,
                                    0.08f, std::vector<std::int32_t>(16, 100), {1, 1, 1, 1}));
  auto y = b.qconv("conv", a, 0.08f, weights(16 * 16 * 25), {16, 16, 5, 5}, 0.01f, 0.6f,
                   std::vector<std::int32_t>(16, -300), {2, 2, 2, 2});
  b.g.outputs = {b.relu("relu", y)};
  const Context ctx = lowered(b.g);
  std::vector<std::string> pieces, views;
  for (const auto& n : ctx.graph.nodes) {
    if (n.op_type == "Slice") views.push_back(n.name);
    if (n.op_type == "GatiConv" && n.name != "a") pieces.push_back(n.name);
  }
  EXPECT_EQ(views, (std::vector<std::string>{"conv_in0", "conv_in8"}));
  ASSERT_EQ(pieces.size(), 10u);
  EXPECT_EQ(pieces.front(), "conv_channels0_rows0_1");
  EXPECT_EQ(pieces[5], "conv_channels8_rows0_1");
  EXPECT_EQ(pieces.back(), "conv");
  for (const auto& v : views) EXPECT_TRUE(ctx.on_device(v)) << v;

  // Compiled whole: the device's outputs equal the reference executor's on the lowering before
  // split_kernels (one 5x5 GatiConv over all 16 channels).
  const CompileResult r = compile(b.g, {});
  for (unsigned seed : {1u, 2u}) {
    std::mt19937 in_rng(seed);
    std::vector<std::int8_t> v(3 * 40 * 40);
    for (auto& e : v) e = static_cast<std::int8_t>(static_cast<int>(in_rng() % 256) - 128);
    const ref::TensorMap sample{{"x", testing::int8_tensor("x", {1, 3, 40, 40}, v)}};
    const auto dev_in = testing::device_inputs(r, sample);
    const auto dev = testing::run_on_device(r, dev_in);
    const auto ref = testing::run_lowered_on_reference(b.g, {}, r, dev_in);
    ASSERT_FALSE(ref.empty());
    for (const auto& [name, values] : ref) EXPECT_EQ(dev.at(name), values) << name;
  }
}

TEST(SplitKernels, NarrowKernelsUseThreeRowBands) {
  // 5x3: bands of 3 rows: rows 0..2 (hardware pads [1, 1, -1, 1]) and 3..4 ([-2, 1, 1, 1]).
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 4, 7, 7});
  auto y = b.qconv("conv", "x", 0.02f, std::vector<std::int8_t>(2 * 4 * 15, 3), {2, 4, 5, 3}, 0.01f,
                   0.05f, {}, {1, 1, 1, 1});
  b.g.outputs = {y};
  const Context ctx = lowered(b.g);
  ASSERT_EQ(ctx.graph.nodes.size(), 2u);
  const auto g0 = conv_geometry(ctx.graph, ctx.graph.nodes[0], isa::kArch9x8x8);
  const auto g1 = conv_geometry(ctx.graph, ctx.graph.nodes[1], isa::kArch9x8x8);
  EXPECT_EQ(g0.kh, 3);
  EXPECT_EQ(g0.pad_top, 1);
  EXPECT_EQ(g0.pad_bottom, -1);
  EXPECT_EQ(g1.kh, 2);
  EXPECT_EQ(g1.pad_top, -2);
  EXPECT_EQ(g1.pad_bottom, 1);
  EXPECT_EQ(g0.oh, g1.oh);
}

ir::Graph single_conv(std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t stride = 1) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, c, h, w});
  auto y = b.qconv("conv", "x", 0.02f, std::vector<std::int8_t>(8 * c * 9, 1), {8, c, 3, 3}, 0.01f,
                   0.05f, {}, {1, 1, 1, 1}, stride);
  b.g.outputs = {y};
  return b.g;
}

std::string limit_error(const ir::Graph& g, CompileOptions opt = {}) {
  try {
    Context ctx = lowered(g, opt);
    check_limits(ctx);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CheckLimits, HardwareLimitsNameTheLayerAndTheLimit) {
  const std::string wide = limit_error(single_conv(3, 8, 1100));
  EXPECT_NE(wide.find("'conv'"), std::string::npos) << wide;
  EXPECT_NE(wide.find("input width is 1100"), std::string::npos) << wide;
  const std::string stride = limit_error(single_conv(3, 16, 16, 5));
  EXPECT_NE(stride.find("stride is 5"), std::string::npos) << stride;
  const std::string channels = limit_error(single_conv(5000, 4, 4));
  EXPECT_NE(channels.find("input channels is 5000"), std::string::npos) << channels;
  EXPECT_EQ(limit_error(single_conv(3, 16, 16, 4)), "");
}

TEST(CheckLimits, TallImageErratumIsRefusedUnlessAllowed) {
  // gati.md 14.6: 12x8 (height 1.5x width) hangs, 11x8 works.
  const std::string tall = limit_error(single_conv(3, 12, 8));
  EXPECT_NE(tall.find("erratum"), std::string::npos) << tall;
  EXPECT_NE(tall.find("--allow-errata"), std::string::npos) << tall;
  EXPECT_EQ(limit_error(single_conv(3, 11, 8)), "");
  EXPECT_NE(limit_error(single_conv(3, 48, 40)).find("48-high"), std::string::npos);
  CompileOptions allow;
  allow.allow_errata = true;
  Context ctx = lowered(single_conv(3, 12, 8), allow);
  check_limits(ctx);
  ASSERT_EQ(ctx.warnings.size(), 1u);
  EXPECT_NE(ctx.warnings[0].find("erratum"), std::string::npos);
}

TEST(CheckLimits, OddKernelItrOn9x4x4) {
  // conv1 has KN = 4 -> KernelItr 1 (odd) on 9,4,4; the conv after it is refused there only.
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 4, 8, 8});
  auto c1 = b.qconv("conv1", "x", 0.02f, std::vector<std::int8_t>(4 * 4 * 9, 1), {4, 4, 3, 3},
                    0.01f, 0.05f, {}, {1, 1, 1, 1});
  auto c2 = b.qconv("conv2", c1, 0.05f, std::vector<std::int8_t>(4 * 4 * 9, 1), {4, 4, 3, 3}, 0.01f,
                    0.05f, {}, {1, 1, 1, 1});
  b.g.outputs = {c2};
  CompileOptions small;
  small.arch = isa::kArch9x4x4;
  EXPECT_NE(limit_error(b.g, small).find("odd KernelItr"), std::string::npos);
  EXPECT_EQ(limit_error(b.g), "");
}

TEST(CheckLimits, OddKernelItrAfterADepthwiseConvIsPadded) {
  // A depthwise conv's kernels are its input channels: pad_kernel_iterations pads both (the RTL's
  // depthwise needs KN = IC), so the conv after it no longer follows an odd KernelItr.
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 4, 8, 8});
  auto dw = b.qconv("dw", "x", 0.02f, std::vector<std::int8_t>(4 * 9, 1), {4, 1, 3, 3}, 0.01f,
                    0.05f, {}, {1, 1, 1, 1}, 1, 4);
  auto c = b.qconv("conv", dw, 0.05f, std::vector<std::int8_t>(4 * 4 * 9, 1), {4, 4, 3, 3}, 0.01f,
                   0.05f, {}, {1, 1, 1, 1});
  b.g.outputs = {c};
  CompileOptions small;
  small.arch = isa::kArch9x4x4;
  Context ctx = lowered(b.g, small);
  pad_kernel_iterations(ctx);
  EXPECT_EQ(ctx.graph.nodes[0].get_int("kernel_count_padded", 0), 8);
  const ConvGeometry g = conv_geometry(ctx.graph, ctx.graph.nodes[0], small.arch);
  EXPECT_TRUE(g.depthwise);
  EXPECT_EQ(g.kn, 8);
  EXPECT_EQ(g.ic, 8);  // reads the input's padding channel group too
  EXPECT_EQ(g.kn_weights, 4);
  EXPECT_EQ(g.kitr, 2);
  EXPECT_NO_THROW(check_limits(ctx));
  // With --allow-errata nothing is padded and check_limits only warns.
  small.allow_errata = true;
  Context sim = lowered(b.g, small);
  pad_kernel_iterations(sim);
  EXPECT_FALSE(sim.graph.nodes[0].has("kernel_count_padded"));
  check_limits(sim);
  EXPECT_NE(::testing::PrintToString(sim.warnings).find("odd KernelItr (1, layer 'dw')"),
            std::string::npos);
}

TEST(CheckLimits, ConvPoolPoolIsRefused) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 8, 8, 8});
  auto c = b.qconv("conv", "x", 0.02f, std::vector<std::int8_t>(8 * 8 * 9, 1), {8, 8, 3, 3}, 0.01f,
                   0.05f, {}, {1, 1, 1, 1});
  auto p1 = b.maxpool("pool1", c, 2, 2);
  auto p2 = b.maxpool("pool2", p1, 2, 2);
  b.g.outputs = {p2};
  EXPECT_NE(limit_error(b.g).find("conv -> pool -> pool"), std::string::npos);
}

}  // namespace
}  // namespace npukit::compiler
