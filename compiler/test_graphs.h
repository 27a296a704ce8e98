// Small graph builders for the compiler's tests: QOperator int8 graphs written node by node, with
// shapes set by hand (as the importer's shape inference would).
#pragma once

#include "compiler/context.h"
#include "ir/graph.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace npukit::compiler::testing {

struct GraphBuilder {
  ir::Graph g;

  GraphBuilder() {
    g.name = "test";
    g.opset = 13;
    g.opsets = {{"", 13}, {"com.microsoft", 1}};
  }

  std::string value(const std::string& name, ir::DType dtype, ir::Shape shape) {
    ir::Tensor t;
    t.name = name;
    t.dtype = dtype;
    t.shape = std::move(shape);
    g.tensors[name] = t;
    return name;
  }
  std::string input(const std::string& name, ir::DType dtype, ir::Shape shape) {
    value(name, dtype, std::move(shape));
    g.inputs.push_back(name);
    return name;
  }
  template <typename T>
  std::string constant(const std::string& name, ir::DType dtype, ir::Shape shape,
                       const std::vector<T>& v) {
    ir::Tensor t;
    t.name = name;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.data.resize(v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(t.data.data(), v.data(), t.data.size());
    g.tensors[name] = t;
    return name;
  }
  std::string f32(const std::string& name, float v) {
    return constant<float>(name, ir::DType::kFloat32, {}, {v});
  }
  std::string i8(const std::string& name, std::int8_t v) {
    return constant<std::int8_t>(name, ir::DType::kInt8, {}, {v});
  }

  ir::Node& node(const std::string& op, const std::string& domain, std::vector<std::string> inputs,
                 std::vector<std::string> outputs, const std::string& name) {
    ir::Node n;
    n.op_type = op;
    n.domain = domain;
    n.inputs = std::move(inputs);
    n.outputs = std::move(outputs);
    n.name = name;
    g.nodes.push_back(n);
    return g.nodes.back();
  }

  // QLinearConv with per-tensor scales; weights [kn, c/group, kh, kw] from `w` (row-major).
  std::string qconv(const std::string& name, const std::string& x, float sx,
                    std::vector<std::int8_t> w, ir::Shape wshape, float sw, float sy,
                    std::vector<std::int32_t> bias, std::vector<std::int64_t> pads,
                    std::int64_t stride = 1, std::int64_t group = 1) {
    const ir::Tensor& xt = g.tensor(x);
    const std::int64_t oh = (xt.shape[2] + pads[0] + pads[2] - wshape[2]) / stride + 1;
    const std::int64_t ow = (xt.shape[3] + pads[1] + pads[3] - wshape[3]) / stride + 1;
    const std::string y = value(name + "_out", ir::DType::kInt8, {xt.shape[0], wshape[0], oh, ow});
    std::vector<std::string> in = {x,
                                   f32(name + "_xs", sx),
                                   i8(name + "_xz", 0),
                                   constant<std::int8_t>(name + "_w", ir::DType::kInt8, wshape, w),
                                   f32(name + "_ws", sw),
                                   i8(name + "_wz", 0),
                                   f32(name + "_ys", sy),
                                   i8(name + "_yz", 0)};
    if (!bias.empty())
      in.push_back(constant<std::int32_t>(name + "_b", ir::DType::kInt32,
                                          {static_cast<std::int64_t>(bias.size())}, bias));
    ir::Node& n = node("QLinearConv", "", in, {y}, name);
    n.attributes["pads"] = pads;
    n.attributes["strides"] = std::vector<std::int64_t>{stride, stride};
    n.attributes["kernel_shape"] = std::vector<std::int64_t>{wshape[2], wshape[3]};
    if (group != 1) n.attributes["group"] = group;
    return y;
  }

  std::string relu(const std::string& name, const std::string& x) {
    const std::string y = value(name + "_out", ir::DType::kInt8, g.tensor(x).shape);
    node("Relu", "", {x}, {y}, name);
    return y;
  }

  // com.microsoft QLinearLeakyRelu of x, whose scale and zero point are the tensors xs and xz; the
  // output keeps xz as its zero point.
  std::string qleaky(const std::string& name, const std::string& x, const std::string& xs,
                     const std::string& xz, float sy, float alpha) {
    const std::string y = value(name + "_out", ir::DType::kInt8, g.tensor(x).shape);
    node("QLinearLeakyRelu", "com.microsoft", {x, xs, xz, f32(name + "_ys", sy), xz}, {y}, name)
        .attributes["alpha"] = alpha;
    return y;
  }

  std::string maxpool(const std::string& name, const std::string& x, std::int64_t k, std::int64_t s,
                      std::int64_t pad = 0) {
    const auto& xs = g.tensor(x).shape;
    const std::string y =
        value(name + "_out", ir::DType::kInt8,
              {xs[0], xs[1], (xs[2] + 2 * pad - k) / s + 1, (xs[3] + 2 * pad - k) / s + 1});
    ir::Node& n = node("MaxPool", "", {x}, {y}, name);
    n.attributes["kernel_shape"] = std::vector<std::int64_t>{k, k};
    n.attributes["strides"] = std::vector<std::int64_t>{s, s};
    n.attributes["pads"] = std::vector<std::int64_t>{pad, pad, pad, pad};
    return y;
  }
};

// The op types of g's nodes, in order: what a pass test compares after a rewrite.
inline std::vector<std::string> op_types(const ir::Graph& g) {
  std::vector<std::string> v;
  for (const auto& n : g.nodes) v.push_back(n.op_type);
  return v;
}

inline std::vector<std::int8_t> random_int8(std::size_t n, unsigned seed, int lo = -128,
                                            int hi = 127) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<std::int8_t> v(n);
  for (auto& x : v) x = static_cast<std::int8_t>(d(rng));
  return v;
}

inline std::vector<std::int32_t> random_int32(std::size_t n, unsigned seed, int lo, int hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace npukit::compiler::testing
