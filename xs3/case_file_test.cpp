// Case files: every committed fixture (expected values from fixtures/xs3/gen_cases.py, an
// independent exact-integer implementation, or worked by hand) passes, and malformed files
// fail with errors that name the file and the field.
#include "xs3/case_file.h"

#include "common/error.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

namespace npukit::xs3 {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<std::string> fixture_files() {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(fs::path(NPUKIT_SOURCE_DIR) / "fixtures" / "xs3")) {
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(Xs3CaseFiles, EveryFixturePasses) {
  const auto files = fixture_files();
  ASSERT_GE(files.size(), 30u);
  std::set<std::string> ops;
  for (const auto& f : files) {
    const json c = load_case(f);
    ops.insert(c["op"].get<std::string>());
    for (Isa impl : {Isa::kScalar, Isa::kAuto}) {
      const CheckResult r = check_case(c, f, impl);
      EXPECT_TRUE(r.pass) << f << ": " << r.mismatches << " mismatches";
      EXPECT_GT(r.compared, 0u);
    }
  }
  // Every kernel has at least one committed case.
  for (const auto& op : case_ops()) EXPECT_TRUE(ops.count(op)) << "no fixture for " << op;
}

json hand_case() {
  // 1x2 image, 2 channels, one output channel, 1x2 window starting one column left (padding
  // zero_point 4): taps [pad, px0] with k = [[1, 1], [2, -1]]: 4 + 4 + 2*1 - 1*2 = 8, bias 2 -> 10.
  return json::parse(R"({
    "name": "hand", "op": "conv2d_deep",
    "x": {"shape": [1, 2, 2], "data": [1, 2, 3, 4]},
    "k": {"shape": [1, 1, 2, 2], "data": [1, 1, 2, -1]},
    "bso": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
            2,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
            0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
            1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
            0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
            0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
            0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],
    "window": {"shape": [1, 2], "start": [0, -1], "stride": [1, 1]},
    "zero_point": 4, "params": {}, "y_shape": [1, 1, 1],
    "expected": {"data": [10]}})");
}

TEST(Xs3CaseFiles, HandWorkedCaseAndMismatchReport) {
  json c = hand_case();
  EXPECT_TRUE(check_case(c, "hand.json").pass);
  EXPECT_EQ(run_case(c, "hand.json").data, (std::vector<std::int64_t>{10}));
  c["expected"]["data"] = {11};
  const CheckResult r = check_case(c, "hand.json");
  EXPECT_FALSE(r.pass);
  ASSERT_EQ(r.first.size(), 1u);
  EXPECT_EQ(r.first[0].position, (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(r.first[0].expected, 11);
  EXPECT_EQ(r.first[0].got, 10);
}

void expect_error(json c, const std::string& needle) {
  try {
    run_case(c, "bad.json");
    FAIL() << "accepted: " << needle;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("bad.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  }
}

TEST(Xs3CaseFiles, MalformedCasesNameTheProblem) {
  json c = hand_case();
  c.erase("bso");
  expect_error(c, "\"bso\"");
  c = hand_case();
  c["op"] = "conv3d";
  expect_error(c, "unknown op \"conv3d\"");
  c = hand_case();
  c["x"]["data"] = {1, 2, 3};
  expect_error(c, "\"x.data\" has 3 elements");
  c = hand_case();
  c["x"]["data"][0] = 300;
  expect_error(c, "x.data\"[0] = 300");
  c = hand_case();
  c["k"]["shape"] = {1, 1, 3, 2};
  expect_error(c, "\"k.data\" has 4 elements but shape [1,1,3,2]");
  c = hand_case();
  c["bso"][2 * 16] = 65535;  // shift1 of channel 0 = -1
  expect_error(c, "negative");
  c = hand_case();
  c["window"]["stride"] = {0, 1};
  expect_error(c, "window.stride");
  c = hand_case();
  c["zero_point"] = "four";
  expect_error(c, "zero_point");
  c = hand_case();
  c["params"]["symmetric_saturation"] = 1;
  expect_error(c, "symmetric_saturation");
  c = hand_case();
  c["op"] = "maxpool2d";
  expect_error(c, "zero_point");
  EXPECT_THROW(run_case(json::array(), "bad.json"), Error);
  EXPECT_THROW(load_case("/nonexistent/case.json"), Error);
}

TEST(Xs3CaseFiles, OutputJsonKeepsShape) {
  const json c = hand_case();
  const json out = output_json(c, run_case(c, "hand.json"));
  EXPECT_EQ(out["y_shape"], json({1, 1, 1}));
  EXPECT_EQ(out["data"], json({10}));
  EXPECT_EQ(out["op"], "conv2d_deep");
}

}  // namespace
}  // namespace npukit::xs3
