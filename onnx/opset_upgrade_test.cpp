// Old-opset models (fixtures/opsets/, made by make_opset_models.py) upgraded to opset 13 on
// import: the reference executor on the upgraded graph against onnxruntime-node 1.30.0 on the
// original file (outputs committed as <name>.ort.npy by make_opset_models.sh).
#include "common/error.h"
#include "ir/tensor_util.h"
#include "onnx/onnx_io.h"
#include "ref/executor.h"

#include <gtest/gtest.h>

#include <cmath>

namespace npukit::onnxio {
namespace {

const std::string kDir = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/opsets/";

const ir::Node* find_op(const ir::Graph& g, const std::string& op) {
  for (const auto& n : g.nodes)
    if (n.op_type == op) return &n;
  return nullptr;
}

// Loads <name>.onnx, checks it is at least opset 13, runs it and compares with onnxruntime.
ir::Graph check_against_ort(const std::string& name, const LoadOptions& options = {}) {
  ir::Graph g = load_onnx(kDir + name + ".onnx", options);
  EXPECT_GE(g.opset, 13) << name;
  ir::Tensor x = load_tensor_file(kDir + name + ".input.npy");
  x.name = "x";
  std::vector<float> got = ir::to_float_vector(ref::run_graph(g, {{"x", x}}).at("y"));
  ir::Tensor want_t = load_tensor_file(kDir + name + ".ort.npy");
  std::vector<float> want = ir::to_vector<float>(want_t);
  EXPECT_EQ(got.size(), want.size()) << name;
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5f * (1 + std::fabs(want[i]))) << name << " element " << i;
  return g;
}

TEST(OpsetUpgrade, SoftmaxBefore13FlattensToTwoDimensions) {
  ir::Graph g = check_against_ort("softmax_op9_axis1");
  ASSERT_NE(find_op(g, "Flatten"), nullptr);  // axis 1 of a 4D input: Flatten, Softmax, Reshape
  EXPECT_EQ(find_op(g, "Softmax")->get_int("axis", 0), -1);
  g = check_against_ort("softmax_op11_default");
  EXPECT_NE(find_op(g, "Flatten"), nullptr);  // default axis 1 of a 3D input
  g = check_against_ort("logsoftmax_op9_last");
  EXPECT_EQ(find_op(g, "Flatten"), nullptr);  // the last axis means the same at 13
  EXPECT_EQ(find_op(g, "LogSoftmax")->get_int("axis", 0), -1);
}

TEST(OpsetUpgrade, ClipAttributesBecomeInputs) {
  for (const char* name : {"clip_op9", "clip_op7_max_only"}) {
    ir::Graph g = check_against_ort(name);
    const ir::Node* clip = find_op(g, "Clip");
    ASSERT_NE(clip, nullptr);
    EXPECT_EQ(clip->inputs.size(), 3u);
    EXPECT_FALSE(clip->has("min"));
  }
}

TEST(OpsetUpgrade, PadAttributesBecomeInputs) {
  for (const char* name : {"pad_op9_constant", "pad_op10_reflect"}) {
    ir::Graph g = check_against_ort(name);
    EXPECT_EQ(find_op(g, "Pad")->inputs.size(), 3u);
  }
}

TEST(OpsetUpgrade, SliceAttributesBecomeInputs) {
  ir::Graph g = check_against_ort("slice_op9");
  EXPECT_EQ(find_op(g, "Slice")->inputs.size(), 4u);
}

TEST(OpsetUpgrade, UpsampleAndResize10BecomeResizeWithTheOldCoordinates) {
  for (const char* name : {"upsample_op7_nearest", "upsample_op9_linear", "resize_op10_nearest",
                           "resize_op10_shrink"}) {
    ir::Graph g = check_against_ort(name);
    const ir::Node* resize = find_op(g, "Resize");
    ASSERT_NE(resize, nullptr) << name;
    EXPECT_EQ(find_op(g, "Upsample"), nullptr);
    EXPECT_EQ(resize->get_string("coordinate_transformation_mode", ""), "asymmetric");
  }
}

TEST(OpsetUpgrade, BatchNormalizationLosesSpatial) {
  ir::Graph g = check_against_ort("batchnorm_op7_spatial");
  EXPECT_FALSE(find_op(g, "BatchNormalization")->has("spatial"));
  EXPECT_TRUE(g.inputs == std::vector<std::string>{"x"});  // initializers listed as inputs (IR 3)
}

TEST(OpsetUpgrade, SplitSqueezeUnsqueezeReduceSumAttributesBecomeInputs) {
  ir::Graph g = check_against_ort("split_op11");
  EXPECT_EQ(find_op(g, "Split")->inputs.size(), 2u);
  g = check_against_ort("squeeze_unsqueeze_op11");
  EXPECT_EQ(find_op(g, "Squeeze")->inputs.size(), 2u);
  EXPECT_EQ(find_op(g, "Unsqueeze")->inputs.size(), 2u);
  g = check_against_ort("reducesum_op11");
  EXPECT_EQ(find_op(g, "ReduceSum")->inputs.size(), 2u);
  check_against_ort("reducemean_op9");  // ReduceMean keeps its axes attribute up to 17
}

TEST(OpsetUpgrade, DropoutLosesRatio) {
  ir::Graph g = check_against_ort("dropout_op9");
  EXPECT_FALSE(find_op(g, "Dropout")->has("ratio"));
}

TEST(OpsetUpgrade, HardmaxBefore13FlattensToTwoDimensions) {
  ir::Graph g = check_against_ort("hardmax_op11_default");  // axis 1 of a 3D input: over 12
  ASSERT_NE(find_op(g, "Flatten"), nullptr);
  EXPECT_EQ(find_op(g, "Hardmax")->get_int("axis", 0), -1);
}

TEST(OpsetUpgrade, TopKAttributeBecomesAnInput) {
  ir::Graph g = check_against_ort("topk_op9");
  const ir::Node* topk = find_op(g, "TopK");
  ASSERT_NE(topk, nullptr);
  EXPECT_EQ(topk->inputs.size(), 2u);
  EXPECT_FALSE(topk->has("k"));
}

TEST(ConvTranspose, FloatKernelEqualsOnnxruntime) {
  for (const char* name :
       {"convtranspose_s2_k2", "convtranspose_s2_k3_pad_outpad", "convtranspose_s2_k4_pad1",
        "convtranspose_group_dilation", "convtranspose_1d", "convtranspose_output_shape"})
    check_against_ort(name);
}

TEST(HardActivations, WrittenOutFormsBecomeOneOp) {
  for (const char* name : {"hardswish_written_out_op11", "hardswish_torch_op9"}) {
    ir::Graph g = check_against_ort(name);
    ASSERT_EQ(g.nodes.size(), 1u) << name;
    EXPECT_EQ(g.nodes[0].op_type, "HardSwish");
    EXPECT_EQ(g.opset, 14);
  }
  ir::Graph g = check_against_ort("hardsigmoid_written_out_op13");
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "HardSigmoid");
}

TEST(InputShape, SymbolicShapeChainFoldsToAConstantReshape) {
  // Without a shape the dimensions stay symbolic and the Reshape target is computed.
  ir::Graph symbolic = load_onnx(kDir + "shape_chain_op9_symbolic.onnx");
  EXPECT_EQ(symbolic_inputs(symbolic), std::vector<std::string>{"x"});
  EXPECT_NE(find_op(symbolic, "Shape"), nullptr);

  LoadOptions options;
  add_input_shape(options, "x=1,3,6,5");
  ir::Graph g = check_against_ort("shape_chain_op9_symbolic", options);
  EXPECT_TRUE(symbolic_inputs(g).empty());
  for (const char* op : {"Shape", "Gather", "Unsqueeze", "Concat"})
    EXPECT_EQ(find_op(g, op), nullptr) << op << " should have been folded";
  const ir::Node* reshape = find_op(g, "Reshape");
  ASSERT_NE(reshape, nullptr);
  EXPECT_EQ(ir::to_int64_vector(g.tensor(reshape->inputs[1])),
            (std::vector<std::int64_t>{1, 3, -1}));
  EXPECT_EQ(g.tensor("y").shape, (ir::Shape{1, 3, 30}));
}

TEST(InputShape, MistakesAreNamed) {
  LoadOptions options;
  EXPECT_THROW(add_input_shape(options, "x=1,3,,5"), Error);
  EXPECT_THROW(add_input_shape(options, "x=1,a"), Error);
  add_input_shape(options, "image=1,3,6,5");
  try {
    load_onnx(kDir + "shape_chain_op9_symbolic.onnx", options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'image', which is not a model input"), std::string::npos)
        << e.what();
  }
  LoadOptions wrong_channels;
  add_input_shape(wrong_channels, "1,4,6,5");  // the model fixes 3 channels
  EXPECT_THROW(load_onnx(kDir + "shape_chain_op9_symbolic.onnx", wrong_channels), Error);
  LoadOptions wrong_rank;
  add_input_shape(wrong_rank, "x=1,3,30");
  EXPECT_THROW(load_onnx(kDir + "shape_chain_op9_symbolic.onnx", wrong_rank), Error);
}

TEST(InputShape, ShapeFromSampleData) {
  ir::Tensor input;
  input.name = "x";
  input.shape = {-1, 3, -1, -1};
  EXPECT_EQ(shape_from_sample(input, {10, 3, 32, 48}, "calib"), (ir::Shape{1, 3, 32, 48}));
  EXPECT_EQ(shape_from_sample(input, {10, 1, 3, 32, 48}, "calib"), (ir::Shape{1, 3, 32, 48}));
  EXPECT_THROW(shape_from_sample(input, {10, 4, 32, 48}, "calib"), Error);
  EXPECT_THROW(shape_from_sample(input, {32, 48}, "calib"), Error);
}

}  // namespace
}  // namespace npukit::onnxio
