// lower_concat: a concat becomes chained 1x1 copy convs that give the GatiConcat's bytes (the
// reference runs both), with any number of inputs (densenet), channel counts that are not
// multiples of N_SA, non-square images, and layers after it; the device runs it without erratum.
#include "compiler/errata_test_support.h"

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;
using testing::random_int8;

// n convs of the input (channels[i] kernels each) -> concat (-> conv when `then_conv`).
ir::Graph concat_model(const std::vector<std::int64_t>& channels, std::int64_t h, std::int64_t w,
                       bool then_conv, bool same_scales = true) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 4, h, w});
  std::vector<std::string> in = {b.f32("ys", 0.05f), b.i8("z", 0)};
  std::int64_t total = 0;
  for (std::size_t i = 0; i < channels.size(); ++i) {
    const std::string name = "c" + std::to_string(i);
    const float sy = same_scales ? 0.05f : 0.03f + 0.01f * static_cast<float>(i);
    auto y =
        b.qconv(name, "x", 0.05f, random_int8(static_cast<std::size_t>(channels[i] * 4 * 9), 7 + i),
                {channels[i], 4, 3, 3}, 0.01f, sy, {}, {1, 1, 1, 1});
    in.insert(in.end(), {y, name + "_ys", "z"});
    total += channels[i];
  }
  b.value("cat", ir::DType::kInt8, {1, total, h, w});
  b.node("QLinearConcat", "com.microsoft", in, {"cat"}, "concat").attributes["axis"] =
      std::int64_t{1};
  b.g.outputs = {"cat"};
  if (then_conv) {
    auto y = b.qconv("after", "cat", 0.05f, random_int8(static_cast<std::size_t>(8 * total), 3),
                     {8, total, 1, 1}, 0.01f, 0.05f, {}, {0, 0, 0, 0});
    b.g.outputs = {y};
  }
  return b.g;
}

TEST(LowerConcat, TwoInputsFollowedByAConv) {
  for (const auto& arch : {isa::kArch9x8x8, isa::kArch9x4x4}) {
    const CompileResult r =
        testing::expect_rewrite_exact(concat_model({8, 8}, 6, 6, true), arch, 5);
    EXPECT_EQ(testing::count_op(r.ctx, "GatiConcat"), 0u);
    for (const auto& l : r.program.layers) EXPECT_NE(l.opcode, isa::Opcode::CONCAT);
    ASSERT_EQ(errata_rewrites(r.ctx).size(), 1u);
    EXPECT_EQ(errata_rewrites(r.ctx)[0].layers.size(), 2u);
  }
}

TEST(LowerConcat, SixInputsOddChannelsNonSquare) {
  // Densenet-like: more than CONCAT's 4 inputs, channel counts that are not whole N_SA groups and
  // a 5x7 image (H*W = 35, not a multiple of 32/N_SA). The --allow-errata lowering runs this
  // concat on the host (a plain copy, equal scales), the rewrite on the device.
  for (const auto& arch : {isa::kArch9x8x8, isa::kArch9x4x4}) {
    const CompileResult r =
        testing::expect_rewrite_exact(concat_model({3, 8, 5, 4, 12, 1}, 5, 7, false), arch, 9);
    EXPECT_EQ(testing::count_op(r.ctx, "GatiConcat"), 0u);
    EXPECT_EQ(errata_rewrites(r.ctx).at(0).layers.size(), 6u);
  }
}

TEST(LowerConcat, WideInputsOnABigImageMergeCopyChainsByEltwise) {
  // 36x36 = 1296 pixels (> 1024) with two inputs wider than N_SA = 8 (once refused: a copy that
  // reads int32 sums may not need several channel iterations there): two copy chains (16; 12 + 4
  // channels) and one EltWise add of their disjoint channels, exact.
  const CompileResult r =
      testing::expect_rewrite_exact(concat_model({16, 12, 4}, 36, 36, true), isa::kArch9x8x8, 11);
  EXPECT_EQ(testing::count_op(r.ctx, "GatiConcat"), 0u);
  EXPECT_EQ(testing::count_op(r.ctx, "GatiEltwise"), 1u);
  EXPECT_EQ(errata_rewrites(r.ctx).at(0).layers.size(), 4u);
}

TEST(LowerConcat, InputsWithOtherScalesAreRequantizedFirst) {
  const CompileResult r =
      testing::expect_rewrite_exact(concat_model({8, 8}, 6, 6, true, false), isa::kArch9x8x8, 15);
  EXPECT_EQ(testing::count_op(r.ctx, "GatiConcat"), 0u);
}

TEST(LowerConcat, AllowErrataKeepsTheConcatBlock) {
  CompileOptions opt;
  opt.allow_errata = true;
  const Context ctx = lower(concat_model({8, 8}, 8, 8, true), opt);
  EXPECT_EQ(testing::count_op(ctx, "GatiConcat"), 1u);
  EXPECT_FALSE(ctx.warnings.empty());
}

}  // namespace
}  // namespace npukit::compiler
