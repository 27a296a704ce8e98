// The tail's vectorised common cases (quantize_span and bias_span, device/block.h) on every path
// the CPU has, against the per-value definition written here (64-bit product, the QuantShift
// rounding shift, EltWise's fp_cast rounding shift, int8 clamp, ReLU / Clip, all in 128 bits), on
// random and extreme accumulators (INT32 min/max, exact .5 ties of either sign), scales, shifts
// and biases.
#include "device/block.h"
#include "device/blocks_test_support.h"

#include <gtest/gtest.h>

#include "common/parallel.h"

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
      switch (pick(0, 5)) {
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
        case 4: {
          // Around the values whose result crosses an int8 end (k * 2^T / scale, k near -128
          // and 127), where the AVX2 path's input clamp changes what it multiplies.
          const std::int64_t k = std::array{-129, -128, -127, 126, 127, 128}[pick(0, 5)];
          const __int128 edge = scale != 0 ? (static_cast<__int128>(k) << total) / scale : 0;
          const __int128 t = std::clamp<__int128>(edge + pick(-2, 2), kMin, kMax);
          a = wrap_add(static_cast<std::int32_t>(t), -bias);
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

// The scales and shifts of trained convs' tails (scale below 2^15, QuantShift 20-31) around the
// inputs where the result reaches -128 and 127, and at the int32 ends. At QuantShift 24 the low
// end's product is about -2^31 + 2^23: the AVX2 quantizer takes its 32-bit form there (resnet50's
// layer3 and layer4 tails), which must give the same integers as the 64-bit definition.
TEST(TailQuantizeSpan, ConvScalesAtTheInt32EdgeEqualTheDefinition) {
  std::vector<std::int32_t> acc;
  const std::vector<std::int32_t> scales = {1,     127,   16384,  18924, 19008,
                                            32545, 32767, -32768, -19008};
  for (int shift = 20; shift <= 31; ++shift)
    for (std::int32_t scale : scales)
      for (int act = -1; act <= 1; ++act) {
        acc.clear();
        for (std::int64_t k : {-129, -128, -127, 126, 127, 128}) {
          const __int128 edge = (static_cast<__int128>(k) << shift) / scale;
          for (int d = -3; d <= 3; ++d)
            acc.push_back(static_cast<std::int32_t>(std::clamp<__int128>(edge + d, kMin, kMax)));
        }
        for (std::int32_t a : {kMin, kMin + 1, kMax - 1, kMax, 0, -1, 1}) acc.push_back(a);
        std::vector<std::int32_t> want(acc.size());
        for (std::uint64_t i = 0; i < acc.size(); ++i)
          want[i] = definition(acc[i], 0, scale, shift, 0, act, 6);
        for (Isa isa : blocks_testing::isa_paths()) {
          std::vector<std::int32_t> got(acc.size(), 999);
          quantize_span(acc.data(), got.data(), acc.size(), 0, scale, shift, 0, act, 6, isa);
          ASSERT_EQ(got, want) << cpu::name(isa) << " scale " << scale << " shift " << shift
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

// The OutputBlock and TailBlock of the write tests, and what they were given: int32 biases at
// bias_addr, big-endian int32 accumulants near the wrap written at acc_addr (when `accumulants`),
// a random scale and shift.
struct TailSetup {
  isa::Instruction output{isa::Opcode::OutputBlock}, tail{isa::Opcode::TailBlock};
  std::vector<std::int32_t> accum, bias;
  std::int32_t scale = 0;
  int shift = 0;
  static constexpr std::int32_t kClip = 100, kNegAlpha = 26, kPosAlpha = 256;
};
TailSetup tail_setup(Dram& dram, const isa::SaArch& arch, const ActivationLayout& layout,
                     std::uint64_t oh, std::uint64_t ow, std::uint64_t width, bool quant, int act,
                     std::uint64_t addr, bool accumulants, std::uint64_t acc_addr,
                     std::uint64_t bias_addr, std::mt19937& rng) {
  TailSetup t;
  const std::uint64_t n_sa = static_cast<std::uint64_t>(arch.n_sa), channels = layout.channels;
  t.accum.resize(layout.bytes());
  Bytes raw_accum(layout.bytes() * 4);
  for (std::uint64_t i = 0; i < layout.bytes(); ++i) {
    t.accum[i] = static_cast<std::int32_t>(0x7fff0000u + rng() % 0x20000u);
    store_be32(&raw_accum[i * 4], static_cast<std::uint32_t>(t.accum[i]));
  }
  if (accumulants) dram.write(acc_addr, raw_accum, "accumulants");
  t.bias.resize(channels);
  const std::uint64_t bias_bytes = ceil_mod(ceil_mod(channels, n_sa) * 4, 32);
  Bytes raw_bias(bias_bytes, 0);
  for (std::uint64_t c = 0; c < channels; ++c) {
    t.bias[c] = static_cast<std::int32_t>(quant ? rng() % 20001 - 10000 : rng());
    store_be32(&raw_bias[c * 4], static_cast<std::uint32_t>(t.bias[c]));
  }
  dram.write(bias_addr, raw_bias, "bias");
  t.scale = static_cast<std::int32_t>(rng() % 40001) - 20000;
  t.shift = 20 + static_cast<int>(rng() % 5);
  t.output.set(isa::Field::OutputBlock_OutputAddr, addr)
      .set(isa::Field::OutputBlock_AccumulantAddr, acc_addr)
      .set(isa::Field::OutputBlock_AccumulantReadFirst, accumulants ? 1 : 0)
      .set(isa::Field::OutputBlock_ChannelItr, 1)
      .set(isa::Field::OutputBlock_KernelItr, layout.padded_channels() / n_sa)
      .set(isa::Field::OutputBlock_ImageDimOutput, layout.padded_pixels())
      .set(isa::Field::OutputBlock_ImageDimAcc, layout.padded_pixels())
      .set(isa::Field::OutputBlock_OH, oh)
      .set(isa::Field::OutputBlock_OW, ow)
      .set(isa::Field::OutputBlock_OpWidth, width);
  t.tail.set(isa::Field::TailBlock_BiasEn, 1)
      .set(isa::Field::TailBlock_BiasWidth, 32)
      .set(isa::Field::TailBlock_BiasStartAddress, bias_addr)
      .set(isa::Field::TailBlock_BiasEndAddress, bias_addr + bias_bytes)
      .set(isa::Field::TailBlock_QuantEn, quant ? 1 : 0)
      .set_signed(isa::Field::TailBlock_QuantScale, t.scale)
      .set(isa::Field::TailBlock_QuantShift, t.shift)
      .set(isa::Field::TailBlock_ActEn, act >= 0 ? 1 : 0)
      .set(isa::Field::TailBlock_ActType, act >= 0 ? act : 0)
      .set(isa::Field::TailBlock_ActParam, TailSetup::kClip)
      .set(isa::Field::TailBlock_NegAlpha, TailSetup::kNegAlpha)
      .set(isa::Field::TailBlock_PosAlpha, TailSetup::kPosAlpha);
  return t;
}

// Every byte of the output words in `raw`: want(c, p, element) for the real values, 0 for padding.
template <typename Want>
void expect_words(const Bytes& raw, const ActivationLayout& layout, std::uint64_t width,
                  Want&& want) {
  for (std::uint64_t c = 0; c < layout.padded_channels(); ++c)
    for (std::uint64_t p = 0; p < layout.padded_pixels(); ++p) {
      const std::uint64_t at = layout.offset(c, p);
      const std::int64_t v = c < layout.channels && p < layout.pixels ? want(c, p, at) : 0;
      const std::uint32_t got = width == 1 ? raw[at] : load_be32(&raw[at * 4]);
      ASSERT_EQ(got, static_cast<std::uint32_t>(v) & (width == 1 ? 0xFFu : ~0u))
          << "channel " << c << " pixel " << p;
    }
}

// TailPipeline::write_output (the tail and the write-back in one pass) on every path the CPU
// has, every array, against the per-value definition above placed with ActivationLayout::offset
// (the 6.1 formula): quantized with no activation / ReLU / Clip (the vector kind), the int32
// bias pass-through (OpWidth 4), and cases that run value by value (LeakyReLU, ReLU on int32);
// with and without accumulants (big-endian int32 near the wrap), at addresses whose words sit
// in one page (in place) and not (staged), across page boundaries; 13 channels of 3 x 345
// pixels give padding channels, whole words and a partial last word. Old bytes must be
// overwritten, padding with 0.
TEST(TailWriteOutput, EveryPathEqualsTheDefinition) {
  struct Case {
    const char* name;
    bool quant;
    int act;  // -1 none, 0 ReLU, 1 Clip, 2 LeakyReLU
    std::uint64_t width;
  };
  const Case cases[] = {{"quantize", true, -1, 1},      {"quantize relu", true, 0, 1},
                        {"quantize clip", true, 1, 1},  {"quantize int32", true, 0, 4},
                        {"leaky", true, 2, 1},          {"bias pass-through", false, -1, 4},
                        {"relu on int32", false, 0, 4}, {"int32 low byte", false, -1, 1}};
  // Channels and pixels: padding channels with a partial last word of 3 pixels, then whole
  // channel groups whose last word holds 1 pixel (7x7), 2, and the one pixel of a global pool.
  struct Shape {
    std::uint64_t channels, oh, ow;
  };
  const Shape shapes[] = {{13, 3, 345}, {16, 7, 7}, {24, 2, 3}, {32, 1, 1}};
  std::mt19937 rng(13);
  for (const Shape& shape : shapes)
    for (const isa::SaArch& arch : isa::kSupportedArchs)
      for (const Case& k : cases)
        for (const bool accumulants : {false, true})
          for (const std::uint64_t addr :
               {Dram::kPageBytes - 4096, Dram::kPageBytes - 4096 + 32 + 4}) {
            const std::uint64_t channels = shape.channels, oh = shape.oh, ow = shape.ow;
            const std::uint64_t pixels = oh * ow;
            SCOPED_TRACE(fmt::format("{}x{}x{} {} {} accumulants {} addr 0x{:x}", channels, oh, ow,
                                     arch.str(), k.name, accumulants, addr));
            const ActivationLayout layout = ActivationLayout::for_arch(arch, channels, pixels);
            Dram dram(1u << 20);
            dram.fill(addr, layout.bytes() * k.width, 0xAA, "old contents");
            std::vector<std::int32_t> acc(channels * pixels);
            for (std::int32_t& v : acc)
              v = static_cast<std::int32_t>(std::uniform_int_distribution<std::int64_t>(
                  k.quant ? -300000 : kMin, k.quant ? 300000 : kMax)(rng));
            const std::uint64_t acc_addr = 3 * Dram::kPageBytes + (addr % 64);
            const TailSetup setup =
                tail_setup(dram, arch, layout, oh, ow, k.width, k.quant, k.act, addr, accumulants,
                           acc_addr, 6 * Dram::kPageBytes, rng);
            const std::vector<std::int32_t>&accum = setup.accum, &bias = setup.bias;
            const std::int32_t scale = setup.scale, clip = TailSetup::kClip;
            const int shift = setup.shift;
            const std::int32_t neg_alpha = TailSetup::kNegAlpha, pos_alpha = TailSetup::kPosAlpha;
            const isa::Instruction mega(isa::Opcode::CONV);
            Diagnostics diag;
            LayerContext ctx{arch, dram, mega, &setup.output, &setup.tail, 1, diag, 1, 2, 3};
            const TailPipeline tail(ctx, channels);
            for (const Isa isa : blocks_testing::isa_paths()) {
              SCOPED_TRACE(fmt::format("path {}", cpu::name(isa)));
              dram.fill(addr, layout.bytes() * k.width, 0xAA, "old contents");
              EXPECT_EQ(tail.write_output(ctx, layout, acc.data(),
                                          accumulants ? &acc_addr : nullptr, isa),
                        layout.bytes() * k.width);
              const Bytes raw = dram.read(addr, layout.bytes() * k.width, "check");
              expect_words(
                  raw, layout, k.width, [&](std::uint64_t c, std::uint64_t p, std::uint64_t at) {
                    std::int32_t v = acc[c * pixels + p];
                    if (accumulants) v = wrap_add(v, accum[at]);
                    const int plain_act = k.act <= 1 ? k.act : -1;
                    std::int64_t want = 0;
                    if (k.quant) {
                      want = definition(v, bias[c], scale, shift, 0, plain_act, clip);
                    } else {
                      want = wrap_add(v, bias[c]);
                      if (k.act == 0) want = std::max<std::int64_t>(want, 0);
                    }
                    if (k.act == 2) {
                      const std::int64_t y = ((want < 0 ? neg_alpha : pos_alpha) * want) >> 8;
                      want = std::clamp<std::int64_t>(y, -128, 127);
                    }
                    return want;
                  });
            }
          }
}

}  // namespace
}  // namespace npukit::device

namespace npukit::device {
namespace {

// TailPipeline::RowWriter (the tail and the write-back fed by the CONV block's work units, issue
// 13) against the same per-value definition: pieces of up to 64 pixels x 64 channels given as
// pixel rows (stride 64, channel-minor) from parallel_for at 1, 2 and 3 threads, as
// dense_conv_rows hands them over, must give every byte of the 6.1 words, padding channels and
// pixels 0, old bytes overwritten. The vector kinds (quantized with no activation / ReLU / Clip to
// OpWidth 1 and 4, the int32 bias pass-through), with and without accumulants, random and extreme
// sums (INT32 min/max), several shapes (pixels not a multiple of 4 or 64, channels not of 8 or
// 64; 7x7, 14x14, 56x56), output regions across page boundaries (pages apart in host memory;
// at 14x14 the AVX-512 path's two-word store at the boundary; the AVX-512 level's int8 words two
// groups a vector, 64, 70 and 130 channels, with one page lookup per group's run of words or, for
// a run across a page boundary, one per word). Where the writer does not apply
// (a kind without a vector path, a misaligned address, the scalar level) ready() is false. The
// unit chains' forms, streamed stores and a part of the words left unwritten, give the same
// bytes, the part left holding the old ones.
TEST(TailRowWriter, EveryPieceEqualsTheDefinition) {
  struct Case {
    const char* name;
    bool quant;
    int act;  // -1 none, 0 ReLU, 1 Clip, 2 LeakyReLU (no vector path)
    std::uint64_t width;
  };
  const Case cases[] = {{"quantize", true, -1, 1},           {"quantize relu", true, 0, 1},
                        {"quantize clip", true, 1, 1},       {"quantize int32", true, 0, 4},
                        {"bias pass-through", false, -1, 4}, {"leaky", true, 2, 1}};
  struct Shape {
    std::uint64_t channels, oh, ow;
  };
  const Shape shapes[] = {{13, 3, 345}, {70, 7, 7}, {64, 14, 14}, {9, 56, 56}, {130, 5, 7}};
  const isa::SaArch arch = isa::kArch9x8x8;
  std::mt19937 rng(17);
  for (const Shape& shape : shapes)
    for (const Case& k : cases)
      for (const bool accumulants : {false, true})
        for (const std::uint64_t misalign : {std::uint64_t{0}, std::uint64_t{32}}) {
          const std::uint64_t channels = shape.channels, pixels = shape.oh * shape.ow;
          const std::uint64_t addr = Dram::kPageBytes - 4096 + misalign;
          SCOPED_TRACE(fmt::format("{} channels {} pixels {} accumulants {} addr 0x{:x}", k.name,
                                   channels, pixels, accumulants, addr));
          const ActivationLayout layout = ActivationLayout::for_arch(arch, channels, pixels);
          const std::uint64_t out_bytes = layout.bytes() * k.width;
          Dram dram(8u << 20);
          // The output's second page allocated before its first, so they are not neighbours in
          // host memory: a word written past the first page's end shows.
          dram.fill(Dram::kPageBytes, 32, 0xAA, "second page first");
          // Sums: random, with the int32 ends sprinkled in.
          const std::uint64_t n_units = (pixels + 63) / 64, k_units = (channels + 63) / 64;
          std::vector<std::int32_t> acc(channels * pixels);
          for (std::int32_t& v : acc) {
            const std::uint32_t r = rng() % 16;
            v = r == 0   ? kMin
                : r == 1 ? kMax
                         : static_cast<std::int32_t>(std::uniform_int_distribution<std::int64_t>(
                               k.quant ? -300000 : kMin, k.quant ? 300000 : kMax)(rng));
          }
          const std::uint64_t acc_addr = 8 * Dram::kPageBytes + 128 * (rng() % 64);
          const TailSetup setup =
              tail_setup(dram, arch, layout, shape.oh, shape.ow, k.width, k.quant, k.act, addr,
                         accumulants, acc_addr, 16 * Dram::kPageBytes, rng);
          const isa::Instruction mega(isa::Opcode::CONV);
          Diagnostics diag;
          LayerContext ctx{arch, dram, mega, &setup.output, &setup.tail, 1, diag, 1, 2, 3};
          const TailPipeline tail(ctx, channels);
          for (const Isa isa : blocks_testing::isa_paths()) {
            const bool vector = k.act <= 1 && isa != Isa::kScalar;
            const std::uint64_t acc_at = acc_addr;
            const TailPipeline::RowWriter writer =
                tail.row_writer(ctx, layout, accumulants ? &acc_at : nullptr, isa);
            ASSERT_EQ(writer.ready(), vector && (k.width == 1 || misalign == 0))
                << "path " << cpu::name(isa);
            if (!writer.ready()) continue;
            // The chain's forms (device/conv.cpp): plain, streamed stores, the middle third of
            // the words left unwritten. Both latter must give the plain bytes, the old ones in
            // the words left.
            enum class Mode { kPlain, kStreamed, kPartLeft };
            const std::uint64_t word_bytes = 32 * k.width, words = out_bytes / word_bytes;
            const std::uint64_t left_begin = words / 3 * word_bytes;
            const std::uint64_t left_end = 2 * words / 3 * word_bytes;
            Bytes plain;
            for (const unsigned threads : {1u, 2u, 3u})
              for (const Mode mode : {Mode::kPlain, Mode::kStreamed, Mode::kPartLeft}) {
                SCOPED_TRACE(fmt::format("path {} threads {} mode {}", cpu::name(isa), threads,
                                         static_cast<int>(mode)));
                dram.fill(addr, out_bytes, 0xAA, "old contents");
                TailPipeline::RowWriter w =
                    tail.row_writer(ctx, layout, accumulants ? &acc_at : nullptr, isa);
                ASSERT_EQ(w.word_bytes(), word_bytes);
                if (mode == Mode::kStreamed) w.stream_output(true);
                if (mode == Mode::kPartLeft) w.leave_unwritten(left_begin, left_end);
                set_thread_count(threads);
                parallel_for(n_units * k_units, [&](std::uint64_t u) {
                  const std::uint64_t p0 = u / k_units * 64, k0 = u % k_units * 64;
                  const std::uint64_t n = std::min<std::uint64_t>(64, pixels - p0);
                  const std::uint64_t kc = std::min<std::uint64_t>(64, channels - k0);
                  // Rows as a unit holds them: lanes past the last channel hold junk.
                  std::vector<std::int32_t> y(64 * 64, 0x5a5a5a5a);
                  for (std::uint64_t i = 0; i < n; ++i)
                    for (std::uint64_t c = 0; c < kc; ++c)
                      y[i * 64 + c] = acc[(k0 + c) * pixels + p0 + i];
                  w.write(y.data(), 64, p0, n, k0, kc);
                });
                set_thread_count(0);
                const Bytes raw = dram.read(addr, out_bytes, "check");
                if (mode == Mode::kPlain) {
                  expect_words(raw, layout, k.width,
                               [&](std::uint64_t c, std::uint64_t p, std::uint64_t at) {
                                 std::int32_t v = acc[c * pixels + p];
                                 if (accumulants) v = wrap_add(v, setup.accum[at]);
                                 return k.quant
                                            ? definition(v, setup.bias[c], setup.scale, setup.shift,
                                                         0, k.act, TailSetup::kClip)
                                            : wrap_add(v, setup.bias[c]);
                               });
                  plain = raw;
                  continue;
                }
                for (std::uint64_t b = 0; b < out_bytes; ++b) {
                  const bool left = mode == Mode::kPartLeft && b >= left_begin && b < left_end;
                  ASSERT_EQ(raw[b], left ? 0xAA : plain[b]) << "byte " << b;
                }
              }
          }
        }
}

}  // namespace
}  // namespace npukit::device
