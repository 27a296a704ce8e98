// convolve_int (the int32 im2col path of GatiConv and QLinearConv) against the generic int64
// convolve<> loop and against a plain nested loop written here, on random shapes (groups,
// strides, dilations, pads including the negative row pads of kernel-split pieces, zero points,
// extreme values), and the int64 fallback when the int32 bound does not hold.
#include <gtest/gtest.h>

#include <random>

#include "ref/int_conv.h"

namespace npukit::ref {
namespace {

// The definition, one output at a time.
template <typename X, typename W>
std::vector<std::int64_t> plain(const std::vector<X>& x, const std::vector<W>& w,
                                std::int64_t batch, std::int64_t channels, std::int64_t kernels,
                                std::int64_t group, const WindowGeometry& g, std::int32_t x_zero,
                                const std::vector<std::int32_t>& w_zero) {
  const std::int64_t cg = channels / group, kg = kernels / group;
  std::vector<std::int64_t> out(static_cast<std::size_t>(batch * kernels * g.out_h * g.out_w));
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t m = 0; m < kernels; ++m)
      for (std::int64_t oy = 0; oy < g.out_h; ++oy)
        for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
          std::int64_t sum = 0;
          const std::int64_t wz = w_zero.size() == 1 ? w_zero[0] : w_zero[m];
          for (std::int64_t c = 0; c < cg; ++c)
            for (std::int64_t i = 0; i < g.kernel_h; ++i)
              for (std::int64_t j = 0; j < g.kernel_w; ++j) {
                const std::int64_t iy = oy * g.stride_h - g.pad_top + i * g.dilation_h;
                const std::int64_t ix = ox * g.stride_w - g.pad_left + j * g.dilation_w;
                if (iy < 0 || iy >= g.in_h || ix < 0 || ix >= g.in_w) continue;
                const std::int64_t xv =
                    x[((b * channels + (m / kg) * cg + c) * g.in_h + iy) * g.in_w + ix];
                const std::int64_t wv = w[((m * cg + c) * g.kernel_h + i) * g.kernel_w + j];
                sum += (xv - x_zero) * (wv - wz);
              }
          out[((b * kernels + m) * g.out_h + oy) * g.out_w + ox] = sum;
        }
  return out;
}

template <typename X, typename W>
void check_random(std::uint32_t seed, int trials, int x_lo, int x_hi, bool zero_points) {
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int int32_runs = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const std::int64_t group = pick(0, 3) == 0 ? pick(2, 4) : 1;
    const std::int64_t channels = group * pick(1, 20), kernels = group * pick(1, 12);
    const std::int64_t batch = pick(1, 2);
    WindowGeometry g;
    g.kernel_h = pick(1, 4), g.kernel_w = pick(1, 4);
    g.stride_h = pick(1, 4), g.stride_w = pick(1, 4);
    g.dilation_h = pick(0, 4) == 0 ? 2 : 1, g.dilation_w = pick(0, 4) == 0 ? 2 : 1;
    g.in_h = pick(1, 12), g.in_w = pick(1, 15);
    g.pad_top = pick(-1, 3), g.pad_bottom = pick(-1, 3), g.pad_left = pick(0, 3),
    g.pad_right = pick(0, 3);
    const std::int64_t span_h = g.in_h + g.pad_top + g.pad_bottom - (g.kernel_h - 1) * g.dilation_h;
    const std::int64_t span_w = g.in_w + g.pad_left + g.pad_right - (g.kernel_w - 1) * g.dilation_w;
    if (span_h < 1 || span_w < 1) continue;
    g.out_h = (span_h - 1) / g.stride_h + 1, g.out_w = (span_w - 1) / g.stride_w + 1;
    const int extreme = trial % 4;  // 0 random, 1 all lowest, 2 lowest x highest, 3 all highest
    std::vector<X> x(static_cast<std::size_t>(batch * channels * g.in_h * g.in_w));
    std::vector<W> w(
        static_cast<std::size_t>(kernels * (channels / group) * g.kernel_h * g.kernel_w));
    for (auto& v : x)
      v = static_cast<X>(extreme == 0 ? pick(x_lo, x_hi) : extreme == 3 ? x_hi : x_lo);
    for (auto& v : w)
      v = static_cast<W>(extreme == 0 ? pick(-128, 127) : extreme == 1 ? -128 : 127);
    std::int32_t x_zero = 0;
    std::vector<std::int32_t> w_zero{0};
    if (zero_points) {
      x_zero = pick(x_lo, x_hi);
      w_zero.clear();
      const std::int64_t count = pick(0, 1) ? kernels : 1;  // per tensor or per channel
      for (std::int64_t m = 0; m < count; ++m) w_zero.push_back(pick(-128, 127));
    }
    std::vector<std::int64_t> got(static_cast<std::size_t>(batch * kernels * g.out_h * g.out_w));
    std::mt19937 init(static_cast<std::uint32_t>(trial));
    for (auto& v : got) v = std::uniform_int_distribution<std::int64_t>(-1000000, 1000000)(init);
    std::vector<std::int64_t> generic = got;
    const std::vector<std::int64_t> initial = got;
    convolve_int<X, W>(x.data(), w.data(), got.data(), batch, channels, kernels, group, g, x_zero,
                       w_zero);
    int32_runs += convolve_int_used_int32();
    convolve<X, W, std::int64_t>(x.data(), w.data(), generic.data(), batch, channels, kernels,
                                 group, g, x_zero,
                                 std::vector<std::int64_t>(w_zero.begin(), w_zero.end()));
    const auto sums = plain(x, w, batch, channels, kernels, group, g, x_zero, w_zero);
    std::vector<std::int64_t> expected = initial;
    for (std::size_t i = 0; i < expected.size(); ++i) expected[i] += sums[i];
    const std::string what =
        "trial " + std::to_string(trial) + ": group " + std::to_string(group) + ", " +
        std::to_string(channels) + " -> " + std::to_string(kernels) + ", kernel " +
        std::to_string(g.kernel_h) + "x" + std::to_string(g.kernel_w) + ", stride " +
        std::to_string(g.stride_h) + "/" + std::to_string(g.stride_w) + ", dilation " +
        std::to_string(g.dilation_h) + "/" + std::to_string(g.dilation_w) + ", input " +
        std::to_string(g.in_h) + "x" + std::to_string(g.in_w) + ", pads " +
        std::to_string(g.pad_top) + " " + std::to_string(g.pad_bottom) + " " +
        std::to_string(g.pad_left) + " " + std::to_string(g.pad_right) + ", " +
        std::to_string(w_zero.size()) + " weight zero points";
    ASSERT_EQ(got, expected) << what;
    ASSERT_EQ(generic, expected) << what;
  }
  EXPECT_GT(int32_runs, trials / 2);
}

TEST(ConvolveInt, Int8EqualsTheGenericLoopAndThePlainDefinition) {
  check_random<std::int8_t, std::int8_t>(11, 300, -128, 127, false);
}

TEST(ConvolveInt, WidenedUint8WithZeroPointsEqualsTheGenericLoop) {
  check_random<std::int32_t, std::int32_t>(12, 300, 0, 255, true);
  check_random<std::int32_t, std::int32_t>(13, 100, -128, 127, true);
}

// K * 255 * 255 > 2^31 - 1: the int32 path would not be safe, the int64 loop runs instead.
TEST(ConvolveInt, FallsBackToInt64BeyondTheInt32Bound) {
  WindowGeometry g;
  g.in_h = g.in_w = 3, g.kernel_h = g.kernel_w = 3, g.out_h = g.out_w = 1;
  const std::int64_t channels = 3700;  // K = 33300 > 2^31 / 255^2 = 33025
  std::vector<std::int32_t> x(static_cast<std::size_t>(channels * 9), 0);
  std::vector<std::int32_t> w(static_cast<std::size_t>(channels * 9), -128);
  std::int64_t acc = 0;
  convolve_int<std::int32_t, std::int32_t>(x.data(), w.data(), &acc, 1, channels, 1, 1, g, 255,
                                           {127});
  EXPECT_FALSE(convolve_int_used_int32());
  EXPECT_EQ(acc, 33300ll * -255 * -255);
  // With int8 data the bound holds up to K = 131071: the same shape takes the int32 path.
  std::vector<std::int8_t> x8(static_cast<std::size_t>(channels * 9), -128);
  std::vector<std::int8_t> w8(static_cast<std::size_t>(channels * 9), -128);
  acc = 0;
  convolve_int<std::int8_t, std::int8_t>(x8.data(), w8.data(), &acc, 1, channels, 1, 1, g, 0, {0});
  EXPECT_TRUE(convolve_int_used_int32());
  EXPECT_EQ(acc, 33300ll * 128 * 128);
}

}  // namespace
}  // namespace npukit::ref
