// Shape inference for the com.microsoft quantized ops onnxruntime's quantizer writes (QGemm,
// QLinearAdd, QLinearMul, QLinearConcat, QLinearSigmoid, QLinearLeakyRelu, QLinearAveragePool,
// QLinearGlobalAveragePool, QuantizeLinear, DequantizeLinear). The ONNX library does not know
// them, so without these its shape inference stops at the first one and everything downstream
// stays untyped. The schemas are deliberately loose (any inputs, unchecked attributes): they
// exist to infer output types and shapes, not to validate; the ONNX checker never sees them.
#pragma once

#include <onnx/defs/schema.h>

namespace npukit::onnxio {

// ONNX's own registry plus the com.microsoft schemas above.
const ::onnx::ISchemaRegistry* schema_registry_with_contrib();

}  // namespace npukit::onnxio
