// lower_to_gati and fuse_tail: QOperator ops become npukit.gati nodes with the integer
// requantization parameters worked out by hand (DECISIONS.md 4, 6, 8).
#include "compiler/passes.h"
#include "compiler/test_graphs.h"

#include <gtest/gtest.h>

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;

Context lowered(const ir::Graph& g, bool fuse, bool allow_errata = false) {
  Context ctx;
  ctx.options.allow_errata = allow_errata;
  ctx.graph = g;
  assign_devices(ctx);
  lower_to_gati(ctx);
  if (fuse) fuse_tail(ctx);
  return ctx;
}

const ir::Node& only(const Context& ctx, const std::string& op) {
  for (const auto& n : ctx.graph.nodes)
    if (n.op_type == op) return n;
  throw std::runtime_error("no " + op);
}

TEST(LowerToGati, ConvScalesFoldIntoQuantScaleAndShift) {
  // M = 0.02 * 0.01 / 0.05 = 0.004 -> 16777 / 2^22.
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 3, 6, 6});
  auto y = b.qconv("conv", "x", 0.02f, std::vector<std::int8_t>(4 * 3 * 9, 1), {4, 3, 3, 3}, 0.01f,
                   0.05f, {1, 2, 3, 4}, {1, 0, 1, 2}, 1);
  b.g.outputs = {y};
  const Context ctx = lowered(b.g, false);
  const ir::Node& c = only(ctx, "GatiConv");
  EXPECT_EQ(c.domain, "npukit.gati");
  EXPECT_EQ(c.name, "conv");
  EXPECT_EQ(c.get_int("quant_scale", 0), 16777);
  EXPECT_EQ(c.get_int("quant_shift", 0), 22);
  EXPECT_EQ(c.get_ints("pads", {}), (std::vector<std::int64_t>{1, 0, 1, 2}));
  EXPECT_EQ(c.inputs[0], "x");
  EXPECT_EQ(c.inputs[1], "conv_w");
  EXPECT_EQ(c.inputs[2], "conv_b");
  EXPECT_EQ(c.outputs[0], y);
}

TEST(LowerToGati, AddMulSigmoidScales) {
  GraphBuilder b;
  b.input("a", ir::DType::kInt8, {1, 8, 2, 2});
  b.input("c", ir::DType::kInt8, {1, 8, 2, 2});
  b.value("sum", ir::DType::kInt8, {1, 8, 2, 2});
  b.value("prod", ir::DType::kInt8, {1, 8, 2, 2});
  b.value("sig", ir::DType::kInt8, {1, 8, 2, 2});
  const auto sa = b.f32("sa", 0.5f), za = b.i8("za", 0), sc = b.f32("sc", 0.25f),
             sy = b.f32("sy", 1.0f);
  b.node("QLinearAdd", "com.microsoft", {"a", sa, za, "c", sc, za, sy, za}, {"sum"}, "add");
  b.node("QLinearMul", "com.microsoft", {"sum", sy, za, "c", sc, za, b.f32("sp", 0.125f), za},
         {"prod"}, "mul");
  b.node("QLinearSigmoid", "com.microsoft", {"prod", "sp", za, b.f32("ss", 1.0f / 256), za},
         {"sig"}, "sigmoid");
  b.g.outputs = {"sig"};
  const Context ctx = lowered(b.g, false);
  ASSERT_EQ(ctx.graph.nodes.size(), 3u);
  const ir::Node& add = ctx.graph.nodes[0];
  // s_o = max(0.5, 0.25) / 64: a_scale = 0.5 * 1024 / s_o = 65536, b_scale = 32768,
  // M = s_o / s_y = 1/128 -> 16384 / 2^21 (exact; the largest shift that fits).
  EXPECT_EQ(add.get_string("op", ""), "add");
  EXPECT_EQ(add.get_int("a_scale", 0), 65536);
  EXPECT_EQ(add.get_int("b_scale", 0), 32768);
  EXPECT_EQ(add.get_int("quant_scale", 0), 16384);
  EXPECT_EQ(add.get_int("quant_shift", 0), 21);
  const ir::Node& mul = ctx.graph.nodes[1];
  // a_scale = b_scale = 1024, M = 1 * 0.25 / 0.125 = 2 = 16384 / 2^13.
  EXPECT_EQ(mul.get_string("op", ""), "mult");
  EXPECT_EQ(mul.get_int("a_scale", 0), 1024);
  EXPECT_EQ(mul.get_int("quant_scale", 0), 16384);
  EXPECT_EQ(mul.get_int("quant_shift", 0), 13);
  const ir::Node& sig = ctx.graph.nodes[2];
  // a_scale = 0.125 * 2^16 = 8192, M = 1 / (1/256) = 256 = 16384 / 2^6.
  EXPECT_EQ(sig.get_string("op", ""), "sigmoid");
  EXPECT_EQ(sig.get_int("a_scale", 0), 8192);
  EXPECT_EQ(sig.get_int("quant_scale", 0), 16384);
  EXPECT_EQ(sig.get_int("quant_shift", 0), 6);
}

TEST(LowerToGati, GlobalAveragePoolScale) {
  // s_x / (s_y * H*W) = 0.5 / (0.25 * 16) = 0.125 = 16384 / 2^17.
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 8, 4, 4});
  b.value("g", ir::DType::kInt8, {1, 8, 1, 1});
  b.node("QLinearGlobalAveragePool", "com.microsoft",
         {"x", b.f32("sx", 0.5f), b.i8("z", 0), b.f32("sy", 0.25f), "z"}, {"g"}, "gap");
  b.g.outputs = {"g"};
  const Context ctx = lowered(b.g, false);
  const ir::Node& p = only(ctx, "GatiPool");
  EXPECT_EQ(p.get_string("mode", ""), "global_average");
  EXPECT_EQ(p.get_int("pool_scale", 0), 16384);
  EXPECT_EQ(p.get_int("pool_shift", 0), 17);
}

TEST(FuseTail, ReluAndGlobalPoolJoinTheConvTail) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 8, 4, 4});
  auto c = b.qconv("conv", "x", 0.02f, std::vector<std::int8_t>(8 * 8 * 9, 1), {8, 8, 3, 3}, 0.01f,
                   0.05f, {}, {1, 1, 1, 1});
  auto r = b.relu("relu", c);
  b.value("g", ir::DType::kInt8, {1, 8, 1, 1});
  b.node("QLinearGlobalAveragePool", "com.microsoft",
         {r, "conv_ys", "conv_yz", b.f32("sg", 0.05f / 16), "conv_yz"}, {"g"}, "gap");
  b.g.outputs = {"g"};
  // GblPoolEn is a v1.0.0 erratum (gati.md 14.15): fused only with --allow-errata; otherwise
  // pools_as_convs makes the pool a depthwise conv (pass_pools_as_convs_test.cpp).
  EXPECT_EQ(lowered(b.g, true).graph.nodes.size(), 2u);
  Context ctx = lowered(b.g, true, true);
  ASSERT_EQ(ctx.graph.nodes.size(), 1u);
  const ir::Node& conv = ctx.graph.nodes[0];
  EXPECT_EQ(conv.get_string("act", ""), "relu");
  EXPECT_EQ(conv.get_int("quant_scale", 0), 16777);  // unchanged: ReLU's rescale is exactly 1
  EXPECT_EQ(conv.get_int("quant_shift", 0), 22);
  EXPECT_EQ(conv.get_int("global_pool", 0), 1);
  EXPECT_EQ(conv.get_int("global_pool_scale", 0), 16384);  // (s_x / s_y) / 16 = 1
  EXPECT_EQ(conv.get_int("global_pool_shift", 0), 14);
  EXPECT_EQ(conv.outputs[0], "g");
  EXPECT_NE(ctx.placement["relu"].reason.find("fused"), std::string::npos);
}

TEST(LowerToGati, LeakyReluIsTwoEltwiseAddsNotTheFlooringTail) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 8, 4, 4});
  auto c = b.qconv("conv", "x", 0.02f, std::vector<std::int8_t>(8 * 8 * 9, 1), {8, 8, 3, 3}, 0.01f,
                   0.05f, {}, {1, 1, 1, 1});
  const auto l = b.qleaky("leaky", c, "conv_ys", "conv_yz", 0.1f, 0.1f);
  b.g.outputs = {l};
  // The device form (s_x / s_y = 0.5, alpha 0.1: x = -10 (2j + 1) are exact ties onnxruntime
  // rounds by float32 noise, so by default this LeakyReLU, a graph output, runs on the host).
  Context ctx;
  ctx.options.leaky_relu_ties_to_host = false;
  ctx.graph = b.g;
  assign_devices(ctx);
  lower_to_gati(ctx);
  fuse_tail(ctx);
  ASSERT_EQ(ctx.graph.nodes.size(), 3u);
  const ir::Node& conv = ctx.graph.nodes[0];
  // The conv keeps its own output scale: M = 0.02 * 0.01 / 0.05 = 0.004 -> 16777 / 2^22.
  EXPECT_EQ(conv.get_string("act", "none"), "none");
  EXPECT_EQ(conv.get_int("quant_scale", 0), 16777);
  EXPECT_EQ(conv.get_int("quant_shift", 0), 22);
  const ir::Node& relu = ctx.graph.nodes[1];  // r = relu(x), an identity rescale
  EXPECT_EQ(relu.op_type, "GatiEltwise");
  EXPECT_EQ(relu.inputs[0], conv.outputs[0]);
  EXPECT_EQ(relu.get_string("act", ""), "relu");
  EXPECT_EQ(relu.get_int("a_scale", 0), 65536);
  EXPECT_EQ(relu.get_int("quant_scale", 0) * 64, std::int64_t{1} << relu.get_int("quant_shift", 0));
  const ir::Node& leaky = ctx.graph.nodes[2];  // y = x A + r B, A + B = 2^17
  EXPECT_EQ(leaky.name, "leaky");
  EXPECT_EQ(leaky.inputs, (std::vector<std::string>{conv.outputs[0], relu.outputs[0]}));
  EXPECT_EQ(leaky.get_string("act", "none"), "none");
  // Nominally A = 0.1 * 2^17 = 13107.2, B = 2^17 - A and M = s_x / s_y * 2^(10 - 17) = 2^-8 =
  // 16384 / 2^22; the integers may move a few steps to agree with onnxruntime's float32 table.
  EXPECT_NEAR(static_cast<double>(leaky.get_int("a_scale", 0)), 13107.2, 3.5);
  EXPECT_NEAR(static_cast<double>(leaky.get_int("b_scale", 0)), 117964.8, 3.5);
  EXPECT_NEAR(static_cast<double>(leaky.get_int("quant_scale", 0)), 16384, 3);
  EXPECT_EQ(leaky.get_int("quant_shift", 0), 22);
  EXPECT_EQ(leaky.outputs[0], l);
}

TEST(FuseTail, ExposedValuesAreNotFused) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 8, 4, 4});
  auto c = b.qconv("conv", "x", 0.02f, std::vector<std::int8_t>(8 * 8 * 9, 1), {8, 8, 3, 3}, 0.01f,
                   0.05f, {}, {1, 1, 1, 1});
  auto r = b.relu("relu", c);
  b.g.outputs = {c, r};
  Context ctx = lowered(b.g, true);
  EXPECT_EQ(ctx.graph.nodes.size(), 2u);
}

}  // namespace
}  // namespace npukit::compiler
