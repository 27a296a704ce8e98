// The tail's vectorised common case (quantize_span, device/block.h) on every path the CPU has,
// against the per-value definition written here (64-bit product, rounding shift, int8 clamp,
// ReLU / Clip), on random and extreme accumulators, scales, shifts and biases.
#include "device/block.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <limits>
#include <random>

namespace npukit::device {
namespace {

std::int32_t definition(std::int32_t acc, std::int32_t bias, std::int32_t scale, int shift, int act,
                        std::int32_t clip) {
  const auto v =
      static_cast<std::int32_t>(static_cast<std::uint32_t>(acc) + static_cast<std::uint32_t>(bias));
  const __int128 p = static_cast<__int128>(v) * scale;
  const __int128 q = shift == 0 ? p : (p + (static_cast<__int128>(1) << (shift - 1))) >> shift;
  auto r = static_cast<std::int32_t>(std::clamp<__int128>(q, -128, 127));
  if (act == 0) r = std::max(r, 0);
  if (act == 1) r = std::min(std::max(r, 0), clip);
  return r;
}

TEST(TailQuantizeSpan, EveryPathEqualsTheDefinition) {
  std::vector<Isa> paths = {Isa::kScalar};
  for (Isa isa : cpu::kAllIsas)
    if (isa != Isa::kScalar) {
      if (cpu::supports(isa))
        paths.push_back(isa);
      else
        std::cout << "[ skipped  ] the " << cpu::name(isa) << " path: this CPU lacks it\n";
    }
  std::mt19937 rng(9);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const std::int32_t kMin = std::numeric_limits<std::int32_t>::min();
  const std::int32_t kMax = std::numeric_limits<std::int32_t>::max();
  for (int trial = 0; trial < 400; ++trial) {
    const auto n = static_cast<std::uint64_t>(pick(0, 70));
    std::vector<std::int32_t> acc(n);
    for (auto& a : acc) {
      switch (pick(0, 3)) {
        case 0:
          a = static_cast<std::int32_t>(pick(kMin, kMax));
          break;
        case 1:
          a = static_cast<std::int32_t>(pick(-5000, 5000));
          break;
        case 2:
          a = pick(0, 1) ? kMin : kMax;
          break;
        default:
          a = static_cast<std::int32_t>(pick(-40, 40));
      }
    }
    const auto scale = static_cast<std::int32_t>(pick(0, 4) ? pick(-32768, 32767) : -32768);
    const int shift = static_cast<int>(trial % 7 == 0 ? pick(0, 2) : pick(0, 62));
    const auto bias = static_cast<std::int32_t>(pick(0, 1) ? 0 : pick(kMin, kMax));
    const int act = static_cast<int>(pick(-1, 1));
    const auto clip = static_cast<std::int32_t>(pick(0, 255));
    std::vector<std::int32_t> want(n);
    for (std::uint64_t i = 0; i < n; ++i)
      want[i] = definition(acc[i], bias, scale, shift, act, clip);
    for (Isa isa : paths) {
      std::vector<std::int32_t> got(n, 999);
      quantize_span(acc.data(), got.data(), n, bias, scale, shift, act, clip, isa);
      ASSERT_EQ(got, want) << cpu::name(isa) << " trial " << trial << " scale " << scale
                           << " shift " << shift << " bias " << bias << " act " << act;
    }
  }
}

}  // namespace
}  // namespace npukit::device
