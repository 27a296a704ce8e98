// choose_scale_shift (DECISIONS.md 4): QuantScale in [1, 32767] and the shift making
// scale / 2^shift closest to the real multiplier. Expected values worked by hand.
#include "compiler/context.h"
#include "common/error.h"

#include <gtest/gtest.h>

namespace npukit::compiler {
namespace {

TEST(ChooseScaleShift, PicksTheClosestRepresentableMultiplier) {
  // 0.3 * 2^16 = 19660.8 -> 19661 (error 0.2 / 2^16); 2^17 would need 39322 > 32767;
  // 2^15 gives 9830 (error 0.8 / 2^16).
  auto q = choose_scale_shift(0.3, "t");
  EXPECT_EQ(q.scale, 19661);
  EXPECT_EQ(q.shift, 16);
  // 3/7 * 2^16 = 28086.857 -> 28087.
  q = choose_scale_shift(3.0 / 7.0, "t");
  EXPECT_EQ(q.scale, 28087);
  EXPECT_EQ(q.shift, 16);
  // 0.004 = 0.02 * 0.01 / 0.05: 2^22 * 0.004 = 16777.216 -> 16777; 2^23 needs 33554 > 32767.
  q = choose_scale_shift(0.004, "t");
  EXPECT_EQ(q.scale, 16777);
  EXPECT_EQ(q.shift, 22);
}

TEST(ChooseScaleShift, TiesPreferTheLargerShift) {
  // 1.0 is exact at every shift up to 14 (16384 / 2^14; 2^15 = 32768 does not fit).
  auto q = choose_scale_shift(1.0, "t");
  EXPECT_EQ(q.scale, 16384);
  EXPECT_EQ(q.shift, 14);
  // 300 * 2^6 = 19200; 2^7 would need 38400.
  q = choose_scale_shift(300.0, "t");
  EXPECT_EQ(q.scale, 19200);
  EXPECT_EQ(q.shift, 6);
}

TEST(ChooseScaleShift, RejectsWhatTheFieldsCannotHold) {
  EXPECT_THROW(choose_scale_shift(40000.0, "layer 'c'"), Error);
  EXPECT_THROW(choose_scale_shift(1e-12, "layer 'c'"), Error);
  EXPECT_THROW(choose_scale_shift(0.0, "layer 'c'"), Error);
  EXPECT_THROW(choose_scale_shift(-0.5, "layer 'c'"), Error);
  try {
    choose_scale_shift(1e-12, "layer 'conv7'");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("conv7"), std::string::npos);
  }
}

TEST(ConvOut, FloorDivisionAsTheRtl) {
  EXPECT_EQ(conv_out(7, 0, 0, 2, 2), 3);  // gati.md 3.2: 7x7, 2x2 stride 2 -> 3x3
  EXPECT_EQ(conv_out(6, 1, 1, 3, 1), 6);
  EXPECT_EQ(conv_out(5, 0, 1, 3, 2), 2);
}

}  // namespace
}  // namespace npukit::compiler
