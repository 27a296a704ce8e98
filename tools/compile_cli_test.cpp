// npukit compile, run as the real binary: the output directory, the manifest, --explain, and the
// errors users see for models the Gati cannot run.
#include "isa/gml.h"
#include "isa/manifest.h"
#include "tools/cli_test_support.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace {

namespace fs = std::filesystem;

using Result = npukit::tools::testing::CliResult;
Result run(const std::string& args) { return npukit::tools::testing::run_npukit(args); }

fs::path temp_dir(const std::string& tag) { return npukit::tools::testing::scratch_dir(tag); }

npukit::Bytes read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return npukit::Bytes(std::istreambuf_iterator<char>(f), {});
}

const std::string kRoot = NPUKIT_SOURCE_DIR;

// The digits LeNet quantized with npukit quantize (the first command of the README).
fs::path quantized_lenet(const fs::path& dir) {
  const fs::path q = dir / "lenet.int8.onnx";
  const Result r = run("quantize " + kRoot + "/fixtures/digits/lenet_digits.onnx --calib " + kRoot +
                       "/fixtures/digits/calib.npy -o " + q.string());
  EXPECT_EQ(r.status, 0) << r.out;
  return q;
}

TEST(CompileCli, WritesGmlManifestAndHostSubgraphs) {
  const fs::path dir = temp_dir("out");
  const fs::path q = quantized_lenet(dir);
  const Result r = run("compile " + q.string() + " -o " + (dir / "prog").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("6 device layers"), std::string::npos) << r.out;
  for (const char* f : {"model.gml", "manifest.json", "segment0_host.onnx", "segment2_host.onnx"})
    EXPECT_TRUE(fs::exists(dir / "prog" / f)) << f;
  const auto m = npukit::isa::load_manifest((dir / "prog" / "manifest.json").string());
  EXPECT_EQ(m.sa_arch, "9,8,8");
  EXPECT_EQ(m.layers.size(), 6u);
  ASSERT_EQ(m.segments.size(), 3u);  // quantize on the host, the network, dequantize
  EXPECT_EQ(m.version, 2);
  ASSERT_TRUE(m.segments[1].is_device());
  const auto& dev = m.segments[1];
  ASSERT_EQ(dev.device_inputs.size(), 1u);
  EXPECT_EQ(dev.device_inputs[0].layout, "activation");
  EXPECT_EQ(dev.device_inputs[0].shape, (std::vector<std::int64_t>{1, 1, 8, 8}));
  EXPECT_GT(dev.device_inputs[0].scale, 0);
  ASSERT_EQ(dev.device_outputs.size(), 1u);
  EXPECT_EQ(dev.device_outputs[0].layout, "vector");
  EXPECT_TRUE(dev.device_outputs[0].dispatch_id.has_value());
  ASSERT_TRUE(m.segments[0].host && m.segments[2].host);
  EXPECT_EQ(m.segments[2].host->outputs, (std::vector<std::string>{"logits"}));
  // Every conv and FC of LeNet runs on the device.
  EXPECT_GT(m.model_macs, 0u);
  EXPECT_EQ(m.device_macs, m.model_macs);
  EXPECT_NE(r.out.find("100.0 % of the model's MACs on the device"), std::string::npos) << r.out;
  // The GML is one a board accepts: it decodes, and the instruction list has the RTL's shape.
  const auto gml = npukit::isa::decode_gml(read_bytes(dir / "prog" / "model.gml"));
  EXPECT_EQ(gml.instructions.size(), m.instruction_count);
  EXPECT_TRUE(npukit::isa::lint_instruction_list(gml.instructions).empty());
  fs::remove_all(dir);
}

TEST(CompileCli, ExplainShowsPlacementInstructionsAndFootprint) {
  const fs::path dir = temp_dir("explain");
  const fs::path q = quantized_lenet(dir);
  const Result r = run("compile " + q.string() + " --explain --sa-arch 9,4,4");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("sa_arch 9,4,4"), std::string::npos);
  EXPECT_NE(r.out.find("image_QuantizeLinear"), std::string::npos);
  EXPECT_NE(r.out.find("float <-> int8 conversion is host work"), std::string::npos);
  EXPECT_NE(r.out.find("Segments (100.0 % of the model's MACs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fused into the TailBlock"), std::string::npos);
  EXPECT_NE(r.out.find("CONV IW=8 IH=8 IC=1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("DRAM footprint"), std::string::npos);
  EXPECT_NE(r.out.find("START LayerNumber=6 TotalLayers=6"), std::string::npos);
  fs::remove_all(dir);
}

TEST(CompileCli, DispatchAndRamsizeOptions) {
  const fs::path dir = temp_dir("opts");
  const fs::path q = quantized_lenet(dir);
  Result r = run("compile " + q.string() + " -o " + (dir / "p").string() +
                 " --dispatch /features/features.2/MaxPool");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto m = npukit::isa::load_manifest((dir / "p" / "manifest.json").string());
  EXPECT_EQ(m.device_outputs().size(), 2u);
  r = run("compile " + q.string() + " -o " + (dir / "p2").string() + " --dispatch nosuchlayer");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("--dispatch 'nosuchlayer'"), std::string::npos) << r.out;
  r = run("compile " + q.string() + " -o " + (dir / "p3").string() + " --sa-arch 9,9,9");
  EXPECT_EQ(r.status, 1);
  fs::remove_all(dir);
}

TEST(CompileCli, FloatModelsAreRefusedWithAHint) {
  const Result r =
      run("compile " + kRoot + "/fixtures/digits/lenet_digits.onnx -o /tmp/npukit_never");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("npukit compile: error:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("npukit quantize"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists("/tmp/npukit_never/model.gml"));
}

TEST(CompileCli, ErrataAreWorkedAroundOrRefusedUnlessAllowed) {
  // big_kernels' first conv has 4 kernels (KernelItr 1 on 9,4,4) followed by another conv: padded
  // to 8 kernels on 9,4,4 with a warning. 16,1,16 chained programs have no workaround: refused.
  const fs::path dir = temp_dir("errata");
  const fs::path q = dir / "big.int8.onnx";
  Result r = run("quantize " + kRoot + "/fixtures/models/big_kernels.onnx --calib " + kRoot +
                 "/fixtures/models/big_kernels.input_0.npy -o " + q.string());
  ASSERT_EQ(r.status, 0) << r.out;
  r = run("compile " + q.string() + " -o " + (dir / "p").string() + " --sa-arch 9,4,4");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("odd-KernelItr erratum"), std::string::npos) << r.out;
  r = run("compile " + q.string() + " -o " + (dir / "p").string() + " --sa-arch 16,1,16");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("erratum"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--allow-errata"), std::string::npos) << r.out;
  r = run("compile " + q.string() + " -o " + (dir / "p").string() +
          " --sa-arch 16,1,16 --allow-errata");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("warning"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

}  // namespace
