// The manifest round-trips through JSON, and malformed manifests are rejected naming the key.
#include "isa/manifest.h"
#include "common/error.h"

#include <gtest/gtest.h>

namespace npukit::isa {
namespace {

Manifest sample() {
  Manifest m;
  m.model = "lenet";
  m.sa_arch = "9,4,4";
  m.ramsize_mb = 256;
  m.weight_scales = "per-channel";
  m.gml_bytes = 6000;
  m.inputs = {{"image", {1, 1, 8, 8}, "float32"}};
  m.outputs = {{"logits", {1, 10}, "float32"}};
  ManifestSegment before;
  before.host = ManifestSubgraph{"segment0_host.onnx", {"image"}, {"image_q"}, {"quant"}};
  ManifestTensor in{"image_q", {1, 1, 8, 8}, "int8", 0.0078125, 0, "activation", 4608, 512};
  ManifestTensor c1{"c1", {1, 1, 8, 8}, "int8", 0.5, 0, "activation", 5120, 512, 300u, "conv1"};
  ManifestTensor c1s{"c1s", {1, 1, 8, 8}, "int8", 0.5, 0, "activation", 5632, 512};
  ManifestTensor out{"logits_q", {1, 10}, "int8", 0.25, 0, "vector", 4672, 32, 2750u, "fc2"};
  ManifestSegment d1, d2, middle;
  d1.kind = d2.kind = ManifestSegment::Kind::kDevice;
  d1.layer_count = 1;
  d1.instruction_count = 4;
  d1.device_inputs = {in};
  d1.device_outputs = {c1};
  d1.macs = 576;
  d1.why = "device: ...";
  middle.host = ManifestSubgraph{"segment2_host.onnx", {"c1"}, {"c1s"}, {"softsign"}};
  d2.first_layer = 1;
  d2.layer_count = 1;
  d2.first_instruction = 4;
  d2.instruction_count = 4;
  d2.device_inputs = {c1s};
  d2.device_outputs = {out};
  ManifestSegment after;
  after.host = ManifestSubgraph{"segment4_host.onnx", {"logits_q"}, {"logits"}, {"dequant"}};
  m.segments = {before, d1, middle, d2, after};
  m.layers = {{"conv1", "CONV", {"image_q"}, {"c1"}, 0, 4},
              {"fc2", "FC", {"c1s"}, {"logits_q"}, 4, 4}};
  m.model_macs = 1216;
  m.device_macs = 1216;
  m.instruction_count = 8;
  m.dram_bytes = 6912;
  m.warnings = {"something"};
  return m;
}

TEST(Manifest, RoundTrips) {
  const Manifest m = sample();
  EXPECT_EQ(manifest_from_json(manifest_to_json(m), "m.json"), m);
  EXPECT_EQ(manifest_from_json(manifest_to_json(m), "m.json").arch(), kArch9x4x4);
  // The second device segment starts at its own instructions: zeroth {32 * 5, 32 * 9}.
  EXPECT_EQ(m.segments[3].zeroth_start(), 160u);
  EXPECT_EQ(m.segments[3].zeroth_end(), 288u);
  EXPECT_EQ(m.device_outputs().size(), 2u);
  EXPECT_EQ(m.device_segment_count(), 2u);
}

TEST(Manifest, ReadsVersion1AsSegments) {
  // A version 1 manifest (one device part between host_before and host_after), as npukit wrote it.
  const std::string v1 = R"({
  "format": "npukit-manifest", "version": 1, "model": "m", "isa_version": 16,
  "sa_arch": "9,8,8", "ramsize_mb": 512, "allow_errata": false, "gml": "model.gml",
  "gml_bytes": 100,
  "inputs": [{"name": "x", "shape": [1, 1, 4, 4], "dtype": "float32"}],
  "outputs": [{"name": "y", "shape": [1, 1, 4, 4], "dtype": "float32"}],
  "host_before": {"file": "host_before.onnx", "inputs": ["x"], "outputs": ["xq"], "nodes": ["q"]},
  "host_after": {"file": "host_after.onnx", "inputs": ["yq"], "outputs": ["y"], "nodes": ["dq"]},
  "device_inputs": [{"name": "xq", "shape": [1, 1, 4, 4], "dtype": "int8", "scale": 0.1,
                     "layout": "activation", "address": 512, "bytes": 128}],
  "device_outputs": [{"name": "yq", "shape": [1, 1, 4, 4], "dtype": "int8", "scale": 0.1,
                      "layout": "activation", "address": 640, "bytes": 128, "dispatch_id": 7,
                      "layer": "conv"}],
  "layers": [{"name": "conv", "opcode": "CONV", "inputs": ["xq"], "outputs": ["yq"],
              "first_instruction": 0, "instruction_count": 4}],
  "instruction_count": 4, "dram_bytes": 768, "warnings": []
})";
  const Manifest m = manifest_from_json(v1, "old/manifest.json");
  ASSERT_EQ(m.segments.size(), 3u);
  EXPECT_FALSE(m.segments[0].is_device());
  EXPECT_EQ(m.segments[0].host->file, "host_before.onnx");
  ASSERT_TRUE(m.segments[1].is_device());
  EXPECT_EQ(m.segments[1].device_inputs.at(0).address, 512u);
  EXPECT_EQ(m.segments[1].device_outputs.at(0).dispatch_id, 7u);
  EXPECT_EQ(m.segments[1].zeroth_start(), 32u);
  EXPECT_EQ(m.segments[1].zeroth_end(), 160u);
  EXPECT_EQ(m.segments[2].host->outputs, (std::vector<std::string>{"y"}));
  EXPECT_EQ(m.weight_scales, "auto");  // written before the manifest recorded it
}

std::string error_of(const std::string& text) {
  try {
    manifest_from_json(text, "dir/manifest.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Manifest, RejectsWhatTheRuntimeCannotUse) {
  std::string good = manifest_to_json(sample());
  EXPECT_NE(error_of("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("{}").find("not an npukit manifest"), std::string::npos);
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const auto at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  EXPECT_NE(error_of(edit("\"version\": 2", "\"version\": 7")).find("version 7"),
            std::string::npos);
  EXPECT_NE(error_of(edit("\"sa_arch\": \"9,4,4\"", "\"sa_arch\": \"9,9,9\"")).find("9,9,9"),
            std::string::npos);
  EXPECT_NE(error_of(edit("\"address\": 4608", "\"address\": 4609")).find("not 32-byte aligned"),
            std::string::npos);
  EXPECT_NE(error_of(edit("\"dispatch_id\": 2750,", "")).find("no dispatch_id"), std::string::npos);
  EXPECT_NE(error_of(edit("\"first_instruction\": 4,\n      \"first_layer\": 1",
                          "\"first_instruction\": 6,\n      \"first_layer\": 1"))
                .find("not within the 8 instructions"),
            std::string::npos);
  EXPECT_NE(error_of(edit("\"kind\": \"device\"", "\"kind\": \"fpga\"")).find("'fpga'"),
            std::string::npos);
  EXPECT_NE(error_of(edit("\"file\": \"segment0_host.onnx\"", "\"file\": \"../x.onnx\""))
                .find("plain file name"),
            std::string::npos);
  const std::string missing = error_of(edit("\"dram_bytes\": 6912,", ""));
  EXPECT_NE(missing.find("'dram_bytes' is missing"), std::string::npos) << missing;
  EXPECT_NE(missing.find("dir/manifest.json"), std::string::npos);
  EXPECT_NE(error_of(edit("\"instruction_count\": 8", "\"instruction_count\": \"8\""))
                .find("'instruction_count' must be an integer"),
            std::string::npos);
  // Values the runtime would misuse (issue 16), each named with its range.
  EXPECT_NE(error_of(edit("\"address\": 4608", "\"address\": 1099511627776")).find("out of range"),
            std::string::npos);
  EXPECT_NE(
      error_of(edit("\"gml\": \"model.gml\"", "\"gml\": \"../../x.gml\"")).find("plain file name"),
      std::string::npos);
  EXPECT_NE(error_of(edit("\"dtype\": \"int8\"", "\"dtype\": \"int4\"")).find("dtype 'int4'"),
            std::string::npos);
  EXPECT_NE(error_of(edit("\"ramsize_mb\": 256", "\"ramsize_mb\": 0")).find("ramsize_mb 0"),
            std::string::npos);
}

}  // namespace
}  // namespace npukit::isa
