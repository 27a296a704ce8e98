// Pass 10, lower_concat: CONCAT never raises layer_done on the v1.0.0 RTL, so nothing after it
// runs and its dispatch never happens, and it drops data when H*W is not a multiple of 32/N_SA
// (gati.md 14.15). Unless --allow-errata, no CONCAT instruction is emitted: a GatiConcat of n
// inputs (any n, any channel counts and image shape) becomes a chain of n 1x1 GatiConvs that
// copy input k into channels [o_k, o_k + C_k) of the output:
//
//   conv k: x = input k, w[C, C_k, 1, 1] with w[o_k + j, j] = 1 (0 elsewhere), acc = the int32
//           output of conv k-1; every conv but the last outputs int32 sums (quant_en 0, as
//           split_kernels' pieces), the last requantizes with scale 1, shift 0.
//
// Each output channel receives exactly one input value times 1, so the result equals the concat
// bit for bit (inputs with other scales were requantized by lower_to_gati's EltWise before).
// Each copy's placement note names the concat and the erratum (--explain).
#include "common/error.h"
#include "compiler/errata_passes.h"
#include "compiler/passes.h"

#include <fmt/format.h>

#include <algorithm>

namespace npukit::compiler {

void lower_concat(Context& ctx) {
  if (ctx.options.allow_errata) return;
  ir::Graph& g = ctx.graph;
  std::vector<ir::Node> out;
  for (const ir::Node& n : g.nodes) {
    if (n.op_type != "GatiConcat" || !ctx.on_device(n.name)) {
      out.push_back(n);
      continue;
    }
    const ir::Tensor& y = g.tensor(n.outputs.at(0));
    const std::int64_t total = y.shape.at(1);
    const std::string erratum = "E7 CONCAT never completes / E8 CONCAT pixel padding";
    const std::string how =
        fmt::format("concat of {} inputs ({} channels) as {} chained 1x1 copy convs",
                    n.inputs.size(), total, n.inputs.size());
    // Offsets follow the input order; the copies run widest input first, because a conv that
    // reads an int32 sum input and needs several channel iterations is limited to 1024 output
    // pixels (generate_instructions): only the first copy may have both.
    std::vector<std::int64_t> offsets;
    std::vector<std::size_t> order;
    for (std::int64_t o = 0; const auto& in : n.inputs) {
      offsets.push_back(o);
      order.push_back(order.size());
      o += g.tensor(in).shape.at(1);
    }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return g.tensor(n.inputs[a]).shape.at(1) > g.tensor(n.inputs[b]).shape.at(1);
    });
    const std::int64_t n_sa = ctx.options.arch.n_sa;
    bool fits = true;
    for (std::size_t i = 1; i < order.size(); ++i)
      fits = fits && (g.tensor(n.inputs[order[i]]).shape.at(1) <= n_sa ||
                      y.shape.at(2) * y.shape.at(3) <= 1024);
    if (!fits) {  // check_limits refuses the CONCAT (erratum) and says why
      out.push_back(n);
      continue;
    }
    std::string previous;
    for (std::size_t i = 0; i < order.size(); ++i) {
      const std::size_t k = order[i];
      const std::int64_t offset = offsets[k];
      const std::string& x = n.inputs[k];
      const ir::Tensor& xt = g.tensor(x);
      const std::int64_t ck = xt.shape.at(1);
      if (xt.shape.size() != 4 || xt.shape[2] != y.shape.at(2) || xt.shape[3] != y.shape.at(3))
        fail("layer '{}': concat input '{}' is not a [N, C, {}, {}] image", n.name, x,
             y.shape.at(2), y.shape.at(3));
      std::vector<std::int8_t> w(static_cast<std::size_t>(total * ck), 0);
      for (std::int64_t j = 0; j < ck; ++j) w[static_cast<std::size_t>((offset + j) * ck + j)] = 1;
      const bool last = i + 1 == order.size();
      ir::Node c;
      c.name = last ? n.name : unique_name(g, n.name + "_copy" + std::to_string(k));
      c.op_type = "GatiConv";
      c.domain = kGatiDomain;
      c.inputs = {x,
                  add_constant(g, n.name + "_place" + std::to_string(k), ir::DType::kInt8,
                               {total, ck, 1, 1}, w.data()),
                  "", previous};
      if (previous.empty()) c.inputs.resize(3);
      c.attributes["kernel_shape"] = std::vector<std::int64_t>{1, 1};
      c.attributes["strides"] = std::vector<std::int64_t>{1, 1};
      c.attributes["pads"] = std::vector<std::int64_t>{0, 0, 0, 0};
      c.attributes["group"] = std::int64_t{1};
      if (last) {
        c.outputs = {n.outputs[0]};
        c.attributes["quant_en"] = std::int64_t{1};
        c.attributes["quant_scale"] = std::int64_t{1};
        c.attributes["quant_shift"] = std::int64_t{0};
      } else {
        previous = add_value(g, n.name + "_sums" + std::to_string(k), ir::DType::kInt32,
                             {y.shape[0], total, y.shape[2], y.shape[3]});
        c.outputs = {previous};
        c.attributes["quant_en"] = std::int64_t{0};
      }
      note_errata_rewrite(ctx, c.name, n.name, "lower_concat", erratum,
                          fmt::format("{}; this one copies '{}' into channels {}..{}", how, x,
                                      offset, offset + ck - 1));
      out.push_back(std::move(c));
    }
  }
  g.nodes = std::move(out);
}

}  // namespace npukit::compiler
