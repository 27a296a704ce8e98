#include "onnx/normalize.h"

#include "common/error.h"
#include "ir/tensor_util.h"
#include "onnx/onnx_io.h"
#include "ref/executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace npukit::onnxio {
namespace {

using ::testing::HasSubstr;

const std::string kQop = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/qop/";

std::vector<float> run(const ir::Graph& g, const std::string& input_npy) {
  ir::Tensor x = load_tensor_file(input_npy);
  x.name = g.inputs.at(0);
  ref::TensorMap out = ref::run_graph(g, {{x.name, x}});
  return ir::to_float_vector(out.at(g.outputs.at(0)));
}

std::string error_of(const ir::Graph& g) {
  try {
    normalize_quantization(g);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Normalize, QdqPerChannelAsymmetricIsRequantizedIntoTheNativeScheme) {
  ir::Graph g = load_onnx(kQop + "qdq_perchannel.onnx");
  NormalizeReport report;
  ir::Graph n = normalize_quantization(g, &report);
  // Weight, bias and both activations were outside the scheme.
  EXPECT_EQ(report.changes.size(), 4u) << ::testing::PrintToString(report.changes);
  for (const auto& node : n.nodes) {
    if (node.op_type != "QuantizeLinear" && node.op_type != "DequantizeLinear") continue;
    const ir::Tensor& scale = n.tensor(node.inputs[1]);
    EXPECT_EQ(ir::element_count(scale.shape), 1) << node.name;
    const ir::Tensor& zp = n.tensor(node.inputs[2]);
    EXPECT_TRUE(zp.dtype == ir::DType::kInt8 || zp.dtype == ir::DType::kInt32) << node.name;
    EXPECT_EQ(ir::to_int64_vector(zp)[0], 0) << node.name;
    EXPECT_FALSE(node.has("axis")) << node.name;
  }
  // The bias is at input scale x weight scale.
  const ir::Node* conv = nullptr;
  for (const auto& node : n.nodes)
    if (node.op_type == "Conv") conv = &node;
  ASSERT_NE(conv, nullptr);
  auto scale_of = [&](const std::string& dq_out) {
    return ir::to_float_vector(n.tensor(n.producer(dq_out)->inputs[1]))[0];
  };
  EXPECT_FLOAT_EQ(scale_of(conv->inputs[2]), scale_of(conv->inputs[0]) * scale_of(conv->inputs[1]));
  // Same network on coarser grids (input range now symmetric, channel 0's weights 6x coarser
  // than its own per-channel scale): outputs agree on average to within one output step and
  // everywhere to within 5% of the output range. A wrong scale would be off by 2x or more.
  float step = scale_of("output");
  for (int k = 0; k < 2; ++k) {
    std::string in = kQop + "qdq_perchannel.input_" + std::to_string(k) + ".npy";
    std::vector<float> before = run(g, in), after = run(n, in);
    ASSERT_EQ(before.size(), after.size());
    float worst = 0, total = 0;
    for (std::size_t i = 0; i < before.size(); ++i) {
      worst = std::max(worst, std::fabs(before[i] - after[i]));
      total += std::fabs(before[i] - after[i]);
    }
    EXPECT_LE(total / before.size(), step) << "sample " << k;
    EXPECT_LE(worst, 0.05f * 127 * step) << "sample " << k;
  }
  EXPECT_NO_THROW(load_onnx_bytes(save_onnx_bytes(n), "normalized"));
}

TEST(Normalize, QOperatorOutsideTheSchemeIsRejectedNamingTheTensor) {
  std::string msg = error_of(load_onnx(kQop + "qop_u8_perchannel.onnx"));
  EXPECT_THAT(msg, HasSubstr("'x_q'"));
  EXPECT_THAT(msg, HasSubstr("asymmetric"));
  EXPECT_THAT(msg, HasSubstr("npukit quantize"));

  // Make the activations symmetric int8 so the per-channel weight is the first problem.
  ir::Graph g = load_onnx(kQop + "qop_u8_perchannel.onnx");
  for (const char* zp : {"x_zero_point", "y_zero_point"})
    g.tensor(zp) = ir::make_scalar<std::int8_t>(0, zp);
  msg = error_of(g);
  EXPECT_THAT(msg, HasSubstr("weight 'w'"));
  EXPECT_THAT(msg, HasSubstr("per channel (int8, 6 scales"));
}

TEST(Normalize, NativeAndFloatModelsPassUnchanged) {
  for (std::string path : {kQop + "qop_ms_ops.onnx", kQop + "qop_matmul.onnx",
                           std::string(NPUKIT_SOURCE_DIR) + "/fixtures/digits/lenet_digits.onnx"}) {
    ir::Graph g = load_onnx(path);
    NormalizeReport report;
    ir::Graph n = normalize_quantization(g, &report);
    EXPECT_TRUE(report.changes.empty()) << path;
    ASSERT_EQ(n.nodes.size(), g.nodes.size());
    for (std::size_t i = 0; i < g.nodes.size(); ++i)
      EXPECT_EQ(n.nodes[i].inputs, g.nodes[i].inputs);
  }
}

TEST(Normalize, MicrosoftOpsModelImportsWithShapes) {
  ir::Graph g = load_onnx(kQop + "qop_ms_ops.onnx");
  EXPECT_EQ(g.tensor("cat").shape, (ir::Shape{1, 12, 4, 4}));
  EXPECT_EQ(g.tensor("ap").shape, (ir::Shape{1, 12, 2, 2}));
  EXPECT_EQ(g.tensor("g").shape, (ir::Shape{1, 10}));
  EXPECT_EQ(g.tensor("g").dtype, ir::DType::kInt8);
  ir::Graph m = load_onnx(kQop + "qop_matmul.onnx");
  EXPECT_EQ(m.tensor("output").dtype, ir::DType::kFloat32);  // QGemm without y_scale
}

}  // namespace
}  // namespace npukit::onnxio
