// The reference executor against onnxruntime on committed int8 models: the expected values were
// computed by onnxruntime-node 1.30.0 (graph optimizations disabled, bench/ort/run.mjs) and
// committed, so this compares against an implementation that shares no code with npukit.
#include "ir/tensor_util.h"
#include "onnx/onnx_io.h"
#include "ref/executor.h"

#include <gtest/gtest.h>

#include <cstring>

namespace npukit::onnxio {
namespace {

const std::string kFixtures = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/";

TEST(OrtAgreement, DigitsInt8LogitsEqualOnnxruntimeOnTheWholeTestSplit) {
  // lenet_digits.int8.onnx is `npukit quantize lenet_digits.onnx --calib calib.npy` (min-max).
  ir::Graph g = load_onnx(kFixtures + "digits/lenet_digits.int8.onnx");
  ir::Tensor x = load_tensor_file(kFixtures + "digits/X_test.npy");
  std::vector<float> ort =
      ir::to_vector<float>(load_tensor_file(kFixtures + "digits/ort_int8_logits.npy"));
  const std::size_t n = static_cast<std::size_t>(x.shape[0]);
  ASSERT_EQ(ort.size(), n * 10);
  std::size_t equal = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ir::Tensor img = ir::make_tensor(ir::DType::kFloat32, {1, 1, 8, 8}, "image");
    std::memcpy(img.data.data(), x.data.data() + i * 256, 256);
    std::vector<float> got = ir::to_float_vector(ref::run_graph(g, {{"image", img}}).at("logits"));
    for (std::size_t k = 0; k < 10; ++k) equal += got[k] == ort[i * 10 + k];
  }
  EXPECT_EQ(equal, n * 10);  // dequantized int8 values: equal floats mean equal int8
}

TEST(OrtAgreement, MicrosoftOpsModelsEqualOnnxruntime) {
  for (std::string m : {"qop_ms_ops", "qop_matmul", "qop_u8_ms_ops", "qop_u8_perchannel"}) {
    ir::Graph g = load_onnx(kFixtures + "qop/" + m + ".onnx");
    for (int k = 0; k < 2; ++k) {
      ir::Tensor in =
          load_tensor_file(kFixtures + "qop/" + m + ".input_" + std::to_string(k) + ".npy");
      in.name = g.inputs.at(0);
      std::vector<float> got =
          ir::to_float_vector(ref::run_graph(g, {{in.name, in}}).at(g.outputs[0]));
      std::vector<float> want = ir::to_vector<float>(
          load_tensor_file(kFixtures + "qop/" + m + ".ort_output_" + std::to_string(k) + ".npy"));
      ASSERT_EQ(got.size(), want.size()) << m;
      for (std::size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(got[i], want[i]) << m << " " << k << " " << i;
    }
  }
}

}  // namespace
}  // namespace npukit::onnxio
