// RESHAPE and TRANSPOSE against hand-worked and plain CHW/HWC flattening written here.
#include "device/reshape_transpose.h"

#include <gtest/gtest.h>

#include <functional>

#include "common/error.h"
#include "device/blocks_test_support.h"
#include "device/test_programs.h"

namespace npukit::device {
namespace {
using namespace blocks_testing;
using isa::Field;

isa::Instruction flat_output(std::uint64_t addr, std::uint64_t bytes) {
  isa::Instruction o(isa::Opcode::OutputBlock);
  o.set(Field::OutputBlock_OutputAddr, addr)
      .set(Field::OutputBlock_ChannelItr, 1)
      .set(Field::OutputBlock_KernelItr, 1)
      .set(Field::OutputBlock_ImageDimOutput, bytes)
      .set(Field::OutputBlock_FlatController, 1)
      .set(Field::OutputBlock_OpWidth, 1);
  return o;
}

isa::Instruction flat_mega(isa::Opcode op, std::size_t c, std::size_t h, std::size_t w,
                           std::uint64_t addr) {
  isa::Instruction m(op);
  if (op == isa::Opcode::TRANSPOSE)
    m.set(Field::TRANSPOSE_IC, c)
        .set(Field::TRANSPOSE_IH, h)
        .set(Field::TRANSPOSE_IW, w)
        .set(Field::TRANSPOSE_ImageStartAddress, addr);
  else
    m.set(Field::RESHAPE_IC, c)
        .set(Field::RESHAPE_IH, h)
        .set(Field::RESHAPE_IW, w)
        .set(Field::RESHAPE_ImageStartAddress, addr);
  return m;
}

Bytes run_flat(const isa::SaArch& arch, isa::Opcode op, const std::vector<std::int8_t>& x,
               std::size_t c, std::size_t h, std::size_t w) {
  const std::uint64_t in = 0x800, out = 0x10000;
  const std::size_t flat = ceil_mod(c * h * w, 32);
  Dram dram(1 << 20);
  dram.write(in, pack_activation(arch.n_sa, c, h * w, x), "test");
  dram.fill(out, flat + 32, 0x77, "test");
  const isa::Instruction mega = flat_mega(op, c, h, w, in);
  const isa::Instruction ob = flat_output(out, flat);
  Diagnostics diag;
  const BlockTiming t = run_block(op == isa::Opcode::TRANSPOSE ? &run_transpose : &run_reshape,
                                  arch, dram, diag, mega, &ob, nullptr);
  EXPECT_EQ(t.dram_write_bytes, flat);
  EXPECT_EQ(dram.read_u8(out + flat, "test"), 0x77) << "wrote past the output";
  return dram.read(out, flat, "test");
}

TEST(TransposeBlock, HandWorkedTwoChannels) {
  // Channel 0 = 1 2 3 / 4 5 6, channel 1 = -1 .. -6 (2x3 image) -> HWC pairs, then zeros.
  const std::vector<std::int8_t> x = {1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6};
  Bytes want = {1, 0xFF, 2, 0xFE, 3, 0xFD, 4, 0xFC, 5, 0xFB, 6, 0xFA};
  want.resize(32, 0);
  for (const auto& arch : isa::kSupportedArchs)
    EXPECT_EQ(run_flat(arch, isa::Opcode::TRANSPOSE, x, 2, 2, 3), want) << arch.str();
  Bytes chw = {1, 2, 3, 4, 5, 6, 0xFF, 0xFE, 0xFD, 0xFC, 0xFB, 0xFA};
  chw.resize(32, 0);
  for (const auto& arch : isa::kSupportedArchs)
    EXPECT_EQ(run_flat(arch, isa::Opcode::RESHAPE, x, 2, 2, 3), chw) << arch.str();
}

TEST(TransposeBlock, MatchesPlainHwcAndChwOnEveryArray) {
  unsigned seed = 90;
  for (const auto& arch : isa::kSupportedArchs)
    for (const auto& [c, h, w] :
         {std::tuple{5, 3, 7}, std::tuple{16, 5, 5}, std::tuple{3, 1, 11}, std::tuple{20, 4, 9}}) {
      const auto x = random_int8(c * h * w, seed++);
      Bytes hwc(ceil_mod(c * h * w, 32), 0), chw(ceil_mod(c * h * w, 32), 0);
      for (int ch = 0; ch < c; ++ch)
        for (int i = 0; i < h; ++i)
          for (int j = 0; j < w; ++j) {
            const auto v = static_cast<std::uint8_t>(x[(ch * h + i) * w + j]);
            hwc[(i * w + j) * c + ch] = v;
            chw[(ch * h + i) * w + j] = v;
          }
      EXPECT_EQ(run_flat(arch, isa::Opcode::TRANSPOSE, x, c, h, w), hwc) << arch.str();
      EXPECT_EQ(run_flat(arch, isa::Opcode::RESHAPE, x, c, h, w), chw) << arch.str();
    }
}

TEST(TransposeBlock, BadFieldsNameTheInstructionAndField) {
  Dram dram(1 << 16);
  Diagnostics diag;
  auto run = [&](const isa::Instruction& m, const isa::Instruction& o) {
    return error_of(
        [&] { run_block(&run_transpose, isa::kArch9x8x8, dram, diag, m, &o, nullptr); });
  };
  const isa::Instruction good = flat_mega(isa::Opcode::TRANSPOSE, 3, 2, 2, 0x100);
  EXPECT_EQ(run(good, flat_output(0x400, 32)), "");
  std::string e = run(good, flat_output(0x400, 64));
  EXPECT_NE(e.find("instruction 2 OutputBlock.ImageDimOutput"), std::string::npos) << e;
  isa::Instruction not_flat = flat_output(0x400, 32);
  not_flat.set(Field::OutputBlock_FlatController, 0);
  e = run(good, not_flat);
  EXPECT_NE(e.find("OutputBlock.FlatController"), std::string::npos) << e;
  e = run(flat_mega(isa::Opcode::TRANSPOSE, 0, 2, 2, 0x100), flat_output(0x400, 32));
  EXPECT_NE(e.find("instruction 1 TRANSPOSE.IC"), std::string::npos) << e;
  e = run(flat_mega(isa::Opcode::TRANSPOSE, 3, 2, 2, 0x110), flat_output(0x400, 32));
  EXPECT_NE(e.find("TRANSPOSE.ImageStartAddress"), std::string::npos) << e;
  e = run(flat_mega(isa::Opcode::TRANSPOSE, 3, 2, 2, 0x10000), flat_output(0x400, 32));
  EXPECT_NE(e.find("TRANSPOSE.ImageStartAddress"), std::string::npos) << e;
  EXPECT_NE(e.find("outside"), std::string::npos) << e;
}

// Whole programs through Device: TRANSPOSE and RESHAPE of the input, dispatched as flat bytes.
TEST(TransposeProgram, DispatchesFlatBytesOnEveryArray) {
  unsigned seed = 1100;
  for (const auto& arch : isa::kSupportedArchs)
    for (const isa::Opcode op : {isa::Opcode::TRANSPOSE, isa::Opcode::RESHAPE}) {
      const int c = 7, h = 3, w = 5;
      const auto x = random_int8(c * h * w, seed++);
      testing::ProgramBuilder b{arch, {}, {}};
      const std::uint32_t in = b.alloc(layout_bytes(arch.n_sa, c, h * w));
      const std::size_t flat = ceil_mod(c * h * w, 32);
      const std::uint32_t out = b.alloc(flat);
      isa::Instruction ob = flat_output(out, flat);
      ob.set(Field::OutputBlock_DispatchEn, 1).set(Field::OutputBlock_DispatchID, 0x7777);
      add_group(b, flat_mega(op, c, h, w, in), ob, nullptr);
      b.finish();
      Bytes want(flat, 0);
      for (int ch = 0; ch < c; ++ch)
        for (int p = 0; p < h * w; ++p)
          want[op == isa::Opcode::TRANSPOSE ? p * c + ch : ch * h * w + p] =
              static_cast<std::uint8_t>(x[ch * h * w + p]);
      EXPECT_EQ(
          run_program_dispatch(b, in, pack_activation(arch.n_sa, c, h * w, x), 0x7777, nullptr),
          want)
          << arch.str() << " " << isa::name(op);
    }
}

}  // namespace
}  // namespace npukit::device
