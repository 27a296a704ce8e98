// device/depthwise.h: every form at every level this CPU has (and the scalar level) against a
// plain nested loop written here over the int8 planes, on random shapes (odd widths, 1..40
// channels, strides 1..4, kernels 1x1..4x4 plus 1x16, 16x1, 5x3, 3x5), the extreme values that
// give the largest sums, mobilenet/efficientnet layer shapes, and every thread count. The
// planes are allocated to their exact size, so a kernel that reads past the last plane is
// caught by the sanitizers of CI.
#include "device/depthwise.h"

#include "common/cpu.h"
#include "common/error.h"
#include "common/parallel.h"

#include <gtest/gtest.h>

#include <iostream>
#include <random>

namespace npukit::device {
namespace {

namespace ck = conv_kernels;

struct Layer {
  std::uint64_t channels, ph, pw, kh, kw, stride;
  std::vector<std::int8_t> planes, taps;
  ck::DepthwiseLanes conv() const {
    return {planes.data(), channels, ph, pw, kh, kw, stride, taps.data()};
  }
};

// The definition, in 64 bits.
std::vector<std::int64_t> plain(const Layer& l) {
  const std::uint64_t oh = (l.ph - l.kh) / l.stride + 1, ow = (l.pw - l.kw) / l.stride + 1;
  std::vector<std::int64_t> out(l.channels * oh * ow, 0);
  for (std::uint64_t k = 0; k < l.channels; ++k)
    for (std::uint64_t y = 0; y < oh; ++y)
      for (std::uint64_t x = 0; x < ow; ++x) {
        std::int64_t sum = 0;
        for (std::uint64_t i = 0; i < l.kh; ++i)
          for (std::uint64_t j = 0; j < l.kw; ++j)
            sum += std::int64_t{l.taps[(k * l.kh + i) * l.kw + j]} *
                   l.planes[(k * l.ph + y * l.stride + i) * l.pw + x * l.stride + j];
        out[(k * oh + y) * ow + x] = sum;
      }
  return out;
}

// Random values (about a third of the taps 0), or the extremes: inputs all -128 with taps all
// -128 (the largest positive sums) or all 127.
Layer make(std::mt19937& rng, std::uint64_t channels, std::uint64_t ph, std::uint64_t pw,
           std::uint64_t kh, std::uint64_t kw, std::uint64_t stride, int values) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Layer l{channels, ph, pw, kh, kw, stride, {}, {}};
  l.planes.resize(channels * ph * pw);
  l.taps.resize(channels * kh * kw);
  for (auto& v : l.planes) v = static_cast<std::int8_t>(values == 0 ? pick(-128, 127) : -128);
  for (auto& v : l.taps)
    v = static_cast<std::int8_t>(values == 1   ? -128
                                 : values == 2 ? 127
                                 : pick(0, 2)  ? pick(-128, 127)
                                               : 0);
  return l;
}

std::vector<Isa> levels() {
  std::vector<Isa> out;
  for (Isa isa : cpu::kAllIsas) {
    if (cpu::supports(isa))
      out.push_back(isa);
    else
      std::cout << "[ skipped  ] the " << cpu::name(isa) << " path: this CPU lacks it\n";
  }
  return out;
}

// Every level and form that takes the shape against the plain loop.
void check_every_path(const Layer& l, const std::string& what) {
  const std::vector<std::int64_t> expected64 = plain(l);
  const std::vector<std::int32_t> expected(expected64.begin(), expected64.end());
  for (Isa isa : levels())
    for (auto form : {ck::DepthwiseForm::kAuto, ck::DepthwiseForm::kPlanar,
                      ck::DepthwiseForm::kLanes, ck::DepthwiseForm::kWindows}) {
      if (form == ck::DepthwiseForm::kPlanar && !ck::depthwise_planar_fits(l.conv())) continue;
      std::vector<std::int32_t> acc(expected.size(), 12345);  // every value is overwritten
      ck::depthwise(l.conv(), acc.data(), isa, form);
      EXPECT_EQ(acc, expected) << what << " " << cpu::name(isa) << " form "
                               << static_cast<int>(form) << ": " << l.channels << " channels "
                               << l.kh << "x" << l.kw << " stride " << l.stride << " on " << l.ph
                               << "x" << l.pw;
    }
}

TEST(Depthwise, EveryFormEqualsThePlainLoopOnRandomShapes) {
  std::mt19937 rng(2026);
  auto pick = [&](int lo, int hi) {
    return static_cast<std::uint64_t>(std::uniform_int_distribution<int>(lo, hi)(rng));
  };
  for (int trial = 0; trial < 300; ++trial) {
    std::uint64_t kh = pick(1, 4), kw = pick(1, 4);
    if (trial % 9 == 0) kh = 1, kw = 16;
    if (trial % 9 == 1) kh = 16, kw = 1;
    if (trial % 9 == 2) kh = 3, kw = 5;
    if (trial % 9 == 3) kh = 5, kw = 3;
    if (trial % 9 == 4) kh = kw = 3;
    const std::uint64_t s = trial % 4 == 3 ? pick(3, 4) : pick(1, 2);
    const std::uint64_t ph = kh + pick(0, 20), pw = kw + pick(0, 45);
    const std::uint64_t channels = trial % 10 == 0 ? 1 : pick(1, 40);
    check_every_path(make(rng, channels, ph, pw, kh, kw, s, trial % 5 == 0 ? 1 + trial % 2 : 0),
                     "trial " + std::to_string(trial));
    if (::testing::Test::HasFailure()) break;
  }
}

// Network layers (mobilenet_v2 / v3, efficientnet_b0 3x3 depthwise, padded by 1), the 56x56 and
// 112x112 ones with fewer channels to keep the test fast: 16-, 32- and 8-pixel row chunks with
// and without remainders.
TEST(Depthwise, NetworkShapesAtExtremesAndRandomValuesEqualThePlainLoop) {
  std::mt19937 rng(7);
  struct Shape {
    std::uint64_t channels, hw, stride;
  };
  for (const Shape& sh :
       {Shape{5, 112, 1}, Shape{3, 112, 2}, Shape{9, 56, 1}, Shape{7, 56, 2}, Shape{19, 28, 1},
        Shape{12, 28, 2}, Shape{40, 14, 1}, Shape{24, 14, 2}, Shape{70, 7, 1}})
    for (int values = 0; values < 3; ++values)
      check_every_path(make(rng, sh.channels, sh.hw + 2, sh.hw + 2, 3, 3, sh.stride, values),
                       "network shape, values " + std::to_string(values));
}

// At most kFewOutputs outputs per channel, where kAuto takes the windows form: a global pool's
// pieces (one kernel row of a 7x7 plane into one pixel, 2048 channels as in resnet50), a 7x7
// window, 2x2 outputs of a 3x3 kernel, a 1x16 row, at the extreme values too.
TEST(Depthwise, FewOutputsEqualThePlainLoop) {
  std::mt19937 rng(31);
  struct Shape {
    std::uint64_t channels, ph, pw, kh, kw, stride;
  };
  for (const Shape& sh :
       {Shape{2048, 1, 7, 1, 7, 1}, Shape{13, 7, 1, 7, 1, 1}, Shape{9, 4, 4, 3, 3, 1},
        Shape{5, 5, 5, 3, 3, 2}, Shape{3, 1, 16, 1, 16, 1}, Shape{6, 2, 5, 2, 4, 1},
        Shape{1, 4, 4, 4, 4, 4}})
    for (int values = 0; values < 3; ++values)
      check_every_path(make(rng, sh.channels, sh.ph, sh.pw, sh.kh, sh.kw, sh.stride, values),
                       "few outputs, values " + std::to_string(values));
}

// Channels are spread over the thread pool: the same integers for every count.
TEST(Depthwise, ResultsAreIdenticalForEveryThreadCount) {
  const unsigned before = thread_count();
  std::mt19937 rng(99);
  const Layer l = make(rng, 37, 17, 23, 3, 3, 1, 0);
  const Layer l2 = make(rng, 29, 18, 21, 3, 3, 2, 0);
  for (const Layer* layer : {&l, &l2}) {
    set_thread_count(1);
    std::vector<std::int32_t> one(plain(*layer).size());
    ck::depthwise(layer->conv(), one.data());
    for (unsigned threads : {2u, 3u, 5u}) {
      set_thread_count(threads);
      std::vector<std::int32_t> many(one.size(), 7);
      ck::depthwise(layer->conv(), many.data());
      EXPECT_EQ(many, one) << threads;
    }
  }
  set_thread_count(before);
}

TEST(Depthwise, ThePlanarFormRefusesWhatItDoesNotTake) {
  std::mt19937 rng(5);
  const Layer l = make(rng, 2, 9, 9, 3, 3, 3, 0);
  std::vector<std::int32_t> acc(2 * 9);
  EXPECT_THROW(ck::depthwise(l.conv(), acc.data(), Isa::kAuto, ck::DepthwiseForm::kPlanar), Error);
  const Layer big = make(rng, 1, 9, 9, 5, 5, 1, 0);  // 25 taps: more than a PE column's rows
  EXPECT_FALSE(ck::depthwise_planar_fits(big.conv()));
  std::vector<std::int32_t> acc2(25);
  EXPECT_THROW(ck::depthwise(big.conv(), acc2.data()), Error);
}

}  // namespace
}  // namespace npukit::device
