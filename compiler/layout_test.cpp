// Weight and bias layouts (gati.md 6.2, 14.1) against byte positions worked out by hand from the
// spec's formulas, not from the packing code.
#include "compiler/layout.h"
#include "common/bytes.h"
#include "compiler/geometry.h"
#include "compiler/test_graphs.h"

#include <gtest/gtest.h>

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;

ConvGeometry geometry(const isa::SaArch& arch, std::int64_t c, std::int64_t kn, std::int64_t k,
                      std::int64_t group, std::vector<std::int8_t> w) {
  GraphBuilder b;
  const auto x = b.input("x", ir::DType::kInt8, {1, c, 6, 6});
  const auto y = b.value("y", ir::DType::kInt8, {1, kn, 6, 6});
  b.constant<std::int8_t>("w", ir::DType::kInt8, {kn, group == 1 ? c : 1, k, k}, w);
  ir::Node& n = b.node("GatiConv", kGatiDomain, {x, "w"}, {y}, "conv");
  n.attributes["pads"] = std::vector<std::int64_t>{k / 2, k / 2, k / 2, k / 2};
  n.attributes["group"] = group;
  return conv_geometry(b.g, n, arch);
}

TEST(ConvWeights, RegularOneKernelRowsReversed) {
  // 9,4,4, KN = KC = 1, W = 1..9: kitr = citr = 1, blob 9*4*4 = 144 -> 160 bytes.
  // Entry (kern 0, chan 0, srow, schan 0, skern 0) is at ((0*9 + 8 - srow)*4 + 0)*4 + 0.
  std::vector<std::int8_t> w = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const auto geo = geometry(isa::kArch9x4x4, 1, 1, 3, 1, w);
  EXPECT_EQ(geo.kitr, 1);
  EXPECT_EQ(geo.citr, 1);
  const Bytes blob = pack_conv_weights(w, geo, isa::kArch9x4x4);
  ASSERT_EQ(blob.size(), 160u);
  Bytes expect(160, 0);
  for (int srow = 0; srow < 9; ++srow)
    expect[(8 - srow) * 16] = static_cast<std::uint8_t>(srow + 1);
  EXPECT_EQ(blob, expect);
}

TEST(ConvWeights, RegularTwoKernelIterations) {
  // 9,4,4, KN = 6, KC = 3: kitr = ceil(6/4) = 2, citr = ceil(3/4) = 1, blob 2*1*144 = 288.
  // W[k][c][r] = 10k + 3c + r (small enough for int8). Entry of kernel k = kern*4 + skern,
  // channel c = schan, tap srow at (((kern*1 + 0)*9 + 8 - srow)*4 + schan)*4 + skern.
  std::vector<std::int8_t> w(6 * 3 * 9);
  for (int k = 0; k < 6; ++k)
    for (int c = 0; c < 3; ++c)
      for (int r = 0; r < 9; ++r)
        w[(k * 3 + c) * 9 + r] = static_cast<std::int8_t>(10 * k + 3 * c + r);
  const auto geo = geometry(isa::kArch9x4x4, 3, 6, 3, 1, w);
  const Bytes blob = pack_conv_weights(w, geo, isa::kArch9x4x4);
  ASSERT_EQ(blob.size(), 288u);
  EXPECT_EQ(blob[((0 * 9 + 8 - 0) * 4 + 0) * 4 + 0], 0);           // k0 c0 r0
  EXPECT_EQ(blob[((0 * 9 + 8 - 4) * 4 + 2) * 4 + 3], 30 + 6 + 4);  // k3 c2 r4
  EXPECT_EQ(blob[((1 * 9 + 8 - 8) * 4 + 1) * 4 + 1], 50 + 3 + 8);  // k5 c1 r8
  EXPECT_EQ(blob[((1 * 9 + 8 - 0) * 4 + 3) * 4 + 0], 0);           // channel 3 does not exist
  EXPECT_EQ(blob[((1 * 9 + 8 - 0) * 4 + 0) * 4 + 2], 0);           // kernel 6 does not exist
}

TEST(ConvWeights, OneByOneFillsOnlyTheLastRow) {
  // 9,8,8, 1x1 conv, KN = 8, KC = 8: only srow 0 is non-zero, i.e. the last COLS*N_SA = 64 bytes
  // of the 576-byte block (gati.md 6.2 / 14.8); entry (schan, skern) at 8*64 + schan*8 + skern.
  std::vector<std::int8_t> w(64);
  for (int k = 0; k < 8; ++k)
    for (int c = 0; c < 8; ++c) w[k * 8 + c] = static_cast<std::int8_t>(k * 8 + c + 1);
  const auto geo = geometry(isa::kArch9x8x8, 8, 8, 1, 1, w);
  const Bytes blob = pack_conv_weights(w, geo, isa::kArch9x8x8);
  ASSERT_EQ(blob.size(), 576u);
  for (std::size_t i = 0; i < 512; ++i) ASSERT_EQ(blob[i], 0) << i;
  EXPECT_EQ(blob[512 + 3 * 8 + 5], 5 * 8 + 3 + 1);  // channel 3, kernel 5
}

TEST(ConvWeights, DepthwiseIsDiagonal) {
  // gati.md 14.1 on 9,4,4 with 6 channels: kitr = 2; channel kern*4 + j at engine j, column j.
  std::vector<std::int8_t> w(6 * 9);
  for (int c = 0; c < 6; ++c)
    for (int r = 0; r < 9; ++r) w[c * 9 + r] = static_cast<std::int8_t>(c * 9 + r + 1);
  const auto geo = geometry(isa::kArch9x4x4, 6, 6, 3, 6, w);
  EXPECT_TRUE(geo.depthwise);
  EXPECT_EQ(geo.kitr, 2);
  EXPECT_EQ(geo.citr, 1);
  const Bytes blob = pack_conv_weights(w, geo, isa::kArch9x4x4);
  ASSERT_EQ(blob.size(), 288u);
  int nonzero = 0;
  for (auto b : blob) nonzero += b != 0;
  EXPECT_EQ(nonzero, 6 * 9);
  // channel 1 (kern 0, j 1), tap 0: ((0*9 + 8)*4 + 1)*4 + 1 = 133.
  EXPECT_EQ(blob[133], 1 * 9 + 0 + 1);
  // channel 5 (kern 1, j 1), tap 7: ((1*9 + 1)*4 + 1)*4 + 1 = 165.
  EXPECT_EQ(blob[165], 5 * 9 + 7 + 1);
  // off-diagonal (engine 0, column 1) stays 0.
  EXPECT_EQ(blob[((0 * 9 + 8) * 4 + 0) * 4 + 1], 0);
}

TEST(ConvWeights, ChannelDuplicateOn16x1x16) {
  // 16,1,16 regular: (kern_dim, chan_dim) = (16, 1), citr = KC; entry of kernel k, channel c,
  // tap srow at ((c)*16 + 15 - srow)*16 + k for kern 0.
  std::vector<std::int8_t> w(2 * 3 * 9);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<std::int8_t>(i + 1);
  const auto geo = geometry(isa::kArch16x1x16, 3, 2, 3, 1, w);
  EXPECT_TRUE(geo.channel_duplicate);
  EXPECT_EQ(geo.kitr, 1);
  EXPECT_EQ(geo.citr, 3);
  const Bytes blob = pack_conv_weights(w, geo, isa::kArch16x1x16);
  ASSERT_EQ(blob.size(), 3u * 16 * 16);
  EXPECT_EQ(blob[(2 * 16 + 15 - 4) * 16 + 1], w[(1 * 3 + 2) * 9 + 4]);
  EXPECT_EQ(blob[(0 * 16 + 15 - 9) * 16 + 0], 0);  // tap 9 does not exist in a 3x3
}

TEST(ConvBias, SizesFromTheSpec) {
  // gati.md 6.2: KN = 6 on 9,4,4 gives 32 bytes; KN = 20 on 16,1,16 gives 128.
  std::vector<std::int32_t> b6 = {1, -2, 3, -4, 0x01020304, -1};
  const Bytes a = pack_conv_bias(b6, 6, isa::kArch9x4x4);
  ASSERT_EQ(a.size(), 32u);
  EXPECT_EQ(a[16], 0x01);
  EXPECT_EQ(a[17], 0x02);
  EXPECT_EQ(a[19], 0x04);
  EXPECT_EQ(a[4], 0xFF);
  EXPECT_EQ(a[7], 0xFE);  // -2 big-endian
  EXPECT_EQ(a[24], 0);
  EXPECT_EQ(pack_conv_bias(std::vector<std::int32_t>(20, 1), 20, isa::kArch16x1x16).size(), 128u);
}

TEST(FcLayouts, WeightsAndBias) {
  // M = 2 outputs, K = 3 inputs: 32 * 32 bytes; byte (block 0, input j, output o) at j*32 + o.
  std::vector<std::int8_t> w = {1, 2, 3, 4, 5, 6};  // W[0] = 1 2 3, W[1] = 4 5 6
  const Bytes wb = pack_fc_weights(w, 2, 3);
  ASSERT_EQ(wb.size(), 1024u);
  EXPECT_EQ(wb[0 * 32 + 0], 1);
  EXPECT_EQ(wb[0 * 32 + 1], 4);
  EXPECT_EQ(wb[2 * 32 + 1], 6);
  EXPECT_EQ(wb[2 * 32 + 2], 0);
  // Bias on 9,8,8 (N_SA 8, 4 per lane): position j*8 + s holds bias[s*4 + j]; position 1 holds
  // bias[4], position 8 holds bias[1].
  std::vector<std::int32_t> bias(10);
  for (int i = 0; i < 10; ++i) bias[i] = 100 + i;
  const Bytes bb = pack_fc_bias(bias, 10, isa::kArch9x8x8);
  ASSERT_EQ(bb.size(), 128u);
  EXPECT_EQ(load_be32(&bb[4 * 0]), 100u);
  EXPECT_EQ(load_be32(&bb[4 * 1]), 104u);
  EXPECT_EQ(load_be32(&bb[4 * 8]), 101u);
  EXPECT_EQ(load_be32(&bb[4 * 2]), 108u);
  EXPECT_EQ(load_be32(&bb[4 * 3]), 0u);  // bias[12] does not exist
}

}  // namespace
}  // namespace npukit::compiler
