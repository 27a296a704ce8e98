// More standard ONNX kernels the host side of detection and classification models needs:
// NonMaxSuppression (ONNX semantics; the host half of DECISIONS.md 9), Split, Pad, reductions,
// ArgMax/ArgMin, variadic Max/Min/Sum/Mean, comparisons, Where, Expand, Tile and float math.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "ref/kernel_registry.h"
#include "ref/onnx_common.h"

namespace npukit::ref {

namespace {

// Calls fn(out_index, idx) over every multi-index of `shape`.
template <typename Fn>
void for_each_index(const ir::Shape& shape, Fn&& fn) {
  std::vector<std::int64_t> idx(shape.size(), 0);
  const std::int64_t count = ir::element_count(shape);
  for (std::int64_t i = 0; i < count; ++i) {
    fn(i, idx);
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

// ---- NonMaxSuppression -------------------------------------------------------------------------

Outputs non_max_suppression(const ir::Node& node, const OpInputs& in) {
  const Tensor &boxes_t = in.at(0), &scores_t = in.at(1);
  const float* boxes = float_data(boxes_t, "boxes");
  const float* scores = float_data(scores_t, "scores");
  if (boxes_t.shape.size() != 3 || boxes_t.shape[2] != 4 || scores_t.shape.size() != 3 ||
      scores_t.shape[0] != boxes_t.shape[0] || scores_t.shape[2] != boxes_t.shape[1])
    fail("boxes must be [B, N, 4] and scores [B, C, N], got {} and {}",
         ir::shape_string(boxes_t.shape), ir::shape_string(scores_t.shape));
  const std::int64_t max_out = in.optional(2) && ir::element_count(in.optional(2)->shape) > 0
                                   ? ir::to_int64_vector(*in.optional(2))[0]
                                   : 0;
  const float iou_threshold = in.optional(3) && ir::element_count(in.optional(3)->shape) > 0
                                  ? ir::to_float_vector(*in.optional(3))[0]
                                  : 0.f;
  const bool has_score_threshold = in.optional(4) && ir::element_count(in.optional(4)->shape) > 0;
  const float score_threshold = has_score_threshold ? ir::to_float_vector(*in.optional(4))[0] : 0.f;
  const bool center = node.get_int("center_point_box", 0) != 0;
  const std::int64_t batches = boxes_t.shape[0], count = boxes_t.shape[1],
                     classes = scores_t.shape[1];

  struct Corners {
    float y1, x1, y2, x2;
  };
  auto corners = [&](std::int64_t b, std::int64_t i) {
    const float* v = boxes + (b * count + i) * 4;
    if (center)  // (x_center, y_center, width, height)
      return Corners{v[1] - v[3] / 2, v[0] - v[2] / 2, v[1] + v[3] / 2, v[0] + v[2] / 2};
    return Corners{std::min(v[0], v[2]), std::min(v[1], v[3]), std::max(v[0], v[2]),
                   std::max(v[1], v[3])};
  };
  auto suppresses = [&](const Corners& a, const Corners& c) {
    const float area_a = (a.y2 - a.y1) * (a.x2 - a.x1), area_c = (c.y2 - c.y1) * (c.x2 - c.x1);
    if (area_a <= 0 || area_c <= 0) return false;
    const float ih = std::max(0.f, std::min(a.y2, c.y2) - std::max(a.y1, c.y1));
    const float iw = std::max(0.f, std::min(a.x2, c.x2) - std::max(a.x1, c.x1));
    const float inter = ih * iw;
    if (inter <= 0) return false;
    const float uni = area_a + area_c - inter;
    return uni > 0 && inter / uni > iou_threshold;
  };
  std::vector<std::int64_t> rows;
  for (std::int64_t b = 0; b < batches; ++b)
    for (std::int64_t k = 0; k < classes; ++k) {
      const float* s = scores + (b * classes + k) * count;
      std::vector<std::int64_t> order;
      for (std::int64_t i = 0; i < count; ++i)
        if (!has_score_threshold || s[i] > score_threshold) order.push_back(i);
      std::stable_sort(order.begin(), order.end(),
                       [&](std::int64_t x, std::int64_t y) { return s[x] > s[y]; });
      std::vector<std::int64_t> kept;
      for (std::int64_t i : order) {
        if (static_cast<std::int64_t>(kept.size()) >= max_out) break;
        const Corners box = corners(b, i);
        if (std::none_of(kept.begin(), kept.end(),
                         [&](std::int64_t j) { return suppresses(corners(b, j), box); }))
          kept.push_back(i);
      }
      for (std::int64_t i : kept) rows.insert(rows.end(), {b, k, i});
    }
  return one(ir::make_tensor<std::int64_t>({static_cast<std::int64_t>(rows.size() / 3), 3}, rows));
}

// ---- Split, Pad, Expand, Tile, Where ------------------------------------------------------------

Outputs split(const ir::Node& node, const OpInputs& in) {
  const Tensor& x = in.at(0);
  check_data(x, "input");
  const std::int64_t rank = static_cast<std::int64_t>(x.shape.size());
  const std::int64_t axis = normalize_axis(node.get_int("axis", 0), rank, "axis");
  std::vector<std::int64_t> sizes =
      in.optional(1) ? ir::to_int64_vector(*in.optional(1)) : node.get_ints("split", {});
  const std::int64_t parts = static_cast<std::int64_t>(node.outputs.size());
  if (sizes.empty()) {
    if (parts == 0 || x.shape[axis] % parts)
      fail("axis {} of size {} does not split into {} equal parts", axis, x.shape[axis], parts);
    sizes.assign(parts, x.shape[axis] / parts);
  }
  if (static_cast<std::int64_t>(sizes.size()) != parts ||
      std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0}) != x.shape[axis])
    fail("split sizes do not add up to axis {} of size {} over {} outputs", axis, x.shape[axis],
         parts);
  std::int64_t outer = 1, inner = ir::dtype_size(x.dtype);
  for (std::int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (std::int64_t d = axis + 1; d < rank; ++d) inner *= x.shape[d];
  Outputs outs;
  std::int64_t offset = 0;
  for (std::int64_t size : sizes) {
    ir::Shape shape = x.shape;
    shape[axis] = size;
    Tensor t = ir::make_tensor(x.dtype, shape);
    for (std::int64_t o = 0; o < outer; ++o)
      copy_bytes(t.data.data() + o * size * inner,
                 x.data.data() + (o * x.shape[axis] + offset) * inner, size * inner);
    offset += size;
    outs.push_back(std::move(t));
  }
  return outs;
}

Outputs pad(const ir::Node& node, const OpInputs& in) {
  const Tensor& x = in.at(0);
  check_data(x, "data");
  const std::int64_t rank = static_cast<std::int64_t>(x.shape.size());
  auto pads = in.optional(1) ? ir::to_int64_vector(*in.optional(1)) : node.get_ints("pads", {});
  if (static_cast<std::int64_t>(pads.size()) != 2 * rank)
    fail("pads has {} values for rank {}", pads.size(), rank);
  const std::string mode = node.get_string("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect")
    fail("mode '{}' is not supported", mode);
  ir::Shape shape = x.shape;
  for (std::int64_t d = 0; d < rank; ++d) {
    shape[d] += pads[d] + pads[d + rank];
    if (shape[d] < 0) fail("pads make axis {} negative", d);
    if (mode != "constant" && x.shape[d] == 0 && shape[d] > 0)
      fail("cannot {}-pad an empty axis", mode);
  }
  Tensor out = in.output(0, x.dtype, shape);
  const std::size_t size = ir::dtype_size(x.dtype);
  std::vector<std::uint8_t> fill(size, 0);
  if (const Tensor* v = in.optional(2)) {
    if (v->dtype != x.dtype || v->data.size() < size)
      fail("constant_value must be a scalar of the data type");
    copy_bytes(fill.data(), v->data.data(), size);
  } else if (node.has("value")) {
    const float value = node.get_float("value", 0);
    dispatch_numeric(x.dtype, [&](auto tag) {
      using T = decltype(tag);
      T v = static_cast<T>(value);
      copy_bytes(fill.data(), &v, size);
    });
  }
  const auto strides = row_major_strides(x.shape);
  const bool cropping = std::any_of(pads.begin(), pads.end(), [](std::int64_t p) { return p < 0; });
  if (mode == "constant" && !cropping) {
    // The fill everywhere (out starts zeroed), then each input row copied to its place.
    if (std::any_of(fill.begin(), fill.end(), [](std::uint8_t b) { return b != 0; })) {
      const std::int64_t out_count = ir::element_count(shape);
      if (size == 1)
        std::memset(out.data.data(), fill[0], static_cast<std::size_t>(out_count));
      else
        for (std::int64_t i = 0; i < out_count; ++i)
          copy_bytes(out.data.data() + i * size, fill.data(), size);
    }
    const auto out_strides = row_major_strides(shape);
    const std::size_t row_bytes = static_cast<std::size_t>(rank ? x.shape[rank - 1] : 1) * size;
    for_each_row(x.shape, [&](std::int64_t first, const std::vector<std::int64_t>& idx) {
      std::int64_t dst = 0;
      for (std::int64_t d = 0; d < rank; ++d) dst += (idx[d] + pads[d]) * out_strides[d];
      copy_bytes(out.data.data() + dst * size, x.data.data() + first * size, row_bytes);
    });
    return one(std::move(out));
  }
  for_each_index(shape, [&](std::int64_t i, const std::vector<std::int64_t>& idx) {
    std::int64_t src = 0;
    for (std::int64_t d = 0; d < rank; ++d) {
      std::int64_t s = idx[d] - pads[d];
      const std::int64_t n = x.shape[d];
      if (s < 0 || s >= n) {
        if (mode == "constant")
          return copy_bytes(out.data.data() + i * size, fill.data(), size), void();
        if (mode == "edge")
          s = std::clamp<std::int64_t>(s, 0, n - 1);
        else {  // reflect, mirrored without repeating the edge
          const std::int64_t period = 2 * (n - 1);
          if (period == 0)
            s = 0;
          else {
            s = ((s % period) + period) % period;
            if (s >= n) s = period - s;
          }
        }
      }
      src += s * strides[d];
    }
    copy_bytes(out.data.data() + i * size, x.data.data() + src * size, size);
  });
  return one(std::move(out));
}

Outputs expand(const ir::Node&, const OpInputs& in) {
  const Tensor& x = in.at(0);
  check_data(x, "input");
  const ir::Shape shape = broadcast_shapes(x.shape, ir::to_int64_vector(in.at(1)));
  Tensor out = ir::make_tensor(x.dtype, shape);
  const std::size_t size = ir::dtype_size(x.dtype);
  for_each_broadcast(shape, x.shape, {}, [&](std::int64_t i, std::int64_t ix, std::int64_t) {
    copy_bytes(out.data.data() + i * size, x.data.data() + ix * size, size);
  });
  return one(std::move(out));
}

Outputs tile(const ir::Node&, const OpInputs& in) {
  const Tensor& x = in.at(0);
  check_data(x, "input");
  const auto repeats = ir::to_int64_vector(in.at(1));
  if (repeats.size() != x.shape.size())
    fail("repeats has {} values for rank {}", repeats.size(), x.shape.size());
  ir::Shape shape = x.shape;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (repeats[d] < 0) fail("negative repeat {}", repeats[d]);
    shape[d] *= repeats[d];
  }
  Tensor out = ir::make_tensor(x.dtype, shape);
  const std::size_t size = ir::dtype_size(x.dtype);
  const auto strides = row_major_strides(x.shape);
  for_each_index(shape, [&](std::int64_t i, const std::vector<std::int64_t>& idx) {
    std::int64_t src = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) src += (idx[d] % x.shape[d]) * strides[d];
    copy_bytes(out.data.data() + i * size, x.data.data() + src * size, size);
  });
  return one(std::move(out));
}

Outputs where(const ir::Node&, const OpInputs& in) {
  const Tensor &c = in.at(0), &a = in.at(1), &b = in.at(2);
  check_data(c, "condition");
  check_data(a, "X");
  check_data(b, "Y");
  if (c.dtype != DType::kBool) fail("condition must be bool");
  if (a.dtype != b.dtype) fail("X and Y differ in type");
  const ir::Shape shape = broadcast_shapes(c.shape, broadcast_shapes(a.shape, b.shape));
  const auto sc = broadcast_strides(c.shape, shape), sa = broadcast_strides(a.shape, shape),
             sb = broadcast_strides(b.shape, shape);
  Tensor out = ir::make_tensor(a.dtype, shape);
  const std::size_t size = ir::dtype_size(a.dtype);
  for_each_index(shape, [&](std::int64_t i, const std::vector<std::int64_t>& idx) {
    std::int64_t ic = 0, ia = 0, ib = 0;
    for (std::size_t d = 0; d < shape.size(); ++d)
      ic += idx[d] * sc[d], ia += idx[d] * sa[d], ib += idx[d] * sb[d];
    const Tensor& src = c.data[ic] ? a : b;
    copy_bytes(out.data.data() + i * size, src.data.data() + (c.data[ic] ? ia : ib) * size, size);
  });
  return one(std::move(out));
}

// ---- comparisons, variadic and reductions -------------------------------------------------------

template <typename Cmp>
Kernel compare(Cmp cmp) {
  return [cmp](const ir::Node&, const OpInputs& in) {
    const Tensor &a = in.at(0), &b = in.at(1);
    check_data(a, "A");
    check_data(b, "B");
    if (a.dtype != b.dtype) fail("operands differ in type");
    const ir::Shape shape = broadcast_shapes(a.shape, b.shape);
    Tensor out = ir::make_tensor(DType::kBool, shape);
    dispatch_numeric(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      for_each_broadcast(shape, a.shape, b.shape,
                         [&](std::int64_t i, std::int64_t ia, std::int64_t ib) {
                           out.data[i] = cmp(a.as<T>()[ia], b.as<T>()[ib]) ? 1 : 0;
                         });
    });
    return one(std::move(out));
  };
}

enum class Fold { kMax, kMin, kSum, kMean };

Kernel variadic(Fold fold) {
  return [fold](const ir::Node&, const OpInputs& in) {
    if (in.size() == 0) fail("needs at least one input");
    Tensor acc = in.at(0);
    check_data(acc, "input");
    for (std::size_t k = 1; k < in.size(); ++k) {
      const Tensor& b = in.at(k);
      check_data(b, "input");
      if (b.dtype != acc.dtype) fail("inputs differ in type");
      const ir::Shape shape = broadcast_shapes(acc.shape, b.shape);
      Tensor next = ir::make_tensor(acc.dtype, shape);
      dispatch_numeric(acc.dtype, [&](auto tag) {
        using T = decltype(tag);
        for_each_broadcast(shape, acc.shape, b.shape,
                           [&](std::int64_t i, std::int64_t ia, std::int64_t ib) {
                             const T x = acc.as<T>()[ia], y = b.as<T>()[ib];
                             next.as_mutable<T>()[i] = fold == Fold::kMax   ? std::max(x, y)
                                                       : fold == Fold::kMin ? std::min(x, y)
                                                                            : static_cast<T>(x + y);
                           });
      });
      acc = std::move(next);
    }
    if (fold == Fold::kMean) {
      if (acc.dtype != DType::kFloat32) fail("Mean supports float32 only");
      for (std::int64_t i = 0; i < ir::element_count(acc.shape); ++i)
        acc.as_mutable<float>()[i] /= static_cast<float>(in.size());
    }
    acc.name.clear();
    return one(std::move(acc));
  };
}

enum class Reduce { kSum, kMean, kMax, kMin, kProd };

Kernel reduce(Reduce kind, bool axes_as_input_from_13) {
  return [kind, axes_as_input_from_13](const ir::Node& node, const OpInputs& in) {
    const Tensor& x = in.at(0);
    check_data(x, "data");
    const std::int64_t rank = static_cast<std::int64_t>(x.shape.size());
    std::vector<std::int64_t> axes =
        (axes_as_input_from_13 && in.opset >= 13)
            ? (in.optional(1) ? ir::to_int64_vector(*in.optional(1)) : std::vector<std::int64_t>{})
            : node.get_ints("axes", {});
    const bool keep = node.get_int("keepdims", 1) != 0;
    std::vector<bool> reduced(rank, false);
    if (axes.empty()) {
      if (node.get_int("noop_with_empty_axes", 0) != 0) return one(x);
      reduced.assign(rank, true);
    }
    for (auto a : axes) reduced[normalize_axis(a, rank, "axis")] = true;
    ir::Shape kept_shape, out_shape;
    for (std::int64_t d = 0; d < rank; ++d) {
      kept_shape.push_back(reduced[d] ? 1 : x.shape[d]);
      if (!reduced[d] || keep) out_shape.push_back(reduced[d] ? 1 : x.shape[d]);
    }
    Tensor out = ir::make_tensor(x.dtype, out_shape);
    const auto out_strides = broadcast_strides(kept_shape, x.shape);  // 0 along reduced axes
    dispatch_numeric(x.dtype, [&](auto tag) {
      using T = decltype(tag);
      const std::int64_t n = ir::element_count(out_shape);
      std::vector<double> acc(static_cast<std::size_t>(n), kind == Reduce::kProd  ? 1.0
                                                           : kind == Reduce::kMax ? -INFINITY
                                                           : kind == Reduce::kMin ? INFINITY
                                                                                  : 0.0);
      std::int64_t per_output = 1;
      for (std::int64_t d = 0; d < rank; ++d)
        if (reduced[d]) per_output *= x.shape[d];
      for_each_index(x.shape, [&](std::int64_t i, const std::vector<std::int64_t>& idx) {
        std::int64_t o = 0;
        for (std::int64_t d = 0; d < rank; ++d) o += idx[d] * out_strides[d];
        const double v = static_cast<double>(x.as<T>()[i]);
        double& a = acc[o];
        a = kind == Reduce::kMax    ? std::max(a, v)
            : kind == Reduce::kMin  ? std::min(a, v)
            : kind == Reduce::kProd ? a * v
                                    : a + v;
      });
      for (std::int64_t o = 0; o < n; ++o)
        out.as_mutable<T>()[o] = static_cast<T>(
            kind == Reduce::kMean ? acc[o] / static_cast<double>(per_output) : acc[o]);
    });
    return one(std::move(out));
  };
}

Kernel arg_extreme(bool is_max) {
  return [is_max](const ir::Node& node, const OpInputs& in) {
    const Tensor& x = in.at(0);
    check_data(x, "data");
    const std::int64_t rank = static_cast<std::int64_t>(x.shape.size());
    const std::int64_t axis = normalize_axis(node.get_int("axis", 0), rank, "axis");
    const bool keep = node.get_int("keepdims", 1) != 0,
               last = node.get_int("select_last_index", 0) != 0;
    std::int64_t outer = 1, inner = 1;
    for (std::int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
    for (std::int64_t d = axis + 1; d < rank; ++d) inner *= x.shape[d];
    ir::Shape shape = x.shape;
    if (keep)
      shape[axis] = 1;
    else
      shape.erase(shape.begin() + axis);
    std::vector<std::int64_t> result(static_cast<std::size_t>(outer * inner));
    dispatch_numeric(x.dtype, [&](auto tag) {
      using T = decltype(tag);
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t i = 0; i < inner; ++i) {
          std::int64_t best = 0;
          for (std::int64_t k = 1; k < x.shape[axis]; ++k) {
            const T v = x.as<T>()[(o * x.shape[axis] + k) * inner + i],
                    b = x.as<T>()[(o * x.shape[axis] + best) * inner + i];
            const bool better = is_max ? (last ? v >= b : v > b) : (last ? v <= b : v < b);
            if (better) best = k;
          }
          result[o * inner + i] = best;
        }
    });
    return one(ir::make_tensor<std::int64_t>(shape, result));
  };
}

// Hardmax (opset 13: along one axis, default -1): 1 at the first largest element, 0 elsewhere.
Outputs hardmax(const ir::Node& node, const OpInputs& in) {
  const Tensor& x = in.at(0);
  const float* xp = float_data(x, "input");
  const std::int64_t rank = static_cast<std::int64_t>(x.shape.size());
  if (in.opset < 13) fail("Hardmax below opset 13 reaches the executor only after the upgrade");
  const std::int64_t axis = normalize_axis(node.get_int("axis", -1), rank, "axis");
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (std::int64_t d = axis + 1; d < rank; ++d) inner *= x.shape[d];
  const std::int64_t len = x.shape[axis];
  Tensor out = ir::make_tensor(DType::kFloat32, x.shape);
  float* y = out.as_mutable<float>();
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      std::int64_t best = 0;
      for (std::int64_t k = 1; k < len; ++k)
        if (xp[(o * len + k) * inner + i] > xp[(o * len + best) * inner + i]) best = k;
      y[(o * len + best) * inner + i] = 1.f;
    }
  return one(std::move(out));
}

// TopK (opset 10+: K as an input): the K largest (or smallest) values along `axis` and their
// indices, in order; equal values keep the lower index first (as onnxruntime does).
Outputs top_k(const ir::Node& node, const OpInputs& in) {
  const Tensor& x = in.at(0);
  const float* xp = float_data(x, "X");
  const std::int64_t rank = static_cast<std::int64_t>(x.shape.size());
  const std::int64_t axis = normalize_axis(node.get_int("axis", -1), rank, "axis");
  const auto kv = ir::to_int64_vector(in.at(1));
  const std::int64_t len = x.shape[axis];
  if (kv.size() != 1 || kv[0] < 0 || kv[0] > len)
    fail("K must be one value in [0, {}] (the length of axis {})", len, axis);
  const std::int64_t k = kv[0];
  const bool largest = node.get_int("largest", 1) != 0;
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < axis; ++d) outer *= x.shape[d];
  for (std::int64_t d = axis + 1; d < rank; ++d) inner *= x.shape[d];
  ir::Shape shape = x.shape;
  shape[axis] = k;
  Tensor values = ir::make_tensor(DType::kFloat32, shape);
  std::vector<std::int64_t> indices(static_cast<std::size_t>(ir::element_count(shape)));
  std::vector<std::int64_t> order(static_cast<std::size_t>(len));
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      auto at = [&](std::int64_t j) { return xp[(o * len + j) * inner + i]; };
      std::iota(order.begin(), order.end(), std::int64_t{0});
      std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
        return largest ? at(a) > at(b) : at(a) < at(b);
      });
      for (std::int64_t j = 0; j < k; ++j) {
        const std::int64_t to = (o * k + j) * inner + i;
        values.as_mutable<float>()[to] = at(order[static_cast<std::size_t>(j)]);
        indices[static_cast<std::size_t>(to)] = order[static_cast<std::size_t>(j)];
      }
    }
  return {std::move(values), ir::make_tensor<std::int64_t>(shape, indices)};
}

// ---- element-wise math -----------------------------------------------------------------------

template <typename Fn>
Kernel float_math(Fn fn) {
  return [fn](const ir::Node& node, const OpInputs& in) {
    const Tensor& x = in.at(0);
    const float* p = float_data(x, "input");
    Tensor out = ir::make_tensor(DType::kFloat32, x.shape);
    for (std::int64_t i = 0; i < ir::element_count(x.shape); ++i)
      out.as_mutable<float>()[i] = fn(node, p[i]);
    return one(std::move(out));
  };
}

template <typename Fn>
Kernel signed_math(Fn fn) {  // Neg, Abs: any signed numeric type
  return [fn](const ir::Node&, const OpInputs& in) {
    const Tensor& x = in.at(0);
    check_data(x, "input");
    Tensor out = ir::make_tensor(x.dtype, x.shape);
    dispatch_numeric(x.dtype, [&](auto tag) {
      using T = decltype(tag);
      for (std::int64_t i = 0; i < ir::element_count(x.shape); ++i)
        out.as_mutable<T>()[i] = static_cast<T>(fn(x.as<T>()[i]));
    });
    return one(std::move(out));
  };
}

Outputs pow_op(const ir::Node&, const OpInputs& in) {
  const Tensor &a = in.at(0), &b = in.at(1);
  check_data(a, "X");
  check_data(b, "Y");
  const auto exponent = ir::to_float_vector(b);
  const ir::Shape shape = broadcast_shapes(a.shape, b.shape);
  Tensor out = ir::make_tensor(a.dtype, shape);  // the result has the base's type
  dispatch_numeric(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    for_each_broadcast(
        shape, a.shape, b.shape, [&](std::int64_t i, std::int64_t ia, std::int64_t ib) {
          out.as_mutable<T>()[i] = static_cast<T>(
              std::pow(static_cast<double>(a.as<T>()[ia]), static_cast<double>(exponent[ib])));
        });
  });
  return one(std::move(out));
}

Outputs prelu(const ir::Node&, const OpInputs& in) {
  const Tensor &x = in.at(0), &slope = in.at(1);
  const float *px = float_data(x, "X"), *ps = float_data(slope, "slope");
  const ir::Shape shape = broadcast_shapes(x.shape, slope.shape);
  if (shape != x.shape)
    fail("slope {} must broadcast to X {}", ir::shape_string(slope.shape),
         ir::shape_string(x.shape));
  Tensor out = ir::make_tensor(DType::kFloat32, shape);
  for_each_broadcast(shape, x.shape, slope.shape,
                     [&](std::int64_t i, std::int64_t ix, std::int64_t is) {
                       out.as_mutable<float>()[i] = px[ix] < 0 ? px[ix] * ps[is] : px[ix];
                     });
  return one(std::move(out));
}

}  // namespace

void add_extra_kernels(KernelTable& t) {
  auto onnx = [&](const char* op, Kernel k) { t[{"", op}] = std::move(k); };
  onnx("NonMaxSuppression", non_max_suppression);
  onnx("Split", split);
  onnx("Pad", pad);
  onnx("Expand", expand);
  onnx("Tile", tile);
  onnx("Where", where);
  onnx("Equal", compare([](auto a, auto b) { return a == b; }));
  onnx("Less", compare([](auto a, auto b) { return a < b; }));
  onnx("LessOrEqual", compare([](auto a, auto b) { return a <= b; }));
  onnx("Greater", compare([](auto a, auto b) { return a > b; }));
  onnx("GreaterOrEqual", compare([](auto a, auto b) { return a >= b; }));
  onnx("Max", variadic(Fold::kMax));
  onnx("Min", variadic(Fold::kMin));
  onnx("Sum", variadic(Fold::kSum));
  onnx("Mean", variadic(Fold::kMean));
  onnx("ReduceSum", reduce(Reduce::kSum, true));
  onnx("ReduceMean", reduce(Reduce::kMean, false));
  onnx("ReduceMax", reduce(Reduce::kMax, false));
  onnx("ReduceMin", reduce(Reduce::kMin, false));
  onnx("ReduceProd", reduce(Reduce::kProd, false));
  onnx("ArgMax", arg_extreme(true));
  onnx("Hardmax", hardmax);
  onnx("TopK", top_k);
  onnx("ArgMin", arg_extreme(false));
  onnx("Pow", pow_op);
  onnx("PRelu", prelu);
  onnx("Neg", signed_math([](auto v) { return -v; }));
  onnx("Abs", signed_math([](auto v) { return v < 0 ? -v : v; }));
  onnx("Exp", float_math([](const ir::Node&, float v) { return std::exp(v); }));
  onnx("Log", float_math([](const ir::Node&, float v) { return std::log(v); }));
  onnx("Sqrt", float_math([](const ir::Node&, float v) { return std::sqrt(v); }));
  onnx("Reciprocal", float_math([](const ir::Node&, float v) { return 1.f / v; }));
  onnx("Floor", float_math([](const ir::Node&, float v) { return std::floor(v); }));
  onnx("Ceil", float_math([](const ir::Node&, float v) { return std::ceil(v); }));
  onnx("Erf", float_math([](const ir::Node&, float v) { return std::erf(v); }));
  onnx("Softplus", float_math([](const ir::Node&, float v) { return std::log1p(std::exp(v)); }));
  onnx("Elu", float_math([](const ir::Node& n, float v) {
         return v < 0 ? n.get_float("alpha", 1.f) * (std::exp(v) - 1) : v;
       }));
  onnx("HardSigmoid", float_math([](const ir::Node& n, float v) {
         return std::clamp(n.get_float("alpha", 0.2f) * v + n.get_float("beta", 0.5f), 0.f, 1.f);
       }));
  onnx("HardSwish", float_math([](const ir::Node&, float v) {
         return v * std::clamp(v / 6.f + 0.5f, 0.f, 1.f);
       }));
}

}  // namespace npukit::ref
