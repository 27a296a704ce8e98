// The Winograd path (device/conv_winograd.h) against a plain nested loop written here and
// against dense_conv's scalar level (the direct tiles): random 3x3 stride-1 shapes (odd and even
// planes, 1..many channels, zero channels, output channels not a multiple of 8, the split and
// snapshot), the extreme values at the channel bound and just past it (where dense_conv must
// fall back to the direct form), the network shapes, kept weight transforms, thread counts, and
// the pieces one by one (plain C++ and AVX2 transforms mixed), so each is checked on its own.
#include "device/conv_winograd.h"
#include "device/conv_kernels_test_support.h"

#include "common/cpu.h"
#include "common/error.h"
#include "common/parallel.h"

#include <gtest/gtest.h>

#include <iostream>
#include <random>

namespace npukit::device {
namespace {

namespace ck = conv_kernels;
namespace d = conv_kernels::detail;

using conv_test::Problem;

struct Result {
  std::vector<std::int32_t> acc, snapshot;
  bool operator==(const Result&) const = default;
};

// The definition (conv_kernels_test_support.h's plain loop), as the int32 the kernels write.
Result plain(const ck::DenseConv& c) {
  std::vector<std::int64_t> acc, snapshot;
  conv_test::plain_conv(c, acc, snapshot);
  return {conv_test::narrow(acc), conv_test::narrow(snapshot)};
}

Result prepared(const ck::DenseConv& c) {
  Result r;
  r.acc.assign(c.kn * c.oh() * c.ow(), 0x5A5A5A5A);  // every value must be written
  r.snapshot.assign((c.kn - c.snapshot_from) * c.oh() * c.ow(), 0x5A5A5A5A);
  return r;
}
std::int32_t* snapshot_of(const ck::DenseConv& c, Result& r) {
  return c.snapshot_from < c.kn ? r.snapshot.data() : nullptr;
}

Result run(const ck::DenseConv& c, Isa isa) {
  Result r = prepared(c);
  ck::dense_conv(c, r.acc.data(), snapshot_of(c, r), isa);
  return r;
}

Result run_winograd(const ck::DenseConv& c, const d::WinogradKernels& kernels) {
  Result r = prepared(c);
  d::dense_conv_winograd(c, r.acc.data(), snapshot_of(c, r), kernels);
  return r;
}

bool have_avx2() { return cpu::supports(Isa::kAvx2); }

// The Winograd pieces in every combination this CPU can run: all plain C++, all AVX2, and each
// AVX2 piece alone among plain C++ ones.
std::vector<std::pair<std::string, d::WinogradKernels>> kernel_sets() {
  std::vector<std::pair<std::string, d::WinogradKernels>> sets = {
      {"scalar", d::winograd_kernels_scalar()}};
  if (!have_avx2()) {
    std::cout << "[ skipped  ] the AVX2 Winograd pieces: this CPU lacks AVX2\n";
    return sets;
  }
  const d::WinogradKernels s = d::winograd_kernels_scalar(), a = d::winograd_kernels_avx2();
  sets.push_back({"avx2", a});
  sets.push_back({"avx2 pack", {a.pack, s.input, s.tiles, s.output}});
  sets.push_back({"avx2 input", {s.pack, a.input, s.tiles, s.output}});
  sets.push_back({"avx2 tiles", {s.pack, s.input, a.tiles, s.output}});
  sets.push_back({"avx2 output", {s.pack, s.input, s.tiles, a.output}});
  return sets;
}

// Every way to compute it against `want`: the Winograd pieces, and dense_conv at every level the
// CPU has (the same sums whichever form dense_conv takes).
void expect_all_paths(const ck::DenseConv& c, const Result& want, bool pieces = true) {
  if (pieces) {
    for (const auto& [name, kernels] : kernel_sets())
      EXPECT_EQ(run_winograd(c, kernels), want) << name;
  }
  for (Isa isa : cpu::kAllIsas)
    if (cpu::supports(isa)) {
      EXPECT_EQ(run(c, isa), want) << cpu::name(isa);
    }
}

// kAlternating: -128 and 127 at random, inputs and weights.
enum class Values { kUniform, kAllMin, kMinTimesMax, kAlternating, kSparse };

void fill(Problem& p, Values values, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(-128, 127);
  for (std::uint64_t i = 0; i < p.planes.size(); ++i)
    p.planes[i] =
        static_cast<std::int8_t>(values == Values::kUniform || values == Values::kSparse ? byte(rng)
                                 : values == Values::kAlternating ? (rng() % 2 ? 127 : -128)
                                                                  : -128);
  for (std::uint64_t i = 0; i < p.weights.size(); ++i) switch (values) {
      case Values::kUniform:
        p.weights[i] = static_cast<std::int8_t>(byte(rng));
        break;
      case Values::kAllMin:
        p.weights[i] = -128;
        break;
      case Values::kMinTimesMax:
        p.weights[i] = 127;
        break;
      case Values::kAlternating:  // -128 and 127 at random: the transforms mix both signs
        p.weights[i] = static_cast<std::int8_t>(rng() % 2 ? -128 : 127);
        break;
      case Values::kSparse:
        p.weights[i] = static_cast<std::int8_t>(rng() % 4 == 0 ? byte(rng) : 0);
        break;
    }
}

Problem problem(std::uint64_t planes, std::uint64_t h, std::uint64_t w, std::uint64_t kn) {
  Problem p;
  ck::DenseConv& c = p.conv;
  c.plane_count = planes;
  c.padded_h = h, c.padded_w = w;
  c.kh = c.kw = 3, c.stride = 1;
  c.kn = kn;
  for (std::uint64_t i = 0; i < planes; ++i) c.channels.push_back(static_cast<std::int64_t>(i));
  if (c.channels.size() % 2) c.channels.push_back(-1);
  c.split = c.channels.size();
  c.snapshot_from = kn;
  p.planes.resize(planes * h * w);
  p.weights.resize(kn * planes * 9);
  c.planes = p.planes.data();
  c.weights = p.weights.data();
  return p;
}

TEST(ConvWinograd, RandomShapesEqualThePlainLoopAndTheScalarLevel) {
  std::mt19937 rng(1313);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 80; ++trial) {
    // Planes 3..22 high and wide (1..20 outputs: odd, even, single rows and columns).
    Problem p =
        problem(static_cast<std::uint64_t>(pick(1, 40)), static_cast<std::uint64_t>(pick(3, 22)),
                static_cast<std::uint64_t>(pick(3, 22)), static_cast<std::uint64_t>(pick(1, 75)));
    ck::DenseConv& c = p.conv;
    conv_test::random_channels(c, rng, 3);
    fill(p, static_cast<Values>(trial % 5), rng);
    SCOPED_TRACE(::testing::Message()
                 << "trial " << trial << ": " << c.plane_count << " planes " << c.padded_h << "x"
                 << c.padded_w << ", " << c.channels.size() << " channels split at " << c.split
                 << ", kn " << c.kn << " snapshot from " << c.snapshot_from);
    ASSERT_TRUE(ck::winograd_applies(c));
    const Result want = plain(c);
    expect_all_paths(c, want);
    if (::testing::Test::HasFailure()) break;
  }
}

// 3640 channels of -128 x -128 (and the other extremes) give sums whose 4 Y is just below 2^31:
// exact on every path. 3642 channels are past the bound: winograd_applies says no, the Winograd
// driver refuses, and dense_conv's AVX2 level takes the direct form (still exact).
TEST(ConvWinograd, ExtremeValuesAtTheChannelBoundAndJustPast) {
  std::mt19937 rng(7);
  for (const std::uint64_t channels : {d::kWinogradMaxChannels, d::kWinogradMaxChannels + 2})
    for (const Values values : {Values::kAllMin, Values::kMinTimesMax, Values::kAlternating}) {
      // 10x10 outputs: 25 tiles, enough for winograd_pays (dense_conv does not dispatch it today).
      Problem p = problem(channels, 12, 12, 3);
      ck::DenseConv& c = p.conv;
      c.split = channels / 2 / 2 * 2;
      c.snapshot_from = 1;
      fill(p, values, rng);
      SCOPED_TRACE(::testing::Message()
                   << channels << " channels, values " << static_cast<int>(values));
      const Result want = plain(c);
      if (values == Values::kAllMin) {
        EXPECT_EQ(want.acc[0], static_cast<std::int64_t>(channels) * 9 * 128 * 128);
      }
      const bool within = channels <= d::kWinogradMaxChannels;
      EXPECT_EQ(ck::winograd_applies(c), within);
      EXPECT_TRUE(ck::winograd_pays(c));
      if (within) {
        expect_all_paths(c, want);
      } else {
        EXPECT_THROW(run_winograd(c, d::winograd_kernels_scalar()), Error);
        expect_all_paths(c, want, false);
      }
    }
}

// resnet18/50's 3x3 stride-1 layers (input planes and sizes as in the networks, fewer output
// channels to keep the plain loop fast; 72 crosses a 64-channel unit and ends in a partial
// block), with a snapshot inside a unit.
TEST(ConvWinograd, NetworkShapesEqualThePlainLoop) {
  std::mt19937 rng(56);
  struct Shape {
    std::uint64_t planes, hw, kn;
  };
  for (const Shape& s :
       {Shape{64, 56, 12}, Shape{128, 28, 20}, Shape{256, 14, 36}, Shape{512, 7, 72}}) {
    Problem p = problem(s.planes, s.hw + 2, s.hw + 2, s.kn);
    p.conv.split = s.planes / 2;
    p.conv.snapshot_from = s.kn / 3;
    fill(p, Values::kUniform, rng);
    SCOPED_TRACE(::testing::Message() << s.planes << " channels " << s.hw << "x" << s.hw);
    const Result want = plain(p.conv);
    EXPECT_EQ(run_winograd(p.conv, d::winograd_kernels_scalar()), want) << "scalar";
    if (have_avx2()) {
      EXPECT_EQ(run_winograd(p.conv, d::winograd_kernels_avx2()), want) << "avx2";
    }
    for (Isa isa : cpu::kAllIsas)
      if (cpu::supports(isa)) {
        EXPECT_EQ(run(p.conv, isa), want) << cpu::name(isa);
      }
  }
}

// The transformed weights kept in DenseConv::packs (as conv.cpp keeps them per mapped blob):
// later calls on new inputs give the plain loop's sums; the first call filled the slot.
TEST(ConvWinograd, KeptWeightTransformsGiveThePlainSumsOnNewInputs) {
  std::mt19937 rng(99);
  Problem p = problem(21, 11, 16, 19);
  p.conv.channels.insert(p.conv.channels.begin() + 5, -1);
  p.conv.channels.push_back(-1);
  p.conv.split = 8;
  p.conv.snapshot_from = 3;
  fill(p, Values::kUniform, rng);
  for (const auto& [name, kernels] : kernel_sets()) {
    ck::WeightPacks packs;
    p.conv.packs = &packs;
    for (int image = 0; image < 3; ++image) {
      std::uniform_int_distribution<int> byte(-128, 127);
      for (auto& v : p.planes) v = static_cast<std::int8_t>(byte(rng));
      EXPECT_EQ(run_winograd(p.conv, kernels), plain(p.conv)) << name << " image " << image;
      EXPECT_TRUE(packs.winograd.ready());
    }
  }
}

TEST(ConvWinograd, ResultsAreIdenticalForEveryThreadCount) {
  const unsigned before = thread_count();
  std::mt19937 rng(5);
  Problem p = problem(30, 17, 12, 140);
  p.conv.split = 10;
  p.conv.snapshot_from = 70;
  fill(p, Values::kUniform, rng);
  const Result want = plain(p.conv);
  for (unsigned threads : {1u, 2u, 3u, 5u}) {
    set_thread_count(threads);
    for (const auto& [name, kernels] : kernel_sets())
      EXPECT_EQ(run_winograd(p.conv, kernels), want) << name << ", " << threads << " threads";
  }
  set_thread_count(before);
}

TEST(ConvWinograd, RefusesWhatItDoesNotCompute) {
  Problem p = problem(4, 8, 8, 3);
  EXPECT_TRUE(ck::winograd_applies(p.conv));
  ck::DenseConv c = p.conv;
  c.stride = 2;
  EXPECT_FALSE(ck::winograd_applies(c));
  EXPECT_THROW(run_winograd(c, d::winograd_kernels_scalar()), Error);
  c = p.conv;
  c.kw = 2;
  EXPECT_FALSE(ck::winograd_applies(c));
  c = p.conv;
  c.channels = {0, 1, 2};
  c.split = 3;
  EXPECT_THROW(run_winograd(c, d::winograd_kernels_scalar()), Error);
  c = p.conv;
  c.channels = {0, 9};
  c.split = 2;
  EXPECT_THROW(run_winograd(c, d::winograd_kernels_scalar()), Error);
  c = p.conv;
  c.planes = nullptr;  // DRAM words only (DenseConv::words): the Winograd path needs planes
  EXPECT_THROW(run_winograd(c, d::winograd_kernels_scalar()), Error);
  c = p.conv;
  c.snapshot_from = 0;  // a snapshot is asked for, but none is given
  std::vector<std::int32_t> acc(c.kn * c.oh() * c.ow());
  EXPECT_THROW(d::dense_conv_winograd(c, acc.data(), nullptr, d::winograd_kernels_scalar()), Error);
}

}  // namespace
}  // namespace npukit::device
