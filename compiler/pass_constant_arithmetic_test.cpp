// constant_arithmetic: Add/Sub/Mul/Div of one int8 activation and a scalar or per-channel
// constant, standalone BatchNormalization and QLinearAdd/QLinearMul with a constant operand become
// one depthwise 1x1 QLinearConv that runs on the device bit-exactly as the reference runs the
// lowered graph, and agrees with the float op between DequantizeLinear and QuantizeLinear
// (computed here in double, round half to even) within 1 on every input: scalars exactly (one
// rounding), per-channel slopes up to half a step of their int8 weight (max|a| / 127) off.
#include "compiler/compiler.h"
#include "compiler/device_run.h"
#include "compiler/passes.h"
#include "compiler/test_graphs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;
using testing::op_types;

constexpr float kSx = 0.04f, kSy = 0.05f;
const ir::Shape kShape = {1, 8, 8, 4};  // 256 values: every int8 value once

std::vector<std::int8_t> every_int8() {
  std::vector<std::int8_t> v(256);
  for (int i = 0; i < 256; ++i) v[static_cast<std::size_t>(i)] = static_cast<std::int8_t>(i - 128);
  return v;
}

// int8 x -> DQ -> op(inputs, with "xf" the activation) -> Q -> int8 y
GraphBuilder around(const std::function<void(GraphBuilder&)>& add_op) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, kShape);
  b.value("xf", ir::DType::kFloat32, kShape);
  b.node("DequantizeLinear", "", {"x", b.f32("xs", kSx), b.i8("xz", 0)}, {"xf"}, "dq");
  b.value("yf", ir::DType::kFloat32, kShape);
  add_op(b);
  b.value("y", ir::DType::kInt8, kShape);
  b.node("QuantizeLinear", "", {"yf", b.f32("ys", kSy), b.i8("yz", 0)}, {"y"}, "q");
  b.g.outputs = {"y"};
  return b;
}

GraphBuilder binary(const std::string& op, std::vector<float> c, ir::Shape c_shape, bool x_first) {
  return around([&](GraphBuilder& b) {
    const std::string k = b.constant<float>("c", ir::DType::kFloat32, c_shape, c);
    b.node(op, "", x_first ? std::vector<std::string>{"xf", k} : std::vector<std::string>{k, "xf"},
           {"yf"}, "arith");
  });
}

void expect_on_device_within_one(const ir::Graph& g, const std::function<double(int, int)>& f,
                                 int max_mismatches) {
  CompileOptions opt;
  const CompileResult r = compile(g, opt);
  for (const auto& n : r.ctx.graph.nodes) EXPECT_TRUE(is_gati(n)) << n.op_type << " on the host";
  const std::map<std::string, ir::Tensor> in = {
      {"x", testing::int8_tensor("x", kShape, every_int8())}};
  const auto dev = testing::run_on_device(r, in);
  const auto ref = testing::run_on_reference(r.ctx, r.program, in);
  ASSERT_EQ(dev.at("y"), ref.at("y"));
  int mismatches = 0;
  for (int i = 0; i < 256; ++i) {
    const int c = i / 32;
    const double want = std::clamp(std::nearbyint(f(i - 128, c) / kSy), -128.0, 127.0);
    const int got = dev.at("y")[static_cast<std::size_t>(i)];
    EXPECT_LE(std::fabs(got - want), 1) << "x " << i - 128 << " channel " << c;
    mismatches += got != want;
  }
  EXPECT_LE(mismatches, max_mismatches);
}

TEST(ConstantArithmetic, ScalarDivisionIsADepthwiseConv) {
  Context ctx;
  ctx.graph = binary("Div", {6.f}, {}, true).g;
  constant_arithmetic(ctx);
  ASSERT_EQ(op_types(ctx.graph), (std::vector<std::string>{"QLinearConv"}));
  const ir::Node& c = ctx.graph.nodes[0];
  EXPECT_EQ(c.name, "arith");
  EXPECT_EQ(c.inputs[0], "x");
  EXPECT_EQ(c.outputs[0], "y");
  EXPECT_EQ(c.get_int("group", 1), 8);
  for (double w : constant_values(ctx.graph.tensor(c.inputs[3]))) EXPECT_EQ(w, 127);
}

TEST(ConstantArithmetic, DivisionOfAConstantByXStays) {
  Context ctx;
  ctx.graph = binary("Div", {6.f}, {}, false).g;
  constant_arithmetic(ctx);
  EXPECT_EQ(op_types(ctx.graph),
            (std::vector<std::string>{"DequantizeLinear", "Div", "QuantizeLinear"}));
}

TEST(ConstantArithmetic, ScalarsOnTheDevice) {
  const double sx = kSx;
  expect_on_device_within_one(
      binary("Div", {6.f}, {}, true).g, [&](int x, int) { return x * sx / 6; }, 0);
  expect_on_device_within_one(
      binary("Add", {3.f}, {1}, false).g, [&](int x, int) { return x * sx + 3; }, 0);
  expect_on_device_within_one(
      binary("Sub", {1.5f}, {}, false).g, [&](int x, int) { return 1.5 - x * sx; }, 0);
  expect_on_device_within_one(
      binary("Mul", {-0.75f}, {}, true).g, [&](int x, int) { return -0.75 * x * sx; }, 0);
}

TEST(ConstantArithmetic, PerChannelConstantsOnTheDevice) {
  const std::vector<float> c = {0.5f, -1.25f, 2.f, 0.1f, 3.f, -0.3f, 1.f, 0.7f};
  const double sx = kSx;
  expect_on_device_within_one(
      binary("Mul", c, {1, 8, 1, 1}, true).g, [&](int x, int k) { return x * sx * c[k]; }, 96);
  expect_on_device_within_one(
      binary("Add", c, {8, 1, 1}, true).g, [&](int x, int k) { return x * sx + c[k]; }, 8);
  expect_on_device_within_one(
      binary("Sub", c, {8, 1, 1}, true).g, [&](int x, int k) { return x * sx - c[k]; }, 8);
}

TEST(ConstantArithmetic, StandaloneBatchNormOnTheDevice) {
  const std::vector<float> gamma = {1.f, 0.5f, 2.f, -1.f, 0.8f, 1.2f, 0.3f, 1.5f};
  const std::vector<float> beta = {0.f, 0.1f, -0.2f, 0.3f, 0.5f, -1.f, 0.f, 0.2f};
  const std::vector<float> mean = {0.1f, -0.3f, 0.f, 0.2f, 1.f, 0.f, -0.5f, 0.3f};
  const std::vector<float> var = {1.f, 0.5f, 4.f, 2.f, 0.8f, 1.5f, 0.25f, 3.f};
  const ir::Graph g = around([&](GraphBuilder& b) {
                        b.node("BatchNormalization", "",
                               {"xf", b.constant<float>("g", ir::DType::kFloat32, {8}, gamma),
                                b.constant<float>("b", ir::DType::kFloat32, {8}, beta),
                                b.constant<float>("m", ir::DType::kFloat32, {8}, mean),
                                b.constant<float>("v", ir::DType::kFloat32, {8}, var)},
                               {"yf"}, "bn");
                      }).g;
  Context ctx;
  ctx.graph = g;
  constant_arithmetic(ctx);
  ASSERT_EQ(op_types(ctx.graph), (std::vector<std::string>{"QLinearConv"}));
  const double sx = kSx;
  expect_on_device_within_one(
      g,
      [&](int x, int k) {
        return (x * sx - mean[k]) / std::sqrt(var[k] + 1e-5) * gamma[k] + beta[k];
      },
      64);
}

TEST(ConstantArithmetic, QLinearMulByAConstant) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, kShape);
  b.value("y", ir::DType::kInt8, kShape);
  b.node("QLinearMul", "com.microsoft",
         {"x", b.f32("xs", kSx), b.i8("xz", 0),
          b.constant<std::int8_t>("c", ir::DType::kInt8, {}, {std::int8_t{100}}),
          b.f32("cs", 0.01f), b.i8("cz", 0), b.f32("ys", kSy), b.i8("yz", 0)},
         {"y"}, "mul");
  b.g.outputs = {"y"};
  Context ctx;
  ctx.graph = b.g;
  constant_arithmetic(ctx);
  ASSERT_EQ(op_types(ctx.graph), (std::vector<std::string>{"QLinearConv"}));
  const double sx = kSx;
  expect_on_device_within_one(
      b.g, [&](int x, int) { return x * sx * 1.0; }, 0);
}

}  // namespace
}  // namespace npukit::compiler
