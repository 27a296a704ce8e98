// POOL against hand-worked examples and a plain NCHW pool written here, on all three arrays.
#include "device/pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

#include "common/error.h"
#include "device/blocks_test_support.h"
#include "device/test_programs.h"

namespace npukit::device {
namespace {
using namespace blocks_testing;
using isa::Field;

struct PoolCase {
  int type;  // 0 max, 1 average, 2 global average
  int k_h, k_w, s_h, s_w;
  int top, left, bottom, right;
  bool ceil;
  int scale, shift;
};

// Plain pool over one [H][W] plane: every window position, skipping those outside the image.
std::vector<std::int8_t> ref_pool(const PoolCase& p, const std::vector<std::int8_t>& x,
                                  std::size_t channels, int h, int w, int& oh, int& ow) {
  auto out_len = [&](int in, int k, int s, int b, int e) {
    int n = in + b + e - k;
    int o = (p.ceil ? (n + s - 1) / s : n / s) + 1;
    if (p.ceil && (o - 1) * s >= in + b) --o;
    return o;
  };
  if (p.type == 2) {
    oh = ow = 1;
  } else {
    oh = out_len(h, p.k_h, p.s_h, p.top, p.bottom);
    ow = out_len(w, p.k_w, p.s_w, p.left, p.right);
  }
  std::vector<std::int8_t> y;
  for (std::size_t c = 0; c < channels; ++c) {
    const std::int8_t* plane = x.data() + c * h * w;
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        long sum = 0;
        int best = -128;
        const int kh = p.type == 2 ? h : p.k_h, kw = p.type == 2 ? w : p.k_w;
        for (int i = 0; i < kh; ++i)
          for (int j = 0; j < kw; ++j) {
            const int yy = p.type == 2 ? i : oy * p.s_h - p.top + i;
            const int xx = p.type == 2 ? j : ox * p.s_w - p.left + j;
            if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
            sum += plane[yy * w + xx];
            best = std::max<int>(best, plane[yy * w + xx]);
          }
        long avg = sum * p.scale;
        if (p.shift) avg = (avg + (1l << (p.shift - 1))) >> p.shift;
        y.push_back(static_cast<std::int8_t>(p.type == 0 ? best : std::clamp(avg, -128l, 127l)));
      }
  }
  return y;
}

isa::Instruction pool_instruction(const PoolCase& p, std::size_t c, int h, int w,
                                  std::uint64_t addr, std::uint64_t bytes) {
  isa::Instruction m(isa::Opcode::POOL);
  m.set(Field::POOL_IW, w)
      .set(Field::POOL_IH, h)
      .set(Field::POOL_IC, c)
      .set(Field::POOL_ImageStartAddress, addr)
      .set(Field::POOL_ImageEndAddress, addr + bytes)
      .set(Field::POOL_PoolType, p.type)
      .set(Field::POOL_PoolScale, p.scale)
      .set(Field::POOL_PoolShift, p.shift)
      .set(Field::POOL_PoolWidth, p.k_w)
      .set(Field::POOL_PoolHeight, p.k_h)
      .set(Field::POOL_PoolStrideWidth, p.s_w)
      .set(Field::POOL_PoolStrideHeight, p.s_h)
      .set(Field::POOL_PoolCeil, p.ceil)
      .set(Field::POOL_PadLeft, p.left)
      .set(Field::POOL_PadBottom, p.bottom)
      .set(Field::POOL_PadRight, p.right)
      .set(Field::POOL_PadTop, p.top);
  return m;
}

// Runs POOL on the device and returns the planar int8 result; checks padding bytes are zero.
// input_padding: the byte the input's padding channels and pixels hold (the layout says 0, but a
// host may send anything there; the pool must not read them).
std::vector<std::int8_t> device_pool(const isa::SaArch& arch, const PoolCase& p,
                                     const std::vector<std::int8_t>& x, std::size_t c, int h, int w,
                                     int oh, int ow, BlockTiming* timing = nullptr,
                                     std::uint8_t input_padding = 0) {
  const std::size_t in_bytes = layout_bytes(arch.n_sa, c, h * w);
  const std::size_t out_bytes = layout_bytes(arch.n_sa, c, oh * ow);
  // The output past the input (a large input moves it up), the DRAM past both.
  const std::uint64_t in = 0x2000,
                      out = std::max<std::uint64_t>(0x40000, ceil_mod(in + in_bytes, 32));
  Dram dram(std::max<std::uint64_t>(1 << 20, ceil_mod(out + out_bytes + 64, 32)));
  Bytes packed = pack_activation(arch.n_sa, c, h * w, x);
  const std::size_t dk = 32 / static_cast<std::size_t>(arch.n_sa);
  const std::size_t padded_c = ceil_mod(c, static_cast<std::size_t>(arch.n_sa));
  const std::size_t pixels = static_cast<std::size_t>(h * w);
  for (std::size_t ch = 0; ch < padded_c; ++ch)
    for (std::size_t q = 0; q < ceil_mod(pixels, dk); ++q)
      if (ch >= c || q >= pixels) packed[layout_offset(arch.n_sa, pixels, ch, q)] = input_padding;
  dram.write(in, packed, "test");
  dram.fill(out, out_bytes + 32, 0x5A, "test");
  const isa::Instruction mega = pool_instruction(p, c, h, w, in, in_bytes);
  const isa::Instruction ob =
      output_block(out, ceil_div(c, arch.n_sa), ceil_mod(oh * ow, 32 / arch.n_sa), oh, ow);
  Diagnostics diag;
  const BlockTiming t = run_block(&run_pool, arch, dram, diag, mega, &ob, nullptr);
  if (timing) *timing = t;
  const Bytes got = dram.read(out, out_bytes, "test");
  EXPECT_EQ(dram.read_u8(out + out_bytes, "test"), 0x5A) << "wrote past the output";
  std::vector<std::int8_t> planar(c * oh * ow);
  for (std::size_t ch = 0; ch < c; ++ch)
    for (int q = 0; q < oh * ow; ++q)
      planar[ch * oh * ow + q] =
          static_cast<std::int8_t>(got[layout_offset(arch.n_sa, oh * ow, ch, q)]);
  // Re-packing the values must give the region byte for byte: every padding byte is 0.
  EXPECT_EQ(got, pack_activation(arch.n_sa, c, oh * ow, planar)) << "padding bytes not zero";
  return planar;
}

TEST(PoolBlock, HandWorkedExamples) {
  // 2x2 max, stride 2, on a 7x7 image -> 3x3 (gati.md 3.2), one channel: x[i] = i - 24.
  std::vector<std::int8_t> x(49);
  for (int i = 0; i < 49; ++i) x[i] = static_cast<std::int8_t>(i - 24);
  const PoolCase max2{0, 2, 2, 2, 2, 0, 0, 0, 0, false, 0, 0};
  EXPECT_EQ(device_pool(isa::kArch9x8x8, max2, x, 1, 7, 7, 3, 3),
            (std::vector<std::int8_t>{-16, -14, -12, -2, 0, 2, 12, 14, 16}));
  // Max over negative values with padding: padding (0 in DRAM terms) never wins.
  const std::vector<std::int8_t> neg = {-100, -90, -80, -70};
  const PoolCase max3p{0, 3, 3, 2, 2, 1, 1, 1, 1, false, 0, 0};
  EXPECT_EQ(device_pool(isa::kArch9x4x4, max3p, neg, 1, 2, 2, 1, 1),
            (std::vector<std::int8_t>{-70}));
  // Average 2x2 of [[1,2],[3,4]] with scale 1/4 (16384 >> 16): 10/4 = 2.5 rounds up to 3.
  const PoolCase avg{1, 2, 2, 1, 1, 0, 0, 0, 0, false, 16384, 16};
  EXPECT_EQ(device_pool(isa::kArch16x1x16, avg, {1, 2, 3, 4}, 1, 2, 2, 1, 1),
            (std::vector<std::int8_t>{3}));
  // ... and of [[-1,-2],[-3,-4]]: -2.5 rounds up to -2.
  EXPECT_EQ(device_pool(isa::kArch16x1x16, avg, {-1, -2, -3, -4}, 1, 2, 2, 1, 1),
            (std::vector<std::int8_t>{-2}));
  // Global average of 1..6 over a 2x3 plane, scale 1/6 ~ 10923 >> 16: 21/6 = 3.5 -> 4.
  const PoolCase gap{2, 0, 0, 0, 0, 0, 0, 0, 0, false, 10923, 16};
  EXPECT_EQ(device_pool(isa::kArch9x8x8, gap, {1, 2, 3, 4, 5, 6}, 1, 2, 3, 1, 1),
            (std::vector<std::int8_t>{4}));
  // Average saturates: 4 * 127 with scale 1 -> 127.
  const PoolCase sat{1, 2, 2, 2, 2, 0, 0, 0, 0, false, 1, 0};
  EXPECT_EQ(device_pool(isa::kArch9x8x8, sat, {127, 127, 127, 127}, 1, 2, 2, 1, 1),
            (std::vector<std::int8_t>{127}));
}

TEST(PoolBlock, CeilModeDropsAWindowStartingInThePadding) {
  EXPECT_EQ(pool_output_size(5, 2, 2, 0, 0, false), 2u);
  EXPECT_EQ(pool_output_size(5, 2, 2, 0, 0, true), 3u);
  EXPECT_EQ(pool_output_size(4, 2, 2, 1, 1, true), 3u);
  EXPECT_EQ(pool_output_size(3, 2, 2, 1, 1, true), 2u);  // a third window would start in padding
  EXPECT_EQ(pool_output_size(2, 5, 1, 1, 1, false), 0u);
  // 5x5 max, k2 s2, ceil: the last row/column windows hold only the image edge.
  std::vector<std::int8_t> x(25);
  for (int i = 0; i < 25; ++i) x[i] = static_cast<std::int8_t>(i);
  const PoolCase p{0, 2, 2, 2, 2, 0, 0, 0, 0, true, 0, 0};
  EXPECT_EQ(device_pool(isa::kArch9x4x4, p, x, 1, 5, 5, 3, 3),
            (std::vector<std::int8_t>{6, 8, 9, 16, 18, 19, 21, 23, 24}));
}

TEST(PoolBlock, MatchesPlainNchwOnEveryArray) {
  const PoolCase cases[] = {
      {0, 2, 2, 2, 2, 0, 0, 0, 0, false, 0, 0},
      {0, 3, 3, 2, 2, 1, 1, 1, 1, false, 0, 0},
      {0, 3, 2, 1, 2, 2, 0, 1, 1, true, 0, 0},   // asymmetric window, stride and pads
      {0, 7, 7, 1, 1, 3, 3, 3, 3, false, 0, 0},  // large window
      {1, 3, 3, 2, 2, 1, 1, 1, 1, false, 7282, 16},
      {1, 2, 3, 2, 3, 0, 1, 1, 0, true, 10923, 15},
      {1, 5, 5, 3, 3, 2, 2, 2, 2, true, 2621, 16},
      {2, 0, 0, 0, 0, 0, 0, 0, 0, false, 1560, 16},  // global over 6x7
      {2, 0, 0, 0, 0, 0, 0, 0, 0, false, 3, 0},      // global, saturating
  };
  unsigned seed = 40;
  for (const auto& arch : isa::kSupportedArchs)
    for (const auto& p : cases)
      for (const auto& [c, h, w] :
           {std::tuple{5, 6, 7}, std::tuple{17, 9, 4}, std::tuple{8, 7, 7}}) {
        const auto x = random_int8(c * h * w, seed++);
        int oh = 0, ow = 0;
        const auto want = ref_pool(p, x, c, h, w, oh, ow);
        ASSERT_EQ(device_pool(arch, p, x, c, h, w, oh, ow), want)
            << arch.str() << " type " << p.type << " k" << p.k_h << "x" << p.k_w << " " << c << "x"
            << h << "x" << w;
      }
}

// The whole POOL block at every ISA level the CPU has: max pool runs on the DRAM words at AVX2
// (no planes) and planar below it. resnet's 3x3 stride-2 pool over 64 channels of 112x112, and
// shapes whose words end early: channels not a multiple of 8, pixel counts not of 4, ceil mode,
// asymmetric windows, and pads as large as the window (windows wholly in the padding: -128).
TEST(PoolBlock, MaxPoolOnEveryLevelEqualsThePlainPool) {
  struct Shape {
    PoolCase p;
    std::size_t c;
    int h, w;
  };
  const Shape shapes[] = {{{0, 3, 3, 2, 2, 1, 1, 1, 1, false, 0, 0}, 64, 112, 112},
                          {{0, 3, 2, 1, 1, 1, 0, 1, 1, false, 0, 0}, 13, 9, 11},
                          {{0, 2, 2, 2, 2, 0, 0, 0, 0, true, 0, 0}, 20, 7, 7},
                          {{0, 3, 3, 3, 1, 2, 2, 2, 2, true, 0, 0}, 9, 10, 5},
                          {{0, 5, 5, 1, 1, 4, 4, 4, 4, false, 0, 0}, 8, 5, 5},
                          {{0, 1, 1, 1, 1, 0, 0, 0, 0, false, 0, 0}, 3, 1, 3}};
  unsigned seed = 90;
  for (const Isa isa : isa_paths()) {
    const cpu::ScopedIsa scoped(isa);
    for (int round = 0; round < 2; ++round)
      for (const Shape& sh : shapes) {
        const auto x = random_int8(sh.c * sh.h * sh.w, seed++);
        int oh = 0, ow = 0;
        const auto want = ref_pool(sh.p, x, sh.c, sh.h, sh.w, oh, ow);
        // Shapes run twice, the second time with the buffers of larger ones behind them and
        // non-zero input padding.
        EXPECT_EQ(device_pool(isa::kArch9x8x8, sh.p, x, sh.c, sh.h, sh.w, oh, ow, nullptr,
                              round == 0 ? 0 : 0x55),
                  want)
            << cpu::name(isa) << ": " << sh.c << "x" << sh.h << "x" << sh.w << " window "
            << sh.p.k_h << "x" << sh.p.k_w;
      }
  }
}

// Max pool on the DRAM words (the AVX2 level; planar below it) on random windows, strides 1-4
// (the 4-output blocks of strides 1 and 2, whose last block runs past the row, and the
// per-output loop), pads up to the window (its -128 columns), ceil mode, widths that are not
// multiples of 4, and all -128 / all 127 images.
TEST(PoolBlock, MaxPoolOnRandomShapesEqualsThePlainPool) {
  std::mt19937 rng(77);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int checked = 0;
  for (int trial = 0; trial < 120; ++trial) {
    PoolCase p{0, pick(1, 5), pick(1, 5), pick(1, 3),      pick(1, 4), 0,
               0, 0,          0,          pick(0, 1) == 1, 0,          0};
    p.top = pick(0, p.k_h), p.bottom = pick(0, p.k_h);
    p.left = pick(0, p.k_w), p.right = pick(0, p.k_w);
    const int h = pick(1, 9), w = pick(1, 41);
    const std::size_t c = static_cast<std::size_t>(pick(1, 19));
    if (pool_output_size(h, p.k_h, p.s_h, p.top, p.bottom, p.ceil) == 0 ||
        pool_output_size(w, p.k_w, p.s_w, p.left, p.right, p.ceil) == 0)
      continue;
    std::vector<std::int8_t> x = random_int8(c * static_cast<std::size_t>(h * w), 500u + trial);
    if (trial % 10 == 1) std::fill(x.begin(), x.end(), std::int8_t{-128});
    if (trial % 10 == 2) std::fill(x.begin(), x.end(), std::int8_t{127});
    int oh = 0, ow = 0;
    const std::vector<std::int8_t> want = ref_pool(p, x, c, h, w, oh, ow);
    for (const Isa isa : isa_paths()) {
      const cpu::ScopedIsa scoped(isa);
      EXPECT_EQ(device_pool(isa::kArch9x8x8, p, x, c, h, w, oh, ow, nullptr, 0x55), want)
          << cpu::name(isa) << ": trial " << trial << ", " << c << "x" << h << "x" << w
          << " window " << p.k_h << "x" << p.k_w << " stride " << p.s_h << "x" << p.s_w << " pads "
          << p.top << " " << p.left << " " << p.bottom << " " << p.right;
      ++checked;
    }
  }
  EXPECT_GT(checked, 150);
}

// pool_plane on every path the CPU has against ref_pool, on random windows, strides and pads
// (pads as large as the window: windows wholly in the padding give -128), ceil mode, planes wide
// enough for the 32-column AVX2 blocks and their remainders, and all -128 / all 127 planes.
TEST(PoolPlane, EveryPathEqualsThePlainPool) {
  const std::vector<Isa> paths = isa_paths();
  std::mt19937 rng(21);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int checked = 0;
  for (int trial = 0; trial < 400; ++trial) {
    PoolCase p{trial % 3, pick(1, 7), pick(1, 7), pick(1, 4),      pick(1, 4),     0,
               0,         0,          0,          pick(0, 1) == 1, pick(0, 65535), pick(0, 20)};
    p.top = pick(0, p.k_h), p.bottom = pick(0, p.k_h);
    p.left = pick(0, p.k_w), p.right = pick(0, p.k_w);
    const int h = pick(1, 12), w = trial % 4 == 0 ? pick(1, 8) : pick(20, 140);
    if (p.type != 2 && (pool_output_size(h, p.k_h, p.s_h, p.top, p.bottom, p.ceil) == 0 ||
                        pool_output_size(w, p.k_w, p.s_w, p.left, p.right, p.ceil) == 0))
      continue;
    std::vector<std::int8_t> x = random_int8(static_cast<std::size_t>(h * w), 100u + trial);
    if (trial % 10 == 1) std::fill(x.begin(), x.end(), std::int8_t{-128});
    if (trial % 10 == 2) std::fill(x.begin(), x.end(), std::int8_t{127});
    int oh = 0, ow = 0;
    const std::vector<std::int8_t> want = ref_pool(p, x, 1, h, w, oh, ow);
    PoolShape s;
    s.type = static_cast<isa::PoolType>(p.type);
    s.ih = h, s.iw = w, s.kh = p.k_h, s.kw = p.k_w, s.stride_h = p.s_h, s.stride_w = p.s_w;
    s.pad_top = p.top, s.pad_left = p.left, s.pad_bottom = p.bottom, s.pad_right = p.right;
    s.ceil_mode = p.ceil, s.oh = oh, s.ow = ow, s.scale = p.scale, s.shift = p.shift;
    for (Isa isa : paths) {
      std::vector<std::int32_t> got(want.size(), 999);
      pool_plane(s, x, got, isa);
      ASSERT_EQ(std::vector<std::int32_t>(want.begin(), want.end()), got)
          << cpu::name(isa) << " trial " << trial << " type " << p.type << " k" << p.k_h << "x"
          << p.k_w << " s" << p.s_h << "x" << p.s_w << " " << h << "x" << w;
    }
    ++checked;
  }
  EXPECT_GT(checked, 200);
}

TEST(PoolBlock, ReportsTimingFromDramBeatsAndWindows) {
  const auto x = random_int8(8 * 8 * 8, 3);
  BlockTiming t;
  const PoolCase p{0, 2, 2, 2, 2, 0, 0, 0, 0, false, 0, 0};
  device_pool(isa::kArch9x8x8, p, x, 8, 8, 8, 4, 4, &t);
  EXPECT_EQ(t.dram_read_bytes, 512u);  // 8 channels x 64 pixels
  EXPECT_EQ(t.dram_write_bytes, 128u);
  EXPECT_GE(t.cycles, t.compute_cycles);
  EXPECT_GE(t.cycles, (512 + 128) / 32);
}

TEST(PoolBlock, BadFieldsNameTheInstructionAndField) {
  Dram dram(1 << 16);
  Diagnostics diag;
  const PoolCase good{0, 2, 2, 2, 2, 0, 0, 0, 0, false, 0, 0};
  const isa::Instruction out = output_block(0x400, 1, 8, 1, 1);
  auto run = [&](const isa::Instruction& m, const isa::Instruction& o) {
    return error_of([&] { run_block(&run_pool, isa::kArch9x4x4, dram, diag, m, &o, nullptr); });
  };
  EXPECT_EQ(run(pool_instruction(good, 3, 2, 2, 0x100, 32), out), "");
  isa::Instruction bad_type = pool_instruction(good, 3, 2, 2, 0x100, 32);
  bad_type.set(Field::POOL_PoolType, 3);
  std::string e = run(bad_type, out);
  EXPECT_NE(e.find("instruction 1 POOL.PoolType"), std::string::npos) << e;
  const PoolCase big{0, 5, 2, 1, 1, 1, 0, 1, 0, false, 0, 0};  // 5 > 2 + 1 + 1
  e = run(pool_instruction(big, 3, 2, 2, 0x100, 32), out);
  EXPECT_NE(e.find("POOL.PoolHeight"), std::string::npos) << e;
  EXPECT_NE(e.find("larger than the padded image height 4"), std::string::npos) << e;
  const PoolCase zero_stride{0, 2, 2, 0, 2, 0, 0, 0, 0, false, 0, 0};
  e = run(pool_instruction(zero_stride, 3, 2, 2, 0x100, 32), out);
  EXPECT_NE(e.find("POOL.PoolStrideHeight"), std::string::npos) << e;
  e = run(pool_instruction(good, 3, 2, 2, 0x100, 64), out);
  EXPECT_NE(e.find("POOL.ImageEndAddress"), std::string::npos) << e;
  isa::Instruction wrong_oh = output_block(0x400, 1, 8, 2, 1);
  e = run(pool_instruction(good, 3, 2, 2, 0x100, 32), wrong_oh);
  EXPECT_NE(e.find("instruction 2 OutputBlock.OH"), std::string::npos) << e;
  isa::Instruction wide = out;
  wide.set(Field::OutputBlock_OpWidth, 4);
  e = run(pool_instruction(good, 3, 2, 2, 0x100, 32), wide);
  EXPECT_NE(e.find("OutputBlock.OpWidth"), std::string::npos) << e;
  isa::Instruction wrong_dim = output_block(0x400, 1, 16, 1, 1);
  e = run(pool_instruction(good, 3, 2, 2, 0x100, 32), wrong_dim);
  EXPECT_NE(e.find("OutputBlock.ImageDimOutput"), std::string::npos) << e;
}

// Whole programs through Device: POOL as the first layer (with the empty TailBlock the board
// needs) and CONV -> POOL, the chain the RTL ran.
TEST(PoolProgram, FirstLayerAndAfterConvOnEveryArray) {
  unsigned seed = 900;
  for (const auto& arch : isa::kSupportedArchs) {
    // POOL first: 3x3 stride 2 pad 1 average over 5 channels of 7x6.
    {
      const PoolCase p{1, 3, 3, 2, 2, 1, 1, 1, 1, false, 7282, 16};
      const std::size_t c = 5;
      const int h = 7, w = 6;
      const auto x = random_int8(c * h * w, seed++);
      int oh = 0, ow = 0;
      const auto want = ref_pool(p, x, c, h, w, oh, ow);
      testing::ProgramBuilder b{arch, {}, {}};
      const std::size_t in_bytes = layout_bytes(arch.n_sa, c, h * w);
      const std::uint32_t in = b.alloc(in_bytes);
      const std::uint32_t out = b.alloc(layout_bytes(arch.n_sa, c, oh * ow));
      isa::Instruction ob =
          output_block(out, ceil_div(c, arch.n_sa), ceil_mod(oh * ow, 32 / arch.n_sa), oh, ow);
      ob.set(Field::OutputBlock_DispatchEn, 1).set(Field::OutputBlock_DispatchID, 0x9001);
      const isa::Instruction empty_tail(isa::Opcode::TailBlock);
      add_group(b, pool_instruction(p, c, h, w, in, in_bytes), ob, &empty_tail);
      b.finish();
      std::vector<Warning> warnings;
      EXPECT_EQ(
          run_program_dispatch(b, in, pack_activation(arch.n_sa, c, h * w, x), 0x9001, &warnings),
          expected_activation(arch.n_sa, c, oh * ow, want))
          << arch.str();
      // The intended average is computed; the only warning is the erratum of an average POOL
      // megablock on v1.0.0 (gati.md 14.15; the empty TailBlock avoids E3).
      ASSERT_EQ(warnings.size(), 1u);
      EXPECT_EQ(warnings[0].erratum, erratum_name(Erratum::kPoolAverage));
    }
    // CONV 3x3 (8 -> 6 channels, 9x7) -> POOL max 2x2 stride 2, ceil mode.
    {
      testing::ConvSpec conv;
      conv.ic = 8;
      conv.ih = 9;
      conv.iw = 7;
      conv.kn = 6;
      conv.quant_scale = 3;
      conv.quant_shift = 9;
      testing::fill_random(conv, seed++);
      testing::ProgramBuilder b{arch, {}, {}};
      const std::uint32_t in = b.alloc(layout_bytes(arch.n_sa, conv.ic, conv.ih * conv.iw));
      const int ch = conv.oh(), cw = conv.ow();
      const std::uint32_t mid = b.alloc(layout_bytes(arch.n_sa, conv.kn, ch * cw));
      b.add_conv(conv, in, mid);
      const PoolCase p{0, 2, 2, 2, 2, 0, 0, 0, 0, true, 0, 0};
      std::vector<std::int8_t> conv_out;
      for (std::int32_t v : testing::ref_conv(conv))
        conv_out.push_back(static_cast<std::int8_t>(v));
      int oh = 0, ow = 0;
      const auto want = ref_pool(p, conv_out, conv.kn, ch, cw, oh, ow);
      const std::uint32_t out = b.alloc(layout_bytes(arch.n_sa, conv.kn, oh * ow));
      isa::Instruction ob = output_block(out, ceil_div(conv.kn, arch.n_sa),
                                         ceil_mod(oh * ow, 32 / arch.n_sa), oh, ow);
      ob.set(Field::OutputBlock_DispatchEn, 1).set(Field::OutputBlock_DispatchID, 0x9002);
      add_group(
          b, pool_instruction(p, conv.kn, ch, cw, mid, layout_bytes(arch.n_sa, conv.kn, ch * cw)),
          ob, nullptr);
      b.finish();
      const Bytes input = testing::pack_activation(arch, conv.ic, conv.ih * conv.iw, conv.x);
      EXPECT_EQ(run_program_dispatch(b, in, input, 0x9002, nullptr),
                expected_activation(arch.n_sa, conv.kn, oh * ow, want))
          << arch.str();
    }
  }
}

}  // namespace
}  // namespace npukit::device
