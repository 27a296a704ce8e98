// npukit eval model.onnx|DIR --data X.npy --labels Y.npy [--float model.onnx] [--limit N]
// Top-1 accuracy of an int8 model through the full path (host prefix, device model, host
// suffix: runtime::Session), optionally beside the float model on the reference executor, plus
// the device cycles per image.
#include "common/error.h"
#include "common/file_io.h"
#include "common/npy.h"
#include "ir/tensor_util.h"
#include "onnx/onnx_io.h"
#include "ref/executor.h"
#include "runtime/session.h"
#include "tools/command_registry.h"
#include "tools/program_dir.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <random>

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

// Image n of X (axis 0) shaped like the model input (batch 1), converted to float32.
ir::Tensor image_of(const ir::Tensor& x, const std::vector<float>& all, std::int64_t n,
                    const ir::Shape& input_shape, const std::string& name) {
  const std::int64_t count = ir::element_count(x.shape) / x.shape[0];
  std::vector<float> v(all.begin() + n * count, all.begin() + (n + 1) * count);
  ir::Shape shape = input_shape;
  if (!shape.empty()) shape[0] = 1;
  if (ir::element_count(shape) != count)
    fail("--data: one image has {} values ({}), the model input '{}' takes {} ({})", count,
         ir::shape_string(x.shape), name, ir::element_count(shape), ir::shape_string(input_shape));
  return ir::make_tensor(shape, v, name);
}

std::int64_t argmax(const ir::Tensor& t) {
  const std::vector<float> v = ir::to_float_vector(t);
  if (v.empty()) fail("output '{}' is empty, no class to pick", t.name);
  return std::max_element(v.begin(), v.end()) - v.begin();
}

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
  // Loaded first so a bad data file fails before the (slower) compilation.
  ir::Tensor x = npukit::onnxio::load_tensor_file(a.data);
  ir::Tensor y = npukit::onnxio::load_tensor_file(a.labels);
  if (x.shape.empty() || x.shape[0] < 1) fail("--data '{}': needs a batch axis 0", a.data);
  const std::vector<std::int64_t> labels = ir::to_int64_vector(y);
  if (static_cast<std::int64_t>(labels.size()) != x.shape[0])
    fail("--labels '{}' has {} labels, --data '{}' has {} images", a.labels, labels.size(), a.data,
         x.shape[0]);
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (labels[i] < 0 || labels[i] > std::numeric_limits<std::int32_t>::max())
      fail("--labels '{}': label {} of image {} is not a class index (allowed 0..{})", a.labels,
           labels[i], i, std::numeric_limits<std::int32_t>::max());
  if (!a.predictions.empty()) npukit::check_output_path(a.predictions, "--predictions");
  if (!a.json.empty()) npukit::check_output_path(a.json, "--json");
  std::int64_t n = x.shape[0];
  const std::vector<float> xs = ir::to_float_vector(x);
  if (a.limit > 0) n = std::min(n, a.limit);

  TempDir temp;
  // A model with symbolic dimensions takes the image shape of --data (unless --input-shape).
  npukit::tools::ProgramOptions program = a.program;
  program.data_shapes[""] = x.shape;
  program.data_what = "--data '" + a.data + "'";
  const std::string dir = npukit::tools::ensure_program_dir(a.model, program, temp.path().string());
  npukit::runtime::SessionOptions so;
  so.warnings = &std::cerr;
  npukit::runtime::Session session(dir, so);
  const auto& m = session.manifest();
  if (m.inputs.size() != 1 || m.outputs.empty())
    fail("eval needs a model with one input and a class-score output; '{}' has {} inputs", a.model,
         m.inputs.size());
  const auto& input = m.inputs[0];
  if (const std::int64_t classes = ir::element_count(m.outputs[0].shape); classes > 0)
    for (std::size_t i = 0; i < labels.size(); ++i)
      if (labels[i] >= classes)
        fail(
            "--labels '{}': label {} of image {} is out of range: output '{}' scores {} classes "
            "(labels 0..{})",
            a.labels, labels[i], i, m.outputs[0].name, classes, classes - 1);

  std::optional<ir::Graph> float_model;
  if (!a.float_model.empty()) {
    float_model = npukit::tools::load_model(a.float_model, program);
    if (float_model->inputs.size() != 1)
      fail("--float '{}': needs exactly one input, has {}", a.float_model,
           float_model->inputs.size());
  }

  std::int64_t int8_correct = 0, float_correct = 0, agree = 0;
  std::uint64_t cycles = 0;
  std::vector<npukit::runtime::SegmentStats> segments;
  std::vector<npukit::runtime::LayerCycles> layers;
  std::vector<std::int64_t> predictions;
  Progress progress(n, !a.quiet);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < n; ++i) {
    npukit::ref::TensorMap feeds;
    feeds[input.name] = image_of(x, xs, i, input.shape, input.name);
    const auto result = session.run(feeds);
    const std::int64_t p = argmax(result.outputs.at(m.outputs[0].name));
    predictions.push_back(p);
    int8_correct += p == labels[i];
    cycles += result.device_cycles;
    npukit::tools::add_segment_stats(segments, result.segments);
    layers = result.layers;
    if (float_model) {
      const std::string& fin = float_model->inputs[0];
      npukit::ref::TensorMap ff;
      ff[fin] = image_of(x, xs, i, float_model->tensor(fin).shape, fin);
      const auto fo = npukit::ref::run_graph(*float_model, ff);
      const std::int64_t fp = argmax(fo.at(float_model->outputs[0]));
      float_correct += fp == labels[i];
      agree += fp == p;
    }
    progress.update(i + 1, fmt::format("int8 {:.2f} %", 100.0 * int8_correct / (i + 1)));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double int8_acc = 100.0 * int8_correct / n;
  const double float_acc = 100.0 * float_correct / n;
  const double cycles_per_image = static_cast<double>(cycles) / n;

  std::cout << fmt::format("{} images of {}\n", n, a.data);
  if (float_model)
    std::cout << fmt::format("float (reference executor) top-1 {:6.2f} %  ({}/{})\n", float_acc,
                             float_correct, n);
  std::cout << fmt::format("int8  (device model)       top-1 {:6.2f} %  ({}/{})\n", int8_acc,
                           int8_correct, n);
  if (float_model)
    std::cout << fmt::format(
        "int8 - float {:+.2f} points; same top-1 class on {:.2f} % of images\n",
        int8_acc - float_acc, 100.0 * agree / n);
  std::cout << fmt::format(
      "device cycles per image {:.0f} ({:.3f} ms at 81 MHz); host wall time "
      "{:.2f} ms per image\n",
      cycles_per_image, cycles_per_image / 81e3, 1e3 * seconds / n);

  std::cout << npukit::tools::segment_table(m, segments, n);
  if (!a.stats_json.empty()) npukit::tools::write_stats_json(a.stats_json, m, segments, layers, n);

  // Both outputs or neither.
  npukit::PendingOutputs outputs;
  if (!a.predictions.empty()) {
    outputs.write(a.predictions, npukit::encode_npy(npukit::onnxio::npy_from_tensor(ir::make_tensor(
                                     ir::Shape{static_cast<std::int64_t>(predictions.size())},
                                     predictions, "predictions"))));
  }
  if (!a.json.empty()) {
    nlohmann::json j{{"model", a.model},
                     {"images", n},
                     {"int8_top1", int8_acc / 100},
                     {"int8_correct", int8_correct},
                     {"device_cycles_per_image", cycles_per_image},
                     {"seconds_per_image", seconds / n}};
    if (float_model) {
      j["float_top1"] = float_acc / 100;
      j["float_correct"] = float_correct;
      j["top1_agreement"] = static_cast<double>(agree) / n;
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
                     "per-layer stats, per image, as JSON");
      npukit::tools::add_program_options(sub, args->program);
      npukit::tools::add_input_shape_option(sub, args->program);
      sub.callback([args] { run(*args); });
    }};

}  // namespace
