// Standard ONNX kernels (float32, plus the integer and shape ops that float models carry), with
// ONNX semantics. Plain loops in logical layout.
#include <cmath>
#include <cstring>
#include <numeric>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "ref/float_conv.h"
#include "ref/kernel_registry.h"
#include "ref/onnx_common.h"

namespace npukit::ref {

namespace {

// ---- element-wise -------------------------------------------------------------------------

template <typename Op>
Kernel binary(Op op) {
  return [op](const ir::Node&, const OpInputs& in) {
    const Tensor &a = in.at(0), &b = in.at(1);
    check_data(a, "input A");
    check_data(b, "input B");
    if (a.dtype != b.dtype)
      fail("operands differ in type: {} and {}", ir::dtype_name(a.dtype), ir::dtype_name(b.dtype));
    const ir::Shape shape = broadcast_shapes(a.shape, b.shape);
    const ir::DType dtype = a.dtype;
    const std::uint8_t *da = a.data.data(), *db = b.data.data();
    const bool same_shape = a.shape == b.shape;
    // Without broadcast, the output may take a dead input's storage (element i is read before
    // it is written).
    Tensor out = !same_shape                                  ? ir::make_tensor(dtype, shape)
                 : in.donatable.size() > 0 && in.donatable[0] ? in.output_over(0, dtype, shape)
                                                              : in.output_over(1, dtype, shape);
    dispatch_numeric(dtype, [&](auto tag) {
      using T = decltype(tag);
      const T *pa = reinterpret_cast<const T*>(da), *pb = reinterpret_cast<const T*>(db);
      T* y = out.as_mutable<T>();
      if (same_shape) {  // no broadcast (residual adds): a plain loop
        const std::int64_t n = ir::element_count(shape);
        for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(op(pa[i], pb[i]));
        return;
      }
      for_each_broadcast(shape, a.shape, b.shape,
                         [&](std::int64_t i, std::int64_t ia, std::int64_t ib) {
                           y[i] = static_cast<T>(op(pa[ia], pb[ib]));
                         });
    });
    return one(std::move(out));
  };
}

template <typename Fn>
Kernel unary_float(Fn fn) {
  return [fn](const ir::Node& node, const OpInputs& in) {
    const Tensor& x = in.at(0);
    const float* p = float_data(x, "input");
    Tensor out = ir::make_tensor(DType::kFloat32, x.shape);
    float* y = out.as_mutable<float>();
    const std::int64_t n = ir::element_count(x.shape);
    for (std::int64_t i = 0; i < n; ++i) y[i] = fn(node, p[i]);
    return one(std::move(out));
  };
}

Outputs relu(const ir::Node&, const OpInputs& in) {
  const Tensor& x = in.at(0);
  check_data(x, "input");
  const ir::DType dtype = x.dtype;
  const std::uint8_t* data = x.data.data();
  const std::int64_t n = ir::element_count(x.shape);
  Tensor out = in.output_over(0, dtype, x.shape);  // in place when x is dead
  dispatch_numeric(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* p = reinterpret_cast<const T*>(data);
    T* y = out.as_mutable<T>();
    for (std::int64_t i = 0; i < n; ++i) y[i] = p[i] < T{0} ? T{0} : p[i];
  });
  return one(std::move(out));
}

Outputs clip(const ir::Node& node, const OpInputs& in) {
  const Tensor& x = in.at(0);
  check_data(x, "input");
  Tensor out = ir::make_tensor(x.dtype, x.shape);
  dispatch_numeric(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    if (node.has("min")) lo = static_cast<T>(node.get_float("min", 0));  // opset < 11
    if (node.has("max")) hi = static_cast<T>(node.get_float("max", 0));
    auto bound = [&](std::size_t i, T& v) {
      if (const Tensor* t = in.optional(i)) {
        if (t->dtype != x.dtype || ir::stored_count(*t) != 1)
          fail("Clip bound {} must be a scalar of the input's type", i == 1 ? "min" : "max");
        v = t->as<T>()[0];
      }
    };
    bound(1, lo);
    bound(2, hi);
    const T* p = x.as<T>();
    T* y = out.as_mutable<T>();
    const std::int64_t n = ir::element_count(x.shape);
    for (std::int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(p[i], lo), hi);
  });
  return one(std::move(out));
}

// ---- convolution, matrix products ---------------------------------------------------------

Outputs conv(const ir::Node& node, const OpInputs& in) {
  const Tensor &x = in.at(0), &w = in.at(1);
  const float* xp = float_data(x, "input X");
  const float* wp = float_data(w, "input W");
  if (x.shape.size() != w.shape.size() || x.shape.size() < 3)
    fail("X {} and W {} must both be [N, C, spatial...]", ir::shape_string(x.shape),
         ir::shape_string(w.shape));
  const std::int64_t group = node.get_int("group", 1);
  const std::int64_t n = x.shape[0], c = x.shape[1], m = w.shape[0];
  if (group < 1 || c % group || m % group || w.shape[1] * group != c)
    fail("X has {} channels, W is {}, group {}", c, ir::shape_string(w.shape), group);
  auto g = window_geometry(node, x.shape,
                           std::vector<std::int64_t>(w.shape.begin() + 2, w.shape.end()), false);
  Tensor out = ir::make_tensor(DType::kFloat32, g.output_shape(n, m));
  const float* bias = nullptr;
  if (const Tensor* b = in.optional(2)) {
    bias = float_data(*b, "input B");
    if (ir::element_count(b->shape) != m)
      fail("B has {} values for {} kernels", ir::element_count(b->shape), m);
  }
  conv2d_float(xp, wp, bias, out.as_mutable<float>(), n, c, m, group, g,
               in.constant.size() > 1 && in.constant[1] ? in.conv_weights : nullptr);
  return one(std::move(out));
}

Outputs gemm(const ir::Node& node, const OpInputs& in) {
  const Tensor &a = in.at(0), &b = in.at(1);
  const float *ap = float_data(a, "input A"), *bp = float_data(b, "input B");
  if (a.shape.size() != 2 || b.shape.size() != 2) fail("A and B must be matrices");
  const bool ta = node.get_int("transA", 0), tb = node.get_int("transB", 0);
  const float alpha = node.get_float("alpha", 1.f), beta = node.get_float("beta", 1.f);
  const std::int64_t m = ta ? a.shape[1] : a.shape[0], k = ta ? a.shape[0] : a.shape[1];
  const std::int64_t kb = tb ? b.shape[1] : b.shape[0], n = tb ? b.shape[0] : b.shape[1];
  if (k != kb)
    fail("A {} and B {} disagree on K", ir::shape_string(a.shape), ir::shape_string(b.shape));
  Tensor out = ir::make_tensor(DType::kFloat32, {m, n});
  float* y = out.as_mutable<float>();
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      float s = 0;
      for (std::int64_t t = 0; t < k; ++t)
        s += ap[ta ? t * m + i : i * k + t] * bp[tb ? j * k + t : t * n + j];
      y[i * n + j] = alpha * s;
    }
  if (const Tensor* c = in.optional(2)) {
    const float* cp = float_data(*c, "input C");
    if (broadcast_shapes(c->shape, {m, n}) != ir::Shape{m, n})
      fail("C {} does not broadcast to [{}, {}]", ir::shape_string(c->shape), m, n);
    for_each_broadcast(
        {m, n}, {m, n}, c->shape,
        [&](std::int64_t i, std::int64_t, std::int64_t ic) { y[i] += beta * cp[ic]; });
  }
  return one(std::move(out));
}

Outputs matmul(const ir::Node&, const OpInputs& in) {
  const Tensor &a = in.at(0), &b = in.at(1);
  const float *ap = float_data(a, "input A"), *bp = float_data(b, "input B");
  auto s = matmul_shape(a.shape, b.shape);
  Tensor out = ir::make_tensor(DType::kFloat32, s.out);
  float* y = out.as_mutable<float>();
  for (std::size_t batch = 0; batch < s.a_offsets.size(); ++batch)
    for (std::int64_t i = 0; i < s.m; ++i)
      for (std::int64_t j = 0; j < s.n; ++j) {
        float acc = 0;
        for (std::int64_t t = 0; t < s.k; ++t)
          acc += ap[s.a_offsets[batch] + i * s.k + t] * bp[s.b_offsets[batch] + t * s.n + j];
        y[(batch * s.m + i) * s.n + j] = acc;
      }
  return one(std::move(out));
}

// ---- pooling, normalisation -----------------------------------------------------------------

template <typename T>
void max_pool_plane(const T* in, T* out, const WindowGeometry& g) {
  for (std::int64_t oy = 0; oy < g.out_h; ++oy)
    for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
      T best = std::numeric_limits<T>::lowest();
      for (std::int64_t i = 0; i < g.kernel_h; ++i) {
        const std::int64_t iy = oy * g.stride_h - g.pad_top + i * g.dilation_h;
        if (iy < 0 || iy >= g.in_h) continue;
        for (std::int64_t j = 0; j < g.kernel_w; ++j) {
          const std::int64_t ix = ox * g.stride_w - g.pad_left + j * g.dilation_w;
          if (ix >= 0 && ix < g.in_w) best = std::max(best, in[iy * g.in_w + ix]);
        }
      }
      out[oy * g.out_w + ox] = best;
    }
}

Outputs max_pool(const ir::Node& node, const OpInputs& in) {
  if (node.outputs.size() > 1 && !node.outputs[1].empty())
    fail("the Indices output is not supported");
  if (node.get_int("storage_order", 0) != 0) fail("storage_order 1 is not supported");
  const Tensor& x = in.at(0);
  check_data(x, "input X");
  auto g = window_geometry(node, x.shape, {}, true);
  const std::int64_t planes = x.shape[0] * x.shape[1];
  Tensor out = ir::make_tensor(x.dtype, g.output_shape(x.shape[0], x.shape[1]));
  dispatch_numeric(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (std::int64_t p = 0; p < planes; ++p)
      max_pool_plane<T>(x.as<T>() + p * g.in_h * g.in_w,
                        out.as_mutable<T>() + p * g.out_h * g.out_w, g);
  });
  return one(std::move(out));
}

Outputs average_pool(const ir::Node& node, const OpInputs& in) {
  const Tensor& x = in.at(0);
  const float* xp = float_data(x, "input X");
  auto g = window_geometry(node, x.shape, {}, true);
  if (g.dilation_h != 1 || g.dilation_w != 1) fail("dilations are not supported");
  const bool include_pad = node.get_int("count_include_pad", 0) != 0;
  Tensor out = ir::make_tensor(DType::kFloat32, g.output_shape(x.shape[0], x.shape[1]));
  float* y = out.as_mutable<float>();
  for (std::int64_t p = 0; p < x.shape[0] * x.shape[1]; ++p)
    for (std::int64_t oy = 0; oy < g.out_h; ++oy)
      for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
        // Window clipped to the padded input (include_pad) or to the image itself.
        const std::int64_t y0 = oy * g.stride_h - g.pad_top, x0 = ox * g.stride_w - g.pad_left;
        const std::int64_t y1 = std::min(y0 + g.kernel_h, g.in_h + g.pad_bottom);
        const std::int64_t x1 = std::min(x0 + g.kernel_w, g.in_w + g.pad_right);
        float sum = 0;
        std::int64_t inside = 0;
        for (std::int64_t iy = std::max<std::int64_t>(y0, 0); iy < std::min(y1, g.in_h); ++iy)
          for (std::int64_t ix = std::max<std::int64_t>(x0, 0); ix < std::min(x1, g.in_w); ++ix) {
            sum += xp[(p * g.in_h + iy) * g.in_w + ix];
            ++inside;
          }
        const std::int64_t count = include_pad ? (y1 - y0) * (x1 - x0) : inside;
        y[(p * g.out_h + oy) * g.out_w + ox] = count ? sum / static_cast<float>(count) : 0.f;
      }
  return one(std::move(out));
}

Outputs global_average_pool(const ir::Node&, const OpInputs& in) {
  const Tensor& x = in.at(0);
  const float* xp = float_data(x, "input X");
  if (x.shape.size() < 3) fail("X must be [N, C, spatial...], got {}", ir::shape_string(x.shape));
  ir::Shape shape = x.shape;
  std::int64_t area = 1;
  for (std::size_t i = 2; i < shape.size(); ++i) area *= shape[i], shape[i] = 1;
  Tensor out = ir::make_tensor(DType::kFloat32, shape);
  for (std::int64_t p = 0; p < x.shape[0] * x.shape[1]; ++p) {
    double sum = 0;
    for (std::int64_t i = 0; i < area; ++i) sum += xp[p * area + i];
    out.as_mutable<float>()[p] = static_cast<float>(sum / static_cast<double>(area));
  }
  return one(std::move(out));
}

Outputs batch_norm(const ir::Node& node, const OpInputs& in) {
  if (node.get_int("training_mode", 0) != 0 || node.outputs.size() > 1)
    fail("training mode is not supported (inference only)");
  const Tensor& x = in.at(0);
  const float* xp = float_data(x, "input X");
  const float *scale = float_data(in.at(1), "scale"), *bias = float_data(in.at(2), "B"),
              *mean = float_data(in.at(3), "mean"), *var = float_data(in.at(4), "var");
  if (x.shape.size() < 2) fail("X must have a channel axis");
  const std::int64_t c = x.shape[1], area = ir::element_count(x.shape) / (x.shape[0] * c);
  for (std::size_t i = 1; i < 5; ++i)
    if (ir::element_count(in.at(i).shape) != c) fail("parameter {} must have {} values", i, c);
  const float eps = node.get_float("epsilon", 1e-5f);
  Tensor out = ir::make_tensor(DType::kFloat32, x.shape);
  float* y = out.as_mutable<float>();
  for (std::int64_t b = 0; b < x.shape[0]; ++b)
    for (std::int64_t ch = 0; ch < c; ++ch) {
      const float k = scale[ch] / std::sqrt(var[ch] + eps);
      for (std::int64_t i = 0; i < area; ++i) {
        const std::int64_t at = (b * c + ch) * area + i;
        y[at] = (xp[at] - mean[ch]) * k + bias[ch];
      }
    }
  return one(std::move(out));
}

Outputs softmax(const ir::Node& node, const OpInputs& in, std::int64_t opset, bool log = false) {
  const Tensor& x = in.at(0);
  const float* xp = float_data(x, "input");
  const std::int64_t rank = static_cast<std::int64_t>(x.shape.size());
  const std::int64_t axis =
      normalize_axis(node.get_int("axis", opset >= 13 ? -1 : 1), rank, "axis");
  // opset < 13 normalises over all axes from `axis` on; opset 13 over `axis` alone.
  std::int64_t outer = 1, len = 1, inner = 1;
  for (std::int64_t i = 0; i < rank; ++i) {
    if (i < axis)
      outer *= x.shape[i];
    else if (i == axis || opset < 13)
      len *= x.shape[i];
    else
      inner *= x.shape[i];
  }
  Tensor out = ir::make_tensor(DType::kFloat32, x.shape);
  float* y = out.as_mutable<float>();
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      auto at = [&](std::int64_t k) { return (o * len + k) * inner + i; };
      float top = -INFINITY;
      for (std::int64_t k = 0; k < len; ++k) top = std::max(top, xp[at(k)]);
      double sum = 0;
      for (std::int64_t k = 0; k < len; ++k) sum += y[at(k)] = std::exp(xp[at(k)] - top);
      if (log)  // LogSoftmax
        for (std::int64_t k = 0; k < len; ++k)
          y[at(k)] = static_cast<float>(double(xp[at(k)] - top) - std::log(sum));
      else
        for (std::int64_t k = 0; k < len; ++k) y[at(k)] = static_cast<float>(y[at(k)] / sum);
    }
  return one(std::move(out));
}

// ---- shape and data movement (any dtype) -----------------------------------------------------

// x's values in `shape`, made in the output storage the run keeps (OpInputs::output), so a
// host segment's reshapes (space-to-depth) allocate nothing image after image.
Tensor reshaped(const OpInputs& in, const Tensor& x, const ir::Shape& shape) {
  if (ir::element_count(shape) != ir::element_count(x.shape))
    fail("cannot reshape {} to {}", ir::shape_string(x.shape), ir::shape_string(shape));
  if (x.data.size() != static_cast<std::size_t>(ir::element_count(x.shape)) *
                           ir::dtype_size(x.dtype)) {  // not plain storage: copy as it is
    Tensor out = x;
    out.shape = shape;
    return out;
  }
  Tensor out = in.output_for_overwrite(0, x.dtype, shape);
  std::copy(x.data.begin(), x.data.end(), out.data.begin());
  return out;
}

// An int64 list from an optional input (opset >= 13 style) or an attribute (older opsets).
std::vector<std::int64_t> ints_from(const ir::Node& node, const OpInputs& in, std::size_t index,
                                    const std::string& attr,
                                    const std::vector<std::int64_t>& fallback) {
  if (const Tensor* t = in.optional(index)) return ir::to_int64_vector(*t);
  return node.get_ints(attr, fallback);
}

Outputs reshape(const ir::Node& node, const OpInputs& in) {
  const Tensor& x = in.at(0);
  check_data(x, "data");
  auto target = ir::to_int64_vector(in.at(1));
  const bool allow_zero = node.get_int("allowzero", 0) != 0;
  std::int64_t known = 1, infer = -1;
  for (std::size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allow_zero) {
      if (i >= x.shape.size())
        fail("shape entry {} is 0 but the input has rank {}", i, x.shape.size());
      target[i] = x.shape[i];
    }
    if (target[i] == -1) {
      if (infer >= 0) fail("shape has more than one -1");
      infer = static_cast<std::int64_t>(i);
    } else if (target[i] < 0) {
      fail("shape entry {} is {}", i, target[i]);
    } else {
      known *= target[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || ir::element_count(x.shape) % known)
      fail("cannot infer -1 reshaping {}", ir::shape_string(x.shape));
    target[infer] = ir::element_count(x.shape) / known;
  }
  return one(reshaped(in, x, target));
}

Outputs flatten(const ir::Node& node, const OpInputs& in) {
  const Tensor& x = in.at(0);
  check_data(x, "input");
  const std::int64_t rank = static_cast<std::int64_t>(x.shape.size());
  const std::int64_t axis = normalize_axis(node.get_int("axis", 1), rank, "axis", true);
  std::int64_t outer = 1;
  for (std::int64_t i = 0; i < axis; ++i) outer *= x.shape[i];
  return one(
      reshaped(in, x, {outer, ir::element_count(x.shape) / std::max<std::int64_t>(outer, 1)}));
}

Outputs squeeze(const ir::Node& node, const OpInputs& in) {
  const Tensor& x = in.at(0);
  check_data(x, "input");
  const std::int64_t rank = static_cast<std::int64_t>(x.shape.size());
  auto axes = ints_from(node, in, 1, "axes", {});
  std::vector<bool> drop(rank, false);
  if (axes.empty())
    for (std::int64_t i = 0; i < rank; ++i) drop[i] = x.shape[i] == 1;
  for (auto a : axes) {
    a = normalize_axis(a, rank, "axis");
    if (x.shape[a] != 1) fail("cannot squeeze axis {} of size {}", a, x.shape[a]);
    drop[a] = true;
  }
  ir::Shape shape;
  for (std::int64_t i = 0; i < rank; ++i)
    if (!drop[i]) shape.push_back(x.shape[i]);
  return one(reshaped(in, x, shape));
}

Outputs unsqueeze(const ir::Node& node, const OpInputs& in) {
  const Tensor& x = in.at(0);
  check_data(x, "input");
  auto axes = ints_from(node, in, 1, "axes", {});
  const std::int64_t rank = static_cast<std::int64_t>(x.shape.size() + axes.size());
  std::vector<bool> inserted(rank, false);
  for (auto a : axes) {
    a = normalize_axis(a, rank, "axis");
    if (inserted[a]) fail("axis {} given twice", a);
    inserted[a] = true;
  }
  ir::Shape shape;
  std::size_t next = 0;
  for (std::int64_t i = 0; i < rank; ++i) shape.push_back(inserted[i] ? 1 : x.shape[next++]);
  return one(reshaped(in, x, shape));
}

// even[j] = from[2 j], and odd[j] = from[2 j + 1] when odd is given, for j < n (a
// space-to-depth's rows). Reads from[0, 2 n - 1), or from[0, 2 n) with odd: without it the last
// vector stops short of the end, so no byte past the last even one is read.
void even_and_odd_bytes(const std::uint8_t* from, std::int64_t n, std::uint8_t* even,
                        std::uint8_t* odd) {
  std::int64_t j = 0;
#if defined(__SSE2__)
  // 16 of each from 32 input bytes (SSE2 is every x86-64's baseline).
  const __m128i low = _mm_set1_epi16(0x00FF);
  for (const std::int64_t last = odd ? n - 16 : n - 17; j <= last; j += 16) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + 2 * j));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + 2 * j + 16));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(even + j),
                     _mm_packus_epi16(_mm_and_si128(a, low), _mm_and_si128(b, low)));
    if (odd)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(odd + j),
                       _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8)));
  }
#endif
  for (; j < n; ++j) {
    even[j] = from[2 * j];
    if (odd) odd[j] = from[2 * j + 1];
  }
}

Outputs transpose(const ir::Node& node, const OpInputs& in) {
  const Tensor& x = in.at(0);
  check_data(x, "input");
  const std::size_t rank = x.shape.size();
  std::vector<std::int64_t> reverse(rank);
  for (std::size_t i = 0; i < rank; ++i) reverse[i] = static_cast<std::int64_t>(rank - 1 - i);
  auto perm = node.get_ints("perm", reverse);
  if (perm.size() != rank) fail("perm has {} entries for rank {}", perm.size(), rank);
  std::vector<bool> seen(rank, false);
  for (auto p : perm) {
    if (p < 0 || p >= static_cast<std::int64_t>(rank) || seen[p]) fail("perm is not a permutation");
    seen[p] = true;
  }
  ir::Shape shape(rank);
  for (std::size_t i = 0; i < rank; ++i) shape[i] = x.shape[perm[i]];
  Tensor out = in.output_for_overwrite(0, x.dtype, shape);
  // Input strides seen in output axis order; a row of the output steps through the input by
  // the last of them.
  const auto in_strides = row_major_strides(x.shape);
  std::vector<std::int64_t> strides(rank);
  for (std::size_t i = 0; i < rank; ++i) strides[i] = in_strides[perm[i]];
  const std::size_t size = ir::dtype_size(x.dtype);
  const std::int64_t row = rank ? shape[rank - 1] : 1, step = rank ? strides[rank - 1] : 1;
  // Space to depth by 2 (a host segment's): the input's last axis has 2 elements and goes to an
  // earlier output axis (pair_axis) while the output's last steps by 2 through the input. The
  // two output rows that differ only at pair_axis are the even and the odd bytes of one input
  // run: both come out of one pass, when the row with index 0 there is reached.
  std::size_t pair_axis = rank;
  if (size == 1 && step == 2 && rank >= 2 && x.shape[rank - 1] == 2)
    for (std::size_t i = 0; i + 1 < rank; ++i)
      if (perm[i] == static_cast<std::int64_t>(rank) - 1) pair_axis = i;
  const std::int64_t pair_stride = pair_axis < rank ? row_major_strides(shape)[pair_axis] : 0;
  for_each_row(shape, [&](std::int64_t first, const std::vector<std::int64_t>& idx) {
    std::int64_t src = 0;
    for (std::size_t d = 0; d < rank; ++d) src += idx[d] * strides[d];
    std::uint8_t* dst = out.data.data() + first * size;
    const std::uint8_t* from = x.data.data() + src * size;
    if (pair_axis < rank) {
      if (idx[pair_axis] != 0) return;  // written with its even row
      even_and_odd_bytes(from, row, dst, dst + pair_stride);
    } else if (size == 1 && step == 2) {  // every other byte
      even_and_odd_bytes(from, row, dst, nullptr);
    } else if (size == 1) {  // int8 and bool, the usual data-movement case
      for (std::int64_t j = 0; j < row; ++j) dst[j] = from[j * step];
    } else {
      for (std::int64_t j = 0; j < row; ++j)
        copy_bytes(dst + j * size, from + j * step * static_cast<std::int64_t>(size), size);
    }
  });
  return one(std::move(out));
}

Outputs concat(const ir::Node& node, const OpInputs& in) {
  if (in.size() == 0) fail("needs at least one input");
  const Tensor& first = in.at(0);
  const std::int64_t rank = static_cast<std::int64_t>(first.shape.size());
  const std::int64_t axis = normalize_axis(node.get_int("axis", 0), rank, "axis");
  ir::Shape shape = first.shape;
  shape[axis] = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = in.at(i);
    check_data(t, "input");
    if (t.dtype != first.dtype || t.shape.size() != first.shape.size())
      fail("input {} ({} {}) does not match input 0 ({} {})", i, ir::dtype_name(t.dtype),
           ir::shape_string(t.shape), ir::dtype_name(first.dtype), ir::shape_string(first.shape));
    for (std::int64_t d = 0; d < rank; ++d)
      if (d != axis && t.shape[d] != first.shape[d])
        fail("input {} {} differs from input 0 {} outside axis {}", i, ir::shape_string(t.shape),
             ir::shape_string(first.shape), axis);
    shape[axis] += t.shape[axis];
  }
  Tensor out = ir::make_tensor(first.dtype, shape);
  std::int64_t outer = 1, inner = ir::dtype_size(first.dtype);
  for (std::int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (std::int64_t d = axis + 1; d < rank; ++d) inner *= shape[d];
  std::uint8_t* dst = out.data.data();
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::size_t i = 0; i < in.size(); ++i) {
      const std::int64_t block = in.at(i).shape[axis] * inner;
      copy_bytes(dst, in.at(i).data.data() + o * block, block);
      dst += block;
    }
  return one(std::move(out));
}

Outputs gather(const ir::Node& node, const OpInputs& in) {
  const Tensor& x = in.at(0);
  check_data(x, "data");
  const auto indices = ir::to_int64_vector(in.at(1));
  const std::int64_t rank = static_cast<std::int64_t>(x.shape.size());
  const std::int64_t axis = normalize_axis(node.get_int("axis", 0), rank, "axis");
  ir::Shape shape(x.shape.begin(), x.shape.begin() + axis);
  shape.insert(shape.end(), in.at(1).shape.begin(), in.at(1).shape.end());
  shape.insert(shape.end(), x.shape.begin() + axis + 1, x.shape.end());
  Tensor out = ir::make_tensor(x.dtype, shape);
  std::int64_t outer = 1, inner = ir::dtype_size(x.dtype);
  for (std::int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (std::int64_t d = axis + 1; d < rank; ++d) inner *= x.shape[d];
  const std::int64_t extent = x.shape[axis];
  std::uint8_t* dst = out.data.data();
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t idx : indices) {
      if (idx < -extent || idx >= extent)
        fail("index {} is out of range for axis of size {}", idx, extent);
      if (idx < 0) idx += extent;
      copy_bytes(dst, x.data.data() + (o * extent + idx) * inner, inner);
      dst += inner;
    }
  return one(std::move(out));
}

Outputs shape_of(const ir::Node& node, const OpInputs& in) {
  const std::int64_t rank = static_cast<std::int64_t>(in.at(0).shape.size());
  auto clamp_axis = [&](std::int64_t a) {
    return std::clamp<std::int64_t>(a < 0 ? a + rank : a, 0, rank);
  };
  const std::int64_t start = clamp_axis(node.get_int("start", 0)),
                     end = clamp_axis(node.get_int("end", rank));
  std::vector<std::int64_t> dims;
  for (std::int64_t i = start; i < end; ++i) dims.push_back(in.at(0).shape[i]);
  return one(ir::make_tensor<std::int64_t>({static_cast<std::int64_t>(dims.size())}, dims));
}

Outputs constant(const ir::Node& node, const OpInputs&) {
  if (node.has("value")) {
    const auto& attr = node.attributes.at("value");
    if (const Tensor* t = std::get_if<Tensor>(&attr)) return one(*t);
    fail("attribute value is not a tensor");
  }
  if (node.has("value_float")) return one(ir::make_scalar<float>(node.get_float("value_float", 0)));
  if (node.has("value_int"))
    return one(ir::make_scalar<std::int64_t>(node.get_int("value_int", 0)));
  if (node.has("value_ints")) {
    auto v = node.get_ints("value_ints", {});
    return one(ir::make_tensor<std::int64_t>({static_cast<std::int64_t>(v.size())}, v));
  }
  if (node.has("value_floats")) {
    const auto& attr = node.attributes.at("value_floats");
    if (auto* v = std::get_if<std::vector<float>>(&attr))
      return one(ir::make_tensor<float>({static_cast<std::int64_t>(v->size())}, *v));
  }
  fail("needs a value, value_float(s) or value_int(s) attribute");
}

Outputs constant_of_shape(const ir::Node& node, const OpInputs& in) {
  const auto shape = ir::to_int64_vector(in.at(0));
  Tensor fill = ir::make_scalar<float>(0.f);
  if (node.has("value")) {
    if (const Tensor* t = std::get_if<Tensor>(&node.attributes.at("value"))) fill = *t;
  }
  Tensor out = ir::make_tensor(fill.dtype, shape);
  const std::size_t size = ir::dtype_size(fill.dtype);
  if (fill.data.size() < size) fail("value attribute holds no element");
  for (std::int64_t i = 0; i < ir::element_count(shape); ++i)
    copy_bytes(out.data.data() + i * size, fill.data.data(), size);
  return one(std::move(out));
}

Outputs slice(const ir::Node& node, const OpInputs& in) {
  const Tensor& x = in.at(0);
  check_data(x, "data");
  const std::int64_t rank = static_cast<std::int64_t>(x.shape.size());
  const bool from_inputs = in.size() > 1;  // opset >= 10
  auto starts = from_inputs ? ir::to_int64_vector(in.at(1)) : node.get_ints("starts", {});
  auto ends = from_inputs ? ir::to_int64_vector(in.at(2)) : node.get_ints("ends", {});
  std::vector<std::int64_t> default_axes(starts.size());
  std::iota(default_axes.begin(), default_axes.end(), 0);
  auto axes =
      from_inputs ? ints_from(node, in, 3, "", default_axes) : node.get_ints("axes", default_axes);
  std::vector<std::int64_t> steps = in.optional(4) ? ir::to_int64_vector(*in.optional(4))
                                                   : std::vector<std::int64_t>(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    fail("starts, ends, axes and steps differ in length");
  std::vector<std::int64_t> begin(rank, 0), step(rank, 1);
  ir::Shape shape = x.shape;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::int64_t a = normalize_axis(axes[i], rank, "axis"), dim = x.shape[a];
    const std::int64_t s = steps[i];
    if (s == 0) fail("step 0 on axis {}", a);
    auto clampv = [&](std::int64_t v, std::int64_t lo, std::int64_t hi) {
      if (v < 0) v += dim;
      return std::clamp(v, lo, hi);
    };
    std::int64_t b = s > 0 ? clampv(starts[i], 0, dim) : clampv(starts[i], -1, dim - 1);
    std::int64_t e = s > 0 ? clampv(ends[i], 0, dim) : clampv(ends[i], -1, dim - 1);
    if (s < 0 && ends[i] < -dim) e = -1;  // INT_MIN-like ends mean "to the very start"
    begin[a] = b;
    step[a] = s;
    shape[a] = s > 0 ? std::max<std::int64_t>(0, (e - b + s - 1) / s)
                     : std::max<std::int64_t>(0, (b - e - s - 1) / -s);
  }
  Tensor out = in.output_for_overwrite(0, x.dtype, shape);
  const std::size_t size = ir::dtype_size(x.dtype);
  // Trailing axes taken whole are one run of each element of the axis before them, and that
  // axis too when its step is 1: fold them into it, so a channel slice of NCHW (a host
  // segment's) is one copy per image instead of one per row.
  ir::Shape x_shape = x.shape, out_shape = shape;
  std::int64_t folded = rank;
  while (folded > 1 && begin[folded - 1] == 0 && step[folded - 1] == 1 &&
         out_shape[folded - 1] == x_shape[folded - 1] && step[folded - 2] == 1) {
    const std::int64_t inner = x_shape[folded - 1];
    x_shape[folded - 2] *= inner, out_shape[folded - 2] *= inner, begin[folded - 2] *= inner;
    --folded;
  }
  x_shape.resize(folded), out_shape.resize(folded);
  const auto in_strides = row_major_strides(x_shape);
  // Row by row along the last axis (a run of bytes when its step is 1).
  const std::int64_t row = folded ? out_shape[folded - 1] : 1,
                     inner_step = folded ? step[folded - 1] : 1;
  for_each_row(out_shape, [&](std::int64_t first, const std::vector<std::int64_t>& idx) {
    std::int64_t src = 0;
    for (std::int64_t d = 0; d < folded; ++d) src += (begin[d] + idx[d] * step[d]) * in_strides[d];
    std::uint8_t* dst = out.data.data() + first * size;
    if (inner_step == 1)
      copy_bytes(dst, x.data.data() + src * size, static_cast<std::size_t>(row) * size);
    else
      for (std::int64_t j = 0; j < row; ++j)
        copy_bytes(dst + j * size, x.data.data() + (src + j * inner_step) * size, size);
  });
  return one(std::move(out));
}

Outputs cast(const ir::Node& node, const OpInputs& in) {
  const Tensor& x = in.at(0);
  check_data(x, "input");
  const DType to = static_cast<DType>(node.get_int("to", 0));
  Tensor out = ir::make_tensor(to, x.shape);
  dispatch_numeric(x.dtype, [&](auto from_tag) {
    using F = decltype(from_tag);
    dispatch_numeric(to, [&](auto to_tag) {
      using T = decltype(to_tag);
      for (std::int64_t i = 0; i < ir::element_count(x.shape); ++i)
        out.as_mutable<T>()[i] = static_cast<T>(x.as<F>()[i]);
    });
  });
  return one(std::move(out));
}

// ---- Resize -----------------------------------------------------------------------------------

// ONNX's coordinate transforms; the "resized length" is in_len * scale, unrounded, as in ONNX.
double source_coordinate(const std::string& mode, double out_coord, double scale,
                         std::int64_t in_len) {
  const double resized = double(in_len) * scale;
  if (mode == "half_pixel") return (out_coord + 0.5) / scale - 0.5;
  if (mode == "pytorch_half_pixel") return resized > 1 ? (out_coord + 0.5) / scale - 0.5 : 0.0;
  if (mode == "align_corners")
    return resized > 1 ? out_coord * double(in_len - 1) / (resized - 1) : 0.0;
  if (mode == "asymmetric") return out_coord / scale;
  if (mode == "tf_half_pixel_for_nn") return (out_coord + 0.5) / scale;
  fail("coordinate_transformation_mode '{}' is not supported", mode);
}

std::int64_t nearest_index(const std::string& mode, double x, std::int64_t in_len) {
  std::int64_t i;
  if (mode == "round_prefer_floor")
    i = (x == std::floor(x) + 0.5) ? static_cast<std::int64_t>(std::floor(x))
                                   : static_cast<std::int64_t>(std::round(x));
  else if (mode == "round_prefer_ceil")
    i = static_cast<std::int64_t>(std::round(x));
  else if (mode == "floor")
    i = static_cast<std::int64_t>(std::floor(x));
  else if (mode == "ceil")
    i = static_cast<std::int64_t>(std::ceil(x));
  else
    fail("nearest_mode '{}' is not supported", mode);
  return std::clamp<std::int64_t>(i, 0, in_len - 1);
}

Outputs resize(const ir::Node& node, const OpInputs& in, std::int64_t opset) {
  const Tensor& x = in.at(0);
  const float* xp = float_data(x, "input X");
  const std::int64_t rank = static_cast<std::int64_t>(x.shape.size());
  // opset 10: (X, scales); opset 11+: (X, roi, scales, sizes).
  const Tensor* scales_t = opset >= 11 ? in.optional(2) : in.optional(1);
  const Tensor* sizes_t = opset >= 11 ? in.optional(3) : nullptr;
  std::vector<double> scales(rank, 1.0);
  ir::Shape shape = x.shape;
  if (sizes_t && ir::element_count(sizes_t->shape) > 0) {
    auto sizes = ir::to_int64_vector(*sizes_t);
    if (static_cast<std::int64_t>(sizes.size()) != rank)
      fail("sizes has {} entries for rank {}", sizes.size(), rank);
    for (std::int64_t d = 0; d < rank; ++d)
      shape[d] = sizes[d], scales[d] = double(sizes[d]) / double(x.shape[d]);
  } else if (scales_t && ir::element_count(scales_t->shape) > 0) {
    auto s = ir::to_float_vector(*scales_t);
    if (static_cast<std::int64_t>(s.size()) != rank)
      fail("scales has {} entries for rank {}", s.size(), rank);
    for (std::int64_t d = 0; d < rank; ++d)
      scales[d] = s[d],
      shape[d] = static_cast<std::int64_t>(std::floor(double(x.shape[d]) * double(s[d])));
  } else {
    fail("needs scales or sizes");
  }
  if (node.has("axes")) fail("the axes attribute is not supported");
  if (node.get_string("keep_aspect_ratio_policy", "stretch") != "stretch")
    fail("keep_aspect_ratio_policy is not supported");
  const std::string mode = node.get_string("mode", "nearest");
  const std::string coord =
      node.get_string("coordinate_transformation_mode", opset >= 11 ? "half_pixel" : "asymmetric");
  const std::string nearest =
      node.get_string("nearest_mode", opset >= 11 ? "round_prefer_floor" : "floor");
  if (coord == "tf_crop_and_resize")
    fail("coordinate_transformation_mode tf_crop_and_resize is not supported");
  if (node.get_int("exclude_outside", 0) != 0) fail("exclude_outside is not supported");
  Tensor out = ir::make_tensor(DType::kFloat32, shape);
  float* y = out.as_mutable<float>();
  if (mode == "nearest") {
    std::vector<std::vector<std::int64_t>> map(rank);
    for (std::int64_t d = 0; d < rank; ++d)
      for (std::int64_t o = 0; o < shape[d]; ++o)
        map[d].push_back(
            x.shape[d] == shape[d] && scales[d] == 1.0
                ? o
                : nearest_index(nearest, source_coordinate(coord, double(o), scales[d], x.shape[d]),
                                x.shape[d]));
    std::vector<std::int64_t> strides(rank), idx(rank, 0);
    for (std::int64_t d = rank - 1, s = 1; d >= 0; --d) strides[d] = s, s *= x.shape[d];
    for (std::int64_t i = 0; i < ir::element_count(shape); ++i) {
      std::int64_t src = 0;
      for (std::int64_t d = 0; d < rank; ++d) src += map[d][idx[d]] * strides[d];
      y[i] = xp[src];
      for (std::int64_t d = rank - 1; d >= 0; --d) {
        if (++idx[d] < shape[d]) break;
        idx[d] = 0;
      }
    }
    return one(std::move(out));
  }
  if (mode != "linear") fail("mode '{}' is not supported (nearest and linear are)", mode);
  if (rank < 2) fail("linear resize needs rank >= 2");
  for (std::int64_t d = 0; d < rank - 2; ++d)
    if (shape[d] != x.shape[d]) fail("linear resize scales only the last two axes");
  const std::int64_t ih = x.shape[rank - 2], iw = x.shape[rank - 1], oh = shape[rank - 2],
                     ow = shape[rank - 1];
  struct Tap {
    std::int64_t lo, hi;
    double frac;
  };
  auto taps = [&](std::int64_t in_len, std::int64_t out_len, double scale) {
    std::vector<Tap> t;
    for (std::int64_t o = 0; o < out_len; ++o) {
      double s =
          std::clamp(source_coordinate(coord, double(o), scale, in_len), 0.0, double(in_len - 1));
      std::int64_t lo = static_cast<std::int64_t>(std::floor(s));
      t.push_back({lo, std::min(lo + 1, in_len - 1), s - double(lo)});
    }
    return t;
  };
  auto ty = taps(ih, oh, scales[rank - 2]), tx = taps(iw, ow, scales[rank - 1]);
  const std::int64_t planes = ir::element_count(x.shape) / (ih * iw);
  for (std::int64_t p = 0; p < planes; ++p)
    for (std::int64_t i = 0; i < oh; ++i)
      for (std::int64_t j = 0; j < ow; ++j) {
        const float* plane = xp + p * ih * iw;
        auto at = [&](std::int64_t r, std::int64_t c) { return double(plane[r * iw + c]); };
        const double top =
            at(ty[i].lo, tx[j].lo) * (1 - tx[j].frac) + at(ty[i].lo, tx[j].hi) * tx[j].frac;
        const double bottom =
            at(ty[i].hi, tx[j].lo) * (1 - tx[j].frac) + at(ty[i].hi, tx[j].hi) * tx[j].frac;
        y[(p * oh + i) * ow + j] = static_cast<float>(top * (1 - ty[i].frac) + bottom * ty[i].frac);
      }
  return one(std::move(out));
}

}  // namespace

void add_float_kernels(KernelTable& t) {
  auto onnx = [&](const char* op, Kernel k) { t[{"", op}] = std::move(k); };
  onnx("Add", binary([](auto a, auto b) { return a + b; }));
  onnx("Sub", binary([](auto a, auto b) { return a - b; }));
  onnx("Mul", binary([](auto a, auto b) { return a * b; }));
  onnx("Div", binary([](auto a, auto b) {
         if constexpr (std::is_integral_v<decltype(a)>) {
           if (b == 0) fail("integer division by zero");
         }
         return a / b;
       }));
  onnx("Relu", relu);
  onnx("Clip", clip);
  onnx("LeakyRelu", unary_float([](const ir::Node& n, float v) {
         return v < 0 ? v * n.get_float("alpha", 0.01f) : v;
       }));
  onnx("Sigmoid", unary_float([](const ir::Node&, float v) { return 1.f / (1.f + std::exp(-v)); }));
  onnx("Tanh", unary_float([](const ir::Node&, float v) { return std::tanh(v); }));
  onnx("Conv", conv);
  onnx("Gemm", gemm);
  onnx("MatMul", matmul);
  onnx("MaxPool", max_pool);
  onnx("AveragePool", average_pool);
  onnx("GlobalAveragePool", global_average_pool);
  onnx("BatchNormalization", batch_norm);
  onnx("Flatten", flatten);
  onnx("Reshape", reshape);
  onnx("Transpose", transpose);
  onnx("Concat", concat);
  onnx("Squeeze", squeeze);
  onnx("Unsqueeze", unsqueeze);
  onnx("Gather", gather);
  onnx("Shape", shape_of);
  onnx("Constant", constant);
  onnx("ConstantOfShape", constant_of_shape);
  onnx("Identity", [](const ir::Node&, const OpInputs& in) { return one(in.at(0)); });
  onnx("Dropout", [](const ir::Node& node, const OpInputs& in) {
    if (node.outputs.size() > 1 && !node.outputs[1].empty())
      fail("the mask output is not supported");
    if (const Tensor* training = in.optional(2))
      if (ir::to_int64_vector(*training).at(0) != 0) fail("training mode is not supported");
    return one(in.at(0));
  });
  onnx("Slice", slice);
  onnx("Cast", cast);
  onnx("Softmax", [](const ir::Node& n, const OpInputs& in) { return softmax(n, in, in.opset); });
  onnx("LogSoftmax",
       [](const ir::Node& n, const OpInputs& in) { return softmax(n, in, in.opset, true); });
  onnx("Resize", [](const ir::Node& n, const OpInputs& in) { return resize(n, in, in.opset); });
}

}  // namespace npukit::ref
