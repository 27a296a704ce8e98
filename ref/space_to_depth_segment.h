// The host segment `npukit compile` puts before a resnet's space-to-depth stem (a 7x7 stride-2
// conv on 224x224 RGB, device/conv.cpp splits it into pieces of 8 and 4 channels), as a graph for
// the executor's tests and benchmarks: QuantizeLinear to int8, Pad 3, Reshape + Transpose +
// Reshape (space to depth by 2), and the two channel Slices ("in0", "in8").
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor_util.h"

namespace npukit::ref {

inline ir::Graph space_to_depth_segment(float scale = 0.0308f) {
  ir::Graph g;
  g.inputs = {"x"};
  g.outputs = {"in0", "in8"};
  g.tensors["x"] = ir::Tensor{"x", ir::DType::kFloat32, {1, 3, 224, 224}, {}};
  auto add = [&](const std::string& name, ir::Tensor t) {
    t.name = name;
    g.tensors[name] = std::move(t);
  };
  add("scale", ir::make_tensor<float>({1}, {scale}));
  add("zero", ir::make_tensor<std::int8_t>({1}, {0}));
  add("pads", ir::make_tensor<std::int64_t>({8}, {0, 0, 3, 3, 0, 0, 3, 3}));
  add("pad_value", ir::make_tensor<std::int8_t>({1}, {0}));
  add("blocks", ir::make_tensor<std::int64_t>({6}, {1, 3, 115, 2, 115, 2}));
  add("channels", ir::make_tensor<std::int64_t>({4}, {1, 12, 115, 115}));
  add("axes", ir::make_tensor<std::int64_t>({1}, {1}));
  add("s0", ir::make_tensor<std::int64_t>({1}, {0}));
  add("e0", ir::make_tensor<std::int64_t>({1}, {8}));
  add("s8", ir::make_tensor<std::int64_t>({1}, {8}));
  add("e8", ir::make_tensor<std::int64_t>({1}, {12}));
  auto node = [&](const char* name, const char* op, std::vector<std::string> in,
                  std::vector<std::string> out) -> ir::Node& {
    ir::Node n;
    n.name = name;
    n.op_type = op;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    g.nodes.push_back(std::move(n));
    return g.nodes.back();
  };
  node("quantize", "QuantizeLinear", {"x", "scale", "zero"}, {"q"});
  node("pad", "Pad", {"q", "pads", "pad_value"}, {"padded"});
  node("blocks", "Reshape", {"padded", "blocks"}, {"b"});
  node("transpose", "Transpose", {"b"}, {"t"}).attributes["perm"] =
      std::vector<std::int64_t>{0, 3, 5, 1, 2, 4};
  node("channels", "Reshape", {"t", "channels"}, {"c"});
  node("slice0", "Slice", {"c", "s0", "e0", "axes"}, {"in0"});
  node("slice8", "Slice", {"c", "s8", "e8", "axes"}, {"in8"});
  return g;
}

}  // namespace npukit::ref
