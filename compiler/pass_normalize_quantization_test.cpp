// normalize_quantization: quantized tensors outside the native scheme (uint8 and zero-point
// activations, per-channel weights; QDQ and QOperator models) are requantized from their float
// meaning, values worked by hand; a whole model keeps its float behaviour within a quantization
// step; what cannot be recovered is an error naming the tensor.
#include "common/error.h"
#include "compiler/passes.h"
#include "compiler/test_graphs.h"
#include "ir/tensor_util.h"
#include "onnx/onnx_io.h"
#include "ref/executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;
using ::testing::HasSubstr;

const std::string kQop = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/qop/";

Context normalized(const ir::Graph& g) {
  Context ctx;
  ctx.graph = g;
  normalize_quantization(ctx);
  return ctx;
}

Context canonical(const ir::Graph& g) {
  Context ctx = normalized(g);
  canonicalize_qdq(ctx);
  return ctx;
}

std::string error_of(const ir::Graph& g) {
  try {
    normalized(g);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<float> run(const ir::Graph& g, const std::string& input_npy) {
  ir::Tensor x = onnxio::load_tensor_file(input_npy);
  x.name = g.inputs.at(0);
  ref::TensorMap out = ref::run_graph(g, {{x.name, x}});
  return ir::to_float_vector(out.at(g.outputs.at(0)));
}

std::vector<const ir::Node*> nodes_of(const ir::Graph& g, const std::string& op) {
  std::vector<const ir::Node*> out;
  for (const auto& n : g.nodes)
    if (n.op_type == op) out.push_back(&n);
  return out;
}

// Every QuantizeLinear/DequantizeLinear of activations and weights uses one scale and an int8
// zero point 0 (int32 biases may keep their per-channel scale: canonicalize_qdq rescales them).
void expect_native(const ir::Graph& g) {
  for (const auto& node : g.nodes) {
    if (node.op_type != "QuantizeLinear" && node.op_type != "DequantizeLinear") continue;
    const ir::Tensor* in = g.find(node.inputs[0]);
    if (node.op_type == "DequantizeLinear" && in && in->dtype == ir::DType::kInt32) continue;
    const bool host_conversion =
        node.op_type == "QuantizeLinear" && g.tensor(node.outputs[0]).dtype == ir::DType::kUInt8;
    if (host_conversion) continue;  // gives a graph output its original integers back
    EXPECT_EQ(ir::element_count(g.tensor(node.inputs[1]).shape), 1) << node.name;
    ASSERT_GE(node.inputs.size(), 3u) << node.name;
    const ir::Tensor& zp = g.tensor(node.inputs[2]);
    EXPECT_EQ(zp.dtype, ir::DType::kInt8) << node.name;
    EXPECT_EQ(ir::to_int64_vector(zp)[0], 0) << node.name;
    EXPECT_FALSE(node.has("axis")) << node.name;
  }
}

// The same network on the new grids computes nearly the same floats: on average within one output
// quantization step and everywhere within 5% of the output range. A wrong scale would be off by
// 2x or more.
void expect_same_floats(const ir::Graph& before, const ir::Graph& after, float output_step,
                        const std::string& stem) {
  for (int k = 0; k < 2; ++k) {
    const std::string in = stem + ".input_" + std::to_string(k) + ".npy";
    const std::vector<float> want = run(before, in), got = run(after, in);
    ASSERT_EQ(want.size(), got.size());
    float worst = 0, total = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      worst = std::max(worst, std::fabs(want[i] - got[i]));
      total += std::fabs(want[i] - got[i]);
    }
    EXPECT_LE(total / static_cast<float>(want.size()), output_step) << "sample " << k;
    EXPECT_LE(worst, 0.05f * 255 * output_step) << "sample " << k;
  }
}

TEST(NormalizeQuantization, QdqPerChannelAsymmetricIsRequantized) {
  const ir::Graph g = onnxio::load_onnx(kQop + "qdq_perchannel.onnx");
  const Context ctx = normalized(g);
  // Weight and both activations were outside the scheme.
  EXPECT_EQ(ctx.warnings.size(), 3u) << ::testing::PrintToString(ctx.warnings);
  expect_native(ctx.graph);
  const float step = ir::to_float_vector(g.tensor("y_scale"))[0];
  expect_same_floats(g, ctx.graph, step, kQop + "qdq_perchannel");
  // canonicalize_qdq then finds a native QLinearConv (bias at input scale x weight scale).
  const Context c = canonical(g);
  ASSERT_EQ(nodes_of(c.graph, "QLinearConv").size(), 1u);
  const ir::Node& conv = *nodes_of(c.graph, "QLinearConv")[0];
  EXPECT_EQ(c.graph.tensor(conv.inputs[0]).dtype, ir::DType::kInt8);
  EXPECT_EQ(c.graph.tensor(conv.inputs[3]).dtype, ir::DType::kInt8);
  EXPECT_EQ(ir::element_count(c.graph.tensor(conv.inputs[4]).shape), 1);
  expect_same_floats(g, c.graph, step, kQop + "qdq_perchannel");
}

TEST(NormalizeQuantization, QOperatorUint8PerChannelIsRequantizedThroughItsFloatForm) {
  // onnxruntime's default U8S8 QOperator form: uint8 activations (zero point 128 at the input) and
  // per-channel int8 weights. The float values are (q - z) * s, so it can be requantized.
  const ir::Graph g = onnxio::load_onnx(kQop + "qop_u8_perchannel.onnx");
  const Context c = canonical(g);
  const auto convs = nodes_of(c.graph, "QLinearConv");
  ASSERT_EQ(convs.size(), 1u);
  const ir::Node& conv = *convs[0];
  EXPECT_EQ(conv.name, "y_node");  // the layer keeps its name
  for (std::size_t i : {0u, 3u})
    EXPECT_EQ(c.graph.tensor(conv.inputs[i]).dtype, ir::DType::kInt8) << i;
  for (std::size_t i : {2u, 5u, 7u}) {
    EXPECT_EQ(c.graph.tensor(conv.inputs[i]).dtype, ir::DType::kInt8) << i;
    EXPECT_EQ(ir::to_int64_vector(c.graph.tensor(conv.inputs[i]))[0], 0) << i;
  }
  for (std::size_t i : {1u, 4u, 6u})
    EXPECT_EQ(ir::element_count(c.graph.tensor(conv.inputs[i]).shape), 1) << i;
  // The input's uint8 range [0, 255] around zero point zx is [-zx, 255 - zx] steps: the symmetric
  // scale covering it is sx * max(zx, 255 - zx) / 127.
  const float sx = ir::to_float_vector(g.tensor("x_scale"))[0];
  const auto zx = static_cast<float>(ir::to_int64_vector(g.tensor("x_zero_point"))[0]);
  EXPECT_FLOAT_EQ(ir::to_float_vector(c.graph.tensor(conv.inputs[1]))[0],
                  sx * std::max(zx, 255 - zx) / 127);
  EXPECT_THAT(::testing::PrintToString(c.warnings), HasSubstr("1 node outside the native scheme"));
  EXPECT_THAT(::testing::PrintToString(c.warnings), HasSubstr("'y_node' (QLinearConv)"));
  const float step = ir::to_float_vector(g.tensor("y_scale"))[0];
  expect_same_floats(g, c.graph, step, kQop + "qop_u8_perchannel");
}

TEST(NormalizeQuantization, WholeU8S8NetworkKeepsItsFloatBehaviour) {
  // 13 QOperator ops (convs, add, LeakyRelu, max pool, concat, sigmoid, mul, average pools, QGemm)
  // with uint8 activations and per-channel weights: every tensor requantized, the logits stay
  // close. Measured: mean difference 0.5 and 1.0 output steps, largest 1.3 and 2.5 steps (the
  // symmetric grids are up to 2x coarser than the uint8 ones they replace).
  const ir::Graph g = onnxio::load_onnx(kQop + "qop_u8_ms_ops.onnx");
  const Context c = canonical(g);
  for (const char* op : {"QLinearConv", "QLinearAdd", "QLinearMul", "QGemm", "QLinearConcat"})
    for (const ir::Node* n : nodes_of(c.graph, op))
      EXPECT_EQ(c.graph.tensor(n->outputs[0]).dtype, ir::DType::kInt8) << n->name;
  expect_native(c.graph);
  const float step = ir::to_float_vector(g.tensor("g_scale"))[0];
  expect_same_floats(g, c.graph, 2 * step, kQop + "qop_u8_ms_ops");
}

// x(uint8 graph input, s 0.5, z 100) -> QLinearConv(1x1, per-channel w) -> y (uint8 graph output)
GraphBuilder uint8_boundaries() {
  GraphBuilder b;
  b.input("x", ir::DType::kUInt8, {1, 1, 2, 2});
  b.constant<std::uint8_t>("xz", ir::DType::kUInt8, {}, {100});
  b.constant<std::uint8_t>("yz", ir::DType::kUInt8, {}, {10});
  b.constant<std::int8_t>("w", ir::DType::kInt8, {2, 1, 1, 1}, {10, 127});
  b.constant<float>("ws", ir::DType::kFloat32, {2}, {0.2f, 0.1f});
  b.value("y", ir::DType::kUInt8, {1, 2, 2, 2});
  b.node("QLinearConv", "",
         {"x", b.f32("xs", 0.5f), "xz", "w", "ws", b.i8("wz", 0), b.f32("ys", 0.25f), "yz"}, {"y"},
         "conv");
  b.g.outputs = {"y"};
  return b;
}

TEST(NormalizeQuantization, Uint8GraphInputAndOutputAreConvertedOnTheHost) {
  const ir::Graph g = uint8_boundaries().g;
  const Context c = canonical(g);
  // x -> DQ -> Q(int8) -> QLinearConv(int8) -> DQ -> Q(uint8) -> y
  ASSERT_EQ(nodes_of(c.graph, "QLinearConv").size(), 1u);
  const ir::Node& conv = *nodes_of(c.graph, "QLinearConv")[0];
  EXPECT_EQ(c.graph.tensor(conv.inputs[0]).dtype, ir::DType::kInt8);
  EXPECT_EQ(c.graph.tensor(conv.outputs[0]).dtype, ir::DType::kInt8);
  // Input: uint8 range [-100, 155] steps of 0.5 -> symmetric scale 0.5 * 155 / 127.
  EXPECT_FLOAT_EQ(ir::to_float_vector(c.graph.tensor(conv.inputs[1]))[0], 0.5f * 155 / 127);
  // Weights: 10 * 0.2 = 2.0 and 127 * 0.1 = 12.7 -> one scale 0.1: int8 20 and 127.
  const ir::Tensor& w = c.graph.tensor(conv.inputs[3]);
  EXPECT_EQ(w.as<std::int8_t>()[0], 20);
  EXPECT_EQ(w.as<std::int8_t>()[1], 127);
  EXPECT_NEAR(ir::to_float_vector(c.graph.tensor(conv.inputs[4]))[0], 0.1f, 1e-7);
  // The graph output is uint8 again, computed from the int8 result on the host.
  EXPECT_EQ(c.graph.outputs, std::vector<std::string>{"y"});
  const ir::Node* last = c.graph.producer("y");
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->op_type, "QuantizeLinear");
  EXPECT_EQ(last->inputs[2], "yz");
  EXPECT_EQ(c.graph.tensor("y").dtype, ir::DType::kUInt8);

  // Hand-worked run: x = [100, 110, 90, 255] is [0, 5, -5, 77.5] in float; on the int8 input
  // grid (0.5*155/127 = 0.61024) that is [0, 8, -8, 127]. Output channel 0 (w 20 at 0.1) gives
  // 2.0 * x: [0, 9.7638, -9.7638, 155.0] at the output scale 0.25 * 245 / 127 = 0.48228 ->
  // int8 [0, 20, -20, 127] (clamped) -> floats [0, 9.6457, -9.6457, 61.25] -> uint8 at 0.25,
  // zero point 10: [10, 49, 0 (clamped), 255 (clamped)].
  ir::Tensor x = ir::make_tensor<std::uint8_t>({1, 1, 2, 2}, {100, 110, 90, 255}, "x");
  const ir::Tensor y = ref::run_graph(c.graph, {{"x", x}}).at("y");
  const auto v = ir::to_int64_vector(y);
  EXPECT_EQ(std::vector<std::int64_t>(v.begin(), v.begin() + 4),
            (std::vector<std::int64_t>{10, 49, 0, 255}));
}

TEST(NormalizeQuantization, IntegerOpsOnForeignTensorsKeepTheirMeaning) {
  // int8 QuantizeLinear with zero point -20 -> MaxPool -> Relu -> QLinearConv (uint8 output).
  // The integer Relu is max(q, 0): with zero point -20 it clamps floats below (0 + 20) * 0.1 = 2.0,
  // so its float form is Clip(min = 2.0), not a float Relu. MaxPool runs on int8 afterwards.
  GraphBuilder b;
  b.input("x", ir::DType::kFloat32, {1, 1, 4, 4});
  b.value("xq", ir::DType::kInt8, {1, 1, 4, 4});
  b.node("QuantizeLinear", "", {"x", b.f32("xs", 0.1f), b.i8("xz", -20)}, {"xq"}, "quant");
  b.value("p", ir::DType::kInt8, {1, 1, 2, 2});
  b.node("MaxPool", "", {"xq"}, {"p"}, "pool").attributes["kernel_shape"] =
      std::vector<std::int64_t>{2, 2};
  b.g.nodes.back().attributes["strides"] = std::vector<std::int64_t>{2, 2};
  b.value("r", ir::DType::kInt8, {1, 1, 2, 2});
  b.node("Relu", "", {"p"}, {"r"}, "relu");
  b.constant<std::uint8_t>("yz", ir::DType::kUInt8, {}, {128});
  b.value("y", ir::DType::kUInt8, {1, 1, 2, 2});
  b.constant<std::int8_t>("w", ir::DType::kInt8, {1, 1, 1, 1}, {64});
  b.node("QLinearConv", "",
         {"r", "xs", "xz", "w", b.f32("ws", 1.f / 64), b.i8("wz", 0), b.f32("ys", 0.1f), "yz"},
         {"y"}, "conv");
  b.value("out", ir::DType::kFloat32, {1, 1, 2, 2});
  b.node("DequantizeLinear", "", {"y", "ys", "yz"}, {"out"}, "dequant");
  b.g.outputs = {"out"};
  const Context c = canonical(b.g);
  ASSERT_EQ(nodes_of(c.graph, "MaxPool").size(), 1u);
  EXPECT_EQ(c.graph.tensor(nodes_of(c.graph, "MaxPool")[0]->inputs[0]).dtype, ir::DType::kInt8);
  ASSERT_EQ(nodes_of(c.graph, "QLinearConv").size(), 1u);
  // Pool windows (maxima): 4, 2, -9 (-> 2.0 after the Relu) and 12.7. The two graphs agree
  // within their rounding: input grids 0.1 and 0.1 * 147 / 127 (half steps 0.05 + 0.058), output
  // grids 0.1 and 0.1 * 128 / 127 (0.05 + 0.0504).
  ir::Tensor x = ir::make_tensor<float>(
      {1, 1, 4, 4}, {-3, 1, 2, 0.5f, 4, -1, 0, 0, -9, -10, -7, 12.7f, -12.8f, -11, -5, -8}, "x");
  const auto want = ir::to_float_vector(ref::run_graph(b.g, {{"x", x}}).at("out"));
  const auto got = ir::to_float_vector(ref::run_graph(c.graph, {{"x", x}}).at("out"));
  ASSERT_EQ(want.size(), 4u);
  EXPECT_NEAR(want[2], 2.0f, 1e-6f);  // the integer Relu's floor
  ASSERT_EQ(want.size(), got.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 0.21f) << i;
  EXPECT_NEAR(got[2], 2.0f, 0.21f);
}

// torch.ao's QDQ export: [Relu] -> Q(uint8, zero point 0) -> DQ -> MaxPool -> Q(uint8, zero point
// 0) -> DQ -> Flatten -> Q -> DQ. The uint8 floor at 0 after a ReLU is that ReLU's range; after
// the MaxPool and the Flatten of it, it is still only that: no second Relu is invented there
// (which would put everything after it on the host). A value that can be negative keeps its floor
// as a Relu.
std::size_t relus_after_normalizing(bool relu_first, ir::DType pooled_type,
                                    std::vector<std::string>* warnings = nullptr) {
  GraphBuilder b;
  b.input("x", ir::DType::kFloat32, {1, 1, 4, 4});
  std::string v = "x";
  if (relu_first) {
    b.value("r", ir::DType::kFloat32, {1, 1, 4, 4});
    b.node("Relu", "", {"x"}, {"r"}, "relu");
    v = "r";
  }
  const bool u8 = pooled_type == ir::DType::kUInt8;
  const std::string s = b.f32("s", 0.1f);
  const std::string z =
      u8 ? b.constant<std::uint8_t>("z", ir::DType::kUInt8, {}, {0}) : b.i8("z", 0);
  auto qdq = [&](const std::string& in, const std::string& tag, ir::Shape shape) {
    b.value(tag + "_q", pooled_type, shape);
    b.node("QuantizeLinear", "", {in, s, z}, {tag + "_q"}, tag + "_quant");
    b.value(tag + "_f", ir::DType::kFloat32, shape);
    b.node("DequantizeLinear", "", {tag + "_q", s, z}, {tag + "_f"}, tag + "_dequant");
    return tag + "_f";
  };
  v = qdq(v, "a", {1, 1, 4, 4});
  b.value("p", ir::DType::kFloat32, {1, 1, 2, 2});
  b.node("MaxPool", "", {v}, {"p"}, "pool").attributes["kernel_shape"] =
      std::vector<std::int64_t>{2, 2};
  b.g.nodes.back().attributes["strides"] = std::vector<std::int64_t>{2, 2};
  v = qdq("p", "b", {1, 1, 2, 2});
  b.value("fl", ir::DType::kFloat32, {1, 4});
  b.node("Flatten", "", {v}, {"fl"}, "flatten");
  v = qdq("fl", "c", {1, 4});
  b.g.outputs = {v};
  const Context c = normalized(b.g);
  if (warnings) *warnings = c.warnings;
  return nodes_of(c.graph, "Relu").size();
}

TEST(NormalizeQuantization, MaxPoolAndFlattenOfANonNegativeValueAreNonNegative) {
  std::vector<std::string> w;
  // The model's own Relu, nothing more.
  EXPECT_EQ(relus_after_normalizing(true, ir::DType::kUInt8, &w), 1u);
  for (const auto& line : w) EXPECT_THAT(line, ::testing::Not(HasSubstr("kept as a Relu")));
  // No Relu in the model: the first uint8 floor is one (kept), the pool's and flatten's follow it.
  EXPECT_EQ(relus_after_normalizing(false, ir::DType::kUInt8, &w), 1u);
  std::size_t kept = 0;
  for (const auto& line : w) kept += line.find("kept as a Relu") != std::string::npos;
  EXPECT_EQ(kept, 1u);
  // int8 with zero point 0 is native: no floor, nothing to keep.
  EXPECT_EQ(relus_after_normalizing(false, ir::DType::kInt8), 0u);
}

TEST(NormalizeQuantization, ScalesThatAreNotConstantsAreErrorsNamingTheTensor) {
  GraphBuilder b = uint8_boundaries();
  b.input("dynamic_scale", ir::DType::kFloat32, {});
  b.g.nodes[0].inputs[1] = "dynamic_scale";
  const std::string msg = error_of(b.g);
  EXPECT_THAT(msg, HasSubstr("'conv' (QLinearConv)"));
  EXPECT_THAT(msg, HasSubstr("'dynamic_scale'"));
  EXPECT_THAT(msg, HasSubstr("not a constant"));
}

TEST(NormalizeQuantization, NativeAndFloatModelsPassUnchanged) {
  for (std::string path : {kQop + "qop_ms_ops.onnx", kQop + "qop_matmul.onnx",
                           std::string(NPUKIT_SOURCE_DIR) + "/fixtures/digits/lenet_digits.onnx"}) {
    const ir::Graph g = onnxio::load_onnx(path);
    const Context c = normalized(g);
    EXPECT_TRUE(c.warnings.empty()) << path;
    ASSERT_EQ(c.graph.nodes.size(), g.nodes.size()) << path;
    for (std::size_t i = 0; i < g.nodes.size(); ++i)
      EXPECT_EQ(c.graph.nodes[i].inputs, g.nodes[i].inputs) << path;
  }
}

}  // namespace
}  // namespace npukit::compiler
