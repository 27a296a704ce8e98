// npukit quantize, run as the real binary on the bundled digits model.
#include "common/npy.h"
#include "onnx/onnx_io.h"
#include "tools/cli_test_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using Result = npukit::tools::testing::CliResult;
using npukit::tools::testing::run_npukit;

const std::string kDigits = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/digits/";

fs::path scratch(const std::string& tag) { return npukit::tools::testing::scratch_dir(tag); }

TEST(QuantizeCli, QuantizesDigitsFromOneBatchWithProgress) {
  fs::path dir = scratch("batch");
  std::string out = (dir / "digits.int8.onnx").string();
  Result r = run_npukit("quantize " + kDigits + "lenet_digits.onnx --calib " + kDigits +
                        "calib.npy -o " + out);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("calibrating ["));
  // The default percentile calibration runs the 128 samples once (the maxima and each tensor's
  // top tail, which decides the percentile's histogram bin).
  EXPECT_THAT(r.out, HasSubstr("128/128"));
  EXPECT_THAT(r.out, HasSubstr("percentile calibration, 128 samples"));
  EXPECT_THAT(r.out, HasSubstr("QLinearConv x2"));
  EXPECT_THAT(r.out, HasSubstr("wrote " + out));
  npukit::ir::Graph q = npukit::onnxio::load_onnx(out);
  EXPECT_EQ(q.nodes.front().op_type, "QuantizeLinear");
  EXPECT_EQ(q.nodes.back().op_type, "DequantizeLinear");
  fs::remove_all(dir);
}

TEST(QuantizeCli, AcceptsAFolderOfNpyFilesAndEveryMethod) {
  fs::path dir = scratch("folder");
  npukit::NpyArray batch = npukit::read_npy(kDigits + "calib.npy");
  const std::size_t image = 64 * 4;
  for (int i = 0; i < 5; ++i) {
    npukit::NpyArray one{"float32", {1, 1, 8, 8}, {}};
    one.data.assign(batch.data.begin() + i * image, batch.data.begin() + (i + 1) * image);
    npukit::write_npy((dir / ("sample" + std::to_string(i) + ".npy")).string(), one);
  }
  for (std::string method : {"minmax", "percentile --percentile 99.9", "entropy"}) {
    std::string out = (dir / "q.onnx").string();
    Result r = run_npukit("quantize " + kDigits + "lenet_digits.onnx --calib " + dir.string() +
                          " -o " + out + " --method " + method);
    ASSERT_EQ(r.status, 0) << method << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr("5 samples")) << method;
    EXPECT_NO_THROW(npukit::onnxio::load_onnx(out));
  }
  fs::remove_all(dir);
}

TEST(QuantizeCli, BadInputsGiveClearErrors) {
  fs::path dir = scratch("errors");
  std::string out = (dir / "q.onnx").string();
  Result r = run_npukit("quantize " + kDigits + "lenet_digits.onnx --calib " + kDigits +
                        "calib.npy -o " + out + " --method kl");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.out, HasSubstr("npukit quantize: error: unknown calibration method 'kl'"));

  r = run_npukit("quantize " + kDigits + "lenet_digits.onnx --calib " + kDigits + "y_test.npy -o " +
                 out);
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.out, HasSubstr("y_test.npy"));

  r = run_npukit("quantize " + kDigits + "lenet_digits.onnx --calib " + kDigits + "X_test.npy -o " +
                 out + " --method percentile --percentile 0");
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.out, HasSubstr("--percentile"));

  r = run_npukit("quantize " + kDigits + "accuracy.txt --calib " + kDigits + "calib.npy -o " + out);
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.out, HasSubstr("accuracy.txt"));
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(dir);
}

}  // namespace
