// Internal to onnx/: the ModelProto-level steps of import (opset upgrade, constant folding) and
// the TensorProto <-> ir::Tensor conversions they share with onnx_io.cpp.
#pragma once

#include "ir/graph.h"

#include <onnx/onnx_pb.h>

#include <string>

namespace npukit::onnxio {

// `what` names the model in error messages.
// with_data false: only the checks (type, shape, the raw data's size); raw data is not copied.
ir::Tensor tensor_from_proto(const ::onnx::TensorProto& p, const std::string& what,
                             bool with_data = true);
void tensor_to_proto(const ir::Tensor& t, ::onnx::TensorProto& p);
ir::Attribute attribute_from_proto(const ::onnx::AttributeProto& a, const std::string& where);
// The value of a Constant node as a tensor named after its output.
ir::Tensor constant_value(const ::onnx::NodeProto& n, const std::string& where);

// The ai.onnx opset every model is upgraded to when it is older.
inline constexpr std::int64_t kUpgradeOpset = 13;

// Rewrites the nodes of a checked, shape-inferred model of ai.onnx opset 7..12 into their opset 13
// form (attributes that became inputs, Softmax's coerce-to-2D, Upsample/Resize-10 as Resize, BN's
// `spatial`, ...) and sets the opset import to 13. Ops that did not change are left alone; the
// model must be shape-inferred again afterwards. Throws naming the node for the few forms that
// have no opset 13 equivalent. Returns the number of nodes rewritten.
int upgrade_to_opset13(::onnx::ModelProto& model, const std::string& what);

// Evaluates every shape-arithmetic node (Shape, Gather, Cast, Slice, Concat, Unsqueeze, Reshape,
// integer arithmetic, ...) whose inputs are all constant, or whose input's shape is fully known
// for Shape and Size, with the reference executor's kernels, and replaces it by an initializer.
// Constant nodes become initializers first. QuantizeLinear/DequantizeLinear are never folded (a
// QDQ model keeps its weights' quantization). Shape inference must have run; the caller infers
// again until nothing changes. Returns the number of nodes folded.
int fold_constants(::onnx::ModelProto& model, const std::string& what);

// Rewrites hard-swish written out (x * Clip(x + 3, 0, 6) / 6 in its orders, x * HardSigmoid(x)
// with alpha 1/6) into HardSwish, and Clip(x + 3, 0, 6) / 6 into HardSigmoid(1/6, 0.5); the
// constants must be scalars and the inner values used only by the pattern. Raises the graph to
// opset 14 (HardSwish's) when it fuses anything. Returns the number of rewrites.
int fuse_hard_activations(ir::Graph& graph);

}  // namespace npukit::onnxio
