// The tail's vectorised common cases (quantize_span and bias_span, device/block.h) on every path
// the CPU has, against the per-value definition written here (64-bit product, the QuantShift
// rounding shift, EltWise's fp_cast rounding shift, int8 clamp, ReLU / Clip, all in 128 bits), on
// random and extreme accumulators (INT32 min/max, exact .5 ties of either sign), scales, shifts
// and biases.
#include "device/block.h"
#include "device/blocks_test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>

namespace npukit::device {
namespace {

std::int32_t wrap_add(std::int32_t a, std::int32_t b) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) + static_cast<std::uint32_t>(b));
}

__int128 definition_shift(__int128 v, int shift) {
  return shift == 0 ? v : (v + (static_cast<__int128>(1) << (shift - 1))) >> shift;
}

std::int32_t definition(std::int32_t acc, std::int32_t bias, std::int32_t scale, int shift,
                        int fp_cast, int act, std::int32_t clip) {
  const __int128 p = static_cast<__int128>(wrap_add(acc, bias)) * scale;
  const __int128 q = definition_shift(definition_shift(p, shift), fp_cast);
  auto r = static_cast<std::int32_t>(std::clamp<__int128>(q, -128, 127));
  if (act == 0) r = std::max(r, 0);
  if (act == 1) r = std::min(std::max(r, 0), clip);
  return r;
}

const std::int32_t kMin = std::numeric_limits<std::int32_t>::min();
const std::int32_t kMax = std::numeric_limits<std::int32_t>::max();

TEST(TailQuantizeSpan, EveryPathEqualsTheDefinition) {
  const std::vector<Isa> paths = blocks_testing::isa_paths();
  std::mt19937 rng(9);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  for (int trial = 0; trial < 1500; ++trial) {
    // fp_cast 0 (CONV, FC), 10 (EltWise add/sub/mult), 16 (sigmoid/tanh); QuantShift is a 5-bit
    // field (0..31) but the function takes any shift the 64-bit product allows.
    const int fp_cast = std::array{0, 10, 16}[static_cast<std::size_t>(trial % 3)];
    const int shift = static_cast<int>(trial % 7 == 0   ? pick(0, 2)
                                       : trial % 5 == 0 ? pick(0, 62 - fp_cast)
                                                        : pick(0, 31));
    const int total = shift + fp_cast;
    const auto scale = static_cast<std::int32_t>(pick(0, 4)   ? pick(-32768, 32767)
                                                 : pick(0, 1) ? -32768
                                                              : (pick(0, 1) ? 1 : -1));
    const auto bias = static_cast<std::int32_t>(pick(0, 1) ? 0 : pick(kMin, kMax));
    const int act = static_cast<int>(pick(-1, 1));
    const auto clip = static_cast<std::int32_t>(pick(0, 255));
    const auto n = static_cast<std::uint64_t>(pick(0, 70));
    std::vector<std::int32_t> acc(n);
    for (auto& a : acc) {
      switch (pick(0, 4)) {
        case 0:
          a = static_cast<std::int32_t>(pick(kMin, kMax));
          break;
        case 1:
          a = static_cast<std::int32_t>(pick(-5000, 5000));
          break;
        case 2:
          a = pick(0, 1) ? kMin : kMax;
          break;
        case 3: {
          // An exact tie after the bias: (m + 1/2) * 2^T, m of either sign (with scale +-1 the
          // product ties too; with other scales it is just another value near a boundary).
          const std::int64_t half = total > 0 ? std::int64_t{1} << (total - 1) : 0;
          const std::int64_t m = pick(-300, 300);
          const std::int64_t t = total < 31 ? m * (std::int64_t{1} << total) + half : half;
          a = wrap_add(static_cast<std::int32_t>(static_cast<std::uint32_t>(t)), -bias);
          break;
        }
        default:
          a = static_cast<std::int32_t>(pick(-40, 40));
      }
    }
    std::vector<std::int32_t> want(n);
    for (std::uint64_t i = 0; i < n; ++i)
      want[i] = definition(acc[i], bias, scale, shift, fp_cast, act, clip);
    for (Isa isa : paths) {
      std::vector<std::int32_t> got(n, 999);
      quantize_span(acc.data(), got.data(), n, bias, scale, shift, fp_cast, act, clip, isa);
      ASSERT_EQ(got, want) << cpu::name(isa) << " trial " << trial << " scale " << scale
                           << " shift " << shift << " fp_cast " << fp_cast << " bias " << bias
                           << " act " << act;
    }
  }
}

TEST(TailQuantizeSpan, SaturatesAtTheInt8Ends) {
  // Shift 1, (v + 1) >> 1, ties go up: 255 -> 128 clamps to 127; -257 (-128.5) -> -128;
  // -258 -> -129 clamps to -128; 253 -> 127; 254 -> 127; -256 -> -128;
  // INT32 max/min clamp; 1 (0.5) -> 1; -1 (-0.5) -> 0.
  const std::vector<std::int32_t> acc = {255, -257, -258, 253, 254, -256, kMax, kMin, 0, 1, -1};
  for (Isa isa : blocks_testing::isa_paths()) {
    std::vector<std::int32_t> got(acc.size());
    quantize_span(acc.data(), got.data(), acc.size(), 0, 1, 1, 0, -1, 0, isa);
    EXPECT_EQ(got, (std::vector<std::int32_t>{127, -128, -128, 127, 127, -128, 127, -128, 0, 1, 0}))
        << cpu::name(isa);
  }
}

TEST(TailBiasSpan, EveryPathWrapsLikeThe32BitAdder) {
  const std::vector<Isa> paths = blocks_testing::isa_paths();
  std::mt19937 rng(4);
  std::uniform_int_distribution<std::int32_t> any(kMin, kMax);
  for (std::uint64_t n : {0, 1, 7, 8, 9, 33, 64}) {
    std::vector<std::int32_t> acc(n);
    for (auto& a : acc) a = any(rng);
    if (n > 2) acc[0] = kMax, acc[1] = kMin;
    for (const std::int32_t bias : {0, 1, -1, kMax, kMin, any(rng)}) {
      std::vector<std::int32_t> want(n);
      for (std::uint64_t i = 0; i < n; ++i)
        want[i] = static_cast<std::int32_t>(
            static_cast<std::int64_t>(acc[i]) + bias -
            (static_cast<std::int64_t>(acc[i]) + bias > kMax   ? (std::int64_t{1} << 32)
             : static_cast<std::int64_t>(acc[i]) + bias < kMin ? -(std::int64_t{1} << 32)
                                                               : 0));
      for (Isa isa : paths) {
        std::vector<std::int32_t> got(n, 999);
        bias_span(acc.data(), got.data(), n, bias, isa);
        EXPECT_EQ(got, want) << cpu::name(isa) << " n " << n << " bias " << bias;
        std::vector<std::int32_t> in_place = acc;
        bias_span(in_place.data(), in_place.data(), n, bias, isa);
        EXPECT_EQ(in_place, want) << cpu::name(isa) << " in place";
      }
    }
  }
}

}  // namespace
}  // namespace npukit::device
