// Pass 7, lower_to_gati: every device node (assign_devices) becomes one npukit.gati node
// (docs/ref-ops.md), the contract shared with the reference executor: all integer parameters are
// explicit attributes, so instruction generation only copies them into fields and
// `npukit compare` runs exactly what the device is told to run.
//
// Q/DQ folding: the float requantization multiplier of each op is folded into the megablock's
// tail as QuantScale / 2^QuantShift (DECISIONS.md 4: scale in [1, 32767], the shift that makes it
// closest to the real multiplier):
//   conv / FC      M = s_x * s_w / s_y
//   add / sub      a_scale = round(s_a 2^10 / s_o), b_scale likewise, M = s_o / s_y, with the
//                  common factor s_o = max(s_a, s_b) / 64 keeping the 18-bit Q10 scales precise
//   mult           a_scale = b_scale = 1.0 (1024), M = s_a s_b / s_y
//   sigmoid        a_scale = round(s_x 2^16) (engine input is Q16, DECISIONS.md 6), M = 1 / s_y
//   avg pools      pool_scale / 2^pool_shift ~ s_x / (s_y * window)  (DECISIONS.md 8)
#include "common/error.h"
#include "compiler/device_sigmoid.h"
#include "compiler/passes.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace npukit::compiler {

namespace {

std::string layer_what(const ir::Node& n) { return "layer '" + n.name + "' (" + n.op_type + ")"; }

void set_tail(ir::Node& g, const ScaleShift& q) {
  g.attributes["quant_en"] = std::int64_t{1};
  g.attributes["quant_scale"] = q.scale;
  g.attributes["quant_shift"] = q.shift;
}

ir::Node gati(const ir::Node& from, const char* op) {
  ir::Node n;
  n.name = from.name;
  n.op_type = op;
  n.domain = kGatiDomain;
  n.outputs = {from.outputs.at(0)};
  return n;
}

std::int64_t q10(double v, const std::string& what) {
  const double r = std::nearbyint(v);
  if (r < -131072 || r > 131071)
    fail("{}: EltWise scale {} does not fit the signed 18-bit field", what, v);
  return static_cast<std::int64_t>(r);
}

// An EltWise "add" whose second operand is weighted 0: rescales s_x -> s_y (used for standalone
// activations and for requantizing concat inputs).
ir::Node rescale(const ir::Node& from, const std::string& x, const std::string& out, double s_x,
                 double s_y) {
  ir::Node n;
  n.name = from.name;
  n.op_type = "GatiEltwise";
  n.domain = kGatiDomain;
  n.inputs = {x, x};  // b = a with b_scale 0: the EltWise reads a real second operand
  n.outputs = {out};
  const double s_o = s_x / 64;
  n.attributes["op"] = std::string("add");
  n.attributes["a_scale"] = q10(s_x * 1024 / s_o, layer_what(from));
  n.attributes["b_scale"] = std::int64_t{0};
  set_tail(n, choose_scale_shift(s_o / s_y, layer_what(from)));
  return n;
}

std::vector<std::int8_t> transposed(const ir::Tensor& w) {  // [K, M] -> [M, K]
  const auto k = w.shape[0], m = w.shape[1];
  std::vector<std::int8_t> out(static_cast<std::size_t>(k * m));
  const auto* src = w.as<std::int8_t>();
  for (std::int64_t i = 0; i < k; ++i)
    for (std::int64_t j = 0; j < m; ++j) out[j * k + i] = src[i * m + j];
  return out;
}

bool is_depthwise(const ir::Graph& g, const ir::Node& n) {
  const std::int64_t group = n.get_int("group", 1);
  const ir::Tensor& w = g.tensor(n.inputs[3]);
  const ir::Tensor& x = g.tensor(n.inputs[0]);
  return group == x.shape[1] && group == w.shape[0] && w.shape[1] == 1;
}

// [KN, C/group, KH, KW] grouped weights -> [KN, C, KH, KW] with kernel k's weights at input
// channels of its group and 0 elsewhere.
std::string block_diagonal(ir::Graph& g, const std::string& weights, std::int64_t group,
                           const std::string& layer) {
  const ir::Tensor& w = g.tensor(weights);
  const std::int64_t kn = w.shape[0], cg = w.shape[1], kh = w.shape[2], kw = w.shape[3];
  const std::int64_t c = cg * group, kng = kn / group, area = kh * kw;
  std::vector<std::int8_t> out(static_cast<std::size_t>(kn * c * area), 0);
  const auto* src = w.as<std::int8_t>();
  for (std::int64_t k = 0; k < kn; ++k) {
    const std::int64_t c0 = (k / kng) * cg;
    for (std::int64_t i = 0; i < cg * area; ++i)
      out[static_cast<std::size_t>(k * c * area + c0 * area + i)] = src[k * cg * area + i];
  }
  return add_constant(g, layer + "_weight_block_diagonal", ir::DType::kInt8, {kn, c, kh, kw},
                      out.data());
}

// onnxruntime's QLinearLeakyRelu is a 256-entry lookup table built in float32: dequantize,
// leaky, divide by the output scale, round half to even, saturate (zero points are 0 here).
std::int8_t ort_leaky(int x, float sx, float sy, float alpha) {
  volatile float v = static_cast<float>(x) * sx;  // volatile: float32 steps, as onnxruntime
  volatile float l = v >= 0 ? v : v * alpha;
  volatile float q = l / sy;
  const float r = std::nearbyint(q);
  return static_cast<std::int8_t>(std::clamp(r, -128.0f, 127.0f));
}

std::int64_t round_shift(std::int64_t v, std::int64_t s) {
  return s == 0 ? v : (v + (std::int64_t{1} << (s - 1))) >> s;
}

// y = clamp8(rshift(rshift((x A + relu(x) B) QuantScale, QuantShift), 10)): the EltWise add of
// x and r = relu(x) (docs/ref-ops.md, GatiEltwise).
std::int8_t device_leaky(int x, std::int64_t a, std::int64_t b, const ScaleShift& q) {
  const std::int64_t v = static_cast<std::int64_t>(x) * a + std::max(x, 0) * b;
  const std::int64_t y = round_shift(round_shift(v * q.scale, q.shift), 10);
  return static_cast<std::int8_t>(std::clamp<std::int64_t>(y, -128, 127));
}

// The EltWise scales and quantizer for LeakyRelu(x) = alpha x + (1 - alpha) relu(x): nominally
// A = alpha 2^P, B = (1 - alpha) 2^P (P <= 17, the largest with both in 18 bits) and
// QuantScale / 2^QuantShift = s_x 2^(10 - P) / s_y. Where onnxruntime's value is a tie in exact
// arithmetic (s_x = s_y, alpha = 0.1: x = -15 gives -1.5), its float32 steps decide the rounding;
// so the integers within a few steps of the nominal ones are tried on all 256 inputs and the set
// that agrees with onnxruntime's table on the most inputs is taken (the nominal one on ties).
struct LeakyParams {
  std::int64_t a = 0, b = 0;
  ScaleShift q;
  int mismatches = 0;
};

LeakyParams leaky_params(float sx, float sy, float alpha) {
  int p = 17;
  while (p > 0 && (std::fabs(std::ldexp(static_cast<double>(alpha), p)) > 131068 ||
                   std::fabs(std::ldexp(1.0 - alpha, p)) > 131068))
    --p;
  const auto a0 =
      static_cast<std::int64_t>(std::llround(std::ldexp(static_cast<double>(alpha), p)));
  const std::int64_t b0 = (std::int64_t{1} << p) - a0;
  const ScaleShift q0 = choose_scale_shift(
      static_cast<double>(sx) / static_cast<double>(sy) * std::ldexp(1.0, 10 - p),
      "LeakyRelu requantization");
  std::array<std::int8_t, 256> want{};
  for (int x = -128; x < 128; ++x)
    want[static_cast<std::size_t>(x + 128)] = ort_leaky(x, sx, sy, alpha);
  LeakyParams best;
  best.mismatches = 1 << 30;
  std::int64_t best_distance = 0;
  for (std::int64_t da = -3; da <= 3; ++da)
    for (std::int64_t db = -3; db <= 3; ++db)
      for (std::int64_t dq = -3; dq <= 3; ++dq) {
        ScaleShift q{q0.scale + dq, q0.shift};
        if (q.scale < 1 || q.scale > 32767) continue;
        int miss = 0;
        for (int x = -128; x < 128; ++x)
          miss += device_leaky(x, a0 + da, b0 + db, q) != want[static_cast<std::size_t>(x + 128)];
        const std::int64_t distance = std::abs(da) + std::abs(db) + std::abs(dq);
        if (miss < best.mismatches || (miss == best.mismatches && distance < best_distance)) {
          best = {a0 + da, b0 + db, q, miss};
          best_distance = distance;
        }
      }
  return best;
}

}  // namespace

int leaky_relu_mismatches(double sx, double sy, double alpha) {
  return leaky_params(static_cast<float>(sx), static_cast<float>(sy), static_cast<float>(alpha))
      .mismatches;
}

void lower_to_gati(Context& ctx) {
  ir::Graph& g = ctx.graph;
  std::vector<ir::Node> out;
  out.reserve(g.nodes.size());
  for (const ir::Node& n : g.nodes) {
    if (!ctx.on_device(n.name)) {
      out.push_back(n);
      continue;
    }
    const std::string what = layer_what(n);
    const std::string& op = n.op_type;
    if (op == "QLinearConv") {
      ir::Node c = gati(n, "GatiConv");
      c.inputs = {n.inputs[0], n.inputs[3], n.inputs.size() > 8 ? n.inputs[8] : ""};
      std::int64_t group = n.get_int("group", 1);
      if (group != 1 && !is_depthwise(g, n)) {
        // Grouped (regnet, resnext): one regular conv with block-diagonal weights, exact since
        // the added weights are 0 (docs/compiler.md, "Grouped convolution").
        c.inputs[1] = block_diagonal(g, n.inputs[3], group, n.name);
        c.attributes["block_diagonal_groups"] = group;  // split_grouped_convs may split it
        group = 1;
      }
      const ir::Tensor& w = g.tensor(c.inputs[1]);
      const auto pads = n.get_string("auto_pad", "NOTSET") == "VALID"
                            ? std::vector<std::int64_t>{0, 0, 0, 0}
                            : n.get_ints("pads", {0, 0, 0, 0});
      c.attributes["kernel_shape"] = std::vector<std::int64_t>{w.shape[2], w.shape[3]};
      c.attributes["strides"] = n.get_ints("strides", {1, 1});
      c.attributes["pads"] = pads;
      c.attributes["group"] = group;
      const double m = constant_float(g, n, 1) * constant_float(g, n, 4) / constant_float(g, n, 6);
      set_tail(c, choose_scale_shift(m, what));
      if (auto it = ctx.channel_weights.find(n.name); it != ctx.channel_weights.end()) {
        it->second.x_scale = constant_float(g, n, 1);  // for split_channel_scales
        it->second.tensor_scale = constant_float(g, n, 4);
        it->second.multiplier = m;
      }
      out.push_back(std::move(c));
    } else if (op == "QGemm" || op == "QLinearMatMul") {
      ir::Node f = gati(n, "GatiFC");
      const bool qgemm = op == "QGemm";
      if (qgemm && n.get_float("alpha", 1.f) != 1.f)
        fail("{}: alpha != 1 is not supported; fold it into the weight scale", what);
      const ir::Tensor& w = g.tensor(n.inputs[3]);
      std::string w_name = n.inputs[3];
      if (!(qgemm && n.get_int("transB", 0) == 1)) {  // weights given as [K, M]
        auto t = transposed(w);
        w_name = add_constant(g, n.name + "_weight_mk", ir::DType::kInt8, {w.shape[1], w.shape[0]},
                              t.data());
      }
      std::string x = n.inputs[0];
      // Flatten/Reshape in front of the FC engine is the engine's own Flatten (FC.Flatten = 1).
      if (const ir::Node* p = g.producer(x);
          p && ctx.on_device(p->name) && (p->op_type == "Flatten" || p->op_type == "Reshape")) {
        x = p->inputs[0];
        ctx.place(p->name, Placement::kDevice,
                  "flattening folded into FC '" + n.name + "' (FC.Flatten)");
      }
      f.inputs = {x, w_name, qgemm && n.inputs.size() > 6 ? n.inputs[6] : ""};
      const double m =
          constant_float(g, n, 1) * constant_float(g, n, 4) / constant_float(g, n, qgemm ? 7 : 6);
      set_tail(f, choose_scale_shift(m, what));
      if (auto it = ctx.channel_weights.find(n.name); it != ctx.channel_weights.end()) {
        it->second.x_scale = constant_float(g, n, 1);  // for split_channel_scales
        it->second.tensor_scale = constant_float(g, n, 4);
        it->second.multiplier = m;
      }
      out.push_back(std::move(f));
    } else if (op == "Flatten" || op == "Reshape") {
      continue;  // folded into the FC that consumes it (checked by assign_devices)
    } else if (op == "QLinearAdd" || op == "QLinearMul") {
      ir::Node e = gati(n, "GatiEltwise");
      e.inputs = {n.inputs[0], n.inputs[3]};
      const double sa = constant_float(g, n, 1), sb = constant_float(g, n, 4),
                   sy = constant_float(g, n, 6);
      e.attributes["a_zero_point"] = constant_int(g, n, 2, 0);
      e.attributes["b_zero_point"] = constant_int(g, n, 5, 0);
      if (op == "QLinearAdd") {
        const double so = std::max(sa, sb) / 64;
        e.attributes["op"] = std::string("add");
        e.attributes["a_scale"] = q10(sa * 1024 / so, what);
        e.attributes["b_scale"] = q10(sb * 1024 / so, what);
        set_tail(e, choose_scale_shift(so / sy, what));
      } else {
        e.attributes["op"] = std::string("mult");
        e.attributes["a_scale"] = std::int64_t{1024};
        e.attributes["b_scale"] = std::int64_t{1024};
        set_tail(e, choose_scale_shift(sa * sb / sy, what));
      }
      out.push_back(std::move(e));
    } else if (op == "QLinearSigmoid") {
      ir::Node e = gati(n, "GatiEltwise");
      e.inputs = {n.inputs[0], ""};
      const SigmoidParams sp =
          device_sigmoid_params(constant_float(g, n, 1), constant_float(g, n, 3), what);
      e.attributes["op"] = std::string("sigmoid");
      e.attributes["a_scale"] = sp.a_scale;
      e.attributes["b_scale"] = std::int64_t{0};
      set_tail(e, sp.tail);
      out.push_back(std::move(e));
    } else if (op == "QLinearLeakyRelu") {
      const double alpha = n.get_float("alpha", 0.01f);
      const double sx = constant_float(g, n, 1), sy = constant_float(g, n, 3);
      // The tail's LeakyReLU floors (alpha_q8 * y) >> 8 after requantizing, one LSB below
      // onnxruntime's round(alpha x s_x / s_y) on about a third of the negative values. Exact
      // instead: LeakyRelu(x) = alpha x + (1 - alpha) relu(x), so one identity EltWise makes
      // r = relu(x) and a second adds x * A + r * B with A ~ alpha 2^P, B = 2^P - A, requantized
      // once with rounding (docs/ref-ops.md, "LeakyReLU"). The producer of x keeps its own
      // output scale, so x is what onnxruntime's QLinearConv gives.
      const std::string x = n.inputs[0];
      ir::Tensor rt = g.tensor(x);
      rt.name = unique_name(g, n.name + "_relu");
      rt.data.clear();
      g.tensors[rt.name] = rt;
      ir::Node r = rescale(n, x, rt.name, 1.0, 1.0);
      r.name = rt.name;
      r.attributes["act"] = std::string("relu");
      ctx.place(r.name, Placement::kDevice,
                "relu(x) for the exact LeakyReLU '" + n.name + "' (lower_to_gati)");
      if (!std::isfinite(alpha) || std::fabs(alpha) > 1000)
        fail("{}: alpha {} is outside what the EltWise scales can express", what, alpha);
      const LeakyParams lp =
          leaky_params(static_cast<float>(sx), static_cast<float>(sy), static_cast<float>(alpha));
      ir::Node e = gati(n, "GatiEltwise");
      e.inputs = {x, rt.name};
      e.attributes["op"] = std::string("add");
      e.attributes["a_scale"] = lp.a;
      e.attributes["b_scale"] = lp.b;
      set_tail(e, lp.q);
      if (lp.mismatches > 0)
        ctx.warnings.push_back(fmt::format(
            "{}: LeakyReLU differs from onnxruntime's lookup table on {} of 256 int8 inputs", what,
            lp.mismatches));
      out.push_back(std::move(r));
      out.push_back(std::move(e));
    } else if (op == "Relu" || op == "Clip") {
      // Standalone (fuse_tail folds it into the producing megablock when it can): an identity
      // EltWise whose tail applies the activation.
      const double s = 1.0;
      ir::Node e = rescale(n, n.inputs[0], n.outputs[0], s, s);
      e.attributes["act"] = std::string(op == "Relu" ? "relu" : "clip");
      if (op == "Clip") {
        const std::int64_t hi =
            n.inputs.size() > 2 && !n.inputs[2].empty() ? constant_int(g, n, 2, 127) : 127;
        e.attributes["act_param"] = std::clamp<std::int64_t>(hi, 0, 127);
      }
      out.push_back(std::move(e));
    } else if (op == "MaxPool" || op == "QLinearAveragePool" || op == "QLinearGlobalAveragePool") {
      ir::Node p = gati(n, "GatiPool");
      p.inputs = {n.inputs[0]};
      const ir::Tensor& x = g.tensor(n.inputs[0]);
      if (op == "QLinearGlobalAveragePool") {
        p.attributes["mode"] = std::string("global_average");
        const double m = constant_float(g, n, 1) / constant_float(g, n, 3) /
                         static_cast<double>(x.shape[2] * x.shape[3]);
        const auto q = choose_pool_scale_shift(m, what);
        p.attributes["pool_scale"] = q.scale;
        p.attributes["pool_shift"] = q.shift;
      } else {
        const auto k = n.get_ints("kernel_shape", {});
        if (k.size() != 2) fail("{}: kernel_shape must have 2 entries", what);
        p.attributes["mode"] = std::string(op == "MaxPool" ? "max" : "average");
        p.attributes["kernel_shape"] = k;
        p.attributes["strides"] = n.get_ints("strides", {1, 1});  // ONNX: 1 when absent
        p.attributes["pads"] = n.get_string("auto_pad", "NOTSET") == "VALID"
                                   ? std::vector<std::int64_t>{0, 0, 0, 0}
                                   : n.get_ints("pads", {0, 0, 0, 0});
        p.attributes["ceil_mode"] = n.get_int("ceil_mode", 0);
        if (op == "QLinearAveragePool") {
          const double m =
              constant_float(g, n, 1) / constant_float(g, n, 3) / static_cast<double>(k[0] * k[1]);
          const auto q = choose_pool_scale_shift(m, what);
          p.attributes["pool_scale"] = q.scale;
          p.attributes["pool_shift"] = q.shift;
        }
      }
      out.push_back(std::move(p));
    } else if (op == "Resize") {
      ir::Node r = gati(n, "GatiResize");
      r.inputs = {n.inputs[0]};
      out.push_back(std::move(r));
    } else if (op == "QLinearConcat") {
      ir::Node c = gati(n, "GatiConcat");
      c.attributes["axis"] = std::int64_t{1};
      const double sy = constant_float(g, n, 0);
      for (std::size_t k = 2; k + 2 < n.inputs.size() + 0 && k < n.inputs.size(); k += 3) {
        const double sx = constant_float(g, n, k + 1);
        std::string in = n.inputs[k];
        if (std::fabs(sx - sy) > 1e-7 * sy) {  // requantize this input first (gati.md 3.2)
          ir::Tensor t = g.tensor(in);
          t.name = unique_name(g, n.name + "_requant_" + std::to_string(k / 3));
          t.data.clear();
          g.tensors[t.name] = t;
          ir::Node r = rescale(n, in, t.name, sx, sy);
          r.name = t.name;
          ctx.place(r.name, Placement::kDevice,
                    "requantizes input " + in + " of concat '" + n.name + "'");
          out.push_back(std::move(r));
          in = t.name;
        }
        c.inputs.push_back(in);
      }
      out.push_back(std::move(c));
    } else {
      fail("{}: placed on the device but lower_to_gati has no rule for it", what);
    }
  }
  g.nodes = std::move(out);
  if (!g.opsets.count(kGatiDomain)) g.opsets[kGatiDomain] = 1;
}

}  // namespace npukit::compiler
