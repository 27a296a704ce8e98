// Pass 8, fuse_tail: a megablock's TailBlock quantizes, applies ReLU/Clip/LeakyReLU and (CONV
// only) a global average pool in one pass (gati.md 7.2). So a GatiConv/GatiFC/GatiEltwise whose
// only consumer is
//   * a pure activation (the single-operand GatiEltwise "add" that lower_to_gati makes of Relu
//     and Clip), or
//   * (GatiConv, with --allow-errata only: GblPoolEn is a v1.0.0 erratum) a global average
//     GatiPool,
// absorbs it: one megablock instead of two, and no DRAM round trip.
//
// A pure activation also rescales by r = a_scale * quant_scale / 2^(quant_shift + 10). When
// r == 1 (Relu/Clip) the fused result is bit-identical to the unfused pair. When r != 1 (a
// rescaling activation) the producer's multiplier becomes M * r: ReLU, Clip and LeakyReLU are
// positively homogeneous, so this is the same real function with one rounding instead of two.
// (QLinearLeakyRelu no longer reaches here as a tail activation: lower_to_gati makes it two
// EltWise adds that match onnxruntime.) The global pool's formula is the tail's own, so that
// fusion is always exact.
#include "common/error.h"
#include "compiler/passes.h"

#include <algorithm>
#include <cmath>

namespace npukit::compiler {

namespace {

bool pure_activation(const ir::Node& n) {
  return n.op_type == "GatiEltwise" && n.get_string("op", "") == "add" &&
         n.get_int("b_scale", 0) == 0 && n.get_int("a_zero_point", 0) == 0 &&
         n.get_int("quant_en", 1) == 1 && n.inputs.size() >= 1 &&
         (n.inputs.size() < 2 || n.inputs[1].empty() || n.inputs[1] == n.inputs[0]);
}

double activation_ratio(const ir::Node& n) {
  return static_cast<double>(n.get_int("a_scale", 0)) *
         static_cast<double>(n.get_int("quant_scale", 1)) /
         std::ldexp(1.0, static_cast<int>(n.get_int("quant_shift", 0) + 10));
}

bool has_plain_tail(const ir::Node& n) {
  return (n.op_type == "GatiConv" || n.op_type == "GatiFC" || n.op_type == "GatiEltwise") &&
         n.get_int("quant_en", 1) == 1 && n.get_string("act", "none") == "none" &&
         n.get_int("global_pool", 0) == 0;
}

bool exposed(const Context& ctx, const std::string& value) {
  const auto& g = ctx.graph;
  if (std::find(g.outputs.begin(), g.outputs.end(), value) != g.outputs.end()) return true;
  for (const auto& d : ctx.options.dispatch)
    if (d == value) return true;
  return false;
}

std::size_t index_of(const ir::Graph& g, const ir::Node* n) {
  return static_cast<std::size_t>(n - g.nodes.data());
}

}  // namespace

void fuse_tail(Context& ctx) {
  ir::Graph& g = ctx.graph;
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t i = 0; i < g.nodes.size() && !changed; ++i) {
      ir::Node& p = g.nodes[i];
      if (!is_gati(p) || !ctx.on_device(p.name) || p.outputs.size() != 1) continue;
      const std::string mid = p.outputs[0];
      auto cons = g.consumers(mid);
      if (cons.size() != 1 || exposed(ctx, mid) || !ctx.on_device(cons[0]->name)) continue;
      for (const auto& d : ctx.options.dispatch)
        if (d == p.name) goto next;  // the user wants this layer's own output
      {
        const ir::Node& c = *cons[0];
        const std::size_t ci = index_of(g, cons[0]);
        const bool act = has_plain_tail(p) && pure_activation(c);
        // GblPoolEn is a v1.0.0 erratum (gati.md 14.15): only with --allow-errata; otherwise
        // pools_as_convs turns the pool into a depthwise conv.
        const bool pool = ctx.options.allow_errata && p.op_type == "GatiConv" &&
                          p.get_int("quant_en", 1) == 1 && p.get_int("global_pool", 0) == 0 &&
                          c.op_type == "GatiPool" && c.get_string("mode", "") == "global_average";
        if (!act && !pool) continue;
        const std::string absorbed = c.name;
        if (act) {
          const double r = activation_ratio(c);
          if (r != 1.0) {
            const double m = static_cast<double>(p.get_int("quant_scale", 1)) /
                             std::ldexp(1.0, static_cast<int>(p.get_int("quant_shift", 0))) * r;
            const auto q =
                choose_scale_shift(m, "layer '" + p.name + "' fused with '" + c.name + "'");
            p.attributes["quant_scale"] = q.scale;
            p.attributes["quant_shift"] = q.shift;
          }
          for (const char* a : {"act", "act_param", "neg_alpha", "pos_alpha"})
            if (c.has(a)) p.attributes[a] = c.attributes.at(a);
        } else {
          p.attributes["global_pool"] = std::int64_t{1};
          p.attributes["global_pool_scale"] = c.get_int("pool_scale", 0);
          p.attributes["global_pool_shift"] = c.get_int("pool_shift", 0);
        }
        p.outputs[0] = c.outputs.at(0);
        g.tensors.erase(mid);
        g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(ci));
        ctx.place(absorbed, Placement::kDevice,
                  std::string("fused into the TailBlock of '") + g.nodes[i].name + "' (fuse_tail)");
        changed = true;
      }
    next:;
    }
  }
}

}  // namespace npukit::compiler
