// Pass 11, clear_resize_padding: when a resized image's 2H x 2W pixels are not a multiple of
// 32/N_SA (on 9,4,4: an odd H*W), the v1.0.0 RESIZE writes a non-zero value into the first
// padding pixel of every channel (gati.md 14.15). Layers that address pixels by coordinates
// (CONV, POOL: im2col) never read it; layers that stream the region (EltWise, FC, CONCAT) and the
// dispatch to the host do. So, unless --allow-errata, such a RESIZE whose output is read by
// anything but a GatiConv/GatiPool, or leaves the device, gets an identity depthwise 1x1 conv
// after it (weights 1, scale 1, shift 0: the same values, and the OutputBlock writes every
// padding byte as 0). The copy's placement note names the erratum (--explain).
#include "compiler/errata_passes.h"
#include "compiler/passes.h"

#include <algorithm>

namespace npukit::compiler {

void clear_resize_padding(Context& ctx) {
  if (ctx.options.allow_errata) return;
  ir::Graph& g = ctx.graph;
  const std::int64_t group = 32 / ctx.options.arch.n_sa;
  std::vector<ir::Node> out;
  for (const ir::Node& n : g.nodes) {
    out.push_back(n);
    if (n.op_type != "GatiResize" || !ctx.on_device(n.name)) continue;
    const std::string y = n.outputs.at(0);
    const ir::Tensor yt = g.tensor(y);
    if ((yt.shape.at(2) * yt.shape.at(3)) % group == 0) continue;
    bool streamed = std::find(g.outputs.begin(), g.outputs.end(), y) != g.outputs.end() ||
                    std::find(ctx.options.dispatch.begin(), ctx.options.dispatch.end(), y) !=
                        ctx.options.dispatch.end();
    for (const ir::Node* c : g.consumers(y))
      streamed = streamed || !ctx.on_device(c->name) ||
                 (c->op_type != "GatiConv" && c->op_type != "GatiPool");
    if (!streamed) continue;
    const std::string raw = add_value(g, y + "_with_padding", yt.dtype, yt.shape);
    out.back().outputs[0] = raw;
    const std::int64_t c = yt.shape.at(1);
    std::vector<std::int8_t> ones(static_cast<std::size_t>(c), 1);
    ir::Node id;
    id.name = unique_name(g, n.name + "_clear_padding");
    id.op_type = "GatiConv";
    id.domain = kGatiDomain;
    id.inputs = {
        raw, add_constant(g, id.name + "_ones", ir::DType::kInt8, {c, 1, 1, 1}, ones.data()), ""};
    id.outputs = {y};
    id.attributes["kernel_shape"] = std::vector<std::int64_t>{1, 1};
    id.attributes["group"] = c;
    id.attributes["quant_en"] = std::int64_t{1};
    id.attributes["quant_scale"] = std::int64_t{1};
    id.attributes["quant_shift"] = std::int64_t{0};
    const std::string erratum = "E12 RESIZE padding pixel";
    note_errata_rewrite(ctx, id.name, n.name, "clear_resize_padding", erratum,
                        "an identity depthwise 1x1 conv copies the resize's output, whose "
                        "padding pixel is read or dispatched, with zero padding");
    out.push_back(std::move(id));
  }
  g.nodes = std::move(out);
}

}  // namespace npukit::compiler
