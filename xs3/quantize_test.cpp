// The quantizer: BSO values from a TFLite-style per-channel requantization, checked against the
// ideal float result (the 1 LSB bar of ai_tools' integration tests) and hand-worked shifts.
#include "xs3/quantize.h"

#include "common/error.h"
#include "xs3/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace npukit::xs3 {
namespace {

TEST(Xs3Quantize, MultiplierToShiftsHandWorked) {
  // m = 0.01: ceil(log2 0.01) = -6, r = 7, scale = round(0.01 * 2^21) = 20972, r - 7 = 0:
  // shift1 0, shift2 21. Check: 20972 / 2^21 = 0.0100002.
  const BsoChannel a = multiplier_to_bso(0.01);
  EXPECT_EQ(a.shift1, 0);
  EXPECT_EQ(a.scale, 20972);
  EXPECT_EQ(a.shift2, 21);
  // m = 2^-10 exactly: r = 11, scale = 2^15 -> halved to 2^14, r = 10, minus 7 = 3:
  // shift1 3, shift2 21: 2^14 / 2^(3+21) = 2^-10.
  const BsoChannel b = multiplier_to_bso(std::ldexp(1.0, -10));
  EXPECT_EQ(b.shift1, 3);
  EXPECT_EQ(b.scale, 16384);
  EXPECT_EQ(b.shift2, 21);
  // m = 0.5: r = 2, scale 2^15 -> 2^14, r = 1, minus 7 = -6: shift1 0, shift2 15.
  const BsoChannel c = multiplier_to_bso(0.5);
  EXPECT_EQ(c.shift1, 0);
  EXPECT_EQ(c.scale, 16384);
  EXPECT_EQ(c.shift2, 15);
  EXPECT_THROW(multiplier_to_bso(0.0), Error);
  EXPECT_THROW(multiplier_to_bso(-1.0), Error);
  EXPECT_THROW(multiplier_to_bso(1e6), Error);    // shift2 would be negative
  EXPECT_THROW(multiplier_to_bso(1e-12), Error);  // shift1 would exceed 31
}

TEST(Xs3Quantize, FoldsZeroPointsHandWorked) {
  // One channel, weights [1, 2, 3] (sum 6), in_zp -3, bias 100: folded bias 100 + 18 = 118.
  // out_zp 5 with shift2 21: offset_scale 2^14, offset 5 * 2^7 = 640 (= 5 * 2^21 exactly).
  Requantization q;
  q.input_scale = 0.02;
  q.input_zero_point = -3;
  q.weight_scales = {0.005};
  q.output_scale = 0.01;  // m = 0.01
  q.output_zero_point = 5;
  q.bias = {100};
  const std::vector<std::int8_t> w{1, 2, 3};
  const QuantizedBso r = quantize_requantization(q, w, 1);
  ASSERT_EQ(r.channels.size(), 1u);
  EXPECT_EQ(r.channels[0].bias, 118);
  EXPECT_EQ(r.channels[0].offset_scale, 16384);
  EXPECT_EQ(r.channels[0].offset, 640);
  EXPECT_EQ(r.bso, pack_bso(r.channels));
  EXPECT_TRUE(r.within_one_lsb());
  EXPECT_LE(r.max_error_lsb, 1.0);
}

TEST(Xs3Quantize, RandomLayersStayWithinOneLsbOfIdeal) {
  // Random per-channel scales over six decades, all zero points; then run fully_connected_8
  // on random inputs and compare with the float ideal computed from the true accumulator.
  std::mt19937 rng(99);
  std::uniform_real_distribution<double> log_m(-19.0, 0.0);
  std::uniform_int_distribution<int> i8(-128, 127);
  int worst = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int c_in = 24 + trial, c_out = 1 + trial % 20;
    Requantization q;
    q.input_scale = 0.05;
    q.input_zero_point = i8(rng);
    q.output_scale = 1.0;
    q.output_zero_point = i8(rng);
    std::vector<std::int8_t> w(static_cast<std::size_t>(c_in * c_out));
    std::vector<std::int8_t> x(static_cast<std::size_t>(c_in));
    for (auto& v : w) v = static_cast<std::int8_t>(i8(rng));
    for (auto& v : x) v = static_cast<std::int8_t>(i8(rng));
    for (int c = 0; c < c_out; ++c) {
      q.weight_scales.push_back(std::exp2(log_m(rng)) / q.input_scale);
      q.bias.push_back(std::uniform_int_distribution<int>(-50000, 50000)(rng));
    }
    const OutputOptions o{.symmetric = trial % 2 == 1};
    const QuantizedBso r = quantize_requantization(q, w, c_out, o);
    EXPECT_TRUE(r.within_one_lsb()) << "trial " << trial << " diff " << r.max_rounded_diff;
    EXPECT_LE(r.max_error_lsb, 1.0) << trial;
    const auto y = fully_connected_8(x, w, c_out, r.bso, o);
    for (int c = 0; c < c_out; ++c) {
      std::int64_t acc = q.bias[std::size_t(c)];
      for (int i = 0; i < c_in; ++i) {
        acc +=
            (std::int64_t{x[std::size_t(i)]} - q.input_zero_point) * w[std::size_t(c * c_in + i)];
      }
      const int ideal =
          ideal_output(acc, r.report[std::size_t(c)].multiplier, q.output_zero_point, o);
      worst = std::max(worst, std::abs(ideal - y[std::size_t(c)]));
    }
  }
  EXPECT_LE(worst, 1);
}

TEST(Xs3Quantize, PaddingWithInputZeroPointIsExact) {
  // Folding in_zp into the bias is exact at borders because padding reads in_zp: a conv whose
  // window covers padding equals the float ideal over real zeros (x - in_zp = 0 there).
  Requantization q;
  q.input_scale = 0.1;
  q.input_zero_point = 17;
  q.weight_scales = {0.02, 0.03};
  q.output_scale = 0.05;
  q.output_zero_point = -9;
  q.bias = {250, -400};
  const std::vector<std::int8_t> k{5, -7, 9, 11, -13, 2, 1, 0};  // [2][2][2][1]
  const QuantizedBso r = quantize_requantization(q, k, 2);
  ConvParams p;
  p.x = {1, 1, 1};
  p.y = {1, 1, 2};
  p.window = {2, 2, -1, -1, 1, 1};  // only the bottom-right tap is inside
  p.zero_point = static_cast<std::int8_t>(q.input_zero_point);
  const std::vector<std::int8_t> x{60};
  const auto y = conv2d_deep(x, k, r.bso, p);
  for (int c = 0; c < 2; ++c) {
    const std::int64_t acc = q.bias[std::size_t(c)] + (60 - 17) * k[std::size_t(c * 4 + 3)];
    const int ideal = ideal_output(acc, r.report[std::size_t(c)].multiplier, q.output_zero_point);
    EXPECT_LE(std::abs(ideal - y[std::size_t(c)]), 1) << c;
  }
}

TEST(Xs3Quantize, ReportsClippedBiasAndRejectsBadInput) {
  Requantization q;
  q.input_scale = 1;
  q.input_zero_point = -128;
  q.weight_scales = {1e-3};
  q.output_scale = 1;
  q.bias = {2147483000};
  const std::vector<std::int8_t> w(100, 127);  // folded: 2147483000 + 128*12700 overflows
  const QuantizedBso r = quantize_requantization(q, w, 1);
  EXPECT_TRUE(r.report[0].bias_clipped);
  EXPECT_EQ(r.channels[0].bias, 2147483647);
  EXPECT_THROW(quantize_requantization(q, w, 3), Error);  // 100 weights, 3 channels
  q.weight_scales = {1e-3, 1e-3};
  EXPECT_THROW(quantize_requantization(q, w, 1), Error);
  q.weight_scales = {-1};
  EXPECT_THROW(quantize_requantization(q, w, 1), Error);
  q.weight_scales = {1e-3};
  q.output_zero_point = 200;
  EXPECT_THROW(quantize_requantization(q, w, 1), Error);
}

}  // namespace
}  // namespace npukit::xs3
