// Post-training quantization of a float ONNX graph into npukit's native scheme (DECISIONS.md 5):
// per-tensor symmetric int8 activations with zero point 0, per-tensor symmetric int8 weights,
// int32 biases. The result is a standard QOperator graph (QuantizeLinear at the inputs,
// QLinearConv, QGemm, QLinearMatMul, QLinearAdd, QLinearConcat, QLinearSigmoid,
// QLinearLeakyRelu, QLinearAveragePool, QLinearGlobalAveragePool, int8 Relu/Clip/MaxPool/Resize/
// Flatten/Reshape, DequantizeLinear at the outputs) that onnxruntime also runs. Ops without a
// quantized form stay in float between DequantizeLinear and QuantizeLinear.
//
// Activation ranges come from running the float graph on calibration data with the reference
// executor and one of three calibrations of the threshold T that maps to 127 (scale = T / 127):
//   min-max     T = the largest |x| seen;
//   percentile  T = the upper edge of the |x|-histogram bin where the given percentile of all
//               values is reached;
//   entropy     T minimising the KL divergence between the |x| histogram clipped at T and its
//               128-level quantization (TensorRT's calibrator).
#pragma once

#include "ir/graph.h"
#include "ref/executor.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace npukit::quant {

enum class Calibration { kMinMax, kPercentile, kEntropy };

// "minmax", "percentile", "entropy"; throws listing the choices otherwise.
Calibration parse_calibration(const std::string& name);
const char* calibration_name(Calibration method);

struct QuantizeOptions {
  // Percentile 99.99 by default: on the torchvision zoo it is at least as close to float as
  // min-max on every network and lifts the three with HardSwish/SiLU and squeeze-excitation
  // gates over 0.95 (docs/quantization.md).
  Calibration method = Calibration::kPercentile;
  double percentile = 99.99;  // for kPercentile, in (0, 100]
  int histogram_bins = 2048;  // for kPercentile and kEntropy, at most kMaxHistogramBins
  int quantized_bins = 128;   // levels on one side of zero (int8: 128)
  // Entropy calibration measures each value twice (its range, then its histogram over that
  // range), percentile calibration only where its tail cannot decide (below): up to this many
  // bytes of the values measured are kept from the first pass to the second,
  // which then runs the float graph only for the samples that did not fit (the thresholds are
  // the same; resnet50 keeps about 60 MB per image).
  std::size_t kept_activation_bytes = std::size_t{2} << 30;
  // Percentile calibration in one pass: each tensor's largest |x| are kept from pass 0, this
  // many times the share of values above the percentile (100 - percentile %, at least 16
  // values), and its histogram is counted from them: exact wherever the values left out lie
  // below the percentile's bin, which is checked (a tensor where it fails, or a share over
  // 1/64, takes the second pass). 0: always the second pass.
  double percentile_tail_margin = 4;
  // Called after each calibration run (done of total, counting both passes when histograms are
  // needed); the CLI draws its progress bar from this.
  std::function<void(std::size_t done, std::size_t total)> progress;
};

// ---- threshold selection on |x| histograms (bins of equal width over [0, range]) ------------

float percentile_threshold(const std::vector<std::uint64_t>& bins, float range, double percentile);
// Entropy calibration's time grows with the square of the bins (20 000 bins took minutes per
// model): histograms are bounded here.
inline constexpr int kMaxHistogramBins = 8192;

float entropy_threshold(const std::vector<std::uint64_t>& bins, float range, int quantized_bins);

// The histogram entropy calibration searches: adjacent bins merged in pairs while there are more
// than 2 x quantized_bins of them and fewer than kEntropyValuesPerBin values per bin on average.
// KL(P || Q) of a sparse histogram (about one value per bin) is mostly sampling noise, which Q's
// merging smooths away less the fewer bins a level takes, so the minimum moved to the smallest
// candidates and clipped hard: mobilenet_v3's squeeze-excitation tensors ([1, C, 1, 1], a few
// thousand values over 16 calibration images) were cut to about 0.6 of their range.
inline constexpr double kEntropyValuesPerBin = 16;
std::vector<std::uint64_t> entropy_histogram(const std::vector<std::uint64_t>& bins,
                                             int quantized_bins);

// Entropy calibration's T for one tensor: the larger of the thresholds of its positive and its
// negative values, each searched on its own |x| histogram (entropy_histogram, then
// entropy_threshold); `bins` counts |x| of all values, `negative` those of the negative ones
// (same bins), `zeros` the exact zeros, left out (they are exact at any scale). Folded into one
// |x| histogram, the dense negative values of a SiLU or HardSwish (all in [-0.28, 0] or
// [-0.375, 0]) pulled T down to resolve them and clipped the positive tail: efficientnet_b0's
// SiLU outputs were cut to 0.3 of their range (percentile 99.99: 0.44), cosine against float
// 0.950; 0.973 with the signs apart. The int8 grid is symmetric, so T serves the side that needs
// the most range.
float signed_entropy_threshold(const std::vector<std::uint64_t>& bins,
                               const std::vector<std::uint64_t>& negative, std::uint64_t zeros,
                               float range, int quantized_bins);

// ---- graph transformations ------------------------------------------------------------------

// Replaces every Identity of a constant by the constant itself. torch's exporter writes
// Identity(initializer) when two parameters are equal (e.g. batch norms at their defaults), and a
// Conv whose weights or bias arrive through one would otherwise look non-constant and stay float.
ir::Graph fold_constant_identities(ir::Graph graph);

// Folds every BatchNormalization (inference form) that is the only consumer of a Conv's output
// into that Conv's weights and bias. Other BatchNormalization nodes are left alone.
ir::Graph fold_batch_norm(ir::Graph graph);

// Calibration thresholds T (the |x| mapped to 127) for the graph's float inputs and every float
// node output, measured by running `graph` on `samples`.
// `observed`, when given, receives the type and shape of every node output as the runs saw it
// (a dimension that differed between samples is -1; no data).
std::map<std::string, float> calibrate(const ir::Graph& graph,
                                       const std::vector<ref::TensorMap>& samples,
                                       const QuantizeOptions& options,
                                       std::map<std::string, ir::Tensor>* observed = nullptr);

// Gives every value whose type or shape static inference left unknown (e.g. a Slice whose ends
// are computed from Shape at run time: torch's chunk, shufflenet) the type and shape observed by
// calibration. Returns the names it filled in.
std::vector<std::string> infer_types_from_observation(
    ir::Graph& graph, const std::map<std::string, ir::Tensor>& observed);

struct QuantizeSummary {
  std::map<std::string, int> quantized_ops;  // op type written -> count
  std::vector<std::string> float_nodes;      // nodes kept in float, with the reason
  // Layers with an int8 form that had to stay float (e.g. a bias that does not fit int32 at
  // input scale x weight scale); the rest of the model is still quantized.
  std::vector<std::string> warnings;
  // Values whose type/shape came from calibration (infer_types_from_observation).
  std::vector<std::string> inferred_types;
};

// Rewrites a (batch-norm-folded) float graph into QOperator form with the given thresholds.
ir::Graph quantize_with_thresholds(const ir::Graph& graph,
                                   const std::map<std::string, float>& thresholds,
                                   QuantizeSummary* summary = nullptr);

// The whole pipeline: fold batch norms, calibrate, rewrite. The graph transformations above
// take their graph by value: move a graph in that is not needed afterwards (a resnet50's
// weights are 100 MB to copy).
ir::Graph quantize(ir::Graph float_graph, const std::vector<ref::TensorMap>& samples,
                   const QuantizeOptions& options, QuantizeSummary* summary = nullptr);

// Calibration samples for a single-input graph from a folder of .npy files or one .npy file.
// Each array is one input of the graph's input shape or a batch of them along axis 0.
std::vector<ref::TensorMap> load_calibration_data(const std::string& path, const ir::Graph& graph);

}  // namespace npukit::quant
