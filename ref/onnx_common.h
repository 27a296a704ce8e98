// Shared pieces of the standard ONNX kernels (float and quantized): broadcasting, attribute
// helpers, ONNX pooling/convolution geometry and the plain NCHW convolution loop.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "ir/graph.h"
#include "ir/tensor_util.h"

namespace npukit::ref {

using ir::DType;
using ir::Tensor;
using Outputs = std::vector<Tensor>;

// A kernel's single output.
inline Outputs one(Tensor t) {
  Outputs o;
  o.push_back(std::move(t));
  return o;
}

// Calls fn(T{}) with T the C++ type of `dtype` (numeric types only).
template <typename Fn>
void dispatch_numeric(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32:
      fn(float{});
      return;
    case DType::kFloat64:
      fn(double{});
      return;
    case DType::kInt8:
      fn(std::int8_t{});
      return;
    case DType::kUInt8:
      fn(std::uint8_t{});
      return;
    case DType::kInt16:
      fn(std::int16_t{});
      return;
    case DType::kInt32:
      fn(std::int32_t{});
      return;
    case DType::kInt64:
      fn(std::int64_t{});
      return;
    default:
      fail("type {} is not supported by this op", ir::dtype_name(dtype));
  }
}

// memcpy that accepts empty ranges (an empty tensor's data pointer may be null).
inline void copy_bytes(void* dst, const void* src, std::size_t n) {
  if (n) std::memcpy(dst, src, n);
}

// Row-major strides of `shape`, in elements.
inline std::vector<std::int64_t> row_major_strides(const ir::Shape& shape) {
  std::vector<std::int64_t> s(shape.size());
  std::int64_t acc = 1;
  for (std::size_t i = shape.size(); i-- > 0;) s[i] = acc, acc *= shape[i];
  return s;
}

// Calls fn(first, idx) for every row of `shape` along its last axis: `first` is the row's first
// element in row-major order, idx its multi-index (last entry 0). A scalar is one row of one.
// The data-movement kernels copy a row at a time instead of an element.
template <typename Fn>
void for_each_row(const ir::Shape& shape, Fn&& fn) {
  const std::int64_t count = ir::element_count(shape);
  const std::int64_t row = shape.empty() ? 1 : shape.back();
  std::vector<std::int64_t> idx(shape.size(), 0);
  for (std::int64_t first = 0; first < count; first += row) {
    fn(first, std::as_const(idx));
    for (std::size_t d = shape.size() - (shape.empty() ? 0 : 1); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

// numpy broadcasting of two shapes; throws when incompatible.
ir::Shape broadcast_shapes(const ir::Shape& a, const ir::Shape& b);

// Element strides of `shape` read as if broadcast to `out` (0 along broadcast dimensions).
std::vector<std::int64_t> broadcast_strides(const ir::Shape& shape, const ir::Shape& out);

// Calls fn(out_index, a_index, b_index) for every element of `out`.
template <typename Fn>
void for_each_broadcast(const ir::Shape& out, const ir::Shape& a, const ir::Shape& b, Fn&& fn) {
  const auto sa = broadcast_strides(a, out), sb = broadcast_strides(b, out);
  const std::size_t rank = out.size();
  const std::int64_t count = ir::element_count(out);
  std::vector<std::int64_t> idx(rank, 0);
  std::int64_t ia = 0, ib = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    fn(i, ia, ib);
    for (std::size_t d = rank; d-- > 0;) {  // odometer increment
      ++idx[d];
      ia += sa[d];
      ib += sb[d];
      if (idx[d] < out[d]) break;
      ia -= sa[d] * out[d];
      ib -= sb[d] * out[d];
      idx[d] = 0;
    }
  }
}

// Checks that the stored data matches the shape (guards every kernel against malformed input).
void check_data(const ir::Tensor& t, const char* what);
// A tensor must be float32 here.
const float* float_data(const ir::Tensor& t, const char* what);

// ONNX's axis normalization: axis in [-rank, rank) (or [-rank, rank] with `extra`), negative
// values counting from the end.
std::int64_t normalize_axis(std::int64_t axis, std::int64_t rank, const char* what,
                            bool extra = false);

// Round half to even, as onnxruntime's requantization and QuantizeLinear do.
inline float round_half_even(float v) { return std::nearbyint(v); }

// Spatial geometry of an ONNX Conv/Pool node with 1 or 2 spatial axes (1-D is run as H = 1).
struct WindowGeometry {
  std::int64_t in_h = 1, in_w = 1, out_h = 1, out_w = 1;
  std::int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, dilation_h = 1,
               dilation_w = 1;
  std::int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  bool one_d = false;
  ir::Shape output_shape(std::int64_t n, std::int64_t c) const;
};
// `x_shape` is [N, C, spatial...]; kernel from the attribute or `kernel_from_weights`.
WindowGeometry window_geometry(const ir::Node& node, const ir::Shape& x_shape,
                               const std::vector<std::int64_t>& kernel_from_weights,
                               bool ceil_allowed);

// Plain direct convolution in NCHW: acc[n][m][oy][ox] += (x - x_zero) * (w[m] - w_zero[m]),
// padding taking no part. `acc` must be zero- or bias-initialised by the caller.
template <typename X, typename W, typename Acc>
void convolve(const X* x, const W* w, Acc* acc, std::int64_t batch, std::int64_t channels,
              std::int64_t kernels, std::int64_t group, const WindowGeometry& g, Acc x_zero,
              const std::vector<Acc>& w_zero) {
  const std::int64_t cg = channels / group, kg = kernels / group;
  const std::int64_t in_area = g.in_h * g.in_w, out_area = g.out_h * g.out_w;
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t m = 0; m < kernels; ++m) {
      Acc* out = acc + (b * kernels + m) * out_area;
      const Acc wz = w_zero.size() == 1 ? w_zero[0] : w_zero[m];
      for (std::int64_t ci = 0; ci < cg; ++ci) {
        const X* plane = x + (b * channels + (m / kg) * cg + ci) * in_area;
        for (std::int64_t i = 0; i < g.kernel_h; ++i)
          for (std::int64_t j = 0; j < g.kernel_w; ++j) {
            const Acc weight =
                static_cast<Acc>(w[((m * cg + ci) * g.kernel_h + i) * g.kernel_w + j]) - wz;
            if (weight == Acc{0}) continue;
            // Output columns whose input column lies inside the image: no branch in the inner loop.
            const std::int64_t offset = j * g.dilation_w - g.pad_left;
            std::int64_t ox_begin = offset >= 0 ? 0 : (-offset + g.stride_w - 1) / g.stride_w;
            std::int64_t ox_end = g.in_w - offset <= 0
                                      ? 0
                                      : std::min(g.out_w, (g.in_w - offset - 1) / g.stride_w + 1);
            for (std::int64_t oy = 0; oy < g.out_h; ++oy) {
              const std::int64_t iy = oy * g.stride_h - g.pad_top + i * g.dilation_h;
              if (iy < 0 || iy >= g.in_h) continue;
              const std::int64_t row = iy * g.in_w + offset;
              Acc* out_row = out + oy * g.out_w;
              if (g.stride_w == 1) {  // contiguous: lets the compiler vectorise the common case
                const X* src = plane + row;
                for (std::int64_t ox = ox_begin; ox < ox_end; ++ox)
                  out_row[ox] += (static_cast<Acc>(src[ox]) - x_zero) * weight;
              } else {
                for (std::int64_t ox = ox_begin; ox < ox_end; ++ox)
                  out_row[ox] += (static_cast<Acc>(plane[row + ox * g.stride_w]) - x_zero) * weight;
              }
            }
          }
      }
    }
}

// Matrix product over the last two axes with numpy batch broadcasting (MatMul semantics);
// returns the output shape and calls fn(out_offset, a_offset, b_offset, M, K, N) per matrix.
struct MatMulShape {
  ir::Shape out;
  std::int64_t m = 0, k = 0, n = 0;
  std::vector<std::int64_t> a_offsets, b_offsets;  // per output matrix
};
MatMulShape matmul_shape(const ir::Shape& a, const ir::Shape& b);

}  // namespace npukit::ref
