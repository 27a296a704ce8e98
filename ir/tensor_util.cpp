#include "ir/tensor_util.h"

namespace npukit::ir {

std::string shape_string(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Tensor make_tensor(DType dtype, const Shape& shape, const std::string& name) {
  std::int64_t n = element_count(shape);
  if (n < 0)
    fail("tensor '{}': cannot allocate shape {} with unknown dimensions", name,
         shape_string(shape));
  if (dtype_size(dtype) == 0) fail("tensor '{}': cannot allocate type {}", name, dtype_name(dtype));
  Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = shape;
  t.data.assign(static_cast<std::size_t>(n) * dtype_size(dtype), 0);
  return t;
}

std::int64_t stored_count(const Tensor& t) {
  std::size_t size = dtype_size(t.dtype);
  return size == 0 ? 0 : static_cast<std::int64_t>(t.data.size() / size);
}

template <typename Out, typename Fn>
static std::vector<Out> convert(const Tensor& t, Fn&& bad_type) {
  std::int64_t n = stored_count(t);
  std::vector<Out> out(static_cast<std::size_t>(n));
  auto fill = [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.as<T>();
    for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(p[i]);
  };
  switch (t.dtype) {
    case DType::kUInt8:
      fill(std::uint8_t{});
      break;
    case DType::kInt8:
      fill(std::int8_t{});
      break;
    case DType::kInt16:
      fill(std::int16_t{});
      break;
    case DType::kInt32:
      fill(std::int32_t{});
      break;
    case DType::kInt64:
      fill(std::int64_t{});
      break;
    case DType::kBool:
      fill(std::uint8_t{});
      break;
    case DType::kFloat32:
      fill(float{});
      break;
    case DType::kFloat64:
      fill(double{});
      break;
    default:
      bad_type();
  }
  return out;
}

std::vector<std::int64_t> to_int64_vector(const Tensor& t) {
  if (t.dtype == DType::kFloat32 || t.dtype == DType::kFloat64)
    fail("tensor '{}' is {}, expected an integer tensor", t.name, dtype_name(t.dtype));
  return convert<std::int64_t>(
      t, [&] { fail("tensor '{}': type {} is not an integer type", t.name, dtype_name(t.dtype)); });
}

std::vector<float> to_float_vector(const Tensor& t) {
  return convert<float>(
      t, [&] { fail("tensor '{}': type {} is not supported here", t.name, dtype_name(t.dtype)); });
}

}  // namespace npukit::ir
