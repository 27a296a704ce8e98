// split_grouped_convs: a grouped conv between two device convs runs as one conv per group (or per
// few groups) reading and writing channel views, no copies; the device's output equals the
// reference executor running the block-diagonal lowering, on every array, with a ReLU in the
// pieces' tails. Kept block-diagonal where the output leaves the device
// or is dispatched.
#include "compiler/errata_test_support.h"

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;
using testing::random_int8;

// x [1, 8, h, h] -> 1x1 conv to 32 -> grouped 3x3 conv (32 -> 32, `group` groups) -> Relu ->
// 1x1 conv to 16 -> y.
ir::Graph grouped_model(std::int64_t group, std::int64_t h) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 8, h, h});
  auto a = b.qconv("a", "x", 0.05f, random_int8(32 * 8, 1), {32, 8, 1, 1}, 0.02f, 0.05f, {},
                   {0, 0, 0, 0});
  std::vector<std::int32_t> bias(32);
  for (int i = 0; i < 32; ++i) bias[static_cast<std::size_t>(i)] = (i * 37) % 200 - 100;
  auto gc =
      b.qconv("grouped", a, 0.05f, random_int8(static_cast<std::size_t>(32 * (32 / group) * 9), 2),
              {32, 32 / group, 3, 3}, 0.01f, 0.06f, bias, {1, 1, 1, 1}, 1, group);
  auto r = b.relu("relu", gc);
  auto c = b.qconv("c", r, 0.06f, random_int8(16 * 32, 3), {16, 32, 1, 1}, 0.02f, 0.1f, {},
                   {0, 0, 0, 0});
  b.g.outputs = {c};
  return b.g;
}

std::size_t pieces(const Context& ctx) {
  std::size_t k = 0;
  for (const auto& n : ctx.graph.nodes)
    k += n.op_type == "GatiConv" && n.name.find("grouped_group") == 0;
  return k;
}

TEST(SplitGroupedConvs, OneConvPerGroupWritesIntoViewsAndMatchesBlockDiagonal) {
  const ir::Graph model = grouped_model(4, 10);
  const auto inputs = testing::seeded_inputs(model, 5);
  // 8 channels per group: one conv per group where N_SA is 4 or 8, two groups per conv on
  // 16,1,16 (N_SA = 16); simulation-only there (errata).
  for (const auto& [arch, expected] :
       {std::pair{isa::kArch9x8x8, 4u}, {isa::kArch9x4x4, 4u}, {isa::kArch16x1x16, 2u}}) {
    CompileOptions opt;
    opt.arch = arch;
    opt.allow_errata = arch == isa::kArch16x1x16;
    const CompileResult r = compile(model, opt);
    // The independent computation: the reference executor on the block-diagonal lowering (kept
    // when the conv's output is dispatched), the form every other grouped-conv test checks.
    CompileOptions whole = opt;
    whole.dispatch = {"relu_out"};
    ASSERT_EQ(pieces(lower(model, whole)), 0u);
    const auto want = testing::run_lowered(model, whole, inputs);
    EXPECT_EQ(pieces(r.ctx), expected) << arch.str();
    EXPECT_EQ(r.program.layers.size(), expected + 2);
    // The pieces are layers; the Slice/Concat views are not, and no tensor is copied.
    for (const auto& l : r.program.layers) EXPECT_EQ(l.opcode, isa::Opcode::CONV) << l.name;
    std::size_t views = 0;
    for (const auto& [name, t] : r.program.tensors) views += !t.alias_of.empty();
    EXPECT_EQ(views, 2 * expected);
    const auto dev = testing::run_on_device(r, inputs);
    const auto& y = want.at(model.outputs[0]);
    ASSERT_TRUE(dev.count(model.outputs[0]));
    const auto& d = dev.at(model.outputs[0]);
    ASSERT_EQ(d.size(), y.data.size());
    EXPECT_EQ(std::memcmp(d.data(), y.data.data(), d.size()), 0) << arch.str();
    std::size_t nonzero = 0;
    for (auto v : d) nonzero += v != 0;
    EXPECT_GT(nonzero, d.size() / 4);
  }
}

TEST(SplitGroupedConvs, BlockDiagonalWhenTheOutputLeavesTheDeviceOrIsDispatched) {
  ir::Graph model = grouped_model(4, 10);
  CompileOptions opt;
  opt.dispatch = {"relu_out"};
  EXPECT_EQ(pieces(lower(model, opt)), 0u);
  // The model's output: the grouped conv (with its ReLU) ends the device part.
  model.nodes.pop_back();
  model.outputs = {"relu_out"};
  EXPECT_EQ(pieces(lower(model, {})), 0u);
  // Two groups of 16 channels on 9,8,8: two layers of 2 x 2 passes (2 * (91 + 4 * 78 + 2 * 48))
  // cost less than one of 4 x 4 (91 + 16 * 78 + 4 * 48), so it splits.
  EXPECT_EQ(pieces(lower(grouped_model(2, 2), {})), 2u);
}

}  // namespace
}  // namespace npukit::compiler
