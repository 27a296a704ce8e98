#include "ir/graph.h"

#include "common/error.h"

namespace npukit::ir {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kUInt8: return 1;
    case DType::kInt8: return 1;
    case DType::kInt16: return 2;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kBool: return 1;
    case DType::kFloat16: return 2;
    case DType::kFloat64: return 8;
    default: return 0;
  }
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kBool: return "bool";
    case DType::kFloat16: return "float16";
    case DType::kFloat64: return "float64";
    default: return "undefined";
  }
}

std::int64_t element_count(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) return -1;
    n *= d;
  }
  return n;
}

std::int64_t Node::get_int(const std::string& attr, std::int64_t fallback) const {
  auto it = attributes.find(attr);
  if (it == attributes.end()) return fallback;
  if (auto* v = std::get_if<std::int64_t>(&it->second)) return *v;
  fail("node '{}' ({}): attribute '{}' is not an integer", name, op_type, attr);
}

float Node::get_float(const std::string& attr, float fallback) const {
  auto it = attributes.find(attr);
  if (it == attributes.end()) return fallback;
  if (auto* v = std::get_if<float>(&it->second)) return *v;
  fail("node '{}' ({}): attribute '{}' is not a float", name, op_type, attr);
}

std::string Node::get_string(const std::string& attr, const std::string& fallback) const {
  auto it = attributes.find(attr);
  if (it == attributes.end()) return fallback;
  if (auto* v = std::get_if<std::string>(&it->second)) return *v;
  fail("node '{}' ({}): attribute '{}' is not a string", name, op_type, attr);
}

std::vector<std::int64_t> Node::get_ints(const std::string& attr,
                                         const std::vector<std::int64_t>& fallback) const {
  auto it = attributes.find(attr);
  if (it == attributes.end()) return fallback;
  if (auto* v = std::get_if<std::vector<std::int64_t>>(&it->second)) return *v;
  fail("node '{}' ({}): attribute '{}' is not a list of integers", name, op_type, attr);
}

Tensor* Graph::find(const std::string& name) {
  auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

const Tensor* Graph::find(const std::string& name) const {
  auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

const Tensor& Graph::tensor(const std::string& name) const {
  if (const Tensor* t = find(name)) return *t;
  fail("graph '{}': no tensor named '{}'", this->name, name);
}

Tensor& Graph::tensor(const std::string& name) {
  if (Tensor* t = find(name)) return *t;
  fail("graph '{}': no tensor named '{}'", this->name, name);
}

const Node* Graph::producer(const std::string& value) const {
  for (const auto& n : nodes)
    for (const auto& o : n.outputs)
      if (o == value) return &n;
  return nullptr;
}

std::vector<const Node*> Graph::consumers(const std::string& value) const {
  std::vector<const Node*> out;
  for (const auto& n : nodes)
    for (const auto& i : n.inputs)
      if (i == value) {
        out.push_back(&n);
        break;
      }
  return out;
}

}  // namespace npukit::ir
