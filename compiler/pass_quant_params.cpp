// Pass 3b, quant_params: the scale and zero point of every int8 value of the (canonical QOperator)
// graph, read off the ops that produce or consume it (QuantizeLinear/DequantizeLinear, QLinear*
// ops' scale inputs; MaxPool/Relu/Clip/Flatten/Reshape/Resize pass their input's on), into
// ctx.quantization, before lowering replaces the ops that state them. The manifest tells the
// runtime with it how to (de)quantize what crosses a host/device boundary.
#include "compiler/passes.h"

namespace npukit::compiler {

void quant_params(Context& ctx) {
  const ir::Graph& g = ctx.graph;
  std::map<std::string, QuantInfo> q;
  auto take = [&](const ir::Node& n, const std::string& value, std::size_t s, std::size_t z) {
    if (value.empty() || s >= n.inputs.size() || q.count(value)) return;
    const ir::Tensor* st = g.find(n.inputs[s]);
    if (!st || !st->is_constant()) return;
    const auto sv = constant_values(*st);
    if (sv.size() != 1) return;
    QuantInfo info{sv[0], 0};
    if (z < n.inputs.size() && !n.inputs[z].empty())
      if (const ir::Tensor* zt = g.find(n.inputs[z]); zt && zt->is_constant())
        info.zero_point = static_cast<std::int64_t>(constant_values(*zt).at(0));
    q[value] = info;
  };
  for (int round = 0; round < 2; ++round) {
    for (const auto& n : g.nodes) {
      const auto& op = n.op_type;
      const auto in = [&](std::size_t i) {
        return i < n.inputs.size() ? n.inputs[i] : std::string();
      };
      const std::string out = n.outputs.empty() ? "" : n.outputs[0];
      if (op == "QuantizeLinear")
        take(n, out, 1, 2);
      else if (op == "DequantizeLinear")
        take(n, in(0), 1, 2);
      else if (op == "QLinearConv" || op == "QLinearConvTranspose")
        take(n, in(0), 1, 2), take(n, out, 6, 7);
      else if (op == "QGemm")
        take(n, in(0), 1, 2), take(n, out, 7, 8);
      else if (op == "QLinearMatMul")
        take(n, in(0), 1, 2), take(n, out, 6, 7);
      else if (op == "QLinearAdd" || op == "QLinearMul")
        take(n, in(0), 1, 2), take(n, in(3), 4, 5), take(n, out, 6, 7);
      else if (op == "QLinearSigmoid" || op == "QLinearLeakyRelu" || op == "QLinearAveragePool" ||
               op == "QLinearGlobalAveragePool")
        take(n, in(0), 1, 2), take(n, out, 3, 4);
      else if (op == "QLinearConcat") {
        take(n, out, 0, 1);
        for (std::size_t k = 2; k + 2 < n.inputs.size() + 1 && k < n.inputs.size(); k += 3)
          take(n, in(k), k + 1, k + 2);
      } else if ((op == "MaxPool" || op == "Relu" || op == "Clip" || op == "Flatten" ||
                  op == "Reshape" || op == "Resize" || op == "DepthToSpace" || op == "Slice") &&
                 q.count(in(0)) && !q.count(out))
        q[out] = q[in(0)];
    }
  }
  ctx.quantization = std::move(q);
}

}  // namespace npukit::compiler
