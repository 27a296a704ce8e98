// Hand-worked checks of the quantized ONNX kernels (onnxruntime semantics: float32 requantization,
// round half to even, saturation). The com.microsoft ops have no ONNX conformance data.
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/cpu.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "ir/tensor_util.h"
#include "ref/executor.h"

namespace npukit::ref {
namespace {

using ::testing::ElementsAre;

// Runs one node whose inputs are all constants; returns its first output.
ir::Tensor run_node(const std::string& op, const std::string& domain,
                    std::vector<ir::Tensor> inputs,
                    std::map<std::string, ir::Attribute> attributes = {}, int outputs = 1) {
  ir::Graph g;
  g.name = "one_" + op;
  ir::Node n;
  n.name = op;
  n.op_type = op;
  n.domain = domain;
  n.attributes = std::move(attributes);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype == ir::DType::kUndefined) {  // omitted optional input
      n.inputs.push_back("");
      continue;
    }
    const std::string name = "in" + std::to_string(i);
    inputs[i].name = name;
    g.tensors[name] = inputs[i];
    n.inputs.push_back(name);
  }
  for (int i = 0; i < outputs; ++i) n.outputs.push_back("out" + std::to_string(i));
  g.outputs = {"out0"};
  g.nodes.push_back(n);
  return run_graph(g, {}).at("out0");
}

ir::Tensor f32(std::vector<float> v, ir::Shape shape = {}) {
  if (shape.empty() && v.size() != 1) shape = {static_cast<std::int64_t>(v.size())};
  return ir::make_tensor<float>(shape, v);
}
ir::Tensor s8(std::vector<std::int8_t> v, ir::Shape shape = {}) {
  if (shape.empty() && v.size() != 1) shape = {static_cast<std::int64_t>(v.size())};
  return ir::make_tensor<std::int8_t>(shape, v);
}
ir::Tensor u8(std::vector<std::uint8_t> v, ir::Shape shape = {}) {
  if (shape.empty() && v.size() != 1) shape = {static_cast<std::int64_t>(v.size())};
  return ir::make_tensor<std::uint8_t>(shape, v);
}
ir::Tensor i32(std::vector<std::int32_t> v, ir::Shape shape = {}) {
  if (shape.empty() && v.size() != 1) shape = {static_cast<std::int64_t>(v.size())};
  return ir::make_tensor<std::int32_t>(shape, v);
}
const ir::Tensor kOmitted{};

TEST(QuantizeLinear, RoundsHalfToEvenAndSaturates) {
  // x / 0.5: -2, 0.5 (-> 0), 1.5 (-> 2), 2.5 (-> 2), 200; + zero point 1; int8 saturation
  auto y = run_node("QuantizeLinear", "",
                    {f32({-1.f, 0.25f, 0.75f, 1.25f, 100.f}), f32({0.5f}), s8({1})});
  EXPECT_EQ(y.dtype, ir::DType::kInt8);
  EXPECT_THAT(ir::to_vector<std::int8_t>(y), ElementsAre(-1, 1, 3, 3, 127));
  // No zero point: uint8, negative values saturate to 0
  auto u = run_node("QuantizeLinear", "", {f32({-3.f, 3.f}), f32({1.f})});
  EXPECT_EQ(u.dtype, ir::DType::kUInt8);
  EXPECT_THAT(ir::to_vector<std::uint8_t>(u), ElementsAre(0, 3));
}

// One scale takes a loop of its own (an input image); it must round and saturate as the formula
// does: nearbyint(x / scale) + zero point, clamped, at ties, near 2^22 and far beyond the range.
TEST(QuantizeLinear, OneScaleMatchesTheFormulaEverywhere) {
  std::vector<float> x;
  for (int k = -300; k <= 300; ++k) x.push_back(k * 0.25f);
  for (float big : {4194303.5f, 4194304.f, 4194305.f, 8388609.f, 1e7f, 3e38f,
                    std::numeric_limits<float>::infinity()})
    x.insert(x.end(), {big, -big});
  // Ties and the ends of the ranges once more, at every position of a 16-value block.
  for (int k = 0; k < 40; ++k) x.push_back((k % 7 - 3) * 0.5f + (k % 3 == 0 ? 127.5f : -64.5f));
  // At every level the CPU has (the AVX2 one takes 32 values a step, SSE2 the rest).
  for (const Isa isa : cpu::kAllIsas) {
    if (!cpu::supports(isa)) continue;
    const cpu::ScopedIsa forced(isa);
    for (const float scale : {0.5f, 1.f / 3.f, 7.f}) {
      for (const bool to_int8 : {true, false}) {
        const int zero = to_int8 ? 3 : 128;
        const ir::Tensor y = run_node("QuantizeLinear", "",
                                      {f32(x), f32({scale}),
                                       to_int8 ? s8({static_cast<std::int8_t>(zero)})
                                               : u8({static_cast<std::uint8_t>(zero)})});
        for (std::size_t i = 0; i < x.size(); ++i) {
          const float q = std::clamp(std::nearbyint(x[i] / scale) + static_cast<float>(zero),
                                     to_int8 ? -128.f : 0.f, to_int8 ? 127.f : 255.f);
          const int got = to_int8 ? int{ir::to_vector<std::int8_t>(y)[i]}
                                  : int{ir::to_vector<std::uint8_t>(y)[i]};
          ASSERT_EQ(got, static_cast<int>(q)) << x[i] << " / " << scale << " at " << cpu::name(isa);
        }
      }
    }
  }
}

TEST(QuantizeLinear, PerAxis) {
  auto x = f32({1, 2, 3, 4}, {2, 2});
  auto rows = run_node("QuantizeLinear", "", {x, f32({1.f, 0.5f}), s8({0, 0})},
                       {{"axis", std::int64_t{0}}});
  EXPECT_THAT(ir::to_vector<std::int8_t>(rows), ElementsAre(1, 2, 6, 8));
  auto cols = run_node("QuantizeLinear", "", {x, f32({1.f, 0.5f}), s8({0, 0})},
                       {{"axis", std::int64_t{1}}});
  EXPECT_THAT(ir::to_vector<std::int8_t>(cols), ElementsAre(1, 4, 3, 8));
  EXPECT_THROW(run_node("QuantizeLinear", "", {x, f32({1.f, 2.f, 3.f}), s8({0, 0, 0})}), Error);
}

TEST(DequantizeLinear, PerAxisWithZeroPoints) {
  auto y =
      run_node("DequantizeLinear", "", {s8({1, 2, 3, 4}, {2, 2}), f32({0.5f, 2.f}), s8({0, 1})},
               {{"axis", std::int64_t{1}}});
  // column 0: (v - 0) * 0.5; column 1: (v - 1) * 2
  EXPECT_THAT(ir::to_vector<float>(y), ElementsAre(0.5f, 2.f, 1.5f, 6.f));
  auto i = run_node("DequantizeLinear", "", {i32({-4, 6}), f32({0.25f})});
  EXPECT_THAT(ir::to_vector<float>(i), ElementsAre(-1.f, 1.5f));
}

TEST(QLinearConv, IntegerAccumulationThenFloatRequantization) {
  // acc = (x - 10) * 2 + 3 = 3, 23, 43, 63; multiplier 0.5 * 0.25 / 0.2 = 0.625:
  // 1.875 -> 2, 14.375 -> 14, 26.875 -> 27, 39.375 -> 39; + 5
  auto y = run_node("QLinearConv", "",
                    {u8({10, 20, 30, 40}, {1, 1, 2, 2}), f32({0.5f}), u8({10}),
                     s8({2}, {1, 1, 1, 1}), f32({0.25f}), s8({0}), f32({0.2f}), u8({5}), i32({3})});
  EXPECT_EQ(y.dtype, ir::DType::kUInt8);
  EXPECT_THAT(ir::to_vector<std::uint8_t>(y), ElementsAre(7, 19, 32, 44));
  // Ties go to even: acc 1, 3, 5, 7 with multiplier 0.5 -> 0.5, 1.5, 2.5, 3.5 -> 0, 2, 2, 4
  auto t = run_node("QLinearConv", "",
                    {s8({1, 3, 5, 7}, {1, 1, 2, 2}), f32({1.f}), s8({0}), s8({1}, {1, 1, 1, 1}),
                     f32({1.f}), s8({0}), f32({2.f}), s8({0})});
  EXPECT_THAT(ir::to_vector<std::int8_t>(t), ElementsAre(0, 2, 2, 4));
}

TEST(QLinearConv, PerChannelWeightsAndPaddingAsZeroPoint) {
  // Two 1x1 kernels with scales 1 and 0.5; 3x3 kernel check of padding below.
  auto y = run_node("QLinearConv", "",
                    {s8({4}, {1, 1, 1, 1}), f32({1.f}), s8({0}), s8({3, 3}, {2, 1, 1, 1}),
                     f32({1.f, 0.5f}), s8({0, 0}), f32({1.f}), s8({0})});
  EXPECT_THAT(ir::to_vector<std::int8_t>(y), ElementsAre(12, 6));
  // Padding takes the zero point's place: x zero point 5, x all 5 -> every product is 0.
  auto p = run_node("QLinearConv", "",
                    {u8({5, 5, 5, 5}, {1, 1, 2, 2}), f32({1.f}), u8({5}),
                     s8(std::vector<std::int8_t>(9, 1), {1, 1, 3, 3}), f32({1.f}), s8({0}),
                     f32({1.f}), u8({100})},
                    {{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}});
  EXPECT_THAT(ir::to_vector<std::uint8_t>(p), ElementsAre(100, 100, 100, 100));
}

TEST(QLinearMatMul, Requantizes) {
  // [1 2] x [[1 2] [3 4]] = [7 10]; / 2 -> 3.5 -> 4, 5
  auto y = run_node("QLinearMatMul", "",
                    {s8({1, 2}, {1, 2}), f32({1.f}), s8({0}), s8({1, 2, 3, 4}, {2, 2}), f32({1.f}),
                     s8({0}), f32({2.f}), s8({0})});
  EXPECT_EQ(y.shape, (ir::Shape{1, 2}));
  EXPECT_THAT(ir::to_vector<std::int8_t>(y), ElementsAre(4, 5));
}

TEST(QGemm, TransBBiasAlphaAndFloatOutput) {
  // A [1,2] = [3, 4] (zp 1 -> 2, 3); B^T rows [1, 1], [2, -1]; C = [10, -10]
  // acc = [2+3+10, 4-3-10] = [15, -9]; scale alpha 0.5 * 1 * 1 / 1 = 0.5 -> 7.5 -> 8, -4.5 -> -4
  std::map<std::string, ir::Attribute> attrs{{"transB", std::int64_t{1}}, {"alpha", 0.5f}};
  auto q = run_node("QGemm", "com.microsoft",
                    {s8({3, 4}, {1, 2}), f32({1.f}), s8({1}), s8({1, 1, 2, -1}, {2, 2}), f32({1.f}),
                     s8({0}), i32({10, -10}), f32({1.f}), s8({0})},
                    attrs);
  EXPECT_THAT(ir::to_vector<std::int8_t>(q), ElementsAre(8, -4));
  // Without y_scale: float alpha * a_scale * b_scale * (acc + C) = 0.5 * 15, 0.5 * -9
  auto f = run_node("QGemm", "com.microsoft",
                    {s8({3, 4}, {1, 2}), f32({1.f}), s8({1}), s8({1, 1, 2, -1}, {2, 2}), f32({1.f}),
                     s8({0}), i32({10, -10})},
                    attrs);
  EXPECT_THAT(ir::to_vector<float>(f), ElementsAre(7.5f, -4.5f));
}

TEST(QLinearAddMul, FloatRatiosRoundHalfEven) {
  // 0.1/0.5 * 10 + 0.2/0.5 * (20 - 10) = 2 + 4 = 6; + 3
  auto add = run_node(
      "QLinearAdd", "com.microsoft",
      {s8({10, 0}), f32({0.1f}), s8({0}), s8({20}), f32({0.2f}), s8({10}), f32({0.5f}), s8({3})});
  EXPECT_THAT(ir::to_vector<std::int8_t>(add), ElementsAre(9, 7));  // second: 0 + 4 + 3
  // (4 * 6) * 0.5 * 0.5 / 1 = 6; (5 * 1) * 0.25 = 1.25 -> 1; saturation: 100 * 100 * 0.25 -> 127
  auto mul = run_node("QLinearMul", "com.microsoft",
                      {s8({4, 5, 100}), f32({0.5f}), s8({0}), s8({6, 1, 100}), f32({0.5f}), s8({0}),
                       f32({1.f}), s8({0})});
  EXPECT_THAT(ir::to_vector<std::int8_t>(mul), ElementsAre(6, 1, 127));
}

TEST(QLinearLookupOps, SigmoidLeakyReluConcat) {
  // sigmoid(0) = 0.5 -> 0.5 * 256 = 128, + zp -128 = 0; sigmoid(12.7) * 256 = 255.99 -> 256 - 128
  // -> 127
  auto s = run_node("QLinearSigmoid", "com.microsoft",
                    {s8({0, 127}), f32({0.1f}), s8({0}), f32({1.f / 256}), s8({-128})});
  EXPECT_THAT(ir::to_vector<std::int8_t>(s), ElementsAre(0, 127));
  // -5 * 0.1 = -0.5 / 0.25 = -2; 5 / 0.25 = 20
  auto l =
      run_node("QLinearLeakyRelu", "com.microsoft",
               {s8({-10, 10}), f32({0.5f}), s8({0}), f32({0.25f}), s8({0})}, {{"alpha", 0.1f}});
  EXPECT_THAT(ir::to_vector<std::int8_t>(l), ElementsAre(-2, 20));
  // Concat along axis 1: input 0 shares Y's parameters (copied), input 1 is requantized:
  // (v - 2) * 0.5 / 0.25 = 2 (v - 2): 1 -> -2, 3 -> 2
  auto c = run_node("QLinearConcat", "com.microsoft",
                    {f32({0.25f}), s8({0}), s8({7, 8}, {1, 2}), f32({0.25f}), s8({0}),
                     s8({1, 3}, {1, 2}), f32({0.5f}), s8({2})},
                    {{"axis", std::int64_t{1}}});
  EXPECT_EQ(c.shape, (ir::Shape{1, 4}));
  EXPECT_THAT(ir::to_vector<std::int8_t>(c), ElementsAre(7, 8, -2, 2));
}

TEST(QLinearPools, AverageAndGlobalAverage) {
  // 2x2 window over [1 2; 3 5]: 11 / 4 = 2.75 -> 3
  auto a = run_node("QLinearAveragePool", "com.microsoft",
                    {s8({1, 2, 3, 5}, {1, 1, 2, 2}), f32({1.f}), s8({0}), f32({1.f}), s8({0})},
                    {{"kernel_shape", std::vector<std::int64_t>{2, 2}}});
  EXPECT_THAT(ir::to_vector<std::int8_t>(a), ElementsAre(3));
  // Padding 1, stride 2, count_include_pad: every window sees one pixel, divided by 4:
  // 1/4 -> 0, 2/4 -> 0 (half to even), 3/4 -> 1, 5/4 -> 1
  auto p = run_node("QLinearAveragePool", "com.microsoft",
                    {s8({1, 2, 3, 5}, {1, 1, 2, 2}), f32({1.f}), s8({0}), f32({1.f}), s8({0})},
                    {{"kernel_shape", std::vector<std::int64_t>{2, 2}},
                     {"strides", std::vector<std::int64_t>{2, 2}},
                     {"pads", std::vector<std::int64_t>{1, 1, 1, 1}},
                     {"count_include_pad", std::int64_t{1}}});
  EXPECT_THAT(ir::to_vector<std::int8_t>(p), ElementsAre(0, 0, 1, 1));
  // Global: (1+2+3+4)/4 = 2.5 -> 2 (even), + zp 1 = 3; second channel 4,4,4,5 -> 4.25 -> 4 + 1
  auto g = run_node(
      "QLinearGlobalAveragePool", "com.microsoft",
      {s8({1, 2, 3, 4, 4, 4, 4, 5}, {1, 2, 2, 2}), f32({1.f}), s8({0}), f32({1.f}), s8({1})});
  EXPECT_EQ(g.shape, (ir::Shape{1, 2, 1, 1}));
  EXPECT_THAT(ir::to_vector<std::int8_t>(g), ElementsAre(3, 5));
}

TEST(QuantOps, BadParametersAreErrors) {
  EXPECT_THROW(run_node("QuantizeLinear", "", {f32({1.f}), f32({0.f})}), Error);  // zero scale
  EXPECT_THROW(
      run_node("QLinearAdd", "com.microsoft",
               {s8({1}), f32({1.f}), s8({0}), u8({1}), f32({1.f}), u8({0}), f32({1.f}), s8({0})}),
      Error);  // mixed int8/uint8
}

}  // namespace
}  // namespace npukit::ref
