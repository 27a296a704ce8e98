// Shared by the tools/*_cli_test.cpp files: runs the real npukit binary the way a user does.
#pragma once

#include "common/scratch_dir.h"
#include "onnx/onnx_io.h"

#include <sys/wait.h>

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace npukit::tools::testing {

struct CliResult {
  int status = -1;  // exit status, -1 if the process did not exit normally
  std::string out;  // stdout (and stderr when merged)
  std::string err;  // stderr, with Stderr::kSeparate only
};

enum class Stderr { kMerged, kSeparate, kDiscard };

// Runs a shell command line (so it may hold redirections, quotes and environment settings).
inline CliResult run_command(std::string cmd, Stderr mode = Stderr::kMerged) {
  namespace fs = std::filesystem;
  const fs::path err_file =
      fs::temp_directory_path() / ("npukit_cli_" + std::to_string(::getpid()) + ".err");
  if (mode == Stderr::kMerged) cmd += " 2>&1";
  if (mode == Stderr::kDiscard) cmd += " 2>/dev/null";
  if (mode == Stderr::kSeparate) cmd += " 2>" + err_file.string();
  CliResult r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (mode == Stderr::kSeparate) {
    std::ifstream in(err_file);
    r.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    fs::remove(err_file);
  }
  return r;
}

// Runs `NPUKIT_BIN args` through the shell.
inline CliResult run_npukit(const std::string& args, Stderr mode = Stderr::kMerged) {
  return run_command(std::string(NPUKIT_BIN) + " " + args, mode);
}

// One scratch directory per test process, removed at exit; `sub` names a fresh folder in it.
inline std::filesystem::path scratch_dir(const std::string& sub = "") {
  static npukit::testing::ScratchDir root("cli");
  if (sub.empty()) return root.path();
  const std::filesystem::path d = root / sub;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// `npukit run PROG` on a committed onnxruntime fixture (STEM.input_0.npy as input `x`), returning
// the run's output `y` and onnxruntime's (STEM.ort_output_0.npy); status is the run's exit status.
struct FixtureRun {
  CliResult run;
  ir::Tensor got, want;
};
inline FixtureRun run_ort_fixture(const std::string& prog, const std::string& stem,
                                  const std::filesystem::path& dir) {
  FixtureRun f;
  f.run = run_npukit("run " + prog + " -i x=" + stem + ".input_0.npy -o " + (dir / "out").string());
  if (f.run.status != 0) return f;
  f.got = onnxio::load_tensor_file((dir / "out" / "y.npy").string());
  f.want = onnxio::load_tensor_file(stem + ".ort_output_0.npy");
  return f;
}

}  // namespace npukit::tools::testing
