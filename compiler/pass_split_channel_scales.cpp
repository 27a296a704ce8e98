// Pass 10c, split_channel_scales: a conv or FC whose model gave its weights one scale per output
// channel (torch's and onnxruntime's quantizers do by default) has, on the ONNX side, one
// requantization multiplier per output channel, x_scale * w_scale[k] / y_scale. The Gati has one
// QuantScale per instruction. normalize_quantization requantized such weights to one scale (max |w|
// / 127) and recorded the model's own weights (Context::channel_weights); this pass decides, per
// conv, between
//
//   per tensor   the requantized weights, one instruction (as lowered), and
//   per channel  one instruction per output-channel group: runs of whole N_SA channel groups (on
//                9,4,4 also an even KernelItr, so no padding kernel spills into the next group),
//                adjacent runs merged when their largest channel scale is the same. A group's
//                weights are the model's at that largest scale, round(q_k s_k / S_g) (the model's
//                own integers where s_k = S_g), its bias round(b_k / (x_scale S_g)), its own
//                QuantScale ~ x_scale S_g / y_scale; it writes its channels of the output as a
//                view (Concat alias at a byte offset, as split_grouped_convs does), so no copy.
//                A depthwise conv's group also reads a Slice view of its input channels.
//                An FC (GatiFC from QGemm/QLinearMatMul) splits the same way in blocks of 32
//                outputs (the FC engine writes 32-byte beats, so each group starts 32-byte aligned
//                right after the previous one's outputs in the vector). An FC whose output only
//                the host reads (a graph output, typically the classifier) has no device view to
//                write into: each group is a device output and a host Concat joins them.
//
// Error bound, in steps of the layer's output: E = 128 x_scale / y_scale * max_k sum_i
// |w_ki - S round(w_ki / S)| (S the scale the weights run at; an input of at most 128 steps in
// every tap, the worst signs). --weight-scales auto (default) runs per channel only when that
// costs less than 1 step and per tensor does not (the groups' channels share a scale or nearly:
// npukit quantize --per-channel writes such models); otherwise per tensor, one instruction, since
// a group's weights at its largest channel's scale are barely better than the tensor's (measured
// on fixtures/qop/perchannel_net: 74 % vs 76 % of outputs equal to onnxruntime, 2.5x the
// instructions). per-tensor and per-channel force either. The choice, both bounds and both cycle
// estimates (conv_cycles_estimate) are in the conv's --explain line and a compiler warning.
// Left per tensor, with the reason: a conv whose output leaves the device (an FC's may, see above)
// or is dispatched, is
// read by a host op or a view, accumulates int32 sums, has a fused global pool or LeakyReLU, whose
// input is not made by a device layer (depthwise), or whose channels are not whole groups.
#include "compiler/geometry.h"
#include "compiler/passes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <set>

namespace npukit::compiler {

namespace {

struct Piece {
  std::int64_t k0 = 0, k1 = 0;  // output channels [k0, k1)
  double scale = 0;             // the largest model scale of its channels
};

// OIHW -> OIWH (transpose_tall_images turned the conv sideways).
std::vector<float> transposed_oihw(const std::vector<float>& w, const ir::Shape& s) {
  std::vector<float> t(w.size());
  const std::int64_t planes = s[0] * s[1], kh = s[2], kw = s[3];
  for (std::int64_t p = 0; p < planes; ++p)
    for (std::int64_t y = 0; y < kh; ++y)
      for (std::int64_t x = 0; x < kw; ++x)
        t[static_cast<std::size_t>((p * kw + x) * kh + y)] =
            w[static_cast<std::size_t>((p * kh + y) * kw + x)];
  return t;
}

std::int8_t requantize(float w, double scale) {
  return static_cast<std::int8_t>(std::clamp(std::nearbyint(w / scale), -127.0, 127.0));
}

// max over output channels of sum |w - S(k) q| for channels [0, kn) with `per` values each.
double worst_channel_error(const std::vector<float>& wf, std::int64_t kn, std::int64_t per,
                           const std::function<double(std::int64_t)>& scale_of) {
  double worst = 0;
  for (std::int64_t k = 0; k < kn; ++k) {
    const double s = scale_of(k);
    double sum = 0;
    for (std::int64_t i = 0; i < per; ++i) {
      const float w = wf[static_cast<std::size_t>(k * per + i)];
      sum += std::fabs(w - s * requantize(w, s));
    }
    worst = std::max(worst, sum);
  }
  return worst;
}

}  // namespace

void split_channel_scales(Context& ctx) {
  ir::Graph& g = ctx.graph;
  const isa::SaArch& arch = ctx.options.arch;
  if (ctx.channel_weights.empty()) return;
  std::set<std::string> leaves(g.outputs.begin(), g.outputs.end());
  leaves.insert(ctx.options.dispatch.begin(), ctx.options.dispatch.end());
  const std::int64_t kn_align =
      (!ctx.options.allow_errata && arch == isa::kArch9x4x4) ? 2 * arch.cols : 1;
  const std::int64_t conv_unit = std::lcm(static_cast<std::int64_t>(arch.n_sa), kn_align);
  std::vector<ir::Node> out;
  for (const ir::Node& n : g.nodes) {
    const auto it = ctx.channel_weights.find(n.name);
    const bool fc = n.op_type == "GatiFC";
    if ((n.op_type != "GatiConv" && !fc) || it == ctx.channel_weights.end() ||
        !ctx.on_device(n.name) || it->second.multiplier <= 0) {
      out.push_back(n);
      continue;
    }
    const ChannelWeights& cw = it->second;
    // An FC writes its outputs in blocks of 32 (one 32-byte beat, gati.md 6.1): a group of whole
    // blocks starts at a 32-byte aligned address, right after the previous group's outputs.
    const std::int64_t unit = fc ? std::int64_t{isa::kFcEngineCols} : conv_unit;
    const char* what = fc ? "FC" : "conv";
    const ir::Tensor& w = g.tensor(n.inputs[1]);
    const std::int64_t KN = w.shape.at(0),
                       per = ir::element_count(w.shape) / std::max<std::int64_t>(KN, 1);
    const std::int64_t group = n.get_int("group", 1);
    const bool depthwise = group > 1;
    const double multiplier = static_cast<double>(n.get_int("quant_scale", 1)) /
                              std::ldexp(1.0, static_cast<int>(n.get_int("quant_shift", 0)));
    // What fuse_tail folded into the multiplier (an activation at another scale): kept per group.
    const double ratio = multiplier / choose_scale_shift(cw.multiplier, n.name).value();
    const double S = cw.tensor_scale;
    const double steps_per_weight = 128.0 * multiplier / S;  // x_scale / y_scale, times 128

    // The model's float weights in the layout the node has now (maybe transposed sideways).
    std::string why_not;
    std::vector<float> wf = cw.weights;
    if (static_cast<std::int64_t>(wf.size()) != ir::element_count(w.shape) ||
        cw.shape.size() != (fc ? 2u : 4u)) {
      why_not = "its weights changed shape after normalize_quantization";
    } else {
      const auto* q = w.as<std::int8_t>();
      auto matches = [&](const std::vector<float>& v) {
        for (std::size_t i = 0; i < v.size(); ++i)
          if (requantize(v[i], S) != q[i]) return false;
        return true;
      };
      if (!matches(wf) && !fc) wf = transposed_oihw(cw.weights, cw.shape);
      if (!matches(wf)) why_not = "its weights changed after normalize_quantization";
    }
    const double tensor_bound =
        why_not.empty()
            ? steps_per_weight * worst_channel_error(wf, KN, per, [&](std::int64_t) { return S; })
            : 0;

    // Groups: whole units of N_SA (and KernelItr-even) channels, merged while the scale agrees.
    std::vector<Piece> pieces;
    if (why_not.empty() && KN % unit != 0)
      why_not = fmt::format("{} output channels are not whole groups of {}", KN, unit);
    if (why_not.empty() && KN == unit)
      why_not = fmt::format("{} output channels are one group of {}", KN, unit);
    for (std::int64_t k0 = 0; why_not.empty() && k0 < KN; k0 += unit) {
      double s = 0;
      for (std::int64_t k = k0; k < k0 + unit; ++k)
        s = std::max(s, static_cast<double>(cw.scales[static_cast<std::size_t>(k)]));
      if (!pieces.empty() && pieces.back().scale == s)
        pieces.back().k1 = k0 + unit;
      else
        pieces.push_back({k0, k0 + unit, s});
    }
    if (why_not.empty() && pieces.size() < 2)
      why_not = "all its output-channel groups have the same scale";
    const ir::Node* p = g.producer(n.inputs[0]);
    // An FC whose output only the host reads (a graph output, a host op): its groups are device
    // outputs each, concatenated on the host (exact: int8 values side by side).
    bool host_concat = false;
    if (why_not.empty()) {
      const bool acc = n.inputs.size() > 3 && !n.inputs[3].empty();
      bool consumers_ok = true, device_reads = false;
      for (const auto* c : g.consumers(n.outputs[0])) {
        consumers_ok = consumers_ok && ctx.on_device(c->name) && is_gati(*c);
        device_reads = device_reads || ctx.on_device(c->name);
      }
      const bool dispatched = std::find(ctx.options.dispatch.begin(), ctx.options.dispatch.end(),
                                        n.name) != ctx.options.dispatch.end() ||
                              std::find(ctx.options.dispatch.begin(), ctx.options.dispatch.end(),
                                        n.outputs[0]) != ctx.options.dispatch.end();
      if (fc && !dispatched && !device_reads) {
        host_concat = true;
      } else if (leaves.count(n.name) || leaves.count(n.outputs[0]))
        why_not = "its output leaves the device";
      else if (!consumers_ok)
        why_not = "its output is read by a host op or a view";
      else if (acc)
        why_not = "it accumulates int32 sums";
      else if (n.get_int("global_pool", 0) != 0 || n.has("neg_alpha") || n.has("pos_alpha"))
        why_not = "its TailBlock has a fused pool or LeakyReLU";
      else if (depthwise && (group != KN || !p || !is_gati(*p) || !ctx.on_device(p->name)))
        why_not = "a depthwise conv whose input is not made by a device layer";
      else if (group > 1 && !depthwise)
        why_not = "a grouped conv";
    }
    // Biases of each group at x_scale * S_g (must fit int32).
    std::vector<std::int32_t> bias_q;
    const ir::Tensor* bias =
        n.inputs.size() > 2 && !n.inputs[2].empty() ? g.find(n.inputs[2]) : nullptr;
    if (why_not.empty() && (bias || !cw.bias.empty())) {
      bias_q.resize(static_cast<std::size_t>(KN));
      for (const Piece& pc : pieces)
        for (std::int64_t k = pc.k0; k < pc.k1 && why_not.empty(); ++k) {
          const double b = !cw.bias.empty()
                               ? static_cast<double>(cw.bias[static_cast<std::size_t>(k)])
                               : static_cast<double>(bias->as<std::int32_t>()[k]) * cw.x_scale * S;
          const double v = std::nearbyint(b / (cw.x_scale * pc.scale));
          if (!(std::fabs(v) < 2147483647.0))
            why_not =
                fmt::format("the bias of channel {} does not fit int32 at its group's scale", k);
          else
            bias_q[static_cast<std::size_t>(k)] = static_cast<std::int32_t>(v);
        }
    }
    double channel_bound = 0, tensor_cycles = 0, channel_cycles = 0;
    if (why_not.empty()) {
      std::vector<double> scale_of(static_cast<std::size_t>(KN));
      for (const Piece& pc : pieces)
        for (std::int64_t k = pc.k0; k < pc.k1; ++k)
          scale_of[static_cast<std::size_t>(k)] = pc.scale;
      channel_bound = steps_per_weight * worst_channel_error(wf, KN, per, [&](std::int64_t k) {
                        return scale_of[static_cast<std::size_t>(k)];
                      });
      if (fc) {
        tensor_cycles = fc_cycles_estimate(per, KN);
        for (const Piece& pc : pieces) channel_cycles += fc_cycles_estimate(per, pc.k1 - pc.k0);
      } else {
        const ConvGeometry geo = conv_geometry(g, n, arch);
        const ir::Tensor& yt = g.tensor(n.outputs[0]);
        const std::int64_t pixels = yt.shape.size() == 4 ? yt.shape[2] * yt.shape[3] : 1;
        const std::int64_t area = w.shape[2] * w.shape[3];
        tensor_cycles = conv_cycles_estimate(w.shape[1], KN, pixels, area, geo, arch);
        for (const Piece& pc : pieces)
          channel_cycles +=
              conv_cycles_estimate(w.shape[1], pc.k1 - pc.k0, pixels, area, geo, arch);
      }
    }
    const WeightScales mode = ctx.options.weight_scales;
    const bool split =
        why_not.empty() && mode != WeightScales::kPerTensor &&
        (mode == WeightScales::kPerChannel || (tensor_bound >= 1.0 && channel_bound < 1.0));
    const std::string mode_name = weight_scales_name(mode);
    std::string note;
    if (!why_not.empty()) {
      note = fmt::format(
          "weights per tensor (the model's per-channel scales requantized, an output off by at "
          "most {:.2f} steps): not split per channel because {}",
          tensor_bound, why_not);
    } else {
      note = fmt::format(
          "weights {} (--weight-scales {}): per tensor ~{:.0f} cycles, an output off by at most "
          "{:.2f} steps; per channel {} instructions with their own QuantScale, ~{:.0f} cycles, at "
          "most {:.2f} steps{} (split_channel_scales)",
          split ? "per channel" : "per tensor", mode_name, tensor_cycles, tensor_bound,
          pieces.size(), channel_cycles, channel_bound,
          host_concat ? ", their outputs concatenated on the host" : "");
    }
    ctx.warnings.push_back(fmt::format("{} '{}': {}", what, n.name, note));
    const std::string base_reason =
        ctx.placement.count(n.name) ? ctx.placement.at(n.name).reason : std::string();
    if (!split) {
      ctx.place(n.name, Placement::kDevice, base_reason + "; " + note);
      out.push_back(n);
      continue;
    }

    const int segment = ctx.segment_of.count(n.name) ? ctx.segment_of.at(n.name) : 0;
    auto place = [&](const std::string& name, const std::string& reason) {
      ctx.place(name, Placement::kDevice, reason);
      ctx.segment_of[name] = segment;
    };
    const ir::Tensor& xt = g.tensor(n.inputs[0]);
    const ir::Tensor& yt = g.tensor(n.outputs[0]);
    ir::Node cat;
    cat.op_type = "Concat";
    cat.name = unique_name(g, n.name + "_channels");
    cat.attributes["axis"] = std::int64_t{1};
    cat.outputs = {n.outputs[0]};
    const auto y_quant = ctx.quantization.find(n.outputs[0]);
    for (std::size_t q = 0; q < pieces.size(); ++q) {
      const Piece& pc = pieces[q];
      const std::int64_t pk = pc.k1 - pc.k0;
      const std::string tag = std::to_string(q);
      ir::Node piece = n;
      piece.name = unique_name(g, n.name + "_channels" + tag);
      std::string x = n.inputs[0];
      if (depthwise) {
        ir::Node s;
        s.op_type = "Slice";
        s.name = unique_name(g, n.name + "_channels_in" + tag);
        const std::int64_t starts = pc.k0, ends = pc.k1, axes = 1;
        s.inputs = {x, add_constant(g, s.name + "_starts", ir::DType::kInt64, {1}, &starts),
                    add_constant(g, s.name + "_ends", ir::DType::kInt64, {1}, &ends),
                    add_constant(g, s.name + "_axes", ir::DType::kInt64, {1}, &axes)};
        s.outputs = {add_value(g, s.name, xt.dtype, {xt.shape[0], pk, xt.shape[2], xt.shape[3]})};
        place(s.name, fmt::format("view: input channels {}..{} of the per-channel conv '{}'", pc.k0,
                                  pc.k1 - 1, n.name));
        x = s.outputs[0];
        out.push_back(std::move(s));
        piece.attributes["group"] = pk;
      }
      std::vector<std::int8_t> wq(static_cast<std::size_t>(pk * per));
      for (std::int64_t i = 0; i < pk * per; ++i)
        wq[static_cast<std::size_t>(i)] =
            requantize(wf[static_cast<std::size_t>(pc.k0 * per + i)], pc.scale);
      ir::Shape piece_shape = w.shape;
      piece_shape[0] = pk;
      piece.inputs = {
          x, add_constant(g, piece.name + "_weight", ir::DType::kInt8, piece_shape, wq.data()), ""};
      if (!bias_q.empty())
        piece.inputs[2] =
            add_constant(g, piece.name + "_bias", ir::DType::kInt32, {pk}, bias_q.data() + pc.k0);
      const ScaleShift qs =
          choose_scale_shift(cw.multiplier * pc.scale / S * ratio, "layer '" + piece.name + "'");
      piece.attributes["quant_scale"] = qs.scale;
      piece.attributes["quant_shift"] = qs.shift;
      ir::Shape out_shape = yt.shape;
      out_shape.at(1) = pk;
      piece.outputs = {add_value(g, piece.name + "_out", yt.dtype, out_shape)};
      if (y_quant != ctx.quantization.end()) ctx.quantization[piece.outputs[0]] = y_quant->second;
      place(piece.name, fmt::format("output channels {}..{} of '{}' at weight scale {:.6g}; {}",
                                    pc.k0, pc.k1 - 1, n.name, pc.scale, note));
      cat.inputs.push_back(piece.outputs[0]);
      out.push_back(std::move(piece));
    }
    if (host_concat) {
      ctx.place(cat.name, Placement::kHost,
                "host: the outputs of the per-channel groups of '" + n.name +
                    "' side by side (split_channel_scales; the host reads them anyway)");
      ctx.segment_of[cat.name] = segment + 1;
    } else {
      place(cat.name, "view: the per-channel groups of '" + n.name +
                          "' write side by side into its output (split_channel_scales)");
    }
    ctx.place(n.name, Placement::kDevice, base_reason + "; " + note);
    out.push_back(std::move(cat));
  }
  g.nodes = std::move(out);
  ctx.channel_weights.clear();
}

}  // namespace npukit::compiler
