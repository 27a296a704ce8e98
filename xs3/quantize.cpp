#include "xs3/quantize.h"

#include "common/error.h"
#include "xs3/vpu.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace npukit::xs3 {

namespace {
constexpr int kShiftHeadroom = 7;  // ai_tools _SHIFT_ADJUSTMENT: one bit left for the offset
constexpr int kMaxPostShift = 21;  // 22 + 7 - 8 (int8 output)
constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kInt32Min = std::numeric_limits<std::int32_t>::min();
}  // namespace

BsoChannel multiplier_to_bso(double m) {
  if (!(m > 0) || !std::isfinite(m)) {
    fail("requantization multiplier s_in*s_w/s_out = {} must be positive and finite", m);
  }
  int rshift = -static_cast<int>(std::ceil(std::log2(m))) + 1;
  double scale = std::round(std::ldexp(m, 14 + rshift));
  if (scale >= 32768.0) {  // m exactly a power of two (or rounding up to one)
    scale /= 2;
    rshift -= 1;
  }
  rshift -= kShiftHeadroom;
  BsoChannel ch;
  ch.shift1 = std::max(rshift, 0);
  ch.shift2 = kMaxPostShift + std::min(rshift, 0);
  ch.scale = static_cast<std::int16_t>(scale);
  if (ch.shift2 < 0) {
    fail(
        "requantization multiplier {} is too large for the BSO pipeline (needs shift2 = {} < 0; "
        "the largest representable multiplier is about 2^15)",
        m, ch.shift2);
  }
  if (ch.shift1 > kMaxBsoShift) {
    fail(
        "requantization multiplier {} is too small for the BSO pipeline (needs shift1 = {} > "
        "{})",
        m, ch.shift1, kMaxBsoShift);
  }
  return ch;
}

int ideal_output(std::int64_t accumulator, double multiplier, int output_zero_point,
                 OutputOptions output) {
  const double y = std::round(static_cast<double>(accumulator) * multiplier) + output_zero_point;
  return static_cast<int>(std::clamp<double>(y, output.lower_bound(), 127));
}

namespace {

void check_int8(int v, const char* what) {
  if (v < -128 || v > 127) fail("{} {} is not an int8", what, v);
}

void check_scale(double s, const char* what) {
  if (!(s > 0) || !std::isfinite(s)) fail("{} {} must be positive and finite", what, s);
}

// Accumulators worth checking: a uniform sweep over the range where the output is not clamped
// (plus a margin) and the neighbourhood of every rounding tie of the ideal result.
std::vector<std::int64_t> probe_accumulators(double m, int zp, OutputOptions output) {
  const double lo_real = (output.lower_bound() - 2 - zp) / m;
  const double hi_real = (127 + 2 - zp) / m;
  const auto clampi = [](double v) {
    return static_cast<std::int64_t>(std::clamp<double>(v, double(-kInt32Max), double(kInt32Max)));
  };
  const std::int64_t lo = clampi(std::floor(lo_real));
  const std::int64_t hi = clampi(std::ceil(hi_real));
  std::vector<std::int64_t> probes;
  const std::int64_t step = std::max<std::int64_t>(1, (hi - lo) / 20000);
  for (std::int64_t a = lo; a <= hi; a += step) probes.push_back(a);
  for (int k = output.lower_bound(); k <= 127; ++k) {
    const double tie = (k + 0.5 - zp) / m;
    const std::int64_t t = clampi(std::floor(tie));
    for (std::int64_t d = -2; d <= 2; ++d)
      probes.push_back(std::clamp(t + d, -kInt32Max, kInt32Max));
  }
  probes.push_back(kInt32Max);
  probes.push_back(-kInt32Max);
  return probes;
}

}  // namespace

QuantizedBso quantize_requantization(const Requantization& q, std::span<const std::int8_t> weights,
                                     int c_out, OutputOptions output) {
  if (c_out <= 0) fail("quantize: C_out must be positive, got {}", c_out);
  check_scale(q.input_scale, "input scale");
  check_scale(q.output_scale, "output scale");
  check_int8(q.input_zero_point, "input zero point");
  check_int8(q.output_zero_point, "output zero point");
  const std::size_t n = std::size_t(c_out);
  if (q.weight_scales.size() != n && q.weight_scales.size() != 1) {
    fail("quantize: {} weight scales for {} output channels (give one per channel or one for all)",
         q.weight_scales.size(), c_out);
  }
  if (!q.bias.empty() && q.bias.size() != n) {
    fail("quantize: {} biases for {} output channels", q.bias.size(), c_out);
  }
  if (weights.size() % n != 0) {
    fail("quantize: {} weights are not a multiple of C_out = {}", weights.size(), c_out);
  }
  const std::size_t k = weights.size() / n;

  QuantizedBso result;
  result.channels.resize(n);
  result.report.resize(n);
  for (std::size_t c = 0; c < n; ++c) {
    const double ws = q.weight_scales.size() == 1 ? q.weight_scales[0] : q.weight_scales[c];
    check_scale(ws, "weight scale");
    ChannelReport& rep = result.report[c];
    rep.multiplier = q.input_scale * ws / q.output_scale;
    BsoChannel ch = multiplier_to_bso(rep.multiplier);

    std::int64_t sum_w = 0;
    for (std::size_t i = 0; i < k; ++i) sum_w += weights[c * k + i];
    const std::int64_t bias = q.bias.empty() ? 0 : q.bias[c];
    rep.folded_bias = bias - std::int64_t{q.input_zero_point} * sum_w;
    rep.bias_clipped = rep.folded_bias > kInt32Max || rep.folded_bias < -kInt32Max;
    ch.bias = static_cast<std::int32_t>(std::clamp(rep.folded_bias, -kInt32Max, kInt32Max));

    // out_zp * 2^shift2 exactly: offset_scale = 2^a with a <= 14 and |offset| <= 128 * 2^7, both
    // int16 because shift2 <= 21 (ai_tools split it approximately via a square root instead).
    if (q.output_zero_point != 0) {
      const int a = std::max(0, ch.shift2 - kShiftHeadroom);
      ch.offset_scale = static_cast<std::int16_t>(1 << a);
      ch.offset = static_cast<std::int16_t>(q.output_zero_point * (1 << (ch.shift2 - a)));
    }
    result.channels[c] = ch;

    // Error: device result for true accumulator a versus the ideal. The device accumulates
    // folded_bias + sum x*w = a, less whatever clipping the bias lost.
    for (const std::int64_t a : probe_accumulators(rep.multiplier, q.output_zero_point, output)) {
      const std::int64_t device_acc = a + (ch.bias - rep.folded_bias);
      const std::int32_t acc32 = sat32(device_acc);
      const int got = bso_output8(acc32, ch, output);
      const double real = std::clamp<double>(double(a) * rep.multiplier + q.output_zero_point,
                                             output.lower_bound(), 127);
      const double err = std::abs(got - real);
      if (err > rep.max_error_lsb) {
        rep.max_error_lsb = err;
        rep.worst_accumulator = a;
      }
      rep.max_rounded_diff =
          std::max(rep.max_rounded_diff,
                   std::abs(got - ideal_output(a, rep.multiplier, q.output_zero_point, output)));
    }
    result.max_error_lsb = std::max(result.max_error_lsb, rep.max_error_lsb);
    result.max_rounded_diff = std::max(result.max_rounded_diff, rep.max_rounded_diff);
  }
  result.bso = pack_bso(result.channels);
  return result;
}

}  // namespace npukit::xs3
