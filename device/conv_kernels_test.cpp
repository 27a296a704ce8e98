// The CONV arithmetic (device/conv_kernels.h): every SIMD path this CPU has (common/cpu.h levels;
// the others are skipped with a message) against the scalar tiles, and all against a plain
// nested loop written here, on random shapes and on the extreme values that give the largest
// sums; the VNNI quad packing and its 128 * sum(w) offset through a plain C++ model of vpdpbusd
// (so they are checked on CPUs without VNNI too); the depthwise connection kernel against a
// plain loop; then whole CONV layers through the device's byte interface at each level, against
// the NCHW loop of test_programs.h (raw int32 sums and the 14.11 DRAM partial sums, on all three
// arrays, depthwise and ConvType PW included).
#include "device/conv_kernels.h"

#include "common/cpu.h"
#include "common/error.h"
#include "common/parallel.h"
#include "device/conv_kernels_test_support.h"
#include "device/device.h"
#include "device/test_programs.h"

#include <gtest/gtest.h>

#include <functional>
#include <iostream>
#include <random>

namespace npukit::device {
namespace {

namespace ck = conv_kernels;
using namespace testing;

using conv_test::narrow;
using conv_test::plain_conv;
using conv_test::Problem;

struct Result {
  std::vector<std::int32_t> acc, snapshot;
};

Result run_gemm(const ck::DenseConv& c, ck::detail::GemmTiles quad_tiles,
                ck::detail::GemmTiles pair_tiles, ck::detail::LanesOut out,
                ck::detail::QuadInterleave interleave, bool offset_quads = false,
                std::uint64_t quad_blocks = 2, std::uint64_t chunk_steps = 0);

// isa kAuto here means: the u8 quads of x + 128 with the plain C++ vpdpbusd (gemm_quads_scalar),
// the VNNI level's operands, offsets and blocks per tile on any CPU.
Result run(const ck::DenseConv& c, Isa isa) {
  if (isa == Isa::kAuto)
    return run_gemm(c, ck::detail::gemm_quads_scalar, ck::detail::gemm_pairs_scalar,
                    ck::detail::lanes_out_scalar, ck::detail::interleave_quads_scalar, true,
                    ck::detail::kGemmVnniBlocks);
  Result r;
  r.acc.assign(c.kn * c.oh() * c.ow(), 0x5A5A5A5A);  // every value must be written
  r.snapshot.assign((c.kn - c.snapshot_from) * c.oh() * c.ow(), 0x5A5A5A5A);
  std::int32_t* snap = c.snapshot_from < c.kn ? r.snapshot.data() : nullptr;
  ck::dense_conv(c, r.acc.data(), snap, isa);
  return r;
}

// The GEMM form (output channels in the lanes) with the given tiles, output transposition and
// quad interleave (quad_tiles null: pairs only), and with `offset_quads` the u8 quads of x + 128
// on signed inputs; quad_blocks blocks of 8 channels per quad tile call, the quads' steps in
// chunks of chunk_steps (0: none).
Result run_gemm(const ck::DenseConv& c, ck::detail::GemmTiles quad_tiles,
                ck::detail::GemmTiles pair_tiles, ck::detail::LanesOut out,
                ck::detail::QuadInterleave interleave, bool offset_quads, std::uint64_t quad_blocks,
                std::uint64_t chunk_steps) {
  Result r;
  r.acc.assign(c.kn * c.oh() * c.ow(), 0x5A5A5A5A);
  r.snapshot.assign((c.kn - c.snapshot_from) * c.oh() * c.ow(), 0x5A5A5A5A);
  std::int32_t* snap = c.snapshot_from < c.kn ? r.snapshot.data() : nullptr;
  ck::detail::dense_conv_gemm(c, r.acc.data(), snap, quad_tiles, pair_tiles, out, interleave, {},
                              nullptr, offset_quads, quad_blocks, nullptr, chunk_steps);
  return r;
}

// Pair tiles that must not run: the quad forms on inputs that are all 0..127.
void no_pairs(const ck::detail::GemmOperands&, std::uint64_t, std::uint64_t, const std::uint64_t*,
              std::uint64_t, std::uint64_t, std::uint64_t, bool, std::int32_t*) {
  ADD_FAILURE() << "the GEMM form took int16 pairs on inputs that are all 0..127";
}

// Every GEMM-form combination this CPU can run: pairs, and u8 quads (on inputs with a negative
// value, `nonnegative` false, they must fall back to the pair tiles; else they must not); plain
// C++ tiles and, where the CPU has them, the AVX2 tiles (each with both output transpositions and
// both quad interleaves) and the AVX-512 VNNI ones; and the u8 quads of x + 128 (any input,
// never the pairs), packed interleaved, or at stride 1 without an interleave from the planes.
// Each is compared with the plain loop's sums.
void expect_gemm_forms(const ck::DenseConv& c, bool nonnegative,
                       const std::vector<std::int32_t>& acc,
                       const std::vector<std::int32_t>& snapshot) {
  namespace d = ck::detail;
  struct Form {
    const char* name;
    d::GemmTiles quads, pairs;
    d::LanesOut out;
    d::QuadInterleave interleave;
    Isa needs;
    bool offset_quads = false;  // then the pair tiles must never run
    std::uint64_t blocks = 2;   // per quad tile call
    std::uint64_t chunk_steps = 0;
  };
  constexpr std::uint64_t kVnni = d::kGemmVnniBlocks;
  const Form forms[] = {
      {"gemm pairs scalar", nullptr, d::gemm_pairs_scalar, d::lanes_out_scalar,
       d::interleave_quads_scalar, Isa::kScalar},
      {"gemm quads scalar", d::gemm_quads_scalar, d::gemm_pairs_scalar, d::lanes_out_scalar,
       d::interleave_quads_scalar, Isa::kScalar},
      {"gemm pairs avx2", nullptr, d::gemm_pairs_avx2, d::lanes_out_avx2, d::interleave_quads_avx2,
       Isa::kAvx2},
      {"gemm pairs avx2, scalar out", nullptr, d::gemm_pairs_avx2, d::lanes_out_scalar,
       d::interleave_quads_scalar, Isa::kAvx2},
      {"gemm quads avx2", d::gemm_quads_avx2, d::gemm_pairs_avx2, d::lanes_out_avx2,
       d::interleave_quads_avx2, Isa::kAvx2},
      {"gemm quads avx2, scalar interleave", d::gemm_quads_avx2, d::gemm_pairs_avx2,
       d::lanes_out_avx2, d::interleave_quads_scalar, Isa::kAvx2},
      // Chunks of a few steps, so small problems are cut often, next to singles too.
      {"gemm quads avx2, chunks of 3 steps", d::gemm_quads_avx2, d::gemm_pairs_avx2,
       d::lanes_out_avx2, d::interleave_quads_avx2, Isa::kAvx2, false, 2, 3},
      {"gemm quads avx2, chunks of 4 steps", d::gemm_quads_avx2, d::gemm_pairs_avx2,
       d::lanes_out_avx2, d::interleave_quads_avx2, Isa::kAvx2, false, 2, 4},
      {"gemm quads scalar, chunks of 5 steps", d::gemm_quads_scalar, d::gemm_pairs_scalar,
       d::lanes_out_scalar, d::interleave_quads_scalar, Isa::kScalar, false, 2, 5},
      {"gemm quads scalar, avx2 out and interleave", d::gemm_quads_scalar, d::gemm_pairs_scalar,
       d::lanes_out_avx2, d::interleave_quads_avx2, Isa::kAvx2},
      {"gemm quads avxvnni", d::gemm_quads_avxvnni, d::gemm_pairs_avx2, d::lanes_out_avx2,
       d::interleave_quads_avx2, Isa::kAvxVnni},
      {"gemm offset quads avxvnni", d::gemm_quads_avxvnni, d::gemm_pairs_avx2, d::lanes_out_avx2,
       d::interleave_quads_avx2, Isa::kAvxVnni, true},
      {"gemm offset quads avxvnni, chunks of 4 steps", d::gemm_quads_avxvnni, d::gemm_pairs_avx2,
       d::lanes_out_avx2, d::interleave_quads_avx2, Isa::kAvxVnni, true, 2, 4},
      {"gemm quads avx512vnni", d::gemm_quads_avx512vnni, d::gemm_pairs_avx2, d::lanes_out_avx2,
       d::interleave_quads_avx2, Isa::kAvx512Vnni},
      {"gemm quads avx512vnni, 4 blocks", d::gemm_quads_avx512vnni, d::gemm_pairs_avx2,
       d::lanes_out_avx2, d::interleave_quads_avx2, Isa::kAvx512Vnni, false, 4},
      {"gemm quads avx512vnni, 8 blocks", d::gemm_quads_avx512vnni, d::gemm_pairs_avx2,
       d::lanes_out_avx2, d::interleave_quads_avx2, Isa::kAvx512Vnni, false, kVnni},
      {"gemm offset quads scalar", d::gemm_quads_scalar, d::gemm_pairs_scalar, d::lanes_out_scalar,
       d::interleave_quads_scalar, Isa::kScalar, true},
      {"gemm offset quads scalar, planes", d::gemm_quads_scalar, d::gemm_pairs_scalar,
       d::lanes_out_scalar, nullptr, Isa::kScalar, true},
      {"gemm offset quads avx512vnni", d::gemm_quads_avx512vnni, d::gemm_pairs_avx2,
       d::lanes_out_avx2, d::interleave_quads_avx2, Isa::kAvx512Vnni, true},
      {"gemm offset quads avx512vnni, 4 blocks", d::gemm_quads_avx512vnni, d::gemm_pairs_avx2,
       d::lanes_out_avx2, d::interleave_quads_avx2, Isa::kAvx512Vnni, true, 4},
      {"gemm offset quads avx512vnni, 8 blocks", d::gemm_quads_avx512vnni, d::gemm_pairs_avx2,
       d::lanes_out_avx2, d::interleave_quads_avx2, Isa::kAvx512Vnni, true, kVnni},
      {"gemm offset quads scalar, 8 blocks", d::gemm_quads_scalar, d::gemm_pairs_scalar,
       d::lanes_out_scalar, d::interleave_quads_scalar, Isa::kScalar, true, kVnni},
  };
  for (const Form& f : forms) {
    if (!cpu::supports(f.needs)) continue;
    const bool quads_only = f.quads && (nonnegative || f.offset_quads);
    const Result r = run_gemm(c, f.quads, quads_only ? no_pairs : f.pairs, f.out, f.interleave,
                              f.offset_quads, f.blocks, f.chunk_steps);
    EXPECT_EQ(r.acc, acc) << f.name;
    if (c.snapshot_from < c.kn) {
      EXPECT_EQ(r.snapshot, snapshot) << f.name;
    }
  }
}

// The quad interleave against a plain loop: lengths around the 32-value vector steps, null
// planes, and one negative value at every position class (vector body, tail, absent).
TEST(ConvKernels, QuadInterleaveEqualsThePlainLoopAndFindsNegatives) {
  std::vector<ck::detail::QuadInterleave> paths = {ck::detail::interleave_quads_scalar};
  if (cpu::supports(Isa::kAvx2)) paths.push_back(ck::detail::interleave_quads_avx2);
  std::mt19937 rng(5);
  for (const std::uint64_t n : {0, 1, 31, 32, 33, 64, 95, 200}) {
    for (int trial = 0; trial < 12; ++trial) {
      std::vector<std::int8_t> planes(4 * n);
      for (auto& v : planes) v = static_cast<std::int8_t>(rng() % 128);
      const int null_plane = trial % 5;  // 4: none null
      std::int64_t negative = -1;
      if (trial % 3 != 0 && n > 0) {
        negative = static_cast<std::int64_t>(rng() % (4 * n));
        planes[static_cast<std::uint64_t>(negative)] =
            static_cast<std::int8_t>(trial % 2 ? -128 : -1);
      }
      const std::int8_t* src[4];
      for (int b = 0; b < 4; ++b)
        src[b] = b == null_plane ? nullptr : planes.data() + static_cast<std::uint64_t>(b) * n;
      const bool negative_read =
          negative >= 0 && static_cast<std::uint64_t>(negative) / std::max<std::uint64_t>(n, 1) !=
                               static_cast<std::uint64_t>(null_plane);
      std::vector<std::uint32_t> want(n);
      for (std::uint64_t i = 0; i < n; ++i)
        for (int b = 0; b < 4; ++b)
          if (src[b])
            want[i] |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(src[b][i])) << (8 * b);
      for (const auto interleave : paths) {
        std::vector<std::uint32_t> got(n, 0xDEADBEEF);
        EXPECT_EQ(interleave(src, n, got.data()), !negative_read) << n << " values";
        EXPECT_EQ(got, want) << n << " values";
      }
    }
  }
}

// The SIMD levels this CPU has, after telling the log which it lacks (once per test).
std::vector<Isa> simd_levels() {
  std::vector<Isa> out;
  for (Isa isa : cpu::kAllIsas) {
    if (isa == Isa::kScalar) continue;
    if (cpu::supports(isa))
      out.push_back(isa);
    else
      std::cout << "[ skipped  ] the " << cpu::name(isa) << " path: this CPU lacks it\n";
  }
  return out;
}

// Value patterns: uniform, all -128 (largest positive products), -128 against 127 (largest
// negative), and sparse weights with zeros.
enum class Values { kUniform, kAllMin, kMinTimesMax, kSparse };

Problem random_problem(std::mt19937& rng, Values values) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Problem p;
  ck::DenseConv& c = p.conv;
  c.plane_count = static_cast<std::uint64_t>(pick(1, 70));
  if (pick(0, 5) == 0) {  // a long thin kernel
    c.kh = static_cast<std::uint64_t>(pick(0, 1) ? 1 : pick(5, 7));
    c.kw = c.kh == 1 ? static_cast<std::uint64_t>(pick(5, 7)) : 1;
  } else {
    c.kh = static_cast<std::uint64_t>(pick(1, 4));
    c.kw = static_cast<std::uint64_t>(pick(1, 4));
  }
  c.stride = static_cast<std::uint64_t>(pick(1, 4));
  // Sizes include a single output row or column (1xN, Nx1) and non-square planes.
  c.padded_h = c.kh + static_cast<std::uint64_t>(pick(0, 3) == 0 ? 0 : pick(0, 14));
  c.padded_w = c.kw + static_cast<std::uint64_t>(pick(0, 3) == 0 ? 0 : pick(0, 30));
  c.kn = static_cast<std::uint64_t>(pick(1, 70));
  conv_test::random_channels(c, rng, 2);
  p.planes.resize(c.plane_count * c.padded_h * c.padded_w);
  p.weights.resize(c.kn * c.plane_count * c.kh * c.kw);
  std::uniform_int_distribution<int> byte(-128, 127);
  for (auto& v : p.planes)
    v = static_cast<std::int8_t>(values == Values::kUniform ? byte(rng) : -128);
  for (auto& v : p.weights) {
    switch (values) {
      case Values::kUniform:
        v = static_cast<std::int8_t>(byte(rng));
        break;
      case Values::kAllMin:
        v = -128;
        break;
      case Values::kMinTimesMax:
        v = 127;
        break;
      case Values::kSparse:
        v = static_cast<std::int8_t>(pick(0, 3) == 0 ? byte(rng) : 0);
        break;
    }
  }
  c.planes = p.planes.data();
  c.weights = p.weights.data();
  return p;
}

TEST(ConvKernels, EveryPathEqualsThePlainLoopOnRandomShapes) {
  const std::vector<Isa> levels = simd_levels();
  std::mt19937 rng(2024);
  int checked = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const auto values = static_cast<Values>(trial % 4);
    const Problem p = random_problem(rng, values);
    const ck::DenseConv& c = p.conv;
    SCOPED_TRACE(::testing::Message()
                 << "trial " << trial << ": " << c.plane_count << " planes " << c.padded_h << "x"
                 << c.padded_w << ", kernel " << c.kh << "x" << c.kw << " stride " << c.stride
                 << ", " << c.channels.size() << " channels split at " << c.split << ", kn " << c.kn
                 << " snapshot from " << c.snapshot_from);
    std::vector<std::int64_t> acc, snapshot;
    plain_conv(c, acc, snapshot);
    const Result scalar = run(c, Isa::kScalar);
    EXPECT_EQ(scalar.acc, narrow(acc));
    if (c.snapshot_from < c.kn) {
      EXPECT_EQ(scalar.snapshot, narrow(snapshot));
    }
    expect_gemm_forms(c, false, narrow(acc), narrow(snapshot));
    const Result quads = run(c, Isa::kAuto);
    EXPECT_EQ(quads.acc, scalar.acc) << "quad packing (plain vpdpbusd)";
    EXPECT_EQ(quads.snapshot, scalar.snapshot) << "quad packing (plain vpdpbusd)";
    for (Isa isa : levels) {
      const Result simd = run(c, isa);
      EXPECT_EQ(simd.acc, scalar.acc) << cpu::name(isa);
      EXPECT_EQ(simd.snapshot, scalar.snapshot) << cpu::name(isa);
    }
    ++checked;
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_EQ(checked, 400);
}

// The largest sum dense_conv accepts: 8190 channels x 16 taps of (-128)^2 is 2^31 - 524288.
// With inputs 127 (after a ReLU: the AVX2 u8 path) the same against both weight extremes.
TEST(ConvKernels, LargestAcceptedSumsAreExact) {
  for (const int in : {-128, 127})
    for (const int w : {-128, 127}) {
      ck::DenseConv c;
      c.plane_count = 8190;
      c.padded_h = 4, c.padded_w = 5, c.kh = 4, c.kw = 4;
      std::vector<std::int8_t> planes(c.plane_count * 20, static_cast<std::int8_t>(in));
      std::vector<std::int8_t> weights(3 * c.plane_count * 16, static_cast<std::int8_t>(w));
      for (std::uint64_t i = 0; i < c.plane_count; ++i)
        c.channels.push_back(static_cast<std::int64_t>(i));
      c.split = 4094;
      c.kn = 3, c.snapshot_from = 1;
      c.planes = planes.data();
      c.weights = weights.data();
      const std::int64_t product = in * w;
      const auto full = static_cast<std::int32_t>(8190 * 16 * product);
      const auto part = static_cast<std::int32_t>(4094 * 16 * product);
      EXPECT_EQ(std::int64_t{full}, 8190 * 16 * product);
      std::vector<Isa> paths = {Isa::kScalar, Isa::kAuto};  // kAuto: the plain quad model
      for (Isa isa : cpu::kAllIsas)
        if (isa != Isa::kScalar && cpu::supports(isa)) paths.push_back(isa);
      for (const Isa isa : paths) {
        const Result r = run(c, isa);
        EXPECT_EQ(r.acc, std::vector<std::int32_t>(6, full))
            << "inputs " << in << " weights " << w << " " << cpu::name(isa);
        EXPECT_EQ(r.snapshot, std::vector<std::int32_t>(4, part))
            << "inputs " << in << " weights " << w << " " << cpu::name(isa);
      }
    }
}

// Inputs after a ReLU (0..127): the AVX2 level takes the u8 quad path (maddubs), exact there.
// Against the plain loop, the scalar path, the quad packing without bias in the plain model, and
// the GEMM forms called directly; values include 127 x -128 pairs (the largest int16 pair sums).
// live_steps on a hand-made packing: 2 blocks of 2 output channels, 2 groups x 2 taps. A step is
// live when any block has a non-zero word at it.
TEST(ConvKernels, LiveStepsAreTheStepsWithANonZeroWeightInAnyBlock) {
  std::vector<std::uint32_t> w(2 * 4 * 2, 0);            // [block][step][lane]
  w[(0 * 4 + 1) * 2 + 1] = 0x00010000u;                  // block 0, step 1 (group 0, tap 1), lane 1
  w[(1 * 4 + 2) * 2 + 0] = 0xFF000000u;                  // block 1, step 2 (group 1, tap 0), lane 0
  std::vector<std::uint32_t> steps{7, 7, 7}, live_w{7};  // a reused vector's leftovers
  ck::detail::live_steps(w, 2, 2, 2, steps, live_w);
  EXPECT_EQ(steps, (std::vector<std::uint32_t>{1, 2}));
  // [block][live step][lane]: block 0's steps 1 and 2, then block 1's.
  EXPECT_EQ(live_w, (std::vector<std::uint32_t>{0, 0x00010000u, 0, 0, 0, 0, 0xFF000000u, 0}));
  ck::detail::live_steps(std::vector<std::uint32_t>(16, 0), 2, 2, 2, steps, live_w);
  EXPECT_TRUE(steps.empty());
  EXPECT_TRUE(live_w.empty());
  ck::detail::live_steps(std::vector<std::uint32_t>(16, 1), 2, 2, 2, steps, live_w);
  EXPECT_EQ(steps, (std::vector<std::uint32_t>{0, 1, 2, 3}));
  EXPECT_TRUE(live_w.empty());  // every step live: the tiles read w itself
}

// pair_steps on a hand-made packing of 3 blocks (groups {0, 1} and {2}) of 8 lanes, 5 steps,
// the phases [0, 3) and [3, 5): the steps it leaves single. A lane's two products of a step are
// bytes (0, 1) or (2, 3) of its word; two steps pair when every lane's positive weights sum to at
// most 258 (127 x 258 = 32766) and its negative ones' magnitudes too (127 x 259 = 32893 would leave
// int16).
TEST(ConvKernels, PairStepsPairConsecutiveStepsWhoseInt16SumsStayInside) {
  constexpr std::uint64_t kSteps = 5, kLanes = ck::detail::kGemmBlock;
  std::vector<std::uint32_t> w(3 * kSteps * kLanes, 0);
  auto word = [&](std::uint64_t block, std::uint64_t step, std::uint64_t lane) -> std::uint32_t& {
    return w[(block * kSteps + step) * kLanes + lane];
  };
  auto bytes = [](int b0, int b1, int b2, int b3) {
    return static_cast<std::uint32_t>(static_cast<std::uint8_t>(b0)) |
           static_cast<std::uint32_t>(static_cast<std::uint8_t>(b1)) << 8 |
           static_cast<std::uint32_t>(static_cast<std::uint8_t>(b2)) << 16 |
           static_cast<std::uint32_t>(static_cast<std::uint8_t>(b3)) << 24;
  };
  for (std::uint64_t i = 0; i < w.size(); ++i) w[i] = bytes(1, -1, 2, -2);  // small everywhere
  // Group 0: steps 0 and 1 reach 254 + 4 = 258 in block 0's lane 3 (pair); step 2 is alone in
  // its phase; steps 3 and 4 reach 256 + 3 = 259 negative in block 1's lane 5, bytes 2-3.
  word(0, 0, 3) = bytes(127, 127, 0, 0), word(0, 1, 3) = bytes(4, 0, 0, 0);
  word(1, 3, 5) = bytes(0, 0, -128, -128), word(1, 4, 5) = bytes(0, 0, -3, 0);
  // Group 1 (block 2 alone): steps 0 and 1 reach 254 + 5 = 259, steps 1 and 2 fit; phase 1's
  // steps 3 and 4 reach 256 + 2 = 258 negative (pair).
  word(2, 0, 0) = bytes(127, 127, 0, 0), word(2, 1, 0) = bytes(5, 0, 0, 0);
  word(2, 3, 7) = bytes(-128, -128, 0, 0), word(2, 4, 7) = bytes(-2, 0, 0, 0);
  ck::StepPairs pairs{{9, 9}, {9}};  // a reused one's leftovers
  ck::detail::pair_steps(w, kSteps, 3, pairs);
  EXPECT_EQ(pairs.singles, (std::vector<std::uint32_t>{2, 3, 4, 0}));
  EXPECT_EQ(pairs.begin, (std::vector<std::uint32_t>{0, 3, 4}));
}

// Every GEMM form against the plain loop on inputs 0..127, and the quad packing's step pairs (with
// its count of live steps).
ck::StepPairs exact_with_pairs(const ck::DenseConv& c, std::uint64_t& live_steps) {
  std::vector<std::int64_t> acc, snapshot;
  plain_conv(c, acc, snapshot);
  expect_gemm_forms(c, true, narrow(acc), narrow(snapshot));
  ck::detail::PackedQuads packed;
  live_steps = 0;
  if (!ck::detail::pack_quads(c, packed, 0)) {
    ADD_FAILURE() << "the quad packing refused inputs 0..127";
    return {};
  }
  live_steps = packed.live.size();
  return *packed.step_pairs;
}

// The u8 quads' paired steps (pair_steps) against the plain loop, at the int16 bound: 8 channels
// (2 quads) of inputs 127 through a 1x1 kernel, 16 output channels whose lanes reach 258 (paired)
// or 259 (single) in the two steps, positive and negative (and the tiles take the pairs, or not);
// then random problems with small weights (most steps paired) and a few extreme ones, inputs
// 0..127 or all 127, every GEMM form.
TEST(ConvKernels, PairedU8StepsAreExactAtTheInt16Bound) {
  for (const int last : {4, 5, -2, -3}) {  // 254 + 4 = 258 fits, 259 does not; -256 - 2, - 3
    ck::DenseConv c;
    c.plane_count = 8, c.padded_h = 3, c.padded_w = 7, c.kh = c.kw = 1;
    for (std::int64_t i = 0; i < 8; ++i) c.channels.push_back(i);
    c.split = 8, c.kn = 16, c.snapshot_from = 16;
    std::vector<std::int8_t> planes(8 * 21, 127), weights(16 * 8, 0);
    for (std::uint64_t k = 0; k < 16; ++k) {
      const std::int8_t big = last > 0 ? std::int8_t{127} : std::int8_t{-128};
      weights[k * 8 + k % 2] = weights[k * 8 + k % 2 + (k % 4 < 2 ? 1 : 0)] = big;
      weights[k * 8 + 4 + k % 2] = static_cast<std::int8_t>(last);
    }
    c.planes = planes.data(), c.weights = weights.data();
    SCOPED_TRACE(::testing::Message() << "last weight " << last);
    std::uint64_t steps = 0;
    const bool fits = last == 4 || last == -2;
    const std::vector<std::uint32_t> singles =
        fits ? std::vector<std::uint32_t>{} : std::vector<std::uint32_t>{0, 1};
    const ck::StepPairs pairs = exact_with_pairs(c, steps);
    EXPECT_EQ(pairs.singles, singles);
    // And the AVX2 tiles take them: every step paired leaves no single at all.
    ck::detail::GemmOperands op;
    op.steps = steps;
    ck::detail::set_step_pairs(pairs, op);
    EXPECT_EQ(ck::detail::takes_pairs(op, 0), fits);
  }
  std::mt19937 rng(31);
  std::uint64_t paired = 0, steps = 0;
  for (int trial = 0; trial < 200; ++trial) {
    Problem p = random_problem(rng, Values::kUniform);
    ck::DenseConv& c = p.conv;
    for (auto& v : p.planes)
      v = trial % 3 == 0 ? std::int8_t{127} : static_cast<std::int8_t>(v & 0x7F);
    for (auto& v : p.weights) {
      const unsigned r = rng() % 100;
      v = static_cast<std::int8_t>(r < 2 ? -128 : r < 4 ? 127 : static_cast<int>(rng() % 41) - 20);
    }
    SCOPED_TRACE(::testing::Message() << "trial " << trial);
    std::uint64_t live = 0;
    const ck::StepPairs pairs = exact_with_pairs(c, live);
    const std::uint64_t group_steps = (pairs.begin.size() - 1) * live;  // groups x steps
    paired += group_steps - pairs.singles.size();
    steps += group_steps;
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(paired * 2, steps);  // most steps did pair
}

// pair_boundary on a hand-made schedule: group 0 of 20 steps leaves 4 and 11 single (its pairs
// are 0-1 2-3 | 4 | 5-6 7-8 9-10 | 11 | 12-13 ... 18-19), group 1 none (0-1 2-3 ...); a cut
// moves to the next pair's start, never past the steps. With no single in any group (singles
// null) every group pairs from step 0.
TEST(ConvKernels, PairBoundaryCutsNoPair) {
  namespace d = ck::detail;
  const std::vector<std::uint32_t> singles = {4, 11}, begin = {0, 2, 2};
  d::GemmOperands op;
  op.steps = 20, op.singles = singles.data(), op.single_begin = begin.data();
  const std::uint64_t want0[] = {0,  2,  2,  4,  4,  5,  7,  7,  9,  9, 11,
                                 11, 12, 14, 14, 16, 16, 18, 18, 20, 20};
  for (std::uint64_t s = 0; s <= 20; ++s) {
    EXPECT_EQ(d::pair_boundary(op, 0, s), want0[s]) << "group 0, step " << s;
    EXPECT_EQ(d::pair_boundary(op, 2, s), s + s % 2) << "group 1, step " << s;
  }
  EXPECT_EQ(d::pair_boundary(op, 0, 25), 20u);
  op.singles = nullptr;
  EXPECT_EQ(d::pair_boundary(op, 0, 7), 8u);
  EXPECT_EQ(d::pair_boundary(op, 0, 8), 8u);
  op.single_begin = nullptr;  // every step single
  EXPECT_EQ(d::pair_boundary(op, 0, 7), 7u);
}

// At the AVX2 level dense_conv sums long step lists in chunks (kGemmChunkSteps): 1x1 convs over
// 1024 and 1100 channels (256 and 275 steps), inputs 0..127, weights that leave steps single
// (a lane's positive weights over two steps past 258) before and at the cuts, against the plain
// loop, with and without a snapshot.
TEST(ConvKernels, ChunkedU8StepsEqualThePlainLoop) {
  if (!cpu::supports(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(2026);
  for (const std::uint64_t channels : {1024u, 1100u}) {
    for (const bool snapshot : {false, true}) {
      ck::DenseConv c;
      c.plane_count = channels, c.padded_h = 3, c.padded_w = 9, c.kh = c.kw = 1;
      for (std::uint64_t i = 0; i < channels; ++i)
        c.channels.push_back(static_cast<std::int64_t>(i));
      c.split = snapshot ? 600 : channels, c.kn = 40, c.snapshot_from = snapshot ? 32 : c.kn;
      std::vector<std::int8_t> planes(channels * 27), weights(c.kn * channels);
      for (auto& v : planes) v = static_cast<std::int8_t>(rng() % 128);
      for (auto& v : weights) v = static_cast<std::int8_t>(static_cast<int>(rng() % 41) - 20);
      // Channels 0-15 (the first group): single at 100 and 231, so the pairs of steps 101-230
      // run over the cut at 128 and it moves to 129; channels 16-31: singles at the cuts.
      for (std::uint64_t k = 0; k < 32; k += 5)
        for (const std::uint64_t quad : k < 16
                                            ? std::vector<std::uint64_t>{100, 231}
                                            : std::vector<std::uint64_t>{126, 127, 128, 254, 255})
          if (quad * 4 + 1 < channels)
            weights[k * channels + quad * 4] = weights[k * channels + quad * 4 + 1] = 127;
      c.planes = planes.data(), c.weights = weights.data();
      SCOPED_TRACE(::testing::Message() << channels << " channels, snapshot " << snapshot);
      std::vector<std::int64_t> acc, snap;
      plain_conv(c, acc, snap);
      const Result r = run(c, Isa::kAvx2);
      EXPECT_EQ(r.acc, narrow(acc));
      if (snapshot) EXPECT_EQ(r.snapshot, narrow(snap));
      ck::detail::PackedQuads packed;
      ASSERT_TRUE(ck::detail::pack_quads(c, packed, 0));
      EXPECT_GE(packed.live.size(), 2 * ck::detail::kGemmChunkSteps);  // the chunks did run
      // The first group's pairs run odd to the cut at 128 (with the snapshot the unit is summed
      // unchunked, by its two phases).
      const ck::StepPairs& pairs = *packed.step_pairs;
      ASSERT_GE(pairs.begin.size(), 3u);
      ASSERT_GE(pairs.begin[1] - pairs.begin[0], 2u);
      EXPECT_EQ(pairs.singles[pairs.begin[0]], 100u);
      EXPECT_GT(pairs.singles[pairs.begin[0] + 1], 128u);
    }
  }
}

// block_weights, which run_gemm_unit hands the tiles as the next unit's weights to prefetch: the
// words the tiles read for those blocks, in both weight layouts, and never past the last block's
// rows (an odd last block's joined row is padded beside zeros).
TEST(ConvKernels, BlockWeightsAreTheRowsTheTilesRead) {
  namespace d = ck::detail;
  constexpr std::uint64_t kSteps = 5, kBlocks = 9;
  std::vector<std::uint32_t> w(kBlocks * kSteps * d::kGemmBlock);
  std::vector<std::uint32_t> joined((kBlocks + 1) / 2 * kSteps * 2 * d::kGemmBlock);
  d::GemmOperands op;
  op.steps = kSteps, op.w = w.data();
  const auto bytes = [](const std::uint32_t* p) {
    return reinterpret_cast<const std::uint8_t*>(p);
  };
  // Blocks 8 (the last) of w: its rows alone.
  std::span<const std::uint8_t> r = op.block_weights(8, 1);
  EXPECT_EQ(r.data(), bytes(w.data() + 8 * kSteps * d::kGemmBlock));
  EXPECT_EQ(r.data() + r.size(), bytes(w.data() + w.size()));
  // Blocks 0-7 of w: the first 8 blocks' rows.
  r = op.block_weights(0, 8);
  EXPECT_EQ(r.data(), bytes(w.data()));
  EXPECT_EQ(r.size(), 8 * kSteps * d::kGemmBlock * 4);
  // Joined: blocks 8 and its zero partner are the last row pair, 0-7 the first four.
  op.w_joined = joined.data();
  r = op.block_weights(8, 1);
  EXPECT_EQ(r.data(), bytes(joined.data() + 4 * kSteps * 2 * d::kGemmBlock));
  EXPECT_EQ(r.data() + r.size(), bytes(joined.data() + joined.size()));
  r = op.block_weights(0, 8);
  EXPECT_EQ(r.data(), bytes(joined.data()));
  EXPECT_EQ(r.size(), 4 * kSteps * 2 * d::kGemmBlock * 4);
}

// The GEMM form leaves out the (group, tap) steps whose weights are zero for every output channel
// (live_steps: a space-to-depth stem's taps past its kernel). Random problems with (channel, tap)s
// zeroed across all outputs, every weight zero, or the whole first phase zero, must still give
// the plain loop's sums and snapshots on every form, with signed and with 0..127 inputs.
TEST(ConvKernels, AllZeroWeightStepsAreLeftOutExactly) {
  std::mt19937 rng(77);
  int fewer = 0;
  for (int trial = 0; trial < 200; ++trial) {
    Problem p = random_problem(rng, Values::kUniform);
    ck::DenseConv& c = p.conv;
    const bool relu = trial % 2 == 1;
    if (relu)
      for (auto& v : p.planes) v = static_cast<std::int8_t>(v & 0x7F);
    const std::uint64_t taps = c.kh * c.kw;
    const int pattern = trial / 2 % 5;  // 0-2 random, 3 every weight, 4 the first phase
    const auto first_phase_end = c.channels.begin() + static_cast<std::ptrdiff_t>(c.split);
    for (std::uint64_t ch = 0; ch < c.plane_count; ++ch)
      for (std::uint64_t t = 0; t < taps; ++t) {
        const bool zero =
            pattern == 3 || (pattern < 3 && rng() % 3 == 0) ||
            (pattern == 4 && std::find(c.channels.begin(), first_phase_end,
                                       static_cast<std::int64_t>(ch)) != first_phase_end);
        for (std::uint64_t k = 0; zero && k < c.kn; ++k)
          p.weights[(k * c.plane_count + ch) * taps + t] = 0;
      }
    SCOPED_TRACE(::testing::Message() << "trial " << trial << " pattern " << pattern);
    std::vector<std::int64_t> acc, snapshot;
    plain_conv(c, acc, snapshot);
    expect_gemm_forms(c, relu, narrow(acc), narrow(snapshot));
    ck::detail::Packed packed;
    ck::detail::pack(c, packed, ck::detail::kGemmBlock);
    fewer += packed.live.size() < packed.pairs * packed.taps;
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(fewer, 120);  // the tiles did take step lists
}

TEST(ConvKernels, ReluInputsOnTheU8PathEqualThePlainLoop) {
  const std::vector<Isa> levels = simd_levels();
  std::mt19937 rng(77);
  for (int trial = 0; trial < 300; ++trial) {
    const auto values = static_cast<Values>(trial % 4);
    Problem p = random_problem(rng, values);
    for (auto& v : p.planes)  // 0..127; the extreme patterns use 127
      v = values == Values::kUniform ? static_cast<std::int8_t>(v & 0x7F) : std::int8_t{127};
    if (values == Values::kAllMin)
      for (auto& w : p.weights) w = -128;
    const ck::DenseConv& c = p.conv;
    SCOPED_TRACE(::testing::Message()
                 << "trial " << trial << ": " << c.plane_count << " planes " << c.padded_h << "x"
                 << c.padded_w << ", kernel " << c.kh << "x" << c.kw << " stride " << c.stride);
    ASSERT_TRUE(ck::detail::inputs_nonnegative(c));
    std::vector<std::int64_t> acc, snapshot;
    plain_conv(c, acc, snapshot);
    const Result scalar = run(c, Isa::kScalar);
    EXPECT_EQ(scalar.acc, narrow(acc));
    expect_gemm_forms(c, true, narrow(acc), narrow(snapshot));
    for (Isa isa : levels) {
      const Result simd = run(c, isa);
      EXPECT_EQ(simd.acc, scalar.acc) << cpu::name(isa);
      EXPECT_EQ(simd.snapshot, scalar.snapshot) << cpu::name(isa);
    }
    if (::testing::Test::HasFailure()) break;
  }
}

// The GEMM form's blocking on network-like shapes: 7x7, 14x14 and odd planes (pixel units of
// 60 and register tiles of 5 with every remainder), output channels over 64 (several channel
// units, an odd number of 8-channel blocks, a partial last block), a snapshot starting inside a
// unit, 1x1 and 3x3 kernels, strides 1 and 2, signed and 0..127 inputs, extreme values; every
// GEMM combination and every level against the plain loop.
TEST(ConvKernels, GemmFormOnNetworkShapesEqualsThePlainLoop) {
  const std::vector<Isa> levels = simd_levels();
  std::mt19937 rng(99);
  std::uniform_int_distribution<int> byte(-128, 127);
  struct Shape {
    std::uint64_t planes, hw, k, stride, kn, snapshot_from;
  };
  const Shape shapes[] = {{40, 7, 3, 1, 72, 70}, {24, 14, 3, 1, 88, 13}, {33, 7, 1, 1, 136, 136},
                          {18, 13, 3, 2, 40, 0}, {7, 11, 1, 1, 9, 5},    {16, 28, 3, 1, 24, 24},
                          {9, 15, 7, 2, 17, 16}, {64, 5, 3, 1, 64, 63}};
  for (const Shape& sh : shapes)
    for (int kind = 0; kind < 4; ++kind) {  // signed, 0..127, (127, -128), (-128, -128)
      ck::DenseConv c;
      c.plane_count = sh.planes;
      c.kh = c.kw = sh.k;
      c.stride = sh.stride;
      c.padded_h = c.padded_w = sh.hw + sh.k - 1;
      c.kn = sh.kn;
      for (std::uint64_t i = 0; i < sh.planes; ++i)
        c.channels.push_back(static_cast<std::int64_t>(i));
      c.channels.insert(c.channels.begin() + 3, -1);
      if (c.channels.size() % 2) c.channels.push_back(-1);
      c.split = c.channels.size() / 4 * 2;
      c.snapshot_from = sh.snapshot_from;
      std::vector<std::int8_t> planes(c.plane_count * c.padded_h * c.padded_w);
      std::vector<std::int8_t> weights(c.kn * c.plane_count * c.kh * c.kw);
      for (auto& v : planes)
        v = static_cast<std::int8_t>(kind == 0   ? byte(rng)
                                     : kind == 1 ? byte(rng) & 0x7F
                                     : kind == 2 ? 127
                                                 : -128);
      for (auto& v : weights) v = static_cast<std::int8_t>(kind < 2 ? byte(rng) : -128);
      c.planes = planes.data();
      c.weights = weights.data();
      SCOPED_TRACE(::testing::Message()
                   << sh.planes << " planes " << sh.hw << "x" << sh.hw << " kernel " << sh.k
                   << " stride " << sh.stride << " kn " << sh.kn << " values " << kind);
      std::vector<std::int64_t> acc, snapshot;
      plain_conv(c, acc, snapshot);
      const std::vector<std::int32_t> want = narrow(acc), want_snapshot = narrow(snapshot);
      expect_gemm_forms(c, kind == 1 || kind == 2, want, want_snapshot);
      for (Isa isa : levels) {
        const Result r = run(c, isa);
        EXPECT_EQ(r.acc, want) << cpu::name(isa);
        EXPECT_EQ(r.snapshot, want_snapshot) << cpu::name(isa);
      }
      if (::testing::Test::HasFailure()) return;
    }
}

// Weights packed once and kept (DenseConv::packs, as conv.cpp keeps them per mapped blob): the
// later calls on new inputs (signed, then 0..127 for the AVX2 u8 path, then signed again) give
// the plain loop's sums on every path, each path with its own kept packs.
TEST(ConvKernels, KeptWeightPacksGiveThePlainSumsOnNewInputs) {
  std::vector<Isa> paths = {Isa::kScalar, Isa::kAuto};  // kAuto: the plain quad model
  for (Isa isa : simd_levels()) paths.push_back(isa);
  std::mt19937 rng(4242);
  std::uniform_int_distribution<int> byte(-128, 127);
  for (int trial = 0; trial < 60; ++trial) {
    Problem p = random_problem(rng, static_cast<Values>(trial % 4));
    ck::DenseConv c = p.conv;
    // Planes of at least 14x14 outputs too, so the AVX2 level's u8 path is taken.
    if (trial % 2) {
      c.stride = 1;
      c.padded_h = c.kh + 15, c.padded_w = c.kw + 15;
      p.planes.resize(c.plane_count * c.padded_h * c.padded_w);
      c.planes = p.planes.data();
    }
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ": " << c.padded_h << "x"
                                      << c.padded_w << " kernel " << c.kh << "x" << c.kw);
    for (const Isa isa : paths) {
      ck::WeightPacks packs;
      c.packs = &packs;
      for (int image = 0; image < 3; ++image) {
        for (auto& v : p.planes) {
          v = static_cast<std::int8_t>(byte(rng));
          if (image == 1) v = static_cast<std::int8_t>(v & 0x7F);
        }
        std::vector<std::int64_t> acc, snapshot;
        plain_conv(c, acc, snapshot);
        const Result r = run(c, isa);
        EXPECT_EQ(r.acc, narrow(acc)) << cpu::name(isa) << " image " << image;
        if (c.snapshot_from < c.kn) {
          EXPECT_EQ(r.snapshot, narrow(snapshot)) << cpu::name(isa) << " image " << image;
        }
      }
    }
    if (::testing::Test::HasFailure()) break;
  }
}

TEST(ConvKernels, InputsNonnegativeLooksAtTheListedChannelsOnly) {
  std::vector<std::int8_t> planes(3 * 4, 5);
  ck::DenseConv c;
  c.planes = planes.data();
  c.plane_count = 3;
  c.padded_h = c.padded_w = 2;
  c.channels = {0, -1, 2, 2};
  EXPECT_TRUE(ck::detail::inputs_nonnegative(c));
  planes[4 + 3] = -1;  // plane 1 is not listed
  EXPECT_TRUE(ck::detail::inputs_nonnegative(c));
  planes[8 + 3] = -128;  // plane 2 is
  EXPECT_FALSE(ck::detail::inputs_nonnegative(c));
}

TEST(ConvKernels, RefusesSumsThatCouldLeaveInt32AndBadChannelLists) {
  ck::DenseConv c;
  std::vector<std::int8_t> planes(16, 0), weights(16 * 8192, 0);
  c.plane_count = 1, c.padded_h = 4, c.padded_w = 4, c.kh = 4, c.kw = 4, c.kn = 1;
  c.planes = planes.data(), c.weights = weights.data();
  c.channels.assign(8192, 0);  // 8192 x 16 products of up to 2^14 could reach 2^31
  c.split = c.channels.size(), c.snapshot_from = 1;
  std::int32_t out = 0;
  EXPECT_THROW(ck::dense_conv(c, &out, nullptr), Error);
  c.channels = {0};  // odd length
  c.split = 1;
  EXPECT_THROW(ck::dense_conv(c, &out, nullptr), Error);
  c.channels = {0, 1};  // plane 1 does not exist
  c.split = 2;
  EXPECT_THROW(ck::dense_conv(c, &out, nullptr), Error);
}

// The depthwise kernel: one plane, random taps (zeros included), every stride and kernel shape
// up to 16 taps, against a plain loop over the int8 plane.
// Random planes and taps for the depthwise tests: every third trial at the extremes (inputs
// -128, taps all 127 or all -128), else random values with about a third of the taps 0.
void fill_depthwise(int trial, const std::function<int(int, int)>& pick,
                    std::vector<std::int8_t>& planes, std::vector<std::int8_t>& taps) {
  const bool extreme = trial % 3 == 0;
  for (auto& v : planes) v = static_cast<std::int8_t>(extreme ? -128 : pick(-128, 127));
  for (auto& v : taps)
    v = static_cast<std::int8_t>(extreme      ? (trial % 2 ? 127 : -128)
                                 : pick(0, 2) ? pick(-128, 127)
                                              : 0);
}

TEST(ConvKernels, ConnectionConvEqualsThePlainLoop) {
  std::vector<Isa> paths = {Isa::kScalar};
  for (Isa isa : simd_levels()) paths.push_back(isa);
  std::mt19937 rng(31);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 300; ++trial) {
    const auto kh = static_cast<std::uint64_t>(pick(1, 4)),
               kw = static_cast<std::uint64_t>(pick(1, 4));
    const auto s = static_cast<std::uint64_t>(pick(1, 4));
    const std::uint64_t ph = kh + static_cast<std::uint64_t>(pick(0, 20));
    const std::uint64_t pw = kw + static_cast<std::uint64_t>(pick(0, 70));
    const std::uint64_t count = static_cast<std::uint64_t>(pick(1, 3));
    std::vector<std::int8_t> planes(count * ph * pw), taps(kh * kw);
    fill_depthwise(trial, pick, planes, taps);
    ck::PlaneSet set;
    ck::pack_planes(planes.data(), count, ph, pw, kh, kw, s, set);
    const std::uint64_t plane = static_cast<std::uint64_t>(pick(0, static_cast<int>(count) - 1));
    const std::uint64_t oh = (ph - kh) / s + 1, ow = (pw - kw) / s + 1;
    std::vector<std::int32_t> expected(oh * ow, 1000);
    for (std::uint64_t y = 0; y < oh; ++y)
      for (std::uint64_t x = 0; x < ow; ++x)
        for (std::uint64_t i = 0; i < kh; ++i)
          for (std::uint64_t j = 0; j < kw; ++j)
            expected[y * ow + x] +=
                taps[i * kw + j] * planes[(plane * ph + y * s + i) * pw + x * s + j];
    for (Isa isa : paths) {
      std::vector<std::int32_t> acc(oh * ow, 1000);
      ck::connection_conv(set, plane, taps.data(), acc.data(), isa);
      EXPECT_EQ(acc, expected) << "trial " << trial << " " << cpu::name(isa) << ": " << kh << "x"
                               << kw << " stride " << s << " on " << ph << "x" << pw;
    }
    if (::testing::Test::HasFailure()) break;
  }
}

// The snapshot to the DRAM partial-sum rows: every path against bytes built here one by one
// (big-endian, lane j of pixel p at 4 * (p * lanes + j), 0 past the planes), for 8 lanes with
// 0..8 planes and pixel counts around the 8-pixel blocks, and 4 and 1 lanes.
TEST(ConvKernels, PlanesToBe32RowsEqualsTheBytesOneByOne) {
  std::vector<Isa> paths = {Isa::kScalar};
  for (Isa isa : simd_levels()) paths.push_back(isa);
  std::mt19937 rng(5);
  for (const std::uint64_t lanes : {8u, 4u, 1u})
    for (std::uint64_t count = 0; count <= lanes; ++count)
      for (const std::uint64_t pixels : {0u, 1u, 7u, 8u, 9u, 23u, 3136u}) {
        std::vector<std::int32_t> planes(count * pixels);
        for (auto& v : planes) v = static_cast<std::int32_t>(rng());
        std::vector<std::uint8_t> expected(pixels * lanes * 4, 0);
        for (std::uint64_t p = 0; p < pixels; ++p)
          for (std::uint64_t j = 0; j < count; ++j) {
            const auto v = static_cast<std::uint32_t>(planes[j * pixels + p]);
            for (int b = 0; b < 4; ++b)
              expected[(p * lanes + j) * 4 + static_cast<std::uint64_t>(b)] =
                  static_cast<std::uint8_t>(v >> (24 - 8 * b));
          }
        for (Isa isa : paths) {
          std::vector<std::uint8_t> got(pixels * lanes * 4, 0xA5);
          ck::planes_to_be32_rows(planes.data(), count, pixels, lanes, got.data(), isa);
          EXPECT_EQ(got, expected) << cpu::name(isa) << ": " << count << " of " << lanes
                                   << " lanes, " << pixels << " pixels";
        }
      }
  std::vector<std::uint8_t> out(64);
  EXPECT_THROW(ck::planes_to_be32_rows(nullptr, 5, 0, 4, out.data()), Error);
}

// The channels-in-lanes depthwise kernel: every path against connection_conv's packed per-plane
// sums (a second implementation) on random shapes, strides 1..4, kernels up to 16 taps, channel
// counts that leave a partial group of 8, rows of 1..40 (the packing's 16-column chunks and the
// output's 8-pixel transposes both get remainders), and the extreme values.
TEST(ConvKernels, DepthwiseLanesEqualsConnectionConv) {
  std::vector<Isa> paths = {Isa::kScalar};
  for (Isa isa : simd_levels()) paths.push_back(isa);
  std::mt19937 rng(47);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 200; ++trial) {
    auto kh = static_cast<std::uint64_t>(pick(1, 4)), kw = static_cast<std::uint64_t>(pick(1, 4));
    if (trial % 7 == 0) kh = 1, kw = 16;
    if (trial % 7 == 1) kh = 16, kw = 1;
    const auto s = static_cast<std::uint64_t>(pick(1, 4));
    const std::uint64_t ph = kh + static_cast<std::uint64_t>(pick(0, 20));
    const std::uint64_t pw = kw + static_cast<std::uint64_t>(pick(0, 40));
    const std::uint64_t count = static_cast<std::uint64_t>(pick(1, 20));
    std::vector<std::int8_t> planes(count * ph * pw), taps(count * kh * kw);
    fill_depthwise(trial, pick, planes, taps);
    ck::PlaneSet set;
    ck::pack_planes(planes.data(), count, ph, pw, kh, kw, s, set);
    const std::uint64_t pixels = ((ph - kh) / s + 1) * ((pw - kw) / s + 1);
    std::vector<std::int32_t> expected(count * pixels, 0);
    for (std::uint64_t k = 0; k < count; ++k)
      ck::connection_conv(set, k, taps.data() + k * kh * kw, expected.data() + k * pixels,
                          Isa::kScalar);
    const ck::DepthwiseLanes conv{planes.data(), count, ph, pw, kh, kw, s, taps.data()};
    for (Isa isa : paths) {
      std::vector<std::int32_t> acc(count * pixels, 12345);  // every value is overwritten
      ck::depthwise_lanes(conv, acc.data(), isa);
      EXPECT_EQ(acc, expected) << "trial " << trial << " " << cpu::name(isa) << ": " << count
                               << " channels " << kh << "x" << kw << " stride " << s << " on " << ph
                               << "x" << pw;
    }
    if (::testing::Test::HasFailure()) break;
  }
}

// Tiles and connections are spread over the thread pool: the same integers for every count.
TEST(ConvKernels, ResultsAreIdenticalForEveryThreadCount) {
  const unsigned before = thread_count();
  std::mt19937 rng(4242);
  for (int trial = 0; trial < 60; ++trial) {
    const Problem p = random_problem(rng, static_cast<Values>(trial % 4));
    set_thread_count(1);
    const Result one = run(p.conv, Isa::kAuto);
    const Result one_native = run(p.conv, cpu::detected());
    for (unsigned threads : {2u, 3u, 5u}) {
      set_thread_count(threads);
      const Result many = run(p.conv, Isa::kAuto);
      const Result many_native = run(p.conv, cpu::detected());
      EXPECT_EQ(many.acc, one.acc) << threads;
      EXPECT_EQ(many.snapshot, one.snapshot) << threads;
      EXPECT_EQ(many_native.acc, one_native.acc) << threads;
      EXPECT_EQ(many_native.snapshot, one_native.snapshot) << threads;
    }
  }
  set_thread_count(before);
}

TEST(ConvKernels, ForcedLevelsTheCpuLacksAreErrors) {
  ck::DenseConv c;
  std::vector<std::int8_t> planes(4, 1), weights(4, 1);
  c.plane_count = 1, c.padded_h = 2, c.padded_w = 2, c.kh = 2, c.kw = 2, c.kn = 1;
  c.planes = planes.data(), c.weights = weights.data();
  c.channels = {0, -1};
  c.split = 2, c.snapshot_from = 1;
  for (Isa isa : cpu::kAllIsas) {
    std::int32_t out = 0;
    if (cpu::supports(isa)) {
      ck::dense_conv(c, &out, nullptr, isa);
      EXPECT_EQ(out, 4) << cpu::name(isa);
    } else {
      EXPECT_THROW(ck::dense_conv(c, &out, nullptr, isa), Error) << cpu::name(isa);
      EXPECT_THROW(cpu::ScopedIsa{isa}, Error) << cpu::name(isa);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Whole layers through the device.

struct LayerResult {
  std::vector<std::int32_t> out;
  Bytes partials;  // the 14.11 region (empty when the layer writes none)
};

bool writes_partials(const isa::SaArch& arch, const ConvSpec& s) {
  // test_programs.h sets AccEn for every conv that is not depthwise and has several groups.
  return !s.on_chip_acc && !s.depthwise && (s.ic > arch.n_sa || is_16x1x16(arch));
}
std::uint64_t partial_lanes(const isa::SaArch& arch) {
  return static_cast<std::uint64_t>(is_16x1x16(arch) ? arch.n_sa : arch.cols);
}
std::uint64_t partial_region_bytes(const isa::SaArch& arch, const ConvSpec& s) {
  const std::uint64_t dk = 32 / static_cast<std::uint64_t>(arch.n_sa);
  return up(static_cast<std::uint64_t>(s.oh() * s.ow()), std::max<std::uint64_t>(1, dk / 4)) *
         partial_lanes(arch) * 4;
}

// Runs one conv (and lets `edit` change the program before it is finished).
LayerResult run_layer(const isa::SaArch& arch, const ConvSpec& s, Isa isa,
                      const std::function<void(ProgramBuilder&)>& edit = {}) {
  const cpu::ScopedIsa forced(isa);
  ProgramBuilder b{arch};
  const std::uint64_t dk = 32 / static_cast<std::uint64_t>(arch.n_sa);
  const Bytes input = pack_activation(arch, s.ic, s.ih * s.iw, s.x);
  const std::uint32_t in_addr = b.alloc(input.size());
  const auto out_bytes =
      static_cast<std::uint32_t>(up(s.kn, arch.n_sa) * up(s.out_pixels(), dk) * s.op_width);
  const std::uint32_t out_addr = b.alloc(out_bytes);
  const std::uint32_t acc_addr = b.alloc(up(s.kn, 16) * up(s.oh() * s.ow(), 8) * 4 + 4096);
  b.add_conv(s, in_addr, out_addr, acc_addr);
  if (edit) edit(b);
  b.finish();
  const auto dev = run_program(arch, b, in_addr, input, 32ull << 20);
  EXPECT_EQ(dev->stats().runs, 1u);
  LayerResult r;
  r.out = unpack_activation(arch, s.kn, s.out_pixels(),
                            dev->dram().read(out_addr, out_bytes, "test"), s.op_width);
  if (writes_partials(arch, s))
    r.partials = dev->dram().read(acc_addr, partial_region_bytes(arch, s), "test");
  return r;
}

// The 14.11 region expected from the plain loop: the last kernel iteration's sums over every
// channel group but the last, lane j at 4 * (p * lanes + j), big-endian, zeros elsewhere.
Bytes expected_partials(const isa::SaArch& arch, const ConvSpec& s) {
  const std::uint64_t lanes = partial_lanes(arch);
  const int citr = conv_citr(arch, s), kitr = conv_kitr(arch, s);
  const int group = is_16x1x16(arch) ? 1 : arch.n_sa;
  const auto sums = ref_conv_sums(s, 0, (citr - 1) * group);
  const int pixels = s.oh() * s.ow();
  Bytes region(partial_region_bytes(arch, s), 0);
  const int first = (kitr - 1) * static_cast<int>(lanes);
  for (int k = first; k < s.kn; ++k)
    for (int p = 0; p < pixels; ++p) {
      const auto v = static_cast<std::uint32_t>(sums[static_cast<std::size_t>(k) * pixels + p]);
      const std::size_t at =
          (static_cast<std::size_t>(p) * lanes + static_cast<std::size_t>(k - first)) * 4;
      for (int byte = 0; byte < 4; ++byte)
        region[at + static_cast<std::size_t>(byte)] =
            static_cast<std::uint8_t>(v >> (24 - 8 * byte));
    }
  return region;
}

void expect_layer(const isa::SaArch& arch, const ConvSpec& s, const std::string& what) {
  SCOPED_TRACE(what + " on " + arch.str());
  const LayerResult scalar = run_layer(arch, s, Isa::kScalar);
  EXPECT_EQ(scalar.out, ref_conv(s));
  if (writes_partials(arch, s)) {
    EXPECT_EQ(scalar.partials, expected_partials(arch, s));
  }
  for (Isa isa : cpu::kAllIsas) {
    if (isa == Isa::kScalar || !cpu::supports(isa)) continue;
    const LayerResult simd = run_layer(arch, s, isa);
    EXPECT_EQ(simd.out, scalar.out) << cpu::name(isa);
    EXPECT_EQ(simd.partials, scalar.partials) << cpu::name(isa);
  }
}

// Raw int32 sums (OpWidth 4, no quantizer) so every bit of the accumulators is compared.
ConvSpec raw_spec() {
  ConvSpec s;
  s.quant_en = false;
  s.op_width = 4;
  return s;
}

TEST(ConvKernelsLayer, RandomConvsOnAllArraysEveryPath) {
  simd_levels();  // logs the levels this CPU lacks
  std::mt19937 rng(77);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 150; ++trial) {
    const isa::SaArch arch = isa::kSupportedArchs[trial % 3];
    ConvSpec s = raw_spec();
    s.depthwise = trial % 6 == 5;
    s.ic = pick(1, 70);
    s.kn = s.depthwise ? s.ic : pick(1, 70);
    do {
      s.kh = pick(1, 4), s.kw = pick(1, 4);
    } while (s.kh * s.kw > arch.rows);
    s.stride = pick(1, 4);
    s.pad_top = pick(0, 3), s.pad_bottom = pick(0, 3), s.pad_left = pick(0, 3),
    s.pad_right = pick(0, 3);
    s.ih = pick(0, 4) == 0 ? 1 : pick(1, 16);  // 1xN included
    s.iw = pick(1, 20);
    if (s.ih + s.pad_top + s.pad_bottom < s.kh) s.pad_bottom = s.kh - s.ih - s.pad_top;
    if (s.iw + s.pad_left + s.pad_right < s.kw) s.pad_right = s.kw - s.iw - s.pad_left;
    if (pick(0, 4) == 0 && s.ih + s.pad_top + s.pad_bottom > s.kh + 1) {
      s.skip_top = 1;  // row skips (kernel-split pieces)
      if (s.ih + s.pad_top + s.pad_bottom > s.kh + 2) s.skip_bottom = 1;
    }
    s.bias_en = pick(0, 1) == 1;
    s.on_chip_acc = pick(0, 1) == 1;
    const int values = trial % 4;
    if (values == 0)
      fill_random(s, 900 + static_cast<std::uint32_t>(trial));
    else
      fill_random(s, 900 + static_cast<std::uint32_t>(trial), values == 3 ? 127 : -128,
                  values == 3 ? 127 : -128);
    if (values == 2)  // -128 inputs against 127 weights: the most negative sums
      for (auto& v : s.w) v = 127;
    if (values == 3)
      for (auto& v : s.x) v = -128;
    expect_layer(arch, s, "trial " + std::to_string(trial));
    if (trial % 5 == 0) {  // whole layers (depthwise included) with 3 threads: the same bytes
      const LayerResult one = run_layer(arch, s, Isa::kAuto);
      const unsigned before = thread_count();
      set_thread_count(3);
      const LayerResult three = run_layer(arch, s, Isa::kAuto);
      set_thread_count(before);
      EXPECT_EQ(three.out, one.out);
      EXPECT_EQ(three.partials, one.partials);
    }
    if (::testing::Test::HasFailure()) break;
  }
}

// KC = 4095, the largest the field holds: the largest sums the array can produce.
TEST(ConvKernelsLayer, LargestChannelCountAtExtremeValues) {
  for (const isa::SaArch& arch : isa::kSupportedArchs) {
    ConvSpec s = raw_spec();
    s.ic = 4095, s.kn = 5;
    s.kh = s.kw = is_16x1x16(arch) ? 4 : 3;  // every PE row
    s.ih = s.kh, s.iw = s.kw + 1;
    s.pad_top = s.pad_bottom = s.pad_left = s.pad_right = 0;
    s.on_chip_acc = false;  // and the DRAM partial sums
    fill_random(s, 1, -128, -128);
    expect_layer(arch, s, "all -128");
    for (auto& v : s.w) v = 127;
    expect_layer(arch, s, "-128 x 127");
  }
}

// ConvType 2 on 16,1,16: the 6.2 sa_align_aux_pointwise blob (c = N_SA-1..0, r = 0..ROW-1 ->
// W[kern * N_SA + r][chan * ROW + c]), written here from the spec formula.
TEST(ConvKernelsLayer, PointwiseConvTypeOn16x1x16) {
  const isa::SaArch arch = isa::kArch16x1x16;
  std::mt19937 rng(5);
  for (int trial = 0; trial < 8; ++trial) {
    ConvSpec s = raw_spec();
    s.ic = std::uniform_int_distribution<int>(1, 50)(rng);
    s.kn = std::uniform_int_distribution<int>(1, 40)(rng);
    s.kh = s.kw = 1;
    s.pad_top = s.pad_bottom = s.pad_left = s.pad_right = 0;
    s.ih = 5, s.iw = 7;
    s.on_chip_acc = trial % 2 == 0;
    fill_random(s, 40 + static_cast<std::uint32_t>(trial));
    const int citr = static_cast<int>(cdiv(s.ic, 16));
    const Bytes blob = pack_pointwise_weights(s);
    auto edit = [&](ProgramBuilder& b) {
      make_pointwise(b, blob, citr);
      b.instructions[1].set(Field::OutputBlock_AccEn, citr > 1 ? 1 : 0);
    };
    const auto expected = ref_conv(s);
    const LayerResult scalar = run_layer(arch, s, Isa::kScalar, edit);
    EXPECT_EQ(scalar.out, expected) << "trial " << trial;
    for (Isa isa : cpu::kAllIsas)
      if (isa != Isa::kScalar && cpu::supports(isa)) {
        EXPECT_EQ(run_layer(arch, s, isa, edit).out, expected) << cpu::name(isa);
      }
  }
}

}  // namespace
}  // namespace npukit::device
