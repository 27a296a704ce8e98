#include "quant/quantize.h"

#include "common/error.h"
#include "common/parallel.h"
#include "ir/tensor_util.h"
#include "onnx/onnx_io.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace npukit::quant {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kFixtures = std::string(NPUKIT_SOURCE_DIR) + "/fixtures";

ref::TensorMap one_input(const ir::Graph& g, const std::string& npy) {
  ir::Tensor t = onnxio::load_tensor_file(npy);
  t.name = g.inputs.at(0);
  return {{t.name, t}};
}

std::vector<float> run_float(const ir::Graph& g, const ref::TensorMap& in) {
  ref::TensorMap out = ref::run_graph(g, in);
  return ir::to_float_vector(out.at(g.outputs.at(0)));
}

// ---- hand-computed thresholds ---------------------------------------------------------------

// y = Relu(x): the graph whose activations we calibrate by hand.
ir::Graph relu_graph() {
  ir::Graph g;
  g.name = "relu";
  g.opsets[""] = 13;
  g.tensors["x"] = ir::Tensor{"x", ir::DType::kFloat32, {1, 4}, {}};
  g.tensors["y"] = ir::Tensor{"y", ir::DType::kFloat32, {1, 4}, {}};
  g.inputs = {"x"};
  g.outputs = {"y"};
  g.nodes.push_back(ir::Node{"relu", "Relu", "", {"x"}, {"y"}, {}});
  return g;
}

// y = Neg(x) over n values: |y| = |x|, measured as a node output and as a graph input.
ir::Graph neg_graph(std::int64_t n) {
  ir::Graph g = relu_graph();
  g.tensors["x"].shape = {1, n};
  g.tensors["y"] = ir::Tensor{"y", ir::DType::kFloat32, {1, n}, {}};
  g.nodes = {ir::Node{"neg", "Neg", "", {"x"}, {"y"}, {}}};
  return g;
}

std::vector<ref::TensorMap> relu_samples() {
  return {{{"x", ir::make_tensor<float>({1, 4}, {-3.0f, 1.0f, 0.5f, 2.0f}, "x")}},
          {{"x", ir::make_tensor<float>({1, 4}, {0.25f, -1.0f, 2.5f, 0.0f}, "x")}}};
}

TEST(Calibration, MinMaxIsTheLargestMagnitudeOverAllSamples) {
  QuantizeOptions o;
  o.method = Calibration::kMinMax;
  auto t = calibrate(relu_graph(), relu_samples(), o);
  EXPECT_FLOAT_EQ(t.at("x"), 3.0f);  // |-3| in sample 0
  EXPECT_FLOAT_EQ(t.at("y"), 2.5f);  // relu outputs: 0 1 .5 2 / .25 0 2.5 0
  // The scale written into the model is T / 127. x feeds only the Relu, and an int8 Relu keeps
  // its input's scale, so x gets the Relu output's range (its negative part is cut anyway).
  ir::Graph q = quantize_with_thresholds(relu_graph(), t);
  EXPECT_FLOAT_EQ(q.tensor("x_scale").as<float>()[0], 2.5f / 127);
  EXPECT_FLOAT_EQ(q.tensor("y_scale").as<float>()[0], 2.5f / 127);
}

TEST(Calibration, PercentileByHand) {
  // |x| over both samples: 3 1 .5 2 .25 1 2.5 0, range [0, 3] in 6 bins of width 0.5:
  // bin0 [0,.5): .25 0 -> 2; bin1 [.5,1): .5 -> 1; bin2 [1,1.5): 1 1 -> 2; bin3 [1.5,2): 0;
  // bin4 [2,2.5): 2 -> 1; bin5 [2.5,3]: 3 2.5 -> 2.  Cumulative: 2 3 5 5 6 8 of 8.
  QuantizeOptions o;
  o.method = Calibration::kPercentile;
  o.histogram_bins = 6;
  o.quantized_bins = 2;
  o.percentile = 62.5;  // 5 of 8 values: reached at the end of bin2 -> T = 1.5
  EXPECT_FLOAT_EQ(calibrate(relu_graph(), relu_samples(), o).at("x"), 1.5f);
  o.percentile = 75;  // 6 of 8: end of bin4 -> 2.5
  EXPECT_FLOAT_EQ(calibrate(relu_graph(), relu_samples(), o).at("x"), 2.5f);
  o.percentile = 100;
  EXPECT_FLOAT_EQ(calibrate(relu_graph(), relu_samples(), o).at("x"), 3.0f);
  EXPECT_FLOAT_EQ(percentile_threshold({2, 1, 2, 0, 1, 2}, 3.0f, 10), 0.5f);
  EXPECT_THROW(percentile_threshold({1}, 1.0f, 0), Error);
}

// Long tensors take calibrate's vector loops (max, zero count, four interleaved counters);
// lengths 1003 and 8 leave every kind of remainder. Each percentile threshold must be the end
// of the bin where a plain count over the same bins reaches it, and a NaN anywhere is refused.
TEST(Calibration, PercentileOfLongTensorsMatchesAPlainCount) {
  for (const std::int64_t n : {std::int64_t{1003}, std::int64_t{8}}) {
    ir::Graph g = relu_graph();
    g.tensors["x"].shape = {1, n};
    g.tensors["y"].shape = {1, n};
    std::vector<float> values(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < values.size(); ++i)  // a third exact zeros, the rest spread
      values[i] = i % 3 == 0 ? 0.0f : static_cast<float>((i * 7919) % 1000) / 97.0f - 3.0f;
    const std::vector<ref::TensorMap> samples = {
        {{"x", ir::make_tensor<float>({1, n}, values, "x")}}};
    QuantizeOptions o;
    o.method = Calibration::kPercentile;
    o.histogram_bins = 64;
    o.quantized_bins = 8;
    float max_abs = 0;
    for (float v : values) max_abs = std::max(max_abs, std::fabs(v));
    std::vector<std::uint64_t> bins(64, 0);
    for (float v : values)
      ++bins[static_cast<std::size_t>(std::min(63.0, std::fabs(v) * (64.0 / max_abs)))];
    for (const double percentile : {50.0, 90.0, 99.0, 100.0}) {
      o.percentile = percentile;
      EXPECT_FLOAT_EQ(calibrate(g, samples, o).at("x"),
                      percentile_threshold(bins, max_abs, percentile))
          << n << " values, percentile " << percentile;
    }
    std::vector<float> with_nan = values;
    with_nan[static_cast<std::size_t>(n) - 6] = NAN;
    EXPECT_THROW(calibrate(g, {{{"x", ir::make_tensor<float>({1, n}, with_nan, "x")}}}, o), Error)
        << n;
  }
}

// Samples spread over threads give the one-thread thresholds, shapes seen and error, for every
// method (pass 1 starts from the maxima merged over all samples).
TEST(Calibration, EveryThreadCountGivesTheOneThreadResult) {
  const std::int64_t n = 301;
  ir::Graph g = relu_graph();
  g.tensors["x"].shape = {1, n};
  g.tensors["y"].shape = {1, n};
  std::vector<ref::TensorMap> samples;
  for (int k = 0; k < 5; ++k) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < v.size(); ++i)  // each sample its own range
      v[i] = static_cast<float>(((i + 31 * k) * 7919) % 1000) / (50.0f + 40.0f * k) - 4.0f;
    samples.push_back({{"x", ir::make_tensor<float>({1, n}, v, "x")}});
  }
  const unsigned threads = thread_count();
  for (const Calibration method :
       {Calibration::kMinMax, Calibration::kPercentile, Calibration::kEntropy}) {
    QuantizeOptions o;
    o.method = method;
    o.histogram_bins = 128;
    o.quantized_bins = 16;
    o.percentile = 97;
    std::map<std::string, float> one;
    std::map<std::string, ir::Tensor> seen_one;
    for (const unsigned t : {1u, 2u, 3u, 8u}) {
      set_thread_count(t);
      std::map<std::string, ir::Tensor> seen;
      const auto thresholds = calibrate(g, samples, o, &seen);
      if (t == 1) {
        one = thresholds;
        seen_one = seen;
        continue;
      }
      EXPECT_EQ(thresholds, one) << calibration_name(method) << ", " << t << " threads";
      ASSERT_EQ(seen.size(), seen_one.size());
      for (const auto& [name, tensor] : seen) {
        EXPECT_EQ(tensor.dtype, seen_one.at(name).dtype) << name;
        EXPECT_EQ(tensor.shape, seen_one.at(name).shape) << name;
      }
    }
  }
  std::vector<ref::TensorMap> bad = samples;
  bad[3].at("x").as_mutable<float>()[7] = NAN;       // the first sample to fail ...
  bad[4].at("x").as_mutable<float>()[9] = INFINITY;  // ... before this one, on any thread
  std::string message_one;
  for (const unsigned t : {1u, 2u, 5u}) {
    set_thread_count(t);
    try {
      calibrate(g, bad, {});
      ADD_FAILURE() << "NaN accepted with " << t << " threads";
    } catch (const Error& e) {
      if (t == 1) message_one = e.what();
      EXPECT_EQ(e.what(), message_one) << t << " threads";
    }
  }
  set_thread_count(threads);
}

// A value read only by a Relu is not measured: the quantizer gives it the Relu output's scale,
// so calibration reports the Relu output's threshold for it (here n = -x, y = Relu(n)).
TEST(Calibration, AReluInputTakesTheReluOutputsThreshold) {
  ir::Graph g = relu_graph();
  g.tensors["n"] = ir::Tensor{"n", ir::DType::kFloat32, {1, 4}, {}};
  g.nodes = {ir::Node{"neg", "Neg", "", {"x"}, {"n"}, {}},
             ir::Node{"relu", "Relu", "", {"n"}, {"y"}, {}}};
  for (Calibration m : {Calibration::kMinMax, Calibration::kPercentile, Calibration::kEntropy}) {
    QuantizeOptions o;
    o.method = m;
    const auto t = calibrate(g, relu_samples(), o);
    EXPECT_FLOAT_EQ(t.at("x"), 3.0f);  // graph inputs are measured
    EXPECT_EQ(t.at("n"), t.at("y")) << calibration_name(m);
    if (m == Calibration::kMinMax) {
      EXPECT_FLOAT_EQ(t.at("y"), 3.0f);  // Relu(-x): 3 .25 1
    }
  }
  // Read by a second node too, n is measured itself: |-x| reaches 3 there as well, so compare
  // against x's threshold.
  g.nodes.push_back(ir::Node{"abs", "Abs", "", {"n"}, {"a"}, {}});
  g.tensors["a"] = ir::Tensor{"a", ir::DType::kFloat32, {1, 4}, {}};
  g.outputs.push_back("a");
  QuantizeOptions o;
  o.method = Calibration::kMinMax;
  o.kept_activation_bytes = 0;
  EXPECT_FLOAT_EQ(calibrate(g, relu_samples(), o).at("n"), 3.0f);
}

// Kept values drop their exact zeros (+0 and -0: Neg of a zero) and count them: the thresholds
// equal those of the samples run again, for each histogram method, with zeros, negative values
// and a length that is not a multiple of 4.
TEST(Calibration, KeptValuesWithoutTheirZerosGiveTheSameThresholds) {
  const std::int64_t n = 103;
  const ir::Graph g = neg_graph(n);
  std::vector<ref::TensorMap> samples;
  for (std::size_t k = 0; k < 3; ++k) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = i % 3 == k ? 0.0f : static_cast<float>((i * 7919 + 13 * k) % 997) / 83.0f - 4.0f;
    samples.push_back({{"x", ir::make_tensor<float>({1, n}, v, "x")}});
  }
  for (Calibration m : {Calibration::kPercentile, Calibration::kEntropy}) {
    QuantizeOptions o;
    o.method = m;
    o.histogram_bins = 256;
    o.quantized_bins = 16;
    o.percentile = 90;  // pass 1 (a tail of 40 % is no gain over keeping the values)
    o.kept_activation_bytes = 0;
    const float again = calibrate(g, samples, o).at("y");
    o.kept_activation_bytes = QuantizeOptions{}.kept_activation_bytes;
    EXPECT_EQ(calibrate(g, samples, o).at("y"), again) << calibration_name(m);
  }
}

// Percentile calibration from pass 0's tails alone (percentile_tail_margin) gives the threshold
// of the whole |x| histogram, counted here from every value: with exact zeros, ties at a bin
// edge and a heavy tail, on 1 to 3 threads; and where the tail kept is too short to decide
// (margin 0.05), the second pass runs (the graph runs twice per sample) and gives it too.
TEST(Calibration, PercentileFromTheTailEqualsTheWholeHistogram) {
  const std::int64_t n = 10007;
  constexpr std::size_t kSamples = 4;
  const ir::Graph g = neg_graph(n);
  std::vector<ref::TensorMap> samples;
  std::vector<float> all;
  std::uint32_t state = 12345;
  for (std::size_t k = 0; k < kSamples; ++k) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < v.size(); ++i) {
      state = state * 1664525u + 1013904223u;
      const float u = static_cast<float>(state >> 8) / 16777216.0f;  // [0, 1)
      const float sign = (state >> 4 & 1) ? -1.0f : 1.0f;
      v[i] = i % 10 < 3 ? 0.0f : i % 11 == 0 ? 3.0f : sign * 40.0f * u * u * u * u * u * u;
    }
    v[17 + k] = 40.0f + static_cast<float>(k);  // the largest, one per sample
    all.insert(all.end(), v.begin(), v.end());
    samples.push_back({{"x", ir::make_tensor<float>({1, n}, v, "x")}});
  }
  const std::size_t bins = 2048;
  float max_abs = 0;
  for (const float v : all) max_abs = std::max(max_abs, std::fabs(v));
  std::vector<std::uint64_t> histogram(bins, 0);
  for (const float v : all)
    ++histogram[static_cast<std::size_t>(std::min(
        static_cast<double>(bins - 1), std::fabs(v) * (static_cast<double>(bins) / max_abs)))];
  const unsigned threads = thread_count();
  for (const double percentile : {99.99, 99.9, 99.8})
    for (const double margin : {4.0, 0.05})
      for (const unsigned t : {1u, 2u, 3u}) {
        set_thread_count(t);
        QuantizeOptions o;
        o.percentile = percentile;
        o.percentile_tail_margin = margin;
        std::size_t runs = 0;
        o.progress = [&](std::size_t, std::size_t) { ++runs; };
        const auto thresholds = calibrate(g, samples, o);
        const float want = percentile_threshold(histogram, max_abs, percentile);
        EXPECT_EQ(thresholds.at("x"), want) << percentile << ", margin " << margin << ", " << t;
        EXPECT_EQ(thresholds.at("y"), want) << percentile << ", margin " << margin << ", " << t;
        // (At 99.99 the fewest values a tail keeps, 16, hold the 4 above the mark.)
        EXPECT_EQ(runs, margin == 4.0 || percentile == 99.99 ? kSamples : 2 * kSamples)
            << percentile << ", margin " << margin << ", " << t << " threads";
      }
  set_thread_count(threads);
}

// Histogram calibration keeps pass 0's values for pass 1 within kept_activation_bytes and runs
// the float graph again for the samples that did not fit: the model written must be the same
// bytes for every budget (none kept, some, all) and every thread count.
TEST(Calibration, KeptValuesAndThreadCountsGiveTheSameModelBytes) {
  const ir::Graph g = onnxio::load_onnx(kFixtures + "/digits/lenet_digits.onnx");
  auto samples = load_calibration_data(kFixtures + "/digits/calib.npy", g);
  samples.resize(24);
  const unsigned threads = thread_count();
  for (Calibration m : {Calibration::kMinMax, Calibration::kPercentile, Calibration::kEntropy}) {
    QuantizeOptions o;
    o.method = m;
    o.kept_activation_bytes = 0;  // pass 1 runs every sample again
    o.percentile_tail_margin = 0;
    set_thread_count(1);
    const auto reference = onnxio::save_onnx_bytes(quantize(g, samples, o));
    for (const std::size_t budget : {std::size_t{20000}, QuantizeOptions{}.kept_activation_bytes})
      for (const double margin : {0.0, QuantizeOptions{}.percentile_tail_margin})
        for (const unsigned t : {1u, 2u, 3u}) {
          set_thread_count(t);
          o.kept_activation_bytes = budget;
          o.percentile_tail_margin = margin;
          EXPECT_TRUE(onnxio::save_onnx_bytes(quantize(g, samples, o)) == reference)
              << calibration_name(m) << ", " << budget << " bytes kept, tail margin " << margin
              << ", " << t << " threads";
        }
  }
  set_thread_count(threads);
}

TEST(Calibration, EntropyByHand) {
  // Histogram [10, 2, 0, 1] over [0, 4] (width 1), 2 quantized levels. Candidates i = 2, 3, 4:
  // P and Q are both divided by the total count 13 (Q lacks the clipped mass).
  //  i=2: P = [10, 2+0+1] / 13, Q = [10, 2] / 13:
  //       KL = 10/13 ln(1) + 3/13 ln(3/2) = 0.0936
  //  i=3: P = [10, 2, 0+1] / 13, Q = [10, 2, 0] / 13 (bin 2 is empty so gets nothing): Q is
  //       zero where P is not, KL ~ 1/13 ln(1/1e-4) = 0.71 (smoothed on counts)
  //  i=4: P = [10, 2, 0, 1] / 13, Q = [6, 6, 0, 1] / 13:
  //       KL = 10/13 ln(10/6) + 2/13 ln(2/6) = 0.2239
  // Minimum at i = 2 -> T = 2 * width = 2.0.
  EXPECT_FLOAT_EQ(entropy_threshold({10, 2, 0, 1}, 4.0f, 2), 2.0f);
  // A flat histogram loses nothing by keeping everything: T = the full range.
  EXPECT_FLOAT_EQ(entropy_threshold(std::vector<std::uint64_t>(16, 5), 8.0f, 4), 8.0f);
  // Discrete values (the digits images hold k/16): spikes in bins 128, 256, ..., 1920 of 2048.
  // Keeping every bin (i = 2048, 16 bins per level, one spike each) and clipping everything into
  // bin 128 (i = 129) both give Q = P, KL = 0: the tie goes to the larger T, which clips nothing.
  std::vector<std::uint64_t> spikes(2048, 0);
  for (int k = 1; k < 16; ++k) spikes[128 * k] = 100;
  EXPECT_FLOAT_EQ(entropy_threshold(spikes, 1.0f, 128), 1.0f);
  // A far outlier is clipped away.
  std::vector<std::uint64_t> bins(2048, 0);
  for (int i = 0; i < 256; ++i) bins[i] = 1000 - i * 3;
  bins[2047] = 1;
  float t = entropy_threshold(bins, 2048.0f, 128);
  EXPECT_LT(t, 400.0f);
  EXPECT_GE(t, 128.0f);
}

// A distribution far from zero: the clipped mass must count. Histogram [0, 0, 1, 3] over [0, 4],
// 2 levels. i=2: Q is all zero (skipped). i=3: P = [0, 0, 1+3] / 4, Q = [0, 0, 1] / 4 (groups
// [0], [1, 2]): KL ~ ln(4) = 1.39. i=4: P = [0, 0, 1, 3] / 4, Q = [0, 0, 2, 2] / 4:
// KL = 1/4 ln(1/2) + 3/4 ln(3/2) = 0.131. T = 4. (Q normalized over its own mass was [0, 0, 1]
// at i=3, equal to P, KL = 0: T = 3 clipped 3 of 4 values.) The second case is a sparse peak in
// [0.47, 1] like mobilenet_v3's squeeze-excitation gates (1 value in every third bin from 960,
// 2 more in every second bin of [1400, 1600)): the old rule clipped it at 0.469, below every value.
TEST(Calibration, EntropyCountsTheClippedMass) {
  EXPECT_FLOAT_EQ(entropy_threshold({0, 0, 1, 3}, 4.0f, 2), 4.0f);
  std::vector<std::uint64_t> peak(2048, 0);
  for (int k = 960; k < 2048; k += 3) peak[k] = 1;
  for (int k = 1400; k < 1600; k += 2) peak[k] += 2;
  // Bin 2047 is empty (the values sit in every third bin from 960): 2047/2048 clips nothing either.
  EXPECT_GE(entropy_threshold(peak, 1.0f, 128), 2047.0f / 2048);
}

// Smoothing (zeros -> 1e-4, taken from the non-zero entries) works on counts. Histogram
// [999998, 0, 1, 1] over [0, 4], 2 levels. i=4: groups [0, 1], [2, 3]: Q = [999998, 0, 1, 1] = P,
// KL = 0, so T = 4, the full range. Smoothed after dividing by the total (1e6), P's 1e-6 entries
// lost 1e-4 x 1/3 and went negative, KL was NaN and i=3 and i=4 were skipped: T = 2 clipped the
// tail (the bug that cut mobilenet_v3_large's tensors to 0.5-0.7 of their range: cosine against
// float 0.405 with --method entropy, 0.957 after).
TEST(Calibration, EntropySmoothsCountsSoASparseTailIsKept) {
  EXPECT_FLOAT_EQ(entropy_threshold({999998, 0, 1, 1}, 4.0f, 2), 4.0f);
}

// Q's groups are floor or ceil(i / levels) bins: [100, 50, 50, 10, 10, 1, 1] over [0, 7], 4
// levels. i=7: groups [0], [1, 2], [3, 4], [5, 6] give Q = P, KL = 0: T = 7. With the remainder
// lumped into the last group ([0], [1], [2], [3..6]), i=7 had Q = [100, 50, 50, 5.5 x 4],
// KL = (20 ln(10/5.5) + 2 ln(1/5.5)) / 222 = 0.0385, more than i=5's (P = [100, 50, 50, 10, 12],
// Q = [100, 50, 50, 10, 10], KL = 12 ln(1.2) / 222 = 0.0099): T = 5 clipped, and thresholds
// snapped to multiples of the levels.
TEST(Calibration, EntropyGroupsBinsEvenly) {
  EXPECT_FLOAT_EQ(entropy_threshold({100, 50, 50, 10, 10, 1, 1}, 7.0f, 4), 7.0f);
}

// SiLU of a standard normal (100000 quantiles, y = x sigmoid(x)): the negative values are dense
// in [-0.28, 0], the positive ones a Gaussian tail up to 4.4. Each sign on its own, T keeps
// nearly all of the range (0.93-1.0 of max |y| as the count grows, percentile 99.99: 0.83); folded
// into one |x| histogram the dense negatives pulled T down to 0.75 of max, the clipping that cut
// efficientnet_b0's SiLU outputs (cosine against float 0.950 -> 0.973).
TEST(Calibration, EntropyThresholdsEachSignApart) {
  constexpr int kValues = 100000;
  std::vector<float> y(kValues);
  for (int k = 0; k < kValues; ++k) {
    const double p = (k + 0.5) / kValues;
    double lo = -10, hi = 10;  // inverse normal CDF by bisection
    for (int it = 0; it < 60; ++it) {
      const double mid = (lo + hi) / 2;
      (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
    }
    const double x = (lo + hi) / 2;
    y[k] = static_cast<float>(x / (1 + std::exp(-x)));
  }
  float max = 0;
  for (float v : y) max = std::max(max, std::fabs(v));
  ir::Graph g = relu_graph();
  g.tensors["x"].shape = g.tensors["y"].shape = {1, kValues};
  std::vector<ref::TensorMap> samples = {{{"x", ir::make_tensor<float>({1, kValues}, y, "x")}}};
  QuantizeOptions o;
  o.method = Calibration::kEntropy;
  const float t = calibrate(g, samples, o).at("x");
  std::vector<std::uint64_t> all(2048, 0);
  for (float v : y)
    ++all[std::min<std::size_t>(2047, static_cast<std::size_t>(std::fabs(v) / max * 2048))];
  const float folded = entropy_threshold(entropy_histogram(all, 128), max, 128);
  std::printf("SiLU: T = %.3f of max, folded |x| histogram %.3f\n", t / max, folded / max);
  EXPECT_GE(t, 0.95f * max);
  EXPECT_LT(folded, 0.8f * max);
  // A side with no values (all positive here) is skipped; nothing at all: the range.
  EXPECT_FLOAT_EQ(signed_entropy_threshold({3, 0}, {0, 0}, 3, 2.0f, 1), 2.0f);
}

// The exact zeros of a Relu output do not take part in the entropy search. x is a symmetric
// triangular distribution (density falling linearly to 0 at |x| = max), y = Relu(x) holds it
// plus as many exact zeros. KL over |x| keeps the whole range (no outliers to cut); with the zero
// spike left in bin 0, y's threshold fell to 0.864 of it (the bug that made --method entropy
// lose to min-max on every CNN: googlenet 0.739 vs 0.964 cosine against float).
TEST(Calibration, EntropyIgnoresTheExactZerosOfARelu) {
  constexpr int kHalf = 4096;
  std::vector<float> x(2 * kHalf);
  for (int k = 0; k < kHalf; ++k) {
    float t = 1.0f - std::sqrt((k + 0.5f) / kHalf);
    x[k] = t;
    x[kHalf + k] = -t;
  }
  ir::Graph g = relu_graph();
  g.tensors["x"].shape = g.tensors["y"].shape = {1, 2 * kHalf};
  std::vector<ref::TensorMap> samples = {{{"x", ir::make_tensor<float>({1, 2 * kHalf}, x, "x")}}};
  QuantizeOptions o;
  o.method = Calibration::kEntropy;
  auto t = calibrate(g, samples, o);
  const float max = x[0];
  EXPECT_FLOAT_EQ(t.at("x"), max);
  EXPECT_FLOAT_EQ(t.at("y"), max);
}

// Entropy searches a histogram with enough values per bin: pairs of bins are merged while there
// are fewer than 16 values per bin (and more than 2 x 128 bins).
TEST(Calibration, EntropyHistogramMergesSparseBins) {
  // 8 values in 8 bins, 2 levels: 8 < 16 x 8 -> 4 bins; 8 < 16 x 4 -> 2 bins = the levels, stop.
  EXPECT_EQ(entropy_histogram({1, 1, 1, 1, 1, 1, 1, 1}, 2), (std::vector<std::uint64_t>{4, 4}));
  // 400 values in 4 bins: 100 per bin, kept.
  EXPECT_EQ(entropy_histogram({100, 100, 100, 100}, 2),
            (std::vector<std::uint64_t>{100, 100, 100, 100}));
  // 2048 bins with 4096 values -> 256 bins (16 per bin).
  std::vector<std::uint64_t> many(2048, 2);
  EXPECT_EQ(entropy_histogram(many, 128).size(), 256u);
}

// A sparse heavy-tailed tensor: 4000 log-normal values (sigma 0.5; a fixed pseudo-random draw)
// over 2048 bins, about 2 per bin. On the raw histogram the KL minimum clipped it at 0.74 of its
// range (with smoothing after normalization, below); merged to 256 bins (16 per bin) nothing is
// clipped. mobilenet_v3_small's squeeze-excitation tensors ([1, C, 1, 1] over 16
// calibration images) were like it: its cosine against float with --method entropy went from
// 0.32 to 0.92.
TEST(Calibration, EntropyDoesNotClipASparseTensor) {
  constexpr int kValues = 4000;
  std::vector<float> x(kValues);
  std::uint64_t state = 12345;
  auto uniform = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (static_cast<double>(state >> 11) + 0.5) / 9007199254740992.0;
  };
  for (int k = 0; k < kValues; ++k) {
    const double z = std::sqrt(-2 * std::log(uniform())) * std::cos(6.283185307179586 * uniform());
    x[k] = static_cast<float>(std::exp(0.5 * z));
  }
  const float max = *std::max_element(x.begin(), x.end());
  ir::Graph g = relu_graph();
  g.tensors["x"].shape = g.tensors["y"].shape = {1, kValues};
  std::vector<ref::TensorMap> samples = {{{"x", ir::make_tensor<float>({1, kValues}, x, "x")}}};
  QuantizeOptions o;
  o.method = Calibration::kEntropy;
  const auto t = calibrate(g, samples, o);
  EXPECT_FLOAT_EQ(t.at("y"), max);
  // The unmerged search keeps it too since smoothing works on counts: its clipping (at 0.74 of
  // max before) came from the NaN candidates (EntropySmoothsCountsSoASparseTailIsKept) rather
  // than from sampling noise alone.
  std::vector<std::uint64_t> bins(2048, 0);
  for (float v : x) ++bins[std::min<std::size_t>(2047, static_cast<std::size_t>(v / max * 2048))];
  const float unmerged = entropy_threshold(bins, max, 128);
  std::printf("unmerged T = %.3f of max\n", unmerged / max);
  EXPECT_GE(unmerged, 0.95f * max);
}

// ---- batch-norm folding --------------------------------------------------------------------

// Weights are w / scale rounded half to even (scale = max |w| / 127), clamped to +-127: here
// scale is 1, so the ties 0.5, 1.5, 2.5, -2.5 go to 0, 2, 2, -2, and 126.5 to 126.
TEST(WeightQuantization, RoundsHalfToEven) {
  ir::Graph g;
  g.name = "ties";
  g.opset = 13;
  g.opsets[""] = 13;
  g.tensors["x"] = ir::Tensor{"x", ir::DType::kFloat32, {1, 1, 3, 3}, {}};
  g.tensors["w"] = ir::make_tensor<float>(
      {1, 1, 3, 3}, {0.5f, 1.5f, 2.5f, -2.5f, 126.5f, -127.0f, 0.49999997f, -0.5f, 3.5f}, "w");
  g.tensors["y"] = ir::Tensor{"y", ir::DType::kFloat32, {1, 1, 1, 1}, {}};
  g.inputs = {"x"};
  g.outputs = {"y"};
  g.nodes = {ir::Node{"conv", "Conv", "", {"x", "w"}, {"y"}, {}}};
  const ir::Graph q = quantize_with_thresholds(g, {{"x", 1.0f}, {"y", 1.0f}});
  const ir::Node& conv = q.nodes.at(1);
  ASSERT_EQ(conv.op_type, "QLinearConv");
  EXPECT_FLOAT_EQ(q.tensor(conv.inputs[4]).as<float>()[0], 1.0f);
  EXPECT_EQ(ir::to_vector<std::int8_t>(q.tensor(conv.inputs[3])),
            (std::vector<std::int8_t>{0, 2, 2, -2, 126, -127, 0, 0, 4}));
}

// torch writes Identity(initializer) for equal parameters; the Conv behind it must still be
// quantized (resnet18 had 16 of 20 convs left in float before this fold).
TEST(ConstantIdentities, ConvBehindIdentityIsQuantized) {
  ir::Graph g;
  g.name = "identity_bias";
  g.opset = 13;
  g.opsets[""] = 13;
  g.tensors["x"] = ir::Tensor{"x", ir::DType::kFloat32, {1, 1, 4, 4}, {}};
  g.tensors["w"] = ir::make_tensor<float>({1, 1, 3, 3}, std::vector<float>(9, 0.5f), "w");
  g.tensors["b"] = ir::make_tensor<float>({1}, {0.25f}, "b");
  g.tensors["y"] = ir::Tensor{"y", ir::DType::kFloat32, {1, 1, 2, 2}, {}};
  g.inputs = {"x"};
  g.outputs = {"y"};
  ir::Node id;
  id.name = "copy_b";
  id.op_type = "Identity";
  id.inputs = {"b"};
  id.outputs = {"b2"};
  ir::Node conv;
  conv.name = "conv";
  conv.op_type = "Conv";
  conv.inputs = {"x", "w", "b2"};
  conv.outputs = {"y"};
  g.nodes = {id, conv};

  ir::Graph folded = fold_constant_identities(g);
  ASSERT_EQ(folded.nodes.size(), 1u);
  ASSERT_NE(folded.find("b2"), nullptr);
  EXPECT_EQ(ir::to_vector<float>(folded.tensor("b2")), std::vector<float>{0.25f});

  std::vector<float> xs(16);
  for (int i = 0; i < 16; ++i) xs[i] = static_cast<float>(i % 5) - 2.0f;
  QuantizeOptions options;
  QuantizeSummary summary;
  ir::Graph q =
      quantize(g, {{{"x", ir::make_tensor<float>({1, 1, 4, 4}, xs, "x")}}}, options, &summary);
  EXPECT_TRUE(std::any_of(q.nodes.begin(), q.nodes.end(),
                          [](const ir::Node& n) { return n.op_type == "QLinearConv"; }));
}

TEST(BatchNormFolding, FoldedEqualsUnfusedAndTorch) {
  ir::Graph g = onnxio::load_onnx(kFixtures + "/models/batchnorm.onnx");
  int bn_before = 0;
  for (const auto& n : g.nodes) bn_before += n.op_type == "BatchNormalization";
  ASSERT_EQ(bn_before, 2);
  ir::Graph folded = fold_batch_norm(g);
  for (const auto& n : folded.nodes) EXPECT_NE(n.op_type, "BatchNormalization");
  EXPECT_EQ(folded.nodes.size(), g.nodes.size() - 2);
  for (int k = 0; k < 3; ++k) {
    std::string base = kFixtures + "/models/batchnorm.";
    auto in = one_input(g, base + "input_" + std::to_string(k) + ".npy");
    std::vector<float> unfused = run_float(g, in);
    std::vector<float> fused = run_float(folded, in);
    std::vector<float> torch = ir::to_float_vector(
        onnxio::load_tensor_file(base + "output_" + std::to_string(k) + ".npy"));
    ASSERT_EQ(fused.size(), unfused.size());
    ASSERT_EQ(fused.size(), torch.size());
    for (std::size_t i = 0; i < fused.size(); ++i) {
      EXPECT_NEAR(fused[i], unfused[i], 1e-4f * (1 + std::fabs(unfused[i]))) << i;
      EXPECT_NEAR(fused[i], torch[i], 1e-4f * (1 + std::fabs(torch[i]))) << i;
    }
  }
  // The folded graph is still a valid ONNX model.
  EXPECT_NO_THROW(onnxio::load_onnx_bytes(onnxio::save_onnx_bytes(folded), "folded"));
}

// ---- the digits model ------------------------------------------------------------------------

struct Accuracy {
  double float_top1;
  double int8_top1;
};

Accuracy digits_accuracy(Calibration method) {
  ir::Graph g = onnxio::load_onnx(kFixtures + "/digits/lenet_digits.onnx");
  auto samples = load_calibration_data(kFixtures + "/digits/calib.npy", g);
  EXPECT_EQ(samples.size(), 128u);
  QuantizeOptions o;
  o.method = method;
  ir::Graph q = quantize(g, samples, o);
  // Through a file, as users get it: the saved model must pass the ONNX checker and reload.
  q = onnxio::load_onnx_bytes(onnxio::save_onnx_bytes(q), "digits.int8.onnx");
  ir::Tensor x = onnxio::load_tensor_file(kFixtures + "/digits/X_test.npy");
  std::vector<std::int64_t> y =
      ir::to_vector<std::int64_t>(onnxio::load_tensor_file(kFixtures + "/digits/y_test.npy"));
  const std::size_t n = y.size();
  const std::size_t image = 64;
  int float_ok = 0, int8_ok = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ir::Tensor img = ir::make_tensor(ir::DType::kFloat32, {1, 1, 8, 8}, "image");
    std::memcpy(img.data.data(), x.data.data() + i * image * 4, image * 4);
    ref::TensorMap in{{"image", img}};
    auto argmax = [](const std::vector<float>& v) {
      return std::max_element(v.begin(), v.end()) - v.begin();
    };
    float_ok += argmax(run_float(g, in)) == y[i];
    int8_ok += argmax(run_float(q, in)) == y[i];
  }
  return {100.0 * float_ok / n, 100.0 * int8_ok / n};
}

TEST(QuantizeDigits, Int8AccuracyWithinOnePointOfFloat) {
  for (Calibration m : {Calibration::kMinMax, Calibration::kPercentile, Calibration::kEntropy}) {
    Accuracy a = digits_accuracy(m);
    EXPECT_NEAR(a.float_top1, 97.22, 0.01) << "float accuracy differs from torch's";
    EXPECT_GE(a.int8_top1, a.float_top1 - 1.0) << calibration_name(m);
    std::printf("digits %-10s float %.2f%%  int8 %.2f%%\n", calibration_name(m), a.float_top1,
                a.int8_top1);
  }
}

TEST(QuantizeDigits, WritesTheNativeQOperatorScheme) {
  ir::Graph g = onnxio::load_onnx(kFixtures + "/digits/lenet_digits.onnx");
  auto samples = load_calibration_data(kFixtures + "/digits/calib.npy", g);
  QuantizeSummary summary;
  ir::Graph q = quantize(g, samples, QuantizeOptions{}, &summary);
  EXPECT_TRUE(summary.float_nodes.empty());
  std::vector<std::string> ops;
  for (const auto& n : q.nodes) ops.push_back(n.op_type);
  EXPECT_EQ(ops, (std::vector<std::string>{"QuantizeLinear", "QLinearConv", "Relu", "MaxPool",
                                           "QLinearConv", "Relu", "MaxPool", "Flatten", "QGemm",
                                           "Relu", "QGemm", "DequantizeLinear"}));
  for (const auto& n : q.nodes) {
    if (n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear") {
      EXPECT_EQ(q.tensor(n.inputs[2]).dtype, ir::DType::kInt8);
      EXPECT_EQ(q.tensor(n.inputs[2]).as<std::int8_t>()[0], 0);  // symmetric: zero point 0
    }
    if (n.op_type == "QLinearConv" || n.op_type == "QGemm") {
      const ir::Tensor& w = q.tensor(n.inputs[3]);
      EXPECT_EQ(w.dtype, ir::DType::kInt8);
      EXPECT_TRUE(q.tensor(n.inputs[4]).shape.empty()) << "per-tensor weight scale";
      EXPECT_EQ(q.tensor(n.inputs[5]).as<std::int8_t>()[0], 0);
      const ir::Tensor& b = q.tensor(n.op_type == "QLinearConv" ? n.inputs[8] : n.inputs[6]);
      EXPECT_EQ(b.dtype, ir::DType::kInt32);
      // Weights use the full symmetric range [-127, 127].
      auto v = ir::to_vector<std::int8_t>(w);
      int max_abs = 0;
      for (auto x : v) max_abs = std::max(max_abs, std::abs(int{x}));
      EXPECT_EQ(max_abs, 127);
    }
  }
  EXPECT_EQ(q.opsets.at("com.microsoft"), 1);
  EXPECT_GE(q.opset, 14);
}

// ---- every bundled test model -----------------------------------------------------------------

TEST(QuantizeModels, EveryTestModelQuantizesAndStaysCloseToFloat) {
  for (const auto& entry : std::filesystem::directory_iterator(kFixtures + "/models")) {
    if (entry.path().extension() != ".onnx") continue;
    std::string stem = entry.path().stem().string();
    std::string base = kFixtures + "/models/" + stem;
    ir::Graph g = onnxio::load_onnx(entry.path().string());
    std::vector<ref::TensorMap> samples;
    for (int k = 0; k < 3; ++k)
      samples.push_back(one_input(g, base + ".input_" + std::to_string(k) + ".npy"));
    QuantizeSummary summary;
    ir::Graph q = quantize(g, samples, QuantizeOptions{}, &summary);
    for (const auto& why : summary.float_nodes) EXPECT_THAT(why, HasSubstr("Resize")) << stem;
    EXPECT_TRUE(summary.float_nodes.empty() || stem == "upsample" || stem == "yolo_like")
        << stem << ": " << ::testing::PrintToString(summary.float_nodes);
    q = onnxio::load_onnx_bytes(onnxio::save_onnx_bytes(q), stem + ".int8.onnx");
    for (int k = 0; k < 3; ++k) {
      std::vector<float> want = ir::to_float_vector(
          onnxio::load_tensor_file(base + ".output_" + std::to_string(k) + ".npy"));
      std::vector<float> got = run_float(q, samples[k]);
      ASSERT_EQ(got.size(), want.size()) << stem;
      float peak = 0, err = 0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        peak = std::max(peak, std::fabs(want[i]));
        err = std::max(err, std::fabs(got[i] - want[i]));
      }
      // Several int8 layers deep, each adding up to half a step of error: allow 8% of the
      // output's peak. A wrong scale or layout would be off by far more.
      EXPECT_LE(err, 0.08f * peak) << stem << " sample " << k;
    }
  }
}

// The "kept in float" line says what each Resize is: a nearest one keeps its input's scale
// (exact), a linear one interpolates at its own output scale (it was called "nearest" too).
TEST(QuantizeModels, KeptInFloatNamesTheResizeMode) {
  for (const std::string mode : {"nearest", "linear"}) {
    ir::Graph g = relu_graph();
    g.tensors["x"].shape = g.tensors["y"].shape = {1, 1, 2, 2};
    g.nodes[0].outputs = {"r"};
    g.tensors["r"] = ir::Tensor{"r", ir::DType::kFloat32, {1, 1, 2, 2}, {}};
    g.tensors["u"] = ir::Tensor{"u", ir::DType::kFloat32, {1, 1, 4, 4}, {}};
    g.tensors["y"].shape = {1, 1, 4, 4};
    g.tensors["scales"] = ir::make_tensor<float>({4}, {1, 1, 2, 2}, "scales");
    ir::Node up{"up", "Resize", "", {"r", "", "scales"}, {"u"}, {}};
    up.attributes["mode"] = mode;
    g.nodes.push_back(up);
    g.nodes.push_back(ir::Node{"relu2", "Relu", "", {"u"}, {"y"}, {}});
    std::vector<ref::TensorMap> samples;
    for (const auto& s : relu_samples())
      samples.push_back(
          {{"x", ir::make_tensor<float>({1, 1, 2, 2}, ir::to_float_vector(s.at("x")), "x")}});
    QuantizeSummary summary;
    quantize(g, samples, QuantizeOptions{}, &summary);
    ASSERT_EQ(summary.float_nodes.size(), 1u) << mode;
    const std::string& why = summary.float_nodes[0];
    EXPECT_THAT(why, HasSubstr("up (Resize): " + mode + " Resize"));
    if (mode == "nearest") {
      EXPECT_THAT(why, HasSubstr("at one scale (exact)"));
    } else {
      EXPECT_THAT(why, Not(HasSubstr("nearest Resize")));
      EXPECT_THAT(why, HasSubstr("interpolates in float"));
      EXPECT_THAT(why, HasSubstr("at its own output scale"));
    }
  }
}

TEST(QuantizeModels, OpsWithoutAnInt8FormStayFloatBetweenDequantizeAndQuantize) {
  // x -> Relu -> Softmax -> Relu -> y: Softmax has no native int8 form.
  ir::Graph g = relu_graph();
  g.nodes[0].outputs = {"r"};
  g.tensors["r"] = ir::Tensor{"r", ir::DType::kFloat32, {1, 4}, {}};
  g.tensors["s"] = ir::Tensor{"s", ir::DType::kFloat32, {1, 4}, {}};
  g.nodes.push_back(ir::Node{"softmax", "Softmax", "", {"r"}, {"s"}, {}});
  g.nodes.push_back(ir::Node{"relu2", "Relu", "", {"s"}, {"y"}, {}});
  QuantizeSummary summary;
  ir::Graph q = quantize(g, relu_samples(), QuantizeOptions{}, &summary);
  std::vector<std::string> ops;
  for (const auto& n : q.nodes) ops.push_back(n.op_type);
  EXPECT_EQ(ops, (std::vector<std::string>{"QuantizeLinear", "Relu", "DequantizeLinear", "Softmax",
                                           "QuantizeLinear", "Relu", "DequantizeLinear"}));
  ASSERT_EQ(summary.float_nodes.size(), 1u);
  EXPECT_THAT(summary.float_nodes[0], HasSubstr("softmax (Softmax)"));
  EXPECT_EQ(q.nodes[3].inputs, std::vector<std::string>{"r"});  // the float value keeps its name
  std::vector<float> want = run_float(g, relu_samples()[0]);
  std::vector<float> got = run_float(q, relu_samples()[0]);
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 0.01f);
  EXPECT_NO_THROW(onnxio::load_onnx_bytes(onnxio::save_onnx_bytes(q), "mixed"));
}

// HardSwish, HardSigmoid and Sub/Div by a constant are int8 in QDQ form: each reads the
// DequantizeLinear of an int8 value and feeds a QuantizeLinear (a chain gets Q/DQ between its
// ops), none is "kept in float", and a HardSwish input's scale is 3 / K (K <= 63 steps per 3,
// the compiler's exact gate).
TEST(QuantizeModels, PointwiseOpsAreInt8InQdqForm) {
  // x -> Relu -> HardSwish -> Div 2 -> Sub 0.5 -> HardSigmoid -> y
  ir::Graph g = relu_graph();
  g.nodes[0].outputs = {"r"};
  for (const char* v : {"r", "h", "d", "s"})
    g.tensors[v] = ir::Tensor{v, ir::DType::kFloat32, {1, 4}, {}};
  g.tensors["two"] = ir::make_scalar<float>(2.0f, "two");
  g.tensors["half"] = ir::make_scalar<float>(0.5f, "half");
  g.nodes.push_back(ir::Node{"hs", "HardSwish", "", {"r"}, {"h"}, {}});
  g.nodes.push_back(ir::Node{"div", "Div", "", {"h", "two"}, {"d"}, {}});
  g.nodes.push_back(ir::Node{"sub", "Sub", "", {"d", "half"}, {"s"}, {}});
  g.nodes.push_back(ir::Node{"hsig", "HardSigmoid", "", {"s"}, {"y"}, {}});
  QuantizeSummary summary;
  ir::Graph q = quantize(g, relu_samples(), QuantizeOptions{}, &summary);
  EXPECT_TRUE(summary.float_nodes.empty());
  EXPECT_EQ(summary.quantized_ops["HardSwish (QDQ)"], 1);
  EXPECT_EQ(summary.quantized_ops["Div (QDQ)"], 1);
  EXPECT_EQ(summary.quantized_ops["Sub (QDQ)"], 1);
  EXPECT_EQ(summary.quantized_ops["HardSigmoid (QDQ)"], 1);
  std::vector<std::string> ops;
  for (const auto& n : q.nodes) ops.push_back(n.op_type);
  EXPECT_EQ(ops, (std::vector<std::string>{"QuantizeLinear", "Relu", "DequantizeLinear",
                                           "HardSwish", "QuantizeLinear", "DequantizeLinear", "Div",
                                           "QuantizeLinear", "DequantizeLinear", "Sub",
                                           "QuantizeLinear", "DequantizeLinear", "HardSigmoid"}));
  // The HardSwish input (the Relu's group, max 2.5): 381 / 2.5 = 152 steps per 3 do not fit,
  // so it keeps T / 127.
  EXPECT_FLOAT_EQ(q.tensor("r_scale").as<float>()[0], 2.5f / 127);
  // With range 6.5: K = floor(381 / 6.5) = 58, scale 3 / 58.
  auto big = relu_samples();
  big[0]["x"].as_mutable<float>()[3] = 6.5f;
  ir::Graph q2 = quantize(g, big, QuantizeOptions{}, nullptr);
  EXPECT_FLOAT_EQ(q2.tensor("r_scale").as<float>()[0], 3.0f / 58);
  std::vector<float> want = run_float(g, relu_samples()[1]);
  std::vector<float> got = run_float(q, relu_samples()[1]);
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 0.02f);
}

// googlenet's classifier: a bias that does not fit int32 at input scale x weight scale keeps that
// one layer float on the host (with a warning); the layers around it are still quantized.
TEST(QuantizeModels, LayerWhoseBiasDoesNotFitInt32StaysFloatWithAWarning) {
  // x -> conv1 (bias 0.25) -> h -> conv2 (bias 1.0) -> y, 1x1 kernels, 2 pixels.
  ir::Graph g;
  g.name = "big_bias";
  g.opset = 13;
  g.opsets[""] = 13;
  g.tensors["x"] = ir::Tensor{"x", ir::DType::kFloat32, {1, 1, 1, 2}, {}};
  g.tensors["h"] = ir::Tensor{"h", ir::DType::kFloat32, {1, 1, 1, 2}, {}};
  g.tensors["y"] = ir::Tensor{"y", ir::DType::kFloat32, {1, 1, 1, 2}, {}};
  g.tensors["w1"] = ir::make_tensor<float>({1, 1, 1, 1}, {1e-6f}, "w1");
  g.tensors["b1"] = ir::make_tensor<float>({1}, {0.0f}, "b1");
  g.tensors["w2"] = ir::make_tensor<float>({1, 1, 1, 1}, {1.0f}, "w2");
  g.tensors["b2"] = ir::make_tensor<float>({1}, {1.0f}, "b2");
  g.inputs = {"x"};
  g.outputs = {"y"};
  g.nodes.push_back(ir::Node{"conv1", "Conv", "", {"x", "w1", "b1"}, {"h"}, {}});
  g.nodes.push_back(ir::Node{"conv2", "Conv", "", {"h", "w2", "b2"}, {"y"}, {}});
  // h = 1e-6 x: its scale (1e-6 / 127) times conv2's weight scale (1 / 127) puts the bias 1.0 at
  // 1.6e10, beyond int32.
  std::vector<ref::TensorMap> samples = {
      {{"x", ir::make_tensor<float>({1, 1, 1, 2}, {1.0f, -0.5f}, "x")}}};
  QuantizeSummary summary;
  ir::Graph q = quantize(g, samples, QuantizeOptions{}, &summary);
  std::vector<std::string> ops;
  for (const auto& n : q.nodes) ops.push_back(n.op_type);
  EXPECT_EQ(
      ops, (std::vector<std::string>{"QuantizeLinear", "QLinearConv", "DequantizeLinear", "Conv"}));
  ASSERT_EQ(summary.warnings.size(), 1u);
  EXPECT_THAT(summary.warnings[0], HasSubstr("conv2 (Conv): bias 'b2' value 1 does not fit int32"));
  EXPECT_THAT(summary.warnings[0], HasSubstr("stays float"));
  ASSERT_EQ(summary.float_nodes.size(), 1u);
  EXPECT_EQ(summary.quantized_ops.at("QLinearConv"), 1);
  std::vector<float> want = run_float(g, samples[0]);
  std::vector<float> got = run_float(q, samples[0]);
  ASSERT_EQ(got.size(), 2u);
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6f);
  EXPECT_NO_THROW(onnxio::load_onnx_bytes(onnxio::save_onnx_bytes(q), "big_bias"));
}

// torch's chunk (shufflenet): Slice ends computed from Shape at run time leave the Slice output
// without a static type, and every conv behind it stayed float. Calibration sees the values, so
// their type and shape are filled in and the conv is quantized.
TEST(QuantizeModels, SliceWithRunTimeEndsGetsItsTypeFromCalibration) {
  // x [1,1,2,4] -> Shape -> Gather([3]) -> Div(2) -> ends; y = Slice(x, [0], ends, [3]);
  // z = Conv1x1(y). y and z have no static type (as ONNX shape inference leaves them).
  ir::Graph g;
  g.name = "chunk";
  g.opset = 13;
  g.opsets[""] = 13;
  g.tensors["x"] = ir::Tensor{"x", ir::DType::kFloat32, {1, 1, 2, 4}, {}};
  g.tensors["idx"] = ir::make_tensor<std::int64_t>({1}, {3}, "idx");
  g.tensors["two"] = ir::make_tensor<std::int64_t>({1}, {2}, "two");
  g.tensors["zero"] = ir::make_tensor<std::int64_t>({1}, {0}, "zero");
  g.tensors["w"] = ir::make_tensor<float>({1, 1, 1, 1}, {0.5f}, "w");
  g.inputs = {"x"};
  g.outputs = {"z"};
  g.nodes.push_back(ir::Node{"shape", "Shape", "", {"x"}, {"s"}, {}});
  g.nodes.push_back(ir::Node{"gather", "Gather", "", {"s", "idx"}, {"width"}, {}});
  g.nodes.push_back(ir::Node{"div", "Div", "", {"width", "two"}, {"half"}, {}});
  g.nodes.push_back(ir::Node{"slice", "Slice", "", {"x", "zero", "half", "idx"}, {"y"}, {}});
  g.nodes.push_back(ir::Node{"conv", "Conv", "", {"y", "w"}, {"z"}, {}});
  std::vector<ref::TensorMap> samples = {
      {{"x", ir::make_tensor<float>({1, 1, 2, 4}, {1, -2, 3, -4, 0.5f, 0.25f, 8, 9}, "x")}}};
  QuantizeSummary summary;
  ir::Graph q = quantize(g, samples, QuantizeOptions{}, &summary);
  EXPECT_EQ(summary.quantized_ops["QLinearConv"], 1);
  EXPECT_THAT(summary.inferred_types, ::testing::Contains("y"));
  ASSERT_NE(q.find("y_quantized"), nullptr);
  EXPECT_EQ(q.tensor("y_quantized").shape, (ir::Shape{1, 1, 2, 2}));
  EXPECT_EQ(q.tensor("z").shape, (ir::Shape{1, 1, 2, 2}));
  // The Slice with run-time ends stays float at one scale (exact); the conv reads int8.
  std::vector<float> want = run_float(g, samples[0]);
  std::vector<float> got = run_float(q, samples[0]);
  ASSERT_EQ(got.size(), 4u);
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 0.02f);
  EXPECT_NO_THROW(onnxio::load_onnx_bytes(onnxio::save_onnx_bytes(q), "chunk"));
}

// x -> LeakyRelu(0.1) -> y with x in [-10, 12.7]: min-max gives y the range of x (12.7, the
// positive side), s_y = s_x, and onnxruntime's table for that has 13 exact ties (x = -5, -15, ...:
// -0.5, -1.5, ...) it rounds by float32 noise. The quantizer moves s_y 2^-10 up: no tie left, and
// the scale still covers the range.
TEST(QuantizeModels, LeakyReluOutputScaleAvoidsExactTies) {
  ir::Graph g;
  g.name = "leaky";
  g.opset = 13;
  g.opsets[""] = 13;
  g.tensors["x"] = ir::Tensor{"x", ir::DType::kFloat32, {1, 1, 2, 2}, {}};
  g.tensors["y"] = ir::Tensor{"y", ir::DType::kFloat32, {1, 1, 2, 2}, {}};
  g.inputs = {"x"};
  g.outputs = {"y"};
  ir::Node n{"leaky", "LeakyRelu", "", {"x"}, {"y"}, {}};
  n.attributes["alpha"] = 0.1f;
  g.nodes = {n};
  QuantizeOptions options;
  const ir::Graph q = quantize(
      g, {{{"x", ir::make_tensor<float>({1, 1, 2, 2}, {-10.0f, 12.7f, 3.0f, -1.0f}, "x")}}},
      options, nullptr);
  const auto leaky = std::find_if(q.nodes.begin(), q.nodes.end(), [](const ir::Node& m) {
    return m.op_type == "QLinearLeakyRelu";
  });
  ASSERT_NE(leaky, q.nodes.end());
  const float sx = ir::to_float_vector(q.tensor(leaky->inputs[1]))[0];
  const float sy = ir::to_float_vector(q.tensor(leaky->inputs[3]))[0];
  EXPECT_FLOAT_EQ(sx, 12.7f / 127);
  EXPECT_FLOAT_EQ(sy, sx * (1.0f + 1.0f / 1024));
  // No int8 input lands on a tie of round(alpha x s_x / s_y) any more (nor of x s_x / s_y).
  for (int x = -128; x < 128; ++x) {
    const double v = (x < 0 ? 0.1 : 1.0) * x * static_cast<double>(sx) / sy;
    EXPECT_GT(std::fabs(v - std::floor(v) - 0.5), 1e-4) << x;
  }
}

TEST(QuantizeErrors, ClearMessages) {
  EXPECT_THAT(
      [] {
        try {
          parse_calibration("kl");
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr("minmax, percentile or entropy"));
  std::vector<ref::TensorMap> nan_sample = {
      {{"x", ir::make_tensor<float>({1, 4}, {1.0f, NAN, 0.0f, 2.0f}, "x")}}};
  try {
    calibrate(relu_graph(), nan_sample, {});
    ADD_FAILURE() << "NaN accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'x' (graph input) holds a non-finite value"));
  }
  ir::Graph g = onnxio::load_onnx(kFixtures + "/digits/lenet_digits.onnx");
  EXPECT_THROW(load_calibration_data(kFixtures + "/digits/y_test.npy", g), Error);
  EXPECT_THROW(load_calibration_data(kFixtures + "/models", g), Error);  // no .npy fits? -> shape
  ir::Graph q = quantize(g, load_calibration_data(kFixtures + "/digits/calib.npy", g), {});
  EXPECT_THROW(quantize_with_thresholds(q, {}), Error);  // already quantized
}

}  // namespace
}  // namespace npukit::quant
