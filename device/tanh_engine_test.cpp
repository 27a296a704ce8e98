// The tanh/sigmoid engine against values worked by hand from the RTL tables and index formula
// (gati.md 7.4), and against the properties the engine must have.
#include "device/tanh_engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace npukit::device {
namespace {

TEST(TanhTables, MatchTheRtlFilesAtTheirEndsAndStep) {
  const auto& t = tanh_tables();
  // interpolation_points.txt is 0, 0x700, ..., 0x38000: a uniform step of 1792 = 3.5 / 128.
  for (int i = 0; i < kTanhTableSize; ++i) EXPECT_EQ(t.points[i], 1792u * i) << i;
  EXPECT_EQ(t.tanh[0], 0x0u);
  EXPECT_EQ(t.tanh[1], 0x700u);
  EXPECT_EQ(t.tanh[2], 0xDFCu);
  EXPECT_EQ(t.tanh[3], 0x14F4u);
  EXPECT_EQ(t.tanh[128], 0xFF89u);
  EXPECT_EQ(t.slope[0], 0x10000u);
  EXPECT_EQ(t.slope[1], 0xFF6Du);
  EXPECT_EQ(t.slope[128], 0x100u);
}

TEST(TanhEngine, SegmentIndexIsTheRtlShiftAndAdd) {
  // seg = x + 896; idx = (32 seg + 4 seg + 8 (seg >> 4) + (seg >> 4)) >> 16.
  EXPECT_EQ(tanh_segment_index(0), 0u);       // 32760 >> 16
  EXPECT_EQ(tanh_segment_index(896), 0u);     // seg 1792: 65520 >> 16 = 0 (nearest would be 1)
  EXPECT_EQ(tanh_segment_index(897), 1u);     // seg 1793: 65556 >> 16
  EXPECT_EQ(tanh_segment_index(65536), 37u);  // seg 66432: 2428920 >> 16
  EXPECT_EQ(tanh_segment_index(kTanhInputMax), 128u);
}

TEST(TanhEngine, HandWorkedValues) {
  EXPECT_EQ(tanh_q16(0), 0);
  EXPECT_EQ(tanh_q16(1792), 1792);  // idx 1, on the sample point: tanh[1] = 0x700
  // x = 2000: idx 1, diff 208, slope 0xFF6D = 65389: 208 * 65389 >> 16 = 207 -> 1792 + 207.
  EXPECT_EQ(tanh_q16(2000), 1999);
  // x = 897: idx 1, diff -895: -895 * 65389 = -58523155, floor(/65536) = -893 -> 899.
  EXPECT_EQ(tanh_q16(897), 899);
  // x = 1.0: idx 37, point 66304, diff -768, slope 26441, tanh 50232:
  // -768 * 26441 = -20306688, floor(/65536) = -310 -> 49922 (true tanh(1) * 2^16 = 49912).
  EXPECT_EQ(tanh_q16(65536), 49922);
  EXPECT_EQ(tanh_q16(-65536), -49922);
}

TEST(TanhEngine, FirstSlopeDoesNotFitTheSixteenBitRegister) {
  // slope[0] = 0x10000 reads as 0 in the RTL's 16-bit slope register: flat zero up to 896.
  EXPECT_EQ(tanh_q16(1), 0);
  EXPECT_EQ(tanh_q16(500), 0);
  EXPECT_EQ(tanh_q16(896), 0);
  EXPECT_EQ(tanh_q16(-896), 0);
}

TEST(TanhEngine, ClampsAtThreePointFive) {
  EXPECT_EQ(tanh_q16(229376), 0xFF89);
  EXPECT_EQ(tanh_q16(229377), 0xFF89);
  EXPECT_EQ(tanh_q16(10 << 16), 0xFF89);
  EXPECT_EQ(tanh_q16(std::numeric_limits<std::int32_t>::max()), 0xFF89);
  EXPECT_EQ(tanh_q16(std::numeric_limits<std::int32_t>::min()), -0xFF89);
  EXPECT_EQ(tanh_q16(229375), 65416);  // idx 128, diff -1, slope 0x100: -256 >> 16 = -1
}

TEST(TanhEngine, IsOddMonotoneAndCloseToTanh) {
  std::int32_t previous = 0;
  for (std::int32_t x = 0; x <= 240000; x += 7) {
    const std::int32_t t = tanh_q16(x);
    ASSERT_EQ(tanh_q16(-x), -t) << x;
    ASSERT_GE(t, previous) << x;
    previous = t;
    const double truth = std::tanh(std::min(x, 229376) / 65536.0) * 65536.0;
    // Largest error of the piecewise-linear table (and the flat first half segment).
    ASSERT_NEAR(t, truth, 900.0) << x;
    if (x > 2000) {
      ASSERT_NEAR(t, truth, 40.0) << x;
    }
  }
}

TEST(SigmoidEngine, IsHalfOfOnePlusTanhOfHalf) {
  EXPECT_EQ(sigmoid_q16(0), 32767);        // (0 + 65535) >> 1
  EXPECT_EQ(sigmoid_q16(4000), 33767);     // tanh(2000) = 1999
  EXPECT_EQ(sigmoid_q16(-4000), 31768);    // tanh(-2000) = -1999: 63536 >> 1
  EXPECT_EQ(sigmoid_q16(-1), 32767);       // -1 >>> 1 = -1, tanh(-1) = 0
  EXPECT_EQ(sigmoid_q16(1 << 30), 65476);  // (65417 + 65535) >> 1
  EXPECT_EQ(sigmoid_q16(-(1 << 30)), 59);  // (-65417 + 65535) >> 1
  for (std::int32_t x = -600000; x <= 600000; x += 101) {
    ASSERT_EQ(sigmoid_q16(x), (tanh_q16(x >> 1) + 65535) >> 1) << x;
  }
}

}  // namespace
}  // namespace npukit::device
