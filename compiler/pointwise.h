// Shared by the passes that give per-element float ops between DequantizeLinear and QuantizeLinear
// an int8 form the Gati runs (hard_activations, constant_arithmetic; docs/compiler.md
// "Pointwise functions"): finding the DQ -> op -> Q pattern, and writing a per-channel affine map
// y = a_c x + b_c as a depthwise 1x1 QLinearConv (the Gati's per-channel scale and bias).
#pragma once

#include "compiler/context.h"

#include <functional>
#include <optional>

namespace npukit::compiler {

// `op`'s operand `input` is DequantizeLinear(int8 NCHW `xq`, scalar scale `sx`, zero point 0) and
// its only output is read by exactly one QuantizeLinear (scalar scale `sy`, zero point 0) making
// int8 `yq` (not a graph output in between).
struct PointwiseMatch {
  std::string xq, x_scale, x_zero;
  double sx = 1;
  std::string yq, y_scale, y_zero;
  double sy = 1;
  std::string q_node;  // the QuantizeLinear node's name
};
std::optional<PointwiseMatch> match_pointwise(ir::Graph& g, const ir::Node& op, std::size_t input);

// The int8 depthwise 1x1 QLinearConv `name` computing, per channel c of int8 `xq` (scale sx),
// y = a[c] x + b[c] requantized to scale sy into `yq` (a and b have one entry or C entries). The
// weights are int8 at one scale max|a| / 127 (a scalar slope is exact), the bias int32 at sx times
// that scale. nullopt when a bias does not fit int32.
std::optional<ir::Node> depthwise_affine(ir::Graph& g, const std::string& name,
                                         const PointwiseMatch& m, const std::vector<double>& a,
                                         const std::vector<double>& b, const std::string& yq,
                                         const std::string& y_scale, const std::string& y_zero);

// Replaces the nodes of `g` named `old_node` and `q_node` by `replacement` (in order, where
// `old_node` was) and drops DequantizeLinear nodes nobody reads any more.
void replace_pointwise(ir::Graph& g, const std::string& old_node, const std::string& q_node,
                       std::vector<ir::Node> replacement);

// The driver of the pointwise rewrite passes: names every unnamed node, then offers a copy of
// each node in order to `rewrite`, starting over after every rewrite that returns true (it has
// replaced nodes around the one it was given) until a whole sweep changes nothing.
void rewrite_until_done(ir::Graph& g, const std::function<bool(const ir::Node&)>& rewrite);

// A float scalar constant in g (for scales).
std::string float_scalar(ir::Graph& g, const std::string& base, float v);

}  // namespace npukit::compiler
