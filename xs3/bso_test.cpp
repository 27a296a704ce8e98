// BSO layout (xs3-arithmetic.md §1.8) and the generation B output pipeline (§1.7 B), with
// expected values worked by hand.
#include "xs3/bso.h"

#include "common/error.h"

#include <gtest/gtest.h>

#include <vector>

namespace npukit::xs3 {
namespace {

TEST(Xs3Bso, LayoutGroupRowLane) {
  std::vector<BsoChannel> chans(18);
  chans[17] = {0x12345678, 3, -2, 5, -7, 9};
  chans[0] = {-1, 0, 1, 0, 0, 0};
  const auto bso = pack_bso(chans);
  ASSERT_EQ(bso.size(), 2u * 7 * 16);  // ceil(18/16) groups
  // Channel 17 is group 1, lane 1: element (g*7 + row)*16 + lane.
  EXPECT_EQ(bso[(7 + 0) * 16 + 1], 0x1234);
  EXPECT_EQ(bso[(7 + 1) * 16 + 1], 0x5678);
  EXPECT_EQ(bso[(7 + 2) * 16 + 1], 3);
  EXPECT_EQ(bso[(7 + 3) * 16 + 1], 0xFFFE);
  EXPECT_EQ(bso[(7 + 4) * 16 + 1], 5);
  EXPECT_EQ(bso[(7 + 5) * 16 + 1], 0xFFF9);
  EXPECT_EQ(bso[(7 + 6) * 16 + 1], 9);
  // Bias -1: hi = 0xFFFF (signed -1), lo = 0xFFFF (unsigned 65535): -65536 + 65535.
  EXPECT_EQ(bso[0], 0xFFFF);
  EXPECT_EQ(bso[16], 0xFFFF);
  // Tail lanes 2..15 of group 1 are padded with zeros.
  for (int row = 0; row < 7; ++row) {
    for (int lane = 2; lane < 16; ++lane) EXPECT_EQ(bso[std::size_t((7 + row) * 16 + lane)], 0);
  }
  EXPECT_EQ(unpack_bso(bso, 18), chans);
}

TEST(Xs3Bso, BiasSplitRoundTrip) {
  for (std::int32_t b : {0, 1, -1, 65535, 65536, -65536, -65537, 2147483647, -2147483647 - 1}) {
    const std::vector<BsoChannel> one{{b, 0, 0, 0, 0, 0}};
    const auto bso = pack_bso(one);
    // (int16)hi * 65536 + (uint16)lo
    EXPECT_EQ(std::int64_t{static_cast<std::int16_t>(bso[0])} * 65536 + bso[16], b);
    EXPECT_EQ(unpack_bso(bso, 1)[0].bias, b);
  }
}

TEST(Xs3Bso, RejectsBadTensors) {
  std::vector<std::uint16_t> bso(112, 0);
  EXPECT_THROW(unpack_bso(bso, 17), Error);  // needs 224
  EXPECT_THROW(unpack_bso(std::vector<std::uint16_t>(100, 0), 1), Error);
  bso[2 * 16 + 3] = 0xFFFF;  // channel 3 shift1 = -1
  try {
    unpack_bso(bso, 4);
    FAIL() << "negative shift accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("channel 3: shift1 is -1"), std::string::npos) << e.what();
  }
  bso[2 * 16 + 3] = 0;
  bso[6 * 16 + 0] = 32;  // shift2 = 32
  EXPECT_THROW(unpack_bso(bso, 4), Error);
  const std::vector<BsoChannel> neg{{0, 0, 1, 0, 0, -3}};
  EXPECT_THROW(pack_bso(neg), Error);
}

TEST(Xs3BsoPipeline, HandWorked) {
  // acc 1000 >> 3 = 125; 125*300 = 37500; + 100*(-50) = 32500; 32500 / 2^8 = 126.95 -> 127.
  const BsoChannel a{0, 3, 300, 100, -50, 8};
  EXPECT_EQ(bso_stage1(1000, a), 125);
  EXPECT_EQ(bso_stage2(125, a), 32500);
  EXPECT_EQ(bso_output8(1000, a), 127);
  // -12345 / 16 = -771.56 -> -772; * -20 = 15440; + 3*7 = 15461; / 2^7 = 120.79 -> 121.
  const BsoChannel b{0, 4, -20, 3, 7, 7};
  EXPECT_EQ(bso_stage1(-12345, b), -772);
  EXPECT_EQ(bso_output8(-12345, b), 121);
  // No extra >> 8 (DECISIONS.md 15): shift2 = 0 passes the scaled value straight to int8.
  const BsoChannel c{0, 0, 1, 0, 0, 0};
  EXPECT_EQ(bso_output8(42, c), 42);
  EXPECT_EQ(bso_output16(-1234, c), -1234);
}

TEST(Xs3BsoPipeline, LowerBoundAndTies) {
  const BsoChannel ch{0, 0, 1, 0, 0, 1};
  EXPECT_EQ(bso_output8(-255, ch), -127);  // -127.5 rounds up to -127
  EXPECT_EQ(bso_output8(-257, ch), -128);  // -128.5 -> -128
  EXPECT_EQ(bso_output8(-257, ch, {.symmetric = true}), -127);
  EXPECT_EQ(bso_output8(-10000, ch), -128);
  EXPECT_EQ(bso_output8(-10000, ch, {.symmetric = true}), -127);
  EXPECT_EQ(bso_output8(10000, ch), 127);
  EXPECT_EQ(bso_output8(253, ch), 127);  // 126.5 -> 127
  EXPECT_EQ(bso_output8(251, ch), 126);  // 125.5 -> 126
}

TEST(Xs3BsoPipeline, SaturationStages) {
  const BsoChannel ch{0, 0, 1, 0, 0, 0};
  EXPECT_EQ(bso_stage1(2147483647, ch), 32767);
  EXPECT_EQ(bso_stage1(-2147483647, ch), -32767);
  EXPECT_EQ(bso_output16(2147483647, ch), 32767);
  EXPECT_EQ(bso_output16(-2147483647, ch), -32767);
  // The largest stage-2 magnitude: 32767*32768 + 32768*32768 = 2147450880, below 2^31-1.
  const BsoChannel big{0, 0, -32768, -32768, -32768, 0};
  EXPECT_EQ(bso_stage2(-32767, big), 2147450880);
}

}  // namespace
}  // namespace npukit::xs3
