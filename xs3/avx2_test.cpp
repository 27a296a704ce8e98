// The AVX2 kernels against the scalar reference on random cases, including saturation-heavy
// ones (biases near ±2^31, extreme inputs) where per-chunk saturation order matters.
#include "common/cpu.h"
#include "xs3/kernels.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace npukit::xs3 {
namespace {

using I8 = std::vector<std::int8_t>;

struct Gen {
  std::mt19937 rng;
  explicit Gen(unsigned seed) : rng(seed) {}
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
  // Mostly uniform int8, sometimes all-extreme values to drive saturation.
  I8 int8s(std::size_t n, bool extreme) {
    I8 v(n);
    for (auto& e : v) {
      e = static_cast<std::int8_t>(extreme ? (uniform(0, 1) ? 127 : -128) : uniform(-128, 127));
    }
    return v;
  }
  std::vector<BsoChannel> channels(int n, bool saturating) {
    std::vector<BsoChannel> out;
    for (int i = 0; i < n; ++i) {
      BsoChannel ch;
      ch.bias = saturating ? (uniform(0, 1) ? 1 : -1) * (2147483647 - uniform(0, 600000))
                           : uniform(-2000000, 2000000);
      ch.shift1 = uniform(0, 18);
      ch.scale = static_cast<std::int16_t>(uniform(-32768, 32767));
      ch.offset_scale = static_cast<std::int16_t>(uniform(-32768, 32767));
      ch.offset = static_cast<std::int16_t>(uniform(-300, 300));
      ch.shift2 = uniform(8, 24);
      out.push_back(ch);
    }
    return out;
  }
};

TEST(Xs3Avx2, Conv2dDeepMatchesScalarOnRandomCases) {
  if (!npukit::cpu::supports(npukit::Isa::kAvx2)) GTEST_SKIP() << "CPU has no AVX2";
  Gen g(2024);
  for (int trial = 0; trial < 300; ++trial) {
    const bool saturating = trial % 3 == 0;
    const bool extreme = trial % 5 == 0;
    ConvParams p;
    p.x = {g.uniform(1, 6), g.uniform(1, 6), g.uniform(1, 80)};
    p.window = {g.uniform(1, 3),  g.uniform(1, 3), g.uniform(-2, 1),
                g.uniform(-2, 1), g.uniform(1, 2), g.uniform(1, 2)};
    p.y = {g.uniform(1, 5), g.uniform(1, 5), g.uniform(1, 35)};
    p.zero_point = static_cast<std::int8_t>(g.uniform(-128, 127));
    p.output.symmetric = trial % 2 == 1;
    const I8 x = g.int8s(p.x.elements(), extreme);
    const I8 k = g.int8s(std::size_t(p.y.channels) * std::size_t(p.window.height) *
                             std::size_t(p.window.width) * std::size_t(p.x.channels),
                         extreme);
    const auto bso = pack_bso(g.channels(p.y.channels, saturating));
    ASSERT_EQ(conv2d_deep(x, k, bso, p, Isa::kAvx2), conv2d_deep(x, k, bso, p, Isa::kScalar))
        << "trial " << trial;
  }
}

TEST(Xs3Avx2, FullyConnected8MatchesScalarOnRandomCases) {
  if (!npukit::cpu::supports(npukit::Isa::kAvx2)) GTEST_SKIP() << "CPU has no AVX2";
  Gen g(77);
  for (int trial = 0; trial < 500; ++trial) {
    const bool saturating = trial % 3 == 0;
    const bool extreme = trial % 4 == 0;
    const int c_in = g.uniform(1, 300);
    const int c_out = g.uniform(1, 40);
    const I8 x = g.int8s(std::size_t(c_in), extreme);
    const I8 w = g.int8s(std::size_t(c_in) * std::size_t(c_out), extreme);
    const auto bso = pack_bso(g.channels(c_out, saturating));
    const OutputOptions o{.symmetric = trial % 2 == 0};
    ASSERT_EQ(fully_connected_8(x, w, c_out, bso, o, Isa::kAvx2),
              fully_connected_8(x, w, c_out, bso, o, Isa::kScalar))
        << "trial " << trial << " C_in " << c_in << " C_out " << c_out;
  }
}

TEST(Xs3Avx2, Conv2d1x1MatchesScalarOnRandomCases) {
  if (!npukit::cpu::supports(npukit::Isa::kAvx2)) GTEST_SKIP() << "CPU has no AVX2";
  Gen g(31);
  for (int trial = 0; trial < 100; ++trial) {
    const ImageShape xs{g.uniform(1, 4), g.uniform(1, 4), g.uniform(1, 100)};
    const int c_out = g.uniform(1, 40);
    const I8 x = g.int8s(xs.elements(), trial % 4 == 0);
    const I8 k = g.int8s(std::size_t(c_out) * std::size_t(xs.channels), trial % 4 == 0);
    const auto bso = pack_bso(g.channels(c_out, trial % 3 == 0));
    const OutputOptions o{.symmetric = trial % 2 == 0};
    ASSERT_EQ(conv2d_1x1(x, xs, k, c_out, bso, o, Isa::kAvx2),
              conv2d_1x1(x, xs, k, c_out, bso, o, Isa::kScalar))
        << trial;
  }
}

TEST(Xs3Avx2, Conv2dDepthwiseMatchesScalarOnRandomCases) {
  if (!npukit::cpu::supports(npukit::Isa::kAvx2)) GTEST_SKIP() << "CPU has no AVX2";
  Gen g(41);
  for (int trial = 0; trial < 200; ++trial) {
    ConvParams p;
    p.x = {g.uniform(1, 6), g.uniform(1, 6), g.uniform(1, 40)};
    p.window = {g.uniform(1, 4),  g.uniform(1, 4), g.uniform(-2, 1),
                g.uniform(-2, 1), g.uniform(1, 2), g.uniform(1, 2)};
    p.y = {g.uniform(1, 5), g.uniform(1, 5), p.x.channels};
    p.zero_point = static_cast<std::int8_t>(g.uniform(-128, 127));
    p.output.symmetric = trial % 2 == 1;
    const bool extreme = trial % 4 == 0;
    const I8 x = g.int8s(p.x.elements(), extreme);
    const I8 k = g.int8s(
        std::size_t(p.window.height) * std::size_t(p.window.width) * std::size_t(p.x.channels),
        extreme);
    const auto bso = pack_bso(g.channels(p.x.channels, trial % 3 == 0));
    ASSERT_EQ(conv2d_depthwise(x, k, bso, p, Isa::kAvx2),
              conv2d_depthwise(x, k, bso, p, Isa::kScalar))
        << trial;
  }
}

TEST(Xs3Avx2, SaturationHeavyDeepChannels) {
  // Deep inputs at the extremes with biases right at the bound: every chunk saturates or
  // un-saturates, the hardest case for the vector saturating add.
  if (!npukit::cpu::supports(npukit::Isa::kAvx2)) GTEST_SKIP() << "CPU has no AVX2";
  Gen g(5);
  for (int trial = 0; trial < 40; ++trial) {
    const int c_in = 32 * g.uniform(1, 8) + g.uniform(0, 31);
    const int c_out = g.uniform(1, 24);
    const I8 x = g.int8s(std::size_t(c_in), true);
    const I8 w = g.int8s(std::size_t(c_in) * std::size_t(c_out), true);
    std::vector<BsoChannel> chans = g.channels(c_out, true);
    for (auto& ch : chans) ch.bias = (ch.bias > 0 ? 1 : -1) * 2147483647;
    const auto bso = pack_bso(chans);
    ASSERT_EQ(fully_connected_8(x, w, c_out, bso, {}, Isa::kAvx2),
              fully_connected_8(x, w, c_out, bso, {}, Isa::kScalar))
        << trial;
    ConvParams p;
    p.x = {2, 2, c_in};
    p.y = {2, 2, c_out};
    p.window = {2, 2, -1, 0, 1, 1};
    p.zero_point = 127;
    const I8 xi = g.int8s(p.x.elements(), true);
    const I8 k = g.int8s(std::size_t(c_out) * 4 * std::size_t(c_in), true);
    ASSERT_EQ(conv2d_deep(xi, k, bso, p, Isa::kAvx2), conv2d_deep(xi, k, bso, p, Isa::kScalar))
        << trial;
  }
}

}  // namespace
}  // namespace npukit::xs3
