// broadcast_mul: the squeeze-excitation QLinearMul(x [1,C,H,W], s [1,C,1,1]) becomes a depthwise
// all-ones conv + 2x Resizes that broadcast s exactly on the device, then a same-shape QLinearMul;
// the device equals the reference on the lowered graph bit for bit and the reference executor's
// broadcast QLinearMul (onnxruntime's arithmetic) within 1.
#include "compiler/compiler.h"
#include "compiler/device_run.h"
#include "compiler/passes.h"
#include "compiler/test_graphs.h"

#include <gtest/gtest.h>

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;
using testing::op_types;
using testing::random_int8;

// x [1,C,H,W] and s [1,C,1,1] int8 inputs -> QLinearMul (s first when gate_first) -> y
GraphBuilder se(std::int64_t c, std::int64_t h, std::int64_t w, bool gate_first) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, c, h, w});
  b.input("s", ir::DType::kInt8, {1, c, 1, 1});
  b.value("y", ir::DType::kInt8, {1, c, h, w});
  std::vector<std::string> xin = {"x", b.f32("xs", 0.05f), b.i8("xz", 0)};
  std::vector<std::string> sin = {"s", b.f32("ss", 1.f / 127), b.i8("sz", 0)};
  std::vector<std::string> in = gate_first ? sin : xin;
  const auto& second = gate_first ? xin : sin;
  in.insert(in.end(), second.begin(), second.end());
  in.insert(in.end(), {b.f32("ys", 0.037f), b.i8("yz", 0)});
  b.node("QLinearMul", "com.microsoft", in, {"y"}, "mul");
  b.g.outputs = {"y"};
  return b;
}

TEST(BroadcastMul, GateBroadcastByAConvAndResizes) {
  Context ctx;
  ctx.graph = se(8, 28, 28, false).g;  // 28 = 7 x 2^2
  broadcast_mul(ctx);
  ASSERT_EQ(op_types(ctx.graph),
            (std::vector<std::string>{"QLinearConv", "Resize", "Resize", "QLinearMul"}));
  const ir::Node& conv = ctx.graph.nodes[0];
  EXPECT_EQ(conv.get_ints("kernel_shape", {}), (std::vector<std::int64_t>{7, 7}));
  EXPECT_EQ(conv.get_ints("pads", {}), (std::vector<std::int64_t>{6, 6, 6, 6}));
  EXPECT_EQ(ctx.graph.tensor(ctx.graph.nodes[3].inputs[3]).shape, (ir::Shape{1, 8, 28, 28}));
}

TEST(BroadcastMul, SizesThatDoNotFactorStay) {
  Context ctx;
  ctx.graph = se(8, 12, 40, false).g;  // 12 = 3 x 4 but 40 = 10 x 4 (a kernel of 10 columns)
  broadcast_mul(ctx);
  EXPECT_EQ(op_types(ctx.graph), (std::vector<std::string>{"QLinearMul"}));
}

TEST(BroadcastMul, OnTheDeviceExactAndAsTheReference) {
  struct Case {
    std::int64_t c, h, w;
    bool gate_first;
    isa::SaArch arch;
    bool on_device;
  };
  const std::vector<Case> cases = {
      {8, 7, 7, false, isa::kArch9x8x8, true},  // 7x7 kernel (split into row pieces)
      {16, 14, 14, true, isa::kArch9x8x8, true},  {8, 3, 6, false, isa::kArch9x8x8, true},
      {4, 56, 56, false, isa::kArch9x8x8, true},   // 7x7 kernel and 3 resizes
      {8, 12, 12, false, isa::kArch9x4x4, true},   // 3x3 kernel and 2 resizes
      {8, 14, 14, false, isa::kArch9x4x4, false},  // a split kernel on 9,4,4: host
  };
  for (const Case& cs : cases) {
    const ir::Graph g = se(cs.c, cs.h, cs.w, cs.gate_first).g;
    const std::map<std::string, ir::Tensor> in = {
        {"x", testing::int8_tensor("x", {1, cs.c, cs.h, cs.w},
                                   random_int8(static_cast<std::size_t>(cs.c * cs.h * cs.w), 3))},
        {"s", testing::int8_tensor("s", {1, cs.c, 1, 1},
                                   random_int8(static_cast<std::size_t>(cs.c), 4, 0, 127))}};
    CompileOptions opt;
    opt.arch = cs.arch;
    if (!cs.on_device) {
      Context ctx;
      ctx.options = opt;
      ctx.graph = g;
      broadcast_mul(ctx);
      EXPECT_EQ(op_types(ctx.graph), (std::vector<std::string>{"QLinearMul"}));
      continue;
    }
    const CompileResult r = compile(g, opt);
    for (const auto& n : r.ctx.graph.nodes)
      EXPECT_TRUE(is_gati(n)) << n.op_type << " on the host, " << cs.h << "x" << cs.w;
    // The model's own meaning: the reference executor's broadcast QLinearMul.
    ref::TensorMap rin(in.begin(), in.end());
    const auto want = ref::run_graph(g, rin).at("y");
    const auto dev = testing::run_on_device(r, in);
    const auto ref = testing::run_lowered_on_reference(g, opt, r, in);
    ASSERT_EQ(dev.at("y"), ref.at("y")) << cs.h << "x" << cs.w << " " << cs.arch.str();
    const auto* w = want.as<std::int8_t>();
    std::size_t equal = 0;
    for (std::size_t i = 0; i < dev.at("y").size(); ++i) {
      EXPECT_LE(std::abs(dev.at("y")[i] - w[i]), 1) << i;
      equal += dev.at("y")[i] == w[i];
    }
    EXPECT_GE(static_cast<double>(equal), 0.99 * static_cast<double>(dev.at("y").size()))
        << cs.h << "x" << cs.w;
  }
}

}  // namespace
}  // namespace npukit::compiler
