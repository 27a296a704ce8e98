// quant_params: every int8 value's scale and zero point, read off the QOperator ops around it
// (values set by hand in the graph), passed through MaxPool/Relu/Flatten.
#include "compiler/passes.h"
#include "compiler/test_graphs.h"

#include <gtest/gtest.h>

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;

TEST(QuantParams, ReadsScalesFromQOperatorOpsAndPassesThemThroughPools) {
  GraphBuilder b;
  b.input("x", ir::DType::kFloat32, {1, 4, 6, 6});
  b.value("xq", ir::DType::kInt8, {1, 4, 6, 6});
  b.node("QuantizeLinear", "", {"x", b.f32("sx", 0.25f), b.i8("zx", 3)}, {"xq"}, "q");
  auto c = b.qconv("conv", "xq", 0.25f, std::vector<std::int8_t>(4 * 4 * 9, 1), {4, 4, 3, 3}, 0.01f,
                   0.5f, {}, {1, 1, 1, 1});
  auto p = b.maxpool("pool", c, 2, 2);
  b.value("flat", ir::DType::kInt8, {1, 36});
  b.node("Flatten", "", {p}, {"flat"}, "flatten");
  b.value("y", ir::DType::kFloat32, {1, 36});
  b.node("DequantizeLinear", "", {"flat", b.f32("sy", 0.5f), b.i8("zy", 0)}, {"y"}, "dq");
  b.g.outputs = {"y"};
  Context ctx;
  ctx.graph = b.g;
  quant_params(ctx);
  ASSERT_TRUE(ctx.quantization.count("xq"));
  EXPECT_FLOAT_EQ(static_cast<float>(ctx.quantization["xq"].scale), 0.25f);
  EXPECT_EQ(ctx.quantization["xq"].zero_point, 3);  // from the QuantizeLinear that makes it
  EXPECT_FLOAT_EQ(static_cast<float>(ctx.quantization[c].scale), 0.5f);  // QLinearConv's y_scale
  EXPECT_FLOAT_EQ(static_cast<float>(ctx.quantization[p].scale), 0.5f);  // through the MaxPool
  EXPECT_FLOAT_EQ(static_cast<float>(ctx.quantization["flat"].scale), 0.5f);
  EXPECT_FALSE(ctx.quantization.count("x"));  // float
}

}  // namespace
}  // namespace npukit::compiler
