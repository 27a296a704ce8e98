// ONNX files in and out of the graph IR, using the real ONNX library: protobuf parsing, the ONNX
// checker and ONNX shape inference (so every intermediate value has a known type and shape).
// Also tensors in the two file formats users hand us: NumPy .npy and ONNX TensorProto .pb (the
// format of ONNX's own test data).
#pragma once

#include "common/bytes.h"
#include "common/npy.h"
#include "ir/graph.h"

#include <string>

namespace npukit::onnxio {

// The ai.onnx opsets the importer accepts; others are rejected with advice to convert.
inline constexpr std::int64_t kMinOpset = 11;
inline constexpr std::int64_t kMaxOpset = 17;

// Parses, checks (onnx::checker) and shape-infers (onnx::shape_inference) a model, then converts
// it: initializers and Constant nodes become constant tensors, attributes are copied, every value
// whose type is known gets an ir::Tensor entry. Nodes without a name get "<op_type>_<index>".
// com.microsoft quantized ops (QGemm, QLinearAdd, ...) are accepted and shape-inferred too.
// Throws npukit::Error naming the file and the node, tensor or attribute at fault.
ir::Graph load_onnx(const std::string& path);
// `what` names the source in error messages.
ir::Graph load_onnx_bytes(ByteSpan bytes, const std::string& what = "<memory>");

// Writes a ModelProto that onnx::checker accepts (checked before writing): constants become
// initializers, typed intermediates become value_info. Throws naming what would be invalid.
void save_onnx(const ir::Graph& graph, const std::string& path);
Bytes save_onnx_bytes(const ir::Graph& graph);

// One ONNX TensorProto file (raw_data or typed fields).
ir::Tensor load_tensor_pb(const std::string& path);
ir::Tensor parse_tensor_pb(ByteSpan bytes, const std::string& what);
Bytes encode_tensor_pb(const ir::Tensor& tensor);

// .npy <-> ir::Tensor. float64 and int types map one to one; bool to kBool.
ir::Tensor tensor_from_npy(const NpyArray& array, const std::string& name);
NpyArray npy_from_tensor(const ir::Tensor& tensor);

// Reads a tensor from .npy or .pb (chosen by extension; anything else is tried as .npy, then .pb).
ir::Tensor load_tensor_file(const std::string& path);
void save_tensor_npy(const ir::Tensor& tensor, const std::string& path);

}  // namespace npukit::onnxio
