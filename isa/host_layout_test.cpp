#include "isa/host_layout.h"

#include "common/error.h"

#include <gtest/gtest.h>

namespace npukit::isa {
namespace {

// Hand-worked from gati.md 6.1 on 9,4,4 (cd = 4, dk = 8): a 6-channel 3x3 image has P' = 16,
// C' = 8, 128 bytes. Channel 5 pixel 2: group 1 -> 1*4*16 = 64, pixel word 0, lane 1 -> 8,
// pixel 2 -> offset 74. Channel 0 pixel 8: word 1 -> 32 + 0 + 0 = 32.
TEST(HostLayout, OffsetsMatchHandWorkedExample) {
  const SaArch arch = SaArch::parse("9,4,4");
  EXPECT_EQ(activation_bytes(6, 3, 3, arch), 128u);
  EXPECT_EQ(activation_offset(5, 2, 9, arch), 74u);
  EXPECT_EQ(activation_offset(0, 8, 9, arch), 32u);
  // 9,8,8 (dk = 4): channel 9 pixel 5 of a 2x3 image: P' = 8, group 1 -> 64, word 1 -> 32,
  // lane 1 -> 4, pixel 1 -> 101.
  EXPECT_EQ(activation_offset(9, 5, 6, SaArch::parse("9,8,8")), 101u);
  // 16,1,16 (dk = 2): channel 3 pixel 1 of a 1x1 image: P' = 2, lane 3 -> 6, pixel 1 -> 7.
  EXPECT_EQ(activation_offset(3, 1, 1, SaArch::parse("16,1,16")), 7u);
}

TEST(HostLayout, PackUnpackRoundTripAndZeroPadding) {
  for (const char* a : {"9,4,4", "9,8,8", "16,1,16"}) {
    const SaArch arch = SaArch::parse(a);
    const std::int64_t c = 5, h = 3, w = 7;
    std::vector<std::int8_t> chw(c * h * w);
    for (std::size_t i = 0; i < chw.size(); ++i) chw[i] = static_cast<std::int8_t>(i * 37 - 100);
    Bytes packed = pack_activation(chw, c, h, w, arch);
    ASSERT_EQ(packed.size(), activation_bytes(c, h, w, arch));
    std::size_t nonzero_slots = 0;
    for (auto b : packed) nonzero_slots += b != 0;
    std::size_t nonzero_values = 0;
    for (auto v : chw) nonzero_values += v != 0;
    EXPECT_EQ(nonzero_slots, nonzero_values) << a << ": padding bytes must be zero";
    std::vector<std::int32_t> wide(chw.begin(), chw.end());
    wide[3] = -123456789;
    const Bytes packed32 = pack_activation32(wide, c, h, w, arch);
    // Every element sits where the hand-checked activation_offset says.
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t px = 0; px < h * w; ++px) {
        const std::uint64_t at = activation_offset(ch, px, h * w, arch);
        ASSERT_EQ(static_cast<std::int8_t>(packed[at]), chw[ch * h * w + px]) << a;
        const std::uint32_t be = std::uint32_t{packed32[4 * at]} << 24 |
                                 std::uint32_t{packed32[4 * at + 1]} << 16 |
                                 std::uint32_t{packed32[4 * at + 2]} << 8 | packed32[4 * at + 3];
        ASSERT_EQ(static_cast<std::int32_t>(be), wide[ch * h * w + px]) << a;
      }
    EXPECT_EQ(unpack_activation(packed, c, h, w, arch), chw) << a;
    EXPECT_EQ(unpack_activation32(packed32, c, h, w, arch), wide);
  }
}

TEST(HostLayout, RejectsMismatchedSizes) {
  const SaArch arch = SaArch::parse("9,8,8");
  std::vector<std::int8_t> few(10);
  EXPECT_THROW(pack_activation(few, 3, 2, 2, arch), Error);
  Bytes short_bytes(31);
  EXPECT_THROW(unpack_activation(short_bytes, 3, 2, 2, arch), Error);
}

TEST(HostLayout, VectorsArePaddedToWholeWords) {
  std::vector<std::int8_t> v{1, -2, 3};
  Bytes b = pack_vector(v);
  ASSERT_EQ(b.size(), 32u);
  EXPECT_EQ(b[1], 0xFE);
  EXPECT_EQ(b[31], 0);
  EXPECT_EQ(vector_bytes(64), 64u);
}

}  // namespace
}  // namespace npukit::isa
