// `npukit lut check|eval|design`, run as the real binary.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include "tools/cli_test_support.h"

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

using npukit::tools::testing::CliResult;
CliResult run(const std::string& args) { return npukit::tools::testing::run_npukit(args); }

std::string fixture(const std::string& name) {
  return std::string(NPUKIT_SOURCE_DIR) + "/fixtures/lut/" + name;
}

std::filesystem::path temp_dir() { return npukit::tools::testing::scratch_dir(); }

TEST(LutCli, CheckPassesFixtures) {
  const CliResult r = run("lut check " + fixture("sdp_int_linear_prio_u0_o0_h0.json") + " " +
                          fixture("cdp_fp16_lrn_exponent.json"));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("PASS"), std::string::npos);
  EXPECT_NE(r.out.find("2 of 2 case files pass"), std::string::npos);
}

TEST(LutCli, CheckReportsFirstMismatchAndFails) {
  std::ifstream in(fixture("sdp_int_linear_prio_u0_o0_h0.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  j["expected"]["outputs"][3] = 7;  // the spec says 6
  j["expected"]["stats"]["hybrid"] = 99;
  const auto path = temp_dir() / "broken.json";
  std::ofstream(path) << j.dump();
  const CliResult r = run("lut check " + path.string());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("FAIL"), std::string::npos);
  EXPECT_NE(r.out.find("outputs[3] (input -999): got 6, expected 7"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stats.hybrid: got 15, expected 99"), std::string::npos) << r.out;
}

TEST(LutCli, CheckNamesMalformedInput) {
  const auto path = temp_dir() / "bad.json";
  std::ofstream(path)
      << R"({"unit":"cdp","precision":"int8","writes":[["S_LUT_LE_START",1]],"inputs":[]})";
  const CliResult r = run("lut check " + path.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("writes[0]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("S_LUT_LE_START_LOW"), std::string::npos) << r.out;  // suggests names
  const CliResult missing = run("lut check /nonexistent/case.json");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.out.find("cannot open"), std::string::npos);
}

TEST(LutCli, WritePastEndIsAnErrorUnlessExpected) {
  const CliResult ok = run("lut check " + fixture("sdp_int_write_past_end.json"));
  EXPECT_EQ(ok.status, 0) << ok.out;
  std::ifstream in(fixture("sdp_int_write_past_end.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  j["expected"].erase("errors");
  const auto path = temp_dir() / "past_end.json";
  std::ofstream(path) << j.dump();
  const CliResult r = run("lut check " + path.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("write_past_end"), std::string::npos) << r.out;
}

TEST(LutCli, EvalPrintsTheSameShape) {
  const CliResult r = run("lut eval " + fixture("sdp_int_exponent_off2.json"));
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  std::ifstream in(fixture("sdp_int_exponent_off2.json"));
  const nlohmann::json want = nlohmann::json::parse(in);
  EXPECT_EQ(j["expected"]["outputs"], want["expected"]["outputs"]);
  EXPECT_EQ(j["expected"]["stats"], want["expected"]["stats"]);
  EXPECT_EQ(j["unit"], "sdp");
  EXPECT_EQ(j["writes"].size(), want["writes"].size());
}

TEST(LutCli, DesignWritesCaseHeaderAndPlot) {
  const auto dir = temp_dir();
  const std::string c = (dir / "sig.json").string(), h = (dir / "sig.h").string(),
                    p = (dir / "sig.svg").string();
  const CliResult r = run("lut design --fn sigmoid --unit sdp --precision fp16 --range -8:8 -o " +
                          c + " --header " + h + " --plot " + p);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("nvdla/sw"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lower"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(h));
  EXPECT_TRUE(std::filesystem::exists(p));
  const CliResult check = run("lut check " + c);
  EXPECT_EQ(check.status, 0) << check.out;
}

TEST(LutCli, DesignRejectsBadOptions) {
  EXPECT_EQ(run("lut design --fn nope").status, 1);
  const CliResult r = run("lut design --fn tanh --range 4:-4");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("--range"), std::string::npos) << r.out;
  EXPECT_EQ(run("lut design --fn tanh --unit cdp --precision int").status, 1);
}

}  // namespace
