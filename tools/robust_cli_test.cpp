// Issue 16: every hostile input found by hand gets a clean npukit error (exit 1) naming the thing
// at fault, never a crash, a raw exception text (exit 2), a hang or a silent success, and a
// failing command leaves no partial output. Each case runs the real binary.
#include "common/npy.h"
#include "isa/manifest.h"
#include "onnx/test_models.h"
#include "tools/cli_test_support.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using npukit::tools::testing::CliResult;
using npukit::tools::testing::run_npukit;

const std::string kRoot = NPUKIT_SOURCE_DIR;
const std::string kInt8Lenet = kRoot + "/fixtures/digits/lenet_digits.int8.onnx";

// A clean error: exit status 1, the expected words, and none of the texts that only escape from
// unhandled exceptions.
void expect_clean_error(const std::string& args, const std::string& expect) {
  SCOPED_TRACE(args);
  const CliResult r = run_npukit(args);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find(expect), std::string::npos) << r.out;
  for (const char* raw : {"internal error", "bad_alloc", "basic_filebuf", "filesystem error",
                          "map::at", "vector::_M_range_check"})
    EXPECT_EQ(r.out.find(raw), std::string::npos) << r.out;
}

// A float Conv model (onnx/test_models.h) with one attribute set by the test ("none": no
// attribute), written to DIR; without `outputs` the graph has none.
std::string conv_model(const fs::path& dir, const std::string& attr,
                       std::vector<std::int64_t> values, bool outputs = true) {
  auto b = npukit::onnxio::testing::window_model(attr == "none" ? "" : attr, std::move(values),
                                                 "Conv", {1, 1, 2, 2});
  if (!outputs) b.g().clear_output();
  const fs::path path = dir / ("conv_" + attr + ".onnx");
  std::ofstream(path, std::ios::binary) << b.m.SerializeAsString();
  return path.string();
}

std::string calib(const fs::path& dir) {
  npukit::NpyArray a{"float32", {2, 1, 4, 4}, npukit::Bytes(2 * 16 * 4, 0)};
  const std::string path = (dir / "calib.npy").string();
  npukit::write_npy(path, a);
  return path;
}

// ---- 1. crashes -------------------------------------------------------------------------------

TEST(RobustCli, ZeroStridesAreRejectedBeforeShapeInference) {
  const fs::path d = npukit::tools::testing::scratch_dir("strides");
  const std::string model = conv_model(d, "strides", {0, 0});
  expect_clean_error("compile " + model + " -o " + (d / "out").string(), "strides[0] = 0");
  expect_clean_error(
      "quantize " + model + " --calib " + calib(d) + " -o " + (d / "q.onnx").string(),
      "strides[0] = 0");
  EXPECT_FALSE(fs::exists(d / "out"));
  EXPECT_FALSE(fs::exists(d / "q.onnx"));
}

TEST(RobustCli, GroupZeroAndAGraphWithoutOutputsAreRejected) {
  const fs::path d = npukit::tools::testing::scratch_dir("group");
  expect_clean_error("compile " + conv_model(d, "group", {0}) + " -o " + (d / "o").string(),
                     "group = 0 is out of range");
  expect_clean_error("compile " + conv_model(d, "none", {}, false) + " -o " + (d / "o").string(),
                     "no outputs");
}

// ---- 3. files: devices, directories, files where directories belong ---------------------------

TEST(RobustCli, DevicesAndDirectoriesAreRefusedByName) {
  const fs::path d = npukit::tools::testing::scratch_dir("devices");
  const std::string dir = d.string();
  expect_clean_error("compile /dev/zero -o " + (d / "o").string(),
                     "/dev/zero: is a character device");
  expect_clean_error("quantize " + kRoot +
                         "/fixtures/digits/lenet_digits.onnx --calib /dev/zero -o " +
                         (d / "q.onnx").string(),
                     "/dev/zero: is a character device");
  expect_clean_error("disasm /dev/zero", "is a character device");
  expect_clean_error("sim /dev/zero", "is a character device");
  expect_clean_error("lut check /dev/zero", "is a character device");
  expect_clean_error("xs3 check /dev/zero", "is a character device");
  expect_clean_error("lut eval " + dir, "is a directory");
  expect_clean_error("xs3 check " + dir, "is a directory");
  // asm's input is checked by CLI11 (exit 105), which names the directory too.
  const CliResult a = run_npukit("asm " + dir + " -o " + (d / "x.gml").string());
  EXPECT_EQ(a.status, 105) << a.out;
  EXPECT_NE(a.out.find("is actually a directory"), std::string::npos) << a.out;
  expect_clean_error("disasm " + dir, "is a directory");
  expect_clean_error("compile " + dir + " -o " + (d / "o").string(), "is a directory");
  // -o naming an existing file where a directory belongs.
  std::ofstream(d / "file") << "x";
  expect_clean_error("compile " + kInt8Lenet + " -o " + (d / "file").string(),
                     "exists and is not a directory");
}

// ---- 4. option and manifest values ------------------------------------------------------------

// Bad option values are CLI parse errors (exit 105 from CLI11) or npukit errors, never accepted.
void expect_option_refused(const std::string& args, const std::string& option) {
  SCOPED_TRACE(args);
  const CliResult r = run_npukit(args);
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_NE(r.status, 2) << r.out;
  EXPECT_NE(r.out.find(option), std::string::npos) << r.out;
}

TEST(RobustCli, OutOfRangeOptionsAreRefused) {
  const fs::path d = npukit::tools::testing::scratch_dir("options");
  expect_option_refused("compile " + kInt8Lenet + " --ramsize -1 -o " + (d / "o").string(),
                        "--ramsize");
  expect_option_refused("compile " + kInt8Lenet + " --ramsize 5000 -o " + (d / "o").string(),
                        "--ramsize");
  const std::string data = kRoot + "/fixtures/digits/X_test.npy";
  expect_option_refused("eval " + kInt8Lenet + " --data " + data + " --labels " + kRoot +
                            "/fixtures/digits/y_test.npy --limit -5",
                        "--limit");
  for (const std::int64_t bad : {std::int64_t{-1}, std::int64_t{1} << 62}) {
    const auto x = npukit::read_npy(data);
    std::vector<std::int64_t> labels(static_cast<std::size_t>(x.shape[0]), 1);
    labels[3] = bad;
    npukit::NpyArray y{"int64", {x.shape[0]}, npukit::Bytes(labels.size() * 8)};
    std::memcpy(y.data.data(), labels.data(), y.data.size());
    npukit::write_npy((d / "y.npy").string(), y);
    expect_clean_error(
        "eval " + kInt8Lenet + " --data " + data + " --labels " + (d / "y.npy").string(),
        "label " + std::to_string(bad) + " of image 3");
  }
  std::ofstream(d / "neg.json") << R"({"instructions": [{"opcode": "CONV", "fields": {"IW": -5}}],
    "packets": [{"kind": "instructions"}]})";
  expect_clean_error("asm " + (d / "neg.json").string() + " -o " + (d / "neg.gml").string(),
                     "IW is an unsigned 10-bit field");
  EXPECT_FALSE(fs::exists(d / "neg.gml"));
  for (const char* bins : {"entropy --bins 20000", "percentile --bins 100000000"})
    expect_clean_error("quantize " + kRoot + "/fixtures/digits/lenet_digits.onnx --calib " + kRoot +
                           "/fixtures/digits/calib.npy -o " + (d / "q.onnx").string() +
                           " --method " + bins,
                       "is out of range (128..8192");
  for (const char* scale : {"0", "inf", "nan", "-1"})
    expect_option_refused(std::string("lut design --fn sigmoid --in-scale ") + scale, "--in-scale");
  expect_option_refused("lut design --fn sigmoid --out-scale 0", "--out-scale");
  expect_clean_error("lut design --fn sigmoid --range inf:1", "--range");
}

// A hand-written program directory (manifest + GML bytes) the tests corrupt field by field.
npukit::isa::Manifest small_manifest() {
  npukit::isa::Manifest m;
  m.model = "hand";
  m.gml = "model.gml";
  npukit::isa::ManifestTensor x{"x", {1, 3, 4, 4}, "int8", 0.5, 0, "activation", 768, 128, {}, {}};
  npukit::isa::ManifestTensor y{"y", {1, 2, 4, 4}, "int8", 0.5, 0, "activation", 896, 128, {}, {}};
  y.dispatch_id = 0x42;
  y.layer = "conv";
  m.inputs = {x};
  m.outputs = {y};
  npukit::isa::ManifestSegment d;
  d.kind = npukit::isa::ManifestSegment::Kind::kDevice;
  d.layer_count = 1;
  d.instruction_count = 3;
  d.device_inputs = {x};
  d.device_outputs = {y};
  m.segments = {d};
  m.layers = {{"conv", "CONV", {"x"}, {"y"}, 0, 3}};
  m.instruction_count = 3;
  m.dram_bytes = 1024;
  return m;
}

std::string program_dir(const fs::path& d, const npukit::isa::Manifest& m) {
  fs::create_directories(d);
  npukit::isa::save_manifest(m, (d / "manifest.json").string());
  std::ofstream(d / "model.gml", std::ios::binary) << std::string(64, '\0');
  return d.string();
}

TEST(RobustCli, ManifestFieldsAreValidated) {
  const fs::path d = npukit::tools::testing::scratch_dir("manifest");
  const std::string x = (d / "x.npy").string();
  npukit::write_npy(x, {"float32", {1, 3, 4, 4}, npukit::Bytes(48 * 4, 0)});
  struct Case {
    const char* what;
    void (*edit)(npukit::isa::Manifest&);
    const char* expect;
  };
  const Case cases[] = {
      {"gml outside", [](auto& m) { m.gml = "../../etc/passwd"; }, "must be a plain file name"},
      {"negative dim", [](auto& m) { m.inputs[0].shape[2] = -4; }, "shape[2] = -4 is out of range"},
      {"huge shape",
       [](auto& m) {
         m.outputs[0].shape = {1, 1 << 30, 1 << 30, 1};
       },
       "elements"},
      {"dtype", [](auto& m) { m.inputs[0].dtype = "complex128"; }, "dtype 'complex128'"},
      {"bytes", [](auto& m) { m.segments[0].device_outputs[0].bytes = 4; },
       "less than the 128 bytes"},
      {"address", [](auto& m) { m.segments[0].device_inputs[0].address = 0xFFFFFFE0u; },
       "outside the board"},
      {"instructions", [](auto& m) { m.layers[0].first_instruction = 1000; },
       "outside the program's 3 instructions"},
      {"no device outputs", [](auto& m) { m.segments[0].device_outputs.clear(); },
       "without outputs"},
      {"ramsize", [](auto& m) { m.ramsize_mb = 0; }, "ramsize_mb 0 is out of range"},
  };
  int i = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    auto m = small_manifest();
    c.edit(m);
    const std::string dir = program_dir(d / ("p" + std::to_string(i++)), m);
    expect_clean_error("run " + dir + " --input x=" + x + " -o " + (d / "out").string(), c.expect);
    EXPECT_FALSE(fs::exists(d / "out"));
  }
}

TEST(RobustCli, ACompiledProgramRefusesADifferentArray) {
  const fs::path d = npukit::tools::testing::scratch_dir("arch");
  const std::string dir = program_dir(d / "prog", small_manifest());
  const std::string x = (d / "x.npy").string();
  npukit::write_npy(x, {"float32", {1, 3, 4, 4}, npukit::Bytes(48 * 4, 0)});
  expect_clean_error(
      "run " + dir + " --sa-arch 9,4,4 --input x=" + x + " -o " + (d / "out").string(),
      "was compiled for a 9,8,8 array");
  EXPECT_FALSE(fs::exists(d / "out"));
  // --weight-scales too: the manifest records what the program was compiled with.
  expect_clean_error(
      "run " + dir + " --weight-scales per-channel --input x=" + x + " -o " + (d / "out").string(),
      "was compiled with --weight-scales auto");
  EXPECT_FALSE(fs::exists(d / "out"));
}

// ---- 5. no partial output ---------------------------------------------------------------------

TEST(RobustCli, FailingCommandsLeaveNoPartialOutput) {
  const fs::path d = npukit::tools::testing::scratch_dir("partial");
  // run: a model compiled on the fly, then a bad input: neither the program nor outputs remain.
  npukit::write_npy((d / "bad.npy").string(), {"float32", {1, 5}, npukit::Bytes(20, 0)});
  expect_clean_error(
      "run " + kInt8Lenet + " --input " + (d / "bad.npy").string() + " -o " + (d / "run").string(),
      "input");
  EXPECT_FALSE(fs::exists(d / "run"));
  // run: a --stats-json that cannot be written.
  const std::string x = kRoot + "/fixtures/digits/X_test.npy";
  fs::create_directories(d / "stats_dir");
  expect_clean_error("run " + kInt8Lenet + " --input " + (d / "one.npy").string() + " -o " +
                         (d / "run2").string() + " --stats-json " + (d / "stats_dir").string(),
                     "--stats-json");
  EXPECT_FALSE(fs::exists(d / "run2"));
  // sim: --dispatch-out is not written when --stats-json fails.
  const std::string gml = kRoot + "/fixtures/fuzz/dwp_fuzz/conv_relu_9x8x8.gml";
  const std::string dwp = kRoot + "/fixtures/fuzz/dwp_fuzz/conv_relu_9x8x8_run.dwp";
  expect_clean_error("sim " + gml + " " + dwp + " --dispatch-out " + (d / "disp.bin").string() +
                         " --stats-json " + (d / "stats_dir").string(),
                     "is a directory");
  EXPECT_FALSE(fs::exists(d / "disp.bin"));
  // lut design: the case file is not written when --plot fails.
  expect_clean_error("lut design --fn sigmoid -o " + (d / "case.json").string() + " --plot " +
                         (d / "stats_dir").string(),
                     "is a directory");
  EXPECT_FALSE(fs::exists(d / "case.json"));
  // eval: --predictions is not written when --json cannot be.
  expect_clean_error("eval " + kInt8Lenet + " --data " + x + " --labels " + kRoot +
                         "/fixtures/digits/y_test.npy --limit 2 --predictions " +
                         (d / "p.npy").string() + " --json " + (d / "stats_dir").string(),
                     "--json");
  EXPECT_FALSE(fs::exists(d / "p.npy"));
  // compare: --keep-program is not kept when the input is bad.
  expect_clean_error("compare " + kInt8Lenet + " --input " + (d / "bad.npy").string() +
                         " --keep-program " + (d / "kept").string(),
                     "input");
  EXPECT_FALSE(fs::exists(d / "kept"));
  // Nothing of the temporaries is left beside the outputs either.
  for (const auto& e : fs::directory_iterator(d))
    EXPECT_EQ(e.path().filename().string().find("npukit-tmp"), std::string::npos) << e.path();
}

// ---- 6. messages ------------------------------------------------------------------------------

TEST(RobustCli, TruncatedGmlAndFloodingInputsGetShortAccurateMessages) {
  const fs::path d = npukit::tools::testing::scratch_dir("messages");
  // A GML cut in half, fed to sim before a valid input stream.
  std::ifstream in(kRoot + "/fixtures/fuzz/dwp_fuzz/conv_relu_9x8x8.gml", std::ios::binary);
  std::string gml((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(d / "half.gml", std::ios::binary) << gml.substr(0, gml.size() / 2);
  expect_clean_error("sim " + (d / "half.gml").string() + " " + kRoot +
                         "/fixtures/fuzz/dwp_fuzz/conv_relu_9x8x8_run.dwp",
                     "half.gml: the stream ends in the middle of a DWP packet");
  // An unknown opcode of 100 000 characters is clipped in the message.
  std::ofstream(d / "long.json") << R"({"instructions": [{"opcode": ")" << std::string(100000, 'Q')
                                 << R"("}], "packets": [{"kind": "instructions"}]})";
  const CliResult r =
      run_npukit("asm " + (d / "long.json").string() + " -o " + (d / "long.gml").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("(100000 characters)"), std::string::npos);
  EXPECT_LT(r.out.size(), 2000u);
  // A .npy whose 100 KB header is garbage.
  std::string npy = "\x93NUMPY";
  npy += '\x02';
  npy += '\x00';
  const std::uint32_t len = 100000;
  for (int i = 0; i < 4; ++i) npy += static_cast<char>((len >> (8 * i)) & 0xFF);
  npy += std::string(len, 'z');
  std::ofstream(d / "big.npy", std::ios::binary) << npy;
  const CliResult n = run_npukit("run " + kInt8Lenet + " --input " + (d / "big.npy").string() +
                                 " -o " + (d / "o").string());
  EXPECT_EQ(n.status, 1);
  EXPECT_NE(n.out.find("characters)"), std::string::npos) << n.out.substr(0, 500);
  EXPECT_LT(n.out.size(), 2000u);
}

}  // namespace
