// pools_as_convs: average and global average pools become depthwise all-ones convs that compute
// the same bytes as the GatiPool they replace (the reference runs both), run on the device
// without any erratum, and --allow-errata keeps the POOL megablock.
#include "compiler/errata_test_support.h"

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;
using testing::random_int8;

// conv -> relu -> pool (the pool reads a non-negative and a signed image alike).
ir::Graph pooled(std::int64_t c, std::int64_t h, std::int64_t w, bool global, bool relu,
                 std::vector<std::int64_t> k = {3, 3}, std::vector<std::int64_t> s = {2, 2},
                 std::vector<std::int64_t> pads = {0, 0, 0, 0}, std::int64_t ceil_mode = 0,
                 float global_scale = 0.01f) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 4, h, w});
  auto a = b.qconv("conv", "x", 0.05f, random_int8(static_cast<std::size_t>(c * 4 * 9), 5),
                   {c, 4, 3, 3}, 0.01f, 0.02f, {}, {1, 1, 1, 1});
  if (relu) a = b.relu("relu", a);
  if (global) {
    b.value("y", ir::DType::kInt8, {1, c, 1, 1});
    b.node("QLinearGlobalAveragePool", "com.microsoft",
           {a, "conv_ys", "conv_yz", b.f32("ys", global_scale), "conv_yz"}, {"y"}, "gap");
  } else {
    auto out = [&](std::int64_t i, std::int64_t kk, std::int64_t ss, std::int64_t p0,
                   std::int64_t p1) {
      const std::int64_t span = i + p0 + p1 - kk;
      std::int64_t o = (ceil_mode ? (span + ss - 1) / ss : span / ss) + 1;
      if (ceil_mode && (o - 1) * ss >= i + p0) --o;
      return o;
    };
    b.value("y", ir::DType::kInt8,
            {1, c, out(h, k[0], s[0], pads[0], pads[2]), out(w, k[1], s[1], pads[1], pads[3])});
    auto& n = b.node("QLinearAveragePool", "com.microsoft",
                     {a, "conv_ys", "conv_yz", b.f32("ys", 0.015f), "conv_yz"}, {"y"}, "avg");
    n.attributes["kernel_shape"] = k;
    n.attributes["strides"] = s;
    n.attributes["pads"] = pads;
    n.attributes["count_include_pad"] = std::int64_t{1};
    n.attributes["ceil_mode"] = ceil_mode;
  }
  b.g.outputs = {"y"};
  return b.g;
}

TEST(PoolsAsConvs, GlobalAverageIsASplitDepthwiseConv) {
  for (const auto& arch : {isa::kArch9x8x8, isa::kArch9x4x4}) {
    const CompileResult r = testing::expect_rewrite_exact(pooled(16, 7, 7, true, false), arch, 3);
    EXPECT_EQ(testing::count_op(r.ctx, "GatiPool"), 0u);
    // 7 wide: split_kernels runs one kernel row per piece.
    EXPECT_EQ(r.program.layers.size(), 1u + 7u);
    for (const auto& l : r.program.layers) {
      EXPECT_EQ(l.opcode, isa::Opcode::CONV);
      EXPECT_EQ(l.instructions.at(2).get(isa::Field::TailBlock_GblPoolEn), 0u);
    }
    ASSERT_EQ(errata_rewrites(r.ctx).size(), 1u);
    EXPECT_EQ(errata_rewrites(r.ctx)[0].original, "gap");
    EXPECT_NE(explain_errata(r, {}).find("E10"), std::string::npos);
  }
}

TEST(PoolsAsConvs, GlobalAverageAfterReluIsNotFusedIntoTheTail) {
  const CompileResult r =
      testing::expect_rewrite_exact(pooled(8, 5, 6, true, true), isa::kArch9x8x8, 11);
  for (const auto& n : r.ctx.graph.nodes) EXPECT_EQ(n.get_int("global_pool", 0), 0) << n.name;
  CompileOptions opt;
  opt.allow_errata = true;  // today's lowering: the pool in the conv's TailBlock
  const Context old = lower(pooled(8, 5, 6, true, true), opt);
  EXPECT_EQ(old.graph.nodes.size(), 1u);
  EXPECT_EQ(old.graph.nodes[0].get_int("global_pool", 0), 1);
  EXPECT_TRUE(errata_rewrites(old).empty());
}

TEST(PoolsAsConvs, WideGlobalAverageIsReducedFirst) {
  // 20 wide > 9 rows: one 3x3 stride-3 average (7x7), then a 7x7 split conv. Rounds twice, so
  // compared with the device (exact) and with the real average (within two steps), not with the
  // single-rounding GatiPool. The output scale is twice the input's: with a finer one the staged
  // form can be more than 1 LSB off and this pool, a graph output, would run on the host
  // (AssignDevices.InexactStagedGlobalPoolBeforeTheHostRunsOnTheHost).
  const ir::Graph g = pooled(8, 12, 20, true, false, {3, 3}, {2, 2}, {0, 0, 0, 0}, 0, 0.04f);
  const Context ctx = lower(g, {});
  ASSERT_GE(ctx.graph.nodes.size(), 3u);
  EXPECT_EQ(testing::count_op(ctx, "GatiPool"), 0u);
  const CompileResult r = compile(g, {});
  const auto in = testing::seeded_inputs(g, 21);
  const auto dev = testing::run_on_device(r, in);
  const auto want = testing::run_lowered(g, {}, in).at("y");
  CompileOptions errata;
  errata.allow_errata = true;
  const auto exact = testing::run_lowered(g, errata, in).at("y");
  ASSERT_EQ(dev.at("y").size(), want.data.size());
  for (std::size_t i = 0; i < want.data.size(); ++i) {
    EXPECT_EQ(dev.at("y")[i], static_cast<std::int8_t>(want.data[i]));
    EXPECT_LE(std::abs(int(static_cast<std::int8_t>(want.data[i])) -
                       int(static_cast<std::int8_t>(exact.data[i]))),
              2);
  }
}

TEST(PoolsAsConvs, AveragePoolWithPadsAndCeilIsADepthwiseConv) {
  for (const auto& arch : {isa::kArch9x8x8, isa::kArch9x4x4}) {
    const CompileResult a = testing::expect_rewrite_exact(
        pooled(8, 9, 9, false, false, {3, 3}, {2, 2}, {1, 1, 1, 1}), arch, 31);
    EXPECT_EQ(testing::count_op(a.ctx, "GatiPool"), 0u);
    const CompileResult b =
        testing::expect_rewrite_exact(pooled(8, 8, 8, false, true, {2, 2}, {2, 2}), arch, 41);
    EXPECT_EQ(b.program.layers.size(), 2u);
  }
}

TEST(PoolsAsConvs, AllowErrataKeepsThePoolMegablock) {
  CompileOptions opt;
  opt.allow_errata = true;
  const CompileResult r = compile(pooled(8, 8, 8, false, false, {2, 2}, {2, 2}), opt);
  EXPECT_EQ(r.program.layers.back().opcode, isa::Opcode::POOL);
  EXPECT_FALSE(r.ctx.warnings.empty());  // check_limits names the erratum
}

}  // namespace
}  // namespace npukit::compiler
