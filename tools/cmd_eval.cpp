// npukit eval model.onnx|DIR --data X.npy --labels Y.npy [--float model.onnx] [--limit N]
// Options and printing only: the evaluation is analysis::evaluate (analysis/evaluate.h).
#include "analysis/evaluate.h"
#include "common/cpu.h"
#include "common/error.h"
#include "common/file_io.h"
#include "common/npy.h"
#include "common/parallel.h"
#include "ir/tensor_util.h"
#include "isa/arch.h"
#include "onnx/onnx_io.h"
#include "program/program.h"
#include "runtime/session.h"
#include "tools/command_registry.h"
#include "tools/mpi_world.h"
#include "tools/program_dir.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
using npukit::fail;
namespace ir = npukit::ir;

struct EvalArgs {
  std::string model, data, labels, float_model, json, predictions, stats_json;
  std::int64_t limit = 0;
  bool quiet = false;
  npukit::tools::ProgramOptions program;
};

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() / fmt::format("npukit-eval-{:08x}", rd());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// A one-line bar redrawn in place on a terminal; a line per 10 % otherwise (logs, pipes).
class Progress {
 public:
  Progress(std::int64_t total, bool enabled)
      : total_(std::max<std::int64_t>(total, 1)), enabled_(enabled), tty_(isatty(STDERR_FILENO)) {}
  void update(std::int64_t done, const std::string& tail) {
    if (!enabled_) return;
    const int width = 30;
    const int filled = static_cast<int>(width * done / total_);
    const int percent = static_cast<int>(100 * done / total_);
    const std::string line =
        fmt::format("evaluating [{}{}] {:3d}% {}/{} {}", std::string(filled, '#'),
                    std::string(width - filled, ' '), percent, done, total_, tail);
    if (tty_) {
      std::cerr << "\r" << line << (done == total_ ? "\n" : "") << std::flush;
    } else if (percent / 10 != last_decile_ || done == total_) {
      last_decile_ = percent / 10;
      std::cerr << line << "\n" << std::flush;
    }
  }

 private:
  std::int64_t total_;
  bool enabled_, tty_;
  int last_decile_ = -1;
};

void run(const EvalArgs& a) {
  // Under `mpirun -n N` every rank compiles the program and evaluates its shard of the images;
  // rank 0 merges the shards into the result of one process and alone prints and writes files.
  const npukit::tools::MpiWorld world("eval");

  TempDir temp;
  std::optional<npukit::runtime::Session> session;
  std::optional<ir::Graph> float_model;
  std::optional<Progress> progress;
  const std::string tail =
      world.size() > 1 ? fmt::format(" (rank 0 of {} MPI ranks)", world.size()) : "";

  auto evaluate_shard = [&] {
    // Loaded and checked first so a bad data file fails before the (slower) compilation.
    const ir::Tensor x = npukit::onnxio::load_tensor_file(a.data);
    const std::vector<std::int64_t> labels = npukit::analysis::labels_of(
        npukit::onnxio::load_tensor_file(a.labels), fmt::format("--labels '{}'", a.labels));
    const std::string data_name = fmt::format("--data '{}'", a.data);
    const std::string labels_name = fmt::format("--labels '{}'", a.labels);
    npukit::analysis::check_eval_data(x, labels, data_name, labels_name);
    if (!a.predictions.empty()) npukit::check_output_path(a.predictions, "--predictions");
    if (!a.json.empty()) npukit::check_output_path(a.json, "--json");

    // A model with symbolic dimensions takes the image shape of --data (unless --input-shape).
    npukit::tools::ProgramOptions program = a.program;
    program.data_shapes[""] = x.shape;
    program.data_what = "--data '" + a.data + "'";
    const std::string dir =
        npukit::tools::ensure_program_dir(a.model, program, temp.path().string());
    if (!a.float_model.empty()) {
      float_model = npukit::tools::load_model(a.float_model, program);
      if (float_model->inputs.size() != 1)
        fail("--float '{}': needs exactly one input, has {}", a.float_model,
             float_model->inputs.size());
    }
    const std::int64_t total = a.limit > 0 ? std::min(a.limit, x.shape[0]) : x.shape[0];
    const auto [first, end] = npukit::analysis::shard_range(total, world.rank(), world.size());
    progress.emplace(end - first, !a.quiet && world.rank() == 0);

    // Images are spread over the threads: each worker has its own Session (its own device model
    // and DRAM) and takes this rank's images one at a time from a shared queue (a core slowed by
    // other work takes fewer), with the layers inside run serially. merge_shards puts the
    // predictions back in image order: the one-thread result.
    const int workers = static_cast<int>(std::clamp<std::int64_t>(
        npukit::thread_count(), 1, std::max<std::int64_t>(end - first, 1)));
    // Loaded once. Each worker's session takes a copy that shares the GML bytes (124 MB for
    // resnet50) and drops them once they are sent to its device, which frees them after the last.
    std::vector<npukit::program::Program> programs(workers, npukit::program::load(dir));
    std::vector<std::optional<npukit::runtime::Session>> extra(workers - 1);
    std::vector<npukit::analysis::EvalResult> parts(workers);
    std::vector<std::exception_ptr> errors(workers);
    std::vector<std::int64_t> done(workers, 0), correct(workers, 0);
    std::mutex progress_mutex;
    npukit::analysis::ImageQueue queue(first, end, workers);
    auto work = [&](int w) {
      bool evaluating = false;  // evaluate() takes this worker's part in the queue's warm start
      try {
        npukit::runtime::SessionOptions so;
        so.warnings = world.rank() == 0 && w == 0 ? &std::cerr : nullptr;
        auto& s = w == 0 ? session : extra[w - 1];
        s.emplace(std::move(programs[w]), so);
        npukit::analysis::EvalOptions options;
        options.float_model = float_model ? &*float_model : nullptr;
        options.queue = &queue;
        options.progress = [&, w](std::int64_t d, std::int64_t, std::int64_t c) {
          const std::lock_guard lock(progress_mutex);
          done[w] = d;
          correct[w] = c;
          std::int64_t all_done = 0, all_correct = 0;
          for (int i = 0; i < workers; ++i) all_done += done[i], all_correct += correct[i];
          progress->update(all_done,
                           fmt::format("int8 {:.2f} %{}", 100.0 * all_correct / all_done, tail));
        };
        evaluating = true;
        parts[w] = npukit::analysis::evaluate(*s, x, labels, options, data_name, labels_name);
      } catch (...) {
        if (!evaluating) queue.leave();  // failed before evaluate(): the others must not wait
        errors[w] = std::current_exception();
      }
    };
    if (workers == 1) {
      work(0);
    } else {
      const unsigned threads = npukit::thread_count();
      npukit::set_thread_count(1);  // the workers' layers run serially: one image per core
      {
        std::vector<std::jthread> pool;
        for (int w = 1; w < workers; ++w) pool.emplace_back(work, w);
        work(0);
      }
      npukit::set_thread_count(threads);
    }
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
    return npukit::analysis::merge_shards(parts);
  };

  npukit::analysis::EvalResult r;
  if (world.size() == 1) {
    r = evaluate_shard();
  } else {
    // Every rank reaches the gather, failed or not, so an error on one rank is reported by
    // rank 0 instead of leaving the others waiting.
    std::string mine;
    try {
      mine = "ok " + npukit::analysis::encode_eval_result(evaluate_shard());
    } catch (const std::exception& e) {
      mine = std::string("error ") + e.what();
    }
    const std::vector<std::string> all = world.gather(mine);
    // Only rank 0 reports, and it exits non-zero for any rank's error. The other ranks exit 0:
    // mpirun aborts the whole job at the first non-zero exit, which could kill rank 0 before it
    // printed the error (seen in CI: the job failed with no "npukit eval: error:" line).
    if (world.rank() != 0) return;
    std::vector<npukit::analysis::EvalResult> shards;
    for (int i = 0; i < world.size(); ++i) {
      if (all[i].starts_with("error "))
        fail("{}{}", i == 0 ? "" : fmt::format("MPI rank {} of {}: ", i, world.size()),
             all[i].substr(6));
      shards.push_back(npukit::analysis::decode_eval_result(
          all[i].substr(3), fmt::format("the result of MPI rank {}", i)));
    }
    r = npukit::analysis::merge_shards(shards);
    if (!a.quiet)
      std::cerr << fmt::format("{} images evaluated by {} MPI ranks\n", r.images, world.size());
  }
  const auto& m = session->manifest();
  const std::int64_t n = r.images;
  const double clock_khz = static_cast<double>(npukit::isa::kClockHz) / 1e3;

  std::cout << fmt::format("{} images of {}\n", n, a.data);
  if (r.has_float)
    std::cout << fmt::format("float (reference executor) top-1 {:6.2f} %  ({}/{})\n",
                             100 * r.float_top1(), r.float_correct, n);
  std::cout << fmt::format("int8  (device model)       top-1 {:6.2f} %  ({}/{})\n",
                           100 * r.int8_top1(), r.int8_correct, n);
  if (r.has_float)
    std::cout << fmt::format(
        "int8 - float {:+.2f} points; same top-1 class on {:.2f} % of images\n",
        100 * (r.int8_top1() - r.float_top1()), 100 * r.agreement());
  std::cout << fmt::format(
      "device cycles per image {:.0f} ({:.3f} ms at {:g} MHz); host wall time "
      "{:.2f} ms per image\n",
      r.cycles_per_image(), r.cycles_per_image() / clock_khz, clock_khz / 1e3, 1e3 * r.seconds / n);
  if (r.warm_images > 0)
    std::cout << fmt::format(
        "after each worker's first image: {:.2f} ms wall, {:.2f} ms CPU per image ({} images, "
        "{} kernels)\n",
        1e3 * r.warm_seconds_per_image(), 1e3 * r.warm_cpu_seconds_per_image(), r.warm_images,
        npukit::cpu::name(npukit::cpu::active()));

  std::cout << npukit::tools::segment_table(m, r.segments, n);
  if (!a.stats_json.empty())
    npukit::tools::write_stats_json(a.stats_json, m, r.segments, r.layers, n);

  // Both outputs or neither.
  npukit::PendingOutputs outputs;
  if (!a.predictions.empty()) {
    outputs.write(a.predictions, npukit::encode_npy(npukit::onnxio::npy_from_tensor(ir::make_tensor(
                                     ir::Shape{static_cast<std::int64_t>(r.predictions.size())},
                                     r.predictions, "predictions"))));
  }
  if (!a.json.empty()) {
    nlohmann::json j{{"model", a.model},
                     {"images", n},
                     {"int8_top1", r.int8_top1()},
                     {"int8_correct", r.int8_correct},
                     {"device_cycles_per_image", r.cycles_per_image()},
                     {"seconds_per_image", r.seconds / n},
                     {"warm_images", r.warm_images},
                     {"warm_seconds_per_image", r.warm_seconds_per_image()},
                     {"warm_cpu_seconds_per_image", r.warm_cpu_seconds_per_image()},
                     // The SIMD level the kernels ran at (common/cpu.h; NPUKIT_ISA forces one).
                     {"simd", npukit::cpu::name(npukit::cpu::active())}};
    if (r.has_float) {
      j["float_top1"] = r.float_top1();
      j["float_correct"] = r.float_correct;
      j["top1_agreement"] = r.agreement();
    }
    outputs.write_text(a.json, j.dump(2) + "\n");
  }
  outputs.commit();
}

const npukit::tools::CommandRegistrar kReg{
    "eval", "Top-1 accuracy of an int8 model on the device model (float beside it)",
    [](CLI::App& sub) {
      auto args = std::make_shared<EvalArgs>();
      sub.add_option("model", args->model, "int8 ONNX model, or a directory from `npukit compile`")
          ->required();
      sub.add_option("--data", args->data, "images, .npy with the batch on axis 0")->required();
      sub.add_option("--labels", args->labels, "integer class labels, .npy, one per image")
          ->required();
      sub.add_option("--float", args->float_model,
                     "the float model, run on the reference executor for comparison");
      sub.add_option("--limit", args->limit, "evaluate only the first N images (0 = all)")
          ->check(CLI::NonNegativeNumber);
      sub.add_option("--json", args->json, "also write the results to this JSON file");
      sub.add_option("--predictions", args->predictions,
                     "write the int8 model's top-1 class per image (.npy, int64)");
      sub.add_flag("-q,--quiet", args->quiet, "no progress bar");
      sub.add_option("--stats-json", args->stats_json,
                     "write per-segment (where, cycles or host time, bytes each way) and "
                     "per-layer stats (cycles; the device model's own time, the mean over the "
                     "images after each worker's first), per image, as JSON");
      npukit::tools::add_program_options(sub, args->program);
      npukit::tools::add_input_shape_option(sub, args->program);
      sub.callback([args] { run(*args); });
    }};

}  // namespace
