// Importer-side normalization of quantized models into the native scheme (DECISIONS.md 5):
// per-tensor symmetric int8 activations (zero point 0), per-tensor symmetric int8 weights, int32
// biases at scale input_scale * weight_scale.
//
// QDQ models carry their float values (DequantizeLinear of constant weights, QuantizeLinear /
// DequantizeLinear pairs around activations), so anything outside the scheme is requantized:
//   weights   per-channel or asymmetric -> float -> per-tensor symmetric int8
//   activations uint8 / non-zero zero point -> symmetric int8 covering the same float range
//   biases    -> int32 at the new input_scale * weight_scale
// QOperator models (QLinearConv, QGemm, ...) do not: their activations exist only as integers,
// so a per-channel weight or an asymmetric activation there is rejected with a message naming
// the node and tensor and saying what to do. Float models pass through unchanged.
#pragma once

#include "ir/graph.h"

#include <string>
#include <vector>

namespace npukit::onnxio {

struct NormalizeReport {
  std::vector<std::string> changes;  // one line per requantized tensor
};

ir::Graph normalize_quantization(const ir::Graph& graph, NormalizeReport* report = nullptr);

}  // namespace npukit::onnxio
