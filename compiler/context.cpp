#include "compiler/context.h"

#include "common/error.h"

#include <cmath>
#include <cstring>

namespace npukit::compiler {

WeightScales parse_weight_scales(const std::string& name, const std::string& what) {
  if (name == "auto") return WeightScales::kAuto;
  if (name == "per-tensor") return WeightScales::kPerTensor;
  if (name == "per-channel") return WeightScales::kPerChannel;
  fail("{} '{}': use auto, per-tensor or per-channel", what, name);
}

const char* weight_scales_name(WeightScales mode) {
  switch (mode) {
    case WeightScales::kPerTensor:
      return "per-tensor";
    case WeightScales::kPerChannel:
      return "per-channel";
    case WeightScales::kAuto:
      break;
  }
  return "auto";
}

void Context::place(const std::string& node, Placement where, std::string reason) {
  if (!placement.count(node)) placement_order.push_back(node);
  placement[node] = {where, std::move(reason)};
}

bool Context::on_device(const std::string& node) const {
  auto it = placement.find(node);
  return it != placement.end() && it->second.placement == Placement::kDevice;
}

bool Context::made_on_device(const std::string& value) const {
  const ir::Node* producer = graph.producer(value);
  return producer && on_device(producer->name);
}

double ScaleShift::value() const { return static_cast<double>(scale) / std::ldexp(1.0, shift); }

static ScaleShift choose(double multiplier, std::int64_t max_scale, const std::string& what) {
  if (!(multiplier > 0) || !std::isfinite(multiplier))
    fail("{}: requantization multiplier {} is not a positive finite number", what, multiplier);
  ScaleShift best{0, 0};
  double best_err = 0;
  for (int shift = 0; shift <= 31; ++shift) {
    const double exact = std::ldexp(multiplier, shift);
    const auto scale = static_cast<std::int64_t>(std::llround(exact));
    if (scale > max_scale) break;  // larger shifts only make the scale bigger
    if (scale < 1) continue;
    const double err = std::fabs(static_cast<double>(scale) / std::ldexp(1.0, shift) - multiplier);
    // On ties prefer the larger shift: the same value with more fraction bits.
    if (best.scale == 0 || err <= best_err) {
      best = {scale, shift};
      best_err = err;
    }
  }
  if (best.scale == 0) {
    if (multiplier >= 1)
      fail("{}: requantization multiplier {} is too large for a {}-bit scale (at most {})", what,
           multiplier, max_scale == 32767 ? 16 : 16, max_scale);
    fail(
        "{}: requantization multiplier {} is too small: even with shift 31 the scale rounds to 0;"
        " check the model's scales",
        what, multiplier);
  }
  return best;
}

ScaleShift choose_scale_shift(double multiplier, const std::string& what) {
  return choose(multiplier, 32767, what);
}

ScaleShift choose_pool_scale_shift(double multiplier, const std::string& what) {
  return choose(multiplier, 32767, what);
}

std::vector<double> constant_values(const ir::Tensor& t) {
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(ir::element_count(t.shape), 0));
  std::vector<double> out(n);
  if (t.data.size() < n * ir::dtype_size(t.dtype))
    fail("constant '{}' holds {} bytes, fewer than its shape needs", t.name, t.data.size());
  for (std::size_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case ir::DType::kFloat32:
        out[i] = t.as<float>()[i];
        break;
      case ir::DType::kFloat64:
        out[i] = t.as<double>()[i];
        break;
      case ir::DType::kInt8:
        out[i] = t.as<std::int8_t>()[i];
        break;
      case ir::DType::kUInt8:
        out[i] = t.as<std::uint8_t>()[i];
        break;
      case ir::DType::kInt16:
        out[i] = t.as<std::int16_t>()[i];
        break;
      case ir::DType::kInt32:
        out[i] = t.as<std::int32_t>()[i];
        break;
      case ir::DType::kInt64:
        out[i] = static_cast<double>(t.as<std::int64_t>()[i]);
        break;
      default:
        fail("constant '{}' has unsupported dtype {}", t.name, ir::dtype_name(t.dtype));
    }
  }
  return out;
}

static const ir::Tensor& constant_input(const ir::Graph& g, const ir::Node& n, std::size_t input) {
  if (input >= n.inputs.size() || n.inputs[input].empty())
    fail("node '{}' ({}): input {} is missing", n.name, n.op_type, input);
  const ir::Tensor* t = g.find(n.inputs[input]);
  if (!t || !t->is_constant())
    fail("node '{}' ({}): input {} ('{}') must be a constant (an initializer)", n.name, n.op_type,
         input, n.inputs[input]);
  return *t;
}

float constant_float(const ir::Graph& g, const ir::Node& n, std::size_t input) {
  const auto& t = constant_input(g, n, input);
  const auto v = constant_values(t);
  if (v.empty()) fail("node '{}': constant '{}' is empty", n.name, t.name);
  for (double x : v)
    if (x != v[0])
      fail(
          "node '{}' ({}): '{}' has {} different values (per-channel); the Gati quantizer has one"
          " scale per tensor (DECISIONS.md 5)",
          n.name, n.op_type, t.name, v.size());
  return static_cast<float>(v[0]);
}

std::int64_t constant_int(const ir::Graph& g, const ir::Node& n, std::size_t input,
                          std::int64_t fallback) {
  if (input >= n.inputs.size() || n.inputs[input].empty()) return fallback;
  const auto& t = constant_input(g, n, input);
  const auto v = constant_values(t);
  if (v.empty()) return fallback;
  for (double x : v)
    if (x != v[0])
      fail(
          "node '{}' ({}): zero point '{}' differs between channels; only per-tensor zero points"
          " are supported",
          n.name, n.op_type, t.name);
  return static_cast<std::int64_t>(v[0]);
}

std::int64_t conv_out(std::int64_t in, std::int64_t pad_begin, std::int64_t pad_end,
                      std::int64_t kernel, std::int64_t stride) {
  const std::int64_t span = in + pad_begin + pad_end - kernel;
  if (span < 0 || stride < 1) return 0;
  return span / stride + 1;
}

std::string unique_name(const ir::Graph& g, const std::string& base) {
  auto used = [&](const std::string& s) {
    if (g.tensors.count(s)) return true;
    for (const auto& n : g.nodes)
      if (n.name == s) return true;
    return false;
  };
  if (!used(base)) return base;
  for (int i = 1;; ++i) {
    std::string s = base + "_" + std::to_string(i);
    if (!used(s)) return s;
  }
}

std::string add_constant(ir::Graph& g, const std::string& base, ir::DType dtype,
                         const ir::Shape& shape, const void* data) {
  ir::Tensor t;
  t.name = unique_name(g, base);
  t.dtype = dtype;
  t.shape = shape;
  const auto bytes = static_cast<std::size_t>(ir::element_count(shape)) * ir::dtype_size(dtype);
  t.data.resize(bytes);
  if (bytes) std::memcpy(t.data.data(), data, bytes);
  std::string name = t.name;
  g.tensors[name] = std::move(t);
  return name;
}

std::string add_value(ir::Graph& g, const std::string& base, ir::DType dtype,
                      const ir::Shape& shape) {
  ir::Tensor t;
  t.name = unique_name(g, base);
  t.dtype = dtype;
  t.shape = shape;
  std::string name = t.name;
  g.tensors[name] = std::move(t);
  return name;
}

bool is_gati(const ir::Node& n) { return n.domain == kGatiDomain; }

}  // namespace npukit::compiler
