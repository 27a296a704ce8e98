// Hand-worked examples for the Gati-exact kernels. Every expected value is worked out in the
// comment beside it from the arithmetic in gati.md 7 / DECISIONS.md 4-8 / docs/ref-ops.md.
#include "ref/gati_kernels.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "ir/tensor_util.h"
#include "ref/gati_tanh.h"

namespace npukit::ref::gati {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

ir::Tensor i8(const ir::Shape& shape, std::vector<std::int8_t> v) {
  return ir::make_tensor<std::int8_t>(shape, v);
}
ir::Tensor i32(const ir::Shape& shape, std::vector<std::int32_t> v) {
  return ir::make_tensor<std::int32_t>(shape, v);
}
std::vector<std::int8_t> values(const ir::Tensor& t) { return ir::to_vector<std::int8_t>(t); }

TEST(GatiQuantizer, RoundsHalfUpWithArithmeticShift) {
  EXPECT_EQ(quantize(100, 5, 3), 63);    // (500 + 4) >> 3 = 63
  EXPECT_EQ(quantize(-100, 5, 3), -62);  // (-500 + 4) >> 3 = -496 / 8 = -62
  EXPECT_EQ(quantize(-101, 5, 3), -63);  // (-505 + 4) >> 3 = floor(-62.625)
  EXPECT_EQ(quantize(12, 1, 3), 2);      // 1.5 -> 2 (half up)
  EXPECT_EQ(quantize(-12, 1, 3), -1);    // -1.5 -> -1 (half up, toward +inf)
  EXPECT_EQ(quantize(10, -3, 1), -15);   // signed scale: (-30 + 1) >> 1 = floor(-14.5)
}

TEST(GatiQuantizer, ShiftZeroPassesProductAndClampsToInt8) {
  EXPECT_EQ(quantize(77, 2, 0), 127);     // 154 saturates
  EXPECT_EQ(quantize(-200, 1, 0), -128);  // -128 is allowed (not -127)
  EXPECT_EQ(quantize(-64, 2, 0), -128);
}

TEST(GatiQuantizer, ProductIsSixtyFourBit) {
  // (2^31 - 1) * 32767 = 70366596661249 needs 47 bits; / 2^30 = 65533.99..., + 0.5 -> 65534.
  EXPECT_EQ(round_shift(2147483647LL * 32767, 30), 65534);
  EXPECT_EQ(quantize(2147483647LL, 32767, 30), 127);
  EXPECT_EQ(quantize(-2147483648LL, 32767, 30), -128);
}

TEST(GatiQuantizer, EltwiseFpCastIsASecondRoundingShift) {
  // (5000 * 3 + 2) >> 2 = 3750; (3750 + 512) >> 10 = 4
  EXPECT_EQ(quantize(5000, 3, 2, 10), 4);
  // fp_cast 16: (98304 + 32768) >> 16 = 2 (1.5 -> 2)
  EXPECT_EQ(quantize(98304, 1, 0, 16), 2);
}

TEST(GatiActivation, ReluClipLeaky) {
  Tail relu;
  relu.act = Act::kRelu;
  EXPECT_EQ(activate(-5, relu), 0);
  EXPECT_EQ(activate(5, relu), 5);
  Tail clip;
  clip.act = Act::kClip;
  clip.act_param = 6;
  EXPECT_EQ(activate(-3, clip), 0);
  EXPECT_EQ(activate(4, clip), 4);
  EXPECT_EQ(activate(6, clip), 6);
  EXPECT_EQ(activate(7, clip), 6);
  EXPECT_EQ(activate(127, clip), 6);
  clip.act_param = 200;  // unsigned compare: no int8 value exceeds 200
  EXPECT_EQ(activate(127, clip), 127);
  EXPECT_EQ(activate(-1, clip), 0);
  Tail leaky;
  leaky.act = Act::kLeaky;
  leaky.neg_alpha = 26;  // ~0.1 in Q8
  leaky.pos_alpha = 256;
  EXPECT_EQ(activate(-100, leaky), -11);  // -2600 >> 8 = floor(-10.16)
  EXPECT_EQ(activate(-1, leaky), -1);     // -26 >> 8 = floor(-0.10)
  EXPECT_EQ(activate(50, leaky), 50);
  leaky.pos_alpha = 512;
  EXPECT_EQ(activate(100, leaky), 127);  // 200 saturates
  EXPECT_EQ(activate(30, leaky), 60);
}

// x: 2 channels 3x3; w: 1 kernel 2x2; stride 2; pads top 1, left 0, bottom 0, right 1.
struct ConvExample {
  ir::Tensor x = i8({1, 2, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9,    // channel 0
                                   0, 1, 0, 1, 0, 1, 0, 1, 0});  // channel 1
  ir::Tensor w = i8({1, 2, 2, 2}, {1, 2, 3, 4, 10, -10, 5, 5});
  ir::Tensor bias = i32({1}, {-20});
  ConvParams params() const {
    ConvParams p;
    p.stride_h = p.stride_w = 2;
    p.pad_top = 1;
    p.pad_right = 1;
    p.tail.quant_scale = 3;
    p.tail.quant_shift = 2;
    return p;
  }
};

TEST(GatiConv, StridedAsymmetricPaddingHandWorked) {
  ConvExample ex;
  // OH = (3+1+0-2)/2+1 = 2, OW = (3+0+1-2)/2+1 = 2. Input rows oy*2-1+i, cols ox*2+j.
  // (0,0): ch0 row0: 3*1 + 4*2 = 11; ch1 row0: 5*0 + 5*1 = 5          -> 16
  // (0,1): ch0 row0: 3*3 (col 3 is padding) = 9; ch1: 5*0 = 0         -> 9
  // (1,0): ch0 1*4+2*5 + 3*7+4*8 = 67; ch1 10*1-10*0 + 5*0+5*1 = 15   -> 82
  // (1,1): ch0 1*6 + 3*9 = 33; ch1 10*1 + 5*0 = 10                    -> 43
  ConvParams p = ex.params();
  p.tail.quant_en = false;
  auto raw = conv(ex.x, ex.w, nullptr, nullptr, p);
  EXPECT_EQ(raw.dtype, ir::DType::kInt32);
  EXPECT_EQ(raw.shape, (ir::Shape{1, 1, 2, 2}));
  EXPECT_THAT(ir::to_vector<std::int32_t>(raw), ElementsAre(16, 9, 82, 43));
  // + bias -20: -4, -11, 62, 23; * 3 then (v + 2) >> 2: -10>>2=-3, -31>>2=-8, 188>>2=47, 71>>2=17
  auto q = conv(ex.x, ex.w, &ex.bias, nullptr, ex.params());
  EXPECT_THAT(values(q), ElementsAre(-3, -8, 47, 17));
  p = ex.params();
  p.tail.act = Act::kRelu;  // ReLU after the quantizer
  EXPECT_THAT(values(conv(ex.x, ex.w, &ex.bias, nullptr, p)), ElementsAre(0, 0, 47, 17));
}

// Kernel-split pieces (docs/compiler.md): a negative top/bottom pad skips input rows. A piece
// with pads (-1, 0, -1, 0) on a 4-row image equals the same conv on rows 1..2 without padding.
TEST(GatiConv, NegativeTopBottomPadsSkipInputRows) {
  auto x = i8({1, 1, 4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto w = i8({1, 1, 1, 2}, {1, 10});
  ConvParams p;
  p.pad_top = -1;
  p.pad_bottom = -1;
  p.tail.quant_en = false;
  auto raw = conv(x, w, nullptr, nullptr, p);
  EXPECT_EQ(raw.shape, (ir::Shape{1, 1, 2, 1}));
  // rows 1 and 2: 3 + 40 = 43, 5 + 60 = 65
  EXPECT_THAT(ir::to_vector<std::int32_t>(raw), ElementsAre(43, 65));

  ir::Node n;
  n.name = "piece";
  n.op_type = "GatiConv";
  n.attributes["pads"] = std::vector<std::int64_t>{-2, 0, -15, 1};
  EXPECT_EQ(conv_params(n).pad_bottom, -15);
  n.attributes["pads"] = std::vector<std::int64_t>{0, -1, 0, 0};
  EXPECT_THROW(conv_params(n), Error);  // columns cannot be skipped
  // Pools have no row skips: their pads stay 3-bit fields.
  ir::Node pool;
  pool.name = "pool";
  pool.op_type = "GatiPool";
  pool.attributes["mode"] = std::string("max");
  pool.attributes["kernel_shape"] = std::vector<std::int64_t>{2, 2};
  pool.attributes["pads"] = std::vector<std::int64_t>{-1, 0, 0, 0};
  EXPECT_THROW(pool_params(pool), Error);
}

TEST(GatiConv, AccumulantIsAddedBeforeQuantization) {
  ConvExample ex;
  auto acc = i32({1, 1, 2, 2}, {4, 0, -2, 1});
  // acc + bias: 0, -11, 60, 24; *3: 0, -33, 180, 72; (+2)>>2: 0, -8, 45, 18
  EXPECT_THAT(values(conv(ex.x, ex.w, &ex.bias, &acc, ex.params())), ElementsAre(0, -8, 45, 18));
  auto wrong = i32({1, 1, 2, 3}, {0, 0, 0, 0, 0, 0});
  EXPECT_THROW(conv(ex.x, ex.w, &ex.bias, &wrong, ex.params()), Error);
}

TEST(GatiConv, DepthwiseKeepsChannelsApart) {
  auto x = i8({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto w = i8({2, 1, 1, 1}, {2, -3});
  ConvParams p;
  p.group = 2;
  EXPECT_THAT(values(conv(x, w, nullptr, nullptr, p)), ElementsAre(2, 4, 6, 8, -15, -18, -21, -24));
}

TEST(GatiConv, GroupedConvUsesItsOwnChannelSlice) {
  // 4 input channels, 2 groups, 2 kernels per group, 1x1 kernels on a 1x1 image.
  auto x = i8({1, 4, 1, 1}, {1, 2, 3, 4});
  auto w = i8({4, 2, 1, 1}, {1, 1, 1, -1, 1, 1, 1, -1});
  ConvParams p;
  p.group = 2;
  // group 0 (x 1,2): 1+2 = 3, 1-2 = -1; group 1 (x 3,4): 7, -1
  EXPECT_THAT(values(conv(x, w, nullptr, nullptr, p)), ElementsAre(3, -1, 7, -1));
}

TEST(GatiConv, GlobalPoolAfterActivation) {
  auto x = i8({1, 1, 2, 2}, {10, 20, 30, -5});
  auto w = i8({1, 1, 1, 1}, {1});
  ConvParams p;
  p.tail.act = Act::kRelu;
  p.tail.global_pool = true;
  p.tail.global_pool_scale = 1;
  p.tail.global_pool_shift = 2;
  // ReLU: 10, 20, 30, 0; sum 60; (60 * 1 + 2) >> 2 = 15
  auto y = conv(x, w, nullptr, nullptr, p);
  EXPECT_EQ(y.shape, (ir::Shape{1, 1, 1, 1}));
  EXPECT_THAT(values(y), ElementsAre(15));
}

TEST(GatiConv, BadShapesAreErrors) {
  auto x = i8({1, 3, 2, 2}, std::vector<std::int8_t>(12, 0));
  auto w = i8({1, 2, 1, 1}, {1, 1});
  EXPECT_THAT([&] { conv(x, w, nullptr, nullptr, ConvParams{}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("group 1")));
  auto big = i8({1, 3, 3, 3}, std::vector<std::int8_t>(27, 0));
  EXPECT_THROW(conv(i8({1, 3, 1, 1}, {0, 0, 0}), big, nullptr, nullptr, ConvParams{}), Error);
}

TEST(GatiFC, FlattensAndAddsBias) {
  auto x = i8({1, 3}, {1, -2, 3});
  auto w = i8({2, 3}, {1, 1, 1, 2, 0, -1});
  auto b = i32({2}, {5, -5});
  // 1-2+3+5 = 7; 2-3-5 = -6
  EXPECT_THAT(values(fully_connected(x, w, &b, Tail{})), ElementsAre(7, -6));
  auto x4 = i8({1, 3, 1, 1}, {1, -2, 3});
  auto y = fully_connected(x4, w, &b, Tail{});
  EXPECT_EQ(y.shape, (ir::Shape{1, 2}));
  EXPECT_THAT(values(y), ElementsAre(7, -6));
}

TEST(GatiPool, MaxIgnoresPaddingAndStartsAtMinus128) {
  auto x = i8({1, 1, 3, 3}, {-10, -20, -30, -40, -50, -60, -70, -80, -90});
  PoolParams p;
  p.kernel_h = p.kernel_w = 2;
  p.stride_h = p.stride_w = 2;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
  // (0,0) sees only -10; (0,1) -20,-30; (1,0) -40,-70; (1,1) -50,-60,-80,-90. Padding never wins.
  EXPECT_THAT(values(pool(x, p)), ElementsAre(-10, -20, -40, -50));
  auto all_min = i8({1, 1, 1, 1}, {-128});
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 0;
  p.kernel_h = p.kernel_w = 1;
  EXPECT_THAT(values(pool(all_min, p)), ElementsAre(-128));
}

TEST(GatiPool, CeilModeAddsTheOverhangingWindow) {
  auto x = i8({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  PoolParams p;
  p.kernel_h = p.kernel_w = 2;
  p.stride_h = p.stride_w = 2;
  EXPECT_THAT(values(pool(x, p)), ElementsAre(5));  // floor: one window
  p.ceil_mode = true;
  EXPECT_EQ(pool(x, p).shape, (ir::Shape{1, 1, 2, 2}));
  EXPECT_THAT(values(pool(x, p)), ElementsAre(5, 6, 8, 9));
  // Average with scale 64 / 2^8 = 1/4: sums 12, 9 (3+6; the overhang adds 0), 15, 9
  // (12*64+128)>>8 = 3, (9*64+128)>>8 = 2, (15*64+128)>>8 = 4, 2
  p.mode = PoolMode::kAverage;
  p.scale = 64;
  p.shift = 8;
  EXPECT_THAT(values(pool(x, p)), ElementsAre(3, 2, 4, 2));
}

TEST(GatiPool, CeilWindowStartingInPaddingIsDropped) {
  // 4 wide, kernel 2, stride 2, pad right 1: (4+1-2)/2 = 1.5 -> ceil 2 -> 3 windows; the third
  // starts at 4 = in + pad_begin, entirely in padding, so it is dropped.
  EXPECT_EQ(pool_output_size(4, 2, 2, 0, 1, true), 2);
  EXPECT_EQ(pool_output_size(5, 2, 2, 0, 0, true), 3);  // starts at 4 < 5: kept
  EXPECT_EQ(pool_output_size(5, 2, 2, 0, 0, false), 2);
}

TEST(GatiPool, AverageCountsPaddingAsZero) {
  auto x = i8({1, 1, 2, 2}, {4, 8, 12, 16});
  PoolParams p;
  p.mode = PoolMode::kAverage;
  p.kernel_h = p.kernel_w = 2;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
  p.scale = 1;
  p.shift = 2;
  // window sums 4,12,8 / 16,40,24 / 12,28,16; (s + 2) >> 2
  EXPECT_THAT(values(pool(x, p)), ElementsAre(1, 3, 2, 4, 10, 6, 3, 7, 4));
}

TEST(GatiPool, GlobalAverage) {
  auto x = i8({1, 2, 2, 2}, {1, 2, 3, 4, -1, -2, -3, -5});
  PoolParams p;
  p.mode = PoolMode::kGlobalAverage;
  p.scale = 1;
  p.shift = 2;
  // (10 + 2) >> 2 = 3; (-11 + 2) >> 2 = floor(-2.25) = -3
  auto y = pool(x, p);
  EXPECT_EQ(y.shape, (ir::Shape{1, 2, 1, 1}));
  EXPECT_THAT(values(y), ElementsAre(3, -3));
}

EltwiseParams elt(EltOp op, int a_scale, int b_scale) {
  EltwiseParams p;
  p.op = op;
  p.a_scale = a_scale;
  p.b_scale = b_scale;
  return p;
}

TEST(GatiEltwise, AddSubInQ10) {
  auto a = i8({2}, {10, -20});
  auto b = i8({2}, {3, 4});
  // L = 10240, -20480; R = 1536, 2048 (b_scale 0.5)
  // add: 11776 -> (11776+512)>>10 = 12; -18432 -> floor(-17.5) = -18
  EXPECT_THAT(values(eltwise(a, &b, elt(EltOp::kAdd, 1024, 512))), ElementsAre(12, -18));
  // sub: 8704 -> 9; -22528 -> floor(-21.5) = -22
  EXPECT_THAT(values(eltwise(a, &b, elt(EltOp::kSub, 1024, 512))), ElementsAre(9, -22));
  // quantizer scale 3 shift 1 on 11776: (35328+1)>>1 = 17664; (17664+512)>>10 = 17
  auto p = elt(EltOp::kAdd, 1024, 512);
  p.tail.quant_scale = 3;
  p.tail.quant_shift = 1;
  EXPECT_THAT(values(eltwise(a, &b, p)),
              ElementsAre(17, -27));  // -18432*3 = -55296 -> -27648 -> (-27136)>>10 = floor(-26.5)
}

TEST(GatiEltwise, ZeroPointsAndConcatRequant) {
  auto a = i8({1}, {10});
  auto b = i8({1}, {0});
  auto p = elt(EltOp::kAdd, 1024, 1024);
  p.a_zero_point = 2;
  p.b_zero_point = -3;
  // (10-2)*1024 + (0+3)*1024 = 11264 -> (11264+512)>>10 = 11
  EXPECT_THAT(values(eltwise(a, &b, p)), ElementsAre(11));
  // Requantization as QLinearConcat lowers it: b_scale 0, a scaled by 0.75 (768)
  auto x = i8({3}, {100, -100, 3});
  auto zeros = i8({3}, {0, 0, 0});
  // 76800 -> 75; -76800 -> (-76800+512)>>10 = floor(-74.5) = -75; 2304 -> (2816)>>10 = 2
  EXPECT_THAT(values(eltwise(x, &zeros, elt(EltOp::kAdd, 768, 0))), ElementsAre(75, -75, 2));
}

TEST(GatiEltwise, MultRoundsTheProductThenTheQuantizer) {
  auto a = i8({2}, {10, -3});
  auto b = i8({2}, {4, 5});
  // L = 10240, -3072; R = 1024, 1280 (b_scale 0.25)
  // 10240*1024 = 10485760 -> rshift 10 = 10240 -> fp_cast: (10240+512)>>10 = 10
  // -3072*1280 = -3932160 -> floor(-3839.5) = -3840 -> (-3840+512)>>10 = floor(-3.25) = -4
  EXPECT_THAT(values(eltwise(a, &b, elt(EltOp::kMult, 1024, 256))), ElementsAre(10, -4));
}

TEST(GatiEltwise, ShapesMustMatch) {
  auto a = i8({2}, {1, 2});
  auto b = i8({1}, {1});
  EXPECT_THROW(eltwise(a, &b, elt(EltOp::kAdd, 1, 1)), Error);
}

TEST(GatiTanh, SegmentIndexFollowsTheRtlShiftAdd) {
  EXPECT_EQ(tanh_segment(0), 0);
  EXPECT_EQ(tanh_segment(896), 0);  // seg 1792: 57344+7168+896+112 = 65520 < 65536
  EXPECT_EQ(tanh_segment(897), 1);  // seg 1793: 65556
  EXPECT_EQ(tanh_segment(65536), 37);
  EXPECT_EQ(tanh_segment(229376), 128);
  // The (seg >> 4) truncation: an exact seg * 36.5625 would give 25 here.
  EXPECT_EQ(tanh_segment(43915), 24);
}

TEST(GatiTanh, TablesAreTheSpecTables) {
  EXPECT_EQ(tanh_points()[1], 0x700);
  EXPECT_EQ(tanh_points()[128], 0x38000);
  EXPECT_EQ(tanh_values()[2], 0xDFC);
  EXPECT_EQ(tanh_values()[3], 0x14F4);
  EXPECT_EQ(tanh_values()[128], 0xFF89);
  EXPECT_EQ(tanh_slopes()[0], 0x10000);
  EXPECT_EQ(tanh_slopes()[1], 0xFF6D);
  EXPECT_EQ(tanh_slopes()[128], 0x100);
}

TEST(GatiTanh, InterpolatesFromTheNearestPoint) {
  // x = 1.0: idx 37, point 66304, tanh 50232, slope 26441:
  // 50232 + ((65536-66304)*26441 >> 16) = 50232 + floor(-309.85) = 49922 (tanh(1) = 0.76159)
  EXPECT_EQ(tanh_q16(65536), 49922);
  EXPECT_EQ(tanh_q16(-65536), -49922);
  // idx 0: the 16-bit slope register reads 0x10000 as 0, so tanh stays 0 (docs/decisions.md D1).
  EXPECT_EQ(tanh_q16(500), 0);
  // x = 2.0: idx 73, point 130816, tanh 63160, slope 4571: 63160 + (256*4571 >> 16) = 63177
  EXPECT_EQ(tanh_q16(131072), 63177);
  // Clamped at 3.5: tanh[128] = 65417 for everything beyond.
  EXPECT_EQ(tanh_q16(229376), 65417);
  EXPECT_EQ(tanh_q16(1 << 24), 65417);
  EXPECT_EQ(tanh_q16(-(1 << 24)), -65417);
  // 229000: idx 128, (-376*256) >> 16 = floor(-1.47) = -2
  EXPECT_EQ(tanh_q16(229000), 65415);
}

TEST(GatiTanh, SigmoidIsHalfTanhOfHalf) {
  EXPECT_EQ(sigmoid_q16(0), 32767);       // (0 + 65535) >> 1
  EXPECT_EQ(sigmoid_q16(131072), 57728);  // (49922 + 65535) >> 1 = 115457 >> 1
  EXPECT_EQ(sigmoid_q16(-131072), 7806);  // (-49922 + 65535) >> 1 = 15613 >> 1
  EXPECT_EQ(sigmoid_q16(-1), 32767);      // -1 >> 1 = -1; tanh(-1) = -1; 65534 >> 1
}

TEST(GatiEltwise, TanhAndSigmoidThroughTheQuantizer) {
  auto a = i8({2}, {64, -64});
  // a_scale 1024: L = 65536 (1.0 in Q16); quantizer 127 / 2^0 (s_out = 1/127), fp_cast 16:
  // (49922*127 + 32768) >> 16 = 6372862 >> 16 = 97; (-6340094 + 32768) >> 16 = floor(-96.2) = -97
  auto p = elt(EltOp::kTanh, 1024, 0);
  p.tail.quant_scale = 127;
  EXPECT_THAT(values(eltwise(a, nullptr, p)), ElementsAre(97, -97));
  // sigmoid with a_scale 2048: L = 131072 -> 57728; (57728*127 + 32768) >> 16 = 112
  // L = -131072 -> 7806; (7806*127 + 32768) >> 16 = 1024130 >> 16 = 15
  p = elt(EltOp::kSigmoid, 2048, 0);
  p.tail.quant_scale = 127;
  EXPECT_THAT(values(eltwise(a, nullptr, p)), ElementsAre(112, 15));
}

TEST(GatiDataMovement, ResizeConcatTranspose) {
  auto x = i8({1, 1, 1, 2}, {1, 2});
  auto up = resize2x(x);
  EXPECT_EQ(up.shape, (ir::Shape{1, 1, 2, 4}));
  EXPECT_THAT(values(up), ElementsAre(1, 1, 2, 2, 1, 1, 2, 2));

  auto a = i8({2, 1, 1, 2}, {1, 2, 3, 4});                 // batch 2, 1 channel
  auto b = i8({2, 2, 1, 2}, {5, 6, 7, 8, 9, 10, 11, 12});  // batch 2, 2 channels
  auto cat = concat_channels({&a, &b});
  EXPECT_EQ(cat.shape, (ir::Shape{2, 3, 1, 2}));
  EXPECT_THAT(values(cat), ElementsAre(1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12));
  auto odd = i8({2, 1, 2, 1}, {0, 0, 0, 0});
  EXPECT_THROW(concat_channels({&a, &odd}), Error);

  auto chw = i8({1, 2, 1, 2}, {1, 2, 3, 4});  // channel 0: 1 2, channel 1: 3 4
  auto hwc = transpose_chw_to_hwc(chw);
  EXPECT_EQ(hwc.shape, (ir::Shape{1, 1, 2, 2}));
  EXPECT_THAT(values(hwc), ElementsAre(1, 3, 2, 4));
}

TEST(GatiNms, ExactIntegerIouAndOnnxSelection) {
  // Corner boxes (y1, x1, y2, x2): b0 0,0,10,10; b1 0,1,10,11 (IoU 90/110); b2 20,20,30,30;
  // b3 0,0,10,5 (IoU with b0 exactly 50/100).
  auto boxes = i8({1, 4, 4}, {0, 0, 10, 10, 0, 1, 10, 11, 20, 20, 30, 30, 0, 0, 10, 5});
  auto scores = i8({1, 2, 4}, {9, 8, 7, 6,    // class 0
                               1, 5, 5, 2});  // class 1
  NmsParams p;
  p.iou_threshold = 1;  // 0.5
  p.iou_shift = 1;
  p.max_output_boxes_per_class = 10;
  p.score_threshold = 1;  // strictly greater: class 1 box 0 (score 1) is out
  // class 0: 0 kept, 1 suppressed (0.82 > 0.5), 2 kept, 3 kept (0.5 is not > 0.5)
  // class 1: scores 5 (box 1), 5 (box 2, tie: lower index first), 2 (box 3): 1, 2 kept; 3 vs 1:
  //   b3 x 0..5, b1 x 1..11: inter 10*4 = 40, union 50 + 100 - 40 = 110 -> kept
  auto y = nms(boxes, scores, p);
  EXPECT_EQ(y.shape, (ir::Shape{6, 3}));
  EXPECT_THAT(ir::to_vector<std::int64_t>(y),
              ElementsAreArray({0, 0, 0, 0, 0, 2, 0, 0, 3, 0, 1, 1, 0, 1, 2, 0, 1, 3}));
  p.iou_threshold = 7;  // 0.4375: now b3 (IoU 0.5) is suppressed in class 0
  p.iou_shift = 4;
  p.max_output_boxes_per_class = 1;
  EXPECT_THAT(ir::to_vector<std::int64_t>(nms(boxes, scores, p)), ElementsAre(0, 0, 0, 0, 1, 1));
}

TEST(GatiNms, CenterFormatMatchesCorners) {
  // (cx, cy, w, h) = (5, 5, 10, 10) is corners 0..10; (6, 5, 10, 10) is x 1..11.
  auto boxes = i8({1, 2, 4}, {5, 5, 10, 10, 6, 5, 10, 10});
  auto scores = i8({1, 1, 2}, {3, 4});
  NmsParams p;
  p.center_point_box = true;
  p.iou_threshold = 1;
  p.iou_shift = 1;
  p.max_output_boxes_per_class = 5;
  EXPECT_THAT(ir::to_vector<std::int64_t>(nms(boxes, scores, p)), ElementsAre(0, 0, 1));
}

TEST(GatiParams, AttributesAreRangeChecked) {
  ir::Node n;
  n.name = "c1";
  n.op_type = "GatiConv";
  n.attributes["quant_scale"] = std::int64_t{40000};
  EXPECT_THAT(
      [&] { conv_params(n); },
      ::testing::ThrowsMessage<Error>(HasSubstr("quant_scale = 40000 is outside [-32768, 32767]")));
  n.attributes["quant_scale"] = std::int64_t{100};
  n.attributes["act"] = std::string("gelu");
  EXPECT_THAT([&] { conv_params(n); }, ::testing::ThrowsMessage<Error>(HasSubstr("gelu")));
  n.attributes["act"] = std::string("clip");
  n.attributes["act_param"] = std::int64_t{6};
  n.attributes["pads"] = std::vector<std::int64_t>{0, 1, 2, 3};
  n.attributes["strides"] = std::vector<std::int64_t>{2, 2};
  auto p = conv_params(n);
  EXPECT_EQ(p.pad_left, 1);
  EXPECT_EQ(p.pad_bottom, 2);
  EXPECT_EQ(p.tail.act, Act::kClip);
  n.attributes["pads"] = std::vector<std::int64_t>{0, 8, 0, 0};
  EXPECT_THROW(conv_params(n), Error);
  ir::Node e;
  e.name = "e";
  e.op_type = "GatiEltwise";
  e.attributes["op"] = std::string("add");
  e.attributes["a_scale"] = std::int64_t{1 << 17};
  EXPECT_THROW(eltwise_params(e), Error);
  e.attributes["a_scale"] = std::int64_t{-(1 << 17)};
  EXPECT_EQ(eltwise_params(e).a_scale, -131072);
}

}  // namespace
}  // namespace npukit::ref::gati
