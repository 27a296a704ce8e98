// Pass 9d, fold_channel_copies: a channel copy (a 1x1 GatiConv with 0/1 weights, one 1 per
// output channel, no bias, requantized by exactly 1: channel_copies' shuffles and Slices, see
// channel_copy_sources) costs a layer; on the lowered graph most of them fold into a neighbour,
// exactly (docs/compiler.md, "Channel shuffle"):
//
//  * into its producer (free): when the copy is the only reader of a regular conv's output, that
//    conv computes the copied channels directly: kernel o of the new conv is kernel src(o) of the
//    old one, with its bias; a chain of convs that accumulate int32 sums into it (lower_concat's
//    copies, which are how a Concat before ShuffleNet's shuffle runs) is re-indexed the same way.
//    Each output value is the one the copy would have moved.
//  * into its consumers (costs MACs): when every reader is a regular conv (any kernel, stride and
//    padding: padding is 0 in both forms), each reads the copy's input instead, with weight column
//    src(o) = its old column o and zero columns for channels the copy dropped. The sum over the
//    extra columns adds only products with weight 0, so the int32 sums are identical. Taken when
//    the estimated cycles of the wider consumers are below those of the narrow ones plus the copy
//    (conv_cycles_estimate); --explain gives both numbers.
//
// Copies whose neighbours are not such convs (or that leave the device, are model outputs or are
// named by --dispatch) stay as 1x1 convs.
#include "compiler/geometry.h"
#include "compiler/passes.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace npukit::compiler {

namespace {

// A regular GatiConv whose only per-output-channel data are its weights and bias.
bool plain_conv(const Context& ctx, const ir::Node* n) {
  static const std::set<std::string> known = {"kernel_shape", "strides",     "pads",        "group",
                                              "quant_en",     "quant_scale", "quant_shift", "act",
                                              "act_param",    "dilations"};
  if (!n || n->op_type != "GatiConv" || n->domain != kGatiDomain || !ctx.on_device(n->name) ||
      n->get_int("group", 1) != 1 || n->inputs.size() < 2)
    return false;
  for (const auto& [k, v] : n->attributes)
    if (!known.count(k)) return false;
  const ir::Tensor* w = ctx.graph.find(n->inputs[1]);
  return w && w->is_constant() && w->dtype == ir::DType::kInt8 && w->shape.size() == 4;
}

// Both in one segment, as far as known: nodes lowering made have their segment only after the
// second partition, and a device conv reading only a device conv's output is in its segment.
bool same_segment(const Context& ctx, const std::string& a, const std::string& b) {
  auto ia = ctx.segment_of.find(a), ib = ctx.segment_of.find(b);
  return ia == ctx.segment_of.end() || ib == ctx.segment_of.end() || ia->second == ib->second;
}

ir::Node* find_node(ir::Graph& g, const std::string& name) {
  for (auto& n : g.nodes)
    if (n.name == name) return &n;
  return nullptr;
}

void erase_node(ir::Graph& g, const std::string& name) {
  g.nodes.erase(std::remove_if(g.nodes.begin(), g.nodes.end(),
                               [&](const ir::Node& n) { return n.name == name; }),
                g.nodes.end());
}

double cycles_of(const Context& ctx, const ir::Node& conv, std::int64_t c) {
  const ir::Graph& g = ctx.graph;
  const ir::Tensor& w = g.tensor(conv.inputs[1]);
  const ir::Tensor& y = g.tensor(conv.outputs[0]);
  const ConvGeometry geo = conv_geometry(g, conv, ctx.options.arch);
  return conv_cycles_estimate(c, w.shape[0], y.shape[2] * y.shape[3], w.shape[2] * w.shape[3], geo,
                              ctx.options.arch);
}

// The copy `p` (out[o] = x[src[o]]) folded into the convs that make x. False when it cannot.
bool fold_into_producer(Context& ctx, const ir::Node& p, const std::vector<std::int64_t>& src,
                        const std::set<std::string>& leaves) {
  ir::Graph& g = ctx.graph;
  const std::string& x = p.inputs[0];
  std::vector<std::string> chain;  // the producer, then the convs whose sums it accumulates
  for (std::string v = x;;) {
    const ir::Node* q = g.producer(v);
    if (!plain_conv(ctx, q) || !same_segment(ctx, q->name, p.name) || g.consumers(v).size() != 1 ||
        leaves.count(v) || leaves.count(q->name) ||
        g.tensor(q->inputs[1]).shape[0] != g.tensor(p.inputs[1]).shape[1] ||
        std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end())
      return false;
    chain.push_back(q->name);
    if (q->inputs.size() > 3 && !q->inputs[3].empty())
      v = q->inputs[3];
    else
      break;
  }
  const std::int64_t co = static_cast<std::int64_t>(src.size());
  const std::string y = p.outputs[0];
  for (std::size_t i = 0; i < chain.size(); ++i) {
    ir::Node& q = *find_node(g, chain[i]);
    const ir::Tensor w = g.tensor(q.inputs[1]);
    const std::int64_t per = w.shape[1] * w.shape[2] * w.shape[3];
    std::vector<std::int8_t> wq(static_cast<std::size_t>(co * per));
    for (std::int64_t o = 0; o < co; ++o)
      std::copy_n(w.as<std::int8_t>() + src[o] * per, per, wq.data() + o * per);
    q.inputs[1] = add_constant(g, q.name + "_channels", ir::DType::kInt8,
                               {co, w.shape[1], w.shape[2], w.shape[3]}, wq.data());
    if (q.inputs.size() > 2 && !q.inputs[2].empty()) {
      const ir::Tensor b = g.tensor(q.inputs[2]);
      std::vector<std::int32_t> bq(static_cast<std::size_t>(co));
      for (std::int64_t o = 0; o < co; ++o) bq[o] = b.as<std::int32_t>()[src[o]];
      q.inputs[2] = add_constant(g, q.name + "_channels_bias", ir::DType::kInt32, {co}, bq.data());
    }
    ir::Tensor& out = g.tensor(q.outputs[0]);
    out.shape[1] = co;
    if (i == 0) q.outputs[0] = y;
    auto& note = ctx.placement[q.name];
    ctx.place(q.name, Placement::kDevice,
              note.reason + "; its output channels reordered to what copy '" + p.name +
                  "' made (fold_channel_copies: the copy's layer saved)");
  }
  ctx.place(p.name, Placement::kDevice,
            "channel copy folded into the output channels of '" + chain.front() +
                "' (fold_channel_copies: no layer)");
  erase_node(g, p.name);
  return true;
}

// The copy `p` folded into the convs that read its output. False when it cannot or costs more.
bool fold_into_consumers(Context& ctx, const ir::Node& p, const std::vector<std::int64_t>& src,
                         const std::set<std::string>& leaves, std::set<std::string>& kept) {
  ir::Graph& g = ctx.graph;
  const std::string &x = p.inputs[0], &y = p.outputs[0];
  if (leaves.count(y) || leaves.count(p.name) ||
      std::find(g.outputs.begin(), g.outputs.end(), y) != g.outputs.end())
    return false;
  const auto readers = g.consumers(y);
  if (readers.empty()) return false;
  const std::int64_t ci = g.tensor(x).shape[1], co = static_cast<std::int64_t>(src.size());
  double narrow = cycles_of(ctx, p, ci), wide = 0;
  std::vector<std::string> names;
  for (const ir::Node* c : readers) {
    if (!plain_conv(ctx, c) || !same_segment(ctx, c->name, p.name) || c->inputs[0] != y ||
        g.tensor(c->inputs[1]).shape[1] != co)
      return false;
    for (std::size_t i = 1; i < c->inputs.size(); ++i)
      if (c->inputs[i] == y) return false;
    narrow += cycles_of(ctx, *c, co);
    wide += cycles_of(ctx, *c, ci);
    names.push_back(c->name);
  }
  if (wide >= narrow) {
    if (kept.insert(p.name).second)
      ctx.place(p.name, Placement::kDevice,
                ctx.placement[p.name].reason +
                    fmt::format("; kept: its readers reading the {} channels directly would cost "
                                "~{:.0f} cycles, with the copy ~{:.0f} (fold_channel_copies)",
                                ci, wide, narrow));
    return false;
  }
  for (const auto& name : names) {
    ir::Node& c = *find_node(g, name);
    const ir::Tensor w = g.tensor(c.inputs[1]);
    const std::int64_t kn = w.shape[0], area = w.shape[2] * w.shape[3];
    std::vector<std::int8_t> wq(static_cast<std::size_t>(kn * ci * area), 0);
    for (std::int64_t k = 0; k < kn; ++k)
      for (std::int64_t o = 0; o < co; ++o)
        std::copy_n(w.as<std::int8_t>() + (k * co + o) * area, area,
                    wq.data() + (k * ci + src[o]) * area);
    c.inputs[0] = x;
    c.inputs[1] = add_constant(g, c.name + "_columns", ir::DType::kInt8,
                               {kn, ci, w.shape[2], w.shape[3]}, wq.data());
    ctx.place(c.name, Placement::kDevice,
              ctx.placement[c.name].reason + "; reads '" + x +
                  "' directly through weight columns "
                  "placed where copy '" +
                  p.name + "' took its channels (fold_channel_copies)");
  }
  ctx.place(p.name, Placement::kDevice,
            fmt::format("channel copy folded into the weight columns of its {} reader(s) "
                        "(fold_channel_copies: ~{:.0f} cycles instead of ~{:.0f} with the copy)",
                        names.size(), wide, narrow));
  erase_node(g, p.name);
  return true;
}

}  // namespace

void fold_channel_copies(Context& ctx) {
  ir::Graph& g = ctx.graph;
  std::set<std::string> leaves(ctx.options.dispatch.begin(), ctx.options.dispatch.end()), kept;
  for (bool changed = true; changed;) {
    changed = false;
    for (int into_producer = 1; into_producer >= 0 && !changed; --into_producer)
      for (std::size_t i = 0; i < g.nodes.size() && !changed; ++i) {
        const ir::Node p = g.nodes[i];
        if (p.op_type != "GatiConv" || !ctx.on_device(p.name)) continue;
        const auto src = channel_copy_sources(g, p);
        if (src.empty()) continue;
        changed = into_producer ? fold_into_producer(ctx, p, src, leaves)
                                : fold_into_consumers(ctx, p, src, leaves, kept);
      }
  }
}

}  // namespace npukit::compiler
