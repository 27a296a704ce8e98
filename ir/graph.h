// npukit's graph IR: a faithful, protobuf-free image of an ONNX graph that every pass reads and
// rewrites. The ONNX importer (onnx/) produces it, the quantizer and compiler passes transform it,
// the reference executor (ref/) runs it. Tensor data is stored in host byte order.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace npukit::ir {

// Values match onnx::TensorProto::DataType so conversions are trivial.
enum class DType : std::int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
};

std::size_t dtype_size(DType t);
const char* dtype_name(DType t);

using Shape = std::vector<std::int64_t>;  // -1 for an unknown dimension
std::int64_t element_count(const Shape& shape);

// A named value: graph input, output, intermediate or constant (initializer).
struct Tensor {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;
  std::vector<std::uint8_t> data;  // constants only: element_count * dtype_size bytes
  bool is_constant() const { return !data.empty() || (dtype != DType::kUndefined && shape.size() == 1 && shape[0] == 0); }

  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(data.data()); }
  template <typename T>
  T* as_mutable() { return reinterpret_cast<T*>(data.data()); }
};

struct Graph;

using Attribute = std::variant<std::int64_t, float, std::string, std::vector<std::int64_t>,
                               std::vector<float>, std::vector<std::string>, Tensor>;

struct Node {
  std::string name;
  std::string op_type;  // ONNX op type, or an npukit-internal op ("Gati*")
  std::string domain;   // "" for ai.onnx, "com.microsoft", ...
  std::vector<std::string> inputs;   // "" for an omitted optional input
  std::vector<std::string> outputs;
  std::map<std::string, Attribute> attributes;

  bool has(const std::string& attr) const { return attributes.count(attr) != 0; }
  std::int64_t get_int(const std::string& attr, std::int64_t fallback) const;
  float get_float(const std::string& attr, float fallback) const;
  std::string get_string(const std::string& attr, const std::string& fallback) const;
  std::vector<std::int64_t> get_ints(const std::string& attr,
                                     const std::vector<std::int64_t>& fallback) const;
};

struct Graph {
  std::string name;
  std::int64_t opset = 13;  // ai.onnx opset the model was written for
  std::map<std::string, std::int64_t> opsets;  // every domain's opset
  std::vector<Node> nodes;                     // topologically sorted
  std::map<std::string, Tensor> tensors;       // every named value with known type/shape/data
  std::vector<std::string> inputs;             // graph inputs that are not constants
  std::vector<std::string> outputs;

  Tensor* find(const std::string& name);
  const Tensor* find(const std::string& name) const;
  // Throws npukit::Error naming the tensor when absent.
  const Tensor& tensor(const std::string& name) const;
  Tensor& tensor(const std::string& name);
  // The node producing `value`, or nullptr for inputs and constants.
  const Node* producer(const std::string& value) const;
  std::vector<const Node*> consumers(const std::string& value) const;
};

}  // namespace npukit::ir
