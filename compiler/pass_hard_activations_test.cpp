// hard_activations: DQ -> HardSigmoid/HardSwish -> Q become a depthwise 1x1 QLinearConv with a
// Clip (HardSigmoid) or Relu + QLinearMul (HardSwish), which run on the device bit-exactly as the
// reference executor runs the lowered graph; on all 256 int8 inputs they agree with the float op
// between DequantizeLinear and QuantizeLinear computed here independently (float32 steps, round
// half to even, as onnxruntime does) except on few inputs, and never by more than 1.
#include "compiler/compiler.h"
#include "compiler/device_run.h"
#include "compiler/passes.h"
#include "compiler/test_graphs.h"

#include <gtest/gtest.h>

#include <cmath>

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;
using testing::op_types;

// int8 x [1, 4, 8, 8] (every int8 value once) -> DQ(sx) -> op -> Q(sy) -> int8 y.
GraphBuilder hard(const std::string& op, float sx, float sy, float alpha = 0.2f,
                  float beta = 0.5f) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 4, 8, 8});
  b.value("xf", ir::DType::kFloat32, {1, 4, 8, 8});
  b.node("DequantizeLinear", "", {"x", b.f32("xs", sx), b.i8("xz", 0)}, {"xf"}, "dq");
  b.value("yf", ir::DType::kFloat32, {1, 4, 8, 8});
  auto& n = b.node(op, "", {"xf"}, {"yf"}, "act");
  if (op == "HardSigmoid") {
    n.attributes["alpha"] = alpha;
    n.attributes["beta"] = beta;
  }
  b.value("y", ir::DType::kInt8, {1, 4, 8, 8});
  b.node("QuantizeLinear", "", {"yf", b.f32("ys", sy), b.i8("yz", 0)}, {"y"}, "q");
  b.g.outputs = {"y"};
  return b;
}

std::vector<std::int8_t> every_int8() {
  std::vector<std::int8_t> v(256);
  for (int i = 0; i < 256; ++i) v[static_cast<std::size_t>(i)] = static_cast<std::int8_t>(i - 128);
  return v;
}

// The QDQ meaning in float32 steps: dequantize, the op, divide by s_y, round half to even.
std::int8_t expected(const std::string& op, int x, float sx, float sy, float alpha, float beta) {
  volatile float v = static_cast<float>(x) * sx;
  volatile float h = op == "HardSigmoid" ? std::clamp(alpha * v + beta, 0.f, 1.f)
                                         : v * std::clamp(v / 6.f + 0.5f, 0.f, 1.f);
  volatile float q = h / sy;
  return static_cast<std::int8_t>(std::clamp(std::nearbyint(static_cast<float>(q)), -128.f, 127.f));
}

TEST(HardActivations, HardSigmoidIsADepthwiseConvAndClip) {
  Context ctx;
  ctx.graph = hard("HardSigmoid", 0.05f, 1.f / 127).g;
  hard_activations(ctx);
  ASSERT_EQ(op_types(ctx.graph), (std::vector<std::string>{"QLinearConv", "Clip"}));
  const ir::Node& c = ctx.graph.nodes[0];
  EXPECT_EQ(c.inputs[0], "x");
  EXPECT_EQ(c.get_int("group", 1), 4);
  EXPECT_EQ(ctx.graph.tensor(c.inputs[3]).shape, (ir::Shape{4, 1, 1, 1}));
  EXPECT_EQ(ctx.graph.nodes[1].outputs[0], "y");
  // Clip's upper bound is 1.0 at the output scale.
  EXPECT_EQ(constant_values(ctx.graph.tensor(ctx.graph.nodes[1].inputs[2])).at(0), 127);
}

TEST(HardActivations, HardSwishIsAGateAndAnEltwiseMultiply) {
  for (float sx : {0.05f, 0.03f}) {  // 3 / s_x = 60: the exact gate; 100: the 1/127 gate
    Context ctx;
    ctx.graph = hard("HardSwish", sx, 0.04f).g;
    hard_activations(ctx);
    ASSERT_EQ(op_types(ctx.graph), (std::vector<std::string>{"QLinearConv", "Clip", "QLinearMul"}));
    const ir::Node& mul = ctx.graph.nodes[2];
    EXPECT_EQ(mul.inputs[0], "x");
    EXPECT_EQ(mul.inputs[3], ctx.graph.nodes[1].outputs[0]);
    const bool exact = sx == 0.05f;
    EXPECT_FLOAT_EQ(constant_values(ctx.graph.tensor(mul.inputs[4])).at(0),
                    exact ? sx / 6 : 1.f / 127);
    EXPECT_EQ(constant_values(ctx.graph.tensor(ctx.graph.nodes[1].inputs[2])).at(0),
              exact ? 120 : 127);
    EXPECT_EQ(mul.outputs[0], "y");
  }
}

TEST(HardActivations, OtherFormsStay) {
  {  // the float value is a graph output as well
    GraphBuilder b = hard("HardSwish", 0.05f, 0.04f);
    b.g.outputs.push_back("yf");
    Context ctx;
    ctx.graph = b.g;
    hard_activations(ctx);
    EXPECT_EQ(ctx.graph.nodes[1].op_type, "HardSwish");
  }
  {  // per-channel input scales: not one int8 tensor at one scale
    GraphBuilder b = hard("HardSigmoid", 0.05f, 0.01f);
    b.constant<float>("xs", ir::DType::kFloat32, {4}, {0.1f, 0.2f, 0.3f, 0.4f});
    Context ctx;
    ctx.graph = b.g;
    hard_activations(ctx);
    EXPECT_EQ(ctx.graph.nodes[1].op_type, "HardSigmoid");
  }
}

struct Case {
  std::string op;
  float sx, sy, alpha, beta;
  int max_mismatches;  // of 256
};

TEST(HardActivations, RunOnTheDeviceAndAgreeWithTheFloatOp) {
  const std::vector<Case> cases = {
      {"HardSigmoid", 0.05f, 1.f / 127, 1.f / 6, 0.5f, 1},  // x = 0: 63.5, a tie
      {"HardSigmoid", 0.1f, 0.0081f, 0.2f, 0.5f, 0},
      {"HardSigmoid", 0.02f, 1.f / 200, 1.f / 6, 0.5f, 0},  // 1.0 is 200: the int8 clamp cuts
      // 3 / s_x = 60 and 30: the exact gate. What differs are exact ties of the real value,
      // which onnxruntime's float32 steps round either way.
      {"HardSwish", 0.05f, 0.0437f, 0, 0, 2},
      {"HardSwish", 0.1f, 0.0813f, 0, 0, 2},
      {"HardSwish", 0.03f, 0.025f, 0, 0, 24},  // 100: the 1/127 gate
      {"HardSwish", 0.07f, 0.05f, 0, 0, 24},   // 42.86: the 1/127 gate
  };
  for (const auto& cs : cases) {
    const ir::Graph g = hard(cs.op, cs.sx, cs.sy, cs.alpha, cs.beta).g;
    for (const isa::SaArch& arch : {isa::kArch9x8x8, isa::kArch9x4x4}) {
      CompileOptions opt;
      opt.arch = arch;
      const CompileResult r = compile(g, opt);
      for (const auto& n : r.ctx.graph.nodes)
        EXPECT_TRUE(is_gati(n)) << n.op_type << " left on the host";
      const std::map<std::string, ir::Tensor> in = {
          {"x", testing::int8_tensor("x", {1, 4, 8, 8}, every_int8())}};
      const auto dev = testing::run_on_device(r, in);
      const auto ref = testing::run_on_reference(r.ctx, r.program, in);
      ASSERT_EQ(dev.at("y"), ref.at("y")) << cs.op << " " << arch.str();
      int mismatches = 0;
      for (int i = 0; i < 256; ++i) {
        const int want = expected(cs.op, i - 128, cs.sx, cs.sy, cs.alpha, cs.beta);
        const int got = dev.at("y")[static_cast<std::size_t>(i)];
        EXPECT_LE(std::abs(got - want), 1) << cs.op << " x=" << i - 128;
        mismatches += got != want;
      }
      EXPECT_LE(mismatches, cs.max_mismatches) << cs.op << " sx " << cs.sx << " sy " << cs.sy;
      if (arch == isa::kArch9x8x8)
        std::printf("%s sx %g sy %g: %d of 256 int8 inputs differ from the float op\n",
                    cs.op.c_str(), cs.sx, cs.sy, mismatches);
    }
  }
}

}  // namespace
}  // namespace npukit::compiler
