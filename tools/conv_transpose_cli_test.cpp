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

