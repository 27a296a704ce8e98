// ONNX files in and out of the graph IR, using the real ONNX library: protobuf parsing, the ONNX
// checker and ONNX shape inference (so every intermediate value has a known type and shape).
// Also tensors in the two file formats users hand us: NumPy .npy and ONNX TensorProto .pb (the
// format of ONNX's own test data).
#pragma once

#include "common/bytes.h"
#include "common/npy.h"
#include "ir/graph.h"

#include <map>
#include <string>
#include <vector>

namespace npukit::onnxio {

// The ai.onnx opsets the importer accepts (kMaxOpset: the newest the ONNX library knows). Models
// older than 13 are upgraded to opset 13 on import (onnx/opset_upgrade.cpp), so the graph's opset
// is never below 13.
inline constexpr std::int64_t kMinOpset = 7;
inline constexpr std::int64_t kMaxOpset = 17;

struct LoadOptions {
  // Shapes for graph inputs by name (`--input-shape NAME=1,3,320,320`): every dimension, giving
  // the symbolic ones a size; dimensions the model states must agree.
  std::map<std::string, ir::Shape> input_shapes;
};

// Parses `NAME=1,3,320,320` into options.input_shapes. A spec without `NAME=` applies to the
// model's only input (stored under the name ""). Throws naming the spec when malformed.
void add_input_shape(LoadOptions& options, const std::string& spec);

// The graph inputs that have an unknown dimension other than the batch (axis 0).
std::vector<std::string> symbolic_inputs(const ir::Graph& graph);

// The shape a symbolic input takes from sample data: `data` is one input (same rank) or a stack
// of them along a new axis 0; an unknown batch becomes 1. Throws when the ranks do not fit.
ir::Shape shape_from_sample(const ir::Tensor& input, const ir::Shape& data,
                            const std::string& what);

// Parses, checks (onnx::checker), applies options.input_shapes, upgrades opsets before 13,
// shape-infers (onnx::shape_inference) and folds constant shape arithmetic (Shape, Gather, Cast,
// Slice, Concat, ... on constants, until nothing changes), then converts it: initializers and
// Constant nodes become constant tensors, attributes are copied, every value whose type is known
// gets an ir::Tensor entry. Nodes without a name get "<op_type>_<index>". com.microsoft quantized
// ops (QGemm, QLinearAdd, ...) are accepted and shape-inferred too. Throws npukit::Error naming the
// file and the node, tensor or attribute at fault.
ir::Graph load_onnx(const std::string& path, const LoadOptions& options = {});
// `what` names the source in error messages.
ir::Graph load_onnx_bytes(ByteSpan bytes, const std::string& what = "<memory>",
                          const LoadOptions& options = {});

// Writes a ModelProto that onnx::checker accepts (checked before writing): constants become
// initializers, typed intermediates become value_info. Throws naming what would be invalid.
void save_onnx(const ir::Graph& graph, const std::string& path);
Bytes save_onnx_bytes(const ir::Graph& graph);

// One ONNX TensorProto file (raw_data or typed fields).
ir::Tensor load_tensor_pb(const std::string& path);
ir::Tensor parse_tensor_pb(ByteSpan bytes, const std::string& what);
Bytes encode_tensor_pb(const ir::Tensor& tensor);

// .npy <-> ir::Tensor. float64 and int types map one to one; bool to kBool. The array's bytes
// move into the tensor (pass an rvalue to avoid a copy).
ir::Tensor tensor_from_npy(NpyArray array, const std::string& name);
NpyArray npy_from_tensor(const ir::Tensor& tensor);

// Reads a tensor from .npy or .pb (chosen by extension; anything else is tried as .npy, then .pb).
ir::Tensor load_tensor_file(const std::string& path);
void save_tensor_npy(const ir::Tensor& tensor, const std::string& path);

}  // namespace npukit::onnxio
