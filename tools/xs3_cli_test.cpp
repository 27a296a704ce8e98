// npukit xs3 check / run, through the real binary.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include "tools/cli_test_support.h"

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;

using Result = npukit::tools::testing::CliResult;
Result run(const std::string& args) { return npukit::tools::testing::run_npukit(args); }

std::string fixture(const std::string& name) {
  return (fs::path(NPUKIT_SOURCE_DIR) / "fixtures" / "xs3" / name).string();
}

std::string temp_file(const std::string& name, const std::string& text) {
  const fs::path p = npukit::tools::testing::scratch_dir() / name;
  std::ofstream(p) << text;
  return p.string();
}

TEST(Xs3Cli, CheckAllFixturesPasses) {
  std::string files;
  int count = 0;
  for (const auto& e : fs::directory_iterator(fs::path(NPUKIT_SOURCE_DIR) / "fixtures" / "xs3")) {
    if (e.path().extension() == ".json") {
      files += " " + e.path().string();
      ++count;
    }
  }
  for (const std::string flag : {"", " --scalar"}) {
    const Result r = run("xs3 check" + flag + files);
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_NE(
        r.out.find(std::to_string(count) + " of " + std::to_string(count) + " case files passed"),
        std::string::npos)
        << flag << r.out;
  }
}

TEST(Xs3Cli, CheckReportsFirstMismatchesAndFails) {
  std::ifstream in(fixture("hand_fc8.json"));
  nlohmann::json c = nlohmann::json::parse(in);
  c["expected"]["data"][1] = -9;
  const std::string bad = temp_file("bad_fc8.json", c.dump());
  const Result r = run("xs3 check " + fixture("hand_fc8.json") + " " + bad);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("pass " + fixture("hand_fc8.json")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FAIL " + bad), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("y[1] (flat 1): expected -9, got -8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 of 2 case files passed"), std::string::npos) << r.out;
}

TEST(Xs3Cli, RunPrintsOutputInCaseShape) {
  const Result r = run("xs3 run " + fixture("hand_deep_padding.json"));
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["y_shape"], nlohmann::json({1, 1, 1}));
  EXPECT_EQ(j["data"], nlohmann::json({10}));
  EXPECT_EQ(j["op"], "conv2d_deep");
}

TEST(Xs3Cli, BadFilesGiveNamedErrors) {
  const std::string junk = temp_file("junk.json", "{ not json");
  Result r = run("xs3 check " + junk);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("npukit xs3: error: " + junk + ": not valid JSON"), std::string::npos)
      << r.out;
  const std::string neg = temp_file(
      "neg.json",
      R"({"name":"n","op":"requantize_16_to_8","x":{"shape":[2],"data":[1,70000]},"params":{},"y_shape":[2],"expected":{"data":[0,0]}})");
  r = run("xs3 run " + neg);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("\"x.data\"[1] = 70000 is outside [-32768, 32767]"), std::string::npos)
      << r.out;
  r = run("xs3 check /nonexistent/x.json");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("cannot open"), std::string::npos) << r.out;
}

}  // namespace
