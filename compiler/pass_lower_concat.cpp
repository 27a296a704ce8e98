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
// On an image of more than 1024 pixels a copy that reads int32 sums may not need several channel
// iterations, so every input wider than N_SA starts its own chain there; the chains' int8 results
// (zeros outside their channels) are summed by EltWise adds with unit weights, also exact.
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
    // A conv that reads an int32 sum input needs one channel iteration when the image has more
    // than 1024 pixels, so there a copy of an input wider than N_SA must start a chain. Each such
    // input starts its own chain (the narrow inputs join the last one); every chain quantizes to
    // an int8 tensor of the full width (zeros outside its channels) and EltWise adds with
    // weights 1 merge them: each output value is one chain's value plus zeros, exact.
    const std::int64_t n_sa = ctx.options.arch.n_sa;
    const bool big = y.shape.at(2) * y.shape.at(3) > 1024;
    std::vector<std::vector<std::size_t>> chains;
    for (std::size_t k : order)
      if (chains.empty() || (big && g.tensor(n.inputs[k]).shape.at(1) > n_sa))
        chains.push_back({k});
      else
        chains.back().push_back(k);
    std::string merged;
    for (std::size_t ci = 0; ci < chains.size(); ++ci) {
      const bool last_chain = ci + 1 == chains.size();
      std::string previous;
      for (std::size_t i = 0; i < chains[ci].size(); ++i) {
        const std::size_t k = chains[ci][i];
        const std::int64_t offset = offsets[k];
        const std::string& x = n.inputs[k];
        const ir::Tensor& xt = g.tensor(x);
        const std::int64_t ck = xt.shape.at(1);
        if (xt.shape.size() != 4 || xt.shape[2] != y.shape.at(2) || xt.shape[3] != y.shape.at(3))
          fail("layer '{}': concat input '{}' is not a [N, C, {}, {}] image", n.name, x,
               y.shape.at(2), y.shape.at(3));
        std::vector<std::int8_t> w(static_cast<std::size_t>(total * ck), 0);
        for (std::int64_t j = 0; j < ck; ++j)
          w[static_cast<std::size_t>((offset + j) * ck + j)] = 1;
        const bool last = i + 1 == chains[ci].size();
        const bool final_node = last && last_chain && chains.size() == 1;
        ir::Node c;
        c.name = final_node ? n.name : unique_name(g, n.name + "_copy" + std::to_string(k));
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
          c.outputs = {final_node ? n.outputs[0]
                                  : add_value(g, n.name + "_part" + std::to_string(ci),
                                              ir::DType::kInt8, y.shape)};
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
        const std::string made = c.outputs[0];
        out.push_back(std::move(c));
        if (!last || chains.size() == 1) continue;
        if (ci == 0) {
          merged = made;
          continue;
        }
        // merged + this chain's part, both at the concat's scale: a_scale = b_scale = 1.0 in Q10, M
        // = 1.
        ir::Node e;
        e.name = last_chain ? n.name : unique_name(g, n.name + "_merge" + std::to_string(ci));
        e.op_type = "GatiEltwise";
        e.domain = kGatiDomain;
        e.inputs = {merged, made};
        e.outputs = {last_chain ? n.outputs[0]
                                : add_value(g, n.name + "_merged" + std::to_string(ci),
                                            ir::DType::kInt8, y.shape)};
        e.attributes["op"] = std::string("add");
        e.attributes["a_scale"] = std::int64_t{1024};
        e.attributes["b_scale"] = std::int64_t{1024};
        const ScaleShift q = choose_scale_shift(1.0, "layer '" + n.name + "'");
        e.attributes["quant_en"] = std::int64_t{1};
        e.attributes["quant_scale"] = q.scale;
        e.attributes["quant_shift"] = q.shift;
        note_errata_rewrite(
            ctx, e.name, n.name, "lower_concat", erratum,
            fmt::format(
                "{}; on an image over 1024 pixels with {} inputs wider than N_SA, {} copy "
                "chains merged by EltWise adds of disjoint channels; this one adds chain {}",
                how, chains.size(), chains.size(), ci));
        merged = e.outputs[0];
        out.push_back(std::move(e));
      }
    }
  }
  g.nodes = std::move(out);
}

}  // namespace npukit::compiler
