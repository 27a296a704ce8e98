// program::save / program::load: a round trip keeps every byte and field, and a failed save
// leaves the destination as it was.
#include "program/program.h"

#include "common/error.h"

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

// A program with a host segment (Relu on float) before a device segment.
Program two_segments() {
  Program p;
  p.manifest.model = "tiny";
  p.gml = {0x01, 0x02, 0x03, 0xfe};
  p.manifest.gml_bytes = p.gml.size();
  isa::ManifestSegment host;
  host.kind = isa::ManifestSegment::Kind::kHost;
  host.host = isa::ManifestSubgraph{"segment_0.onnx", {"x"}, {"y"}, {"relu"}};
  isa::ManifestSegment device;
  device.kind = isa::ManifestSegment::Kind::kDevice;
  device.instruction_count = 1;
  p.manifest.segments = {host, device};
  ir::Graph g;
  g.name = "tiny_segment_0";
  g.opset = 13;
  g.inputs = {"x"};
  g.outputs = {"y"};
  g.tensors["x"] = ir::Tensor{"x", ir::DType::kFloat32, {1, 4}, {}};
  g.tensors["y"] = ir::Tensor{"y", ir::DType::kFloat32, {1, 4}, {}};
  ir::Node relu;
  relu.name = "relu";
  relu.op_type = "Relu";
  relu.inputs = {"x"};
  relu.outputs = {"y"};
  g.nodes.push_back(relu);
  p.host_graphs[0] = g;
  return p;
}

TEST_F(ProgramDir, RoundTripKeepsManifestGmlAndHostGraphs) {
  const Program p = two_segments();
  save(p, (dir_ / "prog").string());
  const Program back = load((dir_ / "prog").string());
  EXPECT_EQ(back.manifest, p.manifest);
  EXPECT_EQ(back.gml, p.gml);
  ASSERT_EQ(back.host_graphs.size(), 1u);
  const ir::Graph& g = back.host_graph(0);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "Relu");
  EXPECT_EQ(g.inputs, std::vector<std::string>{"x"});
  EXPECT_EQ(g.outputs, std::vector<std::string>{"y"});
  EXPECT_THROW(back.host_graph(1), Error);  // the device segment has none
}

TEST_F(ProgramDir, ReplacesAnOlderProgramButNotOtherFiles) {
  Program p = two_segments();
  save(p, (dir_ / "prog").string());
  p.gml = {0x07};
  save(p, (dir_ / "prog").string());
  EXPECT_EQ(load((dir_ / "prog").string()).gml, Bytes{0x07});

  fs::create_directories(dir_ / "photos");
  std::ofstream(dir_ / "photos" / "cat.jpg") << "meow";
  EXPECT_THROW(save(p, (dir_ / "photos").string()), Error);
  EXPECT_TRUE(fs::exists(dir_ / "photos" / "cat.jpg"));
}

TEST_F(ProgramDir, AFailedSaveLeavesNothingBehind) {
  Program p = two_segments();
  save(p, (dir_ / "prog").string());
  Program broken = p;
  broken.gml = {0x09};
  broken.host_graphs.clear();  // the host segment's subgraph is missing
  EXPECT_THROW(save(broken, (dir_ / "prog").string()), Error);
  EXPECT_EQ(load((dir_ / "prog").string()).gml, p.gml);  // the older program is untouched
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
  save(two_segments(), (dir_ / "prog").string());
  fs::remove(dir_ / "prog" / "segment_0.onnx");
  try {
    load((dir_ / "prog").string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("segment_0.onnx"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace npukit::program
