// canonicalize_qdq: DQ -> float op -> Q patterns become QOperator ops, the bias rescaled to
// input scale x weight scale (values worked by hand). Per-channel weights reach it only after
// normalize_quantization has requantized them.
#include "compiler/passes.h"
#include "compiler/test_graphs.h"
#include "onnx/onnx_io.h"

#include <gtest/gtest.h>

#include <map>

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;

// x(float) -> Q -> DQ -> Conv(DQ(w), DQ(b)) -> Relu -> Q -> DQ -> y
GraphBuilder qdq_conv(std::vector<float> w_scales) {
  GraphBuilder b;
  b.input("x", ir::DType::kFloat32, {1, 1, 4, 4});
  b.value("xq", ir::DType::kInt8, {1, 1, 4, 4});
  b.value("xd", ir::DType::kFloat32, {1, 1, 4, 4});
  b.node("QuantizeLinear", "", {"x", b.f32("sx", 0.5f), b.i8("zx", 0)}, {"xq"}, "q_in");
  b.node("DequantizeLinear", "", {"xq", "sx", "zx"}, {"xd"}, "dq_in");
  // Two 1x1 kernels: int8 10 and 127 with per-channel scales.
  b.constant<std::int8_t>("wq", ir::DType::kInt8, {2, 1, 1, 1}, {10, 127});
  b.constant<float>("ws", ir::DType::kFloat32, {static_cast<std::int64_t>(w_scales.size())},
                    w_scales);
  b.value("wd", ir::DType::kFloat32, {2, 1, 1, 1});
  b.node("DequantizeLinear", "", {"wq", "ws"}, {"wd"}, "dq_w").attributes["axis"] = std::int64_t{0};
  b.constant<std::int32_t>("bq", ir::DType::kInt32, {2}, {4, -8});
  b.constant<float>("bs", ir::DType::kFloat32, {static_cast<std::int64_t>(w_scales.size())}, [&] {
    std::vector<float> v;
    for (float s : w_scales) v.push_back(0.5f * s);
    return v;
  }());
  b.value("bd", ir::DType::kFloat32, {2});
  b.node("DequantizeLinear", "", {"bq", "bs"}, {"bd"}, "dq_b").attributes["axis"] = std::int64_t{0};
  b.value("conv_out", ir::DType::kFloat32, {1, 2, 4, 4});
  b.node("Conv", "", {"xd", "wd", "bd"}, {"conv_out"}, "conv");
  b.value("relu_out", ir::DType::kFloat32, {1, 2, 4, 4});
  b.node("Relu", "", {"conv_out"}, {"relu_out"}, "relu");
  b.value("yq", ir::DType::kInt8, {1, 2, 4, 4});
  b.node("QuantizeLinear", "", {"relu_out", b.f32("sy", 0.25f), b.i8("zy", 0)}, {"yq"}, "q_out");
  b.value("y", ir::DType::kFloat32, {1, 2, 4, 4});
  b.node("DequantizeLinear", "", {"yq", "sy", "zy"}, {"y"}, "dq_out");
  b.g.outputs = {"y"};
  return b;
}

const ir::Node* find(const ir::Graph& g, const std::string& op) {
  for (const auto& n : g.nodes)
    if (n.op_type == op) return &n;
  return nullptr;
}

TEST(CanonicalizeQdq, ConvReluBecomesQLinearConvAndInt8Relu) {
  Context ctx;
  ctx.graph = qdq_conv({0.1f}).g;
  canonicalize_qdq(ctx);
  const ir::Node* conv = find(ctx.graph, "QLinearConv");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->name, "conv");
  EXPECT_EQ(conv->inputs[0], "xq");
  EXPECT_EQ(conv->inputs[3], "wq");  // per-tensor weights are used as they are
  const ir::Node* relu = find(ctx.graph, "Relu");
  ASSERT_NE(relu, nullptr);
  EXPECT_EQ(relu->inputs[0], conv->outputs[0]);
  EXPECT_EQ(relu->outputs[0], "yq");
  EXPECT_EQ(ctx.graph.tensor(conv->outputs[0]).dtype, ir::DType::kInt8);
  // The int32 bias keeps its values (its scale is already s_x * s_w = 0.05).
  const ir::Tensor& bias = ctx.graph.tensor(conv->inputs[8]);
  EXPECT_EQ(bias.as<std::int32_t>()[0], 4);
  EXPECT_EQ(bias.as<std::int32_t>()[1], -8);
  EXPECT_EQ(find(ctx.graph, "Conv"), nullptr);
  // Input quantization and output dequantization stay (host work).
  EXPECT_NE(find(ctx.graph, "QuantizeLinear"), nullptr);
  EXPECT_NE(find(ctx.graph, "DequantizeLinear"), nullptr);
}

TEST(CanonicalizeQdq, PerChannelWeightsAreLeftFloatUntilNormalized) {
  Context alone;
  alone.graph = qdq_conv({0.2f, 0.1f}).g;
  canonicalize_qdq(alone);
  EXPECT_EQ(find(alone.graph, "QLinearConv"), nullptr);
  EXPECT_NE(find(alone.graph, "Conv"), nullptr);

  // Float weights: 10 * 0.2 = 2.0 and 127 * 0.1 = 12.7; one scale 12.7 / 127 = 0.1 gives int8
  // 20 and 127. Biases 4 * (0.5*0.2) = 0.4 and -8 * (0.5*0.1) = -0.4 at the new scale
  // 0.5 * 0.1 = 0.05 are 8 and -8.
  Context ctx;
  ctx.graph = qdq_conv({0.2f, 0.1f}).g;
  normalize_quantization(ctx);
  canonicalize_qdq(ctx);
  const ir::Node* conv = find(ctx.graph, "QLinearConv");
  ASSERT_NE(conv, nullptr);
  const ir::Tensor& w = ctx.graph.tensor(conv->inputs[3]);
  EXPECT_EQ(w.as<std::int8_t>()[0], 20);
  EXPECT_EQ(w.as<std::int8_t>()[1], 127);
  EXPECT_NEAR(constant_float(ctx.graph, *conv, 4), 0.1f, 1e-7);
  const ir::Tensor& bias = ctx.graph.tensor(conv->inputs[8]);
  EXPECT_EQ(bias.as<std::int32_t>()[0], 8);
  EXPECT_EQ(bias.as<std::int32_t>()[1], -8);
}

TEST(CanonicalizeQdq, ScaleChangingMaxPoolStaysFloat) {
  GraphBuilder b;
  b.input("xq", ir::DType::kInt8, {1, 1, 4, 4});
  b.value("xd", ir::DType::kFloat32, {1, 1, 4, 4});
  b.node("DequantizeLinear", "", {"xq", b.f32("s1", 0.5f)}, {"xd"}, "dq");
  b.value("p", ir::DType::kFloat32, {1, 1, 2, 2});
  b.node("MaxPool", "", {"xd"}, {"p"}, "pool").attributes["kernel_shape"] =
      std::vector<std::int64_t>{2, 2};
  b.value("pq", ir::DType::kInt8, {1, 1, 2, 2});
  b.node("QuantizeLinear", "", {"p", b.f32("s2", 0.25f)}, {"pq"}, "q");
  b.g.outputs = {"pq"};
  Context ctx;
  ctx.graph = b.g;
  canonicalize_qdq(ctx);
  EXPECT_EQ(ctx.graph.nodes.size(), 3u);  // unchanged
}

// torch.ao's QDQ export (fixtures/torch_ao, make_torch_ao.py): every scale and zero point a
// Constant node, bias zero points ConstantOfShape -> Cast(int32), a Cast to uint8 after every
// QuantizeLinear. The importer folds the constants, remove_noops drops the Casts, and the front
// end leaves nothing but QOperator ops between the input's quantizer and the output's
// dequantizer (the MaxPool and Flatten pairs folded, no Relu invented after them).
TEST(CanonicalizeQdq, TorchAoExportFoldsToQOperatorOps) {
  for (const char* backend : {"qnnpack", "onednn"}) {
    SCOPED_TRACE(backend);
    const ir::Graph model = onnxio::load_onnx(std::string(NPUKIT_SOURCE_DIR) +
                                              "/fixtures/torch_ao/ao_" + backend + ".onnx");
    std::map<std::string, int> ops;
    for (const auto& n : model.nodes) ++ops[n.op_type];
    EXPECT_EQ(ops["Constant"] + ops["ConstantOfShape"], 0);  // folded at import
    EXPECT_EQ(ops["Cast"], 11);  // the uint8 no-op Casts after the quantizers
    Context ctx;
    ctx.graph = model;
    remove_noops(ctx);
    normalize_quantization(ctx);
    canonicalize_qdq(ctx);
    ops.clear();
    for (const auto& n : ctx.graph.nodes) ++ops[n.op_type];
    EXPECT_EQ(ops, (std::map<std::string, int>{{"QuantizeLinear", 1},
                                               {"QLinearConv", 4},
                                               {"Relu", 5},
                                               {"MaxPool", 2},
                                               {"Flatten", 1},
                                               {"QGemm", 2},
                                               {"DequantizeLinear", 1}}));
  }
}

}  // namespace
}  // namespace npukit::compiler
