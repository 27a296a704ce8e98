// A global average pool whose device form (3x3 stride-3 average stages rounding at its input
// scale, pools_as_convs) would be more than 1 LSB off, and whose result leaves the device after a
// small layer anyway (fixtures/qop/pool_fc_layer, made by make_pool_fc_layer.py: a 12x40 pool
// with an output scale 15.6 times finer than its input's, then a 1x1 conv), runs on the host with
// that layer: --explain says why, and `npukit run` gives onnxruntime-node's committed int8 output
// bit for bit (the staged device form gave 71 93 -52 -26 -18 76 50 3 for 73 89 -45 -29 -17 71 44
// 8).
#include "tools/cli_test_support.h"

#include <gtest/gtest.h>

namespace {

using npukit::tools::testing::run_npukit;
using npukit::tools::testing::run_ort_fixture;
using npukit::tools::testing::scratch_dir;

const std::string kStem = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/qop/pool_fc_layer";

TEST(PoolHostCli, InexactStagedGlobalPoolOnTheHostEqualsOnnxruntime) {
  const auto dir = scratch_dir("pool_host");
  const std::string prog = (dir / "prog").string();
  auto r = run_npukit("compile " + kStem + ".onnx -o " + prog + " --explain");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("pool                             host"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fc                               host"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 segments (1 on the device)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("15.6 times its output scale: up to 16.12 output LSBs"), std::string::npos)
      << r.out;
  const auto f = run_ort_fixture(prog, kStem, dir);
  ASSERT_EQ(f.run.status, 0) << f.run.out;
  const auto& got = f.got;
  const auto& want = f.want;
  ASSERT_EQ(got.dtype, want.dtype);
  ASSERT_EQ(got.shape, want.shape);
  EXPECT_EQ(got.data, want.data);
}

}  // namespace
