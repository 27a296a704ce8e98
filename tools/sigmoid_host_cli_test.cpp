// A final sigmoid whose device form is more than 1 LSB off at the layer's scales
// (fixtures/qop/sigmoid_layer, made by make_sigmoid_layer.py: the int8 codes +-1 fall in the tanh
// engine's dead zone) runs on the host: --explain says why and what it costs, and `npukit run`
// gives onnxruntime-node's committed int8 output bit for bit (the conv requantizes by exactly 1).
#include "tools/cli_test_support.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace {

using npukit::tools::testing::run_npukit;
using npukit::tools::testing::run_ort_fixture;
using npukit::tools::testing::scratch_dir;

const std::string kStem = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/qop/sigmoid_layer";

TEST(SigmoidHostCli, InexactFinalSigmoidOnTheHostEqualsOnnxruntime) {
  const auto dir = scratch_dir("sigmoid_host");
  const std::string prog = (dir / "prog").string();
  auto r = run_npukit("compile " + kStem + ".onnx -o " + prog + " --explain");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("1.13 output LSBs from the exact one (input code 1: device 63, exact 64.13, "
                       "in the tanh engine's dead zone"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("2304 lookups per image, no extra transfer"), std::string::npos) << r.out;
  const auto f = run_ort_fixture(prog, kStem, dir);
  ASSERT_EQ(f.run.status, 0) << f.run.out;
  const auto& got = f.got;
  const auto& want = f.want;
  ASSERT_EQ(got.dtype, want.dtype);
  ASSERT_EQ(got.shape, want.shape);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < want.data.size(); ++i) differ += got.data[i] != want.data[i];
  EXPECT_EQ(differ, 0u) << "of " << want.data.size();
}

}  // namespace
