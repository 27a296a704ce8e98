// `mpirun -n 2 npukit eval` (MPI scale-out) and `eval --threads 3` against the single process on
// the bundled digits model: the same output, JSON, predictions and per-layer stats apart from
// timing. Without MPI built in, a process started as one of several ranks is refused with a clear
// message.
#include "tools/cli_test_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using npukit::tools::testing::run_npukit;
using npukit::tools::testing::scratch_dir;
using ::testing::HasSubstr;

const std::string kDigits = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/digits/";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The JSON without its timing fields (wall time per image, host seconds per segment).
nlohmann::json without_timing(nlohmann::json j) {
  if (j.is_object()) {
    // The warm figures too: how many images follow a worker's first depends on the workers.
    for (const char* key :
         {"seconds_per_image", "host_seconds", "host_ms", "ms", "warm_images",
          "warm_seconds_per_image", "warm_cpu_seconds_per_image", "model_seconds"})
      j.erase(key);
    for (auto& [key, value] : j.items()) value = without_timing(value);
  } else if (j.is_array()) {
    for (auto& value : j) value = without_timing(value);
  }
  return j;
}

// The printed report without the lines that carry host timing.
std::string without_timing(const std::string& out) {
  std::istringstream in(out);
  std::string line, kept;
  while (std::getline(in, line))
    if (line.find("host wall time") == std::string::npos &&
        line.find(" ms host ") == std::string::npos &&
        line.find("after each worker's first image") == std::string::npos)
      kept += line + "\n";
  return kept;
}

std::string eval_args(const fs::path& out, const std::string& extra) {
  return "eval " + kDigits + "lenet_digits.int8.onnx --data " + kDigits + "X_test.npy --labels " +
         kDigits + "y_test.npy --float " + kDigits + "lenet_digits.onnx -q --json " +
         (out / "eval.json").string() + " --predictions " + (out / "pred.npy").string() +
         " --stats-json " + (out / "stats.json").string() + " " + extra;
}

// Two evals of the same images, written to `a` and `b` (eval_args): the same report apart from
// timing, JSON, per-layer stats and predictions.
void expect_same_eval(const std::string& out_a, const fs::path& a, const std::string& out_b,
                      const fs::path& b, const std::string& what) {
  EXPECT_EQ(without_timing(out_b), without_timing(out_a)) << what;
  EXPECT_EQ(without_timing(nlohmann::json::parse(slurp(b / "eval.json"))),
            without_timing(nlohmann::json::parse(slurp(a / "eval.json"))))
      << what;
  EXPECT_EQ(without_timing(nlohmann::json::parse(slurp(b / "stats.json"))),
            without_timing(nlohmann::json::parse(slurp(a / "stats.json"))))
      << what;
  EXPECT_EQ(slurp(b / "pred.npy"), slurp(a / "pred.npy")) << what;
}

// `npukit eval --threads N` spreads the images over N workers, each with its own device model:
// the same report, JSON, predictions and stats as one thread (101 images over 3 workers: 33, 34,
// 34; then 2 images, fewer than the threads).
TEST(EvalThreads, ThreeThreadsGiveTheOneThreadResult) {
  for (const std::string limit : {"101", "2"}) {
    const fs::path one = scratch_dir("t1_" + limit), three = scratch_dir("t3_" + limit);
    const auto single = run_npukit(eval_args(one, "--limit " + limit + " --threads 1"),
                                   npukit::tools::testing::Stderr::kDiscard);
    ASSERT_EQ(single.status, 0) << single.out;
    const auto spread = run_npukit(eval_args(three, "--limit " + limit + " --threads 3"),
                                   npukit::tools::testing::Stderr::kDiscard);
    ASSERT_EQ(spread.status, 0) << spread.out;
    EXPECT_THAT(single.out, HasSubstr(limit + " images of"));
    expect_same_eval(single.out, one, spread.out, three, "--limit " + limit);
  }
}

#ifdef NPUKIT_MPIEXEC

// mpirun as root (containers, CI) and with more ranks than cores.
npukit::tools::testing::CliResult run_mpi(int ranks, const std::string& args) {
  const std::string mpirun = std::string(NPUKIT_MPIEXEC) +
                             " --oversubscribe --allow-run-as-root -n " + std::to_string(ranks) +
                             " " + NPUKIT_BIN;
  return npukit::tools::testing::run_command(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " + mpirun + " " + args);
}

TEST(MpiEval, TwoRanksGiveTheSingleProcessResult) {
  // 101 images: rank 0 evaluates 50, rank 1 51; then 1 image, which rank 0 has none of.
  for (const std::string limit : {"101", "1"}) {
    const fs::path one = scratch_dir("one" + limit), two = scratch_dir("two" + limit);
    const auto single =
        run_npukit(eval_args(one, "--limit " + limit), npukit::tools::testing::Stderr::kDiscard);
    ASSERT_EQ(single.status, 0) << single.out;
    const auto mpi = run_mpi(2, eval_args(two, "--limit " + limit));
    ASSERT_EQ(mpi.status, 0) << mpi.out;
    EXPECT_THAT(single.out, HasSubstr(limit + " images of"));
    expect_same_eval(single.out, one, mpi.out, two, "--limit " + limit);
  }
}

TEST(MpiEval, AnErrorIsReportedOnceByRankZero) {
  const fs::path d = scratch_dir("bad");
  const auto r = run_mpi(2, "eval " + kDigits + "lenet_digits.int8.onnx --data " + kDigits +
                                "X_test.npy --labels " + kDigits + "X_test.npy -q");
  EXPECT_NE(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr("npukit eval: error:"));
  EXPECT_EQ(r.out.find("npukit eval: error:"), r.out.rfind("npukit eval: error:")) << r.out;
}

#else

TEST(MpiEval, WithoutMpiSeveralRanksAreRefused) {
  const std::string args = "eval --limit 1 " + kDigits + "lenet_digits.int8.onnx --data " +
                           kDigits + "X_test.npy --labels " + kDigits + "y_test.npy -q";
  const auto alone = run_npukit(args);
  ASSERT_EQ(alone.status, 0) << alone.out;  // one process: no MPI needed
  // What OpenMPI's mpirun tells each of 2 ranks it starts.
  ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  const auto r = run_npukit(args);
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("npukit eval: error: this process is one of 2 ranks started by "
                               "mpirun, but this npukit was built without MPI"));
}

#endif

}  // namespace
