// Pass 9, pools_as_convs: the v1.0.0 POOL megablock has no average and no global average
// (gati.md 14.15: PoolType 1 adds with 8-bit wrap-around, PoolType 2 writes zeros), and the
// TailBlock's global pool multiplies unsigned without clamping. So, unless --allow-errata, every
// average GatiPool becomes a depthwise GatiConv with all-ones weights whose tail requantizes:
//
//   average       kernel k, strides, pads as the pool; quant_scale/quant_shift = pool_scale/
//                 pool_shift. The pool sums the in-image window values (padding is 0) and scales
//                 by one factor, exactly what the conv computes with zero padding, so the result
//                 is bit-identical to GatiPool "average". ceil_mode windows become extra bottom/
//                 right padding (zeros, as the pool's overhang).
//   global        kernel H x W, no padding, output 1x1: the exact int32 sum, then the pool's
//                 scale; bit-identical to GatiPool "global_average". split_kernels runs a kernel
//                 larger than 3x3 as row bands summed through the accumulant, which needs
//                 W <= ROW and H <= 15; a larger image is first reduced by 3x3 stride-3 average
//                 convs (zero padded to a multiple of 3; each rounds once, so the result is within
//                 one step of the exact average, and the later scale counts the 9 per value).
//
// Each new layer's placement note names the pool and the erratum (--explain).
#include "common/error.h"
#include "compiler/errata_passes.h"
#include "compiler/passes.h"

#include <fmt/format.h>

namespace npukit::compiler {

namespace {

constexpr std::int64_t kMaxPad = 7;
constexpr std::int64_t kMaxKernelHeight = 15;  // split pieces skip at most 15 rows

// A depthwise all-ones conv over x ([1, C, H, W]) replacing part of pool `pool`.
ir::Node depthwise_ones(ir::Graph& g, const ir::Node& pool, const std::string& x,
                        const std::string& out, std::int64_t kh, std::int64_t kw,
                        std::int64_t stride, std::vector<std::int64_t> pads, ScaleShift q) {
  const std::int64_t c = g.tensor(x).shape.at(1);
  std::vector<std::int8_t> ones(static_cast<std::size_t>(c * kh * kw), 1);
  ir::Node n;
  n.name = out == pool.outputs.at(0) ? pool.name : out;
  n.op_type = "GatiConv";
  n.domain = kGatiDomain;
  n.inputs = {x, add_constant(g, n.name + "_ones", ir::DType::kInt8, {c, 1, kh, kw}, ones.data()),
              ""};
  n.outputs = {out};
  n.attributes["kernel_shape"] = std::vector<std::int64_t>{kh, kw};
  n.attributes["strides"] = std::vector<std::int64_t>{stride, stride};
  n.attributes["pads"] = std::move(pads);
  n.attributes["group"] = c;
  n.attributes["quant_en"] = std::int64_t{1};
  n.attributes["quant_scale"] = q.scale;
  n.attributes["quant_shift"] = q.shift;
  return n;
}

// The pool's output size along one axis (docs/ref-ops.md GatiPool).
std::int64_t pool_out(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t pb,
                      std::int64_t pe, bool ceil_mode) {
  const std::int64_t span = in + pb + pe - k;
  std::int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (o - 1) * s >= in + pb) --o;
  return o;
}

}  // namespace

int global_pool_stages(std::int64_t h, std::int64_t w, int rows) {
  int stages = 0;
  for (; w > rows || h > kMaxKernelHeight; ++stages) h = (h + 2) / 3, w = (w + 2) / 3;
  return stages;
}

void pools_as_convs(Context& ctx) {
  if (ctx.options.allow_errata) return;
  ir::Graph& g = ctx.graph;
  const int rows = ctx.options.arch.rows;
  std::vector<ir::Node> out;
  for (const ir::Node& n : g.nodes) {
    const std::string mode = n.op_type == "GatiPool" ? n.get_string("mode", "max") : "";
    if (!ctx.on_device(n.name) || (mode != "average" && mode != "global_average")) {
      out.push_back(n);
      continue;
    }
    const ir::Tensor& x = g.tensor(n.inputs.at(0));
    const std::int64_t h = x.shape.at(2), w = x.shape.at(3);
    const ScaleShift q{n.get_int("pool_scale", 0), n.get_int("pool_shift", 0)};
    struct {
      std::string erratum, how;
    } rw;
    std::vector<ir::Node> made;
    if (mode == "average") {
      const auto k = n.get_ints("kernel_shape", {});
      const auto s = n.get_ints("strides", k);
      auto pads = n.get_ints("pads", {0, 0, 0, 0});
      const bool ceil_mode = n.get_int("ceil_mode", 0) != 0;
      if (k.size() != 2 || s.size() != 2 || s[0] != s[1] || pads.size() != 4) {
        out.push_back(n);  // check_limits names what the hardware cannot do
        continue;
      }
      // ceil_mode: extra end padding until the conv's floor gives the pool's size.
      const std::int64_t oh = pool_out(h, k[0], s[0], pads[0], pads[2], ceil_mode);
      const std::int64_t ow = pool_out(w, k[1], s[1], pads[1], pads[3], ceil_mode);
      while (conv_out(h, pads[0], pads[2], k[0], s[0]) < oh && pads[2] < kMaxPad) ++pads[2];
      while (conv_out(w, pads[1], pads[3], k[1], s[1]) < ow && pads[3] < kMaxPad) ++pads[3];
      if (conv_out(h, pads[0], pads[2], k[0], s[0]) != oh ||
          conv_out(w, pads[1], pads[3], k[1], s[1]) != ow) {
        out.push_back(n);
        continue;
      }
      made.push_back(depthwise_ones(g, n, n.inputs[0], n.outputs[0], k[0], k[1], s[0], pads, q));
      rw.erratum = "E9 POOL average";
      rw.how = fmt::format("average pool {}x{} stride {} as a depthwise conv with all-ones weights",
                           k[0], k[1], s[0]);
    } else {
      // Global average: reduce by 3x3/3 stages until one split conv can take the image.
      std::string cur = n.inputs[0];
      std::int64_t ch = h, cw = w, factor = 1;
      const int stages = global_pool_stages(h, w, rows);
      for (int stage = 0; stage < stages;) {
        const std::int64_t nh = (ch + 2) / 3, nw = (cw + 2) / 3;
        const std::string next = add_value(g, n.name + "_sum3x3_" + std::to_string(stage++),
                                           ir::DType::kInt8, {x.shape[0], x.shape[1], nh, nw});
        made.push_back(depthwise_ones(g, n, cur, next, 3, 3, 3, {0, 0, 3 * nh - ch, 3 * nw - cw},
                                      choose_pool_scale_shift(1.0 / 9, n.name)));
        cur = next, ch = nh, cw = nw, factor *= 9;
      }
      const ScaleShift fq =
          factor == 1 ? q : choose_scale_shift(q.value() * static_cast<double>(factor), n.name);
      made.push_back(depthwise_ones(g, n, cur, n.outputs[0], ch, cw, 1, {0, 0, 0, 0}, fq));
      rw.erratum = "E10 POOL global average / E11 TailBlock global pool";
      rw.how = fmt::format(
          "global average pool over {}x{} as {} depthwise conv(s) with all-ones "
          "weights{}",
          h, w, made.size(),
          stages ? " (3x3 stride-3 averages first: the image is wider than the "
                   "array's rows or taller than 15)"
                 : "");
    }
    for (ir::Node& m : made) {
      note_errata_rewrite(ctx, m.name, n.name, "pools_as_convs", rw.erratum, rw.how);
      out.push_back(std::move(m));
    }
  }
  g.nodes = std::move(out);
}

}  // namespace npukit::compiler
