// Per-channel FC weights (fixtures/qop/perchannel_fc*, make_perchannel_fc.py: a QGemm and a
// QLinearMatMul with one weight scale per output channel, as onnxruntime's quantizer writes them
// with per_channel=True) through the real binary: compiled with --weight-scales per-tensor,
// per-channel and auto, run by runtime::Session on the device model (fc2's groups of 32 outputs
// are device outputs each, concatenated by a host segment), checked bit for bit against the
// reference executor on the lowered graph and measured against onnxruntime-node's committed
// outputs. The cycles are the device model's.
#include "compiler/compiler.h"
#include "ir/tensor_util.h"
#include "isa/manifest.h"
#include "onnx/onnx_io.h"
#include "ref/executor.h"
#include "runtime/session.h"
#include "tools/cli_test_support.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

using npukit::tools::testing::run_npukit;

const std::string kQop = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/qop/";

struct Measured {
  std::size_t equal = 0, total = 0, layers = 0;
  int max_diff = 0;
  std::uint64_t cycles = 0;  // device cycles of one image (the first)
  std::string out;           // npukit compile --explain
};

Measured measure(const std::string& name, const std::string& mode) {
  const std::string stem = kQop + name;
  const std::string prog = npukit::tools::testing::scratch_dir(name + "_" + mode).string();
  Measured m;
  const auto r = run_npukit("compile " + stem + ".onnx --sa-arch 9,8,8 --weight-scales " + mode +
                            " -o " + prog + " --explain");
  EXPECT_EQ(r.status, 0) << r.out;
  m.out = r.out;
  const npukit::ir::Graph model = npukit::onnxio::load_onnx(stem + ".onnx");
  npukit::compiler::CompileOptions opt;
  opt.arch = npukit::isa::kArch9x8x8;
  opt.weight_scales = npukit::compiler::parse_weight_scales(mode, "mode");
  const auto lowered = npukit::compiler::lower(model, opt);
  npukit::runtime::Session session(prog);
  m.layers = session.manifest().layers.size();
  for (int k = 0; k < 8; ++k) {
    npukit::ir::Tensor x =
        npukit::onnxio::load_tensor_file(stem + ".input_" + std::to_string(k) + ".npy");
    x.name = "x";
    const auto run = session.run({{"x", x}});
    if (k == 0) m.cycles = run.device_cycles;
    const auto& y = run.outputs.at("y");
    const auto ref = npukit::ref::run_graph(lowered.graph, {{"x", x}}).at("y");
    EXPECT_EQ(y.data, ref.data) << name << " " << mode << " input " << k;
    const npukit::ir::Tensor ort =
        npukit::onnxio::load_tensor_file(stem + ".ort_output_" + std::to_string(k) + ".npy");
    EXPECT_EQ(y.data.size(), ort.data.size());
    const auto* got = reinterpret_cast<const std::int8_t*>(y.data.data());
    const auto* want = reinterpret_cast<const std::int8_t*>(ort.data.data());
    for (std::size_t i = 0; i < y.data.size() && i < ort.data.size(); ++i) {
      m.equal += got[i] == want[i];
      m.max_diff = std::max(m.max_diff, std::abs(got[i] - want[i]));
    }
    m.total += y.data.size();
  }
  std::printf(
      "%s --weight-scales %s: %zu device layers, %llu cycles, %zu of %zu equal to "
      "onnxruntime, largest difference %d\n",
      name.c_str(), mode.c_str(), m.layers, static_cast<unsigned long long>(m.cycles), m.equal,
      m.total, m.max_diff);
  return m;
}

// Channels sharing a scale in 32s: per channel runs the model's own integers in 32-output groups,
// and only QuantScale's rounding of x_scale * w_scale / y_scale (against onnxruntime's float
// multiply) can differ; per tensor requantizes 96 and 128 weights per output.
TEST(PerChannelFc, SharedScalesRunExactlyPerChannel) {
  const Measured t = measure("perchannel_fc32", "per-tensor");
  const Measured c = measure("perchannel_fc32", "per-channel");
  const Measured a = measure("perchannel_fc32", "auto");
  EXPECT_EQ(t.layers, 2u);
  EXPECT_EQ(c.layers, 6u);  // fc1 in 4 groups of 32, fc2 in 2
  EXPECT_EQ(a.layers, c.layers) << a.out;
  EXPECT_NE(a.out.find("FC 'fc1': weights per channel (--weight-scales auto)"), std::string::npos)
      << a.out;
  EXPECT_NE(a.out.find("their outputs concatenated on the host"), std::string::npos) << a.out;
  // Measured (9,8,8): per channel 512 of 512 equal, 1826 cycles; per tensor 235 of 512, 5 steps
  // at most, 1371 cycles (96 and 128 products per output, each weight off by up to half of
  // the tensor's step, which is up to 5x the channel's).
  EXPECT_EQ(c.equal, c.total);
  EXPECT_EQ(c.max_diff, 0);
  EXPECT_GE(2 * t.equal, t.total / 2);
  EXPECT_LE(t.max_diff, 6);
  EXPECT_GT(c.cycles, t.cycles);  // 4 more FC layers and a dispatch frame
}

// A scale per channel (log-normal spread): a group of 32 at its largest channel's scale is
// not much finer than the tensor's; auto keeps the one instruction.
TEST(PerChannelFc, ArbitraryScalesStayPerTensorByDefault) {
  const Measured t = measure("perchannel_fc", "per-tensor");
  const Measured c = measure("perchannel_fc", "per-channel");
  const Measured a = measure("perchannel_fc", "auto");
  EXPECT_EQ(a.layers, t.layers) << a.out;
  EXPECT_NE(a.out.find("FC 'fc2': weights per tensor (--weight-scales auto)"), std::string::npos)
      << a.out;
  // Measured (9,8,8): per tensor 200 of 512 equal, 7 steps at most, 1371 cycles; per channel 245,
  // 5 steps, 1826 cycles. Neither is within 1 step of onnxruntime.
  EXPECT_LE(t.max_diff, 8);
  EXPECT_LE(c.max_diff, 6);
  EXPECT_GE(3 * t.equal, t.total);
  EXPECT_GT(c.equal, t.equal);
}

}  // namespace
