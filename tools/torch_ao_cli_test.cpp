// torch.ao QDQ models (fixtures/torch_ao, make_torch_ao.py: eager-mode PTQ with the qnnpack and
// the onednn backend, exported by torch.onnx) through the real binary, as a user would: compile
// with no quantize step, run segment by segment by runtime::Session on the device model.
// torch's export states every scale and zero point as a Constant node, bias zero points as
// ConstantOfShape -> Cast, puts a no-op Cast after every QuantizeLinear and wraps each MaxPool
// and Flatten after a ReLU in its own uint8 DequantizeLinear / QuantizeLinear pair. All of that
// must fold away: every MAC on the device (>= 95 % asked), the device outputs bit for bit the
// reference executor's on the lowered graph, and close to onnxruntime's run of the same file.
#include "compiler/compiler.h"
#include "ir/tensor_util.h"
#include "isa/manifest.h"
#include "onnx/onnx_io.h"
#include "ref/executor.h"
#include "runtime/session.h"
#include "tools/cli_test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace {

using npukit::tools::testing::run_npukit;

const std::string kDir = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/torch_ao/";

class TorchAo : public ::testing::TestWithParam<const char*> {};

TEST_P(TorchAo, CompilesWithoutQuantizingRunsOnTheDeviceCloseToOnnxruntime) {
  const std::string stem = kDir + "ao_" + GetParam();
  npukit::testing::ScratchDir dir("torch_ao");
  const std::string prog = dir.str() + "/prog";
  const auto r = run_npukit("compile " + stem + ".onnx --sa-arch 9,8,8 -o " + prog + " --explain");
  ASSERT_EQ(r.status, 0) << r.out;
  // No ReLU invented for the uint8 zero-point-0 output of a MaxPool or Flatten of a ReLU.
  EXPECT_EQ(r.out.find("kept as a Relu"), std::string::npos) << r.out;
  const auto m = npukit::isa::load_manifest(prog + "/manifest.json");
  EXPECT_GE(m.device_mac_share(), 0.95) << r.out;
  EXPECT_EQ(m.device_segment_count(), 1u) << r.out;

  const npukit::ir::Graph model = npukit::onnxio::load_onnx(stem + ".onnx");
  // The output's step: y = DequantizeLinear(q, scale, zero point) in the exported graph.
  const npukit::ir::Node* dq = model.producer("y");
  ASSERT_TRUE(dq && dq->op_type == "DequantizeLinear");
  const double step = npukit::ir::to_float_vector(model.tensor(dq->inputs[1])).at(0);
  npukit::compiler::CompileOptions opt;
  const auto lowered = npukit::compiler::lower(model, opt);
  npukit::runtime::Session session(prog);
  std::size_t values = 0, equal = 0;
  double worst = 0;
  for (int k = 0; k < 3; ++k) {
    npukit::ir::Tensor x =
        npukit::onnxio::load_tensor_file(stem + ".input_" + std::to_string(k) + ".npy");
    x.name = "x";
    const auto got = npukit::ir::to_float_vector(session.run({{"x", x}}).outputs.at("y"));
    EXPECT_EQ(
        got, npukit::ir::to_float_vector(npukit::ref::run_graph(lowered.graph, {{"x", x}}).at("y")))
        << "input " << k;
    const auto want = npukit::ir::to_float_vector(
        npukit::onnxio::load_tensor_file(stem + ".ort_y_" + std::to_string(k) + ".npy"));
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double lsb = std::fabs(got[i] - want[i]) / step;
      ++values;
      equal += lsb < 0.5;  // the same value on the model's grid
      worst = std::max(worst, lsb);
    }
  }
  // Every activation after a ReLU is uint8 [0, 255] in the model and int8 [0, 127] on the Gati,
  // and y's own uint8 grid (zero point 120) becomes symmetric int8 at 135/127 of its step
  // (DECISIONS.md 5, normalize_quantization): so the logits are not all equal and not on
  // onnxruntime's grid. Measured: 19 (qnnpack) and 18 (onednn) of 30 within half a step, the worst
  // 1.22 and 0.87 steps (about one int8 step of the Gati's, 1.06 of the model's, plus the grids'
  // offset).
  EXPECT_LE(worst, 1.5) << equal << " of " << values << " within half a step";
  EXPECT_GE(equal * 2, values) << equal << " of " << values << " within half a step, worst "
                               << worst;
  std::printf("%s: %zu of %zu logits within half a step of onnxruntime's, worst %.2f steps\n",
              GetParam(), equal, values, worst);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TorchAo, ::testing::Values("qnnpack", "onednn"));

}  // namespace
