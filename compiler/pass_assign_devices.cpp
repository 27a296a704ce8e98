// Pass 5, assign_devices: decides, for every node, whether the Gati runs it or the host does, and
// records why (npukit compile --explain prints it). The device runs int8 QOperator ops that lower
// to a megablock (gati.md 9: QLinearConv, QGemm, QLinearAdd/Mul, QLinearConcat, QLinearSigmoid,
// QLinearLeakyRelu, pools, Resize 2x, and Relu/Clip/Flatten folded into them). Everything else is
// host work.
//
// Each node is decided on its own: where a host op sits in the middle of the network, the next
// pass (partition) cuts the program into host and device segments around it.
#include "common/error.h"
#include "compiler/device_sigmoid.h"
#include "compiler/errata_passes.h"
#include "compiler/passes.h"

#include <fmt/format.h>

#include <algorithm>

namespace npukit::compiler {

namespace {

const ir::Tensor* value(const ir::Graph& g, const std::string& name) {
  return name.empty() ? nullptr : g.find(name);
}

std::string rank4(const ir::Graph& g, const std::string& name) {
  const ir::Tensor* t = value(g, name);
  if (!t) return "the shape of '" + name + "' is unknown";
  if (t->shape.size() != 4) return "'" + name + "' is not a 4-D NCHW tensor";
  return {};
}

std::string zero_point_zero(const ir::Graph& g, const ir::Node& n, std::size_t input,
                            const char* what) {
  if (input >= n.inputs.size() || n.inputs[input].empty()) return {};
  const ir::Tensor* t = g.find(n.inputs[input]);
  if (!t || !t->is_constant()) return std::string(what) + " zero point is not a constant";
  const auto v = constant_values(*t);
  for (double z : v)
    if (z != 0)
      return std::string(what) + " zero point '" + n.inputs[input] +
             "' is not 0 (asymmetric); the Gati quantizer is symmetric (DECISIONS.md 5): "
             "requantize with npukit quantize";
  return {};
}

std::string int8_activation(const ir::Graph& g, const std::string& name) {
  const ir::Tensor* t = value(g, name);
  if (!t) return "the type of '" + name + "' is unknown";
  if (t->dtype == ir::DType::kUInt8)
    return "'" + name +
           "' is uint8 (asymmetric activations); requantize to int8 with npukit quantize";
  if (t->dtype != ir::DType::kInt8)
    return "'" + name + "' is " + ir::dtype_name(t->dtype) +
           ", not int8 (quantize the model first)";
  return {};
}

bool scalar_constant(const ir::Graph& g, const std::string& name) {
  const ir::Tensor* t = value(g, name);
  return t && t->is_constant() && ir::element_count(t->shape) == 1;
}

std::string first_error(std::initializer_list<std::string> list) {
  for (const auto& s : list)
    if (!s.empty()) return s;
  return {};
}

}  // namespace

std::string why_not_on_device(const ir::Graph& g, const ir::Node& n, const CompileOptions& opt) {
  const std::string& op = n.op_type;
  const bool ms = n.domain == "com.microsoft";
  const bool onnx = n.domain.empty() || n.domain == "ai.onnx";
  if (!(ms || onnx)) return "domain '" + n.domain + "' has no Gati lowering";
  if (n.inputs.empty() || n.outputs.empty()) return "node has no inputs or outputs";
  const std::string& x = n.inputs[0];

  if (op == "QLinearConv" && onnx) {
    if (auto e =
            first_error({int8_activation(g, x), rank4(g, x), zero_point_zero(g, n, 2, "input"),
                         zero_point_zero(g, n, 7, "output"), zero_point_zero(g, n, 5, "weight")});
        !e.empty())
      return e;
    const ir::Tensor* w = value(g, n.inputs.size() > 3 ? n.inputs[3] : "");
    if (!w || !w->is_constant()) return "conv weights are not a constant";
    if (w->dtype != ir::DType::kInt8) return "conv weights are not int8";
    if (w->shape.size() != 4)
      return "conv weights are not 4-D (only 2-D convolutions run on the Gati)";
    for (auto d : n.get_ints("dilations", {1, 1}))
      if (d != 1) return "dilated convolution (dilations != 1) has no Gati instruction";
    const auto ap = n.get_string("auto_pad", "NOTSET");
    if (ap != "NOTSET" && ap != "VALID")
      return "auto_pad " + ap + " is not resolved to explicit pads; re-export with explicit pads";
    if (w->shape[3] > opt.arch.rows)  // split_kernels cuts rows only: v16 has no column skip
      return "kernel " + std::to_string(w->shape[2]) + "x" + std::to_string(w->shape[3]) +
             " is wider than the " + opt.arch.str() + " array has rows (" +
             std::to_string(opt.arch.rows) +
             "); a piece of a split kernel keeps all its columns (v16 has no column skip)";
    const std::int64_t group = n.get_int("group", 1);
    const ir::Tensor* xt = g.find(x);
    if (group < 1 || xt->shape[1] % group != 0 || w->shape[0] % group != 0 ||
        w->shape[1] * group != xt->shape[1])
      return "group " + std::to_string(group) + " does not divide the channels and kernels";
    if (!scalar_constant(g, n.inputs[4]))
      return "per-channel weight scales (requantize per tensor with npukit quantize)";
    return {};
  }
  if ((op == "QGemm" && ms) || (op == "QLinearMatMul" && onnx)) {
    if (auto e = first_error({int8_activation(g, x), zero_point_zero(g, n, 2, "input"),
                              zero_point_zero(g, n, 5, "weight"),
                              zero_point_zero(g, n, op == "QGemm" ? 8 : 7, "output")});
        !e.empty())
      return e;
    const ir::Tensor* w = value(g, n.inputs.size() > 3 ? n.inputs[3] : "");
    if (!w || !w->is_constant() || w->dtype != ir::DType::kInt8 || w->shape.size() != 2)
      return "the weight matrix is not a 2-D int8 constant";
    if (n.get_int("transA", 0) != 0) return "transA = 1 is not supported on the FC engine";
    if (!scalar_constant(g, n.inputs[4]))
      return "per-channel weight scales (requantize per tensor)";
    const ir::Tensor* xt = g.find(x);
    if (!xt || xt->shape.size() != 2 || xt->shape[0] != 1)
      return "the FC input is not a [1, K] vector";
    if (op == "QGemm" && (n.inputs.size() < 8 || n.inputs[7].empty()))
      return "QGemm without y_scale produces float output";
    return {};
  }
  if ((op == "QLinearAdd" || op == "QLinearMul") && ms) {
    if (n.inputs.size() < 8) return "missing inputs";
    if (auto e = first_error({int8_activation(g, x), int8_activation(g, n.inputs[3]), rank4(g, x),
                              zero_point_zero(g, n, 7, "output")});
        !e.empty())
      return e;
    const ir::Tensor* a = g.find(x);
    const ir::Tensor* b = g.find(n.inputs[3]);
    if (!b || a->shape != b->shape)
      return "operands have different shapes (broadcasting has no EltWise instruction)";
    if (a->is_constant() || b->is_constant())
      return "a constant operand (EltWise reads two activations)";
    return {};
  }
  if ((op == "QLinearSigmoid" || op == "QLinearLeakyRelu" || op == "QLinearGlobalAveragePool" ||
       op == "QLinearAveragePool") &&
      ms) {
    if (auto e = first_error({int8_activation(g, x), rank4(g, x), zero_point_zero(g, n, 2, "input"),
                              zero_point_zero(g, n, 4, "output")});
        !e.empty())
      return e;
    if (op == "QLinearGlobalAveragePool" && n.get_int("channels_last", 0) != 0)
      return "channels_last global average pool";
    if (op == "QLinearAveragePool") {
      const auto pads = n.get_ints("pads", {0, 0, 0, 0});
      const bool padded = std::any_of(pads.begin(), pads.end(), [](auto p) { return p != 0; });
      if (padded && n.get_int("count_include_pad", 0) == 0)
        return "average pool with count_include_pad = 0 and padding divides border windows by"
               " their clipped size; the POOL block divides every window by kh*kw";
      if (n.get_int("ceil_mode", 0) != 0) return "ceil_mode average pool (overhanging windows)";
    }
    return {};
  }
  if (op == "QLinearConcat" && ms) {
    if (n.inputs.size() < 5 || (n.inputs.size() - 2) % 3 != 0) return "malformed QLinearConcat";
    const std::size_t count = (n.inputs.size() - 2) / 3;
    // Without --allow-errata no CONCAT instruction is emitted (lower_concat), so its limits
    // (4 inputs, whole channel groups, square images) do not apply.
    const bool concat_block = opt.allow_errata;
    if (concat_block && count > 4) return "more than 4 inputs (CONCAT takes up to 4)";
    if (n.get_int("axis", 1) != 1) return "concat along an axis other than channels";
    if (auto e = zero_point_zero(g, n, 1, "output"); !e.empty()) return e;
    for (std::size_t k = 0; k < count; ++k) {
      const std::string& in = n.inputs[2 + 3 * k];
      if (auto e = first_error(
              {int8_activation(g, in), rank4(g, in), zero_point_zero(g, n, 4 + 3 * k, "input")});
          !e.empty())
        return e;
      const ir::Tensor* t = g.find(in);
      if (t->is_constant()) return "a constant concat input";
      if (concat_block && t->shape[1] % opt.arch.n_sa != 0)
        return "input '" + in + "' has " + std::to_string(t->shape[1]) +
               " channels, not a multiple of N_SA = " + std::to_string(opt.arch.n_sa) +
               " (CONCAT copies whole channel groups)";
      if (concat_block && t->shape[2] != t->shape[3])
        return "non-square input (CONCAT assumes IW = IH)";
    }
    return {};
  }
  if (op == "MaxPool" && onnx) {
    if (auto e = first_error({int8_activation(g, x), rank4(g, x)}); !e.empty()) return e;
    if (n.outputs.size() > 1 && !n.outputs[1].empty()) return "MaxPool with an indices output";
    for (auto d : n.get_ints("dilations", {1, 1}))
      if (d != 1) return "dilated max pool";
    const auto ap = n.get_string("auto_pad", "NOTSET");
    if (ap != "NOTSET" && ap != "VALID")
      return "auto_pad " + ap + " is not resolved to explicit pads";
    return {};
  }
  if ((op == "Relu" || op == "Clip" || op == "LeakyRelu") && onnx) {
    if (op == "LeakyRelu") return "float LeakyRelu";
    if (auto e = int8_activation(g, x); !e.empty()) return e;
    // On an FC's [1, K] output only as part of the FC's TailBlock (fuse_tail); EltWise needs NCHW.
    const ir::Node* p = g.producer(x);
    const bool fc_tail = p && (p->op_type == "QGemm" || p->op_type == "QLinearMatMul") &&
                         g.consumers(x).size() == 1 &&
                         std::find(g.outputs.begin(), g.outputs.end(), x) == g.outputs.end();
    if (auto e = rank4(g, x); !e.empty() && !fc_tail) return e;
    if (op == "Clip") {
      for (std::size_t k = 1; k < n.inputs.size() && k < 3; ++k)
        if (!n.inputs[k].empty() && !scalar_constant(g, n.inputs[k]))
          return "Clip bounds are not constants";
      // The tail's Clip is [0, ActParam] (gati.md 3.2); other lower bounds have no instruction.
      if (n.inputs.size() < 2 || n.inputs[1].empty() ||
          constant_values(g.tensor(n.inputs[1])).at(0) != 0)
        return "Clip with a lower bound other than 0 (the TailBlock clips to [0, ActParam])";
    }
    return {};
  }
  if ((op == "Flatten" || op == "Reshape") && onnx) {
    if (auto e = int8_activation(g, x); !e.empty()) return e;
    // Only as the flattening in front of the FC engine (FC.Flatten, gati.md 3.2).
    auto cons = g.consumers(n.outputs[0]);
    if (cons.empty()) return "its output leaves the graph";
    // FC.Flatten folds the reshape into the FC's read: nothing on the device writes it.
    if (std::find(g.outputs.begin(), g.outputs.end(), n.outputs[0]) != g.outputs.end())
      return "its output is a graph output (on the device the flattening is folded into the FC's "
             "read and never written)";
    for (const auto* c : cons)
      if (c->op_type != "QGemm" && c->op_type != "QLinearMatMul")
        return "a reshape that does not feed a fully connected layer has no Gati instruction";
    const ir::Tensor* in = g.find(x);
    const ir::Tensor* out = g.find(n.outputs[0]);
    if (!in || !out || out->shape.size() != 2 || out->shape[0] != 1 ||
        (in->shape.size() != 4 && in->shape.size() != 2))
      return "not a flatten of an NCHW tensor to [1, C*H*W]";
    return {};
  }
  if (op == "Resize" && onnx) {
    if (auto e = first_error({int8_activation(g, x), rank4(g, x)}); !e.empty()) return e;
    if (n.get_string("mode", "nearest") != "nearest") return "non-nearest resize (DECISIONS.md 10)";
    const ir::Tensor* in = g.find(x);
    const ir::Tensor* out = g.find(n.outputs[0]);
    if (!out || out->shape.size() != 4 || out->shape[0] != in->shape[0] ||
        out->shape[1] != in->shape[1] || out->shape[2] != 2 * in->shape[2] ||
        out->shape[3] != 2 * in->shape[3])
      return "not a 2x upsample (RESIZE does 2x nearest only, DECISIONS.md 10)";
    const auto ct = n.get_string("coordinate_transformation_mode", "half_pixel");
    if (ct != "asymmetric" && ct != "half_pixel" && ct != "pytorch_half_pixel")
      return "coordinate_transformation_mode " + ct + " is not a plain 2x nearest upsample";
    return {};
  }
  if (op == "QuantizeLinear" || op == "DequantizeLinear")
    return "float <-> int8 conversion is host work";
  return op + " has no Gati lowering";
}

namespace {

// Whether n's result leaves the device anyway: a graph output nothing on the device reads, or read
// only by nodes placed on the host.
bool result_leaves_device(const Context& ctx, const ir::Node& n) {
  const ir::Graph& g = ctx.graph;
  const std::string& y = n.outputs[0];
  const auto consumers = g.consumers(y);
  if (consumers.empty()) return std::find(g.outputs.begin(), g.outputs.end(), y) != g.outputs.end();
  return std::none_of(consumers.begin(), consumers.end(),
                      [&](const ir::Node* c) { return ctx.on_device(c->name); });
}

// A QLinearSigmoid whose result leaves the device anyway (a graph output, or read only by nodes the
// device cannot run) runs on the host when the device's form of it, at this layer's scales, is
// more than 1 output LSB from the exact sigmoid for some input code (device_sigmoid_error: the
// tanh engine's table, including its dead zone, DECISIONS.md 7). The host's QLinearSigmoid is
// onnxruntime's 256-entry table; the device then sends the sigmoid's input instead of its output,
// the same number of int8 values, so the move costs no transfer. A sigmoid in the middle of a
// device segment stays (moving it would cut the segment).
void sigmoids_to_host(Context& ctx) {
  const ir::Graph& g = ctx.graph;
  for (const auto& n : g.nodes) {
    if (n.op_type != "QLinearSigmoid" || !ctx.on_device(n.name)) continue;
    if (!result_leaves_device(ctx, n)) continue;
    const std::string what = "layer '" + n.name + "' (QLinearSigmoid)";
    const SigmoidError e =
        device_sigmoid_error(constant_float(g, n, 1), constant_float(g, n, 3), what);
    if (e.lsb <= 1.0) continue;
    const ir::Tensor* t = g.find(n.outputs[0]);
    const std::int64_t values = t ? ir::element_count(t->shape) : 0;
    ctx.place(n.name, Placement::kHost,
              fmt::format("host: the Gati's sigmoid at these scales is {:.2f} output LSBs from the "
                          "exact one (input code {}: device {}, exact {:.2f}{}), more than 1 LSB; "
                          "its result leaves the device anyway, so the host's 256-entry table "
                          "runs it: {} lookups per image, no extra transfer (the device sends "
                          "its input, as many int8 values)",
                          e.lsb, e.code, e.device, e.exact,
                          e.dead_zone ? ", in the tanh engine's dead zone |x| <= 896/65536, "
                                        "docs/ref-ops.md"
                                      : "",
                          values));
  }
}

// A QLinearLeakyRelu whose result leaves the device anyway runs on the host when the device's
// EltWise form (lower_to_gati) differs from onnxruntime's lookup table on some input code: a model
// quantized elsewhere with equal LeakyReLU input and output scales has exact ties that onnxruntime
// rounds by its float32 noise (docs/compiler.md, "LeakyReLU"). The host's QLinearLeakyRelu is
// onnxruntime's table; the device sends the LeakyReLU's input instead of its output, as many int8
// values, and saves its two EltWise passes. One in the middle of a device segment stays (within 1
// LSB, with the compiler's warning): moving it would cut the segment.
void leaky_relus_to_host(Context& ctx) {
  const ir::Graph& g = ctx.graph;
  if (!ctx.options.leaky_relu_ties_to_host) return;
  for (const auto& n : g.nodes) {
    if (n.op_type != "QLinearLeakyRelu" || !ctx.on_device(n.name)) continue;
    if (!result_leaves_device(ctx, n)) continue;
    const double alpha = n.get_float("alpha", 0.01f);
    const int miss = leaky_relu_mismatches(constant_float(g, n, 1), constant_float(g, n, 3), alpha);
    if (miss == 0) continue;
    ctx.place(n.name, Placement::kHost,
              fmt::format("host: the Gati's LeakyReLU (two EltWise passes) differs from "
                          "onnxruntime's lookup table on {} of 256 int8 inputs (exact ties: equal "
                          "input and output scales, alpha {:.6g}); its result leaves the device "
                          "anyway, so the host's table runs it, no extra transfer",
                          miss, alpha));
  }
}

// The device nodes from a global average pool's result to where it leaves the device: a chain of
// single-consumer nodes over 1x1 images or [1, K] vectors (a squeeze-excitation's two 1x1 convs
// and gate, a head's flatten and FC) whose end is read only by host nodes (or is a graph output).
// Empty when the result stays on the device (e.g. a squeeze-excitation product the device runs).
std::vector<std::string> chain_to_host(const Context& ctx, const ir::Node& pool) {
  const ir::Graph& g = ctx.graph;
  std::vector<std::string> chain{pool.name};
  std::string y = pool.outputs.at(0);
  for (;;) {
    const auto consumers = g.consumers(y);
    const bool output = std::find(g.outputs.begin(), g.outputs.end(), y) != g.outputs.end();
    if (std::none_of(consumers.begin(), consumers.end(),
                     [&](const ir::Node* c) { return ctx.on_device(c->name); }))
      return chain;
    if (output || consumers.size() != 1) return {};
    const ir::Node& c = *consumers[0];
    const ir::Tensor* out = g.find(c.outputs.at(0));
    if (c.inputs.empty() || c.inputs[0] != y || !out ||
        ir::element_count(out->shape) != (out->shape.size() >= 2 ? out->shape[1] : -1))
      return {};
    for (std::size_t k = 1; k < c.inputs.size(); ++k) {
      const ir::Tensor* t = c.inputs[k].empty() ? nullptr : g.find(c.inputs[k]);
      if (t && !t->is_constant()) return {};  // a second activation (an EltWise)
    }
    chain.push_back(c.name);
    y = c.outputs.at(0);
  }
}

// A global average pool over an image too large for one all-ones conv (wider than the array's
// rows or taller than 15) runs on the device as 3x3 stride-3 average stages that each round to
// int8 at the pool's input scale (pools_as_convs). When that scale is coarser than the output's
// (a squeeze-excitation or head mean is much smaller than the activations it averages, so
// calibration gives it a finer scale), the stages' roundings, up to stages x 0.5 x s_in / s_out
// output LSBs, can put the result more than 1 LSB from the exact mean (cls_mbv3_op9 at 48x160,
// 12x40 pools: up to 9 LSBs off onnxruntime). Where the pool's result leaves the device anyway
// after a few small layers (chain_to_host: a squeeze-excitation whose product the host computes, a
// classifier head before a host softmax), the pool and those layers run on the host: the exact
// int32 sum rounded once, and the device sends the pool's input instead of the chain's output (no
// extra segment). A pool whose result stays on the device keeps the staged form.
void global_pools_to_host(Context& ctx) {
  if (ctx.options.allow_errata) return;  // GatiPool global_average itself, no stages
  const ir::Graph& g = ctx.graph;
  for (const auto& n : g.nodes) {
    if (n.op_type != "QLinearGlobalAveragePool" || !ctx.on_device(n.name)) continue;
    const ir::Tensor& x = g.tensor(n.inputs.at(0));
    const int stages = global_pool_stages(x.shape.at(2), x.shape.at(3), ctx.options.arch.rows);
    if (stages == 0) continue;
    const double s_in = constant_float(g, n, 1), s_out = constant_float(g, n, 3);
    const double bound = 0.5 * stages * s_in / s_out;
    if (bound <= 0.5) continue;  // within 1 LSB of the exact mean after the final rounding
    const auto chain = chain_to_host(ctx, n);
    if (chain.empty()) continue;
    const std::string why = fmt::format(
        "host: on the device the global average '{}' over {}x{} would take {} 3x3 stride-3 "
        "average stage(s) rounding at its input scale {:.4g}, {:.3g} times its output scale: up "
        "to {:.2f} output LSBs from the exact mean; its result leaves the device after {} small "
        "layer(s) anyway, so the host sums exactly and rounds once (no extra segment)",
        n.name, x.shape.at(2), x.shape.at(3), stages, s_in, s_in / s_out, bound + 0.5,
        chain.size() - 1);
    for (const auto& name : chain) ctx.place(name, Placement::kHost, why);
  }
}

}  // namespace

void assign_devices(Context& ctx) {
  const ir::Graph& g = ctx.graph;
  for (const auto& n : g.nodes) {
    const std::string why = why_not_on_device(g, n, ctx.options);
    if (why.empty()) {
      ctx.place(n.name, Placement::kDevice,
                channel_copy_sources(g, n).empty()
                    ? "int8 " + n.op_type + " lowers to a Gati megablock"
                    : "int8 channel copy (a channel shuffle or Slice, channel_copies) lowers to "
                      "a 1x1 Gati conv");
    } else {
      ctx.place(n.name, Placement::kHost, "host: " + why);
    }
  }
  sigmoids_to_host(ctx);
  leaky_relus_to_host(ctx);
  global_pools_to_host(ctx);
  // After the moves above: a model whose only device candidates went to the host has nothing to
  // compile either.
  if (std::none_of(g.nodes.begin(), g.nodes.end(),
                   [&](const ir::Node& n) { return ctx.on_device(n.name); })) {
    std::string first;
    for (const auto& n : g.nodes) {
      first = n.name + " (" + n.op_type + "): " + ctx.placement[n.name].reason;
      if (n.op_type != "QuantizeLinear" && n.op_type != "DequantizeLinear") break;
    }
    fail(
        "nothing in this model can run on the Gati: it needs int8 QOperator or QDQ ops "
        "(run npukit quantize on a float model). First node: {}",
        first);
  }
}

}  // namespace npukit::compiler
