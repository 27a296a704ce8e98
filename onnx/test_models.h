// Hand-made ONNX models for tests (onnx/onnx_io_test.cpp, tools/robust_cli_test.cpp): a minimal
// builder on the raw protobuf API, so tests can craft the broken models no exporter writes.
#pragma once

#include "common/bytes.h"

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace npukit::onnxio::testing {

struct ModelBuilder {
  ::onnx::ModelProto m;
  ModelBuilder(int opset = 13) {
    m.set_ir_version(7);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    m.mutable_graph()->set_name("t");
  }
  ::onnx::GraphProto& g() { return *m.mutable_graph(); }
  void value(::google::protobuf::RepeatedPtrField<::onnx::ValueInfoProto>* list,
             const std::string& name, int type, std::vector<std::int64_t> shape) {
    auto* v = list->Add();
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    auto* s = tt->mutable_shape();
    for (auto d : shape) s->add_dim()->set_dim_value(d);
  }
  void input(const std::string& n, std::vector<std::int64_t> s, int type = 1) {
    value(g().mutable_input(), n, type, s);
  }
  void output(const std::string& n, std::vector<std::int64_t> s, int type = 1) {
    value(g().mutable_output(), n, type, s);
  }
  ::onnx::NodeProto& node(const std::string& op, std::vector<std::string> in,
                          std::vector<std::string> out, const std::string& domain = "") {
    auto* n = g().add_node();
    n->set_op_type(op);
    n->set_domain(domain);
    for (auto& i : in) n->add_input(i);
    for (auto& o : out) n->add_output(o);
    return *n;
  }
  ::onnx::TensorProto& floats(const std::string& name, std::vector<std::int64_t> dims,
                              std::vector<float> values) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    for (auto v : values) t->add_float_data(v);
    return *t;
  }
  Bytes bytes() const {
    std::string s = m.SerializeAsString();
    return Bytes(s.begin(), s.end());
  }
};

// x [1,1,4,4] -> node 'c0' (a Conv with w [1,1,3,3] of ones, or the pool `op` with a 2x2 kernel)
// -> y of shape `out`, with window attribute `attr` set to `values` (none when attr is empty):
// the attribute values that crashed libonnx's shape inference or the compiler.
inline ModelBuilder window_model(const std::string& attr, std::vector<std::int64_t> values,
                                 const std::string& op = "Conv",
                                 std::vector<std::int64_t> out = {}) {
  ModelBuilder b;
  b.input("x", {1, 1, 4, 4});
  std::vector<float> w(9, 1.0f);
  auto& n = op == "Conv" ? b.node("Conv", {"x", "w"}, {"y"}) : b.node(op, {"x"}, {"y"});
  n.set_name("c0");
  if (op == "Conv") b.floats("w", {1, 1, 3, 3}, w);
  if (op != "Conv") {
    auto* k = n.add_attribute();
    k->set_name("kernel_shape");
    k->set_type(::onnx::AttributeProto::INTS);
    k->add_ints(2);
    k->add_ints(2);
  }
  if (!attr.empty()) {
    auto* a = n.add_attribute();
    a->set_name(attr);
    if (attr == "group") {
      a->set_type(::onnx::AttributeProto::INT);
      a->set_i(values.at(0));
    } else {
      a->set_type(::onnx::AttributeProto::INTS);
      for (auto v : values) a->add_ints(v);
    }
  }
  b.output("y", out);
  return b;
}

}  // namespace npukit::onnxio::testing
