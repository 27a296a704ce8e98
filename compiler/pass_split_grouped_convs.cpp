// Pass 10b, split_grouped_convs: lower_to_gati runs a grouped conv (regnet, resnext) as one
// regular conv with block-diagonal weights, which costs `group` times its MACs and, worse on
// small images, ceil(C / N_SA) x ceil(KN / COLS) passes. The alternative is one conv per group
// (or per m groups, block-diagonal inside), each reading its groups' input channels and writing
// its groups' output channels. In the Gati's activation layout (gati.md 6.1) a run of whole N_SA
// channel groups is one contiguous byte range, so both are plain addresses: no copy at all.
//
// In the lowered graph a piece reads an ONNX Slice of the input along channels and the pieces'
// outputs meet in an ONNX Concat along channels; both stay on the device as *views*, not layers:
// collect_device_program makes their tensors aliases (DeviceTensor::alias_of) at a byte offset
// of the tensor they view, so the pieces write straight into the conv's output and read straight
// from its input. The reference executor runs Slice/Concat as written, so `npukit compare` and
// the tests see exactly what the device is told.
//
// The choice is by estimated cycles (the fitted per-layer and per-pass constants of gati.md 14.14
// that partition uses, plus MACs at 77 % of the array): for every m dividing `group` whose pieces
// have whole N_SA channel groups in and out (and, on 9,4,4, an even KernelItr, so no padding
// kernels spill into the next piece), the cheapest of block-diagonal and one conv per m groups.
// Kept block-diagonal: a conv whose input is not made by a device layer, whose output leaves the
// device or is asked for with --dispatch, or that accumulates int32 sums.
#include "compiler/geometry.h"
#include "compiler/passes.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace npukit::compiler {

void split_grouped_convs(Context& ctx) {
  ir::Graph& g = ctx.graph;
  const isa::SaArch& arch = ctx.options.arch;
  std::set<std::string> leaves(g.outputs.begin(), g.outputs.end());
  leaves.insert(ctx.options.dispatch.begin(), ctx.options.dispatch.end());
  const std::int64_t kn_align =
      (!ctx.options.allow_errata && arch == isa::kArch9x4x4) ? 2 * arch.cols : 1;
  std::vector<ir::Node> out;
  for (const ir::Node& n : g.nodes) {
    const std::int64_t G = n.get_int("block_diagonal_groups", 0);
    const bool acc = n.inputs.size() > 3 && !n.inputs[3].empty();
    if (n.op_type != "GatiConv" || G <= 1 || !ctx.on_device(n.name) || acc ||
        leaves.count(n.name) || leaves.count(n.outputs[0])) {
      out.push_back(n);
      continue;
    }
    const std::string& x = n.inputs[0];
    const std::string& y = n.outputs[0];
    const ir::Node* p = g.producer(x);
    bool ok = p && is_gati(*p) && ctx.on_device(p->name);
    for (const auto* c : g.consumers(y)) ok = ok && ctx.on_device(c->name) && is_gati(*c);
    const ir::Tensor& w = g.tensor(n.inputs[1]);
    const ir::Tensor& xt = g.tensor(x);
    const ir::Tensor& yt = g.tensor(y);
    if (!ok || w.shape.size() != 4 || xt.shape.size() != 4 || yt.shape.size() != 4) {
      out.push_back(n);
      continue;
    }
    const std::int64_t KN = w.shape[0], C = w.shape[1], area = w.shape[2] * w.shape[3];
    const std::int64_t cg = C / G, kng = KN / G, pixels = yt.shape[2] * yt.shape[3];
    const ConvGeometry geo = conv_geometry(g, n, arch);
    const double block_diagonal = conv_cycles_estimate(C, KN, pixels, area, geo, arch);
    double best = block_diagonal;
    std::int64_t best_m = G;
    for (std::int64_t m = 1; m < G; ++m) {
      if (G % m != 0 || (m * cg) % arch.n_sa != 0 || (m * kng) % arch.n_sa != 0 ||
          (m * kng) % kn_align != 0)
        continue;
      const double cost = static_cast<double>(G / m) *
                          conv_cycles_estimate(m * cg, m * kng, pixels, area, geo, arch);
      if (cost < best) best = cost, best_m = m;
    }
    if (best_m == G) {
      out.push_back(n);
      continue;
    }
    const std::int64_t pieces = G / best_m, pc = best_m * cg, pk = best_m * kng;
    const int segment = ctx.segment_of.count(n.name) ? ctx.segment_of.at(n.name) : 0;
    const std::string why = fmt::format(
        "grouped conv '{}' ({} groups) as {} convs of {} groups each (~{:.0f} cycles, "
        "block-diagonal ~{:.0f}; split_grouped_convs)",
        n.name, G, pieces, best_m, best, block_diagonal);
    auto place = [&](const std::string& name, const std::string& reason) {
      ctx.place(name, Placement::kDevice, reason);
      ctx.segment_of[name] = segment;
    };
    const auto* wsrc = w.as<std::int8_t>();
    const ir::Tensor* bias =
        n.inputs.size() > 2 && !n.inputs[2].empty() ? &g.tensor(n.inputs[2]) : nullptr;
    ir::Node cat;
    cat.op_type = "Concat";
    cat.name = unique_name(g, n.name + "_groups");
    cat.attributes["axis"] = std::int64_t{1};
    cat.outputs = {y};
    for (std::int64_t q = 0; q < pieces; ++q) {
      const std::int64_t c0 = q * pc, k0 = q * pk;
      const std::string tag = std::to_string(q);
      // The piece's input channels [c0, c0 + pc): a view of x.
      ir::Node s = channel_slice(g, unique_name(g, n.name + "_in" + tag), x, c0, c0 + pc);
      place(s.name, "view: input channels " + std::to_string(c0) + ".." +
                        std::to_string(c0 + pc - 1) + " of a " + why);
      // Its weights: rows [k0, k0 + pk), columns [c0, c0 + pc) of the block-diagonal weights.
      std::vector<std::int8_t> wq(static_cast<std::size_t>(pk * pc * area));
      for (std::int64_t k = 0; k < pk; ++k)
        for (std::int64_t c = 0; c < pc; ++c)
          for (std::int64_t a = 0; a < area; ++a)
            wq[static_cast<std::size_t>((k * pc + c) * area + a)] =
                wsrc[((k0 + k) * C + c0 + c) * area + a];
      ir::Node piece = n;
      piece.name = unique_name(g, n.name + "_group" + tag);
      piece.attributes.erase("block_diagonal_groups");
      piece.inputs = {s.outputs[0],
                      add_constant(g, piece.name + "_weight", ir::DType::kInt8,
                                   {pk, pc, w.shape[2], w.shape[3]}, wq.data()),
                      ""};
      if (bias) {
        const auto* b = bias->as<std::int32_t>();
        piece.inputs[2] = add_constant(g, piece.name + "_bias", ir::DType::kInt32, {pk}, b + k0);
      }
      piece.outputs = {
          add_value(g, piece.name + "_out", yt.dtype, {yt.shape[0], pk, yt.shape[2], yt.shape[3]})};
      place(piece.name, "int8 QLinearConv lowers to a Gati megablock: output channels " +
                            std::to_string(k0) + ".." + std::to_string(k0 + pk - 1) + " of a " +
                            why);
      cat.inputs.push_back(piece.outputs[0]);
      out.push_back(std::move(s));
      out.push_back(std::move(piece));
    }
    place(cat.name, "view: the pieces write side by side into the output of a " + why);
    out.push_back(std::move(cat));
  }
  g.nodes = std::move(out);
}

ir::Node channel_slice(ir::Graph& g, const std::string& name, const std::string& x, std::int64_t c0,
                       std::int64_t c1) {
  const ir::Tensor& xt = g.tensor(x);
  const std::int64_t axes = 1;
  ir::Node s;
  s.op_type = "Slice";
  s.name = name;
  s.inputs = {x, add_constant(g, name + "_starts", ir::DType::kInt64, {1}, &c0),
              add_constant(g, name + "_ends", ir::DType::kInt64, {1}, &c1),
              add_constant(g, name + "_axes", ir::DType::kInt64, {1}, &axes)};
  s.outputs = {add_value(g, name, xt.dtype, {xt.shape[0], c1 - c0, xt.shape[2], xt.shape[3]})};
  return s;
}

bool is_device_view(const ir::Node& n) {
  return (n.domain.empty() || n.domain == "ai.onnx") &&
         (n.op_type == "Slice" || n.op_type == "Concat");
}

}  // namespace npukit::compiler
