// Pass 4, check_shapes: the importer infers shapes (onnx/); the compiler only needs them to be
// there and static for every value it might place on the device, because every instruction field
// and DRAM size derives from them. A missing or dynamic shape is reported here, naming the tensor,
// instead of surfacing later as a wrong field.
#include "common/error.h"
#include "compiler/passes.h"

namespace npukit::compiler {

void check_shapes(Context& ctx) {
  const ir::Graph& g = ctx.graph;
  for (const auto& in : g.inputs) {
    const ir::Tensor* t = g.find(in);
    if (!t) fail("graph input '{}' has no type or shape information", in);
    if (t->shape.empty() && !t->is_constant())
      fail("graph input '{}' has no shape; give the model a static input shape", in);
    for (auto d : t->shape)
      if (d < 0)
        fail(
            "graph input '{}' has a dynamic dimension ({}); the Gati needs static shapes: export"
            " the model with a fixed input size",
            in, d);
  }
  std::size_t index = 0;
  for (const auto& n : g.nodes) {
    for (const auto& out : n.outputs) {
      if (out.empty()) continue;
      const ir::Tensor* t = g.find(out);
      // Host-only values may stay unknown (the reference executor infers them at run time);
      // values of ops the device could run must be known.
      const bool device_candidate = why_not_on_device(g, n, ctx.options).empty();
      if (!device_candidate) continue;
      if (!t || t->dtype == ir::DType::kUndefined)
        fail(
            "node {} '{}' ({}): output '{}' has no inferred type; run shape inference on the model",
            index, n.name, n.op_type, out);
      for (auto d : t->shape)
        if (d < 0)
          fail("node {} '{}' ({}): output '{}' has a dynamic shape; the Gati needs static shapes",
               index, n.name, n.op_type, out);
    }
    ++index;
  }
}

}  // namespace npukit::compiler
