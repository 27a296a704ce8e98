// CONCAT and RESIZE against plain NCHW concatenation and 2x nearest upsampling written here.
#include "device/concat.h"
#include "device/resize.h"

#include <gtest/gtest.h>

#include <functional>

#include "common/error.h"
#include "device/blocks_test_support.h"
#include "device/test_programs.h"

namespace npukit::device {
namespace {
using namespace blocks_testing;
using isa::Field;

constexpr Field kStart[] = {Field::CONCAT_Image1StartAddress, Field::CONCAT_Image2StartAddress,
                            Field::CONCAT_Image3StartAddress, Field::CONCAT_Image4StartAddress};
constexpr Field kIh[] = {Field::CONCAT_IH1, Field::CONCAT_IH2, Field::CONCAT_IH3,
                         Field::CONCAT_IH4};
constexpr Field kKn[] = {Field::CONCAT_KN1, Field::CONCAT_KN2, Field::CONCAT_KN3,
                         Field::CONCAT_KN4};

TEST(ConcatBlock, MatchesPlainChannelConcatOnEveryArray) {
  unsigned seed = 300;
  for (const auto& arch : isa::kSupportedArchs) {
    const std::size_t g = arch.n_sa;
    // Every input but the last a multiple of N_SA; the last odd.
    const std::vector<std::vector<std::size_t>> channel_sets = {
        {g, 3}, {2 * g, g, 5}, {g, g, g, 2 * g + 1}, {7}};
    for (const auto& kns : channel_sets)
      for (std::size_t side : {3u, 5u}) {
        const std::size_t pixels = side * side;
        Dram dram(1 << 20);
        isa::Instruction m(isa::Opcode::CONCAT);
        m.set(Field::CONCAT_InNum, kns.size());
        std::vector<std::int8_t> all;
        std::uint64_t addr = 0x1000;
        for (std::size_t n = 0; n < kns.size(); ++n) {
          const auto x = random_int8(kns[n] * pixels, seed++);
          all.insert(all.end(), x.begin(), x.end());  // NCHW concat: channels of input n follow
          dram.write(addr, pack_activation(arch.n_sa, kns[n], pixels, x), "test");
          m.set(kStart[n], addr).set(kIh[n], side).set(kKn[n], kns[n]);
          addr += ceil_mod(layout_bytes(arch.n_sa, kns[n], pixels), 32) + 96;
        }
        std::size_t total = 0;
        for (auto k : kns) total += k;
        const std::uint64_t out = 0x40000;
        const std::size_t out_bytes = layout_bytes(arch.n_sa, total, pixels);
        dram.fill(out, out_bytes + 32, 0x33, "test");
        const isa::Instruction ob = output_block(out, ceil_div(total, arch.n_sa),
                                                 ceil_mod(pixels, 32 / arch.n_sa), side, side);
        Diagnostics diag;
        run_block(&run_concat, arch, dram, diag, m, &ob, nullptr);
        ASSERT_EQ(dram.read(out, out_bytes, "test"),
                  expected_activation(arch.n_sa, total, pixels, all))
            << arch.str() << " inputs " << kns.size() << " side " << side;
        EXPECT_EQ(dram.read_u8(out + out_bytes, "test"), 0x33);
      }
  }
}

TEST(ConcatBlock, BadFieldsNameTheInstructionAndField) {
  Dram dram(1 << 16);
  Diagnostics diag;
  auto concat = [](std::uint64_t in_num) {
    isa::Instruction m(isa::Opcode::CONCAT);
    m.set(Field::CONCAT_InNum, in_num);
    for (int n = 0; n < 4; ++n) m.set(kStart[n], 0x100 + 0x100 * n).set(kIh[n], 2).set(kKn[n], 4);
    return m;
  };
  const isa::Instruction ob = output_block(0x1000, 2, 8, 2, 2);
  auto run = [&](const isa::Instruction& m, const isa::Instruction& o) {
    return error_of([&] { run_block(&run_concat, isa::kArch9x4x4, dram, diag, m, &o, nullptr); });
  };
  EXPECT_EQ(run(concat(2), ob), "");
  std::string e = run(concat(0), ob);
  EXPECT_NE(e.find("instruction 1 CONCAT.InNum"), std::string::npos) << e;
  e = run(concat(5), ob);
  EXPECT_NE(e.find("CONCAT.InNum"), std::string::npos) << e;
  isa::Instruction odd_first = concat(2);
  odd_first.set(Field::CONCAT_KN1, 3);
  e = run(odd_first, ob);
  EXPECT_NE(e.find("CONCAT.KN1"), std::string::npos) << e;
  EXPECT_NE(e.find("multiple of N_SA = 4"), std::string::npos) << e;
  isa::Instruction other_size = concat(2);
  other_size.set(Field::CONCAT_IH2, 3);
  e = run(other_size, ob);
  EXPECT_NE(e.find("CONCAT.IH2"), std::string::npos) << e;
  e = run(concat(3), ob);  // 12 channels, but KernelItr says 2 groups
  EXPECT_NE(e.find("OutputBlock.KernelItr"), std::string::npos) << e;
  isa::Instruction outside = concat(1);
  outside.set(Field::CONCAT_Image1StartAddress, 0x10000);
  e = run(outside, output_block(0x1000, 1, 8, 2, 2));
  EXPECT_NE(e.find("CONCAT.Image1StartAddress"), std::string::npos) << e;
}

isa::Instruction resize_instruction(std::size_t c, std::size_t h, std::size_t w, std::uint64_t addr,
                                    std::uint64_t bytes) {
  isa::Instruction m(isa::Opcode::RESIZE);
  m.set(Field::RESIZE_IW, w)
      .set(Field::RESIZE_IH, h)
      .set(Field::RESIZE_IC, c)
      .set(Field::RESIZE_ImageStartAddress, addr)
      .set(Field::RESIZE_ImageEndAddress, addr + bytes);
  return m;
}

TEST(ResizeBlock, HandWorked2x2) {
  const std::vector<std::int8_t> x = {1, 2, 3, 4};
  Dram dram(1 << 16);
  dram.write(0x100, pack_activation(4, 1, 4, x), "test");
  const isa::Instruction m = resize_instruction(1, 2, 2, 0x100, 32);
  const isa::Instruction ob = output_block(0x400, 1, 16, 4, 4);
  Diagnostics diag;
  run_block(&run_resize, isa::kArch9x4x4, dram, diag, m, &ob, nullptr);
  const std::vector<std::int8_t> want = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
  EXPECT_EQ(dram.read(0x400, 64, "test"), expected_activation(4, 1, 16, want));
}

TEST(ResizeBlock, MatchesPlainNearestUpsampleOnEveryArray) {
  unsigned seed = 500;
  for (const auto& arch : isa::kSupportedArchs)
    for (const auto& [c, h, w] : {std::tuple{5, 3, 7}, std::tuple{9, 1, 1}, std::tuple{16, 4, 6}}) {
      const auto x = random_int8(c * h * w, seed++);
      std::vector<std::int8_t> want(c * 4 * h * w);
      for (int ch = 0; ch < c; ++ch)
        for (int i = 0; i < 2 * h; ++i)
          for (int j = 0; j < 2 * w; ++j)
            want[(ch * 2 * h + i) * 2 * w + j] = x[(ch * h + i / 2) * w + j / 2];
      const std::size_t in_bytes = layout_bytes(arch.n_sa, c, h * w);
      const std::size_t out_bytes = layout_bytes(arch.n_sa, c, 4 * h * w);
      Dram dram(1 << 20);
      dram.write(0x1000, pack_activation(arch.n_sa, c, h * w, x), "test");
      dram.fill(0x20000, out_bytes + 32, 0x44, "test");
      const isa::Instruction m = resize_instruction(c, h, w, 0x1000, in_bytes);
      const isa::Instruction ob = output_block(0x20000, ceil_div(c, arch.n_sa),
                                               ceil_mod(4 * h * w, 32 / arch.n_sa), 2 * h, 2 * w);
      Diagnostics diag;
      const BlockTiming t = run_block(&run_resize, arch, dram, diag, m, &ob, nullptr);
      ASSERT_EQ(dram.read(0x20000, out_bytes, "test"),
                expected_activation(arch.n_sa, c, 4 * h * w, want))
          << arch.str() << " " << c << "x" << h << "x" << w;
      EXPECT_EQ(dram.read_u8(0x20000 + out_bytes, "test"), 0x44);
      EXPECT_EQ(t.dram_read_bytes, in_bytes);
      EXPECT_EQ(t.dram_write_bytes, out_bytes);
    }
}

TEST(ResizeBlock, BadFieldsNameTheInstructionAndField) {
  Dram dram(1 << 16);
  Diagnostics diag;
  auto run = [&](const isa::Instruction& m, const isa::Instruction& o) {
    return error_of([&] { run_block(&run_resize, isa::kArch9x8x8, dram, diag, m, &o, nullptr); });
  };
  const isa::Instruction ob = output_block(0x400, 1, 16, 4, 4);
  EXPECT_EQ(run(resize_instruction(3, 2, 2, 0x100, 32), ob), "");
  std::string e = run(resize_instruction(3, 2, 2, 0x100, 64), ob);
  EXPECT_NE(e.find("instruction 1 RESIZE.ImageEndAddress"), std::string::npos) << e;
  e = run(resize_instruction(3, 0, 2, 0x100, 0), ob);
  EXPECT_NE(e.find("RESIZE.IH"), std::string::npos) << e;
  e = run(resize_instruction(3, 2, 2, 0x100, 32), output_block(0x400, 1, 16, 2, 2));
  EXPECT_NE(e.find("OutputBlock.OH"), std::string::npos) << e;
  // The output region is checked before anything is computed.
  e = run(resize_instruction(3, 2, 2, 0x100, 32), output_block(0xFFE0, 1, 16, 4, 4));
  EXPECT_NE(e.find("instruction 2 OutputBlock.OutputAddr"), std::string::npos) << e;
  EXPECT_NE(e.find("outside"), std::string::npos) << e;
}

// Whole programs through Device: RESIZE of the input, then CONCAT of the resized tensor with a
// tensor of the doubled size held in a blob.
TEST(ConcatResizeProgram, ResizeThenConcatOnEveryArray) {
  unsigned seed = 1300;
  for (const auto& arch : isa::kSupportedArchs) {
    const std::size_t g = arch.n_sa, c1 = g, c2 = 3;
    const int side = 3, big = 2 * side;
    const auto x = random_int8(c1 * side * side, seed++);
    const auto y = random_int8(c2 * big * big, seed++);
    testing::ProgramBuilder b{arch, {}, {}};
    const std::size_t in_bytes = layout_bytes(arch.n_sa, c1, side * side);
    const std::uint32_t in = b.alloc(in_bytes);
    const std::uint32_t other = b.add_blob(pack_activation(arch.n_sa, c2, big * big, y));
    const std::uint32_t resized = b.alloc(layout_bytes(arch.n_sa, c1, big * big));
    const std::uint32_t out = b.alloc(layout_bytes(arch.n_sa, c1 + c2, big * big));
    add_group(b, resize_instruction(c1, side, side, in, in_bytes),
              output_block(resized, ceil_div(c1, g), ceil_mod(big * big, 32 / g), big, big),
              nullptr);
    isa::Instruction cat(isa::Opcode::CONCAT);
    cat.set(Field::CONCAT_InNum, 2)
        .set(Field::CONCAT_Image1StartAddress, resized)
        .set(Field::CONCAT_IH1, big)
        .set(Field::CONCAT_KN1, c1)
        .set(Field::CONCAT_Image2StartAddress, other)
        .set(Field::CONCAT_IH2, big)
        .set(Field::CONCAT_KN2, c2);
    isa::Instruction ob =
        output_block(out, ceil_div(c1 + c2, g), ceil_mod(big * big, 32 / g), big, big);
    ob.set(Field::OutputBlock_DispatchEn, 1).set(Field::OutputBlock_DispatchID, 0xCA7);
    add_group(b, cat, ob, nullptr);
    b.finish();
    std::vector<std::int8_t> want;
    for (std::size_t ch = 0; ch < c1; ++ch)
      for (int i = 0; i < big; ++i)
        for (int j = 0; j < big; ++j) want.push_back(x[(ch * side + i / 2) * side + j / 2]);
    want.insert(want.end(), y.begin(), y.end());
    EXPECT_EQ(
        run_program_dispatch(b, in, pack_activation(arch.n_sa, c1, side * side, x), 0xCA7, nullptr),
        expected_activation(arch.n_sa, c1 + c2, big * big, want))
        << arch.str();
  }
}

}  // namespace
}  // namespace npukit::device
