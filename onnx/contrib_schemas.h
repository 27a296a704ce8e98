// Shape inference for the com.microsoft quantized ops onnxruntime's quantizer writes (QGemm,
// QLinearAdd, QLinearMul, QLinearConcat, QLinearSigmoid, QLinearLeakyRelu, QLinearAveragePool,
// QLinearGlobalAveragePool, QuantizeLinear, DequantizeLinear). The ONNX library does not know
// them, so without these its shape inference stops at the first one and everything downstream
// stays untyped. The schemas are deliberately loose (any inputs, unchecked attributes): they
// exist to infer output types and shapes, not to validate; the ONNX checker never sees them.
#pragma once

#include <onnx/defs/schema.h>

#include <string_view>

namespace npukit::onnxio {

// ONNX's own registry plus the com.microsoft schemas above. Its default-domain conv and pool
// schemas check their inputs' ranks before libonnx's own inference reads them.
const ::onnx::ISchemaRegistry* schema_registry_with_contrib();

// The windowed ops (convolutions and pools, both domains): the input that holds an op's weights
// (whose shape gives the kernel), kNoWeights for a pool (its kernel is an attribute), or
// kNotWindowed for any other op.
inline constexpr int kNoWeights = -1, kNotWindowed = -2;
int window_weights_input(std::string_view op_type);

}  // namespace npukit::onnxio
