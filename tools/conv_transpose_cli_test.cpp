// ct_net (fixtures/convtranspose: five ConvTransposes) through the real binary: quantize, compile,
// run segment by segment by runtime::Session, bit for bit the reference executor's outputs on
// the lowered graph, with the sub-pixel convs on the device.
#include "compiler/compiler.h"
#include "ir/tensor_util.h"
#include "isa/manifest.h"
#include "onnx/onnx_io.h"
#include "ref/executor.h"
#include "runtime/session.h"
#include "tools/cli_test_support.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <random>

namespace {

namespace fs = std::filesystem;
using npukit::tools::testing::run_npukit;

const std::string kDir = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/convtranspose/";

struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() /
           ("npukit_convt_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

npukit::ir::Tensor input(int k) {
  npukit::ir::Tensor x =
      npukit::onnxio::load_tensor_file(kDir + "ct_net.input_" + std::to_string(k) + ".npy");
  x.name = "x";
  return x;
}

TEST(ConvTransposeCli, QuantizedCompiledAndRunEqualsTheReference) {
  TempDir dir;
  const fs::path q = dir.path / "ct.int8.onnx", prog = dir.path / "prog";
  auto r = run_npukit("quantize " + kDir + "ct_net.onnx --calib " + kDir + "ct_net.calib.npy -o " +
                      q.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("ConvTranspose x5"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("kept in float"), std::string::npos) << r.out;
  for (const char* arch : {"9,8,8", "9,4,4"}) {
    SCOPED_TRACE(arch);
    r = run_npukit("compile " + q.string() + " --sa-arch " + arch + " -o " + prog.string());
    ASSERT_EQ(r.status, 0) << r.out;
    const auto m = npukit::isa::load_manifest((prog / "manifest.json").string());
    // The model's MACs include the ConvTransposes'; some of them run on the device.
    EXPECT_GT(m.device_macs, 0u);
    const npukit::ir::Graph model = npukit::onnxio::load_onnx(q.string());
    npukit::compiler::CompileOptions opt;
    opt.arch = npukit::isa::SaArch::parse(arch);
    const auto lowered = npukit::compiler::lower(model, opt);
    npukit::runtime::Session session(prog.string());
    for (int k = 0; k < 3; ++k) {
      const auto x = input(k);
      const auto device = session.run({{"x", x}});
      const auto reference = npukit::ref::run_graph(lowered.graph, {{"x", x}});
      for (const char* y : {"y1", "y2"})
        EXPECT_EQ(npukit::ir::to_float_vector(device.outputs.at(y)),
                  npukit::ir::to_float_vector(reference.at(y)))
            << y << " input " << k;
    }
  }
}

}  // namespace

namespace {

// Issue 18, shapes: an int8 model with symbolic batch, height and width runs and evaluates with
// the shape of the data it is given, or the one --input-shape names; the outputs equal those of
// the same model with fixed shapes.
TEST(InputShapeCli, RunAndEvalTakeSymbolicShapesFromTheDataOrTheOption) {
  TempDir dir;
  const std::string sym = kDir + "ct_net.int8_symbolic.onnx";
  const std::string fixed = kDir + "ct_net.int8.onnx";
  const std::string in = kDir + "ct_net.input_0.npy";
  auto r = run_npukit("run " + fixed + " -i " + in + " -o " + (dir.path / "fixed").string());
  ASSERT_EQ(r.status, 0) << r.out;
  r = run_npukit("run " + sym + " -i " + in + " -o " + (dir.path / "from_data").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("input 'x' has symbolic dimensions; using the shape [1, 4, 6, 6]"),
            std::string::npos)
      << r.out;
  r = run_npukit("run " + sym + " --input-shape x=1,4,6,6 -i " + in + " -o " +
                 (dir.path / "from_option").string());
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* y : {"y1", "y2"}) {
    const auto want =
        npukit::onnxio::load_tensor_file((dir.path / "fixed" / (std::string(y) + ".npy")).string());
    for (const char* d : {"from_data", "from_option"}) {
      const auto got =
          npukit::onnxio::load_tensor_file((dir.path / d / (std::string(y) + ".npy")).string());
      EXPECT_EQ(got.shape, want.shape) << d;
      EXPECT_EQ(got.data, want.data) << d;
    }
  }
  // A shape the model contradicts is refused, naming the input.
  r = run_npukit("run " + sym + " --input-shape x=1,5,6,6 -i " + in + " -o " +
                 (dir.path / "bad").string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("'x'"), std::string::npos) << r.out;
  // A compiled directory has its shapes fixed: --input-shape there is an error, not ignored.
  r = run_npukit("compile " + fixed + " -o " + (dir.path / "prog").string());
  ASSERT_EQ(r.status, 0) << r.out;
  r = run_npukit("run " + (dir.path / "prog").string() + " --input-shape x=1,4,6,6 -i " + in +
                 " -o " + (dir.path / "bad2").string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("compiled with fixed shapes"), std::string::npos) << r.out;

  // A symbolic batch alone compiles as batch 1 (torch's dynamic_axes {0: "N"}; issue 18).
  r = run_npukit("compile " + kDir + "ct_net.int8_symbolic_batch.onnx -o " +
                 (dir.path / "prog_batch").string());
  EXPECT_EQ(r.status, 0) << r.out;

  // eval: the image shape of --data (a stack of 3 images); --float gets the same shape.
  r = run_npukit("eval " + sym + " --data " + kDir + "ct_net.calib.npy --labels " + kDir +
                 "ct_net.labels.npy --float " + kDir + "ct_net.onnx -q");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("symbolic dimensions"), std::string::npos) << r.out;
}

}  // namespace
