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
  m.gml_bytes = 6000;
  m.inputs = {{"image", {1, 1, 8, 8}, "float32"}};
  m.outputs = {{"logits", {1, 10}, "float32"}};
  m.host_before = ManifestSubgraph{"host_before.onnx", {"image"}, {"image_q"}, {"quant"}};
  ManifestTensor in{"image_q", {1, 1, 8, 8}, "int8", 0.0078125, 0, "activation", 4608, 512};
  ManifestTensor out{"logits_q", {1, 10}, "int8", 0.25, 0, "vector", 4672, 32, 2750u, "fc2"};
  m.device_inputs = {in};
  m.device_outputs = {out};
  m.layers = {{"conv1", "CONV", {"image_q"}, {"c1"}, 0, 4},
              {"fc2", "FC", {"c1"}, {"logits_q"}, 4, 4}};
  m.instruction_count = 8;
  m.dram_bytes = 6912;
  m.warnings = {"something"};
  return m;
}

TEST(Manifest, RoundTrips) {
  const Manifest m = sample();
  EXPECT_EQ(manifest_from_json(manifest_to_json(m), "m.json"), m);
  EXPECT_EQ(manifest_from_json(manifest_to_json(m), "m.json").arch(), kArch9x4x4);
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
  EXPECT_NE(error_of(edit("\"version\": 1", "\"version\": 7")).find("version 7"),
            std::string::npos);
  EXPECT_NE(error_of(edit("\"sa_arch\": \"9,4,4\"", "\"sa_arch\": \"9,9,9\"")).find("9,9,9"),
            std::string::npos);
  EXPECT_NE(error_of(edit("\"address\": 4608", "\"address\": 4609")).find("not 32-byte aligned"),
            std::string::npos);
  EXPECT_NE(error_of(edit("\"dispatch_id\": 2750,", "")).find("no dispatch_id"), std::string::npos);
  EXPECT_NE(error_of(edit("\"file\": \"host_before.onnx\"", "\"file\": \"../x.onnx\""))
                .find("plain file name"),
            std::string::npos);
  const std::string missing = error_of(edit("\"dram_bytes\": 6912,", ""));
  EXPECT_NE(missing.find("'dram_bytes' is missing"), std::string::npos) << missing;
  EXPECT_NE(missing.find("dir/manifest.json"), std::string::npos);
  EXPECT_NE(
      error_of(edit("\"instruction_count\": 8", "\"instruction_count\": \"8\"")).find("wrong type"),
      std::string::npos);
}

}  // namespace
}  // namespace npukit::isa
