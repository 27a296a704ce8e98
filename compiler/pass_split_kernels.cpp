// Pass 10, split_kernels: the systolic array holds one kernel per column in its ROW rows (the
// flattened kh*KW + kw index, gati.md 6.2), so a kernel larger than 3x3 runs as several convs over
// horizontal bands of kernel rows whose int32 partial sums are accumulated through the accumulant
// input (OutputBlock.AccumulantReadFirst), gati.md 3.2 "split_large_kernel".
//
// Why bands of whole rows: v16 can shift a piece's window vertically (PadTop/PadBottom shrink, and
// StartRowSkip/EndRowSkip drop input rows the padding cannot absorb) but has no column
// counterpart, so a piece keeps all KW columns. A band holds min(3, floor(ROW / KW)) rows: 3x3
// pieces for kernels up to 3 wide, single rows for wider ones (1x5, 1x7 on 9,x,x arrays).
//
// Piece b covers kernel rows [r0, r1). In the lowered graph it is a GatiConv with the original
// kernel shape and pads, the weights outside its rows zeroed, and attribute kernel_rows = [r0, r1]
// (the reference runs it unchanged). On the hardware it is a conv with weights w[:, :, r0:r1, :]
// and pads [top - r0, left, bottom - (KH - r1), right], which gives the same OH (the span
// IH + top + bottom - KH is unchanged); a negative top/bottom pad there means "skip that many
// input rows", i.e. StartRowSkip/EndRowSkip (conv_geometry). Every piece but the last outputs the
// int32 sum (quant_en = 0, OpWidth 4, no bias); piece b > 0 also reads piece b-1's sum as its `acc`
// input; the last piece has the bias, the quantizer, the activation and the global pool of the
// original conv.
#include "common/error.h"
#include "compiler/passes.h"

#include <algorithm>

namespace npukit::compiler {

void split_kernels(Context& ctx) {
  ir::Graph& g = ctx.graph;
  const int rows = ctx.options.arch.rows;
  std::vector<ir::Node> out;
  for (const ir::Node& n : g.nodes) {
    if (n.op_type != "GatiConv") {
      out.push_back(n);
      continue;
    }
    const ir::Tensor& w = g.tensor(n.inputs[1]);
    const std::int64_t kn = w.shape[0], kc = w.shape[1], kh = w.shape[2], kw = w.shape[3];
    if (kh <= 3 && kw <= 3) {
      out.push_back(n);
      continue;
    }
    if (kw > rows)
      fail(
          "layer '{}': kernel {}x{} is {} columns wide; a piece of a split kernel keeps all its "
          "columns and the {} array has {} rows (v16 has no column skip)",
          n.name, kh, kw, kw, ctx.options.arch.str(), rows);
    const std::int64_t band = std::max<std::int64_t>(1, std::min<std::int64_t>(3, rows / kw));
    const auto pads = n.get_ints("pads", {0, 0, 0, 0});
    const ir::Tensor& x = g.tensor(n.inputs[0]);
    const auto strides = n.get_ints("strides", {1, 1});
    const std::int64_t oh = conv_out(x.shape[2], pads[0], pads[2], kh, strides[0]);
    const std::int64_t ow = conv_out(x.shape[3], pads[1], pads[3], kw, strides[1]);
    const auto* wsrc = w.as<std::int8_t>();
    std::string previous;
    const std::int64_t pieces = (kh + band - 1) / band;
    for (std::int64_t b = 0; b < pieces; ++b) {
      const std::int64_t r0 = b * band, r1 = std::min(kh, r0 + band);
      const bool last = b == pieces - 1;
      // In the lowered graph a piece keeps the full kernel shape with the rows outside its band
      // zeroed, so it is an ordinary GatiConv the reference runs as is; `kernel_rows` tells the
      // back end which rows the hardware piece really has (conv_geometry, convert_layouts).
      std::vector<std::int8_t> masked(static_cast<std::size_t>(kn * kc * kh * kw), 0);
      for (std::int64_t o = 0; o < kn; ++o)
        for (std::int64_t c = 0; c < kc; ++c)
          for (std::int64_t r = r0; r < r1; ++r)
            for (std::int64_t s = 0; s < kw; ++s) {
              const std::size_t i = static_cast<std::size_t>(((o * kc + c) * kh + r) * kw + s);
              masked[i] = wsrc[i];
            }
      ir::Node p = n;
      p.name =
          last ? n.name
               : unique_name(g, n.name + "_rows" + std::to_string(r0) + "_" + std::to_string(r1));
      p.inputs[1] = add_constant(g, n.name + "_w_rows" + std::to_string(r0), ir::DType::kInt8,
                                 {kn, kc, kh, kw}, masked.data());
      p.attributes["kernel_rows"] = std::vector<std::int64_t>{r0, r1};
      p.inputs.resize(4);
      p.inputs[3] = previous;
      if (!last) {
        p.inputs[2] = "";  // the bias is added once, by the last piece
        for (const char* a :
             {"act", "act_param", "neg_alpha", "pos_alpha", "global_pool", "global_pool_scale",
              "global_pool_shift", "quant_scale", "quant_shift"})
          p.attributes.erase(a);
        p.attributes["quant_en"] = std::int64_t{0};
        ir::Tensor partial;
        partial.name = unique_name(g, n.name + "_partial_rows" + std::to_string(r1));
        partial.dtype = ir::DType::kInt32;
        partial.shape = {x.shape[0], kn, oh, ow};
        p.outputs = {partial.name};
        previous = partial.name;
        g.tensors[partial.name] = partial;
        ctx.place(p.name, Placement::kDevice,
                  "kernel rows " + std::to_string(r0) + ".." + std::to_string(r1 - 1) + " of the " +
                      std::to_string(kh) + "x" + std::to_string(kw) + " kernel of '" + n.name +
                      "' (split_kernels), int32 partial sums");
      } else if (previous.empty()) {
        p.inputs.resize(3);
      }
      out.push_back(std::move(p));
    }
  }
  g.nodes = std::move(out);
}

}  // namespace npukit::compiler
