#include "quant/quantize.h"

#include "common/error.h"
#include "common/parallel.h"
#include "ir/tensor_util.h"
#include "onnx/onnx_io.h"
#include "ref/float_conv.h"

#include <algorithm>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <thread>

namespace npukit::quant {

namespace {

using ir::DType;
using ir::Graph;
using ir::Node;
using ir::Tensor;

constexpr float kInt8Max = 127.0f;

// True when an int8 input of LeakyRelu(alpha) from scale sx to scale sy lands within 1e-4 of a
// rounding tie (s_x = s_y, alpha 0.1: x = -15 gives exactly -1.5). onnxruntime's QLinearLeakyRelu
// rounds such a value by the noise of its float32 steps, a pattern no fixed-point form reproduces
// (docs/compiler.md, "LeakyReLU").
bool leaky_relu_has_ties(float sx, float sy, float alpha) {
  const double r = static_cast<double>(sx) / static_cast<double>(sy);
  for (int q = -128; q < 128; ++q) {
    const double v = (q < 0 ? static_cast<double>(alpha) : 1.0) * q * r;
    if (std::fabs(v - std::floor(v) - 0.5) < 1e-4) return true;
  }
  return false;
}

// Round half to even, as ONNX QuantizeLinear does.
double round_even(double v) { return std::nearbyint(v); }

bool is_float_activation(const Graph& g, const std::string& name) {
  const Tensor* t = g.find(name);
  return t && t->dtype == DType::kFloat32 && !t->is_constant();
}

const Tensor* constant(const Graph& g, const std::string& name) {
  const Tensor* t = name.empty() ? nullptr : g.find(name);
  return t && t->is_constant() ? t : nullptr;
}

// Ops whose int8 form needs the same scale on input and output (value-preserving or monotone
// per element): the scale is shared through a union-find over tensor names.
bool is_passthrough(const Node& n) {
  static const std::set<std::string> ops = {"Relu",      "Clip",      "MaxPool",  "Flatten",
                                            "Reshape",   "Transpose", "Identity", "Squeeze",
                                            "Unsqueeze", "Resize",    "Slice"};
  if (!n.domain.empty() || !ops.count(n.op_type)) return false;
  if (n.op_type == "MaxPool" && n.outputs.size() > 1 && !n.outputs[1].empty()) return false;
  if (n.op_type == "Resize" && n.get_string("mode", "nearest") != "nearest") return false;
  return true;
}

bool is_activation_fn(const Node& n) { return n.op_type == "Relu" || n.op_type == "Clip"; }

// The float values read only by one Relu or Clip (and not graph outputs), each mapped to that
// activation's output. The quantizer gives such a value its activation's output scale (an int8
// Relu/Clip keeps its input's scale, and the layer before writes the clipped range), so its own
// range is never used and calibration does not measure it.
std::map<std::string, std::string> pre_activation_values(const Graph& g) {
  std::map<std::string, std::string> pre;
  for (const auto& n : g.nodes) {
    if (!is_passthrough(n) || !is_activation_fn(n) || !is_float_activation(g, n.inputs[0]) ||
        !is_float_activation(g, n.outputs[0]))
      continue;
    if (g.consumers(n.inputs[0]).size() == 1 &&
        std::find(g.outputs.begin(), g.outputs.end(), n.inputs[0]) == g.outputs.end())
      pre[n.inputs[0]] = n.outputs[0];
  }
  return pre;
}

}  // namespace

Calibration parse_calibration(const std::string& name) {
  if (name == "minmax") return Calibration::kMinMax;
  if (name == "percentile") return Calibration::kPercentile;
  if (name == "entropy") return Calibration::kEntropy;
  fail("unknown calibration method '{}' (choose minmax, percentile or entropy)", name);
}

const char* calibration_name(Calibration method) {
  switch (method) {
    case Calibration::kMinMax:
      return "minmax";
    case Calibration::kPercentile:
      return "percentile";
    case Calibration::kEntropy:
      return "entropy";
  }
  return "?";
}

// ---- thresholds -------------------------------------------------------------------------------

float percentile_threshold(const std::vector<std::uint64_t>& bins, float range, double percentile) {
  if (!(percentile > 0 && percentile <= 100))
    fail("percentile {} is out of range (0, 100]", percentile);
  std::uint64_t total = std::accumulate(bins.begin(), bins.end(), std::uint64_t{0});
  if (total == 0 || bins.empty()) return 0;
  const double width = static_cast<double>(range) / static_cast<double>(bins.size());
  const double wanted = percentile / 100.0 * static_cast<double>(total);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < bins.size(); ++i) {
    seen += bins[i];
    // Compare in integers where possible so 100% means exactly "all values".
    if (static_cast<double>(seen) >= wanted) return static_cast<float>((i + 1) * width);
  }
  return range;
}

namespace {

// Replaces zeros by a small epsilon (taking the mass from the non-zero entries) so the KL
// divergence stays finite; returns false when the distribution is all zeros. On counts, not on
// probabilities: every non-zero count is at least 1 (Q's averages too) and the mass taken is at
// most kEps x bins < 1, so no entry turns negative. Smoothed after normalizing, a bin holding
// one value of a million (1e-6) went negative as soon as a tenth of the bins were empty, KL was
// NaN, and every candidate that kept a sparse tail was skipped: T was cut to where the tail began
// (mobilenet_v3_large, cosine against float 0.405).
bool smooth(std::vector<double>& p) {
  constexpr double kEps = 1e-4;
  std::size_t zeros = std::count(p.begin(), p.end(), 0.0);
  std::size_t nonzeros = p.size() - zeros;
  if (nonzeros == 0) return false;
  double take = kEps * static_cast<double>(zeros) / static_cast<double>(nonzeros);
  for (auto& v : p) v = v == 0 ? kEps : v - take;
  return true;
}

}  // namespace

float entropy_threshold(const std::vector<std::uint64_t>& bins, float range, int quantized_bins) {
  const std::size_t n = bins.size();
  const std::size_t levels = static_cast<std::size_t>(quantized_bins);
  if (levels == 0) fail("entropy calibration needs at least one quantized level");
  if (n <= levels) return range;  // nothing to clip: every candidate keeps all bins
  const double width = static_cast<double>(range) / static_cast<double>(n);
  double best_kl = std::numeric_limits<double>::infinity();
  std::size_t best_i = n;
  for (std::size_t i = levels; i <= n; ++i) {
    // Reference: the first i bins with everything beyond folded into the last kept bin.
    std::vector<double> p(bins.begin(), bins.begin() + static_cast<std::ptrdiff_t>(i));
    double outliers = 0;
    for (std::size_t k = i; k < n; ++k) outliers += static_cast<double>(bins[k]);
    p[i - 1] += outliers;
    // Candidate: the same i bins merged into `levels` groups of floor or ceil(i / levels) bins
    // (group j holds bins [j i / levels, (j + 1) i / levels)), each group's count spread evenly
    // over its non-empty bins. A last group taking the whole remainder (up to 2x the others)
    // smeared the largest values, so multiples of `levels` won: T snapped to them.
    std::vector<double> q(i, 0.0);
    for (std::size_t j = 0; j < levels; ++j) {
      const std::size_t start = j * i / levels;
      const std::size_t stop = (j + 1) * i / levels;
      double sum = 0;
      std::size_t nonempty = 0;
      for (std::size_t k = start; k < stop; ++k) {
        sum += static_cast<double>(bins[k]);
        nonempty += bins[k] != 0;
      }
      if (nonempty == 0) continue;
      for (std::size_t k = start; k < stop; ++k)
        if (bins[k] != 0) q[k] = sum / static_cast<double>(nonempty);
    }
    // Both over the same total, all values: Q lacks the mass T clips (it sits in P's last bin).
    // Normalizing Q over its own in-range mass hid the clipping: with a distribution far from
    // zero (a squeeze-excitation gate, all values in [0.34, 0.71]) a candidate keeping a single
    // non-empty bin gave Q = P, KL = 0, and T = 0.24 clipped every value (mobilenet_v3 cosine
    // 0.21 against float).
    const double total = std::accumulate(p.begin(), p.end(), 0.0);
    if (!smooth(p) || !smooth(q)) continue;
    for (std::size_t k = 0; k < i; ++k) {
      p[k] /= total;
      q[k] /= total;
    }
    double kl = 0;
    for (std::size_t k = 0; k < i; ++k) kl += p[k] * std::log(p[k] / q[k]);
    if (kl <= best_kl) {  // ties: the larger T, which clips less
      best_kl = kl;
      best_i = i;
    }
  }
  return static_cast<float>(static_cast<double>(best_i) * width);
}

// ---- constant folding
// ----------------------------------------------------------------------------

Graph fold_constant_identities(Graph g) {
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (Node& n : g.nodes) {
    const bool foldable =
        n.op_type == "Identity" && n.domain.empty() && n.inputs.size() == 1 &&
        n.outputs.size() == 1 && constant(g, n.inputs[0]) != nullptr &&
        std::find(g.outputs.begin(), g.outputs.end(), n.outputs[0]) == g.outputs.end();
    if (!foldable) {
      kept.push_back(std::move(n));
      continue;
    }
    Tensor value = *constant(g, n.inputs[0]);
    value.name = n.outputs[0];
    g.tensors[n.outputs[0]] = std::move(value);
  }
  g.nodes = std::move(kept);
  return g;
}

// ---- batch-norm folding -------------------------------------------------------------------------

Graph fold_batch_norm(Graph g) {
  std::vector<bool> removed(g.nodes.size(), false);
  for (std::size_t bi = 0; bi < g.nodes.size(); ++bi) {
    Node& bn = g.nodes[bi];
    if (bn.op_type != "BatchNormalization" || !bn.domain.empty()) continue;
    if (bn.outputs.size() > 1 && !std::all_of(bn.outputs.begin() + 1, bn.outputs.end(),
                                              [](const std::string& o) { return o.empty(); }))
      continue;  // training-mode outputs requested
    if (bn.get_int("training_mode", 0) != 0) continue;
    const std::string& x = bn.inputs[0];
    auto producer_it = std::find_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) {
      return std::find(n.outputs.begin(), n.outputs.end(), x) != n.outputs.end();
    });
    if (producer_it == g.nodes.end() ||
        (producer_it->op_type != "Conv" && producer_it->op_type != "ConvTranspose") ||
        !producer_it->domain.empty())
      continue;
    const bool transposed = producer_it->op_type == "ConvTranspose";
    Node& conv = *producer_it;
    if (g.consumers(x).size() != 1 ||
        std::find(g.outputs.begin(), g.outputs.end(), x) != g.outputs.end())
      continue;
    const Tensor* w = constant(g, conv.inputs[1]);
    const Tensor* b = conv.inputs.size() > 2 ? constant(g, conv.inputs[2]) : nullptr;
    if (!w || w->dtype != DType::kFloat32 ||
        (conv.inputs.size() > 2 && !conv.inputs[2].empty() && !b))
      continue;
    const Tensor* scale = constant(g, bn.inputs[1]);
    const Tensor* bias = constant(g, bn.inputs[2]);
    const Tensor* mean = constant(g, bn.inputs[3]);
    const Tensor* var = constant(g, bn.inputs[4]);
    if (!scale || !bias || !mean || !var) continue;
    if (w->shape.size() < 3) continue;
    // Conv W is [M, C / group, k...]; ConvTranspose W is [C, M / group, k...].
    const std::int64_t group = conv.get_int("group", 1);
    const std::int64_t channels = transposed ? w->shape[1] * group : w->shape[0];
    auto vec = [&](const Tensor* t) {
      std::vector<float> v = ir::to_float_vector(*t);
      if (static_cast<std::int64_t>(v.size()) != channels)
        fail("BatchNormalization '{}': parameter '{}' has {} values for {} channels of Conv '{}'",
             bn.name, t->name, v.size(), channels, conv.name);
      return v;
    };
    std::vector<float> gamma = vec(scale), beta = vec(bias), mu = vec(mean), sigma2 = vec(var);
    std::vector<float> conv_bias = b ? vec(b) : std::vector<float>(channels, 0.0f);
    const double eps = bn.get_float("epsilon", 1e-5f);

    Tensor new_w = *w;
    new_w.name = conv.name + "_bn_folded_weight";
    Tensor new_b = ir::make_tensor(DType::kFloat32, {channels}, conv.name + "_bn_folded_bias");
    std::vector<double> k(channels);
    for (std::int64_t c = 0; c < channels; ++c) {
      k[c] = gamma[c] / std::sqrt(static_cast<double>(sigma2[c]) + eps);
      new_b.as_mutable<float>()[c] = static_cast<float>((conv_bias[c] - mu[c]) * k[c] + beta[c]);
    }
    const std::int64_t kernel = ir::element_count(w->shape) / (w->shape[0] * w->shape[1]);
    for (std::int64_t o = 0; o < w->shape[0]; ++o)
      for (std::int64_t i = 0; i < w->shape[1]; ++i) {
        // The output channel of W[o][i]: o for Conv; for ConvTranspose, input channel o's group
        // times M / group, plus i.
        const std::int64_t m = transposed ? (o / (w->shape[0] / group)) * w->shape[1] + i : o;
        float* v = new_w.as_mutable<float>() + (o * w->shape[1] + i) * kernel;
        for (std::int64_t e = 0; e < kernel; ++e) v[e] = static_cast<float>(v[e] * k[m]);
      }
    conv.inputs.resize(3);
    conv.inputs[1] = new_w.name;
    conv.inputs[2] = new_b.name;
    g.tensors[new_w.name] = std::move(new_w);
    g.tensors[new_b.name] = std::move(new_b);
    // The Conv now produces the BatchNormalization's output directly.
    g.tensors.erase(x);
    conv.outputs[0] = bn.outputs[0];
    removed[bi] = true;
  }
  std::vector<Node> kept;
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    if (!removed[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  // Drop constants nothing refers to any more (the original conv weights and BN parameters).
  std::set<std::string> used(g.outputs.begin(), g.outputs.end());
  for (const auto& n : g.nodes) used.insert(n.inputs.begin(), n.inputs.end());
  for (auto it = g.tensors.begin(); it != g.tensors.end();)
    it = it->second.is_constant() && !used.count(it->first) ? g.tensors.erase(it) : std::next(it);
  return g;
}

float signed_entropy_threshold(const std::vector<std::uint64_t>& bins,
                               const std::vector<std::uint64_t>& negative, std::uint64_t zeros,
                               float range, int quantized_bins) {
  if (negative.size() != bins.size())
    fail("entropy calibration: {} negative bins for {} bins", negative.size(), bins.size());
  std::vector<std::uint64_t> positive(bins.size());
  for (std::size_t k = 0; k < bins.size(); ++k) positive[k] = bins[k] - negative[k];
  positive[0] -= std::min(positive[0], zeros);
  float t = 0;
  const std::vector<std::uint64_t>* sides[] = {&positive, &negative};
  for (const auto* side : sides) {
    // Searched up to the side's own largest value (its last non-empty bin, after the merge): on
    // the whole range, a side of small values (SiLU's negatives) tied on every candidate past
    // them and took the largest, the full range.
    std::vector<std::uint64_t> h = entropy_histogram(*side, quantized_bins);
    const auto last = std::find_if(h.rbegin(), h.rend(), [](std::uint64_t c) { return c != 0; });
    if (last == h.rend()) continue;
    const auto kept = static_cast<std::size_t>(h.rend() - last);
    const float side_range = static_cast<float>(
        static_cast<double>(range) * static_cast<double>(kept) / static_cast<double>(h.size()));
    h.resize(kept);
    t = std::max(t, entropy_threshold(h, side_range, quantized_bins));
  }
  return t > 0 ? t : range;
}

std::vector<std::uint64_t> entropy_histogram(const std::vector<std::uint64_t>& bins,
                                             int quantized_bins) {
  std::vector<std::uint64_t> h = bins;
  const double values = static_cast<double>(std::accumulate(h.begin(), h.end(), std::uint64_t{0}));
  while (h.size() % 2 == 0 && h.size() >= 2 * static_cast<std::size_t>(quantized_bins) &&
         values < kEntropyValuesPerBin * static_cast<double>(h.size())) {
    std::vector<std::uint64_t> merged(h.size() / 2);
    for (std::size_t k = 0; k < merged.size(); ++k) merged[k] = h[2 * k] + h[2 * k + 1];
    h = std::move(merged);
  }
  return h;
}

// ---- calibration --------------------------------------------------------------------------------

namespace {

struct Stats {
  float max_abs = 0;
  std::vector<std::uint64_t> bins;      // |x| of every value
  std::vector<std::uint64_t> negative;  // |x| of the negative values (also counted in bins)
  std::uint64_t zeros = 0;              // exact zeros (also counted in bins[0])
  // Percentile in one pass (QuantizeOptions::percentile_tail_margin): the values counted, the
  // largest |x| among them and the largest one left out (-1: none).
  std::uint64_t count = 0;
  std::vector<float> tail;
  float tail_cut = -1;
};

// The |x| histogram's bin of a value: `bins` equal bins over [0, max_abs], the top one closed.
// Pass 1 (its SSE2 lanes do the same products, minimum and truncation) and the percentile's tail
// both count with it.
struct BinOf {
  double per_unit, last;
  BinOf(std::size_t bins, float max_abs)
      : per_unit(static_cast<double>(bins) / max_abs), last(static_cast<double>(bins - 1)) {}
  std::size_t operator()(float v) const {
    return static_cast<std::size_t>(std::min(last, std::fabs(v) * per_unit));
  }
};

// Keeps the largest `target` values of s.tail; the largest one dropped raises s.tail_cut.
void prune_tail(Stats& s, std::size_t target) {
  if (s.tail.size() <= target) return;
  const auto nth = s.tail.begin() + static_cast<std::ptrdiff_t>(target);
  std::nth_element(s.tail.begin(), nth, s.tail.end(), std::greater<>());
  s.tail_cut = std::max(s.tail_cut, *nth);
  s.tail.resize(target);
}

// Counts p[0, n) into s.count and keeps each |x| above s.tail_cut in s.tail, pruned to the
// largest `share` of s.count (at least 16) whenever it holds twice that and a block more.
void keep_tail(Stats& s, const float* p, std::size_t n, double share) {
  s.count += n;
  const std::size_t target = std::max<std::size_t>(
      16, static_cast<std::size_t>(std::ceil(share * static_cast<double>(s.count))));
  constexpr std::size_t kBlock = 16384;
  for (std::size_t begin = 0; begin < n; begin += kBlock) {
    const std::size_t end = std::min(n, begin + kBlock);
    const float cut = s.tail_cut;
    std::size_t i = begin;
#if defined(__SSE2__)
    // Four at a time: after the first values few pass the cut.
    const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7FFFFFFF));
    const __m128 cut4 = _mm_set1_ps(cut);
    for (; i + 4 <= end; i += 4) {
      const int above =
          _mm_movemask_ps(_mm_cmpgt_ps(_mm_and_ps(_mm_loadu_ps(p + i), abs_mask), cut4));
      for (std::size_t k = 0; above && k < 4; ++k)
        if (above >> k & 1) s.tail.push_back(std::fabs(p[i + k]));
    }
#endif
    for (; i < end; ++i)
      if (std::fabs(p[i]) > cut) s.tail.push_back(std::fabs(p[i]));
    if (s.tail.size() > 2 * target + kBlock) prune_tail(s, target);
  }
}

// The |x| histogram of s's values over [0, s.max_abs] as pass 1 would count it, from the tail
// alone: the values left out (all at most tail_cut) are counted in tail_cut's bin. Below that
// bin the counts are wrong, so this is only returned when the percentile's bin cannot lie
// there: when even the values up to the bin below (at most count - the kept ones from that
// bin on - tail_cut itself) fall short of percentile_threshold's mark. Else empty.
std::vector<std::uint64_t> tail_histogram(const Stats& s, std::size_t bins, double percentile) {
  std::vector<std::uint64_t> out(bins, 0);
  const BinOf bin_of(bins, s.max_abs);
  for (const float a : s.tail) ++out[bin_of(a)];
  if (s.tail_cut < 0) return out;  // nothing left out: the whole histogram
  const std::size_t cut_bin = bin_of(s.tail_cut);
  const std::uint64_t kept_from_cut = std::accumulate(
      out.begin() + static_cast<std::ptrdiff_t>(cut_bin), out.end(), std::uint64_t{0});
  out[cut_bin] += s.count - s.tail.size();
  const double wanted = percentile / 100.0 * static_cast<double>(s.count);
  if (static_cast<double>(s.count - kept_from_cut - 1) < wanted) return out;
  return {};
}

template <typename Fn>
void for_each_float(const ref::TensorMap& values, const std::vector<std::string>& names, Fn fn) {
  for (const auto& name : names) {
    auto it = values.find(name);
    if (it == values.end() || it->second.dtype != DType::kFloat32) continue;
    const Tensor& t = it->second;
    fn(name, t.as<float>(), static_cast<std::size_t>(ir::stored_count(t)));
  }
}

// Pass 0 measures max |x|; pass 1 fills the |x| histogram over [0, max |x|].
// With tail_share > 0, pass 0 also keeps the largest values (keep_tail).
void accumulate(Stats& s, const std::string& name, const std::string& where, int pass,
                const float* p, std::size_t n, double tail_share = 0) {
  if (pass == 0) {
    // A NaN or infinity makes `finite` false. When every value is finite the maximum does not
    // depend on the order, so four lanes of SSE2 (x86-64's baseline) may take it.
    float max_abs = s.max_abs;
    bool finite = true;
    std::size_t i = 0;
#if defined(__SSE2__)
    const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7FFFFFFF));
    const __m128 largest = _mm_set1_ps(std::numeric_limits<float>::max());
    __m128 m0 = _mm_set1_ps(max_abs), m1 = m0, ok = _mm_castsi128_ps(_mm_set1_epi32(-1));
    for (; i + 8 <= n; i += 8) {
      const __m128 a = _mm_and_ps(_mm_loadu_ps(p + i), abs_mask);
      const __m128 b = _mm_and_ps(_mm_loadu_ps(p + i + 4), abs_mask);
      ok = _mm_and_ps(ok, _mm_and_ps(_mm_cmple_ps(a, largest), _mm_cmple_ps(b, largest)));
      m0 = _mm_max_ps(m0, a);
      m1 = _mm_max_ps(m1, b);
    }
    alignas(16) float lanes[4];
    _mm_store_ps(lanes, _mm_max_ps(m0, m1));
    for (const float v : lanes) max_abs = v > max_abs ? v : max_abs;
    finite = _mm_movemask_ps(ok) == 0xF;
#endif
    for (; i < n; ++i) {
      const float a = std::fabs(p[i]);
      finite &= a <= std::numeric_limits<float>::max();
      max_abs = a > max_abs ? a : max_abs;
    }
    if (!finite) {
      const float* bad = std::find_if(p, p + n, [](float v) { return !std::isfinite(v); });
      fail(
          "calibration: tensor '{}' ({}) holds a non-finite value ({}); check the calibration "
          "data and the model",
          name, where, *bad);
    }
    s.max_abs = max_abs;
    if (tail_share > 0) keep_tail(s, p, n, tail_share);
  } else if (s.max_abs > 0) {
    const BinOf bin_of(s.bins.size(), s.max_abs);
    const bool signs = !s.negative.empty();  // entropy calibration only
    const std::size_t bins = s.bins.size();
    if (signs) {
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t bin = bin_of(p[i]);
        ++s.bins[bin];
        s.negative[bin] += p[i] < 0.0f;
        s.zeros += p[i] == 0.0f;
      }
      return;
    }
    // Four interleaved sets of counters: a run of values in one bin (the exact zeros of every
    // Relu output, half of them) made each increment wait for the previous one's store.
    thread_local std::vector<std::uint32_t> counts;
    std::uint64_t zeros = 0;
    for (std::size_t begin = 0; begin < n;) {
      const std::size_t end = begin + std::min<std::size_t>(n - begin, std::size_t{1} << 32);
      counts.assign(4 * bins, 0);
      std::uint32_t *c0 = counts.data(), *c1 = c0 + bins, *c2 = c1 + bins, *c3 = c2 + bins;
      std::size_t i = begin;
#if defined(__SSE2__)
      // One pass, four values at a time: bin_of in two lanes of doubles (the same products,
      // minimum and truncation as the scalar form: every value is finite, pass 0 checked) and
      // the zeros per 4-lane mask (a table: the baseline CPU has no popcnt instruction).
      constexpr unsigned char kBits[16] = {0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4};
      const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7FFFFFFF));
      const __m128d scale = _mm_set1_pd(bin_of.per_unit), top = _mm_set1_pd(bin_of.last);
      for (; i + 4 <= end; i += 4) {
        const __m128 v = _mm_loadu_ps(p + i);
        zeros += kBits[_mm_movemask_ps(_mm_cmpeq_ps(v, _mm_setzero_ps()))];
        const __m128 a = _mm_and_ps(v, abs_mask);
        const __m128d lo = _mm_min_pd(_mm_mul_pd(_mm_cvtps_pd(a), scale), top);
        const __m128d hi = _mm_min_pd(_mm_mul_pd(_mm_cvtps_pd(_mm_movehl_ps(a, a)), scale), top);
        const __m128i b = _mm_unpacklo_epi64(_mm_cvttpd_epi32(lo), _mm_cvttpd_epi32(hi));
        ++c0[static_cast<std::uint32_t>(_mm_cvtsi128_si32(b))];
        ++c1[static_cast<std::uint32_t>(_mm_cvtsi128_si32(_mm_shuffle_epi32(b, 1)))];
        ++c2[static_cast<std::uint32_t>(_mm_cvtsi128_si32(_mm_shuffle_epi32(b, 2)))];
        ++c3[static_cast<std::uint32_t>(_mm_cvtsi128_si32(_mm_shuffle_epi32(b, 3)))];
      }
#else
      for (; i + 4 <= end; i += 4) {
        ++c0[bin_of(p[i])];
        ++c1[bin_of(p[i + 1])];
        ++c2[bin_of(p[i + 2])];
        ++c3[bin_of(p[i + 3])];
        zeros += (p[i] == 0.0f) + (p[i + 1] == 0.0f) + (p[i + 2] == 0.0f) + (p[i + 3] == 0.0f);
      }
#endif
      for (; i < end; ++i) {
        ++c0[bin_of(p[i])];
        zeros += p[i] == 0.0f;
      }
      for (std::size_t b = 0; b < bins; ++b)
        s.bins[b] += std::uint64_t{c0[b]} + c1[b] + c2[b] + c3[b];
      begin = end;
    }
    s.zeros += zeros;
  }
}

// The exact zeros (+0 and -0) among p[0, n).
std::uint64_t count_zeros(const float* p, std::size_t n) {
  std::uint64_t zeros = 0;
  std::size_t i = 0;
#if defined(__SSE2__)
  constexpr unsigned char kBits[16] = {0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4};
  for (; i + 4 <= n; i += 4)
    zeros += kBits[_mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(p + i), _mm_setzero_ps()))];
#endif
  for (; i < n; ++i) zeros += p[i] == 0.0f;
  return zeros;
}

// The values of p[0, n) that are not exact zeros, in order (`zeros` of them are; 0: all of
// them).
std::vector<float> copy_nonzero(const float* p, std::size_t n, std::uint64_t zeros) {
  if (zeros == 0) return std::vector<float>(p, p + n);
  // Branchless: each value is stored and the end moves on past the non-zero ones, so the
  // buffer has room for one more.
  std::vector<float> out(n - zeros + 1);
  float* o = out.data();
  std::size_t k = 0;
  for (std::size_t i = 0; i < n; ++i) {
    o[k] = p[i];
    k += p[i] != 0.0f;
  }
  out.pop_back();
  return out;
}

// Records that tensor `name` was seen with this type and shape: what differs between sightings
// becomes unknown (the type, or a dimension as -1; a change of rank makes the type unknown).
void note_seen(std::map<std::string, Tensor>& seen_map, const std::string& name, DType dtype,
               const ir::Shape& shape) {
  auto [seen, fresh] = seen_map.try_emplace(name, Tensor{name, dtype, shape, {}});
  if (fresh) return;
  if (seen->second.dtype != dtype) seen->second.dtype = DType::kUndefined;
  if (seen->second.shape.size() != shape.size()) {
    seen->second.dtype = DType::kUndefined;  // rank changes: nothing static to say
  } else {
    for (std::size_t d = 0; d < shape.size(); ++d)
      if (seen->second.shape[d] != shape[d]) seen->second.shape[d] = -1;
  }
}

}  // namespace

std::map<std::string, float> calibrate(const Graph& graph,
                                       const std::vector<ref::TensorMap>& samples,
                                       const QuantizeOptions& options,
                                       std::map<std::string, Tensor>* observed) {
  if (samples.empty()) fail("calibration needs at least one sample");
  const bool histograms = options.method != Calibration::kMinMax;
  if (histograms && options.histogram_bins > kMaxHistogramBins)
    fail("histogram_bins ({}) is more than {} (entropy calibration time grows with bins squared)",
         options.histogram_bins, kMaxHistogramBins);
  if (histograms && options.histogram_bins < options.quantized_bins)
    fail("histogram_bins ({}) must be at least quantized_bins ({})", options.histogram_bins,
         options.quantized_bins);
  // Percentile from pass 0's tails (QuantizeOptions::percentile_tail_margin) while they are a
  // small share of the values; pass 1 only where they cannot decide it.
  const double tail_share = options.method == Calibration::kPercentile
                                ? options.percentile_tail_margin * (100 - options.percentile) / 100
                                : 0;
  const bool one_pass = tail_share > 0 && tail_share <= 1.0 / 64;
  std::size_t total = samples.size() * (histograms && !one_pass ? 2 : 1);
  std::size_t done = 0;
  std::map<std::string, Stats> stats;
  const std::map<std::string, std::string> pre_activation = pre_activation_values(graph);

  // The samples are spread over the threads in contiguous blocks, each with its own statistics,
  // and the executor runs one thread per sample (oneDNN's too): a maximum, counts and the
  // shapes seen merge to the same result in any order, so every thread count gives the
  // one-thread thresholds (tested). Pass 1's blocks start from the merged maxima.
  const std::size_t workers = std::clamp<std::size_t>(thread_count(), 1, samples.size());
  std::mutex progress_mutex;
  ref::ConvWeightCache weight_cache;  // the graph's conv weights in oneDNN's layout, shared
  // Pass 0 keeps a copy of each sample's measured values while they fit in
  // options.kept_activation_bytes (each worker its share), so pass 1 counts the histograms of
  // those samples from memory instead of running the float graph again (half of calibration's
  // time); the samples that did not fit run again. The counts are the same either way.
  struct KeptValue {
    const std::string* name;     // a node output's name: the graph's
    std::vector<float> nonzero;  // the values but the exact zeros (half of a Relu's output) ...
    std::uint64_t zeros = 0;     // ... counted here
  };
  std::vector<std::vector<KeptValue>> kept(samples.size());
  std::vector<char> is_kept(samples.size(), 0);
  const std::size_t keep_share =
      histograms && !one_pass ? options.kept_activation_bytes / workers : 0;
  const double pass0_tail = one_pass ? tail_share : 0;
  auto observe = [&](int pass) {
    std::vector<std::map<std::string, Stats>> part(workers);
    std::vector<std::map<std::string, Tensor>> seen_part(workers);
    for (auto& p : part) {
      p = stats;  // pass 1: the maxima, bins zeroed below
      for (auto& [name, st] : p) {
        std::fill(st.bins.begin(), st.bins.end(), 0);
        std::fill(st.negative.begin(), st.negative.end(), 0);
        st.zeros = 0;
      }
    }
    std::vector<std::exception_ptr> errors(workers);
    auto work = [&](std::size_t w) {
      try {
        auto& my = part[w];
        std::size_t kept_bytes = 0;
        bool keeping = pass == 0 && keep_share > 0;
        std::vector<KeptValue>* keep_into = nullptr;  // this sample's, while it fits
        ref::RunOptions run;
        run.conv_weights = &weight_cache;
        run.release_dead_values = true;  // what is measured is read (and copied) in after_node
        run.after_node = [&](const Node& node, const ref::TensorMap& values) {
          if (observed && pass == 0)
            for (const auto& o : node.outputs) {
              auto it = values.find(o);
              if (o.empty() || it == values.end()) continue;
              note_seen(seen_part[w], o, it->second.dtype, it->second.shape);
            }
          for_each_float(
              values, node.outputs, [&](const std::string& name, const float* p, std::size_t n) {
                if (pre_activation.count(name)) return;
                accumulate(my[name], name, "output of node '" + node.name + "'", pass, p, n,
                           pass0_tail);
                if (!keep_into) return;
                // Copied while in cache (the executor's buffer is then free for the next
                // values), without the exact zeros when they are many (a Relu's output, half
                // of it): the branchless compaction costs more than a plain copy otherwise.
                std::uint64_t zeros = count_zeros(p, n);
                if (zeros < n / 4) zeros = 0;
                kept_bytes += (n - zeros) * sizeof(float);
                if (kept_bytes > keep_share) {  // full: this sample and the rest run again
                  keep_into->clear();
                  keep_into = nullptr;
                  keeping = false;
                  return;
                }
                keep_into->push_back({&name, copy_nonzero(p, n, zeros), zeros});
              });
        };
        const std::size_t first = samples.size() * w / workers;
        const std::size_t last = samples.size() * (w + 1) / workers;
        for (std::size_t i = first; i < last; ++i) {
          // Graph inputs are observed directly.
          for_each_float(samples[i], graph.inputs,
                         [&](const std::string& name, const float* p, std::size_t n) {
                           accumulate(my[name], name, "graph input", pass, p, n, pass0_tail);
                         });
          if (pass == 1 && is_kept[i]) {
            for (KeptValue& v : kept[i]) {
              Stats& st = my[*v.name];
              accumulate(st, *v.name, "", pass, v.nonzero.data(), v.nonzero.size());
              if (st.max_abs > 0) {  // as accumulate counts an exact zero
                st.bins[0] += v.zeros;
                st.zeros += v.zeros;
              }
            }
            kept[i] = {};
          } else {
            keep_into = keeping ? &kept[i] : nullptr;
            ref::run_graph(graph, samples[i], run);
            if (keep_into) is_kept[i] = 1;
            keep_into = nullptr;
          }
          if (options.progress) {
            const std::lock_guard lock(progress_mutex);
            options.progress(++done, total);
          }
        }
      } catch (...) {
        errors[w] = std::current_exception();
      }
    };
    if (workers == 1) {
      work(0);
    } else {
      const unsigned threads = thread_count();
      set_thread_count(1);
      {
        std::vector<std::jthread> pool;
        for (std::size_t w = 1; w < workers; ++w) pool.emplace_back(work, w);
        work(0);
      }
      set_thread_count(threads);
    }
    // The lowest block's error is the first sample's, as one thread would report it.
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
    for (std::size_t w = 0; w < workers; ++w) {
      for (auto& [name, st] : part[w]) {
        Stats& into = stats[name];
        if (pass == 0) {
          into.max_abs = std::max(into.max_abs, st.max_abs);
          into.count += st.count;
          into.tail.insert(into.tail.end(), st.tail.begin(), st.tail.end());
          into.tail_cut = std::max(into.tail_cut, st.tail_cut);
          continue;
        }
        for (std::size_t b = 0; b < into.bins.size(); ++b) into.bins[b] += st.bins[b];
        for (std::size_t b = 0; b < into.negative.size(); ++b) into.negative[b] += st.negative[b];
        into.zeros += st.zeros;
      }
      if (observed)
        for (const auto& [name, t] : seen_part[w]) note_seen(*observed, name, t.dtype, t.shape);
    }
  };

  observe(0);
  bool second_pass = histograms && !one_pass;
  for (auto it = stats.begin(); one_pass && it != stats.end(); ++it) {
    Stats& s = it->second;
    if (s.max_abs > 0)
      s.bins =
          tail_histogram(s, static_cast<std::size_t>(options.histogram_bins), options.percentile);
    second_pass |= s.max_abs > 0 && s.bins.empty();
    s.tail = {};
  }
  if (second_pass) {
    if (one_pass) total += samples.size();
    for (auto& [name, s] : stats) {
      s.bins.assign(static_cast<std::size_t>(options.histogram_bins), 0);
      if (options.method == Calibration::kEntropy) s.negative.assign(s.bins.size(), 0);
    }
    observe(1);
  }

  std::map<std::string, float> thresholds;
  for (const auto& [name, s] : stats) {
    float t = s.max_abs;
    if (s.max_abs > 0 && options.method == Calibration::kPercentile)
      t = percentile_threshold(s.bins, s.max_abs, options.percentile);
    else if (s.max_abs > 0 && options.method == Calibration::kEntropy) {
      // Exact zeros (half of every Relu output) are exact at any scale, so they carry no
      // information about T; left in, their spike in bin 0 dominates KL(P || Q) as soon as bin 0
      // is merged with others, and the minimum moves to the smallest candidates (T ~ max / 16):
      // a Relu of a Gaussian was clipped at 1.8 sigma instead of 3.6.
      t = signed_entropy_threshold(s.bins, s.negative, s.zeros, s.max_abs, options.quantized_bins);
    }
    thresholds[name] = t;
  }
  // A value only its Relu/Clip reads gets that activation's threshold (its scale in the
  // quantized model), following chains of activations.
  for (const auto& [name, activation] : pre_activation) {
    std::string to = activation;
    for (std::size_t k = 0; k < pre_activation.size() && pre_activation.count(to); ++k)
      to = pre_activation.at(to);
    if (auto it = thresholds.find(to); it != thresholds.end() && !thresholds.count(name))
      thresholds[name] = it->second;
  }
  return thresholds;
}

std::vector<std::string> infer_types_from_observation(
    Graph& graph, const std::map<std::string, Tensor>& observed) {
  std::vector<std::string> filled;
  for (const auto& [name, seen] : observed) {
    if (seen.dtype == DType::kUndefined) continue;
    auto it = graph.tensors.find(name);
    if (it != graph.tensors.end() && it->second.is_constant()) continue;
    const bool unknown = it == graph.tensors.end() || it->second.dtype == DType::kUndefined;
    const bool partial = !unknown && it->second.dtype == seen.dtype &&
                         (it->second.shape.size() != seen.shape.size() ||
                          std::any_of(it->second.shape.begin(), it->second.shape.end(),
                                      [](std::int64_t d) { return d < 0; }));
    if (!unknown && !partial) continue;
    if (partial && it->second.shape.size() == seen.shape.size()) {
      // Keep what static inference knew; fill only its unknown dimensions.
      Tensor merged = it->second;
      for (std::size_t d = 0; d < merged.shape.size(); ++d)
        if (merged.shape[d] < 0) merged.shape[d] = seen.shape[d];
      if (merged.shape == it->second.shape) continue;
      it->second = std::move(merged);
    } else {
      graph.tensors[name] = Tensor{name, seen.dtype, seen.shape, {}};
    }
    filled.push_back(name);
  }
  return filled;
}

// ---- the QOperator rewrite ---------------------------------------------------------------------

namespace {

class UnionFind {
 public:
  std::string find(const std::string& x) {
    auto it = parent_.find(x);
    if (it == parent_.end() || it->second == x) return x;
    std::string root = find(it->second);
    parent_[x] = root;
    return root;
  }
  void unite(const std::string& a, const std::string& b) {
    std::string ra = find(a), rb = find(b);
    if (ra != rb) parent_[ra] = rb;
  }

 private:
  std::map<std::string, std::string> parent_;
};

struct QuantizedWeight {
  Tensor values;  // int8
  float scale;
};

QuantizedWeight quantize_symmetric(const Tensor& w, const std::string& name) {
  std::vector<float> converted;
  if (w.dtype != DType::kFloat32) converted = ir::to_float_vector(w);
  const float* v = w.dtype == DType::kFloat32 ? w.as<float>() : converted.data();
  const std::size_t n = static_cast<std::size_t>(ir::stored_count(w));
  float max_abs = 0;
  bool finite = true;
  for (std::size_t i = 0; i < n; ++i) {
    finite &= std::fabs(v[i]) <= std::numeric_limits<float>::max();  // false for NaN too
    max_abs = std::max(max_abs, std::fabs(v[i]));
  }
  if (!finite) {
    const float* bad = std::find_if(v, v + n, [](float x) { return !std::isfinite(x); });
    fail("constant '{}' holds a non-finite value ({})", w.name, *bad);
  }
  const float scale = max_abs > 0 ? max_abs / kInt8Max : 1.0f;
  Tensor q = ir::make_tensor(DType::kInt8, w.shape, name);
  std::int8_t* out = q.as_mutable<std::int8_t>();
  // Clamped first (the bounds are integers, so clamping and rounding commute), then rounded to
  // nearest even by adding and taking away 1.5 * 2^23, exact for |x| <= 2^22 in the default
  // rounding mode: the loop vectorizes where nearbyint is a library call per weight (resnet50's
  // 25 M weights took 0.15 s).
  constexpr float kRound = 12582912.0f;
  for (std::size_t i = 0; i < n; ++i) {
    const float x = std::clamp(v[i] / scale, -kInt8Max, kInt8Max);
    out[i] = static_cast<std::int8_t>((x + kRound) - kRound);
  }
  return {std::move(q), scale};
}

class Rewriter {
 public:
  Rewriter(const Graph& f, const std::map<std::string, float>& thresholds, QuantizeSummary* summary)
      : f_(f), summary_(summary) {
    assign_scales(thresholds);
  }

  Graph run() {
    q_.name = f_.name;
    q_.opsets = f_.opsets;
    // int8 Relu needs ai.onnx opset 14; none of the ops written here changed meaning since 13.
    q_.opset = std::max<std::int64_t>(f_.opset, 14);
    q_.opsets[""] = q_.opset;
    q_.opsets["com.microsoft"] = 1;
    q_.inputs = f_.inputs;
    for (const auto& name : f_.inputs) {
      q_.tensors[name] = f_.tensor(name);
      float_name_[name] = name;
    }
    for (const auto& node : f_.nodes) rewrite(node);
    for (const auto& out : f_.outputs) {
      const Tensor* t = f_.find(out);
      if (t && t->is_constant()) {
        q_.tensors[out] = *t;
      } else {
        std::string name = need_float(out);
        if (name != out) fail("internal: graph output '{}' lost its name", out);
      }
      q_.outputs.push_back(out);
    }
    return std::move(q_);
  }

 private:
  // ---- scales ----
  void assign_scales(const std::map<std::string, float>& thresholds) {
    UnionFind groups;
    for (const auto& n : f_.nodes)
      if (is_passthrough(n) && is_float_activation(f_, n.inputs[0]) &&
          is_float_activation(f_, n.outputs[0]))
        groups.unite(n.inputs[0], n.outputs[0]);
    const std::map<std::string, std::string> pre_activation = pre_activation_values(f_);
    std::map<std::string, float> best, fallback;
    for (const auto& [name, t] : thresholds) {
      std::string root = groups.find(name);
      fallback[root] = std::max(fallback[root], t);
      if (!pre_activation.count(name)) best[root] = std::max(best[root], t);
    }
    // A HardSwish input of range T gets the scale 3 / K, K = floor(381 / T) (T grows by at most
    // 1/K), when K <= 63, or K = 63 when floor(381 / T) <= 76 (T grows by at most 20 %): then 3
    // is exactly K steps and the compiler's gate relu6(x + 3), K steps per 3, fits int8 and is
    // exact (hard_activations, docs/compiler.md "Pointwise functions"). Smaller ranges keep their
    // scale and the compiler rounds the gate to 1/127.
    std::map<std::string, float> hard_swish;
    for (const auto& n : f_.nodes)
      if (n.op_type == "HardSwish" && n.domain.empty() && !n.inputs.empty()) {
        std::string root = groups.find(n.inputs[0]);
        float t = best.count(root) ? best[root] : fallback[root];
        if (!(t > 0)) continue;
        float k = std::floor(3.0f * kInt8Max / t);
        if (k > 63 && k <= 76) k = 63;
        if (k >= 1 && k <= 63) hard_swish[root] = 3.0f / k;
      }
    for (const auto& [name, t] : thresholds) {
      std::string root = groups.find(name);
      float threshold = best.count(root) ? best[root] : fallback[root];
      scale_[name] = threshold > 0 ? threshold / kInt8Max : 1.0f;
      if (hard_swish.count(root)) scale_[name] = hard_swish[root];
    }
    // A LeakyRelu's output scale equal to its input's (the positive side sets both ranges) makes
    // exact ties of its table: the output scale (and its group's) grows by 2^-10 until none is
    // left, so onnxruntime's table and the compiler's fixed-point form agree on every input.
    for (const auto& n : f_.nodes) {
      if (n.op_type != "LeakyRelu" || !n.domain.empty() || n.inputs.empty() || n.outputs.empty() ||
          !scale_.count(n.inputs[0]) || !scale_.count(n.outputs[0]))
        continue;
      const float sx = scale_[n.inputs[0]], alpha = n.get_float("alpha", 0.01f);
      float sy = scale_[n.outputs[0]];
      for (int i = 0; i < 16 && leaky_relu_has_ties(sx, sy, alpha); ++i) sy *= 1.0f + 1.0f / 1024;
      if (sy == scale_[n.outputs[0]]) continue;
      const std::string root = groups.find(n.outputs[0]);
      for (auto& [name, scale] : scale_)
        if (groups.find(name) == root) scale = sy;
    }
  }

  bool quantizable(const std::string& name) const {
    return is_float_activation(f_, name) && scale_.count(name);
  }

  // ---- values ----
  std::string scale_tensor(float scale, const std::string& base) {
    std::string name = base + "_scale";
    if (!q_.tensors.count(name)) q_.tensors[name] = ir::make_scalar<float>(scale, name);
    return name;
  }
  std::string zero_point(const std::string& base) {
    std::string name = base + "_zero_point";
    if (!q_.tensors.count(name)) q_.tensors[name] = ir::make_scalar<std::int8_t>(0, name);
    return name;
  }
  std::string act_scale(const std::string& t) { return scale_tensor(scale_.at(t), t); }
  std::string act_zero(const std::string& t) { return zero_point(t); }

  void add_node(Node n) {
    if (summary_ && n.op_type != "QuantizeLinear" && n.op_type != "DequantizeLinear")
      ++summary_->quantized_ops[n.op_type];
    q_.nodes.push_back(std::move(n));
  }
  std::string unique_node_name(const std::string& base) {
    std::string name = base;
    for (int k = 2; node_names_.count(name); ++k) name = base + "_" + std::to_string(k);
    node_names_.insert(name);
    return name;
  }

  // The int8 form of activation `t`, quantizing the float value on first use.
  std::string need_quant(const std::string& t) {
    auto it = quant_name_.find(t);
    if (it != quant_name_.end()) return it->second;
    std::string src = need_float(t);
    std::string out = declare_int8(t);
    Node qn{unique_node_name(t + "_QuantizeLinear"),
            "QuantizeLinear",
            "",
            {src, act_scale(t), act_zero(t)},
            {out},
            {}};
    add_node(std::move(qn));
    return out;
  }

  // The float form of activation `t` (its original name), dequantizing on first use.
  std::string need_float(const std::string& t) {
    auto it = float_name_.find(t);
    if (it != float_name_.end()) return it->second;
    auto qi = quant_name_.find(t);
    if (qi == quant_name_.end()) fail("internal: value '{}' is neither float nor quantized", t);
    Node dq{unique_node_name(t + "_DequantizeLinear"),
            "DequantizeLinear",
            "",
            {qi->second, act_scale(t), act_zero(t)},
            {t},
            {}};
    add_node(std::move(dq));
    q_.tensors[t] = f_.tensor(t);
    float_name_[t] = t;
    dq_float_.insert(t);
    return t;
  }

  // The float value of activation `t` as DequantizeLinear of its int8 form, so a QDQ op reads
  // int8 (a chain of them gets a QuantizeLinear -> DequantizeLinear between each two).
  std::string dequantized(const std::string& t) {
    if (dq_float_.count(float_name_.count(t) ? float_name_.at(t) : "")) return float_name_.at(t);
    const bool had_float = float_name_.count(t) > 0;
    std::string q = need_quant(t);
    if (!had_float) return need_float(t);  // need_float dequantizes the int8 form
    std::string name = t + "_dequantized";
    Node dq{unique_node_name(t + "_DequantizeLinear"),
            "DequantizeLinear",
            "",
            {q, act_scale(t), act_zero(t)},
            {name},
            {}};
    add_node(std::move(dq));
    q_.tensors[name] = f_.tensor(t);
    q_.tensors[name].name = name;
    dq_float_.insert(name);
    return name;
  }

  std::string declare_int8(const std::string& t) {
    std::string name = t + "_quantized";
    Tensor info;
    info.name = name;
    info.dtype = DType::kInt8;
    info.shape = f_.tensor(t).shape;
    q_.tensors[name] = std::move(info);
    quant_name_[t] = name;
    return name;
  }

  std::string copy_constant(const std::string& name) {
    if (name.empty()) return name;
    if (!q_.tensors.count(name)) q_.tensors[name] = f_.tensor(name);
    return name;
  }

  std::string add_constant(Tensor t) {
    std::string name = t.name;
    q_.tensors[name] = std::move(t);
    return name;
  }

  Node qnode(const Node& src, const std::string& op, const std::string& domain,
             std::vector<std::string> inputs, const std::string& output) {
    Node n;
    n.name = unique_node_name(src.name);
    n.op_type = op;
    n.domain = domain;
    n.inputs = std::move(inputs);
    n.outputs = {declare_int8(output)};
    return n;
  }

  void keep_float(const Node& n, const std::string& why) {
    Node copy = n;
    for (auto& in : copy.inputs) {
      if (in.empty()) continue;
      if (constant(f_, in))
        copy_constant(in);
      else
        in = need_float(in);
    }
    for (const auto& o : copy.outputs) {
      if (o.empty()) continue;
      float_name_[o] = o;
      if (const Tensor* t = f_.find(o)) q_.tensors[o] = *t;
    }
    copy.name = unique_node_name(n.name);
    q_.nodes.push_back(std::move(copy));
    if (summary_)
      summary_->float_nodes.push_back(fmt::format("{} ({}): {}", n.name, n.op_type, why));
  }

  // keep_float for a layer that has an int8 form but cannot take it here: also a warning.
  void keep_float_warn(const Node& n, const std::string& why) {
    keep_float(n, why);
    if (summary_) summary_->warnings.push_back(fmt::format("{} ({}): {}", n.name, n.op_type, why));
  }

  // ---- per op ----
  void rewrite(const Node& n) {
    const std::string& op = n.op_type;
    if (!n.domain.empty()) return keep_float(n, "not an ai.onnx op");
    const std::string y = n.outputs.empty() ? "" : n.outputs[0];
    if (n.outputs.size() != 1 &&
        !(op == "MaxPool" && (n.outputs.size() == 1 || n.outputs[1].empty())))
      return keep_float(n, "more than one output");
    if (!quantizable(y)) return keep_float(n, "output is not a calibrated float activation");

    if (op == "Conv") return conv(n);
    if (op == "ConvTranspose") return conv_transpose(n);
    if (op == "Gemm") return gemm(n);
    if (op == "MatMul") return matmul(n);
    if (op == "Add" || op == "Mul") return binary(n);
    if (op == "Concat") return concat(n);
    if (op == "Sigmoid" || op == "LeakyRelu" || op == "GlobalAveragePool" || op == "AveragePool")
      return unary(n);
    // Nearest Resize shares its input's scale, so DequantizeLinear -> Resize -> QuantizeLinear is
    // exact; it stays in that form (the pattern compilers fold) because int8 Resize is not
    // universally implemented. Any other mode (linear, cubic) interpolates: its output has its own
    // calibrated scale and the Resize runs on the dequantized values.
    if (op == "Resize") {
      const std::string mode = n.get_string("mode", "nearest");
      if (mode == "nearest")
        return keep_float(
            n, "nearest Resize between DequantizeLinear and QuantizeLinear at one scale (exact)");
      return keep_float(n, mode +
                               " Resize interpolates in float between DequantizeLinear and "
                               "QuantizeLinear at its own output scale (host work: the Gati "
                               "RESIZE is 2x nearest)");
    }
    if (is_passthrough(n)) return passthrough(n);
    if (pointwise_qdq(n)) return;
    keep_float(n, "no int8 form in the native scheme");
  }

  // Per-element functions of one int8 activation that have no QOperator op: HardSigmoid,
  // HardSwish, Add/Sub/Mul/Div by a float constant (scalar or per channel) and BatchNormalization
  // not after a conv. Their int8 form is the QDQ one, DequantizeLinear -> op -> QuantizeLinear at
  // the calibrated scales (onnxruntime runs it as written; the compiler's hard_activations and
  // constant_arithmetic passes lower it to depthwise 1x1 convs and EltWise, docs/compiler.md
  // "Pointwise functions"). The constant stays float: exact, where QLinearMul would round it.
  bool pointwise_qdq(const Node& n) {
    const std::string& op = n.op_type;
    bool ok = false;
    if (op == "HardSigmoid" || op == "HardSwish") {
      ok = n.inputs.size() == 1 && quantizable(n.inputs[0]);
    } else if (op == "Sub" || op == "Div") {
      ok = n.inputs.size() == 2 && quantizable(n.inputs[0]) && constant(f_, n.inputs[1]) &&
           constant(f_, n.inputs[1])->dtype == DType::kFloat32;
      if (op == "Sub" && !ok)
        ok = n.inputs.size() == 2 && quantizable(n.inputs[1]) && constant(f_, n.inputs[0]) &&
             constant(f_, n.inputs[0])->dtype == DType::kFloat32;
    } else if (op == "BatchNormalization") {
      ok = n.inputs.size() == 5 && quantizable(n.inputs[0]) && n.get_int("training_mode", 0) == 0;
      for (std::size_t k = 1; ok && k < 5; ++k) ok = constant(f_, n.inputs[k]) != nullptr;
    }
    if (!ok) return false;
    Node copy = n;
    for (auto& in : copy.inputs) {
      if (in.empty()) continue;
      if (constant(f_, in))
        copy_constant(in);
      else
        in = dequantized(in);
    }
    float_name_[n.outputs[0]] = n.outputs[0];
    q_.tensors[n.outputs[0]] = f_.tensor(n.outputs[0]);
    copy.name = unique_node_name(n.name);
    if (summary_) ++summary_->quantized_ops[op + " (QDQ)"];
    q_.nodes.push_back(std::move(copy));
    return true;
  }

  void conv(const Node& n) {
    const std::string& x = n.inputs[0];
    const Tensor* w = constant(f_, n.inputs[1]);
    const Tensor* b = n.inputs.size() > 2 ? constant(f_, n.inputs[2]) : nullptr;
    if (!quantizable(x) || !w || (n.inputs.size() > 2 && !n.inputs[2].empty() && !b))
      return keep_float(n, "input not quantizable or weights/bias not constant");
    QuantizedWeight qw = quantize_symmetric(*w, n.inputs[1] + "_quantized");
    std::optional<Tensor> qb;
    if (b) {
      std::string why;
      qb = quantize_bias(*b, n.inputs[2], scale_.at(x) * qw.scale, why);
      if (!qb) return keep_float_warn(n, why);
    }
    std::vector<std::string> in = {need_quant(x),
                                   act_scale(x),
                                   act_zero(x),
                                   add_constant(std::move(qw.values)),
                                   scale_tensor(qw.scale, n.inputs[1]),
                                   weight_zero(n.inputs[1]),
                                   act_scale(n.outputs[0]),
                                   act_zero(n.outputs[0])};
    if (qb) in.push_back(add_constant(std::move(*qb)));
    Node q = qnode(n, "QLinearConv", "", std::move(in), n.outputs[0]);
    q.attributes = n.attributes;
    add_node(std::move(q));
  }

  // ConvTranspose has no int8 form in ai.onnx (com.microsoft.QLinearConvTranspose is not in
  // onnxruntime's CPU provider), so it is written in QDQ form with the same parameters as a
  // QLinearConv: DequantizeLinear(int8 x), DequantizeLinear(int8 W, per tensor),
  // DequantizeLinear(int32 bias at x_scale * w_scale) -> ConvTranspose -> QuantizeLinear. The
  // compiler's canonicalize_qdq reads the pattern back as one int8 op.
  void conv_transpose(const Node& n) {
    const std::string& x = n.inputs[0];
    const Tensor* w = n.inputs.size() > 1 ? constant(f_, n.inputs[1]) : nullptr;
    const Tensor* b = n.inputs.size() > 2 ? constant(f_, n.inputs[2]) : nullptr;
    if (!quantizable(x) || !w || (n.inputs.size() > 2 && !n.inputs[2].empty() && !b))
      return keep_float(n, "input not quantizable or weights/bias not constant");
    QuantizedWeight qw = quantize_symmetric(*w, n.inputs[1] + "_quantized");
    const float acc_scale = scale_.at(x) * qw.scale;
    std::optional<Tensor> qb;
    if (b) {
      std::string why;
      qb = quantize_bias(*b, n.inputs[2], acc_scale, why);
      if (!qb) return keep_float_warn(n, why);
    }
    const std::string name = unique_node_name(n.name);
    auto dequantize = [&](const std::string& q, const std::string& scale, const std::string& zero,
                          const std::string& like, const std::string& out) {
      Tensor info;
      info.name = out;
      info.dtype = DType::kFloat32;
      info.shape = like.empty() ? ir::Shape{} : q_.tensors.at(like).shape;
      q_.tensors[out] = std::move(info);
      Node dq{unique_node_name(out + "_DequantizeLinear"),
              "DequantizeLinear",
              "",
              {q, scale},
              {out},
              {}};
      if (!zero.empty()) dq.inputs.push_back(zero);
      add_node(std::move(dq));
      return out;
    };
    const std::string xq = need_quant(x);
    Node ct = n;
    ct.name = name;
    ct.inputs = {dequantize(xq, act_scale(x), act_zero(x), xq, name + "_x_dequantized")};
    const std::string wq = add_constant(std::move(qw.values));
    ct.inputs.push_back(dequantize(wq, scale_tensor(qw.scale, n.inputs[1]),
                                   weight_zero(n.inputs[1]), wq, name + "_w_dequantized"));
    if (qb) {
      const std::string bq = add_constant(std::move(*qb));
      ct.inputs.push_back(dequantize(bq, scale_tensor(acc_scale, n.inputs[2] + "_acc"), "", bq,
                                     name + "_b_dequantized"));
    }
    const std::string y = n.outputs[0];
    const std::string y_float = name + "_float_output";
    Tensor yinfo = f_.tensor(y);
    yinfo.name = y_float;
    q_.tensors[y_float] = std::move(yinfo);
    ct.outputs = {y_float};
    add_node(std::move(ct));
    Node qn{unique_node_name(y + "_QuantizeLinear"), "QuantizeLinear",  "",
            {y_float, act_scale(y), act_zero(y)},    {declare_int8(y)}, {}};
    add_node(std::move(qn));
  }

  std::string weight_zero(const std::string& w) {
    std::string name = w + "_zero_point";
    if (!q_.tensors.count(name)) q_.tensors[name] = ir::make_scalar<std::int8_t>(0, name);
    return name;
  }

  // The int32 bias at `scale` (input scale x weight scale); nullopt with `why` set when a value
  // does not fit (a tiny input or weight scale): the layer then stays float.
  std::optional<Tensor> quantize_bias(const Tensor& b, const std::string& name, double scale,
                                      std::string& why) {
    std::vector<float> v = ir::to_float_vector(b);
    Tensor q = ir::make_tensor(DType::kInt32, b.shape, name + "_quantized");
    for (std::size_t i = 0; i < v.size(); ++i) {
      double r = round_even(v[i] / scale);
      if (!std::isfinite(r) || std::fabs(r) > 2147483647.0) {
        why = fmt::format(
            "bias '{}' value {} does not fit int32 at scale {:g} (input or weight scale too "
            "small); the layer stays float on the host",
            name, v[i], scale);
        return std::nullopt;
      }
      q.as_mutable<std::int32_t>()[i] = static_cast<std::int32_t>(r);
    }
    return q;
  }

  void gemm(const Node& n) {
    const std::string& a = n.inputs[0];
    const Tensor* b = constant(f_, n.inputs[1]);
    const Tensor* c = n.inputs.size() > 2 ? constant(f_, n.inputs[2]) : nullptr;
    if (!quantizable(a) || !b || n.get_int("transA", 0) != 0 ||
        (n.inputs.size() > 2 && !n.inputs[2].empty() && !c) || f_.tensor(a).shape.size() != 2)
      return keep_float(n, "needs a 2-D activation times constant weights");
    float alpha = n.get_float("alpha", 1.0f), beta = n.get_float("beta", 1.0f);
    Tensor w = *b;
    if (alpha != 1.0f)
      for (auto& v : std::span<float>(w.as_mutable<float>(), ir::stored_count(w))) v *= alpha;
    QuantizedWeight qw = quantize_symmetric(w, n.inputs[1] + "_quantized");
    std::optional<Tensor> qc;
    if (c) {
      Tensor cb = *c;
      if (beta != 1.0f)
        for (auto& v : std::span<float>(cb.as_mutable<float>(), ir::stored_count(cb))) v *= beta;
      std::string why;
      qc = quantize_bias(cb, n.inputs[2], scale_.at(a) * qw.scale, why);
      if (!qc) return keep_float_warn(n, why);
    }
    std::vector<std::string> in = {need_quant(a),
                                   act_scale(a),
                                   act_zero(a),
                                   add_constant(std::move(qw.values)),
                                   scale_tensor(qw.scale, n.inputs[1]),
                                   weight_zero(n.inputs[1])};
    in.push_back(qc ? add_constant(std::move(*qc)) : std::string());
    in.push_back(act_scale(n.outputs[0]));
    in.push_back(act_zero(n.outputs[0]));
    Node q = qnode(n, "QGemm", "com.microsoft", std::move(in), n.outputs[0]);
    q.attributes["transA"] = std::int64_t{0};
    q.attributes["transB"] = n.get_int("transB", 0);
    q.attributes["alpha"] = 1.0f;
    add_node(std::move(q));
  }

  void matmul(const Node& n) {
    const std::string& a = n.inputs[0];
    const Tensor* b = constant(f_, n.inputs[1]);
    if (!quantizable(a) || !b || b->shape.size() != 2)
      return keep_float(n, "needs an activation times a constant 2-D matrix");
    QuantizedWeight qw = quantize_symmetric(*b, n.inputs[1] + "_quantized");
    std::vector<std::string> in = {need_quant(a),
                                   act_scale(a),
                                   act_zero(a),
                                   add_constant(std::move(qw.values)),
                                   scale_tensor(qw.scale, n.inputs[1]),
                                   weight_zero(n.inputs[1]),
                                   act_scale(n.outputs[0]),
                                   act_zero(n.outputs[0])};
    add_node(qnode(n, "QLinearMatMul", "", std::move(in), n.outputs[0]));
  }

  // An operand of Add/Mul: an activation, or a constant quantized with its own scale.
  bool operand(const std::string& name, std::vector<std::string>& in) {
    if (quantizable(name)) {
      in.insert(in.end(), {need_quant(name), act_scale(name), act_zero(name)});
      return true;
    }
    const Tensor* c = constant(f_, name);
    if (!c || c->dtype != DType::kFloat32) return false;
    QuantizedWeight qc = quantize_symmetric(*c, name + "_quantized");
    in.insert(in.end(), {add_constant(std::move(qc.values)), scale_tensor(qc.scale, name),
                         weight_zero(name)});
    return true;
  }

  void binary(const Node& n) {
    std::vector<std::string> in;
    if (!operand(n.inputs[0], in) || !operand(n.inputs[1], in))
      return keep_float(n, "operands are neither activations nor float constants");
    in.insert(in.end(), {act_scale(n.outputs[0]), act_zero(n.outputs[0])});
    add_node(qnode(n, n.op_type == "Add" ? "QLinearAdd" : "QLinearMul", "com.microsoft",
                   std::move(in), n.outputs[0]));
  }

  void concat(const Node& n) {
    for (const auto& i : n.inputs)
      if (!quantizable(i)) return keep_float(n, "an input is not a calibrated activation");
    std::vector<std::string> in = {act_scale(n.outputs[0]), act_zero(n.outputs[0])};
    for (const auto& i : n.inputs) in.insert(in.end(), {need_quant(i), act_scale(i), act_zero(i)});
    Node q = qnode(n, "QLinearConcat", "com.microsoft", std::move(in), n.outputs[0]);
    q.attributes["axis"] = n.get_int("axis", 1);
    add_node(std::move(q));
  }

  void unary(const Node& n) {
    const std::string& x = n.inputs[0];
    if (!quantizable(x)) return keep_float(n, "input is not a calibrated activation");
    if (n.op_type == "AveragePool" && n.get_int("ceil_mode", 0) != 0)
      return keep_float(n, "ceil_mode is not supported by QLinearAveragePool here");
    std::vector<std::string> in = {need_quant(x), act_scale(x), act_zero(x),
                                   act_scale(n.outputs[0]), act_zero(n.outputs[0])};
    Node q = qnode(n, "QLinear" + n.op_type, "com.microsoft", std::move(in), n.outputs[0]);
    q.attributes = n.attributes;
    if (n.op_type == "GlobalAveragePool" || n.op_type == "AveragePool")
      q.attributes["channels_last"] = std::int64_t{0};
    if (n.op_type == "LeakyRelu") q.attributes["alpha"] = n.get_float("alpha", 0.01f);
    add_node(std::move(q));
  }

  void passthrough(const Node& n) {
    const std::string& x = n.inputs[0];
    const std::string& y = n.outputs[0];
    if (!quantizable(x) || scale_.at(x) != scale_.at(y))
      return keep_float(n, "input and output scales differ");
    std::vector<std::string> in = {need_quant(x)};
    for (std::size_t i = 1; i < n.inputs.size(); ++i) {
      const std::string& name = n.inputs[i];
      if (name.empty()) {
        in.push_back(name);
      } else if (n.op_type == "Clip") {
        const Tensor* bound = constant(f_, name);
        if (!bound) return keep_float(n, "Clip bounds are not constant");
        double v = round_even(ir::to_float_vector(*bound).at(0) / scale_.at(x));
        in.push_back(add_constant(
            ir::make_scalar<std::int8_t>(static_cast<std::int8_t>(std::clamp(v, -128.0, 127.0)),
                                         y + (i == 1 ? "_min" : "_max"))));
      } else if (constant(f_, name)) {
        in.push_back(copy_constant(name));
      } else {
        return keep_float(n, "a shape or scale input is computed at run time");
      }
    }
    Node q = qnode(n, n.op_type, "", std::move(in), y);
    q.attributes = n.attributes;
    add_node(std::move(q));
  }

  const Graph& f_;
  QuantizeSummary* summary_;
  Graph q_;
  std::map<std::string, float> scale_;
  std::map<std::string, std::string> quant_name_, float_name_;
  std::set<std::string> dq_float_;  // float values made by DequantizeLinear
  std::set<std::string> node_names_;
};

}  // namespace

Graph quantize_with_thresholds(const Graph& graph, const std::map<std::string, float>& thresholds,
                               QuantizeSummary* summary) {
  if (graph.nodes.empty()) fail("graph '{}' has no nodes to quantize", graph.name);
  for (const auto& n : graph.nodes)
    if (n.op_type == "QuantizeLinear" || n.op_type == "DequantizeLinear" ||
        n.op_type.rfind("QLinear", 0) == 0 || n.op_type == "QGemm")
      fail("graph '{}' is already quantized (node '{}' is {}); quantize takes float models",
           graph.name, n.name, n.op_type);
  return Rewriter(graph, thresholds, summary).run();
}

Graph quantize(Graph float_graph, const std::vector<ref::TensorMap>& samples,
               const QuantizeOptions& options, QuantizeSummary* summary) {
  Graph folded = fold_batch_norm(fold_constant_identities(std::move(float_graph)));
  std::map<std::string, Tensor> observed;
  std::map<std::string, float> thresholds = calibrate(folded, samples, options, &observed);
  std::vector<std::string> filled = infer_types_from_observation(folded, observed);
  if (summary) summary->inferred_types = std::move(filled);
  return quantize_with_thresholds(folded, thresholds, summary);
}

// ---- calibration data ---------------------------------------------------------------------------

std::vector<ref::TensorMap> load_calibration_data(const std::string& path, const Graph& graph) {
  if (graph.inputs.size() != 1)
    fail("calibration data: model has {} inputs; npukit quantize supports single-input models",
         graph.inputs.size());
  const std::string& input = graph.inputs[0];
  const Tensor& info = graph.tensor(input);
  if (info.dtype != DType::kFloat32)
    fail("model input '{}' is {}, not float32: nothing to calibrate", input,
         ir::dtype_name(info.dtype));
  std::vector<std::string> files;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    for (const auto& e : std::filesystem::directory_iterator(path))
      if (e.path().extension() == ".npy") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    if (files.empty()) fail("{}: folder holds no .npy files", path);
  } else {
    files.push_back(path);
  }
  // The per-sample shape: the input's shape with an unknown batch taken as 1.
  ir::Shape sample_shape = info.shape;
  if (!sample_shape.empty() && sample_shape[0] < 0) sample_shape[0] = 1;
  for (auto d : sample_shape)
    if (d < 0)
      fail("model input '{}' has an unknown dimension other than the batch: {}", input,
           ir::shape_string(info.shape));
  const std::int64_t sample_elems = ir::element_count(sample_shape);
  const std::int64_t batch = sample_shape.empty() ? 1 : sample_shape[0];

  std::vector<ref::TensorMap> samples;
  for (const auto& file : files) {
    Tensor t = onnxio::tensor_from_npy(read_npy(file), input);
    if (t.dtype == DType::kFloat64) {
      std::vector<float> v = ir::to_float_vector(t);
      t = ir::make_tensor<float>(t.shape, v, input);
    }
    if (t.dtype != DType::kFloat32)
      fail("{}: calibration array is {}, the model input '{}' wants float32", file,
           ir::dtype_name(t.dtype), input);
    const std::int64_t count = ir::element_count(t.shape);
    // Accept the exact input shape, or a stack of inputs along axis 0 (N, ...) whose trailing
    // dimensions match the input's (per-sample batch rows).
    bool exact = t.shape == sample_shape;
    bool stacked = !exact && t.shape.size() == sample_shape.size() && !t.shape.empty() &&
                   std::equal(t.shape.begin() + 1, t.shape.end(), sample_shape.begin() + 1) &&
                   t.shape[0] % batch == 0;
    bool stacked_extra = !exact && !stacked && t.shape.size() == sample_shape.size() + 1 &&
                         std::equal(t.shape.begin() + 1, t.shape.end(), sample_shape.begin());
    if (!exact && !stacked && !stacked_extra)
      fail(
          "{}: calibration array shape {} does not fit model input '{}' of shape {} (give one "
          "input, or a batch of them along axis 0)",
          file, ir::shape_string(t.shape), input, ir::shape_string(info.shape));
    for (std::int64_t start = 0; start < count; start += sample_elems) {
      Tensor s = ir::make_tensor(DType::kFloat32, sample_shape, input);
      std::memcpy(s.data.data(), t.data.data() + start * 4,
                  static_cast<std::size_t>(sample_elems) * 4);
      samples.push_back(ref::TensorMap{{input, std::move(s)}});
    }
  }
  if (samples.empty()) fail("{}: no calibration samples", path);
  return samples;
}

}  // namespace npukit::quant
