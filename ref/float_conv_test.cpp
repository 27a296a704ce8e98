// The fast float convolution (oneDNN when built with it) against the plain direct loop, the
// executable specification, over the geometries exported CNNs use.
#include "ref/float_conv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/parallel.h"

namespace npukit::ref {
namespace {

struct Case {
  std::int64_t batch, channels, kernels, group, in_h, in_w, kernel_h, kernel_w, stride, dilation,
      pad_top, pad_left, pad_bottom, pad_right;
  bool bias;
};

WindowGeometry geometry(const Case& c) {
  WindowGeometry g;
  g.in_h = c.in_h;
  g.in_w = c.in_w;
  g.kernel_h = c.kernel_h;
  g.kernel_w = c.kernel_w;
  g.stride_h = g.stride_w = c.stride;
  g.dilation_h = g.dilation_w = c.dilation;
  g.pad_top = c.pad_top;
  g.pad_left = c.pad_left;
  g.pad_bottom = c.pad_bottom;
  g.pad_right = c.pad_right;
  g.out_h = (c.in_h + c.pad_top + c.pad_bottom - (c.kernel_h - 1) * c.dilation - 1) / c.stride + 1;
  g.out_w = (c.in_w + c.pad_left + c.pad_right - (c.kernel_w - 1) * c.dilation - 1) / c.stride + 1;
  return g;
}

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

class FloatConv : public ::testing::TestWithParam<Case> {};

TEST_P(FloatConv, AgreesWithTheDirectLoopToFloatRounding) {
  const Case c = GetParam();
  const WindowGeometry g = geometry(c);
  const auto x = random_values(c.batch * c.channels * c.in_h * c.in_w, 1);
  const auto w = random_values(c.kernels * (c.channels / c.group) * c.kernel_h * c.kernel_w, 2);
  const auto b = random_values(c.kernels, 3);
  const std::size_t out = c.batch * c.kernels * g.out_h * g.out_w;
  std::vector<float> fast(out, NAN), direct(out, NAN);
  const float* bias = c.bias ? b.data() : nullptr;
  conv2d_float(x.data(), w.data(), bias, fast.data(), c.batch, c.channels, c.kernels, c.group, g);
  conv2d_float_direct(x.data(), w.data(), bias, direct.data(), c.batch, c.channels, c.kernels,
                      c.group, g);
  // Each output sums K = C/g * KH * KW products of N(0,1) values: its rounding error is a few
  // ulps of sqrt(K), whatever the order.
  const double k = static_cast<double>(c.channels / c.group * c.kernel_h * c.kernel_w);
  const double tolerance = 1e-5 * std::sqrt(k) + 1e-6;
  for (std::size_t i = 0; i < out; ++i)
    ASSERT_NEAR(fast[i], direct[i], tolerance * (1.0 + std::fabs(direct[i]))) << "output " << i;
}

TEST_P(FloatConv, IsBitIdenticalForEveryThreadCount) {
  const Case c = GetParam();
  const WindowGeometry g = geometry(c);
  const auto x = random_values(c.batch * c.channels * c.in_h * c.in_w, 4);
  const auto w = random_values(c.kernels * (c.channels / c.group) * c.kernel_h * c.kernel_w, 5);
  const std::size_t out = c.batch * c.kernels * g.out_h * g.out_w;
  std::vector<float> one(out), two(out);
  const unsigned before = thread_count();
  set_thread_count(1);
  conv2d_float(x.data(), w.data(), nullptr, one.data(), c.batch, c.channels, c.kernels, c.group, g);
  set_thread_count(2);
  conv2d_float(x.data(), w.data(), nullptr, two.data(), c.batch, c.channels, c.kernels, c.group, g);
  set_thread_count(before);
  EXPECT_EQ(one, two);
}

// Weights kept reordered in a ConvWeightCache give the uncached result bit for bit, on the
// second call (served from the cache) too, and other weights at another address are not
// mistaken for them.
TEST_P(FloatConv, CachedWeightsGiveTheUncachedResult) {
  const Case c = GetParam();
  const WindowGeometry g = geometry(c);
  const auto x = random_values(c.batch * c.channels * c.in_h * c.in_w, 6);
  const std::size_t wn = c.kernels * (c.channels / c.group) * c.kernel_h * c.kernel_w;
  const auto w1 = random_values(wn, 7), w2 = random_values(wn, 8);
  const std::size_t out = c.batch * c.kernels * g.out_h * g.out_w;
  ConvWeightCache cache;
  for (const auto* w : {&w1, &w2}) {
    std::vector<float> plain(out), first(out), again(out);
    conv2d_float(x.data(), w->data(), nullptr, plain.data(), c.batch, c.channels, c.kernels,
                 c.group, g);
    conv2d_float(x.data(), w->data(), nullptr, first.data(), c.batch, c.channels, c.kernels,
                 c.group, g, &cache);
    conv2d_float(x.data(), w->data(), nullptr, again.data(), c.batch, c.channels, c.kernels,
                 c.group, g, &cache);
    EXPECT_EQ(first, plain);
    EXPECT_EQ(again, plain);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Geometries, FloatConv,
    ::testing::Values(
        // batch, C, M, group, H, W, KH, KW, stride, dilation, pads t l b r, bias
        Case{1, 3, 16, 1, 32, 32, 3, 3, 2, 1, 1, 1, 1, 1, true},    // a stem
        Case{2, 32, 64, 1, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, true},   // batch 2
        Case{1, 64, 128, 1, 9, 9, 1, 1, 1, 1, 0, 0, 0, 0, false},   // pointwise, odd size
        Case{1, 48, 48, 48, 17, 17, 3, 3, 2, 1, 1, 1, 1, 1, true},  // depthwise stride 2
        Case{1, 32, 64, 8, 12, 12, 3, 3, 1, 1, 1, 1, 1, 1, true},   // grouped (resnext, regnet)
        Case{1, 16, 8, 1, 20, 20, 3, 3, 1, 2, 2, 2, 2, 2, true},    // dilated
        Case{1, 8, 8, 1, 11, 13, 5, 3, 1, 1, 0, 1, 2, 0, true},     // asymmetric pads, kernel
        Case{1, 3, 8, 1, 1, 40, 1, 7, 1, 1, 0, 3, 0, 3, true},      // 1-D run as H = 1
        Case{1, 4, 6, 2, 7, 7, 7, 7, 1, 1, 0, 0, 0, 0, false}));    // kernel covers the image

}  // namespace
}  // namespace npukit::ref
