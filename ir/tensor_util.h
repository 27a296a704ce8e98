// Small helpers for building and reading ir::Tensor values (tests, kernels, the executor).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "common/error.h"
#include "ir/graph.h"

namespace npukit::ir {

template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>)
    return DType::kFloat32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::kFloat64;
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return DType::kUInt8;
  else if constexpr (std::is_same_v<T, std::int8_t>)
    return DType::kInt8;
  else if constexpr (std::is_same_v<T, std::int16_t>)
    return DType::kInt16;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return DType::kInt32;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return DType::kInt64;
  else if constexpr (std::is_same_v<T, bool>)
    return DType::kBool;
  else
    static_assert(sizeof(T) == 0, "no ir::DType for this C++ type");
}

// "[1, 3, 224, 224]"
std::string shape_string(const Shape& shape);

// A zero-filled tensor of the given type and fully known shape.
Tensor make_tensor(DType dtype, const Shape& shape, const std::string& name = "");

// A tensor holding `values` (row-major); their count must match the shape.
template <typename T>
Tensor make_tensor(const Shape& shape, const std::vector<T>& values, const std::string& name = "") {
  Tensor t = make_tensor(dtype_of<T>(), shape, name);
  if (static_cast<std::int64_t>(values.size()) != element_count(shape))
    fail("tensor '{}': {} values given for shape {}", name, values.size(), shape_string(shape));
  if constexpr (std::is_same_v<T, bool>) {
    for (std::size_t i = 0; i < values.size(); ++i) t.data[i] = values[i] ? 1 : 0;
  } else if (!values.empty()) {
    std::memcpy(t.data.data(), values.data(), values.size() * sizeof(T));
  }
  return t;
}

template <typename T>
Tensor make_scalar(T value, const std::string& name = "") {
  return make_tensor<T>({}, {value}, name);
}

// Number of elements actually stored (data size / element size).
std::int64_t stored_count(const Tensor& t);

// The tensor's elements as T; throws naming the tensor when its dtype is not T.
template <typename T>
std::vector<T> to_vector(const Tensor& t) {
  if (t.dtype != dtype_of<T>())
    fail("tensor '{}' is {}, expected {}", t.name, dtype_name(t.dtype), dtype_name(dtype_of<T>()));
  std::vector<T> out(static_cast<std::size_t>(stored_count(t)));
  if (!out.empty()) std::memcpy(out.data(), t.data.data(), out.size() * sizeof(T));
  return out;
}

// Any integer tensor (int8..int64, uint8, bool) widened to int64: shapes, axes, indices.
std::vector<std::int64_t> to_int64_vector(const Tensor& t);
// Any numeric tensor converted to float (scales, float inputs).
std::vector<float> to_float_vector(const Tensor& t);

}  // namespace npukit::ir
