// program::save / program::load on a real compiled program with host segments: a round trip
// keeps every byte and field, a failed save leaves the destination as it was, and load names
// a missing or inconsistent file.
#include "program/program.h"

#include "common/error.h"
#include "compiler/compiler.h"
#include "onnx/onnx_io.h"
#include "quant/quantize.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace npukit::program {
namespace {

namespace fs = std::filesystem;

class ProgramDir : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("npukit_program_test_" + std::to_string(rd()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// A real compiled program with host segments between device segments: fixtures/segments/
// three_parts.onnx quantized and compiled (once; the tests copy it).
const Program& compiled() {
  static const Program p = [] {
    const std::string dir = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/segments/";
    const ir::Graph model = onnxio::load_onnx(dir + "three_parts.onnx");
    const ir::Graph q = quant::quantize(
        model, quant::load_calibration_data(dir + "three_parts.calib.npy", model), {});
    return compiler::compile(q, {}).artifact();
  }();
  return p;
}

Program two_segments() { return compiled(); }

TEST_F(ProgramDir, RoundTripKeepsManifestGmlAndHostGraphs) {
  const Program p = two_segments();
  save(p, (dir_ / "prog").string());
  const Program back = load((dir_ / "prog").string());
  EXPECT_EQ(back.manifest, p.manifest);
  EXPECT_EQ(back.gml, p.gml);
  ASSERT_FALSE(p.host_graphs.empty());
  ASSERT_EQ(back.host_graphs.size(), p.host_graphs.size());
  for (const auto& [s, g] : p.host_graphs) {
    const ir::Graph& h = back.host_graph(s);
    ASSERT_EQ(h.nodes.size(), g.nodes.size());
    for (std::size_t i = 0; i < g.nodes.size(); ++i)
      EXPECT_EQ(h.nodes[i].op_type, g.nodes[i].op_type);
    EXPECT_EQ(h.inputs, g.inputs);
    EXPECT_EQ(h.outputs, g.outputs);
  }
  for (std::size_t s = 0; s < p.manifest.segments.size(); ++s)
    if (p.manifest.segments[s].is_device())
      EXPECT_THROW(back.host_graph(s), Error);  // a device segment has none
}

TEST_F(ProgramDir, ReplacesAnOlderProgramButNotOtherFiles) {
  Program p = two_segments();
  save(p, (dir_ / "prog").string());
  p.manifest.model = "replaced";
  save(p, (dir_ / "prog").string());
  EXPECT_EQ(load((dir_ / "prog").string()).manifest.model, "replaced");

  fs::create_directories(dir_ / "photos");
  std::ofstream(dir_ / "photos" / "cat.jpg") << "meow";
  EXPECT_THROW(save(p, (dir_ / "photos").string()), Error);
  EXPECT_TRUE(fs::exists(dir_ / "photos" / "cat.jpg"));
}

TEST_F(ProgramDir, AFailedSaveLeavesNothingBehind) {
  Program p = two_segments();
  save(p, (dir_ / "prog").string());
  Program broken = p;
  broken.manifest.model = "broken";
  broken.host_graphs.clear();  // the host segment's subgraph is missing
  EXPECT_THROW(save(broken, (dir_ / "prog").string()), Error);
  EXPECT_EQ(load((dir_ / "prog").string()).manifest.model, p.manifest.model);  // untouched
  EXPECT_THROW(save(broken, (dir_ / "fresh").string()), Error);
  EXPECT_FALSE(fs::exists(dir_ / "fresh"));
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos) << e.path();
}

TEST_F(ProgramDir, LoadNamesWhatIsMissing) {
  try {
    load((dir_ / "nothing").string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no manifest.json"), std::string::npos) << e.what();
  }
  const Program p = two_segments();
  save(p, (dir_ / "prog").string());
  const std::string host_file = p.manifest.segments[p.host_graphs.begin()->first].host->file;
  fs::remove(dir_ / "prog" / host_file);
  try {
    load((dir_ / "prog").string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(host_file), std::string::npos) << e.what();
  }
  // A GML that disagrees with the manifest is refused by name.
  save(p, (dir_ / "prog").string());
  {
    std::ofstream f(dir_ / "prog" / p.manifest.gml, std::ios::binary | std::ios::app);
    f << "xxxx";
  }
  try {
    load((dir_ / "prog").string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("extra bytes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace npukit::program
