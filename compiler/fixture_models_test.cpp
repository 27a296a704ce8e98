// The committed test models (fixtures/models: float models built with torch, quantized here with
// npukit's quantizer; fixtures/qop: QOperator/QDQ models as onnxruntime's quantizer writes them,
// com.microsoft ops and per-channel weights included) compiled for every array configuration and
// run on the device model, bit for bit against the reference executor on the lowered graph.
#include "common/error.h"
#include "compiler/device_run.h"
#include "onnx/onnx_io.h"
#include "quant/quantize.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace npukit::compiler {
namespace {

namespace fs = std::filesystem;

const std::string kRoot = NPUKIT_SOURCE_DIR;

std::vector<ref::TensorMap> model_inputs(const ir::Graph& g, const std::string& stem) {
  std::vector<ref::TensorMap> samples;
  for (int i = 0; fs::exists(stem + ".input_" + std::to_string(i) + ".npy"); ++i) {
    ref::TensorMap m;
    m[g.inputs.at(0)] = onnxio::tensor_from_npy(
        read_npy(stem + ".input_" + std::to_string(i) + ".npy"), g.inputs.at(0));
    samples.push_back(m);
  }
  return samples;
}

struct Outcome {
  std::size_t device_layers = 0, values = 0, differ = 0;
  bool several_device_segments = false;
};

// Compiles for the hardware; a model the compiler refuses because it would hit a v1.0.0 erratum
// that has no workaround is compiled with --allow-errata instead (the device model computes the
// intended result, DECISIONS.md 18), so what the compiler emits is checked either way.
Outcome check(const ir::Graph& int8_model, const std::vector<ref::TensorMap>& samples,
              const isa::SaArch& arch) {
  CompileOptions opt;
  opt.arch = arch;
  CompileResult r;
  try {
    r = compile(int8_model, opt);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("erratum"), std::string::npos) << e.what();
    opt.allow_errata = true;
    r = compile(int8_model, opt);
  }
  Outcome o;
  o.device_layers = r.program.layers.size();
  // This harness runs one device part after the host prefix. A program with several device
  // segments (here only 16,1,16 with --allow-errata, whose CONCAT limits put a concat on the
  // host) is run segment by segment by runtime::Session and checked against the reference by
  // tools/segments_cli_test.cpp.
  if (r.manifest.device_segment_count() > 1) {
    o.several_device_segments = true;
    return o;
  }
  for (const auto& sample : samples) {
    // The host prefix (input quantization) gives the device inputs.
    const auto dev_in = testing::device_inputs(r, sample);
    const auto dev = testing::run_on_device(r, dev_in);
    const auto ref = testing::run_lowered_on_reference(int8_model, opt, r, dev_in);
    for (const auto& [name, values] : ref) {
      const auto& d = dev.at(name);
      o.values += values.size();
      for (std::size_t i = 0; i < values.size() && i < d.size(); ++i) o.differ += d[i] != values[i];
    }
  }
  return o;
}

class FloatModels : public ::testing::TestWithParam<std::string> {};

TEST_P(FloatModels, QuantizedCompiledAndBitExactOnTheDevice) {
  const std::string stem = kRoot + "/fixtures/models/" + GetParam();
  const ir::Graph model = onnxio::load_onnx(stem + ".onnx");
  const auto samples = model_inputs(model, stem);
  ASSERT_FALSE(samples.empty());
  const ir::Graph q = quant::quantize(model, samples, {});
  for (const isa::SaArch& arch : isa::kSupportedArchs) {
    // On 9,4,4 and 9,8,8 every fixture compiles for the hardware: the odd-KernelItr erratum is
    // worked around by padding kernels, tall inputs by running transposed, and no fixture has
    // conv-pool-pool.
    if (arch != isa::kArch16x1x16) {
      CompileOptions hw;
      hw.arch = arch;
      EXPECT_NO_THROW(compile(q, hw));
    }
    const Outcome o = check(q, samples, arch);
    EXPECT_GT(o.device_layers, 0u) << arch.str();
    if (o.several_device_segments) {
      EXPECT_EQ(arch, isa::kArch16x1x16) << GetParam();
      continue;
    }
    EXPECT_GT(o.values, 0u);
    EXPECT_EQ(o.differ, 0u) << GetParam() << " on " << arch.str() << ": " << o.differ << " of "
                            << o.values;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FloatModels,
                         ::testing::Values("asym_pad", "batchnorm", "big_kernels", "concat",
                                           "dw_separable", "gap_fc", "leaky_relu", "nonsquare",
                                           "odd_channels", "pools", "residual", "sigmoid_out",
                                           "stride2", "tall", "upsample", "yolo_like"));

class QopModels : public ::testing::TestWithParam<std::string> {};

TEST_P(QopModels, CompiledAndBitExactOnTheDevice) {
  const std::string stem = kRoot + "/fixtures/qop/" + GetParam();
  const ir::Graph model = onnxio::load_onnx(stem + ".onnx");
  const auto samples = model_inputs(model, stem);
  ASSERT_FALSE(samples.empty());
  for (const isa::SaArch& arch : {isa::kArch9x8x8, isa::kArch9x4x4}) {
    // For the hardware, with no --allow-errata: on 9,4,4 qop_ms_ops' average pool runs as a
    // depthwise conv with KernelItr 3 before a conv, padded to 4 (pad_kernel_iterations).
    CompileOptions hw;
    hw.arch = arch;
    EXPECT_NO_THROW(compile(model, hw)) << arch.str();
    const Outcome o = check(model, samples, arch);
    EXPECT_GT(o.device_layers, 0u);
    EXPECT_EQ(o.differ, 0u) << arch.str() << ": " << o.differ << " of " << o.values;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, QopModels,
                         ::testing::Values("qdq_perchannel", "qop_matmul", "qop_ms_ops",
                                           "qop_u8_perchannel", "qop_u8_ms_ops"));

TEST(DigitsModel, CompilesToOneDevicePart) {
  const std::string dir = kRoot + "/fixtures/digits/";
  const ir::Graph model = onnxio::load_onnx(dir + "lenet_digits.onnx");
  const auto calib = quant::load_calibration_data(dir + "calib.npy", model);
  const ir::Graph q = quant::quantize(model, calib, {});
  const CompileResult r = compile(q, {});
  // conv+relu, pool, conv+relu, pool, fc+relu, fc: everything between the input quantization and
  // the output dequantization runs on the device.
  EXPECT_EQ(r.program.layers.size(), 6u);
  ASSERT_TRUE(r.host_first() && r.host_last());
  EXPECT_EQ(r.host_first()->nodes.size(), 1u);
  EXPECT_EQ(r.host_last()->nodes.size(), 1u);
  std::vector<ref::TensorMap> first(calib.begin(), calib.begin() + 4);
  const Outcome o = check(q, first, isa::kArch9x8x8);
  EXPECT_EQ(o.differ, 0u);
}

}  // namespace
}  // namespace npukit::compiler
