// fuse_batchnorm and check_shapes on small float / int8 graphs.
#include "common/error.h"
#include "compiler/passes.h"
#include "compiler/test_graphs.h"

#include <gtest/gtest.h>

#include <cmath>

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;

TEST(FuseBatchnorm, FoldsScaleAndShiftIntoTheConv) {
  // 2 kernels of 1x1 over 1 channel: w = [2, -1], b = [1, 0]; BN gamma [3, 1], beta [0.5, 0],
  // mean [1, 2], var [3, 0.25] with eps 1: factors 3/sqrt(4) = 1.5 and 1/sqrt(1.25).
  GraphBuilder b;
  b.input("x", ir::DType::kFloat32, {1, 1, 2, 2});
  b.constant<float>("w", ir::DType::kFloat32, {2, 1, 1, 1}, {2, -1});
  b.constant<float>("b", ir::DType::kFloat32, {2}, {1, 0});
  b.value("c", ir::DType::kFloat32, {1, 2, 2, 2});
  b.node("Conv", "", {"x", "w", "b"}, {"c"}, "conv");
  b.constant<float>("g", ir::DType::kFloat32, {2}, {3, 1});
  b.constant<float>("beta", ir::DType::kFloat32, {2}, {0.5f, 0});
  b.constant<float>("mean", ir::DType::kFloat32, {2}, {1, 2});
  b.constant<float>("var", ir::DType::kFloat32, {2}, {3, 0.25f});
  b.value("y", ir::DType::kFloat32, {1, 2, 2, 2});
  b.node("BatchNormalization", "", {"c", "g", "beta", "mean", "var"}, {"y"}, "bn")
      .attributes["epsilon"] = 1.0f;
  b.g.outputs = {"y"};
  Context ctx;
  ctx.graph = b.g;
  fuse_batchnorm(ctx);
  ASSERT_EQ(ctx.graph.nodes.size(), 1u);
  const ir::Node& conv = ctx.graph.nodes[0];
  EXPECT_EQ(conv.outputs[0], "y");
  const float* w = ctx.graph.tensor(conv.inputs[1]).as<float>();
  const float* bias = ctx.graph.tensor(conv.inputs[2]).as<float>();
  const double f1 = 1 / std::sqrt(1.25);
  EXPECT_FLOAT_EQ(w[0], 3.0f);
  EXPECT_FLOAT_EQ(w[1], static_cast<float>(-f1));
  EXPECT_FLOAT_EQ(bias[0], 0.5f);  // (1 - 1) * 1.5 + 0.5
  EXPECT_FLOAT_EQ(bias[1], static_cast<float>(-2 * f1));
}

TEST(FuseBatchnorm, LeavesSharedConvOutputsAlone) {
  GraphBuilder b;
  b.input("x", ir::DType::kFloat32, {1, 1, 2, 2});
  b.constant<float>("w", ir::DType::kFloat32, {1, 1, 1, 1}, {2});
  b.value("c", ir::DType::kFloat32, {1, 1, 2, 2});
  b.node("Conv", "", {"x", "w"}, {"c"}, "conv");
  for (const char* n : {"g", "beta", "mean", "var"})
    b.constant<float>(n, ir::DType::kFloat32, {1}, {1});
  b.value("y", ir::DType::kFloat32, {1, 1, 2, 2});
  b.node("BatchNormalization", "", {"c", "g", "beta", "mean", "var"}, {"y"}, "bn");
  b.g.outputs = {"y", "c"};
  Context ctx;
  ctx.graph = b.g;
  fuse_batchnorm(ctx);
  EXPECT_EQ(ctx.graph.nodes.size(), 2u);
}

TEST(CheckShapes, DynamicInputsAndUnknownDeviceValuesAreErrors) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {-1, 3, 8, 8});
  Context ctx;
  ctx.graph = b.g;
  try {
    check_shapes(ctx);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'x' has a dynamic dimension"), std::string::npos);
  }
  GraphBuilder c;
  c.input("x", ir::DType::kInt8, {1, 3, 8, 8});
  c.qconv("conv", "x", 0.1f, std::vector<std::int8_t>(4 * 3 * 9, 1), {4, 3, 3, 3}, 0.1f, 0.1f, {},
          {1, 1, 1, 1});
  c.g.tensors.erase("conv_out");
  ctx.graph = c.g;
  try {
    check_shapes(ctx);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'conv_out' has no inferred type"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace npukit::compiler
