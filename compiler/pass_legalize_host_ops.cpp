// Pass 6, legalize_host_ops: canonicalize_qdq turns DequantizeLinear -> Relu/Clip/MaxPool ->
// QuantizeLinear into the op on int8 values, which is what the device runs. When such a node
// stays on the host, the host subgraph must still be a valid ONNX model of the model's opset
// (the runtime loads host_before.onnx / host_after.onnx with shape inference, and onnxruntime
// runs them), but int8 inputs arrive late in ONNX: Relu at opset 14, Clip and MaxPool at 12.
// Below that, the host node goes back to its float form between DequantizeLinear and
// QuantizeLinear at the tensor's own scale, which computes the same integers (zero point 0:
// these ops select or compare values and commute with a positive scale).
//
// A Resize on int8 (canonicalize_qdq folds DequantizeLinear -> Resize -> QuantizeLinear when the
// two scales are equal, whatever the mode) that ends up on the host, e.g. between two device
// segments, always goes back to float: ONNX allows int8 Resize, but the reference executor and
// many runtimes implement Resize on float only. Nearest selects pixels, so it is exact. Linear
// (bilinear) interpolates: it runs on the dequantized values and is quantized again at its
// output's scale, which is what the QDQ model means and what onnxruntime computes for it
// (the device RESIZE does 2x nearest only, DECISIONS.md 10, so a bilinear Resize is host work).
#include "compiler/passes.h"

#include <limits>
#include <map>
#include <string>

namespace npukit::compiler {

namespace {

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

// The first ai.onnx opset whose schema of `op` accepts int8 inputs (0: any; kNever: the host runs
// it in float whatever the opset).
std::int64_t int8_opset(const std::string& op) {
  static const std::map<std::string, std::int64_t> kSince = {
      {"Relu", 14}, {"Clip", 12}, {"MaxPool", 12}, {"Resize", kNever}};
  auto it = kSince.find(op);
  return it == kSince.end() ? 0 : it->second;
}

std::string why_float(const ir::Node& n, std::int64_t opset) {
  const std::string& op = n.op_type;
  if (op == "Resize" && n.get_string("mode", "nearest") != "nearest")
    return "host: " + n.get_string("mode", "nearest") +
           " Resize runs in float on the host between DequantizeLinear and QuantizeLinear "
           "(interpolated values are requantized, as onnxruntime runs the QDQ model)";
  if (int8_opset(op) == kNever)
    return "host: " + op + " runs in float on the host (exact for nearest: it selects values)";
  return "host: " + op + " on int8 needs opset " + std::to_string(int8_opset(op)) +
         "; the model has " + std::to_string(opset) +
         ", so it runs in float between (de)quantization";
}

}  // namespace

void legalize_host_ops(Context& ctx) {
  ir::Graph& g = ctx.graph;
  std::vector<ir::Node> nodes;
  for (const ir::Node& n : g.nodes) {
    const ir::Tensor* x = n.inputs.empty() ? nullptr : g.find(n.inputs[0]);
    const bool onnx = n.domain.empty() || n.domain == "ai.onnx";
    const auto q = x ? ctx.quantization.find(x->name) : ctx.quantization.end();
    if (ctx.on_device(n.name) || !onnx || !x || x->dtype != ir::DType::kInt8 ||
        n.outputs.size() != 1 || g.opset >= int8_opset(n.op_type) || q == ctx.quantization.end()) {
      nodes.push_back(n);
      continue;
    }
    const float scale = static_cast<float>(q->second.scale);
    const std::string s = add_constant(g, n.name + "_scale", ir::DType::kFloat32, {}, &scale);
    // The output's own scale (equal to the input's for the ops above; canonicalize_qdq folds only
    // equal scales, but the output's is the one its QuantizeLinear had).
    const auto qy = ctx.quantization.find(n.outputs[0]);
    const float y_scale =
        qy == ctx.quantization.end() ? scale : static_cast<float>(qy->second.scale);
    const std::string ys = y_scale == scale ? s
                                            : add_constant(g, n.name + "_output_scale",
                                                           ir::DType::kFloat32, {}, &y_scale);
    auto float_value = [&](const std::string& of) {
      return add_value(g, of + "_float", ir::DType::kFloat32, g.tensor(of).shape);
    };
    ir::Node dq, op = n, qn;
    dq.op_type = "DequantizeLinear";
    dq.name = unique_name(g, n.name + "_dequantize");
    dq.inputs = {n.inputs[0], s};
    dq.outputs = {float_value(n.inputs[0])};
    op.inputs[0] = dq.outputs[0];
    op.outputs = {float_value(n.outputs[0])};
    if (n.op_type == "Clip")  // int8 bounds -> float bounds
      for (std::size_t k = 1; k < op.inputs.size() && k < 3; ++k) {
        if (op.inputs[k].empty()) continue;
        const float b = static_cast<float>(constant_values(g.tensor(op.inputs[k])).at(0)) * scale;
        op.inputs[k] =
            add_constant(g, n.name + (k == 1 ? "_min" : "_max"), ir::DType::kFloat32, {}, &b);
      }
    qn.op_type = "QuantizeLinear";
    qn.name = unique_name(g, n.name + "_quantize");
    const std::int8_t zero = 0;
    qn.inputs = {op.outputs[0], ys,
                 add_constant(g, n.name + "_zero_point", ir::DType::kInt8, {}, &zero)};
    qn.outputs = n.outputs;
    for (const ir::Node* m : {&dq, &qn})
      ctx.place(m->name, Placement::kHost, why_float(n, g.opset));
    nodes.insert(nodes.end(), {dq, op, qn});
  }
  g.nodes = std::move(nodes);
}

}  // namespace npukit::compiler
