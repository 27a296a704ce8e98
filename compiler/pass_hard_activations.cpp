// Pass 3c, hard_activations: HardSigmoid and HardSwish between DequantizeLinear and
// QuantizeLinear (how npukit quantize and QDQ quantizers write them: neither has a QOperator op)
// become int8 ops that lower to Gati megablocks (docs/compiler.md, "Pointwise functions"):
//
//   HardSigmoid(x) = clip(alpha x + beta, 0, 1)
//     -> depthwise 1x1 QLinearConv (weight alpha, exact at int8 127 x alpha / 127; bias beta at
//        s_x s_w) -> int8 Clip(0, round(1 / s_y)); fuse_tail puts the Clip in the conv's tail.
//   HardSwish(x) = x hardsigmoid(x), hardsigmoid with alpha 1/6, beta 1/2
//     -> h = that conv -> int8 Clip -> QLinearMul(x, h): the EltWise mult requantizes x h to s_y
//        once. When 3 / s_x is an integer K <= 63 (npukit quantize picks HardSwish input scales
//        so), h is at scale s_x / 6: h = x + K clipped to [0, 2K], exact, and x h is an exact
//        integer product rounded once. Otherwise h is at 1/127 (1.0 = 127), rounded first.
//
// Rounding: the conv computes round((alpha s_x x + beta) / s_y) up to the 16-bit QuantScale's
// relative error (below 1e-4 of an LSB for int8 inputs), so HardSigmoid and the exact HardSwish
// differ from the QDQ float op only where that value is a tie; the 1/127 gate is off by up to
// 3 / 254 / s_y output steps on inputs in (-3, 3) (compiler/pass_hard_activations_test.cpp
// measures the agreement on all 256 inputs).
#include "compiler/passes.h"
#include "compiler/pointwise.h"

#include <algorithm>
#include <cmath>

namespace npukit::compiler {

namespace {

bool rewrite(ir::Graph& g, const ir::Node& n) {
  if (!(n.domain.empty() || n.domain == "ai.onnx")) return false;
  const bool sigmoid = n.op_type == "HardSigmoid", swish = n.op_type == "HardSwish";
  if (!sigmoid && !swish) return false;
  auto m = match_pointwise(g, n, 0);
  if (!m) return false;
  const double alpha = sigmoid ? n.get_float("alpha", 0.2f) : 1.0 / 6.0;
  const double beta = sigmoid ? n.get_float("beta", 0.5f) : 0.5;
  const ir::Shape shape = g.tensor(m->xq).shape;
  std::vector<ir::Node> nodes;
  if (sigmoid) {
    const std::string mid = add_value(g, n.name + "_affine", ir::DType::kInt8, shape);
    auto conv =
        depthwise_affine(g, n.name + "_affine", *m, {alpha}, {beta}, mid, m->y_scale, m->y_zero);
    if (!conv) return false;
    const double top = std::clamp(std::nearbyint(1.0 / m->sy), 0.0, 127.0);
    const std::int8_t lo = 0, hi = static_cast<std::int8_t>(top);
    ir::Node clip;
    clip.name = n.name;  // the node it replaces goes away
    clip.op_type = "Clip";
    clip.inputs = {mid, add_constant(g, n.name + "_min", ir::DType::kInt8, {}, &lo),
                   add_constant(g, n.name + "_max", ir::DType::kInt8, {}, &hi)};
    clip.outputs = {m->yq};
    nodes = {std::move(*conv), std::move(clip)};
  } else {
    // The gate's scale: s_x / 6 when 3 / s_x is an integer K <= 63 (npukit quantize picks such an
    // input scale), so the gate is x + K clipped to [0, 2K], exact, and the EltWise multiplies
    // exact integers and rounds once; otherwise 1/127 (1.0 = 127), rounding the gate first.
    const double k = 3.0 / m->sx;
    const bool exact = std::fabs(k - std::nearbyint(k)) < 1e-4 * k && std::nearbyint(k) >= 1 &&
                       std::nearbyint(k) <= 63;
    const float gate_scale = exact ? static_cast<float>(m->sx / 6.0) : 1.0f / 127.0f;
    const std::string h_scale = float_scalar(g, n.name + "_gate_scale", gate_scale);
    const std::int8_t zero = 0;
    const std::string h_zero =
        add_constant(g, n.name + "_gate_zero_point", ir::DType::kInt8, {}, &zero);
    const std::string mid = add_value(g, n.name + "_gate_affine", ir::DType::kInt8, shape);
    const std::string h = add_value(g, n.name + "_gate", ir::DType::kInt8, shape);
    auto conv =
        depthwise_affine(g, n.name + "_gate_affine", *m, {alpha}, {beta}, mid, h_scale, h_zero);
    if (!conv) return false;
    const std::int8_t lo = 0, hi = static_cast<std::int8_t>(exact ? 2 * std::nearbyint(k) : 127.0);
    ir::Node gate;
    gate.name = unique_name(g, n.name + "_gate");
    gate.op_type = "Clip";
    gate.inputs = {mid, add_constant(g, n.name + "_gate_min", ir::DType::kInt8, {}, &lo),
                   add_constant(g, n.name + "_gate_max", ir::DType::kInt8, {}, &hi)};
    gate.outputs = {h};
    ir::Node mul;
    mul.name = n.name;  // the node it replaces goes away
    mul.op_type = "QLinearMul";
    mul.domain = "com.microsoft";
    mul.inputs = {m->xq, m->x_scale, m->x_zero, h, h_scale, h_zero, m->y_scale, m->y_zero};
    mul.outputs = {m->yq};
    nodes = {std::move(*conv), std::move(gate), std::move(mul)};
    if (!g.opsets.count("com.microsoft")) g.opsets["com.microsoft"] = 1;
  }
  replace_pointwise(g, n.name, m->q_node, std::move(nodes));
  return true;
}

}  // namespace

void hard_activations(Context& ctx) {
  ir::Graph& g = ctx.graph;
  // Each rewrite removes one float op and moves nodes around it: start over until none is left.
  rewrite_until_done(g, [&](const ir::Node& n) { return rewrite(g, n); });
}

}  // namespace npukit::compiler
