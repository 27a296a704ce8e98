// NVDLA FP32/FP17 arithmetic: hand-worked values of the rules in nvdla-lut.md 1.4/1.7 and 9
// (RNE, flush to zero, denormal inputs with an implied 1, saturation instead of Inf, NaN
// propagation). Each expected bit pattern is derived by hand in the comment beside it.
#include "lut/nvdla_fp.h"

#include <gtest/gtest.h>

#include <cmath>

namespace npukit::lut::fp {
namespace {

TEST(Fp32Add, ExactAndRoundedSums) {
  EXPECT_EQ(fp32_add(0x3f800000u, 0x3f800000u), 0x40000000u);  // 1 + 1 = 2
  EXPECT_EQ(fp32_add(0x3f800000u, 0x33800000u), 0x3f800000u);  // 1 + 2^-24: tie -> even
  EXPECT_EQ(fp32_add(0x3f800000u, 0x33c00000u), 0x3f800001u);  // 1 + 1.5*2^-24: up
  EXPECT_EQ(fp32_sub(0x40400000u, 0x3f800000u), 0x40000000u);  // 3 - 1 = 2
}

TEST(Fp32Add, SignOfExactZeroIsTheLargerOperands) {
  EXPECT_EQ(fp32_sub(0x41800000u, 0x41800000u), 0x00000000u);  // 16 - 16 = +0
  EXPECT_EQ(fp32_sub(0xc1800000u, 0xc1800000u), 0x80000000u);  // -16 - -16 = -0
}

TEST(Fp32Add, DenormalInputsHaveAnImpliedOne) {
  // 0x00400000 reads as 1.5 * 2^-127 (IEEE: 2^-127). 2^-125 + 1.5*2^-127 = 1.375 * 2^-125.
  EXPECT_EQ(fp32_add(0x00400000u, 0x01000000u), 0x01300000u);
}

TEST(Fp32Add, ResultsBelowTheNormalRangeFlushToZero) {
  // 2^-126 - 1.75*2^-127 = 2^-129: IEEE would give a denormal; NVDLA gives +0.
  EXPECT_EQ(fp32_add(0x00800000u, 0x80600000u), 0x00000000u);
}

TEST(Fp32Add, OverflowSaturatesAndNaNPropagates) {
  EXPECT_EQ(fp32_add(0x7f7fffffu, 0x7f7fffffu), 0x7f7fffffu);
  EXPECT_EQ(fp32_add(0xff7fffffu, 0xff7fffffu), 0xff7fffffu);
  EXPECT_EQ(fp32_add(0x7fc00001u, 0x3f800000u), 0x7fc00001u);
  EXPECT_EQ(fp32_add(0x3f800000u, 0xffc00000u), 0xffc00000u);
  EXPECT_EQ(fp32_sub(0x3f800000u, 0x7fc00000u), 0xffc00000u);  // b's sign was flipped first
}

// FP17: 1 sign, 6 exponent (bias 31), 10 mantissa. 1.0 = 0x7c00, 1.5 = 0x7e00, 2.0 = 0x8000.
TEST(Fp17Mul, RoundsToNearestEven) {
  EXPECT_EQ(fp17_mul(0x7c00u, 0x7c00u), 0x7c00u);
  // (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20 -> 1 + 2^-9
  EXPECT_EQ(fp17_mul(0x7c01u, 0x7c01u), 0x7c02u);
  // (1 + 2^-10) * 1.5 = 1.5 + 2^-10 + 2^-11: mantissa 513.5 ulps -> 514 (even)
  EXPECT_EQ(fp17_mul(0x7c01u, 0x7e00u), 0x7e02u);
}

TEST(Fp17Mul, UnderflowFlushesAndOverflowSaturates) {
  EXPECT_EQ(fp17_mul(0x2c00u, 0x2c00u), 0x00000u);   // 2^-20 * 2^-20 = 2^-40 -> 0
  EXPECT_EQ(fp17_mul(0x2c00u, 0x12c00u), 0x10000u);  // sign kept: -0
  EXPECT_EQ(fp17_mul(0xfbffu, 0x8000u), 0xfbffu);    // 2 * max -> max = 2^32 - 2^21
  EXPECT_EQ(fp17_add(0xfbffu, 0xfbffu), 0xfbffu);
  EXPECT_EQ(fp17_mul(0x7c00u, 0x00000u), 0x00000u);  // exact zero
}

TEST(Conversions, Fp17AndFp32) {
  EXPECT_EQ(fp17_to_fp32(0xfbffu), 0x4f7fe000u);  // (2 - 2^-10) * 2^31
  EXPECT_EQ(fp17_to_fp32(0x17c00u), 0xbf800000u);
  EXPECT_EQ(fp32_to_fp17(0x4f800000u), 0xfbffu);  // 2^32 does not fit: largest finite
  EXPECT_EQ(fp32_to_fp17(0x7f800000u), 0xfbffu);  // Inf -> largest finite
  EXPECT_EQ(fp32_to_fp17(0x3f801000u), 0x7c00u);  // 1 + 2^-11: tie -> even
  EXPECT_EQ(fp32_to_fp17(0x3f803000u), 0x7c02u);  // 1 + 3*2^-11 -> 1 + 2^-9
  EXPECT_EQ(fp32_to_fp17(0x30000000u), 0x0000u);  // 2^-31: below FP17's normal range
  EXPECT_EQ(fp32_to_fp17(0x307fffffu), 0x0400u);  // just under 2^-30 rounds up to 2^-30
}

TEST(Conversions, Fp16Widening) {
  EXPECT_EQ(fp16_to_fp17(0x3c00u), 0x7c00u);
  EXPECT_EQ(fp16_to_fp17(0xbc00u), 0x17c00u);
  EXPECT_EQ(fp16_to_fp17(0x0001u), 0x1c00u);  // FP16 denormal 2^-24 is a normal FP17
  EXPECT_EQ(fp16_to_fp17(0x7c00u), 0xfbffu);  // Inf -> largest finite FP17
  EXPECT_EQ(fp16_to_fp32(0x0001u), 0x33800000u);
  EXPECT_EQ(fp16_to_fp32(0x0002u), 0x34000000u);  // nvdla/sw sigmoid LO[0] = 2^-23
  EXPECT_EQ(fp16_to_fp32(0x3800u), 0x3f000000u);
  EXPECT_EQ(fp16_to_fp32(0xfc00u), 0xff7fffffu);  // -Inf -> most negative finite
}

TEST(Conversions, FractionToFp17) {
  EXPECT_EQ(fraction_to_fp17(1ull << 34, 35), 0x7800u);                // 0.5
  EXPECT_EQ(fraction_to_fp17((1ull << 35) - 1, 35), 0x7c00u);          // rounds up to 1.0
  EXPECT_EQ(fraction_to_fp17(1ull << 5, 35), 0x0400u);                 // 2^-30, the smallest normal
  EXPECT_EQ(fraction_to_fp17(1ull << 4, 35), 0x0000u);                 // 2^-31 flushes
  EXPECT_EQ(fraction_to_fp17(0x8000u, 16), 0x7800u);                   // 0.5 on the CDP's 16 bits
  EXPECT_EQ(fraction_to_fp17(0x0001u, 16), std::uint32_t(15u << 10));  // 2^-16
}

TEST(Host, Fp16FromDouble) {
  EXPECT_EQ(fp16_from_double(1.0), 0x3c00u);
  EXPECT_EQ(fp16_from_double(-2.0), 0xc000u);
  EXPECT_EQ(fp16_from_double(1.0 + 1.0 / 2048), 0x3c00u);  // tie -> even
  EXPECT_EQ(fp16_from_double(1e9), 0x7bffu);               // saturates
  EXPECT_EQ(fp16_from_double(std::ldexp(1.0, -24)), 0x0001u);
  EXPECT_DOUBLE_EQ(fp16_value(0x39d9u), 1497.0 / 2048);
}

}  // namespace
}  // namespace npukit::lut::fp
