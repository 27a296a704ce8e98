// legalize_host_ops: an int8 Relu left on the host of an opset-13 model (ONNX accepts int8 Relu
// only from opset 14) goes back to float between DequantizeLinear and QuantizeLinear; the host
// subgraph then passes ONNX's checker and shape inference and computes the same integers.
#include "compiler/compiler.h"
#include "compiler/test_graphs.h"
#include "ir/tensor_util.h"
#include "onnx/onnx_io.h"
#include "ref/executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;

// conv (device) -> DequantizeLinear -> Neg -> QuantizeLinear -> Relu (int8) -> y: the Relu alone
// after the host work would be a device island that costs more to reach than it computes, so it
// runs on the host (partition).
ir::Graph relu_after_host_work(std::int64_t opset) {
  GraphBuilder b;
  b.g.opset = opset;
  b.g.opsets[""] = opset;
  b.input("x", ir::DType::kInt8, {1, 4, 4, 4});
  auto c = b.qconv("conv", "x", 0.05f, testing::random_int8(4 * 4 * 9, 1), {4, 4, 3, 3}, 0.01f,
                   0.1f, {}, {1, 1, 1, 1});
  b.value("f", ir::DType::kFloat32, {1, 4, 4, 4});
  b.node("DequantizeLinear", "", {c, "conv_ys", "conv_yz"}, {"f"}, "dequant");
  b.value("neg", ir::DType::kFloat32, {1, 4, 4, 4});
  b.node("Neg", "", {"f"}, {"neg"}, "negate");
  b.value("sq", ir::DType::kInt8, {1, 4, 4, 4});
  b.node("QuantizeLinear", "", {"neg", b.f32("s_neg", 0.1f), b.i8("z_neg", 0)}, {"sq"}, "quant");
  b.value("y", ir::DType::kInt8, {1, 4, 4, 4});
  b.node("Relu", "", {"sq"}, {"y"}, "relu");
  b.g.outputs = {"y"};
  return b.g;
}

TEST(LegalizeHostOps, Int8ReluBelowOpset14RunsInFloatOnTheHost) {
  const CompileResult r = compile(relu_after_host_work(13), {});
  ASSERT_TRUE(r.host_last());
  std::vector<std::string> ops;
  for (const auto& n : r.host_last()->nodes) ops.push_back(n.op_type);
  EXPECT_EQ(ops, (std::vector<std::string>{"DequantizeLinear", "Neg", "QuantizeLinear",
                                           "DequantizeLinear", "Relu", "QuantizeLinear"}));
  // The saved host subgraph is a valid opset-13 model (the importer runs checker and inference).
  const ir::Graph reloaded =
      onnxio::load_onnx_bytes(onnxio::save_onnx_bytes(*r.host_last()), "host_after");
  // From opset 14 the int8 Relu is valid ONNX and stays as it is.
  const CompileResult r14 = compile(relu_after_host_work(14), {});
  ASSERT_TRUE(r14.host_last());
  EXPECT_EQ(r14.host_last()->nodes.back().op_type, "Relu");
  EXPECT_EQ(r14.host_last()->nodes.size(), 4u);

  // Both give the same integers, max(q, 0), over every int8 input step.
  ir::Tensor in = ir::make_tensor(ir::DType::kInt8, {1, 4, 4, 4}, r.host_last()->inputs.at(0));
  for (int i = 0; i < 64; ++i)
    in.as_mutable<std::int8_t>()[i] = static_cast<std::int8_t>(4 * i - 128);
  const ir::Tensor y13 = ref::run_graph(reloaded, {{in.name, in}}).at("y");
  const ir::Tensor y14 = ref::run_graph(*r14.host_last(), {{in.name, in}}).at("y");
  EXPECT_EQ(y13.data, y14.data);
  std::size_t zeros = 0;
  for (auto v : ir::to_int64_vector(y13)) zeros += v == 0;
  EXPECT_GT(zeros, 0u);  // the Relu did cut negative values
}

// conv (device) -> DequantizeLinear -> Neg -> QuantizeLinear -> Resize 2x nearest (int8,
// canonicalize_qdq's fold) -> y: a Resize that the Gati could run but that stays on the host (a
// device island with no work), as the YOLO-like model's between two device segments on 16,1,16.
// The graph of both Resize tests, compiled: the Resize (mode `mode`) and the Neg before it are
// the last host segment, which goes back to float around the Resize; returns that segment
// reloaded from its ONNX bytes (as the runtime loads host_after.onnx).
ir::Graph host_resize(const std::string& mode, CompileResult* out) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 4, 4, 4});
  auto c = b.qconv("conv", "x", 0.05f, testing::random_int8(4 * 4 * 9, 1), {4, 4, 3, 3}, 0.01f,
                   0.1f, {}, {1, 1, 1, 1});
  b.value("f", ir::DType::kFloat32, {1, 4, 4, 4});
  b.node("DequantizeLinear", "", {c, "conv_ys", "conv_yz"}, {"f"}, "dequant");
  b.value("neg", ir::DType::kFloat32, {1, 4, 4, 4});
  b.node("Neg", "", {"f"}, {"neg"}, "negate");
  b.value("sq", ir::DType::kInt8, {1, 4, 4, 4});
  b.node("QuantizeLinear", "", {"neg", b.f32("s_neg", 0.1f), b.i8("z_neg", 0)}, {"sq"}, "quant");
  b.value("y", ir::DType::kInt8, {1, 4, 8, 8});
  const auto scales = b.constant<float>("scales", ir::DType::kFloat32, {4}, {1, 1, 2, 2});
  b.node("Resize", "", {"sq", "", scales}, {"y"}, "up").attributes["mode"] = mode;
  b.g.outputs = {"y"};
  *out = compile(b.g, {});
  EXPECT_TRUE(out->host_last());
  if (!out->host_last()) return {};
  std::vector<std::string> ops;
  for (const auto& n : out->host_last()->nodes) ops.push_back(n.op_type);
  EXPECT_EQ(ops, (std::vector<std::string>{"DequantizeLinear", "Neg", "QuantizeLinear",
                                           "DequantizeLinear", "Resize", "QuantizeLinear"}));
  return onnxio::load_onnx_bytes(onnxio::save_onnx_bytes(*out->host_last()), "host_after");
}

TEST(LegalizeHostOps, Int8ResizeOnTheHostRunsInFloat) {
  CompileResult r;
  const ir::Graph reloaded = host_resize("nearest", &r);
  ASSERT_TRUE(r.host_last());
  // The host segment runs on the reference executor (which has no int8 Resize) and gives every
  // int8 value, negated, at the 2x2 pixels nearest Resize copies it to.
  ir::Tensor in = ir::make_tensor(ir::DType::kInt8, {1, 4, 4, 4}, r.host_last()->inputs.at(0));
  for (int i = 0; i < 64; ++i)
    in.as_mutable<std::int8_t>()[i] = static_cast<std::int8_t>(2 * i - 64);
  const auto y = ir::to_int64_vector(ref::run_graph(reloaded, {{in.name, in}}).at("y"));
  ASSERT_EQ(y.size(), 256u);
  // The host input is the conv's int8 output (scale 0.1); Neg and QuantizeLinear at 0.1 give -q.
  for (int c4 = 0; c4 < 4; ++c4)
    for (int yy = 0; yy < 8; ++yy)
      for (int xx = 0; xx < 8; ++xx)
        EXPECT_EQ(y[static_cast<std::size_t>(c4 * 64 + yy * 8 + xx)],
                  -(2 * (c4 * 16 + (yy / 2) * 4 + xx / 2) - 64));
}

// The same with a bilinear Resize (a QDQ model from onnxruntime's quantizer, which gives Resize
// one scale on both sides, so canonicalize_qdq folds DequantizeLinear -> Resize -> QuantizeLinear
// into an int8 Resize that the device RESIZE cannot run; npukit quantize gives a bilinear Resize
// its own output scale instead, as in LR-ASPP, and it stays float): on the host it interpolates
// the dequantized values and quantizes again, checked here against a separate bilinear
// (half_pixel) computation.
TEST(LegalizeHostOps, Int8BilinearResizeOnTheHostInterpolatesInFloat) {
  CompileResult r;
  const ir::Graph reloaded = host_resize("linear", &r);
  EXPECT_NE(r.ctx.placement.at("up").reason.find("non-nearest resize"), std::string::npos);
  ASSERT_TRUE(r.host_last());
  ir::Tensor in = ir::make_tensor(ir::DType::kInt8, {1, 4, 4, 4}, r.host_last()->inputs.at(0));
  for (int i = 0; i < 64; ++i)
    in.as_mutable<std::int8_t>()[i] = static_cast<std::int8_t>((i * 37) % 200 - 100);
  const auto y = ir::to_int64_vector(ref::run_graph(reloaded, {{in.name, in}}).at("y"));
  ASSERT_EQ(y.size(), 256u);
  // half_pixel: output pixel o samples input coordinate (o + 0.5) / 2 - 0.5, clamped to the edge.
  const auto q = [&](int c4, int yy, int xx) {
    return -static_cast<double>(
        in.as<std::int8_t>()[static_cast<std::size_t>(c4 * 16 + yy * 4 + xx)]);
  };
  const auto coord = [](int o, int& i0, int& i1, double& w) {
    const double s = std::clamp((o + 0.5) / 2 - 0.5, 0.0, 3.0);
    i0 = static_cast<int>(s);
    i1 = std::min(i0 + 1, 3);
    w = s - i0;
  };
  int interpolated = 0;
  for (int c4 = 0; c4 < 4; ++c4)
    for (int yy = 0; yy < 8; ++yy)
      for (int xx = 0; xx < 8; ++xx) {
        int y0, y1, x0, x1;
        double wy, wx;
        coord(yy, y0, y1, wy);
        coord(xx, x0, x1, wx);
        const double v = (1 - wy) * ((1 - wx) * q(c4, y0, x0) + wx * q(c4, y0, x1)) +
                         wy * ((1 - wx) * q(c4, y1, x0) + wx * q(c4, y1, x1));
        const double want = std::clamp(std::nearbyint(v), -128.0, 127.0);  // half to even
        const auto got = y[static_cast<std::size_t>(c4 * 64 + yy * 8 + xx)];
        // At an exact tie (x.5) float rounding of the scale may land on either side.
        const bool tie = std::fabs(v - std::floor(v) - 0.5) < 1e-6;
        EXPECT_LE(std::fabs(static_cast<double>(got) - want), tie ? 1.0 : 0.0)
            << c4 << " " << yy << " " << xx << ": " << v;
        interpolated += v != std::floor(v);
      }
  EXPECT_GT(interpolated, 100);  // most output pixels are between input values
}

}  // namespace
}  // namespace npukit::compiler
