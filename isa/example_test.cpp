// examples/conv_relu_9x8x8.{json,gml}: the committed GML is what its JSON assembles to, and it
// follows gati.md's RTL-confirmed layout for a 3x3 conv + ReLU on 9,8,8 (checked here with the
// formulas of gati.md 3.2, 6 and 14.9/14.10, worked independently of the generator script).
#include "common/bytes.h"
#include "isa/arch.h"
#include "isa/assembler.h"
#include "isa/gml.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

namespace npukit::isa {
namespace {

const std::string kDir = std::string(NPUKIT_SOURCE_DIR) + "/examples/";

Bytes read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(Example, CommittedGmlIsWhatTheJsonAssemblesTo) {
  const Assembled a = assemble_file(kDir + "conv_relu_9x8x8.json");
  EXPECT_TRUE(a.warnings.empty()) << a.warnings.front();
  EXPECT_EQ(a.bytes, read_file(kDir + "conv_relu_9x8x8.gml"))
      << "regenerate: npukit asm examples/conv_relu_9x8x8.json -o examples/conv_relu_9x8x8.gml";
}

TEST(Example, FollowsTheRtlConfirmedLayout) {
  const GmlProgram p = decode_gml(read_file(kDir + "conv_relu_9x8x8.gml"));
  const SaArch arch = kArch9x8x8;
  ASSERT_EQ(p.instructions.size(), 4u);
  EXPECT_TRUE(lint_instruction_list(p.instructions).empty());
  const auto& conv = p.instructions[0];
  const auto& out = p.instructions[1];
  const auto& tail = p.instructions[2];
  const auto& start = p.instructions[3];
  ASSERT_EQ(conv.opcode(), Opcode::CONV);
  ASSERT_EQ(out.opcode(), Opcode::OutputBlock);
  ASSERT_EQ(tail.opcode(), Opcode::TailBlock);
  ASSERT_EQ(start.opcode(), Opcode::START);

  const std::uint64_t ic = conv.get(Field::CONV_IC), kn = conv.get(Field::CONV_KN);
  const std::uint64_t ih = conv.get(Field::CONV_IH), iw = conv.get(Field::CONV_IW);
  EXPECT_EQ(conv.get(Field::CONV_KW), 3u);
  EXPECT_EQ(conv.get(Field::CONV_KH), 3u);
  const std::uint64_t oh =
      (ih + conv.get(Field::CONV_PadTop) + conv.get(Field::CONV_PadBottom) - 3) /
          conv.get(Field::CONV_Stride) +
      1;
  const std::uint64_t ow =
      (iw + conv.get(Field::CONV_PadLeft) + conv.get(Field::CONV_PadRight) - 3) /
          conv.get(Field::CONV_Stride) +
      1;
  EXPECT_EQ(out.get(Field::OutputBlock_OH), oh);
  EXPECT_EQ(out.get(Field::OutputBlock_OW), ow);
  EXPECT_LT(ih, iw * 3 / 2) << "tall images hang v1.0.0 (gati.md 14.6)";
  // Image: C' * P'.
  EXPECT_EQ(conv.get(Field::CONV_ImageEndAddress) - conv.get(Field::CONV_ImageStartAddress),
            ceil_mod(ic, arch.n_sa) * ceil_mod(ih * iw, arch.pixels_per_word()));
  // Weights: ceil_mod(kitr*citr*ROW*COLS*N_SA, 32), kitr = ceil(KN/COLS), citr = ceil(KC/N_SA).
  const std::uint64_t kitr = ceil_div(kn, arch.cols),
                      citr = ceil_div(conv.get(Field::CONV_KC), arch.n_sa);
  const std::uint64_t weight_bytes = ceil_mod(kitr * citr * arch.rows * arch.cols * arch.n_sa, 32);
  EXPECT_EQ(conv.get(Field::CONV_WeightEndAddress) - conv.get(Field::CONV_WeightStartAddress),
            weight_bytes);
  EXPECT_EQ(conv.get(Field::CONV_KC), ic);
  EXPECT_EQ(conv.get(Field::CONV_ConvType), 0u);
  EXPECT_EQ(conv.get(Field::CONV_ChannelDuplicate), 0u);
  EXPECT_EQ(conv.get(Field::CONV_Im2colPrefetch), oh * ow < 1024 ? 1u : 0u);
  // OutputBlock (14.10).
  EXPECT_EQ(out.get(Field::OutputBlock_KernelItr), kitr);
  EXPECT_EQ(out.get(Field::OutputBlock_ChannelItr), citr);
  EXPECT_EQ(out.get(Field::OutputBlock_ImageDimOutput), ceil_mod(oh * ow, arch.pixels_per_word()));
  EXPECT_EQ(out.get(Field::OutputBlock_ImageDimAcc),
            ceil_mod(oh * ow, std::max(1, arch.pixels_per_word() / 4)));
  EXPECT_EQ(out.get(Field::OutputBlock_AccEn),
            ic <= static_cast<std::uint64_t>(arch.n_sa) ? 0u : 1u);
  EXPECT_EQ(out.get(Field::OutputBlock_OnChipAcc), oh * ow <= 1024 ? 1u : 0u);
  EXPECT_EQ(out.get(Field::OutputBlock_OpWidth), 1u);
  EXPECT_EQ(out.get(Field::OutputBlock_FlatController), 0u);
  EXPECT_EQ(out.get(Field::OutputBlock_DispatchEn), 1u);
  // TailBlock: bias 32-bit, quantize, ReLU (3.2).
  EXPECT_EQ(tail.get(Field::TailBlock_BiasEn), 1u);
  EXPECT_EQ(tail.get(Field::TailBlock_BiasWidth), 32u);
  EXPECT_EQ(tail.get(Field::TailBlock_BiasEndAddress) - tail.get(Field::TailBlock_BiasStartAddress),
            ceil_mod(ceil_mod(kn, arch.n_sa) * 4, 32));
  EXPECT_EQ(tail.get(Field::TailBlock_QuantEn), 1u);
  EXPECT_EQ(tail.get(Field::TailBlock_ActEn), 1u);
  EXPECT_EQ(tail.get(Field::TailBlock_ActType), 0u);
  EXPECT_EQ(start.get(Field::START_LayerNumber), 1u);
  EXPECT_EQ(start.get(Field::START_TotalLayers), 1u);

  // Stream order (gati.md 4): weights blob, then bias blob, at the addresses the fields name.
  ASSERT_EQ(p.blobs.size(), 2u);
  EXPECT_EQ(p.blobs[0].address, conv.get(Field::CONV_WeightStartAddress));
  EXPECT_EQ(p.blobs[0].data.size(), weight_bytes);
  EXPECT_EQ(p.blobs[1].address, tail.get(Field::TailBlock_BiasStartAddress));
  EXPECT_EQ(p.blobs[1].data.size(), 32u);
  // Spot values worked by hand from the example's formulas: W[k=1][c=2][kh=0][kw=1] =
  // ((7 + 6 + 0 + 2) mod 7) - 3 = -2 at srow 1: offset ((9-1-1)*8 + 2)*8 + 1 = 465.
  EXPECT_EQ(p.blobs[0].data[465], 0xFE);
  // Rows srow >= 9 do not exist on a 9-row array; srow 8 (kh=2, kw=2) is the first block:
  // W[k=0][c=0][2][2] = ((0 + 0 + 10 + 4) mod 7) - 3 = -3.
  EXPECT_EQ(p.blobs[0].data[0], 0xFD);
  // Bias k = 0: 100 * (0 - 4) = -400 = 0xFFFFFE70, big-endian.
  EXPECT_EQ(load_be32(p.blobs[1].data.data()), 0xFFFFFE70u);
  // Every address 32-byte aligned (14.9).
  for (auto f : {Field::CONV_ImageStartAddress, Field::CONV_WeightStartAddress})
    EXPECT_EQ(conv.get(f) % 32, 0u);
  EXPECT_EQ(out.get(Field::OutputBlock_OutputAddr) % 32, 0u);
  EXPECT_EQ(out.get(Field::OutputBlock_AccumulantAddr) % 32, 0u);
}

}  // namespace
}  // namespace npukit::isa
