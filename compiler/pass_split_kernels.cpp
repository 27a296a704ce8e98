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
//
// A split kernel over more than N_SA input channels with more than 1024 output pixels would need
// the accumulant region twice (its channel iterations accumulate through it too, gati.md 3.2), so
// such a conv is also split by input channels: one chain of row bands per group of N_SA channels,
// each band reading its group as a channel view (an ONNX Slice the device takes as an address,
// split_grouped_convs), the chain running through every group. The sum over all pieces is the
// same int32 sum in another order. (space_to_depth makes such convs from resnet-style stems.)
#include "common/error.h"
#include "compiler/geometry.h"
#include "compiler/passes.h"

#include <fmt/format.h>

#include <algorithm>

namespace npukit::compiler {

KernelSplit kernel_split(std::int64_t channels, std::int64_t kh, std::int64_t kw,
                         std::int64_t out_pixels, const isa::SaArch& arch) {
  KernelSplit k;
  k.group_channels = channels;
  if (kh <= 3 && kw <= 3) return k;
  k.band = std::max<std::int64_t>(1, std::min<std::int64_t>(3, arch.rows / kw));
  k.bands = (kh + k.band - 1) / k.band;
  // conv_geometry's AccEn on 9,x,x (more than N_SA input channels) beyond the on-chip pixels.
  if (channels > arch.n_sa && out_pixels > kOnChipAccPixels) k.group_channels = arch.n_sa;
  k.groups = (channels + k.group_channels - 1) / k.group_channels;
  return k;
}

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
    const auto pads = n.get_ints("pads", {0, 0, 0, 0});
    const ir::Tensor& x = g.tensor(n.inputs[0]);
    const auto strides = n.get_ints("strides", {1, 1});
    const std::int64_t oh = conv_out(x.shape[2], pads[0], pads[2], kh, strides[0]);
    const std::int64_t ow = conv_out(x.shape[3], pads[1], pads[3], kw, strides[1]);
    const auto* wsrc = w.as<std::int8_t>();
    const KernelSplit split = kernel_split(kc, kh, kw, oh * ow, ctx.options.arch);
    const std::int64_t band = split.band, bands = split.bands, groups = split.groups;
    const std::int64_t group_channels = split.group_channels;
    const bool host_fed = !ctx.made_on_device(n.inputs[0]);
    std::string previous;
    for (std::int64_t q = 0; q < groups; ++q) {
      const std::int64_t c0 = q * group_channels, c1 = std::min(kc, c0 + group_channels);
      std::string input = n.inputs[0];
      if (groups > 1) {
        ir::Node s = channel_slice(g, unique_name(g, n.name + "_in" + std::to_string(c0)),
                                   n.inputs[0], c0, c1);
        input = s.outputs[0];
        if (auto it = ctx.quantization.find(n.inputs[0]); it != ctx.quantization.end())
          ctx.quantization[input] = it->second;
        // A device tensor is viewed in place; one the host makes is sliced by the host, which
        // sends each group as its own input (the same bytes as the whole tensor).
        if (host_fed) {
          ctx.place(s.name, Placement::kHost,
                    fmt::format("host: input channels {}..{} of '{}', sent as their own input "
                                "(split_kernels)",
                                c0, c1 - 1, n.name));
        } else {
          ctx.place(s.name, Placement::kDevice,
                    fmt::format("view: input channels {}..{} of '{}' (split_kernels)", c0, c1 - 1,
                                n.name));
          if (auto it = ctx.segment_of.find(n.name); it != ctx.segment_of.end())
            ctx.segment_of[s.name] = it->second;
        }
        out.push_back(std::move(s));
      }
      for (std::int64_t b = 0; b < bands; ++b) {
        const std::int64_t r0 = b * band, r1 = std::min(kh, r0 + band);
        const bool last = q == groups - 1 && b == bands - 1;
        // In the lowered graph a piece keeps the full kernel shape with the rows outside its band
        // zeroed, so it is an ordinary GatiConv the reference runs as is; `kernel_rows` tells the
        // back end which rows the hardware piece really has (conv_geometry, convert_layouts).
        const std::int64_t pc = c1 - c0;
        std::vector<std::int8_t> masked(static_cast<std::size_t>(kn * pc * kh * kw), 0);
        for (std::int64_t o = 0; o < kn; ++o)
          for (std::int64_t c = 0; c < pc; ++c)
            for (std::int64_t r = r0; r < r1; ++r)
              for (std::int64_t s = 0; s < kw; ++s)
                masked[static_cast<std::size_t>(((o * pc + c) * kh + r) * kw + s)] =
                    wsrc[((o * kc + c0 + c) * kh + r) * kw + s];
        const std::string group_tag = groups > 1 ? "_channels" + std::to_string(c0) : std::string();
        ir::Node p = n;
        p.name = last ? n.name
                      : unique_name(g, n.name + group_tag + "_rows" + std::to_string(r0) + "_" +
                                           std::to_string(r1));
        p.inputs[0] = input;
        p.inputs[1] = add_constant(g, n.name + "_w" + group_tag + "_rows" + std::to_string(r0),
                                   ir::DType::kInt8, {kn, pc, kh, kw}, masked.data());
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
          partial.name =
              unique_name(g, n.name + "_partial" + group_tag + "_rows" + std::to_string(r1));
          partial.dtype = ir::DType::kInt32;
          partial.shape = {x.shape[0], kn, oh, ow};
          p.outputs = {partial.name};
          previous = partial.name;
          g.tensors[partial.name] = partial;
          ctx.place(p.name, Placement::kDevice,
                    fmt::format("kernel rows {}..{}{} of the {}x{} kernel of '{}' (split_kernels), "
                                "int32 partial sums",
                                r0, r1 - 1,
                                groups > 1 ? fmt::format(", input channels {}..{},", c0, c1 - 1)
                                           : std::string(),
                                kh, kw, n.name));
        } else if (previous.empty()) {
          p.inputs.resize(3);
        }
        out.push_back(std::move(p));
      }
    }
  }
  g.nodes = std::move(out);
}

}  // namespace npukit::compiler
