// npukit profile as the real binary on the bundled digits model (quantized into a temporary
// directory first): the timing-only cycles equal a full simulation's (`npukit run`), the JSON,
// trace and HTML outputs hold every layer, the HTML renders every layer in a real headless
// browser (Debian chromium, installed by scripts/install-deps.sh), and the --sa-arch sweep.
#include "common/npy.h"
#include "tools/cli_test_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using npukit::tools::testing::CliResult;
using npukit::tools::testing::run_npukit;
using npukit::tools::testing::Stderr;
using ::testing::HasSubstr;

const std::string kDigits = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/digits/";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ProfileCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("npukit_profile_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    model_ = (dir_ / "digits.int8.onnx").string();
    CliResult r = run_npukit("quantize " + kDigits + "lenet_digits.onnx --calib " + kDigits +
                             "calib.npy -q -o " + model_);
    ASSERT_EQ(r.status, 0) << r.out;
    // One digit image ([1, 1, 8, 8] float32) for the full simulation.
    npukit::NpyArray all = npukit::read_npy(kDigits + "X_test.npy");
    npukit::NpyArray one{"float32", {1, 1, 8, 8}, {}};
    one.data.assign(all.data.begin(), all.data.begin() + 64 * sizeof(float));
    npukit::write_npy((dir_ / "x.npy").string(), one);
    r = run_npukit("compile " + model_ + " --sa-arch 9,4,4 -o " + (dir_ / "prog").string());
    ASSERT_EQ(r.status, 0) << r.out;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static fs::path dir_;
  static std::string model_;
};
fs::path ProfileCli::dir_;
std::string ProfileCli::model_;

TEST_F(ProfileCli, TimingOnlyCyclesEqualTheFullSimulation) {
  const fs::path prof = dir_ / "p.json", stats = dir_ / "run.json";
  CliResult r = run_npukit("profile " + (dir_ / "prog").string() + " --json " + prof.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("per block:"));
  EXPECT_THAT(r.out, HasSubstr("at 81.0 MHz"));
  // The full simulation: the same program run with values on the in-process device.
  r = run_npukit("run " + (dir_ / "prog").string() + " -i " + (dir_ / "x.npy").string() + " -o " +
                 (dir_ / "out").string() + " --stats-json " + stats.string());
  ASSERT_EQ(r.status, 0) << r.out;
  const auto p = nlohmann::json::parse(slurp(prof));
  const auto s = nlohmann::json::parse(slurp(stats));
  ASSERT_EQ(p["layers"].size(), s["layers"].size());
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < p["layers"].size(); ++i) {
    EXPECT_EQ(p["layers"][i]["cycles"], s["layers"][i]["cycles"]) << i;
    sum += p["layers"][i]["cycles"].get<std::uint64_t>();
  }
  EXPECT_EQ(p["total_cycles"].get<std::uint64_t>(),
            sum + p["run_start_cycles"].get<std::uint64_t>());
  for (const auto& l : p["layers"]) {
    EXPECT_GT(l["cycles"].get<std::uint64_t>(), 0u);
    EXPECT_TRUE(l.contains("macs") && l.contains("utilisation") && l.contains("dram_read_bytes") &&
                l.contains("dram_write_bytes") && l.contains("weight_bytes") &&
                l.contains("bound"));
  }
}

TEST_F(ProfileCli, ClockChangesTheTimeNotTheCycles) {
  CliResult a = run_npukit("profile " + (dir_ / "prog").string() + " --json -");
  CliResult b = run_npukit("profile " + (dir_ / "prog").string() + " --json - --clock-mhz 162");
  ASSERT_EQ(a.status, 0) << a.out;
  ASSERT_EQ(b.status, 0) << b.out;
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(ja["total_cycles"], jb["total_cycles"]);
  EXPECT_NEAR(ja["total_seconds"].get<double>(), 2 * jb["total_seconds"].get<double>(), 1e-12);
  EXPECT_NE(run_npukit("profile " + (dir_ / "prog").string() + " --clock-mhz 0").status, 0);
}

TEST_F(ProfileCli, TraceHasOneTrackPerBlockAndEveryLayer) {
  const fs::path trace = dir_ / "t.json";
  CliResult r =
      run_npukit("profile " + (dir_ / "prog").string() + " --json - --trace " + trace.string(),
                 Stderr::kDiscard);
  ASSERT_EQ(r.status, 0) << r.out;
  const auto p = nlohmann::json::parse(r.out);
  const auto t = nlohmann::json::parse(slurp(trace));
  std::set<std::string> tracks;
  std::set<std::string> layers;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks.insert(e["args"]["name"]);
    if (e["ph"] == "X" && e["args"].contains("name")) layers.insert(e["args"]["name"]);
  }
  for (const char* want : {"im2col", "array", "tail", "output writer", "DRAM", "dispatch"})
    EXPECT_TRUE(tracks.count(want)) << want;
  for (const auto& l : p["layers"]) EXPECT_TRUE(layers.count(l["name"])) << l["name"];
}

TEST_F(ProfileCli, HtmlRendersEveryLayerInAHeadlessBrowser) {
  const fs::path html = dir_ / "p.html";
  CliResult r =
      run_npukit("profile " + (dir_ / "prog").string() + " --json - --html " + html.string(),
                 Stderr::kDiscard);
  ASSERT_EQ(r.status, 0) << r.out;
  const auto layers = nlohmann::json::parse(r.out)["layers"].size();
  ASSERT_GT(layers, 0u);
  const std::string page = slurp(html);
  EXPECT_THAT(page, HasSubstr("<svg id=\"roofline\""));
  EXPECT_EQ(page.find("src="), std::string::npos);  // nothing loaded from elsewhere
  EXPECT_EQ(page.find("href="), std::string::npos);
  // A real browser runs the page's script; the DOM it dumps must hold a roofline point, a bar
  // and a table row for every layer.
  const fs::path profile_dir = dir_ / "chromium-profile";
  const std::string cmd =
      "chromium --headless --no-sandbox --disable-gpu --user-data-dir=" + profile_dir.string() +
      " --dump-dom file://" + html.string() + " 2>/dev/null";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string dom;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) dom.append(buf, n);
  const int status = ::pclose(pipe);
  ASSERT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0)
      << "chromium failed (scripts/install-deps.sh installs it): " << dom.substr(0, 300);
  auto count = [&](const std::string& what) {
    std::size_t c = 0;
    for (std::size_t pos = dom.find(what); pos != std::string::npos; pos = dom.find(what, pos + 1))
      ++c;
    return c;
  };
  EXPECT_EQ(count("class=\"layer-point"), layers);
  EXPECT_EQ(count("class=\"layer-bar"), layers);
  EXPECT_EQ(count("class=\"layer-row\""), layers);
  EXPECT_THAT(dom, HasSubstr("data-rendered=\"" + std::to_string(layers) + "\""));
}

TEST_F(ProfileCli, SweepComparesTheArrays) {
  CliResult r = run_npukit("profile " + model_ + " --sa-arch 9,4,4,9,8,8,16,1,16 --allow-errata",
                           Stderr::kDiscard);
  ASSERT_EQ(r.status, 0) << r.out;
  // One row per array: name, layers, cycles.
  for (const std::string arch : {"9,4,4", "9,8,8", "16,1,16"})
    EXPECT_THAT(r.out, ::testing::ContainsRegex(arch + " +[0-9]+ +[0-9]+ ")) << r.out;
  // Without --allow-errata 16,1,16 refuses chained layers (gati.md 14.6): the sweep says so and
  // still compares the others.
  r = run_npukit("profile " + model_ + " --sa-arch 9,4,4,16,1,16", Stderr::kDiscard);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("16,1,16   not compiled"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("9,4,4 +[0-9]+ +[0-9]+ "));
  CliResult bad = run_npukit("profile " + model_ + " --sa-arch 9,4", Stderr::kMerged);
  EXPECT_NE(bad.status, 0);
  EXPECT_THAT(bad.out, HasSubstr("--sa-arch"));
  CliResult dir = run_npukit("profile " + (dir_ / "prog").string() + " --sa-arch 9,4,4,9,8,8");
  EXPECT_NE(dir.status, 0);
  EXPECT_THAT(dir.out, HasSubstr("ONNX model"));
}

}  // namespace
