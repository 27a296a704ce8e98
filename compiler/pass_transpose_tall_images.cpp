// Pass 9, transpose_tall_images: on v1.0.0 a regular 3x3 stride-1 conv whose input is at least
// 1.5x taller than wide (or exactly 48 high, 40 wide) never finishes (gati.md 14.6). A
// convolution of the transposed image with the transposed kernel is the transposed convolution,
// exactly, and so is every other device op: pools (window, stride, pads swapped), element-wise
// ops, 2x resize, channel concat and global pools do not care, and an FC after a flatten only
// needs its weight columns in the transposed flatten order. So when a program has tall convs and
// its transpose has none, the whole device part runs sideways: the host transposes the device
// inputs before sending them and the device outputs after receiving them (ONNX Transpose nodes in
// the host subgraphs), and the device computes the same integers, transposed.
//
// Runs before split_kernels (a split piece can only skip rows, so the split must see the kernel
// the hardware runs). Left alone: programs without tall convs, programs that would be tall either
// way (check_limits refuses them), programs with ops this pass does not know, and --allow-errata.
#include "common/error.h"
#include "compiler/geometry.h"
#include "compiler/passes.h"

#include <algorithm>
#include <map>
#include <set>

namespace npukit::compiler {

namespace {

ir::Shape swapped(ir::Shape s) {
  std::swap(s[2], s[3]);
  return s;
}

// [t, l, b, r] -> [l, t, r, b]; [h, w] -> [w, h].
void swap_spatial_attributes(ir::Node& n) {
  for (const char* name : {"kernel_shape", "strides"})
    if (n.has(name)) {
      auto v = n.get_ints(name, {});
      if (v.size() == 2) std::swap(v[0], v[1]);
      n.attributes[name] = v;
    }
  if (n.has("pads")) {
    auto p = n.get_ints("pads", {});
    if (p.size() == 4) p = {p[1], p[0], p[3], p[2]};
    n.attributes["pads"] = p;
  }
}

// OIHW int8 weights -> OIWH.
std::string transposed_conv_weights(ir::Graph& g, const ir::Node& n) {
  const ir::Tensor& w = g.tensor(n.inputs.at(1));
  const ir::Shape& s = w.shape;
  const std::int64_t planes = s[0] * s[1], kh = s[2], kw = s[3];
  std::vector<std::int8_t> out(static_cast<std::size_t>(planes * kh * kw));
  const std::int8_t* in = w.as<std::int8_t>();
  for (std::int64_t p = 0; p < planes; ++p)
    for (std::int64_t i = 0; i < kh; ++i)
      for (std::int64_t j = 0; j < kw; ++j) out[(p * kw + j) * kh + i] = in[(p * kh + i) * kw + j];
  return add_constant(g, n.name + "_weights_transposed", ir::DType::kInt8, swapped(s), out.data());
}

// [M, C*H*W] weights of an FC whose input [1, C, H, W] now arrives as [1, C, W, H]: the flatten
// order becomes (c, x, y), so column c*H*W + y*W + x moves to c*W*H + x*H + y.
std::string permuted_fc_weights(ir::Graph& g, const ir::Node& n, const ir::Shape& input) {
  const ir::Tensor& w = g.tensor(n.inputs.at(1));
  const std::int64_t m = w.shape[0], k = w.shape[1], c = input[1], h = input[2], wd = input[3];
  if (k != c * h * wd) fail("layer '{}': FC weights do not match its input", n.name);
  std::vector<std::int8_t> out(static_cast<std::size_t>(m * k));
  const std::int8_t* in = w.as<std::int8_t>();
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t ch = 0; ch < c; ++ch)
      for (std::int64_t y = 0; y < h; ++y)
        for (std::int64_t x = 0; x < wd; ++x)
          out[r * k + (ch * wd + x) * h + y] = in[r * k + (ch * h + y) * wd + x];
  return add_constant(g, n.name + "_weights_permuted", ir::DType::kInt8, w.shape, out.data());
}

bool is_activation4d(const ir::Graph& g, const std::string& v) {
  const ir::Tensor* t = v.empty() ? nullptr : g.find(v);
  return t && !t->is_constant() && t->shape.size() == 4;
}

}  // namespace

void transpose_tall_images(Context& ctx) {
  if (ctx.options.allow_errata) return;
  ir::Graph& g = ctx.graph;
  const isa::SaArch& arch = ctx.options.arch;
  static const std::set<std::string> kKnown = {"GatiConv",    "GatiPool",   "GatiFC",
                                               "GatiEltwise", "GatiResize", "GatiConcat"};
  std::set<std::string> device_nodes;
  bool tall = false, tall_transposed = false;
  for (const auto& n : g.nodes) {
    if (!ctx.on_device(n.name)) continue;
    if (is_device_view(n)) {  // lower_concat's in-place concat: transposed like its inputs
      device_nodes.insert(n.name);
      continue;
    }
    if (!is_gati(n)) continue;
    if (!kKnown.count(n.op_type)) return;
    device_nodes.insert(n.name);
    if (n.op_type != "GatiConv") continue;
    const ConvGeometry c = conv_geometry(g, n, arch);
    tall = tall || !tall_image_erratum(c).empty();
    tall_transposed = tall_transposed || !tall_image_erratum(transposed(c)).empty();
  }
  if (!tall || tall_transposed) return;

  // Values the host needs from the device part: graph outputs, host nodes' inputs, --dispatch.
  std::set<std::string> host_needs(g.outputs.begin(), g.outputs.end());
  for (const auto& n : g.nodes)
    if (!device_nodes.count(n.name)) host_needs.insert(n.inputs.begin(), n.inputs.end());
  for (const auto& req : ctx.options.dispatch) {
    host_needs.insert(req);
    for (const auto& n : g.nodes)
      if (n.name == req && device_nodes.count(n.name)) host_needs.insert(n.outputs.at(0));
  }

  std::vector<ir::Node> nodes;
  std::map<std::string, std::string> device_name;  // value -> the name the device part uses
  auto transpose_node = [&](const std::string& from, const std::string& to, const char* why) {
    ir::Node t;
    t.op_type = "Transpose";
    t.name = unique_name(g, to + "_transpose");
    t.inputs = {from};
    t.outputs = {to};
    t.attributes["perm"] = std::vector<std::int64_t>{0, 1, 3, 2};
    ctx.place(t.name, Placement::kHost, why);
    return t;
  };
  auto rename_for_device = [&](const std::string& v) {
    const std::string t =
        add_value(g, v + "_transposed", g.tensor(v).dtype, swapped(g.tensor(v).shape));
    if (auto q = ctx.quantization.find(v); q != ctx.quantization.end())
      ctx.quantization[t] = q->second;
    device_name[v] = t;
    return t;
  };

  for (ir::Node n : std::vector<ir::Node>(g.nodes)) {
    if (!device_nodes.count(n.name)) {
      nodes.push_back(n);
      continue;
    }
    // Inputs: device values under their device names; host values transposed on the host first.
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      const std::string v = n.inputs[i];
      if (!is_activation4d(g, v)) continue;
      if (!device_name.count(v))
        nodes.push_back(transpose_node(v, rename_for_device(v),
                                       "host: sends the device input transposed (tall images run "
                                       "sideways, transpose_tall_images)"));
      n.inputs[i] = device_name.at(v);
    }
    const std::string input0 = n.inputs.at(0);
    if (n.op_type == "GatiConv") {
      n.inputs[1] = transposed_conv_weights(g, n);
      swap_spatial_attributes(n);
    } else if (n.op_type == "GatiPool") {
      swap_spatial_attributes(n);
    } else if (n.op_type == "GatiFC" && g.tensor(input0).shape.size() == 4) {
      n.inputs[1] = permuted_fc_weights(g, n, swapped(g.tensor(input0).shape));
    }
    // Output: transposed in place, or under a new name when the host needs the original.
    const std::string out = n.outputs.at(0);
    if (!is_activation4d(g, out)) {
      nodes.push_back(n);
      continue;
    }
    if (!host_needs.count(out)) {
      g.tensor(out).shape = swapped(g.tensor(out).shape);
      device_name[out] = out;
      nodes.push_back(n);
      continue;
    }
    n.outputs[0] = rename_for_device(out);
    nodes.push_back(n);
    nodes.push_back(transpose_node(n.outputs[0], out,
                                   "host: turns the device output back upright (tall images run "
                                   "sideways, transpose_tall_images)"));
  }
  g.nodes = std::move(nodes);
  for (auto& req : ctx.options.dispatch)
    if (auto it = device_name.find(req); it != device_name.end()) req = it->second;
  ctx.warnings.push_back(
      "the device part runs transposed (width and height swapped; the host transposes its inputs "
      "and outputs): its tall 3x3 convs would hang v1.0.0 (gati.md 14.6)");
}

}  // namespace npukit::compiler
