// lower_concat: a concat's inputs are written in place by their producers where the layout
// allows (whole N_SA groups, only reader) and copied by chained 1x1 copy convs otherwise; either
// gives the GatiConcat's bytes (the reference runs both), with any number of inputs (densenet),
// channel counts that are not multiples of N_SA, non-square images, and layers after it; the
// device runs it without erratum.
#include "compiler/errata_test_support.h"

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;
using testing::random_int8;

// n convs of the input (channels[i] kernels each) -> concat (-> conv when `then_conv`; the concat
// stays a model output too when `cat_is_output`).
ir::Graph concat_model(const std::vector<std::int64_t>& channels, std::int64_t h, std::int64_t w,
                       bool then_conv, bool same_scales = true, bool cat_is_output = false) {
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
    if (cat_is_output) b.g.outputs.push_back("cat");
  }
  return b.g;
}

// The copy convs lower_concat made.
std::size_t copy_convs(const CompileResult& r) {
  std::size_t n = 0;
  for (const auto& node : r.ctx.graph.nodes)
    n += node.op_type == "GatiConv" &&
         r.ctx.placement.at(node.name).reason.find("by lower_concat") != std::string::npos;
  return n;
}

TEST(LowerConcat, TwoInputsFollowedByAConvAreWrittenInPlace) {
  // Both inputs are whole N_SA groups made by convs that nothing else reads: each conv writes its
  // slice of the concat's output, no copy layer at all.
  for (const auto& arch : {isa::kArch9x8x8, isa::kArch9x4x4}) {
    const CompileResult r =
        testing::expect_rewrite_exact(concat_model({8, 8}, 6, 6, true), arch, 5);
    EXPECT_EQ(testing::count_op(r.ctx, "GatiConcat"), 0u);
    EXPECT_EQ(testing::count_op(r.ctx, "Concat"), 1u);  // the view
    EXPECT_EQ(copy_convs(r), 0u);
    EXPECT_EQ(r.program.layers.size(), 3u);
    for (const auto& l : r.program.layers) EXPECT_NE(l.opcode, isa::Opcode::CONCAT);
    ASSERT_EQ(errata_rewrites(r.ctx).size(), 1u);
    EXPECT_NE(errata_rewrites(r.ctx)[0].how.find("2 written in place"), std::string::npos)
        << errata_rewrites(r.ctx)[0].how;
    EXPECT_NE(explain_errata(r, {}).find("0 device layer(s)"), std::string::npos)
        << explain_errata(r, {});
    // The two convs write at the concat's address and 8 channel groups' bytes further on.
    const DeviceTensor& cat = r.program.tensors.at("cat");
    EXPECT_EQ(r.program.tensors.at("c0_out").address, cat.address);
    EXPECT_EQ(r.program.tensors.at("c1_out").address,
              cat.address + isa::activation_bytes(8, 6, 6, arch));
  }
}

TEST(LowerConcat, FittingInputsInPlaceTheRestCopied) {
  // Offsets 0, 8, 20, 24: the first and last inputs are whole groups at group offsets and go in
  // place; the 12- and 4-channel inputs (9,8,8: not whole groups / offset 20; 9,4,4: odd
  // KernelItr) are copied by two chained copy convs into a view of channels 8..23.
  for (const auto& arch : {isa::kArch9x8x8, isa::kArch9x4x4}) {
    const CompileResult r =
        testing::expect_rewrite_exact(concat_model({8, 12, 4, 8}, 6, 6, true), arch, 21);
    EXPECT_EQ(testing::count_op(r.ctx, "GatiConcat"), 0u);
    EXPECT_EQ(copy_convs(r), 2u) << arch.str();
    EXPECT_EQ(r.program.layers.size(), 7u) << arch.str();
    const std::string how = errata_rewrites(r.ctx).at(0).how;
    EXPECT_NE(how.find("2 written in place by their producers, 2 copied"), std::string::npos)
        << how;
  }
}

TEST(LowerConcat, OddCopyRunOn9x4x4CopiesTheNextInputToo) {
  // {8, 4, 8} on 9,4,4: the 4-channel input (KernelItr 1) is copied; its copy would have an odd
  // KernelItr and get padding kernels (pad_kernel_iterations) over the next slice, so the third
  // input is copied too, and that run of 12 channels (odd KernelItr 3) is padded past the end of
  // the concat, into bytes its buffer reserves. On 9,8,8 the 4-channel input is not whole groups
  // and the third one's offset (12) is not a group offset: the same two copies.
  for (const auto& arch : {isa::kArch9x8x8, isa::kArch9x4x4}) {
    const CompileResult r =
        testing::expect_rewrite_exact(concat_model({8, 4, 8}, 6, 6, true), arch, 23);
    EXPECT_EQ(copy_convs(r), 2u) << arch.str();
    if (arch == isa::kArch9x4x4) {
      const DeviceTensor& cat = r.program.tensors.at("cat");
      EXPECT_GT(cat.buffer_bytes(), cat.bytes);
    }
  }
}

TEST(LowerConcat, LastInputMayEndInAPartialGroup) {
  // 8 + 8 + 5 channels: the last slice's padding channels are the concat's own.
  for (const auto& arch : {isa::kArch9x8x8, isa::kArch9x4x4}) {
    const CompileResult r =
        testing::expect_rewrite_exact(concat_model({8, 8, 5}, 5, 7, true), arch, 25);
    EXPECT_EQ(copy_convs(r), 0u) << arch.str();
  }
}

TEST(LowerConcat, TallImagesRunSidewaysWithTheView) {
  // 12 high, 8 wide: the 3x3 convs would hang v1.0.0, so the device part runs transposed
  // (transpose_tall_images, the host transposing its input and output), the in-place concat view
  // with it; the lowered graph still means what the --allow-errata one does.
  const ir::Graph model = concat_model({8, 8}, 12, 8, true);
  CompileOptions opt, errata;
  errata.allow_errata = true;
  const auto inputs = testing::seeded_inputs(model, 27);
  const auto fixed = testing::run_lowered(model, opt, inputs);
  const auto old = testing::run_lowered(model, errata, inputs);
  for (const auto& out : model.outputs) EXPECT_EQ(fixed.at(out).data, old.at(out).data);
  const Context ctx = lower(model, opt);
  EXPECT_EQ(testing::count_op(ctx, "Concat"), 1u);
  EXPECT_EQ(testing::count_op(ctx, "Transpose"), 2u);
  EXPECT_EQ(ctx.graph.tensor("cat").shape, (ir::Shape{1, 16, 8, 12}));
}

TEST(LowerConcat, AConcatThatLeavesTheDeviceIsCopied) {
  // The concat's output is a model output: no layer would write it as a whole, so it is copied.
  for (const auto& arch : {isa::kArch9x8x8, isa::kArch9x4x4}) {
    const CompileResult r =
        testing::expect_rewrite_exact(concat_model({8, 8}, 6, 6, true, true, true), arch, 29);
    EXPECT_EQ(copy_convs(r), 2u);
    EXPECT_EQ(testing::count_op(r.ctx, "Concat"), 0u);
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
  // channels) and one EltWise add of their disjoint channels, exact (the concat is a model output
  // too, so nothing goes in place).
  const CompileResult r = testing::expect_rewrite_exact(
      concat_model({16, 12, 4}, 36, 36, true, true, true), isa::kArch9x8x8, 11);
  EXPECT_EQ(testing::count_op(r.ctx, "GatiConcat"), 0u);
  EXPECT_EQ(testing::count_op(r.ctx, "GatiEltwise"), 1u);
  EXPECT_EQ(errata_rewrites(r.ctx).at(0).layers.size(), 4u);
}

TEST(LowerConcat, InputsWithOtherScalesAreRequantizedFirst) {
  // fuse_tail folded each requantizing EltWise into its conv's tail before lower_concat: the
  // convs write the concat's scale in place.
  const CompileResult r =
      testing::expect_rewrite_exact(concat_model({8, 8}, 6, 6, true, false), isa::kArch9x8x8, 15);
  EXPECT_EQ(testing::count_op(r.ctx, "GatiConcat"), 0u);
  EXPECT_EQ(copy_convs(r), 0u);
  // Copied (the concat is a model output too): the same bytes.
  const CompileResult c = testing::expect_rewrite_exact(
      concat_model({8, 8}, 6, 6, true, false, true), isa::kArch9x8x8, 15);
  EXPECT_EQ(copy_convs(c), 2u);
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
