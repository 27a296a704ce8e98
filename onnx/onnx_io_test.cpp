#include "onnx/onnx_io.h"

#include "common/error.h"
#include "common/scratch_dir.h"
#include "onnx/test_models.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>

namespace npukit::onnxio {
namespace {

using ::testing::HasSubstr;
using testing::ModelBuilder;
using testing::window_model;

const std::string kFixtures = std::string(NPUKIT_SOURCE_DIR) + "/fixtures";

bool same_attribute(const ir::Attribute& a, const ir::Attribute& b) {
  if (a.index() != b.index()) return false;
  if (auto* ta = std::get_if<ir::Tensor>(&a)) {
    const auto& tb = std::get<ir::Tensor>(b);
    return ta->dtype == tb.dtype && ta->shape == tb.shape && ta->data == tb.data;
  }
  return std::visit(
      [&](const auto& va) {
        using V = std::decay_t<decltype(va)>;
        if constexpr (std::is_same_v<V, ir::Tensor>)
          return false;
        else
          return va == std::get<V>(b);
      },
      a);
}

std::string load_error(const ModelBuilder& b) {
  try {
    load_onnx_bytes(b.bytes(), "model.onnx");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(OnnxImport, DigitsModelHasInferredIntermediateShapes) {
  ir::Graph g = load_onnx(kFixtures + "/digits/lenet_digits.onnx");
  EXPECT_EQ(g.opset, 13);
  ASSERT_EQ(g.inputs, std::vector<std::string>{"image"});
  ASSERT_EQ(g.outputs, std::vector<std::string>{"logits"});
  EXPECT_EQ(g.tensor("image").shape, (ir::Shape{1, 1, 8, 8}));
  EXPECT_EQ(g.tensor("logits").shape, (ir::Shape{1, 10}));
  ASSERT_EQ(g.nodes.size(), 10u);
  EXPECT_EQ(g.nodes[0].op_type, "Conv");
  EXPECT_EQ(g.nodes[0].get_ints("pads", {}), (std::vector<std::int64_t>{1, 1, 1, 1}));
  // Every intermediate has a type and shape from ONNX shape inference.
  const ir::Node& pool = g.nodes[2];
  ASSERT_EQ(pool.op_type, "MaxPool");
  EXPECT_EQ(g.tensor(pool.outputs[0]).shape, (ir::Shape{1, 8, 4, 4}));
  EXPECT_EQ(g.tensor(pool.outputs[0]).dtype, ir::DType::kFloat32);
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs) EXPECT_NE(g.find(o), nullptr) << o;
  const ir::Tensor& w = g.tensor("features.0.weight");
  EXPECT_EQ(w.shape, (ir::Shape{8, 1, 3, 3}));
  EXPECT_EQ(w.data.size(), 8u * 9 * 4);
  EXPECT_TRUE(w.is_constant());
}

TEST(OnnxImport, RoundTripThroughSaveKeepsEverything) {
  ir::Graph a = load_onnx(kFixtures + "/digits/lenet_digits.onnx");
  ir::Graph b = load_onnx_bytes(save_onnx_bytes(a), "saved");
  EXPECT_EQ(b.opset, a.opset);
  EXPECT_EQ(b.inputs, a.inputs);
  EXPECT_EQ(b.outputs, a.outputs);
  ASSERT_EQ(b.nodes.size(), a.nodes.size());
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    EXPECT_EQ(b.nodes[i].name, a.nodes[i].name);
    EXPECT_EQ(b.nodes[i].op_type, a.nodes[i].op_type);
    EXPECT_EQ(b.nodes[i].inputs, a.nodes[i].inputs);
    EXPECT_EQ(b.nodes[i].outputs, a.nodes[i].outputs);
    ASSERT_EQ(b.nodes[i].attributes.size(), a.nodes[i].attributes.size());
    for (const auto& [name, value] : a.nodes[i].attributes)
      EXPECT_TRUE(same_attribute(value, b.nodes[i].attributes.at(name))) << name;
  }
  ASSERT_EQ(b.tensors.size(), a.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    const ir::Tensor& u = b.tensor(name);
    EXPECT_EQ(u.dtype, t.dtype) << name;
    EXPECT_EQ(u.shape, t.shape) << name;
    EXPECT_EQ(u.data, t.data) << name;
  }
  // And through a file.
  const npukit::testing::ScratchDir scratch("onnx_io_test");
  const auto path = (scratch / "roundtrip.onnx").string();
  save_onnx(b, path);
  EXPECT_EQ(load_onnx(path).nodes.size(), a.nodes.size());
}

TEST(OnnxImport, EveryOnnxNodeTestCaseImports) {
  int count = 0;
  for (const auto& dir : std::filesystem::directory_iterator(kFixtures + "/onnx_node")) {
    if (!dir.is_directory()) continue;
    ir::Graph g = load_onnx((dir.path() / "model.onnx").string());
    EXPECT_FALSE(g.nodes.empty()) << dir.path();
    for (const auto& o : g.outputs) EXPECT_NE(g.tensor(o).dtype, ir::DType::kUndefined);
    ir::Graph again = load_onnx_bytes(save_onnx_bytes(g), "resaved");
    EXPECT_EQ(again.nodes.size(), g.nodes.size()) << dir.path();
    ++count;
  }
  EXPECT_GE(count, 15);
}

TEST(OnnxImport, EveryBundledTestModelImportsWithTheShapeTorchComputed) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kFixtures + "/models")) {
    if (entry.path().extension() != ".onnx") continue;
    ir::Graph g = load_onnx(entry.path().string());
    std::string stem = entry.path().stem().string();
    ir::Tensor expected = load_tensor_file(kFixtures + "/models/" + stem + ".output_0.npy");
    ASSERT_EQ(g.outputs.size(), 1u) << stem;
    EXPECT_EQ(g.tensor(g.outputs[0]).shape, expected.shape) << stem;
    ir::Tensor input = load_tensor_file(kFixtures + "/models/" + stem + ".input_0.npy");
    EXPECT_EQ(g.tensor(g.inputs[0]).shape, input.shape) << stem;
    ++count;
  }
  EXPECT_GE(count, 14);
}

TEST(OnnxImport, ReadsOnnxTestDataPbFiles) {
  std::string dir = kFixtures + "/onnx_node/test_conv_with_strides_padding/test_data_set_0/";
  ir::Tensor x = load_tensor_pb(dir + "input_0.pb");
  EXPECT_EQ(x.dtype, ir::DType::kFloat32);
  EXPECT_EQ(x.shape, (ir::Shape{1, 1, 7, 5}));
  // ONNX's test input is np.arange(35).
  for (int i = 0; i < 35; ++i) EXPECT_EQ(x.as<float>()[i], static_cast<float>(i));
  ir::Tensor y = load_tensor_file(dir + "output_0.pb");
  EXPECT_EQ(y.shape, (ir::Shape{1, 1, 4, 3}));
  EXPECT_EQ(y.as<float>()[0], 12.0f);  // sum of the 3x3 window at (0,0) with padding 1
  ir::Tensor q =
      load_tensor_pb(kFixtures + "/onnx_node/test_qlinearconv/test_data_set_0/input_0.pb");
  EXPECT_EQ(q.dtype, ir::DType::kUInt8);
}

TEST(OnnxImport, TypedFieldsAndRawDataGiveTheSameTensor) {
  ::onnx::TensorProto p;
  p.set_name("w");
  p.set_data_type(::onnx::TensorProto::INT8);
  p.add_dims(3);
  for (int v : {-128, 5, 127}) p.add_int32_data(v);
  std::string s = p.SerializeAsString();
  ir::Tensor a = parse_tensor_pb(Bytes(s.begin(), s.end()), "w.pb");
  EXPECT_EQ(a.data, (Bytes{0x80, 5, 0x7f}));
  ir::Tensor b = parse_tensor_pb(encode_tensor_pb(a), "w.pb");  // raw_data form
  EXPECT_EQ(b.data, a.data);
  EXPECT_EQ(b.dtype, ir::DType::kInt8);

  ::onnx::TensorProto i64;
  i64.set_data_type(::onnx::TensorProto::INT64);
  i64.add_dims(2);
  i64.add_int64_data(-1);
  i64.add_int64_data(1ll << 40);
  s = i64.SerializeAsString();
  ir::Tensor c = parse_tensor_pb(Bytes(s.begin(), s.end()), "c.pb");
  EXPECT_EQ(c.as<std::int64_t>()[0], -1);
  EXPECT_EQ(c.as<std::int64_t>()[1], 1ll << 40);
}

TEST(OnnxImport, ConstantNodesBecomeConstantsAndNamesAreMadeUnique) {
  ModelBuilder b;
  b.input("x", {1, 3});
  auto& c = b.node("Constant", {}, {"k"});
  auto* a = c.add_attribute();
  a->set_name("value_floats");
  a->set_type(::onnx::AttributeProto::FLOATS);
  for (float f : {1.f, 2.f, 3.f}) a->add_floats(f);
  b.node("Add", {"x", "k"}, {"y"});
  b.node("Relu", {"y"}, {"z"});
  b.node("Relu", {"z"}, {"w"}).set_name("same");
  b.node("Relu", {"w"}, {"v"}).set_name("same");
  b.output("v", {1, 3});
  ir::Graph g = load_onnx_bytes(b.bytes(), "m");
  ASSERT_EQ(g.nodes.size(), 4u);
  EXPECT_EQ(g.nodes[0].name, "Add_1");
  EXPECT_EQ(g.nodes[1].name, "Relu_2");
  EXPECT_EQ(g.nodes[2].name, "same");
  EXPECT_EQ(g.nodes[3].name, "same_2");
  EXPECT_TRUE(g.tensor("k").is_constant());
  EXPECT_EQ(g.tensor("k").as<float>()[2], 3.0f);
  EXPECT_EQ(g.tensor("y").shape, (ir::Shape{1, 3}));
}

TEST(OnnxImport, MicrosoftQuantizedOpsAreShapeInferred) {
  ModelBuilder b;
  auto* ms = b.m.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  b.input("a", {1, 4, 5, 6}, ::onnx::TensorProto::INT8);
  b.input("c", {1, 2, 5, 6}, ::onnx::TensorProto::INT8);
  b.floats("s", {}, {0.1f});
  auto* zp = b.g().add_initializer();
  zp->set_name("zp");
  zp->set_data_type(::onnx::TensorProto::INT8);
  zp->add_int32_data(0);
  b.node("QLinearAdd", {"a", "s", "zp", "a", "s", "zp", "s", "zp"}, {"sum"}, "com.microsoft");
  b.node("QLinearConcat", {"s", "zp", "sum", "s", "zp", "c", "s", "zp"}, {"cat"}, "com.microsoft")
      .add_attribute()
      ->CopyFrom([] {
        ::onnx::AttributeProto a;
        a.set_name("axis");
        a.set_type(::onnx::AttributeProto::INT);
        a.set_i(1);
        return a;
      }());
  b.node("QLinearGlobalAveragePool", {"cat", "s", "zp", "s", "zp"}, {"gap"}, "com.microsoft");
  b.node("DequantizeLinear", {"gap", "s", "zp"}, {"out"});
  b.output("out", {1, 6, 1, 1});
  ir::Graph g = load_onnx_bytes(b.bytes(), "m");
  EXPECT_EQ(g.tensor("sum").shape, (ir::Shape{1, 4, 5, 6}));
  EXPECT_EQ(g.tensor("sum").dtype, ir::DType::kInt8);
  EXPECT_EQ(g.tensor("cat").shape, (ir::Shape{1, 6, 5, 6}));
  EXPECT_EQ(g.tensor("gap").shape, (ir::Shape{1, 6, 1, 1}));
  EXPECT_EQ(g.nodes[0].domain, "com.microsoft");
  EXPECT_EQ(g.opsets.at("com.microsoft"), 1);
  ir::Graph again = load_onnx_bytes(save_onnx_bytes(g), "resaved");
  EXPECT_EQ(again.nodes[1].domain, "com.microsoft");
}

TEST(OnnxImport, OnnxruntimeStyleQuantizedModelsImportWithShapes) {
  ir::Graph g = load_onnx(kFixtures + "/qop/qop_ms_ops.onnx");
  EXPECT_EQ(g.tensor("cat").shape, (ir::Shape{1, 12, 4, 4}));
  EXPECT_EQ(g.tensor("ap").shape, (ir::Shape{1, 12, 2, 2}));
  EXPECT_EQ(g.tensor("g").shape, (ir::Shape{1, 10}));
  EXPECT_EQ(g.tensor("g").dtype, ir::DType::kInt8);
  ir::Graph m = load_onnx(kFixtures + "/qop/qop_matmul.onnx");
  EXPECT_EQ(m.tensor("output").dtype, ir::DType::kFloat32);  // QGemm without y_scale
}

TEST(OnnxImportErrors, GarbageAndTruncatedFilesNameTheFile) {
  Bytes junk = {0xff, 0xff, 0xff, 0xff, 0x0f};
  try {
    load_onnx_bytes(junk, "junk.onnx");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("junk.onnx"));
    EXPECT_THAT(e.what(), HasSubstr("not a valid ONNX model"));
  }
  Bytes model = read_file_bytes(kFixtures + "/digits/lenet_digits.onnx");
  // Truncation either breaks protobuf parsing or leaves a model the checker rejects: both name the
  // file and neither crashes.
  for (std::size_t cut : {model.size() / 2, model.size() - 3, std::size_t{10}}) {
    try {
      load_onnx_bytes(ByteSpan(model.data(), cut), "cut.onnx");
      ADD_FAILURE() << "no error at cut " << cut;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("cut.onnx"));
    }
  }
  EXPECT_THROW(load_onnx("/nonexistent/model.onnx"), Error);
}

TEST(OnnxImportErrors, UnsupportedOpsetIsRejectedWithAdvice) {
  ModelBuilder b(6);
  b.input("x", {1});
  b.node("Relu", {"x"}, {"y"});
  b.output("y", {1});
  std::string msg = load_error(b);
  EXPECT_THAT(msg, HasSubstr("opset 6"));
  EXPECT_THAT(msg, HasSubstr("opsets 7 to 17"));
}

TEST(OnnxImportErrors, CheckerFailuresNameTheProblem) {
  ModelBuilder b;
  b.input("x", {1});
  b.node("Relu", {"nowhere"}, {"y"});
  b.output("y", {1});
  std::string msg = load_error(b);
  EXPECT_THAT(msg, HasSubstr("model.onnx"));
  EXPECT_THAT(msg, HasSubstr("nowhere"));
}

TEST(OnnxImportErrors, ShapeInferenceFailuresNameTheProblem) {
  ModelBuilder b;
  b.input("x", {1, 3});
  b.input("y", {1, 4});
  b.node("Add", {"x", "y"}, {"z"});
  b.output("z", {1, 3});
  EXPECT_THAT(load_error(b), HasSubstr("shape inference"));
}

TEST(OnnxImportErrors, BadInitializersNameTheTensor) {
  {
    ModelBuilder b;
    b.input("x", {2});
    b.floats("w", {3}, {1, 2});  // 2 values for 3 elements
    b.node("Add", {"x", "w"}, {"y"});
    b.output("y", {2});
    std::string msg = load_error(b);
    EXPECT_THAT(msg, HasSubstr("'w'"));
  }
  {
    ModelBuilder b;
    b.input("x", {2});
    auto& w = b.floats("w", {2}, {});
    w.set_raw_data(std::string(7, '\0'));
    b.node("Add", {"x", "w"}, {"y"});
    b.output("y", {2});
    std::string msg = load_error(b);
    EXPECT_THAT(msg, HasSubstr("'w'"));
    EXPECT_THAT(msg, HasSubstr("7 bytes"));
  }
  {
    ModelBuilder b;
    b.input("x", {2});
    auto& w = b.floats("ext", {2}, {});
    w.set_data_location(::onnx::TensorProto::EXTERNAL);
    auto* kv = w.add_external_data();
    kv->set_key("location");
    kv->set_value("weights.bin");
    b.node("Add", {"x", "ext"}, {"y"});
    b.output("y", {2});
    std::string msg = load_error(b);
    EXPECT_THAT(msg, HasSubstr("'ext'"));
    EXPECT_THAT(msg, HasSubstr("external file"));
  }
  {
    ModelBuilder b;
    b.input("x", {2}, ::onnx::TensorProto::STRING);
    b.node("Identity", {"x"}, {"y"});
    b.output("y", {2}, ::onnx::TensorProto::STRING);
    std::string msg = load_error(b);
    EXPECT_THAT(msg, HasSubstr("'x'"));
    EXPECT_THAT(msg, HasSubstr("STRING"));
  }
}

TEST(OnnxImportErrors, SubgraphsAreRejectedNamingTheNode) {
  ModelBuilder b;
  b.input("c", {}, ::onnx::TensorProto::BOOL);
  auto& n = b.node("If", {"c"}, {"y"});
  n.set_name("branchy");
  for (const char* name : {"then_branch", "else_branch"}) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::GRAPH);
    auto* g = a->mutable_g();
    g->set_name(name);
    auto* k = g->add_node();
    k->set_op_type("Constant");
    k->add_output(std::string(name) + "_out");
    auto* v = k->add_attribute();
    v->set_name("value_float");
    v->set_type(::onnx::AttributeProto::FLOAT);
    v->set_f(1);
    auto* o = g->add_output();
    o->set_name(std::string(name) + "_out");
    o->mutable_type()->mutable_tensor_type()->set_elem_type(1);
    o->mutable_type()->mutable_tensor_type()->mutable_shape();
  }
  b.output("y", {});
  std::string msg = load_error(b);
  EXPECT_THAT(msg, HasSubstr("branchy"));
  EXPECT_THAT(msg, HasSubstr("subgraph"));
}

// Attribute values that crashed libonnx's shape inference (SIGFPE on a zero stride) or the
// compiler (a pool stride list with one entry) are rejected first, naming the attribute.
TEST(OnnxImportErrors, WindowAttributesAreValidatedBeforeShapeInference) {
  struct Case {
    std::string op, attr;
    std::vector<std::int64_t> values;
    std::string expect;
  };
  const Case cases[] = {
      {"Conv", "strides", {0, 0}, "strides[0] = 0 is out of range (allowed 1.."},
      {"Conv", "strides", {1, -3}, "strides[1] = -3"},
      {"Conv", "strides", {1}, "strides has 1 entries, expected 2"},
      {"Conv", "dilations", {0, 1}, "dilations[0] = 0"},
      {"Conv", "pads", {0, 0, -1, 0}, "pads[2] = -1"},
      {"Conv", "pads", {1, 1}, "pads has 2 entries, expected 4"},
      {"Conv", "kernel_shape", {0, 3}, "kernel_shape[0] = 0"},
      {"Conv", "group", {0}, "group = 0 is out of range"},
      {"Conv", "group", {-2}, "group = -2"},
      {"Conv", "strides", {std::int64_t{1} << 40, 1}, "out of range"},
      {"MaxPool", "strides", {2}, "strides has 1 entries, expected 2"},
      {"MaxPool", "strides", {0, 2}, "strides[0] = 0"},
      {"AveragePool", "pads", {0, 0, 0}, "pads has 3 entries, expected 4"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.op + " " + c.attr);
    const std::string msg = load_error(window_model(c.attr, c.values, c.op));
    EXPECT_THAT(msg, HasSubstr("model.onnx"));
    EXPECT_THAT(msg, HasSubstr("'c0'"));
    EXPECT_THAT(msg, HasSubstr(c.expect));
  }
  EXPECT_EQ(load_error(window_model("strides", {2, 2}, "Conv", {1, 1, 1, 1})), "(no error)");
  EXPECT_EQ(load_error(window_model("strides", {2, 2}, "MaxPool", {1, 1, 2, 2})), "(no error)");
}

// Without kernel_shape, and with a data input whose rank the model does not state, the number of
// spatial axes comes from the weights' rank: input 3 of a QLinearConv (inputs 1 and 2 are the
// data's scalar scale and zero point), input 1 of a Conv.
TEST(OnnxImportErrors, WindowAttributeCountsFollowTheWeightsInputOfEachOp) {
  for (const bool quantized : {false, true}) {
    SCOPED_TRACE(quantized ? "QLinearConv" : "Conv");
    ModelBuilder b;
    // The conv reads r, an Identity's output whose shape the model does not state.
    b.input("x", {1, 1, 4, 4}, quantized ? ::onnx::TensorProto::UINT8 : ::onnx::TensorProto::FLOAT);
    b.node("Identity", {"x"}, {"r"});
    auto scalar = [&](const std::string& name, int type) {
      auto* t = b.g().add_initializer();
      t->set_name(name);
      t->set_data_type(type);
      if (type == ::onnx::TensorProto::FLOAT)
        t->add_float_data(0.5f);
      else
        t->add_int32_data(0);
    };
    std::vector<std::string> inputs = {"r", "w"};
    if (quantized) {
      scalar("xs", ::onnx::TensorProto::FLOAT);
      scalar("xz", ::onnx::TensorProto::UINT8);
      scalar("ws", ::onnx::TensorProto::FLOAT);
      scalar("wz", ::onnx::TensorProto::INT8);
      scalar("ys", ::onnx::TensorProto::FLOAT);
      scalar("yz", ::onnx::TensorProto::UINT8);
      inputs = {"r", "xs", "xz", "w", "ws", "wz", "ys", "yz"};
      auto* w = b.g().add_initializer();
      w->set_name("w");
      w->set_data_type(::onnx::TensorProto::INT8);
      for (int d : {1, 1, 3, 3}) w->add_dims(d);
      for (int i = 0; i < 9; ++i) w->add_int32_data(1);
    } else {
      b.floats("w", {1, 1, 3, 3}, std::vector<float>(9, 1.0f));
    }
    auto& n = b.node(quantized ? "QLinearConv" : "Conv", inputs, {"y"});
    n.set_name("c0");
    auto* a = n.add_attribute();
    a->set_name("strides");
    a->set_type(::onnx::AttributeProto::INTS);
    a->add_ints(1);
    b.output("y", {}, quantized ? ::onnx::TensorProto::UINT8 : ::onnx::TensorProto::FLOAT);
    const std::string msg = load_error(b);
    EXPECT_THAT(msg, HasSubstr("strides has 1 entries, expected 2"));
    EXPECT_THAT(msg, HasSubstr("from the rank of input 'w'"));
  }
}

// A conv whose data input reaches it with a rank the weights do not have, known only once shape
// inference has walked the nodes before it (here a Relu of a rank-2 input; a fuzzed QLinearConv
// after a QuantizeLinear crashed libonnx's inference this way), and a pool on a rank-2 input:
// rejected with the ranks named, not a crash.
TEST(OnnxImportErrors, WindowOpsWithTheWrongInputRankAreRejected) {
  {
    ModelBuilder b;
    b.input("x", {1, 3});
    b.node("Relu", {"x"}, {"r"});
    b.node("Conv", {"r", "w"}, {"y"}).set_name("c0");
    b.floats("w", {6, 3, 3, 3}, std::vector<float>(6 * 3 * 3 * 3, 1.0f));
    b.output("y", {});
    const std::string msg = load_error(b);
    EXPECT_THAT(msg, HasSubstr("Conv: the data input has rank 2"));
  }
  {
    ModelBuilder b;
    b.input("x", {1, 3, 8});
    b.node("Relu", {"x"}, {"r"});
    b.node("Conv", {"r", "w"}, {"y"}).set_name("c0");
    b.floats("w", {6, 3, 3, 3}, std::vector<float>(6 * 3 * 3 * 3, 1.0f));
    b.output("y", {});
    EXPECT_THAT(load_error(b),
                HasSubstr("Conv: the data input has rank 3 but the weights (input 1) have rank 4"));
  }
  {
    ModelBuilder b;
    b.input("x", {4, 4});
    auto& n = b.node("MaxPool", {"x"}, {"y"});
    auto* k = n.add_attribute();
    k->set_name("kernel_shape");
    k->set_type(::onnx::AttributeProto::INTS);
    k->add_ints(2);
    b.output("y", {});
    EXPECT_THAT(load_error(b), HasSubstr("MaxPool: the data input has rank 2"));
  }
}

TEST(OnnxImportErrors, AGraphWithoutOutputsIsRejected) {
  ModelBuilder b;
  b.input("x", {1, 2});
  b.node("Relu", {"x"}, {"y"});
  EXPECT_THAT(load_error(b), HasSubstr("no outputs"));
}

TEST(OnnxExport, SaveRejectsWhatTheCheckerWould) {
  ir::Graph g;
  g.name = "bad";
  g.opsets[""] = 13;
  g.tensors["x"] = ir::Tensor{"x", ir::DType::kFloat32, {1}, {}};
  g.inputs = {"x"};
  g.outputs = {"y"};
  g.tensors["y"] = ir::Tensor{"y", ir::DType::kFloat32, {1}, {}};
  g.nodes.push_back(ir::Node{"n", "NoSuchOp", "", {"x"}, {"y"}, {}});
  try {
    save_onnx_bytes(g);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("NoSuchOp"));
  }
}

TEST(TensorFiles, NpyConversionRoundTrips) {
  ir::Tensor t{"x", ir::DType::kInt8, {2, 2}, {1, 2, 0xfe, 0x80}};
  const npukit::testing::ScratchDir scratch("onnx_io_test");
  const auto path = (scratch / "t.npy").string();
  save_tensor_npy(t, path);
  ir::Tensor u = load_tensor_file(path);
  EXPECT_EQ(u.dtype, ir::DType::kInt8);
  EXPECT_EQ(u.shape, t.shape);
  EXPECT_EQ(u.data, t.data);
  EXPECT_THROW(npy_from_tensor(ir::Tensor{"h", ir::DType::kFloat16, {1}, {0, 0}}), Error);
}

}  // namespace
}  // namespace npukit::onnxio
