// reduce_mean_to_pool: ReduceMean over H and W becomes GlobalAveragePool (+ Flatten without
// keepdims, moved behind a QuantizeLinear), and then runs on the device like any global pool.
#include "compiler/compiler.h"
#include "compiler/device_run.h"
#include "compiler/passes.h"
#include "compiler/test_graphs.h"

#include <gtest/gtest.h>

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;
using testing::op_types;
using testing::random_int8;

// int8 x -> QLinearConv -> DQ -> ReduceMean(axes, keepdims) -> Q -> [more]
GraphBuilder conv_mean(bool keepdims, std::vector<std::int64_t> axes) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 8, 6, 6});
  auto c = b.qconv("conv", "x", 0.05f, random_int8(8 * 8 * 9, 5), {8, 8, 3, 3}, 0.01f, 0.1f, {},
                   {1, 1, 1, 1});
  b.value("cd", ir::DType::kFloat32, {1, 8, 6, 6});
  b.node("DequantizeLinear", "", {c, "conv_ys", "conv_yz"}, {"cd"}, "dq");
  const ir::Shape ms = keepdims ? ir::Shape{1, 8, 1, 1} : ir::Shape{1, 8};
  b.value("m", ir::DType::kFloat32, ms);
  auto& r = b.node("ReduceMean", "", {"cd"}, {"m"}, "mean");
  r.attributes["axes"] = axes;
  r.attributes["keepdims"] = std::int64_t{keepdims ? 1 : 0};
  b.value("mq", ir::DType::kInt8, ms);
  b.node("QuantizeLinear", "", {"m", b.f32("ms", 0.02f), b.i8("mz", 0)}, {"mq"}, "q");
  b.g.outputs = {"mq"};
  return b;
}

TEST(ReduceMeanToPool, KeepdimsBecomesGlobalAveragePool) {
  Context ctx;
  ctx.graph = conv_mean(true, {2, 3}).g;
  reduce_mean_to_pool(ctx);
  EXPECT_EQ(op_types(ctx.graph), (std::vector<std::string>{"QLinearConv", "DequantizeLinear",
                                                           "GlobalAveragePool", "QuantizeLinear"}));
  EXPECT_EQ(ctx.graph.nodes[2].outputs[0], "m");
}

TEST(ReduceMeanToPool, WithoutKeepdimsTheFlattenGoesBehindTheQuantizer) {
  Context ctx;
  ctx.graph = conv_mean(false, {-1, -2}).g;
  reduce_mean_to_pool(ctx);
  ASSERT_EQ(op_types(ctx.graph),
            (std::vector<std::string>{"QLinearConv", "DequantizeLinear", "GlobalAveragePool",
                                      "QuantizeLinear", "Flatten"}));
  const ir::Node& q = ctx.graph.nodes[3];
  EXPECT_EQ(ctx.graph.tensor(q.outputs[0]).shape, (ir::Shape{1, 8, 1, 1}));
  EXPECT_EQ(ctx.graph.nodes[4].inputs[0], q.outputs[0]);
  EXPECT_EQ(ctx.graph.nodes[4].outputs[0], "mq");
}

TEST(ReduceMeanToPool, OtherAxesStay) {
  Context ctx;
  ctx.graph = conv_mean(true, {1, 2}).g;
  reduce_mean_to_pool(ctx);
  EXPECT_EQ(ctx.graph.nodes[2].op_type, "ReduceMean");
}

TEST(ReduceMeanToPool, RunsOnTheDeviceBitExact) {
  for (bool keepdims : {true, false}) {
    const ir::Graph g = conv_mean(keepdims, {2, 3}).g;
    for (const isa::SaArch& arch : isa::kSupportedArchs) {
      CompileOptions opt;
      opt.arch = arch;
      opt.allow_errata = arch == isa::kArch16x1x16;
      const CompileResult r = compile(g, opt);
      EXPECT_FALSE(r.program.layers.empty());
      for (const auto& n : r.ctx.graph.nodes)  // the mean itself runs on the device
        EXPECT_TRUE(n.op_type != "ReduceMean" && n.op_type != "GlobalAveragePool" &&
                    n.op_type != "QLinearGlobalAveragePool")
            << n.op_type << " left on the host";
      std::map<std::string, ir::Tensor> in = {
          {"x", testing::int8_tensor("x", {1, 8, 6, 6}, random_int8(288, 6))}};
      const auto dev = testing::run_on_device(r, in);
      const auto ref = testing::run_on_reference(r.ctx, r.program, in);
      ASSERT_FALSE(ref.empty());
      for (const auto& [name, v] : ref) EXPECT_EQ(dev.at(name), v) << name << " " << arch.str();
    }
  }
}

}  // namespace
}  // namespace npukit::compiler
