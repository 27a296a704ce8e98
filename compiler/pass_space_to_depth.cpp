// Pass 5b, space_to_depth (after assign_devices, on the convs it left on the host): a strided int8
// conv whose kernel is wider than the array has rows (alexnet's 11x11 stride 4 on a 9-row array)
// cannot be split_kernels' row bands: v16 moves a piece's window only vertically, so a piece keeps
// all its columns. With stride s the conv is a stride-1 conv over the space-to-depth image instead
// (docs/compiler.md, "Kernels wider than the array"):
//
//   xs[(dy s + dx) C + c, i, j] = xp[c, s i + dy, s j + dx]     (xp: x with the conv's zero
//   padding) w'[k, (dy s + dx) C + c, by, bx] = w[k, c, s by + dy, s bx + dx]   (0 past the
//   kernel's edge)
//
// so y[k, i, j] = sum w[k, c, ky, kx] xp[c, s i + ky, s j + kx] = sum w' xs[., i + by, j + bx]: the
// same products (plus products with weight 0), the same int32 sums, the same outputs bit for bit.
// The kernel becomes ceil(kh/s) x ceil(kw/s) (3x3 for 11x11 stride 4) over s^2 C channels (48):
// the Gati's native 3x3 conv, 1.19x the MACs of the 11x11 for alexnet's first layer. The
// rearrangement is int8 data movement with no Gati instruction; the host does it with ONNX ops
// (Pad with the zero point 0, Reshape [N, C, H/s, s, W/s, s], Transpose [0, 3, 5, 1, 2, 4],
// Reshape [N, s^2 C, H/s, W/s]), which for a first layer is where the input comes from anyway.
// The padded image is made exactly s (OH - 1 + ceil(kh/s)) high (and likewise wide); a conv whose
// padding would have to shrink for that, or whose rewritten form still cannot run on the Gati,
// stays on the host with assign_devices' reason.
//
// A conv already on the device is rewritten the same way when the host makes its input (a first
// layer: the host rearranges what it sends anyway) and the rewritten kernel splits into fewer
// pieces (kernel_split): resnet's 7x7 stride-2 stem over 3 channels is 7 one-row pieces on 9,8,8
// with int32 partial sums through DRAM between them, and a 4x4 conv over 12 channels is 4.
#include "compiler/passes.h"

#include <fmt/format.h>

#include <algorithm>

namespace npukit::compiler {

namespace {

std::string int64s(ir::Graph& g, const std::string& base, const std::vector<std::int64_t>& v) {
  return add_constant(g, base, ir::DType::kInt64, {static_cast<std::int64_t>(v.size())}, v.data());
}

}  // namespace

void space_to_depth(Context& ctx) {
  ir::Graph& g = ctx.graph;
  const isa::SaArch& arch = ctx.options.arch;
  std::vector<ir::Node> out;
  for (const ir::Node& n : g.nodes) {
    const bool onnx = n.domain.empty() || n.domain == "ai.onnx";
    const ir::Tensor* x = n.inputs.empty() ? nullptr : g.find(n.inputs[0]);
    const ir::Tensor* w = n.inputs.size() > 3 ? g.find(n.inputs[3]) : nullptr;
    const auto strides = n.get_ints("strides", {1, 1});
    const auto pads = n.get_string("auto_pad", "NOTSET") == "VALID"
                          ? std::vector<std::int64_t>{0, 0, 0, 0}
                          : n.get_ints("pads", {0, 0, 0, 0});
    const auto ap = n.get_string("auto_pad", "NOTSET");
    // A conv on the device is rewritten only when the host makes its input (no extra transfer)
    // and the rewritten kernel splits into fewer pieces (resnet's 7x7 stride-2 stem below).
    const bool device = ctx.on_device(n.name);
    const bool host_fed = x && !ctx.made_on_device(x->name);
    if (!onnx || n.op_type != "QLinearConv" || (device && !host_fed) || !x ||
        x->dtype != ir::DType::kInt8 || x->shape.size() != 4 || !w || !w->is_constant() ||
        w->dtype != ir::DType::kInt8 || w->shape.size() != 4 ||
        (!device && w->shape[3] <= arch.rows) || n.get_int("group", 1) != 1 ||
        n.get_ints("dilations", {1, 1}) != std::vector<std::int64_t>{1, 1} ||
        (ap != "NOTSET" && ap != "VALID") || strides.size() != 2 || strides[0] != strides[1] ||
        strides[0] < 2 || pads.size() != 4) {
      out.push_back(n);
      continue;
    }
    const std::int64_t s = strides[0], N = x->shape[0], C = x->shape[1], H = x->shape[2],
                       W = x->shape[3];
    const std::int64_t K = w->shape[0], kh = w->shape[2], kw = w->shape[3];
    const std::int64_t kbh = (kh + s - 1) / s, kbw = (kw + s - 1) / s;
    const std::int64_t oh = conv_out(H, pads[0], pads[2], kh, s);
    const std::int64_t ow = conv_out(W, pads[1], pads[3], kw, s);
    const std::int64_t hs = oh - 1 + kbh, ws = ow - 1 + kbw;
    const std::int64_t pb = s * hs - H - pads[0], pr = s * ws - W - pads[1];
    if (N <= 0 || C <= 0 || oh <= 0 || ow <= 0 || kbw > arch.rows || pads[0] < 0 || pads[1] < 0 ||
        pb < 0 || pr < 0 || w->shape[1] != C) {
      out.push_back(n);
      continue;
    }
    const std::int64_t pieces = kernel_split(C, kh, kw, oh * ow, arch).pieces();
    const std::int64_t s2d_pieces = kernel_split(s * s * C, kbh, kbw, oh * ow, arch).pieces();
    if (device && s2d_pieces >= pieces) {
      out.push_back(n);
      continue;
    }
    const std::string reason =
        device ? fmt::format("{} kernel-split pieces instead of {}", s2d_pieces, pieces)
               : fmt::format("the kernel is wider than the {} array has rows", arch.str());
    const std::string why = fmt::format(
        "{}x{} stride-{} conv as a {}x{} stride-1 conv over the space-to-depth image ({} -> {} "
        "channels, {}x{}; {}; space_to_depth)",
        kh, kw, s, kbh, kbw, C, s * s * C, hs, ws, reason);
    auto host_node = [&](const std::string& op, const std::string& tag) {
      ir::Node h;
      h.op_type = op;
      h.name = unique_name(g, n.name + "_space_to_depth_" + tag);
      return h;
    };
    auto int8_value = [&](const std::string& base, const ir::Shape& shape) {
      const std::string v = add_value(g, base, ir::DType::kInt8, shape);
      if (auto it = ctx.quantization.find(n.inputs[0]); it != ctx.quantization.end())
        ctx.quantization[v] = it->second;
      return v;
    };
    const std::size_t mark = out.size();
    std::string cur = n.inputs[0];
    if (pads[0] || pads[1] || pb || pr) {
      ir::Node pad = host_node("Pad", "pad");
      const std::vector<std::int64_t> p{0, 0, pads[0], pads[1], 0, 0, pb, pr};
      const std::int8_t zero = 0;
      if (g.opset >= 11) {
        pad.inputs = {cur, int64s(g, pad.name + "_pads", p),
                      add_constant(g, pad.name + "_value", ir::DType::kInt8, {}, &zero)};
      } else {
        pad.inputs = {cur};
        pad.attributes["pads"] = p;
        pad.attributes["value"] = 0.0f;
      }
      cur = int8_value(pad.name, {N, C, s * hs, s * ws});
      pad.outputs = {cur};
      out.push_back(std::move(pad));
    }
    ir::Node r1 = host_node("Reshape", "blocks");
    r1.inputs = {cur, int64s(g, r1.name + "_shape", {N, C, hs, s, ws, s})};
    cur = int8_value(r1.name, {N, C, hs, s, ws, s});
    r1.outputs = {cur};
    ir::Node t = host_node("Transpose", "transpose");
    t.inputs = {cur};
    t.attributes["perm"] = std::vector<std::int64_t>{0, 3, 5, 1, 2, 4};
    cur = int8_value(t.name, {N, s, s, C, hs, ws});
    t.outputs = {cur};
    ir::Node r2 = host_node("Reshape", "channels");
    r2.inputs = {cur, int64s(g, r2.name + "_shape", {N, s * s * C, hs, ws})};
    cur = int8_value(r2.name, {N, s * s * C, hs, ws});
    r2.outputs = {cur};
    std::vector<std::int8_t> w2(static_cast<std::size_t>(K * s * s * C * kbh * kbw), 0);
    const auto* wv = w->as<std::int8_t>();
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t c = 0; c < C; ++c)
        for (std::int64_t ky = 0; ky < kh; ++ky)
          for (std::int64_t kx = 0; kx < kw; ++kx) {
            const std::int64_t ch = ((ky % s) * s + kx % s) * C + c;
            w2[static_cast<std::size_t>(((k * s * s * C + ch) * kbh + ky / s) * kbw + kx / s)] =
                wv[((k * C + c) * kh + ky) * kw + kx];
          }
    ir::Node conv = n;
    conv.inputs[0] = cur;
    conv.inputs[3] = add_constant(g, n.name + "_space_to_depth_weight", ir::DType::kInt8,
                                  {K, s * s * C, kbh, kbw}, w2.data());
    conv.attributes.erase("auto_pad");
    conv.attributes["kernel_shape"] = std::vector<std::int64_t>{kbh, kbw};
    conv.attributes["strides"] = std::vector<std::int64_t>{1, 1};
    conv.attributes["pads"] = std::vector<std::int64_t>{0, 0, 0, 0};
    conv.attributes["dilations"] = std::vector<std::int64_t>{1, 1};
    if (const std::string no = why_not_on_device(g, conv, ctx.options); !no.empty()) {
      out.resize(mark);  // the rewritten conv still cannot run on the Gati: keep the original
      out.push_back(n);
      continue;
    }
    out.push_back(std::move(r1));
    out.push_back(std::move(t));
    out.push_back(std::move(r2));
    for (std::size_t i = mark; i < out.size(); ++i)
      ctx.place(out[i].name, Placement::kHost,
                "host: int8 space-to-depth rearrangement for '" + n.name +
                    "' (data movement with no Gati instruction; space_to_depth)");
    ctx.place(n.name, Placement::kDevice, "int8 QLinearConv lowers to a Gati megablock: " + why);
    out.push_back(std::move(conv));
  }
  g.nodes = std::move(out);
}

}  // namespace npukit::compiler
