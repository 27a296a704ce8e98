// The per-element ops of issues 12 and 18 end to end: small models quantized by npukit
// (fixtures/pointwise, made by make_pointwise.py: hard-swish, hard-sigmoid, per-channel Mul,
// scalar Sub and Div, a standalone BatchNormalization, and hard-swish written out at opset 9),
// compiled for every array, run on the device model from the GML bytes, bit for bit against the
// reference executor on the lowered graph, and against onnxruntime-node's committed outputs of the
// int8 model (which runs the QDQ float ops where the device runs depthwise convs and EltWise).
#include "compiler/device_run.h"
#include "onnx/onnx_io.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

namespace npukit::compiler {
namespace {

const std::string kDir = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/pointwise/";

class PointwiseModels : public ::testing::TestWithParam<std::string> {};

TEST_P(PointwiseModels, AllOnTheDeviceAndCloseToOnnxruntime) {
  const std::string stem = kDir + GetParam();
  const ir::Graph model = onnxio::load_onnx(stem + ".onnx");
  for (const isa::SaArch& arch : {isa::kArch9x8x8, isa::kArch9x4x4}) {
    CompileOptions opt;
    opt.arch = arch;
    const CompileResult r = compile(model, opt);
    for (const auto& n : r.ctx.graph.nodes)
      EXPECT_TRUE(is_gati(n)) << n.name << " (" << n.op_type << ") runs on the host";
    std::size_t equal = 0, total = 0;
    int worst = 0;
    for (int k = 0; std::filesystem::exists(stem + ".input_" + std::to_string(k) + ".npy"); ++k) {
      const std::string ks = std::to_string(k);
      const ir::Tensor x = onnxio::tensor_from_npy(read_npy(stem + ".input_" + ks + ".npy"), "x");
      const ir::Tensor ort =
          onnxio::tensor_from_npy(read_npy(stem + ".ort_output_" + ks + ".npy"), "y");
      const std::map<std::string, ir::Tensor> in = {{"x", x}};
      const auto dev = testing::run_on_device(r, in);
      const auto ref = testing::run_on_reference(r.ctx, r.program, in);
      ASSERT_TRUE(dev.count("y") && ref.count("y")) << arch.str();
      EXPECT_EQ(dev.at("y"), ref.at("y")) << arch.str();
      const auto& got = dev.at("y");  // [C][H*W], the ONNX order for N = 1
      ASSERT_EQ(got.size(), ort.data.size());
      const auto* want = reinterpret_cast<const std::int8_t*>(ort.data.data());
      for (std::size_t i = 0; i < got.size(); ++i) {
        equal += got[i] == want[i];
        worst = std::max(worst, std::abs(got[i] - want[i]));
      }
      total += got.size();
    }
    ASSERT_GT(total, 0u);
    std::printf("%s on %s: %zu of %zu int8 outputs equal to onnxruntime, largest difference %d\n",
                GetParam().c_str(), arch.str().c_str(), equal, total, worst);
    // Measured: 1042 (pointwise) and 1043 (hswish_op9) of 1152 equal, largest difference 2 and 1.
    // Every layer requantizes with the 16-bit QuantScale where onnxruntime multiplies in float and
    // rounds ties its own way, hswish_op9's HardSwish rounds its gate to 1/127 (its input range
    // is below 6), and the last 1x1 conv sums 8 channels, each step of which is about one output
    // step: a 1-step difference in any of them shows.
    EXPECT_GE(static_cast<double>(equal), 0.88 * static_cast<double>(total)) << arch.str();
    EXPECT_LE(worst, 2) << arch.str();
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PointwiseModels,
                         ::testing::Values(std::string("pointwise"), std::string("hswish_op9")));

}  // namespace
}  // namespace npukit::compiler
