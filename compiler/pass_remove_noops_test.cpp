// remove_noops: Identity, same-type Cast, all-zero Pad and 1x1 stride-1 pools disappear before
// placement; consumers and graph outputs are rewired; anything that changes values stays.
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

Context run_pass(const ir::Graph& g) {
  Context ctx;
  ctx.graph = g;
  remove_noops(ctx);
  return ctx;
}

TEST(RemoveNoops, IdentityCastAndZeroPadGoConsumersReadTheInput) {
  GraphBuilder b;
  b.input("x", ir::DType::kFloat32, {1, 2, 4, 4});
  b.value("a", ir::DType::kFloat32, {1, 2, 4, 4});
  b.value("b", ir::DType::kFloat32, {1, 2, 4, 4});
  b.value("c", ir::DType::kFloat32, {1, 2, 4, 4});
  b.value("d", ir::DType::kFloat32, {1, 2, 4, 4});
  b.value("e", ir::DType::kFloat32, {1, 2, 4, 4});
  b.node("Relu", "", {"x"}, {"a"}, "relu");
  b.node("Identity", "", {"a"}, {"b"}, "id");
  b.node("Cast", "", {"b"}, {"c"}, "cast").attributes["to"] = std::int64_t{1};
  b.node("Pad", "",
         {"c", b.constant<std::int64_t>("p", ir::DType::kInt64, {8}, {0, 0, 0, 0, 0, 0, 0, 0})},
         {"d"}, "pad");
  b.node("Sigmoid", "", {"d"}, {"e"}, "sig");
  b.g.outputs = {"e"};
  Context ctx = run_pass(b.g);
  EXPECT_EQ(op_types(ctx.graph), (std::vector<std::string>{"Relu", "Sigmoid"}));
  EXPECT_EQ(ctx.graph.nodes[1].inputs[0], "a");
  EXPECT_NE(ctx.placement["pad"].reason.find("removed"), std::string::npos);
}

TEST(RemoveNoopsKeeps, ValueChangingNodes) {
  GraphBuilder b;
  b.input("x", ir::DType::kFloat32, {1, 2, 4, 4});
  b.value("a", ir::DType::kInt32, {1, 2, 4, 4});
  b.value("b", ir::DType::kInt32, {1, 2, 5, 5});
  b.value("c", ir::DType::kInt32, {1, 2, 4, 4});
  b.value("d", ir::DType::kInt32, {1, 2, 4, 4});
  b.node("Cast", "", {"x"}, {"a"}, "cast").attributes["to"] = std::int64_t{6};
  b.node("Pad", "",
         {"a", b.constant<std::int64_t>("p", ir::DType::kInt64, {8}, {0, 0, 0, 0, 0, 0, 1, 1})},
         {"b"}, "pad");
  auto& mp = b.node("MaxPool", "", {"b"}, {"c"}, "pool2");
  mp.attributes["kernel_shape"] = std::vector<std::int64_t>{2, 2};
  mp.attributes["strides"] = std::vector<std::int64_t>{1, 1};
  auto& s2 = b.node("MaxPool", "", {"c"}, {"d"}, "pool1s2");
  s2.attributes["kernel_shape"] = std::vector<std::int64_t>{1, 1};
  s2.attributes["strides"] = std::vector<std::int64_t>{2, 2};
  b.g.outputs = {"d"};
  Context ctx = run_pass(b.g);
  EXPECT_EQ(ctx.graph.nodes.size(), 4u);
}

TEST(RemoveNoops, AGraphOutputKeepsItsName) {
  GraphBuilder b;
  b.input("x", ir::DType::kFloat32, {1, 2, 4, 4});
  b.value("a", ir::DType::kFloat32, {1, 2, 4, 4});
  b.value("y", ir::DType::kFloat32, {1, 2, 4, 4});
  b.node("Relu", "", {"x"}, {"a"}, "relu");
  b.node("Identity", "", {"a"}, {"y"}, "id");
  b.g.outputs = {"y"};
  Context ctx = run_pass(b.g);
  ASSERT_EQ(ctx.graph.nodes.size(), 1u);
  EXPECT_EQ(ctx.graph.nodes[0].outputs[0], "y");  // the Relu now writes the output itself
  EXPECT_EQ(ctx.graph.find("a"), nullptr);

  GraphBuilder c;  // input straight to output: the Identity must stay
  c.input("x", ir::DType::kFloat32, {1, 2});
  c.value("y", ir::DType::kFloat32, {1, 2});
  c.node("Identity", "", {"x"}, {"y"}, "id");
  c.g.outputs = {"y"};
  EXPECT_EQ(run_pass(c.g).graph.nodes.size(), 1u);
}

// vgg11/alexnet end their features with MaxPool(2x2) then a 1x1 stride-1 pool: conv -> pool ->
// pool is a v1.0.0 erratum the compiler refuses; without the no-op it is conv -> pool.
TEST(RemoveNoops, OneByOnePoolAfterAPoolNoLongerTripsConvPoolPool) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 8, 8, 8});
  auto c = b.qconv("conv", "x", 0.05f, random_int8(8 * 8 * 9, 3), {8, 8, 3, 3}, 0.01f, 0.1f, {},
                   {1, 1, 1, 1});
  auto p = b.maxpool("pool", c, 2, 2);
  auto q = b.maxpool("pool1x1", p, 1, 1);
  b.g.outputs = {q};
  for (const isa::SaArch& arch : {isa::kArch9x4x4, isa::kArch9x8x8}) {
    CompileOptions opt;
    opt.arch = arch;
    const CompileResult r = compile(b.g, opt);
    EXPECT_EQ(r.program.layers.size(), 2u);
    std::map<std::string, ir::Tensor> in = {
        {"x", testing::int8_tensor("x", {1, 8, 8, 8}, random_int8(512, 4))}};
    const auto dev = testing::run_on_device(r, in);
    const auto ref = testing::run_on_reference(r.ctx, r.program, in);
    ASSERT_TRUE(dev.count(q));
    EXPECT_EQ(dev.at(q), ref.at(q)) << arch.str();
  }
}

}  // namespace
}  // namespace npukit::compiler
