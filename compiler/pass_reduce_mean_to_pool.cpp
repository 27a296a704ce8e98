// Pass 0b, reduce_mean_to_pool: ReduceMean over the two spatial axes of a 4-D tensor (mnasnet,
// shufflenet and efficientnet heads: torch's x.mean([2, 3])) is GlobalAveragePool, which the
// quantization passes and the device know:
//   keepdims = 1  ->  GlobalAveragePool
//   keepdims = 0  ->  GlobalAveragePool -> Flatten   ([N, C, 1, 1] -> [N, C]); when the mean's
//                     only reader is a QuantizeLinear, the Flatten moves after it (GAP -> Q ->
//                     Flatten), so canonicalize_qdq sees DequantizeLinear -> GAP -> QuantizeLinear
//                     and an int8 Flatten in front of an FC folds into the FC.
// Axes come from the attribute (opset < 18) or the constant second input (opset >= 18); {2, 3},
// {-2, -1} and any order of them qualify. Other reductions stay as they are.
#include "common/error.h"
#include "compiler/passes.h"

#include <algorithm>
#include <map>

namespace npukit::compiler {

namespace {

bool spatial_axes(const ir::Graph& g, const ir::Node& n) {
  std::vector<std::int64_t> axes;
  if (n.inputs.size() > 1 && !n.inputs[1].empty()) {
    const ir::Tensor* t = g.find(n.inputs[1]);
    if (!t || !t->is_constant()) return false;
    for (double v : constant_values(*t)) axes.push_back(static_cast<std::int64_t>(v));
  } else {
    axes = n.get_ints("axes", {});
  }
  if (axes.size() != 2) return false;
  for (auto& a : axes)
    if (a < 0) a += 4;
  std::sort(axes.begin(), axes.end());
  return axes == std::vector<std::int64_t>{2, 3};
}

}  // namespace

void reduce_mean_to_pool(Context& ctx) {
  ir::Graph& g = ctx.graph;
  std::vector<ir::Node> out;
  out.reserve(g.nodes.size());
  std::map<std::size_t, ir::Node> after;  // a Flatten to insert right behind node i
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (i > 0 && after.count(i - 1)) {
      out.push_back(std::move(after.at(i - 1)));
      after.erase(i - 1);
    }
    ir::Node n = g.nodes[i];
    const ir::Tensor* x = n.inputs.empty() ? nullptr : g.find(n.inputs[0]);
    if (n.op_type != "ReduceMean" || !n.domain.empty() || n.outputs.size() != 1 || !x ||
        x->shape.size() != 4 || !spatial_axes(g, n) || n.get_int("noop_with_empty_axes", 0) != 0) {
      out.push_back(std::move(n));
      continue;
    }
    const std::string name = n.name, y = n.outputs[0];
    const ir::Shape pooled = {x->shape[0], x->shape[1], 1, 1};
    ir::Node gap;
    gap.name = name;
    gap.op_type = "GlobalAveragePool";
    gap.inputs = {n.inputs[0]};
    if (n.get_int("keepdims", 1) != 0) {
      gap.outputs = {y};
      out.push_back(std::move(gap));
      ctx.place(name, Placement::kHost,
                "ReduceMean over H and W is GlobalAveragePool (reduce_mean_to_pool)");
      continue;
    }
    const ir::DType dtype = g.tensor(y).dtype;
    const std::string t = add_value(g, name + "_pooled", dtype, pooled);
    gap.outputs = {t};
    out.push_back(std::move(gap));
    ir::Node flat;
    flat.name = unique_name(g, name + "_flatten");
    flat.op_type = "Flatten";
    flat.attributes["axis"] = std::int64_t{1};
    auto readers = g.consumers(y);
    const bool outside = std::find(g.outputs.begin(), g.outputs.end(), y) != g.outputs.end();
    if (!outside && readers.size() == 1 && readers[0]->op_type == "QuantizeLinear" &&
        readers[0]->domain.empty() && readers[0]->outputs.size() == 1 &&
        g.find(readers[0]->outputs[0]) && !g.find(readers[0]->outputs[0])->shape.empty()) {
      // GAP -> QuantizeLinear -> Flatten: the quantizer (a later node) is rewritten in place.
      const std::size_t qi = static_cast<std::size_t>(readers[0] - g.nodes.data());
      ir::Node& q = g.nodes[qi];
      const std::string yq = q.outputs[0];
      const std::string tq = add_value(g, name + "_pooled_quantized", g.tensor(yq).dtype, pooled);
      q.inputs[0] = t;
      q.outputs[0] = tq;
      g.tensors.erase(y);
      flat.inputs = {tq};
      flat.outputs = {yq};
      after[qi] = std::move(flat);  // (qi > i: the graph is in execution order)
    } else {
      flat.inputs = {t};
      flat.outputs = {y};
      out.push_back(std::move(flat));
    }
    ctx.place(name, Placement::kHost,
              "ReduceMean over H and W without keepdims is GlobalAveragePool + Flatten "
              "(reduce_mean_to_pool)");
  }
  for (auto& [i, flat] : after) out.push_back(std::move(flat));  // behind the last node
  g.nodes = std::move(out);
}

}  // namespace npukit::compiler
