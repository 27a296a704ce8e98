// EltWise lanes against hand-worked values of gati.md 7.3 / DECISIONS.md 4 and 6.
#include "device/eltwise.h"

#include <gtest/gtest.h>

#include <functional>
#include <iostream>
#include <random>

#include "common/error.h"
#include "device/blocks_test_support.h"
#include "device/device.h"
#include "device/tanh_engine.h"
#include "device/test_programs.h"

namespace npukit::device {

// ---------------------------------------------------------------------------------------------
// Test support shared by the device-blocks tests (declared again at the top of each of them).
// The layout is written here from the gati.md 6.1 formula, independently of block.h.

namespace blocks_testing {

std::size_t layout_offset(int n_sa, std::size_t pixels, std::size_t c, std::size_t p) {
  const std::size_t dk = 32 / static_cast<std::size_t>(n_sa);
  const std::size_t padded_p = (pixels + dk - 1) / dk * dk;
  return (c / n_sa) * (n_sa * padded_p) + (p / dk) * 32 + (c % n_sa) * dk + (p % dk);
}

std::size_t layout_bytes(int n_sa, std::size_t channels, std::size_t pixels) {
  const std::size_t dk = 32 / static_cast<std::size_t>(n_sa);
  return (channels + n_sa - 1) / n_sa * n_sa * ((pixels + dk - 1) / dk * dk);
}

Bytes pack_activation(int n_sa, std::size_t channels, std::size_t pixels,
                      const std::vector<std::int8_t>& planar) {
  Bytes out(layout_bytes(n_sa, channels, pixels), 0);
  for (std::size_t c = 0; c < channels; ++c)
    for (std::size_t p = 0; p < pixels; ++p)
      out[layout_offset(n_sa, pixels, c, p)] = static_cast<std::uint8_t>(planar[c * pixels + p]);
  return out;
}

// Expected bytes of an output region: the values at their places, every other byte 0.
Bytes expected_activation(int n_sa, std::size_t channels, std::size_t pixels,
                          const std::vector<std::int8_t>& planar) {
  return pack_activation(n_sa, channels, pixels, planar);
}

std::vector<std::int8_t> random_int8(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-128, 127);
  std::vector<std::int8_t> v(n);
  for (auto& x : v) x = static_cast<std::int8_t>(d(rng));
  return v;
}

isa::Instruction output_block(std::uint64_t out_addr, std::uint64_t kernel_itr,
                              std::uint64_t image_dim_output, std::uint64_t oh, std::uint64_t ow) {
  isa::Instruction o(isa::Opcode::OutputBlock);
  o.set(isa::Field::OutputBlock_OutputAddr, out_addr)
      .set(isa::Field::OutputBlock_ChannelItr, 1)
      .set(isa::Field::OutputBlock_KernelItr, kernel_itr)
      .set(isa::Field::OutputBlock_ImageDimOutput, image_dim_output)
      .set(isa::Field::OutputBlock_ImageDimAcc, image_dim_output)
      .set(isa::Field::OutputBlock_OH, oh)
      .set(isa::Field::OutputBlock_OW, ow)
      .set(isa::Field::OutputBlock_OpWidth, 1);
  return o;
}

// Runs one megablock as the sequencer would, with a DRAM the test prepared.
BlockTiming run_block(BlockFn fn, const isa::SaArch& arch, Dram& dram, Diagnostics& diag,
                      const isa::Instruction& mega, const isa::Instruction* output,
                      const isa::Instruction* tail) {
  LayerContext ctx{arch, dram, mega, output, tail, 1, diag, 1, 2, 3};
  return fn(ctx);
}

// The message of the npukit::Error `body` throws, or "" if it does not throw.
std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Runs a finished program on a Device of the builder's array: GML, the input packet, the start
// packet. Returns the payload of the one dispatch frame it must produce (header and footer
// checked); warnings, if asked for, receive the device's diagnostics.
Bytes run_program_dispatch(const testing::ProgramBuilder& b, std::uint32_t input_addr,
                           const Bytes& input, std::uint32_t dispatch_id,
                           std::vector<Warning>* warnings) {
  DeviceConfig config;
  config.arch = b.arch;
  config.dram_bytes = 16u << 20;
  Device device(config);
  device.receive_dwp(b.stream(input_addr, input));
  EXPECT_EQ(device.stats().runs, 1u);
  if (warnings) *warnings = device.diagnostics().warnings();
  const Bytes frame = device.take_dispatch_output();
  if (frame.size() < 24) {
    ADD_FAILURE() << "no dispatch frame";
    return {};
  }
  EXPECT_EQ(load_be32(&frame[0]), 0xFFFFFFFFu);
  const std::uint32_t size = load_be32(&frame[4]);
  EXPECT_EQ(load_be32(&frame[8]), dispatch_id);
  EXPECT_EQ(frame.size(), size + 24u) << "exactly one frame";
  EXPECT_EQ(load_be32(&frame[frame.size() - 12]), 0xFFFFFFFFu);
  return Bytes(frame.begin() + 12, frame.end() - 12);
}

// Appends one megablock group (mega, OutputBlock, optional TailBlock) to a program.
void add_group(testing::ProgramBuilder& b, const isa::Instruction& mega,
               const isa::Instruction& output, const isa::Instruction* tail) {
  b.instructions.push_back(mega);
  b.instructions.push_back(output);
  if (tail) b.instructions.push_back(*tail);
  ++b.megablocks;
}

std::vector<Isa> isa_paths() {
  std::vector<Isa> paths = {Isa::kScalar};
  for (Isa isa : cpu::kAllIsas)
    if (isa != Isa::kScalar) {
      if (cpu::supports(isa))
        paths.push_back(isa);
      else
        std::cout << "[ skipped  ] the " << cpu::name(isa) << " path: this CPU lacks it\n";
    }
  return paths;
}

}  // namespace blocks_testing

namespace {
using namespace blocks_testing;

using isa::EltType;
using isa::Field;

EltwiseLaneParams lane(EltType type, std::int32_t sa, std::int32_t sb, std::int32_t za = 0,
                       std::int32_t zb = 0) {
  return {type, sa, sb, za, zb};
}

TEST(EltwiseLane, AddSubInQ10) {
  // 0.5 * 10 + 0.25 * (-8) = 3.0 -> 3072 in Q10.
  EXPECT_EQ(eltwise_lane(lane(EltType::kAdd, 512, 256), 10, -8), 3072);
  EXPECT_EQ(eltwise_lane(lane(EltType::kSub, 512, 256), 10, -8), 5120 + 2048);
  // Zero points are subtracted first: (10 - 2) * 512 + (-8 - (-8)) * 256.
  EXPECT_EQ(eltwise_lane(lane(EltType::kAdd, 512, 256, 2, -8), 10, -8), 4096);
  // Extremes: (-128 - 127) * (-131072) + (127 - (-128)) * 131071.
  EXPECT_EQ(eltwise_lane(lane(EltType::kAdd, -131072, 131071, 127, -128), -128, 127),
            255 * 131072 + 255 * 131071);
}

TEST(EltwiseLane, MultRoundsQ20BackToQ10) {
  // (3 * 1024) * (5 * 1024) = 15 * 2^20 -> 15 * 1024 exactly.
  EXPECT_EQ(eltwise_lane(lane(EltType::kMult, 1024, 1024), 3, 5), 15360);
  // L = 1 * 3 = 3, R = 1 * 171 = 171: 513 + 512 = 1025 >> 10 = 1 (half rounds up).
  EXPECT_EQ(eltwise_lane(lane(EltType::kMult, 3, 171), 1, 1), 1);
  EXPECT_EQ(eltwise_lane(lane(EltType::kMult, 1, 511), 1, 1), 0);  // 511 + 512 < 1024
  EXPECT_EQ(eltwise_lane(lane(EltType::kMult, 1, 512), 1, 1), 1);
  // Negative products round toward +inf at the half: (-512 + 512) >> 10 = 0; -513 -> -1.
  EXPECT_EQ(eltwise_lane(lane(EltType::kMult, -1, 512), 1, 1), 0);
  EXPECT_EQ(eltwise_lane(lane(EltType::kMult, -1, 513), 1, 1), -1);
  // Large product keeps only the low 32 bits of the output bus:
  // (255 * 131071)^2 >> 10 = 1091478650958 -> mod 2^32.
  const std::int64_t l = 255ll * 131071;
  const std::int64_t full = (l * l + 512) >> 10;
  EXPECT_EQ(eltwise_lane(lane(EltType::kMult, 131071, 131071, -128, -128), 127, 127),
            static_cast<std::int32_t>(static_cast<std::uint32_t>(full)));
}

TEST(EltwiseLane, SigmoidAndTanhUseOnlyTheLeftOperand) {
  // AScale in Q16 engine units: x = 4 * 500 = 2000 -> tanh 1999 (hand-worked in the engine test).
  EXPECT_EQ(eltwise_lane(lane(EltType::kTanh, 500, 99999), 4, 100), 1999);
  EXPECT_EQ(eltwise_lane(lane(EltType::kTanh, 500, 0), -4, 0), -1999);
  EXPECT_EQ(eltwise_lane(lane(EltType::kSigmoid, 1000, 7), 4, -3), 33767);
  EXPECT_EQ(eltwise_lane(lane(EltType::kSigmoid, 1000, 7, 4), 4, -3), 32767);  // x = 0
}

TEST(EltwiseFields, ScalesAreSignedLow18Bits) {
  EXPECT_EQ(eltwise_scale_from_field(1024), 1024);
  EXPECT_EQ(eltwise_scale_from_field(0x3FFFF), -1);
  EXPECT_EQ(eltwise_scale_from_field(0x20000), -131072);
  EXPECT_EQ(eltwise_scale_from_field(0xFFFC0400), 1024);  // bits above 17 ignored
  isa::Instruction inst(isa::Opcode::EltWise);
  inst.set(Field::EltWise_EltType, 2)
      .set(Field::EltWise_AScale, 0x3FC00)  // -1024
      .set(Field::EltWise_BScale, 3)
      .set(Field::EltWise_AZeroPoint, 0xFF)  // -1
      .set(Field::EltWise_BZeroPoint, 5);
  const auto p = eltwise_lane_params(inst, "layer 1");
  EXPECT_EQ(p.type, EltType::kMult);
  EXPECT_EQ(p.a_scale, -1024);
  EXPECT_EQ(p.b_scale, 3);
  EXPECT_EQ(p.a_zero, -1);
  EXPECT_EQ(p.b_zero, 5);
  EXPECT_EQ(eltwise_fp_cast_shift(EltType::kAdd), 10);
  EXPECT_EQ(eltwise_fp_cast_shift(EltType::kMult), 10);
  EXPECT_EQ(eltwise_fp_cast_shift(EltType::kSigmoid), 16);
  EXPECT_EQ(eltwise_fp_cast_shift(EltType::kTanh), 16);
}

TEST(EltwiseFields, EltTypeAboveFourIsAnErrorNamingTheField) {
  isa::Instruction inst(isa::Opcode::EltWise);
  inst.set(Field::EltWise_EltType, 5);
  try {
    eltwise_lane_params(inst, "layer 3");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("EltWise.EltType = 5"), std::string::npos) << e.what();
  }
}

TEST(EltwiseLane, ZeroPointWrapDetection) {
  EXPECT_FALSE(eltwise_zero_point_wraps(127, 0));
  EXPECT_TRUE(eltwise_zero_point_wraps(127, -1));
  EXPECT_TRUE(eltwise_zero_point_wraps(-128, 1));
  EXPECT_FALSE(eltwise_zero_point_wraps(-128, -1));
}

// ---------------------------------------------------------------------------------------------
// The megablock against a plain NCHW computation written here.

std::int64_t ref_round_shift(std::int64_t v, int s) { return s ? (v + (1ll << (s - 1))) >> s : v; }

std::int8_t ref_quantize(std::int64_t v, int scale, int shift, int fp_cast) {
  const std::int64_t q = ref_round_shift(ref_round_shift(v * scale, shift), fp_cast);
  return static_cast<std::int8_t>(std::clamp<std::int64_t>(q, -128, 127));
}

struct EltCase {
  int type;
  int a_scale, b_scale, a_zero, b_zero;
  int quant_scale, quant_shift;
};

std::int64_t ref_lane(const EltCase& k, int a, int b) {
  const std::int64_t l = std::int64_t{a - k.a_zero} * k.a_scale;
  const std::int64_t r = std::int64_t{b - k.b_zero} * k.b_scale;
  switch (k.type) {
    case 0:
      return l + r;
    case 1:
      return l - r;
    case 2:
      return static_cast<std::int32_t>(static_cast<std::uint32_t>((l * r + 512) >> 10));
    case 3:
      return sigmoid_q16(static_cast<std::int32_t>(l));  // engine: hand-checked above
    default:
      return tanh_q16(static_cast<std::int32_t>(l));
  }
}

// eltwise_span on every path the CPU has against ref_lane and a wrap count written here, on
// random operands, extreme scales (the signed 18-bit ends), zero points that make operands
// leave int8, and lengths around the 8-lane blocks.
TEST(EltwiseSpan, EveryPathEqualsThePlainLanes) {
  const std::vector<Isa> paths = isa_paths();
  std::mt19937 rng(13);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto scale = [&] {
    switch (pick(0, 3)) {
      case 0:
        return pick(0, 1) ? -131072 : 131071;
      case 1:
        return pick(-131072, 131071);
      default:
        return pick(-3000, 3000);
    }
  };
  for (int trial = 0; trial < 600; ++trial) {
    const EltCase k{trial % 5,
                    scale(),
                    scale(),
                    pick(0, 2) ? 0 : pick(-128, 127),
                    pick(0, 2) ? 0 : pick(-128, 127),
                    1,
                    0};
    const auto n = static_cast<std::size_t>(pick(0, 70));
    std::vector<std::int8_t> a(n), b(n);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = static_cast<std::int8_t>(pick(0, 4) ? pick(-128, 127) : (pick(0, 1) ? -128 : 127));
      b[i] = static_cast<std::int8_t>(pick(0, 4) ? pick(-128, 127) : (pick(0, 1) ? -128 : 127));
    }
    std::vector<std::int32_t> want(n);
    std::uint64_t want_wrapped = 0;
    auto leaves_int8 = [](int x, int zero) { return x - zero < -128 || x - zero > 127; };
    for (std::size_t i = 0; i < n; ++i) {
      want[i] = static_cast<std::int32_t>(ref_lane(k, a[i], b[i]));
      want_wrapped += leaves_int8(a[i], k.a_zero) || (k.type < 3 && leaves_int8(b[i], k.b_zero));
    }
    const EltwiseLaneParams p{static_cast<EltType>(k.type), k.a_scale, k.b_scale, k.a_zero,
                              k.b_zero};
    for (Isa isa : paths) {
      std::vector<std::int32_t> got(n, 999);
      const std::uint64_t wrapped =
          eltwise_span(p, a.data(), k.type < 3 ? b.data() : nullptr, got.data(), n, isa);
      ASSERT_EQ(got, want) << cpu::name(isa) << " trial " << trial << " type " << k.type;
      ASSERT_EQ(wrapped, want_wrapped) << cpu::name(isa) << " trial " << trial;
    }
  }
}

void run_eltwise_case(const isa::SaArch& arch, const EltCase& k, std::size_t c, std::size_t h,
                      std::size_t w, unsigned seed) {
  const std::size_t pixels = h * w;
  const auto a = random_int8(c * pixels, seed);
  const auto b = random_int8(c * pixels, seed + 1);
  const std::size_t bytes = layout_bytes(arch.n_sa, c, pixels);
  const std::uint64_t left = 0x1000, right = 0x1000 + ceil_mod(bytes, 32) + 64, out = 0x20000;
  Dram dram(1 << 20);
  dram.write(left, pack_activation(arch.n_sa, c, pixels, a), "test");
  dram.write(right, pack_activation(arch.n_sa, c, pixels, b), "test");
  dram.fill(out, bytes + 64, 0xAA, "test");  // stale data the block must overwrite with zeros

  isa::Instruction mega(isa::Opcode::EltWise);
  mega.set(Field::EltWise_EltType, k.type)
      .set(Field::EltWise_IW, w)
      .set(Field::EltWise_IH, h)
      .set(Field::EltWise_IC, c)
      .set(Field::EltWise_LeftOperandStartAddress, left)
      .set(Field::EltWise_LeftOperandEndAddress, left + bytes)
      .set(Field::EltWise_RightOperandStartAddress, right)
      .set(Field::EltWise_RightOperandEndAddress, right + bytes)
      .set(Field::EltWise_AScale, static_cast<std::uint32_t>(k.a_scale) & 0x3FFFF)
      .set(Field::EltWise_BScale, static_cast<std::uint32_t>(k.b_scale) & 0x3FFFF)
      .set(Field::EltWise_AZeroPoint, static_cast<std::uint8_t>(k.a_zero))
      .set(Field::EltWise_BZeroPoint, static_cast<std::uint8_t>(k.b_zero));
  const std::size_t dk = 32 / arch.n_sa;
  const isa::Instruction output =
      output_block(out, ceil_div(c, arch.n_sa), ceil_mod(pixels, dk), h, w);
  isa::Instruction tail(isa::Opcode::TailBlock);
  tail.set(Field::TailBlock_QuantEn, 1)
      .set_signed(Field::TailBlock_QuantScale, k.quant_scale)
      .set(Field::TailBlock_QuantShift, k.quant_shift);
  Diagnostics diag;
  const BlockTiming t = run_block(&run_eltwise, arch, dram, diag, mega, &output, &tail);

  const int fp_cast = k.type >= 3 ? 16 : 10;
  std::vector<std::int8_t> want(c * pixels);
  for (std::size_t i = 0; i < want.size(); ++i)
    want[i] = ref_quantize(ref_lane(k, a[i], b[i]), k.quant_scale, k.quant_shift, fp_cast);
  const Bytes got = dram.read(out, bytes, "test");
  const Bytes expect = expected_activation(arch.n_sa, c, pixels, want);
  ASSERT_EQ(got, expect) << arch.str() << " type " << k.type << " " << c << "x" << h << "x" << w;
  EXPECT_EQ(dram.read_u8(out + bytes, "test"), 0xAA) << "wrote past the output region";
  EXPECT_GT(t.cycles, 0u);
  EXPECT_EQ(t.dram_write_bytes, bytes);
  EXPECT_EQ(t.dram_read_bytes, k.type >= 3 ? bytes : 2 * bytes);
}

TEST(EltwiseBlock, MatchesPlainNchwOnEveryArrayAndOperation) {
  const EltCase cases[] = {
      {0, 700, -1100, 0, 0, 181, 8},   // add, real-valued scales of either sign
      {0, 1024, 1024, 3, -7, 1, 1},    // add with zero points
      {1, 900, 1300, 0, 0, 150, 7},    // sub
      {2, 1024, 1024, 0, 0, 1, 7},     // mult: a*b/128
      {2, -3000, 2500, 1, 2, 77, 12},  // mult, large scales
      {3, 3000, 0, 0, 0, 255, 1},      // sigmoid: Q16 out * 255/2 -> 0..127
      {4, 2100, 0, 0, 0, 127, 0},      // tanh: x up to 4.1, out * 127
      {4, -1500, 999, 5, 0, 127, 0},   // tanh with a negative scale and a zero point
  };
  unsigned seed = 1;
  for (const auto& arch : isa::kSupportedArchs)
    for (const auto& k : cases) {
      run_eltwise_case(arch, k, 5, 3, 7, seed++);   // odd channels, non-square, P % dk != 0
      run_eltwise_case(arch, k, 17, 6, 1, seed++);  // a column image, channels > N_SA
      run_eltwise_case(arch, k, 16, 4, 4, seed++);  // exact fits
    }
}

TEST(EltwiseBlock, Int32OutputWithoutQuantizer) {
  // QuantEn 0 and OpWidth 4: the lane values themselves, big-endian int32 at 4 * offset.
  const isa::SaArch arch = isa::kArch9x4x4;
  const std::size_t c = 5, pixels = 6;
  const auto a = random_int8(c * pixels, 77), b = random_int8(c * pixels, 78);
  const std::size_t bytes = layout_bytes(arch.n_sa, c, pixels);
  Dram dram(1 << 20);
  dram.write(0x1000, pack_activation(arch.n_sa, c, pixels, a), "test");
  dram.write(0x2000, pack_activation(arch.n_sa, c, pixels, b), "test");
  isa::Instruction mega(isa::Opcode::EltWise);
  mega.set(Field::EltWise_EltType, 1)
      .set(Field::EltWise_IW, 3)
      .set(Field::EltWise_IH, 2)
      .set(Field::EltWise_IC, c)
      .set(Field::EltWise_LeftOperandStartAddress, 0x1000)
      .set(Field::EltWise_LeftOperandEndAddress, 0x1000 + bytes)
      .set(Field::EltWise_RightOperandStartAddress, 0x2000)
      .set(Field::EltWise_RightOperandEndAddress, 0x2000 + bytes)
      .set(Field::EltWise_AScale, 1000)
      .set(Field::EltWise_BScale, 0x3FFFF & static_cast<std::uint32_t>(-77));
  isa::Instruction ob = output_block(0x8000, 2, 8, 2, 3);
  ob.set(Field::OutputBlock_OpWidth, 4);
  const isa::Instruction empty_tail(isa::Opcode::TailBlock);
  Diagnostics diag;
  run_block(&run_eltwise, arch, dram, diag, mega, &ob, &empty_tail);
  Bytes want(4 * bytes, 0);
  for (std::size_t ch = 0; ch < c; ++ch)
    for (std::size_t p = 0; p < pixels; ++p) {
      const std::int32_t v = a[ch * pixels + p] * 1000 - b[ch * pixels + p] * -77;
      store_be32(&want[4 * layout_offset(arch.n_sa, pixels, ch, p)], static_cast<std::uint32_t>(v));
    }
  EXPECT_EQ(dram.read(0x8000, 4 * bytes, "test"), want);
}

// Add, sub and mult with a bias-free quantizing tail on the 9,8,8 array run word by word from
// the DRAM pages (eltwise.cpp eltwise_words); the scalar level runs the planar path. Every path
// against the definition written here, on operands with extreme values, stale non-zero bytes in
// their padding, odd channel counts, pixel counts that are not multiples of 4, regions that
// cross 64 KiB pages at different offsets, and the output on the left operand.
TEST(EltwiseBlock, WholeWordPathEqualsTheDefinitionOnEveryPath) {
  const isa::SaArch arch = isa::kArch9x8x8;
  struct Act {
    int en, type, param;
  };
  const EltCase cases[] = {
      {0, 131071, -131072, -128, 127, 32767, 20},
      {0, 700, -1100, 3, -7, 181, 8},
      {1, -131072, 131071, 127, -128, -32768, 31},
      {1, 900, 1300, 0, 0, 150, 7},
      {2, 131071, 131071, -128, -128, 3, 30},
      {2, -3000, 2500, 1, 2, 77, 12},
      // One zero point 0: the other operand's stale padding can still wrap.
      {0, 800, -900, 0, -5, 170, 9},
      {1, 600, 700, 4, 0, 200, 10},
      // Zero points 0 (the compiler's residual adds: AScale about 2^15, BScale 2^16, QuantScale
      // about 2^15, T = 31), at the limb split's edges (T = 16 and 41, products near 2^31) and
      // past them (T = 15; products to 2^32), where the sum is formed another way.
      {0, 48539, 65536, 0, 0, 27019, 21},
      {1, 43344, 65536, 0, 0, 27905, 21},
      {0, -70000, 1500, 0, 0, 30000, 6},
      {1, 65535, -65536, 0, 0, 32767, 31},
      {0, 131071, -131072, 0, 0, -32768, 6},
      {0, 4000, 65536, 0, 0, 30000, 5},
  };
  const Act acts[] = {{0, 0, 0}, {1, 0, 0}, {1, 1, 100}, {1, 1, 0}};
  struct Shape {
    std::size_t c, h, w;
    std::uint64_t left, right, out;  // out == left: in place
  };
  const Shape shapes[] = {
      {5, 3, 7, 0x1000, 0x2000, 0x3000},     {13, 1, 5, 0x1000, 0x2000, 0x1000},
      {8, 2, 2, 0x1000, 0x2000, 0x3000},     {24, 50, 61, 0xF020, 0x31040, 0x52060},
      {21, 50, 61, 0xF020, 0x31040, 0xF020},
  };
  const std::vector<Isa> paths = isa_paths();
  unsigned seed = 500;
  for (const Shape& s : shapes)
    for (const EltCase& k : cases)
      for (const Act& act : acts) {
        const std::size_t pixels = s.h * s.w, n = s.c * pixels;
        auto a = random_int8(n, seed++), b = random_int8(n, seed++);
        for (std::size_t i = 0; i < n; i += 7) a[i] = i % 2 ? 127 : -128, b[n - 1 - i] = -128;
        const std::size_t bytes = layout_bytes(arch.n_sa, s.c, pixels);
        // Stale bytes everywhere, then the values at their places: the padding keeps the stale.
        const auto stale = random_int8(2 * bytes, seed++);
        Bytes pa(stale.begin(), stale.begin() + bytes), pb(stale.begin() + bytes, stale.end());
        for (std::size_t ch = 0; ch < s.c; ++ch)
          for (std::size_t p = 0; p < pixels; ++p) {
            const std::size_t at = layout_offset(arch.n_sa, pixels, ch, p);
            pa[at] = static_cast<std::uint8_t>(a[ch * pixels + p]);
            pb[at] = static_cast<std::uint8_t>(b[ch * pixels + p]);
          }
        std::vector<std::int8_t> want(n);
        std::uint64_t want_wrapped = 0;
        for (std::size_t i = 0; i < n; ++i) {
          std::int32_t q = ref_quantize(ref_lane(k, a[i], b[i]), k.quant_scale, k.quant_shift, 10);
          if (act.en) q = std::clamp(q, 0, act.type == 1 ? act.param : 127);
          want[i] = static_cast<std::int8_t>(q);
          const int da = a[i] - k.a_zero, db = b[i] - k.b_zero;
          want_wrapped += da < -128 || da > 127 || db < -128 || db > 127;
        }
        const Bytes expect = expected_activation(arch.n_sa, s.c, pixels, want);

        isa::Instruction mega(isa::Opcode::EltWise);
        mega.set(Field::EltWise_EltType, k.type)
            .set(Field::EltWise_IW, s.w)
            .set(Field::EltWise_IH, s.h)
            .set(Field::EltWise_IC, s.c)
            .set(Field::EltWise_LeftOperandStartAddress, s.left)
            .set(Field::EltWise_LeftOperandEndAddress, s.left + bytes)
            .set(Field::EltWise_RightOperandStartAddress, s.right)
            .set(Field::EltWise_RightOperandEndAddress, s.right + bytes)
            .set(Field::EltWise_AScale, static_cast<std::uint32_t>(k.a_scale) & 0x3FFFF)
            .set(Field::EltWise_BScale, static_cast<std::uint32_t>(k.b_scale) & 0x3FFFF)
            .set(Field::EltWise_AZeroPoint, static_cast<std::uint8_t>(k.a_zero))
            .set(Field::EltWise_BZeroPoint, static_cast<std::uint8_t>(k.b_zero));
        const isa::Instruction output =
            output_block(s.out, ceil_div(s.c, 8), ceil_mod(pixels, 4), s.h, s.w);
        isa::Instruction tail(isa::Opcode::TailBlock);
        tail.set(Field::TailBlock_QuantEn, 1)
            .set_signed(Field::TailBlock_QuantScale, k.quant_scale)
            .set(Field::TailBlock_QuantShift, k.quant_shift)
            .set(Field::TailBlock_ActEn, act.en)
            .set(Field::TailBlock_ActType, act.type)
            .set(Field::TailBlock_ActParam, act.param);
        for (Isa isa : paths) {
          const cpu::ScopedIsa forced(isa);
          Dram dram(1 << 20);
          if (s.out != s.left) dram.fill(s.out, bytes + 64, 0xAA, "test");
          dram.fill(s.out + bytes, 64, 0xAA, "test");
          dram.write(s.left, pa, "test");
          dram.write(s.right, pb, "test");
          Diagnostics diag;
          const BlockTiming t = run_block(&run_eltwise, arch, dram, diag, mega, &output, &tail);
          const std::string what =
              fmt::format("{} type {} act {}/{} {}x{}x{} out {:x}", cpu::name(isa), k.type, act.en,
                          act.type, s.c, s.h, s.w, s.out);
          ASSERT_EQ(dram.read(s.out, bytes, "test"), expect) << what;
          EXPECT_EQ(dram.read_u8(s.out + bytes, "test"), 0xAA) << what;
          EXPECT_EQ(t.dram_write_bytes, bytes) << what;
          EXPECT_EQ(t.dram_read_bytes, 2 * bytes) << what;
          std::vector<std::string> wrap_warnings;  // (negative scales also warn: 18 bits)
          for (const Warning& w : diag.warnings())
            if (w.message.find("zero point") != std::string::npos)
              wrap_warnings.push_back(w.message);
          if (want_wrapped == 0) {
            EXPECT_TRUE(wrap_warnings.empty()) << what;
          } else {
            ASSERT_EQ(wrap_warnings.size(), 1u) << what;
            EXPECT_NE(wrap_warnings[0].find(fmt::format(": {} elements", want_wrapped)),
                      std::string::npos)
                << what << ": " << wrap_warnings[0];
          }
        }
      }
}

isa::Instruction small_eltwise(int type) {
  isa::Instruction mega(isa::Opcode::EltWise);
  mega.set(Field::EltWise_EltType, type)
      .set(Field::EltWise_IW, 2)
      .set(Field::EltWise_IH, 2)
      .set(Field::EltWise_IC, 3)
      .set(Field::EltWise_LeftOperandStartAddress, 0x100)
      .set(Field::EltWise_LeftOperandEndAddress, 0x120)
      .set(Field::EltWise_RightOperandStartAddress, 0x200)
      .set(Field::EltWise_RightOperandEndAddress, 0x220);
  return mega;
}

TEST(EltwiseBlock, BadFieldsNameTheInstructionAndField) {
  Dram dram(1 << 16);
  Diagnostics diag;
  const isa::Instruction out = output_block(0x400, 1, 8, 2, 2);
  const auto run = [&](const isa::Instruction& mega) {
    return error_of(
        [&] { run_block(&run_eltwise, isa::kArch9x4x4, dram, diag, mega, &out, nullptr); });
  };
  EXPECT_EQ(run(small_eltwise(0)), "");
  std::string e = run(small_eltwise(5));
  EXPECT_NE(e.find("instruction 1 EltWise.EltType"), std::string::npos) << e;
  isa::Instruction bad_end = small_eltwise(0);
  bad_end.set(Field::EltWise_RightOperandEndAddress, 0x240);
  e = run(bad_end);
  EXPECT_NE(e.find("EltWise.RightOperandEndAddress"), std::string::npos) << e;
  isa::Instruction zero_c = small_eltwise(0);
  zero_c.set(Field::EltWise_IC, 0);
  e = run(zero_c);
  EXPECT_NE(e.find("EltWise.IC"), std::string::npos) << e;
  isa::Instruction outside = small_eltwise(0);
  outside.set(Field::EltWise_LeftOperandStartAddress, 0xFFFFFFE0)
      .set(Field::EltWise_LeftOperandEndAddress, 0);
  e = run(outside);
  EXPECT_NE(e.find("EltWise.LeftOperandStartAddress"), std::string::npos) << e;
  // Sigmoid ignores the right operand, so its bad end address does not matter.
  isa::Instruction sig = small_eltwise(3);
  sig.set(Field::EltWise_RightOperandEndAddress, 0x240);
  EXPECT_EQ(run(sig), "");
}

TEST(EltwiseBlock, WarnsWhenAScaleDoesNotFitEighteenBits) {
  Dram dram(1 << 16);
  Diagnostics diag;
  const isa::Instruction out = output_block(0x400, 1, 8, 2, 2);
  isa::Instruction mega = small_eltwise(0);
  mega.set(Field::EltWise_AScale, 0xFFFFFC00);  // -1024, sign-extended: fine
  run_block(&run_eltwise, isa::kArch9x4x4, dram, diag, mega, &out, nullptr);
  EXPECT_TRUE(diag.warnings().empty());
  mega.set(Field::EltWise_BScale, 0x40000);  // 256.0 in Q10 needs 19 bits: reads as 0
  run_block(&run_eltwise, isa::kArch9x4x4, dram, diag, mega, &out, nullptr);
  ASSERT_EQ(diag.warnings().size(), 1u);
  EXPECT_NE(diag.warnings()[0].message.find("EltWise.BScale"), std::string::npos);
  EXPECT_NE(diag.warnings()[0].message.find("i.e. 0"), std::string::npos);
}

TEST(EltwiseBlock, WarnsWhenAZeroPointWouldWrapOnTheBoard) {
  Dram dram(1 << 16);
  dram.fill(0x100, 32, 0x7F, "test");  // every element 127
  Diagnostics diag;
  const isa::Instruction out = output_block(0x400, 1, 8, 2, 2);
  isa::Instruction mega = small_eltwise(0);
  mega.set(Field::EltWise_AZeroPoint, 0xF0);  // -16: 127 + 16 leaves int8
  run_block(&run_eltwise, isa::kArch9x4x4, dram, diag, mega, &out, nullptr);
  ASSERT_EQ(diag.warnings().size(), 1u);
  EXPECT_NE(diag.warnings()[0].message.find("zero point"), std::string::npos);
}

// Robustness: random field values for every device-blocks opcode either run or fail with an
// npukit::Error; never a crash, hang or sanitizer report (CI runs this under ASan + UBSan).
TEST(BlocksRobustness, RandomFieldsRunOrFailCleanly) {
  std::mt19937 rng(2024);
  auto field_value = [&](const isa::FieldInfo& f) -> std::uint64_t {
    const std::uint64_t max = f.max_value();
    switch (rng() % 8) {
      case 0:
        return max & rng();  // anything
      case 1:
        return 0;
      case 2:
        return std::min<std::uint64_t>(max, 1 + rng() % 4);
      default:
        // Small sizes and 32-byte aligned addresses inside the 64 KiB DRAM, mostly.
        return f.width >= 20 ? std::min<std::uint64_t>(max, (rng() % 2048) * 32)
                             : std::min<std::uint64_t>(max, rng() % 12);
    }
  };
  const std::pair<isa::Opcode, BlockFn> blocks[] = {
      {isa::Opcode::EltWise, &run_eltwise}, {isa::Opcode::POOL, &run_pool},
      {isa::Opcode::RESHAPE, &run_reshape}, {isa::Opcode::TRANSPOSE, &run_transpose},
      {isa::Opcode::CONCAT, &run_concat},   {isa::Opcode::RESIZE, &run_resize},
      {isa::Opcode::NMS, &run_nms}};
  int ran = 0, failed = 0;
  for (const auto& arch : isa::kSupportedArchs)
    for (const auto& [op, fn] : blocks)
      for (int trial = 0; trial < 150; ++trial) {
        Dram dram(1 << 16);
        dram.fill(0, 1 << 16, static_cast<std::uint8_t>(rng()), "test");
        isa::Instruction mega(op), out(isa::Opcode::OutputBlock), tail(isa::Opcode::TailBlock);
        for (const auto& f : isa::info(op).fields) mega.set(f.id, field_value(f));
        for (const auto& f : isa::info(isa::Opcode::OutputBlock).fields)
          out.set(f.id, field_value(f));
        if (rng() % 2)
          for (const auto& f : isa::info(isa::Opcode::TailBlock).fields)
            tail.set(f.id, field_value(f));
        Diagnostics diag;
        try {
          run_block(fn, arch, dram, diag, mega, &out, rng() % 3 ? &tail : nullptr);
          ++ran;
        } catch (const Error& e) {
          ++failed;
          EXPECT_NE(std::string(e.what()).find("layer 1"), std::string::npos) << e.what();
        }
      }
  EXPECT_GT(failed, 0);

  // Valid groups on 9,4,4 (3 or 4 channels of 2x2 at 0x100/0x200) with one field mutated, so
  // the compute paths run on odd values too.
  auto with = [](isa::Opcode op, std::initializer_list<std::pair<Field, std::uint64_t>> fields) {
    isa::Instruction inst(op);
    for (const auto& [f, v] : fields) inst.set(f, v);
    return inst;
  };
  const isa::Instruction flat_out =
      with(isa::Opcode::OutputBlock, {{Field::OutputBlock_OutputAddr, 0x400},
                                      {Field::OutputBlock_KernelItr, 1},
                                      {Field::OutputBlock_ImageDimOutput, 32},
                                      {Field::OutputBlock_FlatController, 1},
                                      {Field::OutputBlock_OpWidth, 1}});
  const std::tuple<BlockFn, isa::Instruction, isa::Instruction> valid[] = {
      {&run_eltwise, small_eltwise(0), output_block(0x400, 1, 8, 2, 2)},
      {&run_eltwise, small_eltwise(4), output_block(0x400, 1, 8, 2, 2)},
      {&run_pool,
       with(isa::Opcode::POOL, {{Field::POOL_IW, 2},
                                {Field::POOL_IH, 2},
                                {Field::POOL_IC, 3},
                                {Field::POOL_ImageStartAddress, 0x100},
                                {Field::POOL_ImageEndAddress, 0x120},
                                {Field::POOL_PoolWidth, 2},
                                {Field::POOL_PoolHeight, 2},
                                {Field::POOL_PoolStrideWidth, 2},
                                {Field::POOL_PoolStrideHeight, 2}}),
       output_block(0x400, 1, 8, 1, 1)},
      {&run_transpose,
       with(isa::Opcode::TRANSPOSE, {{Field::TRANSPOSE_IC, 3},
                                     {Field::TRANSPOSE_IH, 2},
                                     {Field::TRANSPOSE_IW, 2},
                                     {Field::TRANSPOSE_ImageStartAddress, 0x100}}),
       flat_out},
      {&run_reshape,
       with(isa::Opcode::RESHAPE, {{Field::RESHAPE_IC, 3},
                                   {Field::RESHAPE_IH, 2},
                                   {Field::RESHAPE_IW, 2},
                                   {Field::RESHAPE_ImageStartAddress, 0x100}}),
       flat_out},
      {&run_concat,
       with(isa::Opcode::CONCAT, {{Field::CONCAT_InNum, 2},
                                  {Field::CONCAT_Image1StartAddress, 0x100},
                                  {Field::CONCAT_IH1, 2},
                                  {Field::CONCAT_KN1, 4},
                                  {Field::CONCAT_Image2StartAddress, 0x200},
                                  {Field::CONCAT_IH2, 2},
                                  {Field::CONCAT_KN2, 3}}),
       output_block(0x400, 2, 8, 2, 2)},
      {&run_resize,
       with(isa::Opcode::RESIZE, {{Field::RESIZE_IW, 2},
                                  {Field::RESIZE_IH, 2},
                                  {Field::RESIZE_IC, 3},
                                  {Field::RESIZE_ImageStartAddress, 0x100},
                                  {Field::RESIZE_ImageEndAddress, 0x120}}),
       output_block(0x400, 1, 16, 4, 4)},
      {&run_nms,
       with(isa::Opcode::NMS, {{Field::NMS_IOU, 1},
                               {Field::NMS_IOUShift, 1},
                               {Field::NMS_TotalInBoxes, 4},
                               {Field::NMS_MaxOutBoxes, 2},
                               {Field::NMS_TotalClasses, 2},
                               {Field::NMS_BoxStartAddr, 0x100},
                               {Field::NMS_BoxEndAddr, 0x120},
                               {Field::NMS_ScoreStartAddr, 0x200},
                               {Field::NMS_ScoreEndAddr, 0x220}}),
       with(isa::Opcode::OutputBlock, {{Field::OutputBlock_OutputAddr, 0x400}})},
  };
  for (const auto& block : valid) {
    // Named copies, not a structured binding: clang 14 cannot capture those in the lambda below.
    const BlockFn fn = std::get<0>(block);
    const isa::Instruction& mega = std::get<1>(block);
    const isa::Instruction& out = std::get<2>(block);
    Dram dram(1 << 16);
    Diagnostics diag;
    EXPECT_EQ(error_of([&] { run_block(fn, isa::kArch9x4x4, dram, diag, mega, &out, nullptr); }),
              "")
        << isa::name(mega.opcode());
    for (int trial = 0; trial < 200; ++trial) {
      dram.fill(0, 1 << 16, static_cast<std::uint8_t>(rng()), "test");
      isa::Instruction m = mega, o = out;
      const auto& mf = isa::info(m.opcode()).fields;
      const auto& of = isa::info(isa::Opcode::OutputBlock).fields;
      if (rng() % 4) {
        const auto& f = mf[rng() % mf.size()];
        m.set(f.id, field_value(f));
      } else {
        const auto& f = of[rng() % of.size()];
        o.set(f.id, field_value(f));
      }
      try {
        run_block(fn, isa::kArch9x4x4, dram, diag, m, &o, nullptr);
        ++ran;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("layer 1"), std::string::npos) << e.what();
      }
    }
  }
  EXPECT_GT(ran, 400);
  RecordProperty("ran", ran);
}

// Whole programs: assembled with the ISA encoder, run from bytes through Device, result taken
// from the dispatch frame.
TEST(EltwiseProgram, EveryOperationOnEveryArray) {
  const EltCase cases[] = {{0, 700, -1100, 0, 0, 181, 8},
                           {1, 900, 1300, 0, 0, 150, 7},
                           {2, 1024, 1024, 0, 0, 1, 7},
                           {3, 3000, 0, 0, 0, 255, 1},
                           {4, 2100, 0, 0, 0, 127, 0}};
  unsigned seed = 700;
  for (const auto& arch : isa::kSupportedArchs)
    for (const auto& k : cases) {
      const std::size_t c = 6, h = 5, w = 3, pixels = h * w;
      const auto a = random_int8(c * pixels, seed++);
      const auto bv = random_int8(c * pixels, seed++);
      testing::ProgramBuilder b{arch, {}, {}};
      const std::size_t bytes = layout_bytes(arch.n_sa, c, pixels);
      const std::uint32_t input = b.alloc(bytes);
      const std::uint32_t right = b.add_blob(pack_activation(arch.n_sa, c, pixels, bv));
      const std::uint32_t out = b.alloc(bytes);
      isa::Instruction mega(isa::Opcode::EltWise);
      mega.set(Field::EltWise_EltType, k.type)
          .set(Field::EltWise_IW, w)
          .set(Field::EltWise_IH, h)
          .set(Field::EltWise_IC, c)
          .set(Field::EltWise_LeftOperandStartAddress, input)
          .set(Field::EltWise_LeftOperandEndAddress, input + bytes)
          .set(Field::EltWise_RightOperandStartAddress, right)
          .set(Field::EltWise_RightOperandEndAddress, right + bytes)
          .set(Field::EltWise_AScale, static_cast<std::uint32_t>(k.a_scale) & 0x3FFFF)
          .set(Field::EltWise_BScale, static_cast<std::uint32_t>(k.b_scale) & 0x3FFFF);
      isa::Instruction ob =
          output_block(out, ceil_div(c, arch.n_sa), ceil_mod(pixels, 32 / arch.n_sa), h, w);
      ob.set(Field::OutputBlock_DispatchEn, 1).set(Field::OutputBlock_DispatchID, 0xE17);
      isa::Instruction tail(isa::Opcode::TailBlock);
      tail.set(Field::TailBlock_QuantEn, 1)
          .set_signed(Field::TailBlock_QuantScale, k.quant_scale)
          .set(Field::TailBlock_QuantShift, k.quant_shift);
      add_group(b, mega, ob, &tail);
      b.finish();
      const int fp_cast = k.type >= 3 ? 16 : 10;
      std::vector<std::int8_t> want(c * pixels);
      for (std::size_t i = 0; i < want.size(); ++i)
        want[i] = ref_quantize(ref_lane(k, a[i], bv[i]), k.quant_scale, k.quant_shift, fp_cast);
      EXPECT_EQ(
          run_program_dispatch(b, input, pack_activation(arch.n_sa, c, pixels, a), 0xE17, nullptr),
          expected_activation(arch.n_sa, c, pixels, want))
          << arch.str() << " type " << k.type;
    }
}

}  // namespace
}  // namespace npukit::device