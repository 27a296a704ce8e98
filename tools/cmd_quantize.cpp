// npukit quantize: post-training quantization of a float ONNX model into the native int8 scheme.
#include "common/error.h"
#include "ir/tensor_util.h"
#include "onnx/onnx_io.h"
#include "quant/quantize.h"
#include "tools/command_registry.h"

#include <fmt/core.h>

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

namespace {

struct QuantizeArgs {
  std::string model;
  std::string calib;
  std::string output;
  std::string method = "percentile";
  double percentile = 99.99;
  int bins = 2048;
  std::vector<std::string> input_shapes;
  bool quiet = false;
};

// The first calibration array (a .npy file, or the first .npy of a folder in name order).
std::string first_calibration_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return path;
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(path))
    if (e.path().extension() == ".npy") files.push_back(e.path().string());
  if (files.empty()) npukit::fail("{}: folder holds no .npy files", path);
  return *std::min_element(files.begin(), files.end());
}

// A one-line bar redrawn in place; plain lines when stderr is not a terminal.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled), tty_(isatty(fileno(stderr)) != 0) {}
  void update(std::size_t done, std::size_t total) {
    if (!enabled_ || total == 0) return;
    const int width = 30;
    int filled = static_cast<int>(width * done / total);
    int percent = static_cast<int>(100 * done / total);
    if (tty_) {
      fmt::print(stderr, "\rcalibrating [{}{}] {:3d}% {}/{}", std::string(filled, '#'),
                 std::string(width - filled, ' '), percent, done, total);
      if (done == total) fmt::print(stderr, "\n");
    } else if (percent / 10 != last_decile_ || done == total) {
      last_decile_ = percent / 10;
      fmt::print(stderr, "calibrating [{}{}] {:3d}% {}/{}\n", std::string(filled, '#'),
                 std::string(width - filled, ' '), percent, done, total);
    }
    std::fflush(stderr);
  }

 private:
  bool enabled_;
  bool tty_;
  int last_decile_ = -1;
};

void run_quantize(const QuantizeArgs& args) {
  using namespace npukit;
  quant::QuantizeOptions options;
  options.method = quant::parse_calibration(args.method);
  options.percentile = args.percentile;
  options.histogram_bins = args.bins;
  if (options.method == quant::Calibration::kPercentile &&
      !(args.percentile > 0 && args.percentile <= 100))
    fail("--percentile {} is out of range (0, 100]", args.percentile);
  if (args.bins < options.quantized_bins || args.bins > quant::kMaxHistogramBins)
    fail("--bins {} is out of range ({}..{}; entropy calibration time grows with bins squared)",
         args.bins, options.quantized_bins, quant::kMaxHistogramBins);

  auto start = std::chrono::steady_clock::now();
  onnxio::LoadOptions load;
  for (const auto& spec : args.input_shapes) onnxio::add_input_shape(load, spec);
  ir::Graph model = onnxio::load_onnx(args.model, load);
  // Symbolic height/width the user did not give: take them from the calibration data.
  if (auto symbolic = onnxio::symbolic_inputs(model);
      !symbolic.empty() && model.inputs.size() == 1) {
    const std::string file = first_calibration_file(args.calib);
    const ir::Tensor sample = onnxio::load_tensor_file(file);
    load.input_shapes[model.inputs[0]] =
        onnxio::shape_from_sample(model.tensor(model.inputs[0]), sample.shape, file);
    model = onnxio::load_onnx(args.model, load);
    fmt::print("input '{}' has symbolic dimensions; using the calibration data's shape {}\n",
               model.inputs[0], ir::shape_string(model.tensor(model.inputs[0]).shape));
  }
  std::vector<ref::TensorMap> samples = quant::load_calibration_data(args.calib, model);
  ProgressBar bar(!args.quiet);
  options.progress = [&](std::size_t done, std::size_t total) { bar.update(done, total); };
  quant::QuantizeSummary summary;
  ir::Graph quantized = quant::quantize(std::move(model), samples, options, &summary);
  onnxio::save_onnx(quantized, args.output);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  fmt::print("{}: {} calibration, {} samples, {:.2f} s\n", args.model,
             quant::calibration_name(options.method), samples.size(), seconds);
  std::string ops;
  for (const auto& [op, count] : summary.quantized_ops) ops += fmt::format(" {} x{}", op, count);
  fmt::print("int8 ops:{}\n", ops.empty() ? " none" : ops);
  for (const auto& why : summary.float_nodes) fmt::print("kept in float: {}\n", why);
  for (const auto& why : summary.warnings) fmt::print(stderr, "warning: {}\n", why);
  fmt::print("wrote {}\n", args.output);
}

const npukit::tools::CommandRegistrar kReg{
    "quantize", "Post-training int8 quantization of a float ONNX model (QOperator output)",
    [](CLI::App& sub) {
      auto args = std::make_shared<QuantizeArgs>();
      // No CLI11 file check: load_onnx's error names the path and exits 1 like every other error.
      sub.add_option("model", args->model, "float ONNX model")->required();
      sub.add_option("--calib", args->calib,
                     "calibration data: a folder of .npy files or one .npy batch (N, ...)")
          ->required();
      sub.add_option("-o,--output", args->output, "where to write the int8 ONNX model")->required();
      sub.add_option("--method", args->method, "calibration: minmax, percentile or entropy")
          ->capture_default_str();
      sub.add_option("--percentile", args->percentile, "percentile for --method percentile")
          ->capture_default_str();
      sub.add_option("--bins", args->bins, "histogram bins for percentile and entropy")
          ->capture_default_str();
      sub.add_option("--input-shape", args->input_shapes,
                     "NAME=1,3,320,320: the shape of an input with symbolic dimensions (default: "
                     "the calibration data's)");
      sub.add_flag("-q,--quiet", args->quiet, "no progress bar");
      sub.callback([args] { run_quantize(*args); });
    }};

}  // namespace
