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
#include "compiler/passes.h"

#include <algorithm>
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

}  // namespace

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
      const ir::Tensor& w = g.tensor(n.inputs[3]);
      const auto pads = n.get_string("auto_pad", "NOTSET") == "VALID"
                            ? std::vector<std::int64_t>{0, 0, 0, 0}
                            : n.get_ints("pads", {0, 0, 0, 0});
      c.attributes["kernel_shape"] = std::vector<std::int64_t>{w.shape[2], w.shape[3]};
      c.attributes["strides"] = n.get_ints("strides", {1, 1});
      c.attributes["pads"] = pads;
      c.attributes["group"] = n.get_int("group", 1);
      const double m = constant_float(g, n, 1) * constant_float(g, n, 4) / constant_float(g, n, 6);
      set_tail(c, choose_scale_shift(m, what));
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
      e.attributes["op"] = std::string("sigmoid");
      e.attributes["a_scale"] = q10(constant_float(g, n, 1) * 65536.0, what);
      e.attributes["b_scale"] = std::int64_t{0};
      set_tail(e, choose_scale_shift(1.0 / constant_float(g, n, 3), what));
      out.push_back(std::move(e));
    } else if (op == "QLinearLeakyRelu") {
      ir::Node e =
          rescale(n, n.inputs[0], n.outputs[0], constant_float(g, n, 1), constant_float(g, n, 3));
      e.attributes["act"] = std::string("leaky");
      e.attributes["neg_alpha"] =
          std::clamp<std::int64_t>(std::llround(n.get_float("alpha", 0.01f) * 256.0), 0, 1023);
      e.attributes["pos_alpha"] = std::int64_t{256};
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
