// Upgrades models of ai.onnx opset 7..12 to opset 13 by rewriting the ops whose form or meaning
// changed; see proto_util.h. onnx's own version_converter is not used: it fails on real models
// (for example on Softmax whose input shape it cannot see).
#include "common/error.h"
#include "onnx/proto_util.h"

#include <fmt/core.h>

#include <limits>
#include <map>
#include <set>

namespace npukit::onnxio {

namespace {

using ::onnx::AttributeProto;
using ::onnx::ModelProto;
using ::onnx::NodeProto;
using ::onnx::TensorProto;

struct ValueType {
  int elem_type = 0;
  int rank = -1;  // -1: unknown
};

class Upgrader {
 public:
  Upgrader(ModelProto& model, const std::string& what)
      : model_(model), graph_(*model.mutable_graph()), what_(what) {
    auto note = [&](const ::onnx::ValueInfoProto& v) {
      names_.insert(v.name());
      if (!v.type().has_tensor_type()) return;
      const auto& tt = v.type().tensor_type();
      types_[v.name()] = {tt.elem_type(), tt.has_shape() ? tt.shape().dim_size() : -1};
    };
    for (const auto& v : graph_.input()) note(v);
    for (const auto& v : graph_.value_info()) note(v);
    for (const auto& v : graph_.output()) note(v);
    for (const auto& t : graph_.initializer()) {
      names_.insert(t.name());
      types_[t.name()] = {t.data_type(), t.dims_size()};
    }
    for (const auto& n : graph_.node()) {
      names_.insert(n.name());
      for (const auto& o : n.output()) names_.insert(o);
    }
  }

  int run(std::int64_t from) {
    from_ = from;
    std::vector<NodeProto> out;
    int rewritten = 0;
    for (int i = 0; i < graph_.node_size(); ++i) {
      NodeProto n = graph_.node(i);
      if (!n.domain().empty() && n.domain() != "ai.onnx") {
        out.push_back(std::move(n));
        continue;
      }
      where_ = fmt::format("{}: node '{}' ({}, #{})", what_,
                           n.name().empty() ? "<unnamed>" : n.name(), n.op_type(), i);
      std::size_t before = out.size();
      if (rewrite(n, out)) ++rewritten;
      if (out.size() == before) out.push_back(std::move(n));
    }
    graph_.clear_node();
    for (auto& n : out) *graph_.add_node() = std::move(n);
    for (auto& op : *model_.mutable_opset_import())
      if (op.domain().empty() || op.domain() == "ai.onnx") op.set_version(kUpgradeOpset);
    if (model_.ir_version() < 7) model_.set_ir_version(7);
    return rewritten;
  }

 private:
  std::string unique(const std::string& base) {
    std::string name = base;
    for (int k = 2; names_.count(name); ++k) name = fmt::format("{}_{}", base, k);
    names_.insert(name);
    return name;
  }
  std::string label(const NodeProto& n) const {
    return n.name().empty() ? (n.output_size() ? n.output(0) : n.op_type()) : n.name();
  }

  static AttributeProto* find(NodeProto& n, const std::string& name) {
    for (auto& a : *n.mutable_attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  static void erase(NodeProto& n, const std::string& name) {
    auto* attrs = n.mutable_attribute();
    for (int i = 0; i < attrs->size(); ++i)
      if (attrs->Get(i).name() == name) {
        attrs->DeleteSubrange(i, 1);
        return;
      }
  }
  static void set_int(NodeProto& n, const std::string& name, std::int64_t v) {
    AttributeProto* a = find(n, name);
    if (!a) {
      a = n.add_attribute();
      a->set_name(name);
    }
    a->set_type(AttributeProto::INT);
    a->set_i(v);
  }
  static void set_string(NodeProto& n, const std::string& name, const std::string& v) {
    AttributeProto* a = find(n, name);
    if (!a) {
      a = n.add_attribute();
      a->set_name(name);
    }
    a->set_type(AttributeProto::STRING);
    a->set_s(v);
  }

  // A new initializer; returns its name.
  std::string add_ints(const std::string& base, const std::vector<std::int64_t>& v) {
    auto* t = graph_.add_initializer();
    t->set_name(unique(base));
    t->set_data_type(TensorProto::INT64);
    t->add_dims(static_cast<std::int64_t>(v.size()));
    for (auto x : v) t->add_int64_data(x);
    return t->name();
  }
  std::string add_floats(const std::string& base, const std::vector<float>& v, bool scalar,
                         int elem_type = TensorProto::FLOAT) {
    auto* t = graph_.add_initializer();
    t->set_name(unique(base));
    if (!scalar) t->add_dims(static_cast<std::int64_t>(v.size()));
    if (elem_type == TensorProto::DOUBLE) {
      t->set_data_type(TensorProto::DOUBLE);
      for (auto x : v) t->add_double_data(x);
    } else {
      if (elem_type != TensorProto::FLOAT)
        fail("{}: input of type {} cannot be upgraded (float or double expected)", where_,
             TensorProto::DataType_Name(static_cast<TensorProto::DataType>(elem_type)));
      t->set_data_type(TensorProto::FLOAT);
      for (auto x : v) t->add_float_data(x);
    }
    return t->name();
  }
  std::vector<std::int64_t> ints(NodeProto& n, const std::string& name) {
    AttributeProto* a = find(n, name);
    return a ? std::vector<std::int64_t>(a->ints().begin(), a->ints().end())
             : std::vector<std::int64_t>{};
  }
  // A constant initializer's values as floats, if `name` is one.
  std::optional<std::vector<float>> constant_floats(const std::string& name) {
    for (const auto& t : graph_.initializer())
      if (t.name() == name) {
        ir::Tensor v = tensor_from_proto(t, what_);
        if (v.dtype != ir::DType::kFloat32) return std::nullopt;
        return std::vector<float>(v.as<float>(), v.as<float>() + v.data.size() / 4);
      }
    return std::nullopt;
  }
  ValueType type_of(const std::string& name) const {
    auto it = types_.find(name);
    return it == types_.end() ? ValueType{} : it->second;
  }

  // An attribute that became an input of the same name (axes, split): moved to a constant input
  // at position `pos` (earlier optional inputs padded with "").
  void attr_to_input(NodeProto& n, const std::string& attr, int pos) {
    if (!find(n, attr)) return;
    std::string c = add_ints(label(n) + "_" + attr, ints(n, attr));
    erase(n, attr);
    while (n.input_size() < pos) n.add_input("");
    if (n.input_size() == pos)
      n.add_input(c);
    else
      n.set_input(pos, c);
  }

  // Softmax, LogSoftmax and Hardmax before 13 flatten the input to 2D at `axis`; from 13 they
  // work along `axis` alone. Same thing when `axis` is the last one; otherwise Flatten, the op
  // along the last axis, Reshape back to the input's shape.
  void softmax(NodeProto& n, std::vector<NodeProto>& out) {
    std::int64_t axis = 1;
    if (auto* a = find(n, "axis")) axis = a->i();
    const int rank = type_of(n.input(0)).rank;
    if (rank >= 0 && (axis == rank - 1 || axis == -1)) {
      set_int(n, "axis", -1);
      return;
    }
    if (rank >= 0 && axis < 0) axis += rank;
    const std::string base = label(n);
    NodeProto flatten;
    flatten.set_name(unique(base + "_flatten"));
    flatten.set_op_type("Flatten");
    flatten.add_input(n.input(0));
    flatten.add_output(unique(base + "_2d"));
    set_int(flatten, "axis", axis);
    NodeProto shape;
    shape.set_name(unique(base + "_shape"));
    shape.set_op_type("Shape");
    shape.add_input(n.input(0));
    shape.add_output(unique(base + "_input_shape"));
    NodeProto reshape;
    reshape.set_name(unique(base + "_reshape"));
    reshape.set_op_type("Reshape");
    reshape.add_input(unique(base + "_2d_out"));
    reshape.add_input(shape.output(0));
    reshape.add_output(n.output(0));
    NodeProto op = n;
    op.set_input(0, flatten.output(0));
    op.set_output(0, reshape.input(0));
    set_int(op, "axis", -1);
    out.push_back(std::move(flatten));
    out.push_back(std::move(op));
    out.push_back(std::move(shape));
    out.push_back(std::move(reshape));
  }

  // Upsample (7: scales attribute, 9: scales input) and Resize-10 (X, scales) as Resize-13
  // (X, roi, scales) with the older coordinate rule: asymmetric, nearest rounding down when
  // enlarging (onnxruntime rounds up when shrinking, as Resize-10 did).
  void upsample(NodeProto& n) {
    std::string scales;
    if (n.op_type() == "Upsample" && from_ < 9) {
      AttributeProto* a = find(n, "scales");
      if (!a) fail("{}: Upsample has no 'scales' attribute", where_);
      scales = add_floats(label(n) + "_scales",
                          std::vector<float>(a->floats().begin(), a->floats().end()), false);
      erase(n, "scales");
    } else {
      scales = n.input(1);
    }
    std::string mode = "nearest";
    if (auto* a = find(n, "mode")) mode = a->s();
    bool shrinking = false;
    if (auto values = constant_floats(scales)) {
      bool any_up = false;
      for (float s : *values) {
        shrinking |= s < 1.f;
        any_up |= s > 1.f;
      }
      if (mode == "nearest" && shrinking && any_up)
        fail(
            "{}: nearest {} that enlarges some axes and shrinks others has no opset 13 "
            "equivalent; export the model at opset 11 or newer",
            where_, n.op_type());
    }
    n.set_op_type("Resize");
    std::string x = n.input(0);
    n.clear_input();
    n.add_input(x);
    n.add_input("");  // roi: optional from 13
    n.add_input(scales);
    set_string(n, "mode", mode == "bilinear" ? "linear" : mode);
    set_string(n, "coordinate_transformation_mode", "asymmetric");
    if (mode == "nearest") set_string(n, "nearest_mode", shrinking ? "ceil" : "floor");
  }

  bool rewrite(NodeProto& n, std::vector<NodeProto>& out) {
    const std::string& op = n.op_type();
    if (op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") {
      softmax(n, out);
      return true;
    }
    if (op == "Split" && find(n, "split")) {
      attr_to_input(n, "split", 1);
      return true;
    }
    if ((op == "Squeeze" || op == "Unsqueeze" || op == "ReduceSum") && find(n, "axes")) {
      attr_to_input(n, "axes", 1);
      return true;
    }
    if (op == "Clip" && from_ < 11) {
      const int et = type_of(n.input(0)).elem_type;
      const int elem = et == 0 ? static_cast<int>(TensorProto::FLOAT) : et;
      float lo = -std::numeric_limits<float>::max(), hi = std::numeric_limits<float>::max();
      if (auto* a = find(n, "min")) lo = a->f();
      if (auto* a = find(n, "max")) hi = a->f();
      erase(n, "min");
      erase(n, "max");
      n.add_input(add_floats(label(n) + "_min", {lo}, true, elem));
      n.add_input(add_floats(label(n) + "_max", {hi}, true, elem));
      return true;
    }
    if (op == "Pad" && from_ < 11) {
      const int et = type_of(n.input(0)).elem_type;
      const int elem = et == 0 ? static_cast<int>(TensorProto::FLOAT) : et;
      float value = 0;
      if (auto* a = find(n, "value")) value = a->f();
      n.add_input(add_ints(label(n) + "_pads", ints(n, "pads")));
      n.add_input(add_floats(label(n) + "_value", {value}, true, elem));
      erase(n, "pads");
      erase(n, "value");
      return true;
    }
    if (op == "Slice" && from_ < 10) {
      std::vector<std::int64_t> starts = ints(n, "starts"), ends = ints(n, "ends");
      n.add_input(add_ints(label(n) + "_starts", starts));
      n.add_input(add_ints(label(n) + "_ends", ends));
      if (find(n, "axes")) n.add_input(add_ints(label(n) + "_axes", ints(n, "axes")));
      erase(n, "starts");
      erase(n, "ends");
      erase(n, "axes");
      return true;
    }
    if (op == "TopK" && from_ < 10) {
      std::int64_t k = find(n, "k") ? find(n, "k")->i() : 1;
      n.add_input(add_ints(label(n) + "_k", {k}));
      erase(n, "k");
      return true;
    }
    if (op == "Upsample" || (op == "Resize" && from_ < 11)) {
      upsample(n);
      return true;
    }
    if (op == "BatchNormalization" && from_ < 9) {
      if (auto* a = find(n, "spatial")) {
        if (a->i() == 0 && type_of(n.input(0)).rank != 2)
          fail(
              "{}: BatchNormalization with spatial=0 (statistics per element, not per channel) "
              "is not supported; export it with spatial=1",
              where_);
        erase(n, "spatial");
        return true;
      }
      return false;
    }
    if (op == "Dropout" && from_ < 12) {
      if (!find(n, "ratio")) return false;
      erase(n, "ratio");  // an input from 12; inference ignores it
      return true;
    }
    return false;
  }

  ModelProto& model_;
  ::onnx::GraphProto& graph_;
  std::string what_;
  std::string where_;
  std::int64_t from_ = 0;
  std::set<std::string> names_;
  std::map<std::string, ValueType> types_;
};

}  // namespace

int upgrade_to_opset13(ModelProto& model, const std::string& what) {
  std::int64_t from = 0;
  for (const auto& op : model.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") from = op.version();
  if (from >= kUpgradeOpset) return 0;
  Upgrader u(model, what);
  return u.run(from);
}

}  // namespace npukit::onnxio
