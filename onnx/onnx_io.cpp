#include "onnx/onnx_io.h"

#include "common/error.h"
#include "common/file_io.h"
#include "ir/tensor_util.h"
#include "onnx/contrib_schemas.h"
#include "onnx/proto_util.h"

#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace npukit::onnxio {

static_assert(std::endian::native == std::endian::little,
              "ONNX raw_data and .npy are little-endian; npukit assumes a little-endian host");

namespace {

using ir::Shape;

using ::onnx::AttributeProto;
using ::onnx::ModelProto;
using ::onnx::NodeProto;
using ::onnx::TensorProto;
using ::onnx::TypeProto;
using ::onnx::ValueInfoProto;

bool supported_dtype(int t) {
  switch (static_cast<ir::DType>(t)) {
    case ir::DType::kFloat32:
    case ir::DType::kUInt8:
    case ir::DType::kInt8:
    case ir::DType::kInt16:
    case ir::DType::kInt32:
    case ir::DType::kInt64:
    case ir::DType::kBool:
    case ir::DType::kFloat16:
    case ir::DType::kFloat64:
      return true;
    default:
      return false;
  }
}

std::string onnx_dtype_name(int t) {
  if (::onnx::TensorProto_DataType_IsValid(t))
    return ::onnx::TensorProto_DataType_Name(static_cast<TensorProto::DataType>(t));
  return fmt::format("data type {}", t);
}

// Copies `count` values of a typed repeated field into little-endian elements of `size` bytes.
template <typename Field>
void narrow_into(const Field& field, std::size_t size, std::vector<std::uint8_t>& out) {
  out.resize(static_cast<std::size_t>(field.size()) * size);
  std::size_t i = 0;
  for (auto v : field) {
    if (size == 8) {
      std::int64_t x = static_cast<std::int64_t>(v);
      std::memcpy(&out[i * 8], &x, 8);
    } else if (size == 4) {
      std::int32_t x = static_cast<std::int32_t>(v);
      std::memcpy(&out[i * 4], &x, 4);
    } else if (size == 2) {
      std::uint16_t x = static_cast<std::uint16_t>(v);
      std::memcpy(&out[i * 2], &x, 2);
    } else {
      out[i] = static_cast<std::uint8_t>(v);
    }
    ++i;
  }
}

}  // namespace

ir::Tensor tensor_from_proto(const TensorProto& p, const std::string& what, bool with_data) {
  std::string label = p.name().empty() ? std::string("<unnamed tensor>") : "'" + p.name() + "'";
  if (p.data_location() == TensorProto::EXTERNAL || p.external_data_size() > 0)
    fail(
        "{}: tensor {} keeps its data in an external file; npukit reads self-contained models "
        "only (re-save with onnx.save_model(m, path, save_as_external_data=False))",
        what, label);
  if (p.has_segment()) fail("{}: tensor {} is segmented, which is not supported", what, label);
  if (!supported_dtype(p.data_type()))
    fail(
        "{}: tensor {} has unsupported data type {} (npukit handles float32, float16, float64, "
        "int8, uint8, int16, int32, int64, bool)",
        what, label, onnx_dtype_name(p.data_type()));
  ir::Tensor t;
  t.name = p.name();
  t.dtype = static_cast<ir::DType>(p.data_type());
  std::uint64_t count = 1;
  for (auto d : p.dims()) {
    if (d < 0) fail("{}: tensor {} has negative dimension {}", what, label, d);
    if (d != 0 && count > std::numeric_limits<std::uint32_t>::max() / static_cast<std::uint64_t>(d))
      fail("{}: tensor {} is too large", what, label);
    count *= static_cast<std::uint64_t>(d);
    t.shape.push_back(d);
  }
  std::size_t size = ir::dtype_size(t.dtype);
  if (p.has_raw_data()) {
    if (p.raw_data().size() != count * size)
      fail("{}: tensor {} has {} bytes of raw_data but shape and type need {}", what, label,
           p.raw_data().size(), count * size);
    // As bytes, so the copy is a memcpy rather than a char-by-char conversion.
    const auto* raw = reinterpret_cast<const std::uint8_t*>(p.raw_data().data());
    if (with_data) t.data.assign(raw, raw + p.raw_data().size());
  } else {
    std::size_t have = 0;
    switch (t.dtype) {
      case ir::DType::kFloat32:
        have = static_cast<std::size_t>(p.float_data_size());
        t.data.resize(have * 4);
        if (have) std::memcpy(t.data.data(), p.float_data().data(), have * 4);
        break;
      case ir::DType::kFloat64:
        have = static_cast<std::size_t>(p.double_data_size());
        t.data.resize(have * 8);
        if (have) std::memcpy(t.data.data(), p.double_data().data(), have * 8);
        break;
      case ir::DType::kInt64:
        have = static_cast<std::size_t>(p.int64_data_size());
        narrow_into(p.int64_data(), 8, t.data);
        break;
      default:  // int32_data carries int32, int16, int8, uint8, bool and float16 bits
        have = static_cast<std::size_t>(p.int32_data_size());
        narrow_into(p.int32_data(), size, t.data);
        break;
    }
    if (have != count)
      fail("{}: tensor {} holds {} values but its shape needs {}", what, label, have, count);
  }
  return t;
}

void tensor_to_proto(const ir::Tensor& t, TensorProto& p) {
  p.set_name(t.name);
  p.set_data_type(static_cast<int>(t.dtype));
  for (auto d : t.shape) p.add_dims(d);
  p.set_raw_data(t.data.data(), t.data.size());
}

namespace {}  // namespace

ir::Attribute attribute_from_proto(const AttributeProto& a, const std::string& where) {
  if (!a.ref_attr_name().empty())
    fail("{}: attribute '{}' refers to a function attribute, which is not supported", where,
         a.name());
  switch (a.type()) {
    case AttributeProto::FLOAT:
      return a.f();
    case AttributeProto::INT:
      return a.i();
    case AttributeProto::STRING:
      return a.s();
    case AttributeProto::FLOATS:
      return std::vector<float>(a.floats().begin(), a.floats().end());
    case AttributeProto::INTS:
      return std::vector<std::int64_t>(a.ints().begin(), a.ints().end());
    case AttributeProto::STRINGS:
      return std::vector<std::string>(a.strings().begin(), a.strings().end());
    case AttributeProto::TENSOR:
      return tensor_from_proto(a.t(), where + " attribute '" + a.name() + "'");
    case AttributeProto::GRAPH:
    case AttributeProto::GRAPHS:
      fail("{}: attribute '{}' is a subgraph; control flow (If, Loop, Scan) is not supported",
           where, a.name());
    default:
      fail("{}: attribute '{}' has unsupported type {}", where, a.name(),
           AttributeProto::AttributeType_Name(a.type()));
  }
}

namespace {

void attribute_to_proto(const std::string& name, const ir::Attribute& value, AttributeProto& a) {
  a.set_name(name);
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::int64_t>) {
          a.set_type(AttributeProto::INT);
          a.set_i(v);
        } else if constexpr (std::is_same_v<V, float>) {
          a.set_type(AttributeProto::FLOAT);
          a.set_f(v);
        } else if constexpr (std::is_same_v<V, std::string>) {
          a.set_type(AttributeProto::STRING);
          a.set_s(v);
        } else if constexpr (std::is_same_v<V, std::vector<std::int64_t>>) {
          a.set_type(AttributeProto::INTS);
          for (auto x : v) a.add_ints(x);
        } else if constexpr (std::is_same_v<V, std::vector<float>>) {
          a.set_type(AttributeProto::FLOATS);
          for (auto x : v) a.add_floats(x);
        } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
          a.set_type(AttributeProto::STRINGS);
          for (const auto& x : v) a.add_strings(x);
        } else {
          a.set_type(AttributeProto::TENSOR);
          tensor_to_proto(v, *a.mutable_t());
        }
      },
      value);
}

// Type and shape of a value_info; nullopt when the type is unknown or not a tensor.
std::optional<ir::Tensor> tensor_from_value_info(const ValueInfoProto& v) {
  if (!v.type().has_tensor_type()) return std::nullopt;
  const auto& tt = v.type().tensor_type();
  if (tt.elem_type() == 0 || !tt.has_shape()) return std::nullopt;
  ir::Tensor t;
  t.name = v.name();
  t.dtype = static_cast<ir::DType>(tt.elem_type());
  for (const auto& d : tt.shape().dim()) t.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
  return t;
}

void value_info_from_tensor(const ir::Tensor& t, ValueInfoProto& v) {
  v.set_name(t.name);
  auto* tt = v.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int>(t.dtype));
  auto* shape = tt->mutable_shape();
  for (auto d : t.shape) {
    auto* dim = shape->add_dim();
    if (d >= 0) dim->set_dim_value(d);
  }
}

}  // namespace

ir::Tensor constant_value(const NodeProto& n, const std::string& where) {
  if (n.attribute_size() != 1)
    fail("{}: Constant node needs exactly one value attribute, has {}", where, n.attribute_size());
  const AttributeProto& a = n.attribute(0);
  ir::Tensor t;
  auto put = [&](ir::DType dtype, Shape shape, const void* data, std::size_t bytes) {
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.data.assign(static_cast<const std::uint8_t*>(data),
                  static_cast<const std::uint8_t*>(data) + bytes);
  };
  if (a.name() == "value") {
    t = tensor_from_proto(a.t(), where);
  } else if (a.name() == "value_float") {
    float f = a.f();
    put(ir::DType::kFloat32, {}, &f, 4);
  } else if (a.name() == "value_int") {
    std::int64_t i = a.i();
    put(ir::DType::kInt64, {}, &i, 8);
  } else if (a.name() == "value_floats") {
    put(ir::DType::kFloat32, {a.floats_size()}, a.floats().data(), a.floats_size() * 4u);
  } else if (a.name() == "value_ints") {
    put(ir::DType::kInt64, {a.ints_size()}, a.ints().data(), a.ints_size() * 8u);
  } else {
    fail("{}: Constant attribute '{}' is not supported (sparse or string constants)", where,
         a.name());
  }
  t.name = n.output(0);
  return t;
}

namespace {

std::string node_label(const NodeProto& n, int index) {
  return fmt::format("node '{}' ({}, #{})", n.name().empty() ? "<unnamed>" : n.name(), n.op_type(),
                     index);
}

// Attributes whose bad values crash or overflow inside libonnx's shape inference (a zero stride
// divides by zero there) or later in the compiler, checked before anything else reads them.
// Limits name the attribute and the allowed range.
constexpr std::int64_t kMaxSpatialAttr = std::int64_t{1} << 24;

void validate_node_attributes(const NodeProto& n, int index,
                              const std::map<std::string, int>& ranks, const std::string& what) {
  const std::string where = fmt::format("{}: {}", what, node_label(n, index));
  for (const auto& a : n.attribute())
    if (a.type() == AttributeProto::GRAPH || a.type() == AttributeProto::GRAPHS || a.has_g() ||
        a.graphs_size() > 0)
      fail("{}: attribute '{}' is a subgraph; control flow (If, Loop, Scan) is not supported",
           where, a.name());
  auto ints = [&](const char* name) -> std::optional<std::vector<std::int64_t>> {
    for (const auto& a : n.attribute())
      if (a.name() == name) return std::vector<std::int64_t>(a.ints().begin(), a.ints().end());
    return std::nullopt;
  };
  auto int_attr = [&](const char* name) -> std::optional<std::int64_t> {
    for (const auto& a : n.attribute())
      if (a.name() == name) return a.i();
    return std::nullopt;
  };
  auto in_range = [&](const char* name, const std::vector<std::int64_t>& v, std::int64_t lo) {
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v[i] < lo || v[i] > kMaxSpatialAttr)
        fail("{}: attribute {}[{}] = {} is out of range (allowed {}..{})", where, name, i, v[i], lo,
             kMaxSpatialAttr);
  };
  if (n.op_type() == "DepthToSpace" || n.op_type() == "SpaceToDepth") {
    if (auto b = int_attr("blocksize"); b && (*b < 1 || *b > kMaxSpatialAttr))
      fail("{}: attribute blocksize = {} is out of range (allowed 1..{})", where, *b,
           kMaxSpatialAttr);
  }
  const int weights = window_weights_input(n.op_type());
  if (weights == kNotWindowed) return;
  if (auto g = int_attr("group"); g && (*g < 1 || *g > kMaxSpatialAttr))
    fail("{}: attribute group = {} is out of range (allowed 1..{})", where, *g, kMaxSpatialAttr);
  // The number of spatial axes: from kernel_shape, else from the rank of the data input or the
  // weights where the model states it.
  int spatial = -1;
  std::string spatial_from;
  if (auto k = ints("kernel_shape")) {
    in_range("kernel_shape", *k, 1);
    spatial = static_cast<int>(k->size());
    spatial_from = "kernel_shape";
  } else {
    for (int i : {0, weights}) {  // the data, then the weights (none for a pool)
      if (i < 0 || n.input_size() <= i) continue;
      auto it = ranks.find(n.input(i));
      if (it != ranks.end() && it->second >= 2) {
        spatial = it->second - 2;
        spatial_from = fmt::format("the rank of input '{}'", n.input(i));
        break;
      }
    }
  }
  auto check_count = [&](const char* name, const std::vector<std::int64_t>& v, int per_axis) {
    if (spatial >= 0 && static_cast<int>(v.size()) != per_axis * spatial)
      fail("{}: attribute {} has {} entries, expected {} ({} spatial axes, from {})", where, name,
           v.size(), per_axis * spatial, spatial, spatial_from);
    if (v.size() % static_cast<std::size_t>(per_axis) != 0 || v.empty())
      fail("{}: attribute {} has {} entries, expected {} per spatial axis", where, name, v.size(),
           per_axis);
    if (spatial < 0) {
      spatial = static_cast<int>(v.size()) / per_axis;
      spatial_from = std::string("attribute ") + name;
    }
  };
  if (auto s = ints("strides")) {
    in_range("strides", *s, 1);
    check_count("strides", *s, 1);
  }
  if (auto d = ints("dilations")) {
    in_range("dilations", *d, 1);
    check_count("dilations", *d, 1);
  }
  if (auto p = ints("pads")) {
    in_range("pads", *p, 0);
    check_count("pads", *p, 2);
  }
  for (const char* name : {"output_padding", "output_shape"})
    if (auto v = ints(name)) in_range(name, *v, 0);
}

// Ranks of every value whose shape the model states (inputs, value_info, initializers).
std::map<std::string, int> stated_ranks(const ::onnx::GraphProto& graph) {
  std::map<std::string, int> ranks;
  auto from_value = [&](const ValueInfoProto& v) {
    if (v.type().has_tensor_type() && v.type().tensor_type().has_shape())
      ranks[v.name()] = v.type().tensor_type().shape().dim_size();
  };
  for (const auto& v : graph.input()) from_value(v);
  for (const auto& v : graph.value_info()) from_value(v);
  for (const auto& t : graph.initializer()) ranks[t.name()] = t.dims_size();
  return ranks;
}

void validate_graph_structure(const ::onnx::GraphProto& graph, const std::string& what) {
  if (graph.output_size() == 0)
    fail("{}: the graph has no outputs (nothing to compute); add the result to graph.output", what);
  const auto ranks = stated_ranks(graph);
  for (int i = 0; i < graph.node_size(); ++i)
    validate_node_attributes(graph.node(i), i, ranks, what);
}

// Gives graph inputs the shapes the user stated.
void apply_input_shapes(ModelProto& model, const LoadOptions& options, const std::string& what) {
  auto* graph = model.mutable_graph();
  std::set<std::string> initializers;
  for (const auto& t : graph->initializer()) initializers.insert(t.name());
  std::vector<ValueInfoProto*> inputs;
  std::string names;
  for (auto& v : *graph->mutable_input())
    if (!initializers.count(v.name())) {
      inputs.push_back(&v);
      names += (names.empty() ? "'" : ", '") + v.name() + "'";
    }
  for (const auto& [name, shape] : options.input_shapes) {
    ValueInfoProto* input = nullptr;
    if (name.empty()) {
      if (inputs.size() != 1)
        fail("{}: --input-shape without a name needs a single-input model; this one has inputs {}",
             what, names);
      input = inputs[0];
    }
    for (auto* v : inputs)
      if (v->name() == name) input = v;
    if (!input)
      fail("{}: --input-shape names '{}', which is not a model input (inputs: {})", what, name,
           names);
    if (!input->type().has_tensor_type())
      fail("{}: input '{}' is not a tensor", what, input->name());
    auto* dims = input->mutable_type()->mutable_tensor_type()->mutable_shape();
    if (dims->dim_size() != 0 && dims->dim_size() != static_cast<int>(shape.size()))
      fail("{}: --input-shape gives input '{}' {} dimensions {}, the model has {}", what,
           input->name(), shape.size(), ir::shape_string(shape), dims->dim_size());
    if (dims->dim_size() == 0)
      for (std::size_t i = 0; i < shape.size(); ++i) dims->add_dim();
    for (int i = 0; i < dims->dim_size(); ++i) {
      auto* d = dims->mutable_dim(i);
      if (d->has_dim_value() && d->dim_value() != shape[i])
        fail(
            "{}: --input-shape gives input '{}' the shape {}, but the model fixes dimension {} "
            "at {}",
            what, input->name(), ir::shape_string(shape), i, d->dim_value());
      d->set_dim_value(shape[i]);
    }
  }
}

void infer_shapes(ModelProto& model, const std::string& what) {
  try {
    ::onnx::ShapeInferenceOptions options(/*check_type=*/true, /*strict=*/1, /*data_prop=*/true);
    ::onnx::shape_inference::InferShapes(model, schema_registry_with_contrib(), options);
  } catch (const std::exception& e) {
    fail("{}: ONNX shape inference failed: {}", what, e.what());
  }
}

ir::Graph convert(ModelProto& model, const std::string& what, const LoadOptions& options) {
  if (!model.has_graph()) fail("{}: model has no graph", what);
  std::int64_t opset = 0;
  bool has_onnx_domain = false;
  for (const auto& op : model.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") {
      has_onnx_domain = true;
      opset = op.version();
    }
  }
  if (!has_onnx_domain) fail("{}: model declares no ai.onnx opset import", what);
  if (opset < kMinOpset || opset > kMaxOpset)
    fail(
        "{}: ai.onnx opset {} is not supported (npukit reads opsets {} to {}, the newest its "
        "ONNX library knows); export the model at an opset in that range",
        what, opset, kMinOpset, kMaxOpset);

  ir::Graph g;
  g.name = model.graph().name();
  // Initializers first: external data would fail inside the checker with an obscure path error,
  // and a bad tensor is best reported by its name before any check that merely trips over it.
  for (const auto& init : model.graph().initializer()) tensor_from_proto(init, what, false);

  try {
    ::onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    fail("{}: rejected by the ONNX checker: {}", what, e.what());
  }
  validate_graph_structure(model.graph(), what);
  // Unnamed nodes are named by their position in the file, before upgrade and folding move them.
  {
    std::set<std::string> names;
    for (const auto& n : model.graph().node()) names.insert(n.name());
    for (int i = 0; i < model.graph().node_size(); ++i) {
      NodeProto* n = model.mutable_graph()->mutable_node(i);
      if (!n->name().empty()) continue;
      std::string name = fmt::format("{}_{}", n->op_type(), i);
      for (int k = 2; names.count(name); ++k) name = fmt::format("{}_{}_{}", n->op_type(), i, k);
      names.insert(name);
      n->set_name(name);
    }
  }
  apply_input_shapes(model, options, what);
  infer_shapes(model, what);
  if (upgrade_to_opset13(model, what) > 0) {
    model.mutable_graph()->clear_value_info();
    try {
      ::onnx::checker::check_model(model);
    } catch (const std::exception& e) {
      fail("{}: the model upgraded from opset {} to {} is rejected by the ONNX checker: {}", what,
           opset, kUpgradeOpset, e.what());
    }
    infer_shapes(model, what);
  }
  // Folding can make more shapes known, which can make more Shape nodes foldable.
  for (int round = 0; round < 16 && fold_constants(model, what) > 0; ++round) {
    model.mutable_graph()->clear_value_info();
    infer_shapes(model, what);
  }

  for (const auto& op : model.opset_import()) {
    std::string domain = op.domain() == "ai.onnx" ? "" : op.domain();
    g.opsets[domain] = op.version();
    if (domain.empty()) g.opset = op.version();
  }
  for (const auto& init : model.graph().initializer()) {
    ir::Tensor t = tensor_from_proto(init, what);
    g.tensors[t.name] = std::move(t);
  }

  const auto& graph = model.graph();
  auto add_value_info = [&](const ValueInfoProto& v) {
    if (g.tensors.count(v.name())) return;  // constants already carry type and shape
    if (auto t = tensor_from_value_info(v)) {
      if (!supported_dtype(static_cast<int>(t->dtype)))
        fail("{}: value '{}' has unsupported data type {}", what, v.name(),
             onnx_dtype_name(static_cast<int>(t->dtype)));
      g.tensors[v.name()] = std::move(*t);
    }
  };
  for (const auto& v : graph.input()) {
    add_value_info(v);
    if (!g.tensors.count(v.name()) || !g.tensors[v.name()].is_constant()) {
      if (!g.tensors.count(v.name()))
        fail("{}: graph input '{}' has no tensor type and shape", what, v.name());
      g.inputs.push_back(v.name());
    }
  }
  for (const auto& v : graph.value_info()) add_value_info(v);
  for (const auto& v : graph.output()) {
    add_value_info(v);
    g.outputs.push_back(v.name());
  }

  std::set<std::string> used_names;
  for (int i = 0; i < graph.node_size(); ++i) {
    const NodeProto& n = graph.node(i);
    std::string where = fmt::format("{}: {}", what, node_label(n, i));
    if (n.op_type() == "Constant" && (n.domain().empty() || n.domain() == "ai.onnx")) {
      ir::Tensor t = constant_value(n, where);
      g.tensors[t.name] = std::move(t);
      continue;
    }
    ir::Node node;
    node.name = n.name().empty() ? fmt::format("{}_{}", n.op_type(), i) : n.name();
    for (int k = 2; used_names.count(node.name); ++k)
      node.name = fmt::format("{}_{}", n.name().empty() ? n.op_type() : n.name(), k);
    used_names.insert(node.name);
    node.op_type = n.op_type();
    node.domain = n.domain() == "ai.onnx" ? "" : n.domain();
    node.inputs.assign(n.input().begin(), n.input().end());
    node.outputs.assign(n.output().begin(), n.output().end());
    for (const auto& a : n.attribute()) node.attributes[a.name()] = attribute_from_proto(a, where);
    g.nodes.push_back(std::move(node));
  }
  // A graph output that is a Constant node's value is now a constant; it stays an output.
  fuse_hard_activations(g);
  return g;
}

std::int64_t ir_version_for_opset(std::int64_t opset) {
  if (opset <= 11) return 6;
  if (opset <= 14) return 7;
  return 8;
}

}  // namespace

ir::Graph load_onnx_bytes(ByteSpan bytes, const std::string& what, const LoadOptions& options) {
  ModelProto model;
  if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    fail("{}: file is larger than protobuf's 2 GB limit", what);
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    fail("{}: not a valid ONNX model (protobuf parsing failed; truncated or not an .onnx file)",
         what);
  return convert(model, what, options);
}

ir::Graph load_onnx(const std::string& path, const LoadOptions& options) {
  ModelProto model;
  {
    // Parsed from the file descriptor, never held whole (InputFile, common/file_io.h); at most
    // the size checked, so a file that grows meanwhile is read as it was.
    const InputFile file(path, kMaxBinaryFileBytes);
    if (file.size() > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
      fail("{}: file is larger than protobuf's 2 GB limit", path);
    google::protobuf::io::FileInputStream raw(file.fd());
    google::protobuf::io::LimitingInputStream in(&raw, static_cast<std::int64_t>(file.size()));
    if (!model.ParseFromZeroCopyStream(&in)) {
      if (raw.GetErrno() != 0) fail("{}: read error: {}", path, std::strerror(raw.GetErrno()));
      fail("{}: not a valid ONNX model (protobuf parsing failed; truncated or not an .onnx file)",
           path);
    }
  }
  return convert(model, path, options);
}

void add_input_shape(LoadOptions& options, const std::string& spec) {
  auto eq = spec.rfind('=');
  std::string name = eq == std::string::npos ? std::string() : spec.substr(0, eq);
  std::string dims = eq == std::string::npos ? spec : spec.substr(eq + 1);
  ir::Shape shape;
  std::size_t pos = 0;
  while (pos <= dims.size()) {
    std::size_t comma = dims.find(',', pos);
    std::string item =
        dims.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    std::size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v <= 0)
      fail("--input-shape '{}': '{}' is not a positive dimension (expected NAME=1,3,320,320)", spec,
           item);
    shape.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (options.input_shapes.count(name))
    fail("--input-shape '{}': input '{}' is given twice", spec, name);
  options.input_shapes[name] = shape;
}

std::vector<std::string> symbolic_inputs(const ir::Graph& graph) {
  std::vector<std::string> out;
  for (const auto& name : graph.inputs) {
    const ir::Tensor* t = graph.find(name);
    if (!t) continue;
    for (std::size_t i = 1; i < t->shape.size(); ++i)
      if (t->shape[i] < 0) {
        out.push_back(name);
        break;
      }
  }
  return out;
}

ir::Shape shape_from_sample(const ir::Tensor& input, const ir::Shape& data,
                            const std::string& what) {
  ir::Shape shape;
  if (data.size() == input.shape.size()) {
    shape = data;
    if (!shape.empty()) shape[0] = input.shape[0] > 0 ? input.shape[0] : 1;
  } else if (data.size() == input.shape.size() + 1) {
    shape.assign(data.begin() + 1, data.end());
  } else {
    fail(
        "{}: data of shape {} does not fit input '{}' of shape {} (give one input or a stack of "
        "them along axis 0)",
        what, ir::shape_string(data), input.name, ir::shape_string(input.shape));
  }
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (input.shape[i] >= 0 && input.shape[i] != shape[i] &&
        !(i == 0 && data.size() == input.shape.size()))
      fail("{}: data of shape {} does not fit input '{}' of shape {}", what, ir::shape_string(data),
           input.name, ir::shape_string(input.shape));
  return shape;
}

Bytes save_onnx_bytes(const ir::Graph& g) {
  ModelProto model;
  model.set_producer_name("npukit");
  model.set_producer_version("0.1.0");
  std::int64_t opset = g.opset;
  auto it = g.opsets.find("");
  if (it != g.opsets.end()) opset = it->second;
  model.set_ir_version(ir_version_for_opset(opset));
  auto* onnx_op = model.add_opset_import();
  onnx_op->set_domain("");
  onnx_op->set_version(opset);
  std::set<std::string> domains;
  for (const auto& n : g.nodes)
    if (!n.domain.empty()) domains.insert(n.domain);
  for (const auto& [domain, version] : g.opsets) {
    if (domain.empty()) continue;
    auto* op = model.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
    domains.erase(domain);
  }
  for (const auto& domain : domains) {  // a pass added ops of a domain the source never imported
    auto* op = model.add_opset_import();
    op->set_domain(domain);
    op->set_version(1);
  }

  auto* graph = model.mutable_graph();
  graph->set_name(g.name.empty() ? "npukit" : g.name);
  std::set<std::string> referenced(g.outputs.begin(), g.outputs.end());
  for (const auto& n : g.nodes) {
    referenced.insert(n.inputs.begin(), n.inputs.end());
    auto* p = graph->add_node();
    p->set_name(n.name);
    p->set_op_type(n.op_type);
    if (!n.domain.empty()) p->set_domain(n.domain);
    for (const auto& i : n.inputs) p->add_input(i);
    for (const auto& o : n.outputs) p->add_output(o);
    for (const auto& [name, value] : n.attributes)
      attribute_to_proto(name, value, *p->add_attribute());
  }
  auto typed = [&](const std::string& name, const char* role) -> const ir::Tensor& {
    const ir::Tensor* t = g.find(name);
    if (!t || t->dtype == ir::DType::kUndefined)
      fail("cannot save graph '{}': {} '{}' has no known type", g.name, role, name);
    return *t;
  };
  std::set<std::string> io(g.inputs.begin(), g.inputs.end());
  io.insert(g.outputs.begin(), g.outputs.end());
  for (const auto& name : g.inputs)
    value_info_from_tensor(typed(name, "input"), *graph->add_input());
  for (const auto& name : g.outputs) {
    const ir::Tensor& t = typed(name, "output");
    if (t.is_constant()) {
      // ONNX needs a node to produce a constant output; emit it as a Constant.
      auto* c = graph->add_node();
      c->set_name(name + "_constant");
      c->set_op_type("Constant");
      c->add_output(name);
      auto* a = c->add_attribute();
      a->set_name("value");
      a->set_type(AttributeProto::TENSOR);
      tensor_to_proto(t, *a->mutable_t());
    }
    value_info_from_tensor(t, *graph->add_output());
  }
  for (const auto& [name, t] : g.tensors) {
    if (io.count(name)) continue;
    if (t.is_constant()) {
      if (referenced.count(name)) tensor_to_proto(t, *graph->add_initializer());
    } else if (t.dtype != ir::DType::kUndefined) {
      value_info_from_tensor(t, *graph->add_value_info());
    }
  }
  try {
    ::onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    fail("cannot save graph '{}': the result would be rejected by the ONNX checker: {}", g.name,
         e.what());
  }
  std::string out;
  if (!model.SerializeToString(&out)) fail("cannot save graph '{}': serialization failed", g.name);
  return Bytes(out.begin(), out.end());
}

void save_onnx(const ir::Graph& graph, const std::string& path) {
  Bytes bytes = save_onnx_bytes(graph);
  write_file_bytes(path, bytes);
}

ir::Tensor parse_tensor_pb(ByteSpan bytes, const std::string& what) {
  TensorProto p;
  if (!p.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    fail("{}: not a valid ONNX TensorProto file (protobuf parsing failed)", what);
  if (p.data_type() == 0) fail("{}: TensorProto has no data type (not a tensor .pb file?)", what);
  return tensor_from_proto(p, what);
}

ir::Tensor load_tensor_pb(const std::string& path) {
  Bytes bytes = read_file_bytes(path);
  return parse_tensor_pb(bytes, path);
}

Bytes encode_tensor_pb(const ir::Tensor& tensor) {
  TensorProto p;
  tensor_to_proto(tensor, p);
  std::string out = p.SerializeAsString();
  return Bytes(out.begin(), out.end());
}

namespace {
struct NpyDtype {
  const char* npy;
  ir::DType ir;
};
constexpr NpyDtype kNpyDtypes[] = {
    {"float32", ir::DType::kFloat32}, {"float64", ir::DType::kFloat64},
    {"int8", ir::DType::kInt8},       {"uint8", ir::DType::kUInt8},
    {"int16", ir::DType::kInt16},     {"int32", ir::DType::kInt32},
    {"int64", ir::DType::kInt64},     {"bool", ir::DType::kBool},
};
}  // namespace

ir::Tensor tensor_from_npy(NpyArray array, const std::string& name) {
  ir::Tensor t;
  t.name = name;
  for (const auto& d : kNpyDtypes)
    if (array.dtype == d.npy) t.dtype = d.ir;
  if (t.dtype == ir::DType::kUndefined) npy_dtype_size(array.dtype);  // throws naming the dtype
  t.shape = std::move(array.shape);
  t.data = std::move(array.data);
  return t;
}

NpyArray npy_from_tensor(const ir::Tensor& tensor) {
  for (const auto& d : kNpyDtypes)
    if (tensor.dtype == d.ir) return NpyArray{d.npy, tensor.shape, tensor.data};
  fail("tensor '{}' has type {}, which .npy output does not support", tensor.name,
       ir::dtype_name(tensor.dtype));
}

ir::Tensor load_tensor_file(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::string stem = std::filesystem::path(path).stem().string();
  if (ext == ".npy") return tensor_from_npy(read_npy(path), stem);  // read once, into the tensor
  Bytes bytes = read_file_bytes(path);
  if (ext == ".pb") return parse_tensor_pb(bytes, path);
  if (bytes.size() >= 6 && bytes[0] == 0x93 && bytes[1] == 'N')
    return tensor_from_npy(parse_npy(bytes, path), stem);
  return parse_tensor_pb(bytes, path);
}

void save_tensor_npy(const ir::Tensor& tensor, const std::string& path) {
  write_npy(path, npy_from_tensor(tensor));
}

}  // namespace npukit::onnxio
