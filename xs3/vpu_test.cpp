// Hand-worked examples from xs3-arithmetic.md §1 (tables in 1.1-1.6) and DECISIONS.md 16-17.
#include "xs3/vpu.h"

#include "common/error.h"

#include <gtest/gtest.h>

#include <vector>

namespace npukit::xs3 {
namespace {

TEST(Xs3Saturation, SymmetricBoundsPerWidth) {
  EXPECT_EQ(sat8(-128), -127);
  EXPECT_EQ(sat8(128), 127);
  EXPECT_EQ(sat8(-5), -5);
  EXPECT_EQ(sat16(-32768), -32767);
  EXPECT_EQ(sat16(40000), 32767);
  EXPECT_EQ(sat32(std::int64_t{-2147483647} - 1), -2147483647);
  EXPECT_EQ(sat32(std::int64_t{1} << 40), 2147483647);
  EXPECT_EQ(saturate(std::int64_t{1} << 45, 40), (std::int64_t{1} << 39) - 1);
  EXPECT_EQ(saturate(-(std::int64_t{1} << 45), 40), -((std::int64_t{1} << 39) - 1));
}

TEST(Xs3RoundingShift, SpecTable) {
  // §1.2: floor((x + 2^(s-1)) / 2^s).
  EXPECT_EQ(rshr_round(5, 1), 3);    // 2.5 -> 3
  EXPECT_EQ(rshr_round(-5, 1), -2);  // -2.5 -> -2
  EXPECT_EQ(rshr_round(-8, 4), 0);   // -0.5 -> 0 (NOT -1: that is VLASHR)
  EXPECT_EQ(rshr_round(-9, 4), -1);
  EXPECT_EQ(rshr_round(-0x0A800000, 24), -10);
  EXPECT_EQ(rshr_round(0x0A800000, 24), 11);
  EXPECT_EQ(rshr_round(12345, 0), 12345);
  // No overflow near INT32_MAX (lib_nn's int32 acc + 2^(s-1) would wrap).
  EXPECT_EQ(rshr_round(2147483647, 1), 1073741824);
  EXPECT_EQ(rshr_round(-2147483647, 31), -1);  // -0.99999... -> -1
  EXPECT_EQ(rshr_round(-1073741824, 31), 0);   // exactly -0.5 -> 0
  EXPECT_THROW(rshr_round(1, -1), Error);
}

TEST(Xs3Vlsat, RoundsThenSaturatesToElementWidth) {
  EXPECT_EQ(vlsat(-8, 4, VpuMode::k16), 0);
  EXPECT_EQ(vlsat(0x7FFFFFFF, 0, VpuMode::k16), 32767);
  EXPECT_EQ(vlsat(-0x7FFFFFFF, 8, VpuMode::k16), -32767);
  EXPECT_EQ(vlsat(1000, 2, VpuMode::k8), 127);  // 250 -> 127
  EXPECT_EQ(vlsat(-1000, 3, VpuMode::k8), -125);
  EXPECT_EQ(vlsat(std::int64_t{1} << 38, 4, VpuMode::k32), 2147483647);
  EXPECT_THROW(vlsat(1, -2, VpuMode::k16), Error);
}

TEST(Xs3Vlashr, FloorShiftAndSaturatingLeftShift) {
  // DECISIONS.md 17: floor, so these differ from VLSAT.
  EXPECT_EQ(vlashr(-8, 4, VpuMode::k16), -1);
  EXPECT_EQ(vlashr(7, 1, VpuMode::k16), 3);
  EXPECT_EQ(vlashr(-7, 1, VpuMode::k8), -4);
  // Shifts at or past the element width give 0 or -1.
  EXPECT_EQ(vlashr(127, 7, VpuMode::k8), 0);
  EXPECT_EQ(vlashr(-1, 15, VpuMode::k16), -1);
  EXPECT_EQ(vlashr(-5, 100, VpuMode::k32), -1);
  EXPECT_EQ(vlashr(5, 100, VpuMode::k32), 0);
  // Negative: saturating left shift (§1.3).
  EXPECT_EQ(vlashr(1, -15, VpuMode::k16), 32767);
  EXPECT_EQ(vlashr(-1, -15, VpuMode::k16), -32767);
  EXPECT_EQ(vlashr(3, -2, VpuMode::k8), 12);
  EXPECT_EQ(vlashr(-100, -1, VpuMode::k8), -127);
  EXPECT_EQ(vlashr(1, -1000, VpuMode::k32), 2147483647);
  EXPECT_EQ(vlashr(0, -1000, VpuMode::k32), 0);
}

TEST(Xs3Vlmul, QFormatsRoundHalfUp) {
  EXPECT_EQ(vlmul(24645, 0x2000, VpuMode::k16), 12323);  // 12322.5 -> 12323
  EXPECT_EQ(vlmul(-0x7FFF, -0x7FFF, VpuMode::k16), 32767);
  EXPECT_EQ(vlmul(-3, 0x2000, VpuMode::k16), -1);                // -1.5 -> -1
  EXPECT_EQ(vlmul(100, 0x40, VpuMode::k8), 100);                 // Q1.6: 0x40 = 1.0
  EXPECT_EQ(vlmul(-3, 0x20, VpuMode::k8), -1);                   // -1.5 -> -1
  EXPECT_EQ(vlmul(127, 127, VpuMode::k8), 127);                  // 252.02 saturates
  EXPECT_EQ(vlmul(1000000, 0x40000000, VpuMode::k32), 1000000);  // Q2.30: 2^30 = 1.0
  EXPECT_EQ(vlmul(-0x7FFFFFFF, 0x7FFFFFFF, VpuMode::k32), -2147483647);
}

TEST(Xs3Vdepth, SpecTable) {
  EXPECT_EQ(vdepth8_from16(0x7F), 0);
  EXPECT_EQ(vdepth8_from16(0x80), 1);
  EXPECT_EQ(vdepth8_from16(-0x80), 0);
  EXPECT_EQ(vdepth8_from16(-0x81), -1);
  EXPECT_EQ(vdepth8_from16(0x7FFF), 127);
  EXPECT_EQ(vdepth8_from16(-0x7FFF), -127);
  EXPECT_EQ(vdepth8_from32(0x00800000), 1);
  EXPECT_EQ(vdepth8_from32(-0x00800000), 0);
  EXPECT_EQ(vdepth8_from32(0x7FFFFFFF), 127);
  EXPECT_EQ(vdepth16_from32(0x8000), 1);
  EXPECT_EQ(vdepth16_from32(-0x8000), 0);
  EXPECT_EQ(vdepth16_from32(0x7FFFFFFF), 32767);
  EXPECT_EQ(vdepth16_from32(-0x7FFFFFFF), -32767);
}

TEST(Xs3VectorAdd, SaturatingAddSubAndPos) {
  EXPECT_EQ(vladd(100, 100, VpuMode::k8), 127);
  EXPECT_EQ(vladd(-100, -100, VpuMode::k8), -127);
  EXPECT_EQ(vladd(30000, 30000, VpuMode::k16), 32767);
  EXPECT_EQ(vlsub(3, 10, VpuMode::k16), 7);  // mem - vR
  EXPECT_EQ(vlsub(100, -100, VpuMode::k8), -127);
  EXPECT_EQ(vlsub(-0x7FFFFFFF, 0x7FFFFFFF, VpuMode::k32), 0x7FFFFFFF);
  EXPECT_EQ(vpos(-5), 0);
  EXPECT_EQ(vpos(5), 5);
}

TEST(Xs3Vlmacc, LanewiseSaturatingMultiplyAccumulate) {
  VpuAccumulators acc(VpuMode::k8);
  std::vector<std::int32_t> c(16), m(16);
  for (int i = 0; i < 16; ++i) {
    c[std::size_t(i)] = i - 8;
    m[std::size_t(i)] = 3;
  }
  acc.set(0, 2147483600);
  acc.vlmacc(c, m);  // lane 0: 2147483600 + (-24)
  EXPECT_EQ(acc.get(0), 2147483576);
  EXPECT_EQ(acc.get(15), 21);
  std::fill(c.begin(), c.end(), -127);
  std::fill(m.begin(), m.end(), -127);
  acc.vlmacc(c, m);  // lane 0: + 16129 saturates
  EXPECT_EQ(acc.get(0), 2147483647);
  EXPECT_EQ(acc.get(15), 21 + 16129);

  // 32-bit mode: 8 lanes, product rounded >> 30 into a 40-bit accumulator.
  VpuAccumulators acc32(VpuMode::k32);
  std::vector<std::int32_t> c8(8, 0x40000000), m8(8, 3);
  m8[1] = -3;
  acc32.set(2, (std::int64_t{1} << 39) - 2);
  acc32.vlmacc(c8, m8);
  EXPECT_EQ(acc32.get(0), 3);
  EXPECT_EQ(acc32.get(1), -3);
  EXPECT_EQ(acc32.get(2), (std::int64_t{1} << 39) - 1);
  EXPECT_THROW(acc32.vlmacc(c, m), Error);  // 16 elements in 32-bit mode
}

TEST(Xs3Vlmaccr, RotationFeedsChannel15First) {
  VpuAccumulators acc(VpuMode::k8);
  for (int i = 0; i < 16; ++i) acc.set(i, i);
  std::vector<std::int32_t> ones(32, 1);
  for (int n = 0; n < 16; ++n) {
    std::vector<std::int32_t> mem(32, n);  // VLMACCR number n adds 32*n
    acc.vlmaccr(ones, mem);
  }
  // VLMACCR n consumed the accumulator then at the top (index 15-n) and, after the remaining
  // 15-n rotations, left it back at index 15-n: acc[i] = i + 32*(15-i).
  for (int i = 0; i < 16; ++i) EXPECT_EQ(acc.get(i), i + 32 * (15 - i)) << i;
}

TEST(Xs3Vlmaccr, SaturatesOncePerInstruction) {
  VpuAccumulators acc(VpuMode::k8);
  acc.set(15, 2147483647 - 10);
  std::vector<std::int32_t> c(32, 1), m(32, 1);
  m[0] = -20;  // sum = 31 - 20 = 11: the running sum never needs saturating mid-way
  acc.vlmaccr(c, m);
  EXPECT_EQ(acc.get(0), 2147483647);  // 2^31-1-10+11 saturates at the end of the instruction
  acc.set(15, -2147483647);
  std::fill(m.begin(), m.end(), -1);
  acc.vlmaccr(c, m);
  EXPECT_EQ(acc.get(0), -2147483647);
  EXPECT_EQ(acc.get(1), 2147483647);  // rotated up
}

TEST(Xs3Vlmaccr, SixteenAndThirtyTwoBitModes) {
  VpuAccumulators a16(VpuMode::k16);
  std::vector<std::int32_t> c(16, 30000), m(16, 30000);
  a16.vlmaccr(c, m);  // 16 * 9e8 saturates
  EXPECT_EQ(a16.get(0), 2147483647);
  VpuAccumulators a32(VpuMode::k32);
  std::vector<std::int32_t> c8(8, 0x40000000), m8(8, 5);
  a32.set(7, 100);
  a32.vlmaccr(c8, m8);
  EXPECT_EQ(a32.get(0), 140);  // 100 + 8 * 5
  EXPECT_EQ(vlmaccr_elements(VpuMode::k8), 32);
  EXPECT_EQ(accumulator_count(VpuMode::k32), 8);
}

}  // namespace
}  // namespace npukit::xs3
