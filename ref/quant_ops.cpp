// Quantized ONNX kernels (QuantizeLinear/DequantizeLinear and the QOperator ops, including the
// com.microsoft ones onnxruntime's quantizer writes). Semantics follow onnxruntime: integer
// accumulation, requantization in float32 with round half to even, then saturation.
#include <cmath>
#if defined(__SSE2__)
#include <immintrin.h>
#endif
#include <span>

#include "common/cpu.h"

#include "ref/int_conv.h"
#include "ref/kernel_registry.h"
#include "ref/onnx_common.h"

namespace npukit::ref {

namespace {

bool is_8bit(DType t) { return t == DType::kInt8 || t == DType::kUInt8; }

// Checks a quantized tensor's type: int8, uint8 or int32.
void check_quantized(const Tensor& t, const char* what) {
  check_data(t, what);
  if (!is_8bit(t.dtype) && t.dtype != DType::kInt32)
    fail("{} '{}' must be int8, uint8 or int32, got {}", what, t.name, ir::dtype_name(t.dtype));
}

// Calls f with a quantized tensor's values as a pointer of their own type.
template <typename F>
void with_quantized(const Tensor& t, F&& f) {
  if (t.dtype == DType::kInt8) return f(t.as<std::int8_t>());
  if (t.dtype == DType::kUInt8) return f(t.as<std::uint8_t>());
  return f(t.as<std::int32_t>());
}

// A quantized tensor's values widened to int32, with its type checked.
std::vector<std::int32_t> widen(const Tensor& t, const char* what) {
  check_quantized(t, what);
  std::vector<std::int32_t> v(static_cast<std::size_t>(ir::element_count(t.shape)));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = t.dtype == DType::kInt8    ? t.as<std::int8_t>()[i]
           : t.dtype == DType::kUInt8 ? t.as<std::uint8_t>()[i]
                                      : t.as<std::int32_t>()[i];
  return v;
}

std::vector<float> scales_of(const Tensor& t, const char* what) {
  const float* p = float_data(t, what);
  std::vector<float> v(p, p + ir::element_count(t.shape));
  if (v.empty()) fail("{} '{}' is empty", what, t.name);
  for (float s : v)
    if (!(s > 0) || !std::isfinite(s))
      fail("{} '{}' holds {}, scales must be positive", what, t.name, s);
  return v;
}

// Zero points (default 0 of `fallback` type) and their type.
std::vector<std::int32_t> zero_points(const Tensor* t, const char* what) {
  if (!t) return {0};
  auto v = widen(*t, what);
  if (v.empty()) fail("{} '{}' is empty", what, t->name);
  return v;
}

DType zero_point_type(const Tensor* t, DType fallback) { return t ? t->dtype : fallback; }

#if defined(__SSE2__)
// QuantizeLinear with one scale, the AVX2 level: the 4-wide loop's operations (below) on 8 lanes,
// 32 values a step; the divisions bound that loop, and vdivps takes 8 at the cost of 4 (resnet's
// 224x224 input: 79 -> about 40 us). Returns how many of the n values it wrote (a multiple of 32).
__attribute__((target("avx2"))) std::size_t quantize_one_scale_avx2(const float* xs, std::size_t n,
                                                                    float s, float z, float lo,
                                                                    float hi, std::uint8_t* out) {
  const __m256 vs = _mm256_set1_ps(s), vz = _mm256_set1_ps(z), vlo = _mm256_set1_ps(lo),
               vhi = _mm256_set1_ps(hi), magic = _mm256_set1_ps(12582912.f),
               limit = _mm256_set1_ps(4194304.f),
               abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i low_byte = _mm256_set1_epi32(0xff);
  const auto quantize8 = [&](const float* p) __attribute__((target("avx2"))) {
    const __m256 v = _mm256_div_ps(_mm256_loadu_ps(p), vs);
    const __m256 near = _mm256_cmp_ps(_mm256_and_ps(v, abs_mask), limit, _CMP_LE_OQ);
    const __m256 rounded = _mm256_sub_ps(_mm256_add_ps(v, magic), magic);
    const __m256 r = _mm256_blendv_ps(v, rounded, near);
    const __m256 q = _mm256_min_ps(vhi, _mm256_max_ps(vlo, _mm256_add_ps(r, vz)));
    return _mm256_and_si256(_mm256_cvttps_epi32(q), low_byte);
  };
  // The packs work within 128-bit halves: dwords come out as a0 a1 a2 a3 (low halves), then the
  // high halves; the permutation puts each vector's 8 bytes back in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i a = _mm256_packs_epi32(quantize8(xs + i), quantize8(xs + i + 8));
    const __m256i b = _mm256_packs_epi32(quantize8(xs + i + 16), quantize8(xs + i + 24));
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(a, b), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), bytes);
  }
  return i;
}
#endif

// Saturating store of a rounded value into an 8-bit tensor.
void store(Tensor& out, std::int64_t i, float rounded_plus_zero) {
  if (out.dtype == DType::kInt8)
    out.as_mutable<std::int8_t>()[i] =
        static_cast<std::int8_t>(std::clamp(rounded_plus_zero, -128.f, 127.f));
  else
    out.as_mutable<std::uint8_t>()[i] =
        static_cast<std::uint8_t>(std::clamp(rounded_plus_zero, 0.f, 255.f));
}

// Per-tensor or per-axis parameter index of element i.
struct AxisIndexer {
  std::int64_t inner = 1, extent = 1;
  bool per_axis = false;
  std::int64_t operator()(std::int64_t i) const { return per_axis ? (i / inner) % extent : 0; }
};

AxisIndexer axis_indexer(const ir::Shape& shape, std::size_t params, std::int64_t axis_attr,
                         const char* what) {
  AxisIndexer ix;
  if (params == 1) return ix;
  const std::int64_t axis =
      normalize_axis(axis_attr, static_cast<std::int64_t>(shape.size()), "axis");
  if (shape[axis] != static_cast<std::int64_t>(params))
    fail("{} has {} values but axis {} has size {}", what, params, axis, shape[axis]);
  ix.per_axis = true;
  ix.extent = shape[axis];
  for (std::size_t d = axis + 1; d < shape.size(); ++d) ix.inner *= shape[d];
  return ix;
}

Outputs quantize_linear(const ir::Node& node, const OpInputs& in) {
  const Tensor& x = in.at(0);
  check_data(x, "x");
  // A float32 input (a model's input image) is read where it is, not converted to a copy.
  std::vector<float> converted;
  if (x.dtype != DType::kFloat32) converted = ir::to_float_vector(x);
  const std::span<const float> xs =
      x.dtype == DType::kFloat32
          ? std::span<const float>(x.as<float>(), static_cast<std::size_t>(ir::stored_count(x)))
          : std::span<const float>(converted);
  const auto scale = scales_of(in.at(1), "y_scale");
  const auto zero = zero_points(in.optional(2), "y_zero_point");
  const DType type = zero_point_type(in.optional(2), DType::kUInt8);
  if (!is_8bit(type)) fail("output type {} is not supported (int8, uint8)", ir::dtype_name(type));
  if (zero.size() != 1 && zero.size() != scale.size())
    fail("y_scale and y_zero_point differ in size");
  const auto ix = axis_indexer(x.shape, scale.size(), node.get_int("axis", 1), "y_scale");
  Tensor out = in.output_for_overwrite(0, type, x.shape);
  if (scale.size() == 1) {
    // One scale (a model's input image): the same arithmetic without the per-element indexer,
    // type switch and rounding call (round_half_even by the 1.5 * 2^23 addition, exact for
    // |v| <= 2^22; anything larger, or NaN, takes the general expression; 0.28 ms per 224x224
    // image in a loop of one value at a time).
    const float s = scale[0], z = static_cast<float>(zero[0]);
    const bool to_int8 = type == DType::kInt8;
    const float lo = to_int8 ? -128.f : 0.f, hi = to_int8 ? 127.f : 255.f;
    auto* out_bytes = out.as_mutable<std::uint8_t>();
    constexpr float kMagic = 12582912.f;  // 1.5 * 2^23
    std::size_t i = 0;
#if defined(__SSE2__)
    if (cpu::path_allowed(cpu::resolve(Isa::kAuto, "QuantizeLinear"), Isa::kAvx2))
      i = quantize_one_scale_avx2(xs.data(), xs.size(), s, z, lo, hi, out_bytes);
    // Four at a time, the same operations in the same order (SSE2 is every x86-64's baseline).
    // Beyond 2^22 the unrounded quotient is used: it saturates to the same end as the rounded
    // one, whatever the zero point. max(lo, v) and min(hi, v) keep a NaN as std::clamp does, and
    // the low byte of the truncated int32 is what the scalar cast stores.
    const __m128 vs = _mm_set1_ps(s), vz = _mm_set1_ps(z), vlo = _mm_set1_ps(lo),
                 vhi = _mm_set1_ps(hi), magic = _mm_set1_ps(kMagic), limit = _mm_set1_ps(4194304.f),
                 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
    const __m128i low_byte = _mm_set1_epi32(0xff);
    auto quantize4 = [&](const float* p) {
      const __m128 v = _mm_div_ps(_mm_loadu_ps(p), vs);
      const __m128 near = _mm_cmple_ps(_mm_and_ps(v, abs_mask), limit);
      const __m128 rounded = _mm_sub_ps(_mm_add_ps(v, magic), magic);
      const __m128 r = _mm_or_ps(_mm_and_ps(near, rounded), _mm_andnot_ps(near, v));
      const __m128 q = _mm_min_ps(vhi, _mm_max_ps(vlo, _mm_add_ps(r, vz)));
      return _mm_and_si128(_mm_cvttps_epi32(q), low_byte);
    };
    for (; i + 16 <= xs.size(); i += 16) {  // the rest at the AVX2 level
      const __m128i a = _mm_packs_epi32(quantize4(&xs[i]), quantize4(&xs[i + 4]));
      const __m128i b = _mm_packs_epi32(quantize4(&xs[i + 8]), quantize4(&xs[i + 12]));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out_bytes + i), _mm_packus_epi16(a, b));
    }
#endif
    for (; i < xs.size(); ++i) {
      const float v = xs[i] / s;
      const float r = std::fabs(v) <= 4194304.f ? (v + kMagic) - kMagic : round_half_even(v);
      const float q = std::clamp(r + z, lo, hi);
      out_bytes[i] = to_int8 ? static_cast<std::uint8_t>(static_cast<std::int8_t>(q))
                             : static_cast<std::uint8_t>(q);
    }
    return one(std::move(out));
  }
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(xs.size()); ++i) {
    const std::int64_t p = ix(i);
    store(out, i,
          round_half_even(xs[i] / scale[p]) + static_cast<float>(zero[zero.size() == 1 ? 0 : p]));
  }
  return one(std::move(out));
}

Outputs dequantize_linear(const ir::Node& node, const OpInputs& in) {
  const Tensor& x = in.at(0);
  check_quantized(x, "x");
  const auto scale = scales_of(in.at(1), "x_scale");
  const auto zero = zero_points(in.optional(2), "x_zero_point");
  if (zero.size() != 1 && zero.size() != scale.size())
    fail("x_scale and x_zero_point differ in size");
  const auto ix = axis_indexer(x.shape, scale.size(), node.get_int("axis", 1), "x_scale");
  Tensor out = in.output_for_overwrite(0, DType::kFloat32, x.shape);
  const auto count = ir::element_count(x.shape);
  float* y = out.as_mutable<float>();
  // The values read in their own type (not widened to a copy first).
  with_quantized(x, [&](const auto* xs) {
    for (std::int64_t i = 0; i < count; ++i) {
      const std::int64_t p = ix(i);
      y[i] = static_cast<float>(std::int32_t{xs[i]} - zero[zero.size() == 1 ? 0 : p]) * scale[p];
    }
  });
  return one(std::move(out));
}

// acc * multiplier[m], rounded half to even, + zero, saturated; m = channel index. Sums are kept
// in 64 bits and read as onnxruntime's int32 accumulator (wrapping, never undefined).
Tensor requantize(const std::vector<std::int64_t>& acc, const ir::Shape& shape,
                  const std::vector<float>& multiplier, const AxisIndexer& ix, std::int32_t zero,
                  DType type) {
  Tensor out = ir::make_tensor(type, shape);
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(acc.size()); ++i)
    store(
        out, i,
        round_half_even(static_cast<float>(static_cast<std::int32_t>(acc[i])) * multiplier[ix(i)]) +
            static_cast<float>(zero));
  return out;
}

Outputs qlinear_conv(const ir::Node& node, const OpInputs& in) {
  const Tensor &x = in.at(0), &w = in.at(3);
  const auto xv = widen(x, "x");
  const auto wv = widen(w, "w");
  if (!is_8bit(x.dtype) || !is_8bit(w.dtype)) fail("x and w must be 8-bit");
  const float x_scale = scales_of(in.at(1), "x_scale")[0];
  const auto w_scale = scales_of(in.at(4), "w_scale");
  const float y_scale = scales_of(in.at(6), "y_scale")[0];
  const std::int32_t x_zero = zero_points(&in.at(2), "x_zero_point")[0];
  const auto w_zero = zero_points(&in.at(5), "w_zero_point");
  const std::int32_t y_zero = zero_points(&in.at(7), "y_zero_point")[0];
  if (x.shape.size() != w.shape.size() || x.shape.size() < 3)
    fail("x {} and w {} must both be [N, C, spatial...]", ir::shape_string(x.shape),
         ir::shape_string(w.shape));
  const std::int64_t group = node.get_int("group", 1);
  const std::int64_t n = x.shape[0], c = x.shape[1], m = w.shape[0];
  if (group < 1 || c % group || m % group || w.shape[1] * group != c)
    fail("x has {} channels, w is {}, group {}", c, ir::shape_string(w.shape), group);
  if ((w_scale.size() != 1 && static_cast<std::int64_t>(w_scale.size()) != m) ||
      (w_zero.size() != 1 && static_cast<std::int64_t>(w_zero.size()) != m))
    fail("w_scale / w_zero_point must have 1 or {} values", m);
  auto g = window_geometry(node, x.shape,
                           std::vector<std::int64_t>(w.shape.begin() + 2, w.shape.end()), false);
  const ir::Shape shape = g.output_shape(n, m);
  const std::int64_t area = g.out_h * g.out_w;
  std::vector<std::int64_t> acc(static_cast<std::size_t>(n * m * area), 0);
  if (const Tensor* b = in.optional(8)) {
    if (b->dtype != DType::kInt32 || ir::element_count(b->shape) != m)
      fail("B must be int32 with {} values", m);
    check_data(*b, "B");
    for (std::int64_t i = 0; i < n * m; ++i)
      std::fill_n(acc.data() + i * area, area, b->as<std::int32_t>()[i % m]);
  }
  convolve_int<std::int32_t, std::int32_t>(xv.data(), wv.data(), acc.data(), n, c, m, group, g,
                                           x_zero, w_zero);
  std::vector<float> multiplier;
  for (float ws : w_scale) multiplier.push_back(x_scale * ws / y_scale);
  return one(requantize(acc, shape, multiplier,
                        axis_indexer(shape, multiplier.size(), 1, "w_scale"), y_zero,
                        zero_point_type(&in.at(7), DType::kUInt8)));
}

// Integer matrix product with zero points: (a - za) x (b - zb[col]), numpy batch broadcasting.
std::vector<std::int64_t> int_matmul(const Tensor& a, const Tensor& b, std::int32_t a_zero,
                                     const std::vector<std::int32_t>& b_zero, MatMulShape& s) {
  const auto av = widen(a, "A"), bv = widen(b, "B");
  s = matmul_shape(a.shape, b.shape);
  if (b_zero.size() != 1 && static_cast<std::int64_t>(b_zero.size()) != s.n)
    fail("B zero point must have 1 or {} values", s.n);
  std::vector<std::int64_t> acc(static_cast<std::size_t>(ir::element_count(s.out)), 0);
  for (std::size_t batch = 0; batch < s.a_offsets.size(); ++batch)
    for (std::int64_t i = 0; i < s.m; ++i)
      for (std::int64_t j = 0; j < s.n; ++j) {
        const std::int32_t bz = b_zero.size() == 1 ? b_zero[0] : b_zero[j];
        std::int64_t sum = 0;
        for (std::int64_t t = 0; t < s.k; ++t)
          sum += (av[s.a_offsets[batch] + i * s.k + t] - a_zero) *
                 (bv[s.b_offsets[batch] + t * s.n + j] - bz);
        acc[(batch * s.m + i) * s.n + j] = sum;
      }
  return acc;
}

Outputs qlinear_matmul(const ir::Node&, const OpInputs& in) {
  const float a_scale = scales_of(in.at(1), "a_scale")[0];
  const auto b_scale = scales_of(in.at(4), "b_scale");
  const float y_scale = scales_of(in.at(6), "y_scale")[0];
  const std::int32_t a_zero = zero_points(&in.at(2), "a_zero_point")[0];
  const auto b_zero = zero_points(&in.at(5), "b_zero_point");
  const std::int32_t y_zero = zero_points(&in.at(7), "y_zero_point")[0];
  MatMulShape s;
  auto acc = int_matmul(in.at(0), in.at(3), a_zero, b_zero, s);
  std::vector<float> multiplier;
  for (float bs : b_scale) multiplier.push_back(a_scale * bs / y_scale);
  AxisIndexer ix;
  if (multiplier.size() > 1) ix = axis_indexer(s.out, multiplier.size(), -1, "b_scale");
  return one(
      requantize(acc, s.out, multiplier, ix, y_zero, zero_point_type(&in.at(7), DType::kUInt8)));
}

// com.microsoft QGemm: A, a_scale, a_zp, B, b_scale, b_zp, C (int32), y_scale, y_zp.
// Without y_scale the output is float: alpha * a_scale * b_scale * (acc + C).
Outputs qgemm(const ir::Node& node, const OpInputs& in) {
  const bool ta = node.get_int("transA", 0), tb = node.get_int("transB", 0);
  const float alpha = node.get_float("alpha", 1.f);
  const Tensor &a = in.at(0), &b = in.at(3);
  if (a.shape.size() != 2 || b.shape.size() != 2) fail("A and B must be matrices");
  const auto av = widen(a, "A"), bv = widen(b, "B");
  const float a_scale = scales_of(in.at(1), "a_scale")[0];
  const auto b_scale = scales_of(in.at(4), "b_scale");
  const std::int32_t a_zero = zero_points(in.optional(2), "a_zero_point")[0];
  const auto b_zero = zero_points(&in.at(5), "b_zero_point");
  const std::int64_t m = ta ? a.shape[1] : a.shape[0], k = ta ? a.shape[0] : a.shape[1];
  const std::int64_t kb = tb ? b.shape[1] : b.shape[0], n = tb ? b.shape[0] : b.shape[1];
  if (k != kb)
    fail("A {} and B {} disagree on K", ir::shape_string(a.shape), ir::shape_string(b.shape));
  if ((b_scale.size() != 1 && static_cast<std::int64_t>(b_scale.size()) != n) ||
      (b_zero.size() != 1 && static_cast<std::int64_t>(b_zero.size()) != n))
    fail("b_scale / b_zero_point must have 1 or {} values", n);
  std::vector<std::int64_t> acc(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      const std::int32_t bz = b_zero.size() == 1 ? b_zero[0] : b_zero[j];
      std::int64_t s = 0;
      for (std::int64_t t = 0; t < k; ++t)
        s += std::int64_t{1} * (av[ta ? t * m + i : i * k + t] - a_zero) *
             (bv[tb ? j * k + t : t * n + j] - bz);
      acc[i * n + j] = s;
    }
  // C is int32 in both forms and joins the accumulator before scaling (onnxruntime).
  const Tensor* y_scale_t = in.optional(7);
  const ir::Shape shape{m, n};
  if (const Tensor* c = in.optional(6)) {
    if (c->dtype != DType::kInt32) fail("C must be int32");
    if (broadcast_shapes(c->shape, shape) != shape)
      fail("C {} does not broadcast to [{}, {}]", ir::shape_string(c->shape), m, n);
    const auto cv = widen(*c, "C");
    for_each_broadcast(shape, shape, c->shape,
                       [&](std::int64_t i, std::int64_t, std::int64_t ic) { acc[i] += cv[ic]; });
  }
  AxisIndexer ix;
  if (b_scale.size() > 1) ix = axis_indexer(shape, b_scale.size(), 1, "b_scale");
  if (!y_scale_t) {
    Tensor out = ir::make_tensor(DType::kFloat32, shape);
    float* y = out.as_mutable<float>();
    for (std::int64_t i = 0; i < m * n; ++i)
      y[i] =
          alpha * a_scale * b_scale[ix(i)] * static_cast<float>(static_cast<std::int32_t>(acc[i]));
    return one(std::move(out));
  }
  const float y_scale = scales_of(*y_scale_t, "y_scale")[0];
  const Tensor* y_zero_t = in.optional(8);
  std::vector<float> multiplier;
  for (float bs : b_scale) multiplier.push_back(alpha * a_scale * bs / y_scale);
  return one(requantize(acc, shape, multiplier, ix,
                        y_zero_t ? zero_points(y_zero_t, "y_zero_point")[0] : 0,
                        zero_point_type(y_zero_t, DType::kUInt8)));
}

struct Quant {
  float scale;
  std::int32_t zero;
};
Quant quant_at(const OpInputs& in, std::size_t scale_index, std::size_t zero_index,
               const char* what) {
  const auto s = scales_of(in.at(scale_index), what);
  const auto z = zero_points(in.optional(zero_index), what);
  if (s.size() != 1 || z.size() != 1) fail("{} must be per-tensor", what);
  return {s[0], z[0]};
}

// com.microsoft QLinearAdd / QLinearMul: A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp.
// These reproduce onnxruntime's x86 kernels operation for operation, so results agree bit for bit
// (ties included), not only up to rounding:
//   add (AVX2): fixed = zc - (rA*za + rB*zb), rA = sA/sC, rB = sB/sC;
//               v = fma(a, rA, fma(b, rB, fixed)); when one operand is constant along the
//               innermost broadcast axis it is folded into `fixed` first (multiply, then add);
//   mul (SSE2): v = float((a - za)(b - zb)) * (sA*sB/sC) + zc (separate multiply and add);
// then round half to even and saturate.
template <bool kMul>
Outputs qlinear_binary(const ir::Node&, const OpInputs& in) {
  const Tensor &a = in.at(0), &b = in.at(3);
  const auto av = widen(a, "A"), bv = widen(b, "B");
  const Quant qa = quant_at(in, 1, 2, "A scale"), qb = quant_at(in, 4, 5, "B scale"),
              qc = quant_at(in, 6, 7, "C scale");
  if (a.dtype != b.dtype || !is_8bit(a.dtype)) fail("A and B must share one 8-bit type");
  const ir::Shape shape = broadcast_shapes(a.shape, b.shape);
  Tensor out = ir::make_tensor(zero_point_type(in.optional(7), a.dtype), shape);
  const float zc = static_cast<float>(qc.zero);
  if (kMul) {
    const float ratio = qa.scale * qb.scale / qc.scale;
    for_each_broadcast(
        shape, a.shape, b.shape, [&](std::int64_t i, std::int64_t ia, std::int64_t ib) {
          const float product = static_cast<float>((av[ia] - qa.zero) * (bv[ib] - qb.zero)) * ratio;
          store(out, i, round_half_even(product + zc));
        });
    return one(std::move(out));
  }
  const float ra = qa.scale / qc.scale, rb = qb.scale / qc.scale;
  const float fixed = zc - (ra * static_cast<float>(qa.zero) + rb * static_cast<float>(qb.zero));
  // Which operand onnxruntime's broadcaster hands over as a scalar: decided by the innermost axis.
  const std::int64_t a_last = a.shape.empty() ? 1 : a.shape.back();
  const std::int64_t b_last = b.shape.empty() ? 1 : b.shape.back();
  const bool a_scalar = a_last != b_last && a_last == 1, b_scalar = a_last != b_last && b_last == 1;
  for_each_broadcast(shape, a.shape, b.shape,
                     [&](std::int64_t i, std::int64_t ia, std::int64_t ib) {
                       const float fa = static_cast<float>(av[ia]), fb = static_cast<float>(bv[ib]);
                       float v;
                       if (a_scalar)
                         v = std::fma(fb, rb, fixed + fa * ra);
                       else if (b_scalar)
                         v = std::fma(fa, ra, fixed + fb * rb);
                       else
                         v = std::fma(fa, ra, std::fma(fb, rb, fixed));
                       store(out, i, round_half_even(v));
                     });
  return one(std::move(out));
}

// The lookup-table ops: dequantize, apply fn in float, quantize (x / y_scale) again.
template <typename Fn>
Tensor map_quantized(const Tensor& x, Quant qx, Quant qy, DType out_type, Fn fn) {
  const auto xv = widen(x, "X");
  Tensor out = ir::make_tensor(out_type, x.shape);
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(xv.size()); ++i) {
    const float real = fn(static_cast<float>(xv[i] - qx.zero) * qx.scale);
    store(out, i, round_half_even(real / qy.scale) + static_cast<float>(qy.zero));
  }
  return out;
}

Outputs qlinear_sigmoid(const ir::Node&, const OpInputs& in) {
  const Quant qx = quant_at(in, 1, 2, "X scale"), qy = quant_at(in, 3, 4, "Y scale");
  return one(map_quantized(in.at(0), qx, qy, zero_point_type(in.optional(4), in.at(0).dtype),
                           [](float v) { return 1.f / (1.f + std::exp(-v)); }));
}

Outputs qlinear_leaky_relu(const ir::Node& node, const OpInputs& in) {
  const float alpha = node.get_float("alpha", 0.01f);
  const Quant qx = quant_at(in, 1, 2, "X scale"), qy = quant_at(in, 3, 4, "Y scale");
  return one(map_quantized(in.at(0), qx, qy, zero_point_type(in.optional(4), in.at(0).dtype),
                           [alpha](float v) { return v >= 0 ? v : v * alpha; }));
}

// com.microsoft QLinearConcat: Y_scale, Y_zp, then (X, X_scale, X_zp) per input.
Outputs qlinear_concat(const ir::Node& node, const OpInputs& in) {
  if (in.size() < 5 || (in.size() - 2) % 3)
    fail("expects Y_scale, Y_zero_point and triples (X, scale, zero point)");
  const Quant qy = quant_at(in, 0, 1, "Y_scale");
  const DType type = in.at(1).dtype;
  std::vector<Tensor> parts;
  for (std::size_t i = 2; i < in.size(); i += 3) {
    const Quant qx = quant_at(in, i + 1, i + 2, "X_scale");
    if (in.at(i).dtype != type)
      fail("input {} is {}, Y is {}", (i - 2) / 3, ir::dtype_name(in.at(i).dtype),
           ir::dtype_name(type));
    if (qx.scale == qy.scale && qx.zero == qy.zero)
      parts.push_back(in.at(i));
    else
      parts.push_back(map_quantized(in.at(i), qx, qy, type, [](float v) { return v; }));
  }
  // Plain Concat on the requantized parts.
  OpInputs parts_in;
  for (const Tensor& t : parts) parts_in.tensors.push_back(&t);
  ir::Node concat_node = node;
  concat_node.op_type = "Concat";
  concat_node.domain = "";
  static const KernelTable float_kernels = [] {
    KernelTable t;
    add_float_kernels(t);
    return t;
  }();
  return float_kernels.at({"", "Concat"})(concat_node, parts_in);
}

// com.microsoft QLinearAveragePool: X, x_scale, x_zp, y_scale, y_zp (NCHW only). As onnxruntime:
// dequantize, average in float (count_include_pad divides by the full kernel size), quantize.
Outputs qlinear_average_pool(const ir::Node& node, const OpInputs& in) {
  if (node.get_int("channels_last", 0) != 0) fail("channels_last is not supported");
  const Tensor& x = in.at(0);
  const auto xv = widen(x, "X");
  const Quant qx = quant_at(in, 1, 2, "x_scale"), qy = quant_at(in, 3, 4, "y_scale");
  auto g = window_geometry(node, x.shape, {}, true);
  if (g.dilation_h != 1 || g.dilation_w != 1) fail("dilations are not supported");
  const bool include_pad = node.get_int("count_include_pad", 0) != 0;
  const ir::Shape shape = g.output_shape(x.shape[0], x.shape[1]);
  Tensor out = ir::make_tensor(zero_point_type(in.optional(4), x.dtype), shape);
  for (std::int64_t p = 0; p < x.shape[0] * x.shape[1]; ++p)
    for (std::int64_t oy = 0; oy < g.out_h; ++oy)
      for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
        const std::int64_t y0 = std::max<std::int64_t>(oy * g.stride_h - g.pad_top, 0);
        const std::int64_t y1 = std::min(oy * g.stride_h - g.pad_top + g.kernel_h, g.in_h);
        const std::int64_t x0 = std::max<std::int64_t>(ox * g.stride_w - g.pad_left, 0);
        const std::int64_t x1 = std::min(ox * g.stride_w - g.pad_left + g.kernel_w, g.in_w);
        float sum = 0;
        for (std::int64_t iy = y0; iy < y1; ++iy)
          for (std::int64_t ix = x0; ix < x1; ++ix)
            sum += qx.scale * static_cast<float>(xv[(p * g.in_h + iy) * g.in_w + ix] - qx.zero);
        const std::int64_t count = include_pad ? g.kernel_h * g.kernel_w : (y1 - y0) * (x1 - x0);
        const float real = count > 0 ? sum / static_cast<float>(count) : 0.f;
        store(out, (p * g.out_h + oy) * g.out_w + ox,
              round_half_even(real / qy.scale + static_cast<float>(qy.zero)));
      }
  return one(std::move(out));
}

// com.microsoft QLinearGlobalAveragePool: X, x_scale, x_zp, y_scale, y_zp (NCHW only).
Outputs qlinear_global_average_pool(const ir::Node& node, const OpInputs& in) {
  if (node.get_int("channels_last", 0) != 0) fail("channels_last is not supported");
  const Tensor& x = in.at(0);
  const auto xv = widen(x, "X");
  const Quant qx = quant_at(in, 1, 2, "x_scale"), qy = quant_at(in, 3, 4, "y_scale");
  if (x.shape.size() < 3) fail("X must be [N, C, spatial...]");
  ir::Shape shape = x.shape;
  std::int64_t area = 1;
  for (std::size_t i = 2; i < shape.size(); ++i) area *= shape[i], shape[i] = 1;
  Tensor out = ir::make_tensor(zero_point_type(in.optional(4), x.dtype), shape);
  const float multiplier = qx.scale / (qy.scale * static_cast<float>(area));
  for (std::int64_t p = 0; p < x.shape[0] * x.shape[1]; ++p) {
    std::int64_t sum = 0;
    for (std::int64_t i = 0; i < area; ++i) sum += xv[p * area + i] - qx.zero;
    store(out, p,
          round_half_even(static_cast<float>(sum) * multiplier) + static_cast<float>(qy.zero));
  }
  return one(std::move(out));
}

}  // namespace

void add_quant_kernels(KernelTable& t) {
  t[{"", "QuantizeLinear"}] = quantize_linear;
  t[{"", "DequantizeLinear"}] = dequantize_linear;
  t[{"", "QLinearConv"}] = qlinear_conv;
  t[{"", "QLinearMatMul"}] = qlinear_matmul;
  const std::string ms = "com.microsoft";
  t[{ms, "QuantizeLinear"}] = quantize_linear;
  t[{ms, "DequantizeLinear"}] = dequantize_linear;
  t[{ms, "QGemm"}] = qgemm;
  t[{ms, "QLinearAdd"}] = qlinear_binary<false>;
  t[{ms, "QLinearMul"}] = qlinear_binary<true>;
  t[{ms, "QLinearConcat"}] = qlinear_concat;
  t[{ms, "QLinearSigmoid"}] = qlinear_sigmoid;
  t[{ms, "QLinearLeakyRelu"}] = qlinear_leaky_relu;
  t[{ms, "QLinearAveragePool"}] = qlinear_average_pool;
  t[{ms, "QLinearGlobalAveragePool"}] = qlinear_global_average_pool;
}

}  // namespace npukit::ref
