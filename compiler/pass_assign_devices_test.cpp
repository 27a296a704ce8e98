// assign_devices: which nodes could run on the Gati and why (partition then cuts the segments).
#include "common/error.h"
#include "compiler/passes.h"
#include "compiler/test_graphs.h"

#include <gtest/gtest.h>

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;

TEST(AssignDevices, LeadingAndTrailingHostWork) {
  GraphBuilder b;
  b.input("x", ir::DType::kFloat32, {1, 3, 8, 8});
  b.value("xq", ir::DType::kInt8, {1, 3, 8, 8});
  b.node("QuantizeLinear", "", {"x", b.f32("s", 0.1f), b.i8("z", 0)}, {"xq"}, "quant");
  auto c = b.qconv("conv", "xq", 0.1f, std::vector<std::int8_t>(4 * 3 * 9, 1), {4, 3, 3, 3}, 0.01f,
                   0.2f, {}, {1, 1, 1, 1});
  b.value("y", ir::DType::kFloat32, {1, 4, 8, 8});
  b.node("DequantizeLinear", "", {c, "conv_ys", "conv_yz"}, {"y"}, "dequant");
  b.value("sm", ir::DType::kFloat32, {1, 4, 8, 8});
  b.node("Softmax", "", {"y"}, {"sm"}, "softmax");
  b.g.outputs = {"sm"};
  Context ctx;
  ctx.graph = b.g;
  assign_devices(ctx);
  EXPECT_FALSE(ctx.on_device("quant"));
  EXPECT_TRUE(ctx.on_device("conv"));
  EXPECT_FALSE(ctx.on_device("dequant"));
  EXPECT_FALSE(ctx.on_device("softmax"));
  EXPECT_EQ(ctx.placement["quant"].reason.rfind("host: ", 0), 0u);
  EXPECT_EQ(ctx.placement["softmax"].reason.rfind("host: ", 0), 0u);
  EXPECT_NE(ctx.placement["softmax"].reason.find("Softmax has no Gati lowering"),
            std::string::npos);
}

TEST(AssignDevices, DecidesEachNodeOnItsOwn) {
  // conv1 -> DQ -> Softmax -> Q -> conv2: conv2 sits after host work and can still run on the
  // device (partition decides whether the cut pays for itself).
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 4, 6, 6});
  auto c1 = b.qconv("conv1", "x", 0.1f, std::vector<std::int8_t>(4 * 4 * 9, 1), {4, 4, 3, 3}, 0.01f,
                    0.2f, {}, {1, 1, 1, 1});
  b.value("f", ir::DType::kFloat32, {1, 4, 6, 6});
  b.node("DequantizeLinear", "", {c1, "conv1_ys"}, {"f"}, "dq");
  b.value("sm", ir::DType::kFloat32, {1, 4, 6, 6});
  b.node("Softmax", "", {"f"}, {"sm"}, "softmax");
  b.value("q", ir::DType::kInt8, {1, 4, 6, 6});
  b.node("QuantizeLinear", "", {"sm", b.f32("s", 0.01f)}, {"q"}, "requant");
  auto c2 = b.qconv("conv2", "q", 0.01f, std::vector<std::int8_t>(4 * 4 * 9, 1), {4, 4, 3, 3},
                    0.01f, 0.2f, {}, {1, 1, 1, 1});
  b.g.outputs = {c2};
  Context ctx;
  ctx.graph = b.g;
  assign_devices(ctx);
  EXPECT_TRUE(ctx.on_device("conv1"));
  EXPECT_FALSE(ctx.on_device("softmax"));
  EXPECT_TRUE(ctx.on_device("conv2"));
}

TEST(AssignDevices, ReasonsForUnsupportedInt8Ops) {
  GraphBuilder b;
  b.input("x", ir::DType::kUInt8, {1, 4, 6, 6});
  b.qconv("conv", "x", 0.1f, std::vector<std::int8_t>(4 * 4 * 9, 1), {4, 4, 3, 3}, 0.01f, 0.2f, {},
          {1, 1, 1, 1});
  Context ctx;
  ctx.graph = b.g;
  ctx.graph.outputs = {"conv_out"};
  EXPECT_NE(why_not_on_device(ctx.graph, ctx.graph.nodes[0], ctx.options).find("uint8"),
            std::string::npos);
  // Nothing for the device at all is an error that says what to do.
  EXPECT_THROW(assign_devices(ctx), Error);
}

TEST(AssignDevices, DilatedAndGroupedConvsStayOnTheHost) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 4, 6, 6});
  b.qconv("conv", "x", 0.1f, std::vector<std::int8_t>(4 * 2 * 9, 1), {4, 2, 3, 3}, 0.01f, 0.2f, {},
          {1, 1, 1, 1}, 1, 2);
  EXPECT_NE(why_not_on_device(b.g, b.g.nodes[0], {}).find("grouped"), std::string::npos);
  b.g.nodes[0].attributes["group"] = std::int64_t{1};
  b.g.nodes[0].attributes["dilations"] = std::vector<std::int64_t>{2, 2};
  EXPECT_NE(why_not_on_device(b.g, b.g.nodes[0], {}).find("dilat"), std::string::npos);
}

}  // namespace
}  // namespace npukit::compiler
