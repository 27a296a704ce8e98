#include "onnx/contrib_schemas.h"

#include <onnx/defs/shape_inference.h>

#include <algorithm>

#include "common/error.h"
#include "ir/graph.h"
#include "ref/conv_transpose.h"

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace npukit::onnxio {

namespace {

using ::onnx::InferenceContext;
using ::onnx::OpSchema;
using ::onnx::TensorProto;
using ::onnx::TensorShapeProto;
using ::onnx::TypeProto;
using Dim = TensorShapeProto::Dimension;

constexpr const char* kMsDomain = "com.microsoft";

bool input_present(InferenceContext& ctx, std::size_t i) {
  return i < ctx.getNumInputs() && ctx.getInputType(i) != nullptr;
}

int elem_type(InferenceContext& ctx, std::size_t i) {
  if (!input_present(ctx, i)) return 0;
  const TypeProto* t = ctx.getInputType(i);
  return t->has_tensor_type() ? t->tensor_type().elem_type() : 0;
}

std::optional<std::vector<Dim>> shape_of(InferenceContext& ctx, std::size_t i) {
  if (!input_present(ctx, i)) return std::nullopt;
  const TypeProto* t = ctx.getInputType(i);
  if (!t->has_tensor_type() || !t->tensor_type().has_shape()) return std::nullopt;
  const auto& s = t->tensor_type().shape();
  return std::vector<Dim>(s.dim().begin(), s.dim().end());
}

Dim known(std::int64_t v) {
  Dim d;
  d.set_dim_value(v);
  return d;
}

void set_output(InferenceContext& ctx, int elem, const std::optional<std::vector<Dim>>& dims) {
  TypeProto* out = ctx.getOutputType(0);
  if (elem != 0) out->mutable_tensor_type()->set_elem_type(elem);
  if (!dims) return;
  auto* shape = out->mutable_tensor_type()->mutable_shape();
  shape->clear_dim();
  for (const auto& d : *dims) *shape->add_dim() = d;
}

std::int64_t int_attr(InferenceContext& ctx, const char* name, std::int64_t fallback) {
  const auto* a = ctx.getAttribute(name);
  return a && a->has_i() ? a->i() : fallback;
}

std::vector<std::int64_t> ints_attr(InferenceContext& ctx, const char* name) {
  const auto* a = ctx.getAttribute(name);
  if (!a) return {};
  return std::vector<std::int64_t>(a->ints().begin(), a->ints().end());
}

// NumPy broadcasting of two shapes.
std::optional<std::vector<Dim>> broadcast(const std::optional<std::vector<Dim>>& a,
                                          const std::optional<std::vector<Dim>>& b) {
  if (!a || !b) return std::nullopt;
  std::size_t rank = std::max(a->size(), b->size());
  std::vector<Dim> out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const Dim* da = i < rank - a->size() ? nullptr : &(*a)[i - (rank - a->size())];
    const Dim* db = i < rank - b->size() ? nullptr : &(*b)[i - (rank - b->size())];
    auto value = [](const Dim* d) { return d && d->has_dim_value() ? d->dim_value() : -1; };
    std::int64_t va = da ? value(da) : 1;
    std::int64_t vb = db ? value(db) : 1;
    if (va == 1)
      out[i] = db ? *db : known(1);
    else if (vb == 1)
      out[i] = *da;
    else if (va > 0 && vb > 0 && va != vb) {
      fail_shape_inference("cannot broadcast dimension ", va, " with ", vb);
    } else if (va > 0)
      out[i] = known(va);
    else if (vb > 0)
      out[i] = known(vb);
  }
  return out;
}

void infer_same_as_first(InferenceContext& ctx) {
  set_output(ctx, elem_type(ctx, 0), shape_of(ctx, 0));
}

void infer_binary(InferenceContext& ctx) {  // A, A_s, A_zp, B, B_s, B_zp, C_s, C_zp
  set_output(ctx, elem_type(ctx, 0), broadcast(shape_of(ctx, 0), shape_of(ctx, 3)));
}

void infer_concat(InferenceContext& ctx) {  // Y_s, Y_zp, (X_i, s_i, zp_i)...
  if (ctx.getNumInputs() < 5) {
    fail_shape_inference("QLinearConcat needs at least one input triple");
  }
  std::optional<std::vector<Dim>> out = shape_of(ctx, 2);
  std::int64_t axis = int_attr(ctx, "axis", 1);
  std::int64_t total = 0;
  for (std::size_t i = 2; i < ctx.getNumInputs(); i += 3) {
    auto s = shape_of(ctx, i);
    if (!s || !out || s->size() != out->size()) return set_output(ctx, elem_type(ctx, 2), {});
    std::int64_t rank = static_cast<std::int64_t>(s->size());
    std::int64_t ax = axis < 0 ? axis + rank : axis;
    if (ax < 0 || ax >= rank) {
      fail_shape_inference("QLinearConcat axis ", axis, " out of range");
    }
    const Dim& d = (*s)[ax];
    total = (total >= 0 && d.has_dim_value()) ? total + d.dim_value() : -1;
    if (i + 3 >= ctx.getNumInputs()) {
      (*out)[ax] = total >= 0 ? known(total) : Dim();
    }
  }
  set_output(ctx, elem_type(ctx, 2), out);
}

void infer_global_pool(InferenceContext& ctx) {
  auto s = shape_of(ctx, 0);
  if (s && s->size() >= 3) {
    bool channels_last = int_attr(ctx, "channels_last", 0) != 0;
    for (std::size_t i = 0; i < s->size(); ++i) {
      bool spatial = channels_last ? (i >= 1 && i + 1 < s->size()) : i >= 2;
      if (spatial) (*s)[i] = known(1);
    }
  }
  set_output(ctx, elem_type(ctx, 0), s);
}

void infer_average_pool(InferenceContext& ctx) {
  auto s = shape_of(ctx, 0);
  auto kernel = ints_attr(ctx, "kernel_shape");
  if (!s || int_attr(ctx, "channels_last", 0) != 0 || s->size() != kernel.size() + 2)
    return set_output(ctx, elem_type(ctx, 0), {});
  std::size_t n = kernel.size();
  auto strides = ints_attr(ctx, "strides");
  auto pads = ints_attr(ctx, "pads");
  strides.resize(n, 1);
  pads.resize(2 * n, 0);
  const auto* pad_attr = ctx.getAttribute("auto_pad");
  std::string auto_pad = pad_attr && pad_attr->has_s() ? pad_attr->s() : "NOTSET";
  bool ceil_mode = int_attr(ctx, "ceil_mode", 0) != 0;
  for (std::size_t i = 0; i < n; ++i) {
    Dim& d = (*s)[2 + i];
    if (!d.has_dim_value()) continue;
    std::int64_t in = d.dim_value();
    std::int64_t st = strides[i] > 0 ? strides[i] : 1;
    std::int64_t out;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")
      out = (in + st - 1) / st;
    else if (auto_pad == "VALID")
      out = (in - kernel[i] + st) / st;
    else {
      std::int64_t span = in + pads[i] + pads[i + n] - kernel[i];
      out = (ceil_mode ? (span + st - 1) / st : span / st) + 1;
    }
    if (out < 1) {
      fail_shape_inference("QLinearAveragePool kernel ", kernel[i], " is larger than input ", in);
    }
    d = known(out);
  }
  set_output(ctx, elem_type(ctx, 0), s);
}

void infer_qgemm(InferenceContext& ctx) {  // A, a_s, a_zp, B, b_s, b_zp, C?, y_s?, y_zp?
  int out_type = TensorProto::FLOAT;
  if (input_present(ctx, 8))
    out_type = elem_type(ctx, 8);
  else if (input_present(ctx, 7))
    out_type = elem_type(ctx, 0);
  auto a = shape_of(ctx, 0);
  auto b = shape_of(ctx, 3);
  std::optional<std::vector<Dim>> out;
  if (a && b && a->size() == 2 && b->size() == 2) {
    bool trans_a = int_attr(ctx, "transA", 0) != 0;
    bool trans_b = int_attr(ctx, "transB", 0) != 0;
    out = std::vector<Dim>{(*a)[trans_a ? 1 : 0], (*b)[trans_b ? 0 : 1]};
  }
  set_output(ctx, out_type, out);
}

void infer_dequantize(InferenceContext& ctx) {
  set_output(ctx, TensorProto::FLOAT, shape_of(ctx, 0));
}

void infer_quantize(InferenceContext& ctx) {
  int out_type = input_present(ctx, 2) ? elem_type(ctx, 2) : TensorProto::UINT8;
  set_output(ctx, out_type, shape_of(ctx, 0));
}

// QLinearConvTranspose: x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp, B. The output shape comes from
// ref::conv_transpose_geometry, the same rules the kernel uses.
void infer_qlinear_conv_transpose(InferenceContext& ctx) {
  const int out_type = input_present(ctx, 7) ? elem_type(ctx, 7) : TensorProto::UINT8;
  auto x = shape_of(ctx, 0);
  auto w = shape_of(ctx, 3);
  auto all_known = [](const std::vector<Dim>& d) {
    return std::all_of(d.begin(), d.end(), [](const Dim& v) { return v.has_dim_value(); });
  };
  if (!x || !w || !all_known(*x) || !all_known(*w)) return set_output(ctx, out_type, std::nullopt);
  ir::Node node;
  node.op_type = "QLinearConvTranspose";
  for (const char* name : {"group"})
    if (const auto* a = ctx.getAttribute(name); a && a->has_i()) node.attributes[name] = a->i();
  for (const char* name :
       {"kernel_shape", "strides", "dilations", "pads", "output_padding", "output_shape"})
    if (ctx.getAttribute(name)) node.attributes[name] = ints_attr(ctx, name);
  if (const auto* a = ctx.getAttribute("auto_pad"); a && a->has_s())
    node.attributes["auto_pad"] = a->s();
  ir::Shape xs, ws;
  for (const auto& d : *x) xs.push_back(d.dim_value());
  for (const auto& d : *w) ws.push_back(d.dim_value());
  ir::Shape out;
  try {
    out = ref::conv_transpose_geometry(node, xs, ws).output_shape(xs[0]);
  } catch (const Error& e) {
    fail_shape_inference("QLinearConvTranspose: ", e.what());
  }
  std::vector<Dim> dims;
  dims.push_back((*x)[0]);
  for (std::size_t i = 1; i < out.size(); ++i) dims.push_back(known(out[i]));
  set_output(ctx, out_type, dims);
}

// libonnx 1.12's conv and pool shape inference sizes its per-axis vectors (dilations, strides)
// by the data input's rank, then walks the kernel's axes, taken from the weights' shape when
// kernel_shape is absent: a data input whose rank differs from the weights' (a fuzzed model's
// rank-2 image under a 4-D QLinearConv) reads past them and crashes. Checked here first, with the
// shapes the inference has reached, so the model is rejected with a message instead.
void check_window_ranks(InferenceContext& ctx, const std::string& op, int weights) {
  const auto data = shape_of(ctx, 0);
  if (!data) return;
  if (data->size() < 3)
    fail_shape_inference(op, ": the data input has rank ", data->size(),
                         "; it needs a batch, a channel and at least one spatial axis");
  if (weights < 0) return;
  const auto w = shape_of(ctx, static_cast<std::size_t>(weights));
  if (w && w->size() != data->size())
    fail_shape_inference(op, ": the data input has rank ", data->size(), " but the weights (input ",
                         weights, ") have rank ", w->size(),
                         "; both need one axis per spatial axis plus two");
}

class ContribRegistry final : public ::onnx::ISchemaRegistry {
 public:
  ContribRegistry() {
    add("QLinearAdd", infer_binary);
    add("QLinearMul", infer_binary);
    add("QLinearSigmoid", infer_same_as_first);
    add("QLinearLeakyRelu", infer_same_as_first);
    add("QLinearSoftmax", infer_same_as_first);
    add("QLinearConcat", infer_concat);
    add("QLinearGlobalAveragePool", infer_global_pool);
    add("QLinearAveragePool", infer_average_pool);
    add("QGemm", infer_qgemm);
    add("QLinearConvTranspose", infer_qlinear_conv_transpose);
    add("QuantizeLinear", infer_quantize);
    add("DequantizeLinear", infer_dequantize);
  }

  const OpSchema* GetSchema(const std::string& key, const int max_inclusive_version,
                            const std::string& domain) const override {
    if (domain == kMsDomain) {
      auto it = schemas_.find(key);
      return it == schemas_.end() ? nullptr : &it->second;
    }
    const OpSchema* schema = ::onnx::OpSchemaRegistry::Schema(key, max_inclusive_version, domain);
    const int weights = window_weights_input(key);
    if (!schema || weights == kNotWindowed || !(domain.empty() || domain == "ai.onnx"))
      return schema;
    // A copy whose inference checks the ranks before libonnx's own (check_window_ranks), made
    // once per schema version and kept for the registry's life.
    const std::lock_guard lock(guarded_mutex_);
    auto& copy = guarded_[schema];
    if (!copy) {
      copy = std::make_unique<OpSchema>(*schema);
      ::onnx::InferenceFunction original = schema->GetTypeAndShapeInferenceFunction();
      copy->TypeAndShapeInferenceFunction([original, key, weights](InferenceContext& ctx) {
        check_window_ranks(ctx, key, weights);
        if (original) original(ctx);
      });
    }
    return copy.get();
  }

 private:
  void add(const std::string& name, ::onnx::InferenceFunction fn) {
    OpSchema schema(name, __FILE__, __LINE__);
    schema.SetDomain(kMsDomain)
        .SinceVersion(1)
        .Input(0, "inputs", "", "T", OpSchema::Variadic, false, 1)
        .Output(0, "Y", "", "T2")
        .TypeConstraint("T", OpSchema::all_tensor_types(), "any tensor")
        .TypeConstraint("T2", OpSchema::all_tensor_types(), "any tensor")
        .AllowUncheckedAttributes()
        .TypeAndShapeInferenceFunction(std::move(fn));
    schema.Finalize();
    schemas_.emplace(name, std::move(schema));
  }

  std::map<std::string, OpSchema> schemas_;
  mutable std::mutex guarded_mutex_;
  mutable std::map<const OpSchema*, std::unique_ptr<OpSchema>> guarded_;
};

}  // namespace

int window_weights_input(std::string_view op) {
  static const std::map<std::string_view, int> kWeights = {
      {"Conv", 1},
      {"ConvInteger", 1},
      {"ConvTranspose", 1},
      {"DeformConv", 1},
      {"FusedConv", 1},
      {"NhwcConv", 1},
      {"QLinearConv", 3},
      {"QLinearConvTranspose", 3},
      {"MaxPool", kNoWeights},
      {"AveragePool", kNoWeights},
      {"LpPool", kNoWeights},
      {"MaxUnpool", kNoWeights},
      {"NhwcMaxPool", kNoWeights},
      {"QLinearAveragePool", kNoWeights},
  };
  const auto it = kWeights.find(op);
  return it == kWeights.end() ? kNotWindowed : it->second;
}

const ::onnx::ISchemaRegistry* schema_registry_with_contrib() {
  static const ContribRegistry registry;
  return &registry;
}

}  // namespace npukit::onnxio
