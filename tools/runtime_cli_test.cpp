// npukit run, compare and eval, run as the real binary on the bundled digits model (quantized
// into a temporary directory first), and their errors for bad inputs.
#include "common/cpu.h"
#include "common/npy.h"
#include "ir/tensor_util.h"
#include "isa/manifest.h"
#include "onnx/onnx_io.h"
#include "tools/cli_test_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using Result = npukit::tools::testing::CliResult;
Result run_npukit(const std::string& args, bool with_stderr = true) {
  return npukit::tools::testing::run_npukit(args, with_stderr
                                                      ? npukit::tools::testing::Stderr::kMerged
                                                      : npukit::tools::testing::Stderr::kDiscard);
}

const std::string kDigits = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/digits/";
constexpr std::int64_t kImage = 64;  // 1x8x8 float32 per digit image

// The first `n` test images as one [n, 1, 8, 8] batch (or one image reshaped to `shape`).
npukit::NpyArray test_images(std::int64_t first, std::int64_t n) {
  npukit::NpyArray all = npukit::read_npy(kDigits + "X_test.npy");
  npukit::NpyArray out{"float32", {n, 1, 8, 8}, {}};
  const std::size_t bytes = kImage * sizeof(float);
  out.data.assign(all.data.begin() + first * bytes, all.data.begin() + (first + n) * bytes);
  return out;
}

std::vector<std::int64_t> test_labels() {
  return npukit::ir::to_int64_vector(
      npukit::onnxio::tensor_from_npy(npukit::read_npy(kDigits + "y_test.npy"), "y"));
}

std::vector<float> read_floats(const fs::path& file) {
  return npukit::ir::to_float_vector(
      npukit::onnxio::tensor_from_npy(npukit::read_npy(file.string()), "t"));
}

// One quantized digits model shared by every test (quantizing is the slow part).
class RuntimeCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("npukit_runtime_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    model_ = (dir_ / "digits.int8.onnx").string();
    Result r = run_npukit("quantize " + kDigits + "lenet_digits.onnx --calib " + kDigits +
                          "calib.npy -q -o " + model_);
    ASSERT_EQ(r.status, 0) << r.out;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static fs::path file(const std::string& name) { return dir_ / name; }
  static std::string save(const std::string& name, const npukit::NpyArray& a) {
    npukit::write_npy(file(name).string(), a);
    return file(name).string();
  }

  static fs::path dir_;
  static std::string model_;
};
fs::path RuntimeCli::dir_;
std::string RuntimeCli::model_;

TEST_F(RuntimeCli, RunWritesLogitsPerImageSameAsOneByOneAndFromACompiledDir) {
  const std::string batch = save("batch4.npy", test_images(0, 4));
  Result r =
      run_npukit("run " + model_ + " --input image=" + batch + " -o " + file("run4").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("output logits -> "));
  EXPECT_THAT(r.out, HasSubstr("device cycles (last image):"));
  const auto logits = read_floats(file("run4") / "logits.npy");
  ASSERT_EQ(logits.size(), 40u);

  // A compiled directory gives the same numbers, image by image.
  ASSERT_EQ(run_npukit("compile " + model_ + " -o " + file("prog").string()).status, 0);
  const auto labels = test_labels();
  int correct = 0;
  for (int i = 0; i < 4; ++i) {
    const std::string one = save("one" + std::to_string(i) + ".npy", test_images(i, 1));
    const fs::path out = file("run1_" + std::to_string(i));
    Result r1 =
        run_npukit("run " + file("prog").string() + " --input " + one + " -o " + out.string());
    ASSERT_EQ(r1.status, 0) << r1.out;
    const auto l1 = read_floats(out / "logits.npy");
    ASSERT_EQ(l1.size(), 10u);
    EXPECT_TRUE(std::equal(l1.begin(), l1.end(), logits.begin() + 10 * i)) << "image " << i;
    correct += (std::max_element(l1.begin(), l1.end()) - l1.begin()) == labels[i];
  }
  // The float model gets these four right (fixtures/digits); int8 must too.
  EXPECT_EQ(correct, 4);
}

// Issue 12: `npukit run MODEL --dispatch fc1` (an FC layer by name) once failed with
// "EltWise.LeftOperandEndAddress: is 0x950a00 but the tensor at 0x950900 is 1024 bytes" while
// `npukit compile --dispatch fc1` succeeded: with its output dispatched, the FC's ReLU is a
// separate EltWise on the FC's vector. Now both run, the program dispatches the layer, and the
// model's outputs are the same as without --dispatch.
TEST_F(RuntimeCli, RunDispatchesAnFcLayerByName) {
  // The digits model's first FC (its fc1) and a model whose FC is literally named fc1.
  const std::string image = save("dispatch_image.npy", test_images(0, 1));
  // (perchannel_fc: its FCs stay per tensor by default, as a dispatched FC does; see
  // docs/quantization.md "Per-channel FC weights".)
  const std::string qop = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/qop/perchannel_fc";
  struct Case {
    std::string model, input, layer, output;
  };
  for (const Case& c : {Case{model_, image, "/classifier/classifier.1/Gemm", "logits"},
                        Case{qop + ".onnx", qop + ".input_0.npy", "fc1", "y"}}) {
    const fs::path plain = file("dispatch_plain"), with = file("dispatch_fc1");
    fs::remove_all(plain);
    fs::remove_all(with);
    Result a = run_npukit("run " + c.model + " --input " + c.input + " -o " + plain.string());
    ASSERT_EQ(a.status, 0) << a.out;
    Result b = run_npukit("run " + c.model + " --input " + c.input + " -o " + with.string() +
                          " --dispatch " + c.layer);
    ASSERT_EQ(b.status, 0) << b.out;
    EXPECT_EQ(read_floats(with / (c.output + ".npy")), read_floats(plain / (c.output + ".npy")))
        << c.layer;
    const auto manifest = npukit::isa::load_manifest((with / "program" / "manifest.json").string());
    bool dispatched = false;
    for (const auto& seg : manifest.segments)
      for (const auto& t : seg.device_outputs) dispatched = dispatched || t.layer == c.layer;
    EXPECT_TRUE(dispatched) << c.layer << " is not a device output";
    Result comp = run_npukit("compile " + c.model + " --dispatch " + c.layer + " -o " +
                             file("dispatch_prog").string());
    EXPECT_EQ(comp.status, 0) << comp.out;
  }
}

TEST_F(RuntimeCli, CompareFindsEveryDigitsLayerBitExact) {
  const std::string in = save("cmp.npy", test_images(10, 3));
  Result r = run_npukit("compare " + model_ + " --input image=" + in);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("PASS: 6 of 6 layer outputs compared (6 alone), all bit-exact"));
  EXPECT_THAT(r.out, HasSubstr("/features/features.0/Conv"));
  EXPECT_THAT(r.out, HasSubstr("/classifier/classifier.3/Gemm"));

  Result j = run_npukit("compare " + model_ + " --input image=" + in + " --json", false);
  ASSERT_EQ(j.status, 0) << j.out;
  const auto json = nlohmann::json::parse(j.out);
  EXPECT_TRUE(json["pass"].get<bool>());
  EXPECT_EQ(json["batch"], 3);
  EXPECT_TRUE(json["first_failing_layer"].is_null());
  ASSERT_EQ(json["layers"].size(), 6u);
  const std::vector<std::string> opcodes{"CONV", "POOL", "CONV", "POOL", "FC", "FC"};
  for (std::size_t i = 0; i < 6; ++i) {
    const auto& l = json["layers"][i];
    EXPECT_EQ(l["opcode"], opcodes[i]) << l.dump();
    EXPECT_TRUE(l["compared"].get<bool>()) << l.dump();
    EXPECT_EQ(l["differ"], 0) << l.dump();
    // Each layer run alone on the reference from the device's own inputs agrees too.
    EXPECT_TRUE(l["alone"]["compared"].get<bool>()) << l.dump();
    EXPECT_EQ(l["alone"]["differ"], 0) << l.dump();
  }
  // Values per layer over the batch of 3: 8x8x8, 8x4x4, 16x4x4, 16x2x2, 32, 10.
  EXPECT_EQ(json["layers"][0]["elements"], 3 * 512);
  EXPECT_EQ(json["layers"][5]["elements"], 3 * 10);
  EXPECT_EQ(json["outputs"][0]["tensor"], "logits");
  EXPECT_EQ(json["outputs"][0]["differ"], 0);
}

TEST_F(RuntimeCli, CompareReportsTheFirstMismatchingLayerAndExits1) {
  // A program compiled from a differently calibrated model, checked against the original's
  // lowered graph: the device runs other scales, so values differ from the first layer on.
  const std::string other = file("other.int8.onnx").string();
  const std::string calib = save("other_calib.npy", test_images(100, 20));
  ASSERT_EQ(
      run_npukit("quantize " + kDigits + "lenet_digits.onnx -q --calib " + calib + " -o " + other)
          .status,
      0);
  const std::string all =
      "/features/features.1/Relu_output_0_quantized,/features/features.2/"
      "MaxPool_output_0_quantized,/features/features.4/Relu_output_0_quantized";
  Result c =
      run_npukit("compile " + other + " --dispatch " + all + " -o " + file("other_prog").string());
  ASSERT_EQ(c.status, 0) << c.out;
  const std::string in = save("mm.npy", test_images(0, 2));
  Result r =
      run_npukit("compare " + file("other_prog").string() + " --onnx " + model_ + " --input " + in);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("MISMATCH"));
  EXPECT_THAT(r.out, HasSubstr("first mismatch: layer '/features/features.0/Conv' (CONV)"));
  EXPECT_THAT(r.out, HasSubstr("FAIL"));
}

TEST_F(RuntimeCli, CompareOnADirNeedsTheOnnxModel) {
  ASSERT_EQ(run_npukit("compile " + model_ + " -o " + file("prog_c").string()).status, 0);
  const std::string in = save("c1.npy", test_images(0, 1));
  Result r = run_npukit("compare " + file("prog_c").string() + " --input " + in);
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.out, HasSubstr("npukit compare: error:"));
  EXPECT_THAT(r.out, HasSubstr("--onnx"));
  // With it, the dispatched output (the logits) is compared.
  Result ok =
      run_npukit("compare " + file("prog_c").string() + " --onnx " + model_ + " --input " + in);
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_THAT(ok.out, HasSubstr("PASS: 1 of 6 layer outputs compared (0 alone)"));
  EXPECT_THAT(ok.out, HasSubstr("not dispatched"));
}

TEST_F(RuntimeCli, EvalOnTheWholeTestSplitMatchesTorchFloatAndInt8WithinAPoint) {
  // fixtures/digits/accuracy.txt: torch's float accuracy when the fixture was made (independent
  // of npukit): "float_top1 0.972222 n 540 correct 525".
  std::ifstream acc(kDigits + "accuracy.txt");
  std::string key, n_key, correct_key;
  double float_top1 = 0;
  int n = 0, float_correct = 0;
  acc >> key >> float_top1 >> n_key >> n >> correct_key >> float_correct;
  ASSERT_EQ(n, 540);

  const std::string json_file = file("eval.json").string();
  const std::string pred_file = file("pred.npy").string();
  Result r = run_npukit("eval " + model_ + " --data " + kDigits + "X_test.npy --labels " + kDigits +
                        "y_test.npy --float " + kDigits + "lenet_digits.onnx --json " + json_file +
                        " --predictions " + pred_file);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("evaluating ["));  // the progress bar (stderr, not a tty)
  EXPECT_THAT(r.out, HasSubstr("540/540"));
  EXPECT_THAT(r.out, HasSubstr("float (reference executor) top-1"));
  EXPECT_THAT(r.out, HasSubstr("int8  (device model)       top-1"));
  EXPECT_THAT(r.out, HasSubstr("device cycles per image"));

  std::ifstream jf(json_file);
  const auto j = nlohmann::json::parse(jf);
  EXPECT_EQ(j["images"], 540);
  EXPECT_EQ(j["float_correct"], float_correct);
  EXPECT_NEAR(j["int8_top1"].get<double>(), j["float_top1"].get<double>(), 0.01);
  EXPECT_GT(j["device_cycles_per_image"].get<double>(), 0);
  EXPECT_GT(j["top1_agreement"].get<double>(), 0.97);

  // The saved predictions agree with the labels exactly as often as the reported accuracy.
  const auto pred = npukit::ir::to_int64_vector(
      npukit::onnxio::tensor_from_npy(npukit::read_npy(pred_file), "p"));
  const auto labels = test_labels();
  ASSERT_EQ(pred.size(), labels.size());
  std::int64_t correct = 0;
  for (std::size_t i = 0; i < pred.size(); ++i) correct += pred[i] == labels[i];
  EXPECT_EQ(j["int8_correct"], correct);
}

TEST_F(RuntimeCli, EvalLimitAndQuiet) {
  Result r = run_npukit("eval " + model_ + " -q --limit 7 --data " + kDigits +
                        "X_test.npy --labels " + kDigits + "y_test.npy");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("7 images of"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("evaluating [")));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("float (reference")));
}

// The SIMD level the kernels ran at, in the report and the JSON, as NPUKIT_ISA forced it (speed
// figures mean little without it); and in --version with the levels this CPU has.
TEST_F(RuntimeCli, EvalAndVersionNameTheSimdLevel) {
  ASSERT_EQ(::setenv("NPUKIT_ISA", "scalar", 1), 0);
  const std::string json_file = file("eval_simd.json").string();
  Result r = run_npukit("eval " + model_ + " -q --limit 9 --data " + kDigits +
                        "X_test.npy --labels " + kDigits + "y_test.npy --json " + json_file);
  Result v = run_npukit("--version");
  ::unsetenv("NPUKIT_ISA");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("images, scalar kernels)"));
  std::ifstream jf(json_file);
  EXPECT_EQ(nlohmann::json::parse(jf)["simd"], "scalar");
  ASSERT_EQ(v.status, 0) << v.out;
  EXPECT_THAT(v.out, HasSubstr("SIMD kernels scalar of " + npukit::cpu::supported_names()));
}

TEST_F(RuntimeCli, MissingInputFileIsAnError) {
  for (const std::string cmd : {"run", "compare"}) {
    Result r = run_npukit(cmd + " " + model_ + " --input image=" + file("nope.npy").string() +
                          (cmd == "run" ? " -o " + file("o").string() : ""));
    EXPECT_EQ(r.status, 1) << cmd << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr("npukit " + cmd + ": error:")) << cmd;
    EXPECT_THAT(r.out, HasSubstr("nope.npy")) << cmd;
  }
  Result e = run_npukit("eval " + model_ + " --data " + file("nope.npy").string() + " --labels " +
                        kDigits + "y_test.npy");
  EXPECT_EQ(e.status, 1) << e.out;
  EXPECT_THAT(e.out, HasSubstr("nope.npy"));
  Result m = run_npukit("run " + file("no_model.onnx").string() + " --input " + kDigits +
                        "X_test.npy -o " + file("o").string());
  EXPECT_EQ(m.status, 1) << m.out;
  EXPECT_THAT(m.out, HasSubstr("no_model.onnx"));
}

TEST_F(RuntimeCli, WrongInputShapeIsAnError) {
  npukit::NpyArray bad{"float32", {1, 1, 7, 7}, std::vector<std::uint8_t>(49 * 4, 0)};
  const std::string in = save("bad_shape.npy", bad);
  for (const std::string cmd : {"run", "compare"}) {
    Result r = run_npukit(cmd + " " + model_ + " --input image=" + in +
                          (cmd == "run" ? " -o " + file("o").string() : ""));
    EXPECT_EQ(r.status, 1) << cmd << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr("input 'image'")) << cmd;
    EXPECT_THAT(r.out, HasSubstr("[1, 1, 7, 7]")) << cmd;
  }
  // eval: images that do not fit the model input.
  npukit::NpyArray one_label{"int64", {1}, std::vector<std::uint8_t>(8, 0)};
  Result e = run_npukit("eval " + model_ + " --data " + in + " --labels " +
                        save("one_label.npy", one_label));
  EXPECT_EQ(e.status, 1) << e.out;
  EXPECT_THAT(e.out, HasSubstr("the model input 'image'"));
}

TEST_F(RuntimeCli, WrongInputNameIsAnError) {
  const std::string in = save("name.npy", test_images(0, 1));
  Result r = run_npukit("run " + model_ + " --input pixels=" + in + " -o " + file("o").string());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("'image'"));
  Result c = run_npukit("compare " + model_ + " --input pixels=" + in);
  EXPECT_EQ(c.status, 1) << c.out;
  EXPECT_THAT(c.out, HasSubstr("the model has no input 'pixels' (its inputs: 'image')"));
}

TEST_F(RuntimeCli, EvalLabelCountMustMatchTheImages) {
  const std::string x = save("x5.npy", test_images(0, 5));
  Result r = run_npukit("eval " + model_ + " --data " + x + " --labels " + kDigits + "y_test.npy");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("has 540 labels"));
  EXPECT_THAT(r.out, HasSubstr("has 5 images"));
}

}  // namespace
