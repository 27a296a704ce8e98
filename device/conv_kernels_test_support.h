// What the dense conv tests (conv_kernels_test.cpp, conv_winograd_test.cpp) share: a problem
// with its storage, the plain nested loop that defines the sums, and random channel lists.
#pragma once

#include "device/conv_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace npukit::device::conv_test {

struct Problem {
  conv_kernels::DenseConv conv;
  std::vector<std::int8_t> planes, weights;
};

// The definition: for every output channel k and pixel (y, x), the sum over the listed channels
// and the taps of weight * input, in 64 bits; the snapshot is the same over channels [0, split).
inline void plain_conv(const conv_kernels::DenseConv& c, std::vector<std::int64_t>& acc,
                       std::vector<std::int64_t>& snapshot) {
  const std::uint64_t oh = (c.padded_h - c.kh) / c.stride + 1;
  const std::uint64_t ow = (c.padded_w - c.kw) / c.stride + 1;
  acc.assign(c.kn * oh * ow, 0);
  snapshot.assign((c.kn - c.snapshot_from) * oh * ow, 0);
  for (std::uint64_t k = 0; k < c.kn; ++k)
    for (std::uint64_t y = 0; y < oh; ++y)
      for (std::uint64_t x = 0; x < ow; ++x) {
        std::int64_t sum = 0, first = 0;
        for (std::uint64_t i = 0; i < c.channels.size(); ++i) {
          if (i == c.split) first = sum;
          const std::int64_t ch = c.channels[i];
          if (ch < 0) continue;
          for (std::uint64_t dy = 0; dy < c.kh; ++dy)
            for (std::uint64_t dx = 0; dx < c.kw; ++dx) {
              const std::int64_t in =
                  c.planes[(static_cast<std::uint64_t>(ch) * c.padded_h + y * c.stride + dy) *
                               c.padded_w +
                           x * c.stride + dx];
              const std::int64_t w =
                  c.weights[((k * c.plane_count + static_cast<std::uint64_t>(ch)) * c.kh + dy) *
                                c.kw +
                            dx];
              sum += in * w;
            }
        }
        if (c.split == c.channels.size()) first = sum;
        acc[(k * oh + y) * ow + x] = sum;
        if (k >= c.snapshot_from) snapshot[((k - c.snapshot_from) * oh + y) * ow + x] = first;
      }
}

// The plain sums as the int32 the kernels write (each must fit).
inline std::vector<std::int32_t> narrow(const std::vector<std::int64_t>& v) {
  std::vector<std::int32_t> out;
  out.reserve(v.size());
  for (std::int64_t x : v) {
    EXPECT_EQ(x, static_cast<std::int32_t>(x)) << "the plain sum leaves int32";
    out.push_back(static_cast<std::int32_t>(x));
  }
  return out;
}

// A random channel list for `c` (its plane_count and kn set): a random subset of the planes in
// random order with 0..max_zeros zero channels (-1) mixed in, padded to an even length; a split
// at a random even point and a snapshot from a random output channel (or none).
inline void random_channels(conv_kernels::DenseConv& c, std::mt19937& rng, int max_zeros) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<std::int64_t> all;
  for (std::uint64_t i = 0; i < c.plane_count; ++i) all.push_back(static_cast<std::int64_t>(i));
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<std::size_t>(pick(0, static_cast<int>(c.plane_count))));
  for (int z = pick(0, max_zeros); z > 0; --z)
    all.insert(all.begin() + pick(0, static_cast<int>(all.size())), -1);
  if (all.size() % 2) all.push_back(-1);
  c.channels = all;
  c.split = 2 * static_cast<std::uint64_t>(pick(0, static_cast<int>(all.size() / 2)));
  c.snapshot_from = static_cast<std::uint64_t>(pick(0, 2) == 0 ? static_cast<int>(c.kn)
                                                               : pick(0, static_cast<int>(c.kn)));
}

}  // namespace npukit::device::conv_test
