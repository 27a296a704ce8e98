// Pass 3c, broadcast_mul: the squeeze-excitation product QLinearMul(x [1,C,H,W], s [1,C,1,1])
// (either order) has no EltWise form (both operands must have one shape). The gate s is
// broadcast to [1,C,H,W] on the device first, exactly, by ops that copy values:
//
//   s [1,C,1,1] -> depthwise QLinearConv, all-ones kh x kw kernel, pads kh-1 / kw-1 on each side,
//                  output scale = input scale (multiplier 1): each of the kh x kw outputs sees the
//                  one real input pixel once, so it is s
//               -> m int8 Resize 2x nearest (RESIZE)            [1,C,kh 2^m,kw 2^m]
//
// with H = kh 2^m, W = kw 2^m, 1 <= kh, kw <= 8 (pads up to 7, the 3-bit field), the fewest
// resizes; then the product is an ordinary same-shape QLinearMul (EltWise mult). Sizes that do not
// factor so (e.g. 12 x 40) keep the Mul on the host, as do kernels over 3x3 on 9,4,4 (see
// below). mobilenet_v3 at 224: 56 = 7 8, 28, 14, 7.
#include "compiler/passes.h"
#include "compiler/pointwise.h"

#include "ir/tensor_util.h"

#include <algorithm>

namespace npukit::compiler {

namespace {

struct Factors {
  std::int64_t kh = 0, kw = 0, m = 0;
};

std::optional<Factors> factor(std::int64_t h, std::int64_t w, std::int64_t max_k) {
  for (std::int64_t m = 0; m < 12; ++m) {
    const std::int64_t f = std::int64_t{1} << m;
    if (h % f || w % f) break;
    const std::int64_t kh = h / f, kw = w / f;
    if (kh <= max_k && kw <= max_k) return Factors{kh, kw, m};
  }
  return std::nullopt;
}

bool zero(const ir::Graph& g, const std::string& name) {
  if (name.empty()) return true;
  const ir::Tensor* z = g.find(name);
  if (!z || !z->is_constant()) return false;
  for (double v : constant_values(*z))
    if (v != 0) return false;
  return true;
}

bool rewrite(ir::Graph& g, const ir::Node& n, const CompileOptions& opt) {
  if (n.domain != "com.microsoft" || n.op_type != "QLinearMul" || n.inputs.size() < 8) return false;
  for (std::size_t k = 0; k < 2; ++k) {
    const std::size_t xi = 3 * k, si = 3 - 3 * k;
    const ir::Tensor* x = g.find(n.inputs[xi]);
    const ir::Tensor* s = g.find(n.inputs[si]);
    if (!x || !s || x->is_constant() || s->is_constant() || x->dtype != ir::DType::kInt8 ||
        s->dtype != ir::DType::kInt8 || x->shape.size() != 4 || s->shape.size() != 4)
      continue;
    const ir::Shape& xs = x->shape;
    if (xs[0] != 1 || s->shape != ir::Shape{1, xs[1], 1, 1} || (xs[2] == 1 && xs[3] == 1)) continue;
    if (!zero(g, n.inputs[si + 2])) return false;
    // A kernel over 3x3 is split into row pieces chained through int32 sums; on 9,4,4 the piece
    // after the first would follow a conv with an odd KernelItr (an erratum pad_kernel_iterations
    // does not pad for split chains): there the kernel is at most 3x3.
    const auto f = factor(xs[2], xs[3], opt.arch == isa::kArch9x4x4 ? 3 : 8);
    if (!f) return false;
    const std::string gate = n.inputs[si], gate_scale = n.inputs[si + 1];
    std::string gate_zero = n.inputs[si + 2];
    if (gate_zero.empty()) {
      const std::int8_t z = 0;
      gate_zero = add_constant(g, gate + "_zero_point", ir::DType::kInt8, {}, &z);
    }
    std::vector<ir::Node> nodes;
    std::string cur = gate;
    std::int64_t h = 1, w = 1;
    if (f->kh > 1 || f->kw > 1) {
      h = f->kh, w = f->kw;
      const std::int64_t c = xs[1];
      std::vector<std::int8_t> ones(static_cast<std::size_t>(c * h * w), 1);
      ir::Node conv;
      conv.name = unique_name(g, n.name + "_broadcast");
      conv.op_type = "QLinearConv";
      const std::string wq =
          add_constant(g, conv.name + "_weight", ir::DType::kInt8, {c, 1, h, w}, ones.data());
      const std::string ws = float_scalar(g, conv.name + "_weight_scale", 1.0f);
      const std::int8_t z = 0;
      const std::string wz =
          add_constant(g, conv.name + "_weight_zero_point", ir::DType::kInt8, {}, &z);
      const std::string out = add_value(g, conv.name + "_out", ir::DType::kInt8, {1, c, h, w});
      conv.inputs = {cur, gate_scale, gate_zero, wq, ws, wz, gate_scale, gate_zero};
      conv.outputs = {out};
      conv.attributes["group"] = c;
      conv.attributes["kernel_shape"] = std::vector<std::int64_t>{h, w};
      conv.attributes["strides"] = std::vector<std::int64_t>{1, 1};
      conv.attributes["pads"] = std::vector<std::int64_t>{h - 1, w - 1, h - 1, w - 1};
      nodes.push_back(std::move(conv));
      cur = out;
    }
    for (std::int64_t r = 0; r < f->m; ++r) {
      h *= 2, w *= 2;
      ir::Node resize;
      resize.name = unique_name(g, n.name + "_broadcast_2x_" + std::to_string(r));
      resize.op_type = "Resize";
      const float sc[4] = {1, 1, 2, 2};
      const std::string scales =
          add_constant(g, resize.name + "_scales", ir::DType::kFloat32, {4}, sc);
      const std::string out =
          add_value(g, resize.name + "_out", ir::DType::kInt8, {1, xs[1], h, w});
      resize.inputs = {cur, "", scales};
      resize.outputs = {out};
      resize.attributes["mode"] = std::string("nearest");
      nodes.push_back(std::move(resize));
      cur = out;
    }
    ir::Node mul = n;
    mul.inputs[si] = cur;
    nodes.push_back(std::move(mul));
    replace_pointwise(g, n.name, "", std::move(nodes));
    return true;
  }
  return false;
}

}  // namespace

void broadcast_mul(Context& ctx) {
  ir::Graph& g = ctx.graph;
  rewrite_until_done(g, [&](const ir::Node& n) { return rewrite(g, n, ctx.options); });
}

}  // namespace npukit::compiler
