// transpose_tall_images: a device part whose 3x3 convs have tall inputs (a v1.0.0 hang) runs
// transposed. The model's outputs through the whole path (host prefix, device model, host
// suffix) must equal the reference executor on the untransposed lowering bit for bit, and the
// device model must report no erratum.
#include "compiler/device_run.h"
#include "compiler/passes.h"
#include "compiler/test_graphs.h"

#include <gtest/gtest.h>

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;
using testing::int8_tensor;
using testing::random_int32;
using testing::random_int8;

// x [1, 3, 24, 12] (tall) -> conv 3x3 + relu -> pool 2x3 stride (2, 3) pads (0, 1, 0, 2)
// -> conv 3x3 stride 2 pads (1, 0, 0, 1) -> flatten -> FC 10. Every op has an asymmetry between
// height and width so a missed swap shows.
ir::Graph tall_cnn() {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 3, 24, 12});
  auto a = b.qconv("c1", "x", 0.05f, random_int8(8 * 3 * 9, 81), {8, 3, 3, 3}, 0.01f, 0.1f,
                   random_int32(8, 82, -500, 500), {1, 0, 2, 1});
  a = b.relu("r1", a);  // c1: 24 + 1 + 2 - 2 = 25 high, 12 + 0 + 1 - 2 = 11 wide
  b.value("p1_out", ir::DType::kInt8, {1, 8, 13, 5});
  ir::Node& p = b.node("MaxPool", "", {a}, {"p1_out"}, "p1");
  p.attributes["kernel_shape"] = std::vector<std::int64_t>{2, 3};
  p.attributes["strides"] = std::vector<std::int64_t>{2, 3};
  p.attributes["pads"] = std::vector<std::int64_t>{0, 1, 1, 2};  // (25+1-2)/2+1=13, (11+3-3)/3+1=4
  b.g.tensor("p1_out").shape = {1, 8, 13, 4};
  a = b.qconv("c2", "p1_out", 0.1f, random_int8(6 * 8 * 9, 83), {6, 8, 3, 3}, 0.01f, 0.1f,
              random_int32(6, 84, -500, 500), {1, 0, 0, 1}, 2);  // 6 x 2
  b.value("flat", ir::DType::kInt8, {1, 6 * 6 * 2});
  b.node("Flatten", "", {a}, {"flat"}, "flatten").attributes["axis"] = std::int64_t{1};
  b.value("fc", ir::DType::kInt8, {1, 10});
  b.node("QGemm", "com.microsoft",
         {"flat", "c2_ys", "c2_yz",
          b.constant<std::int8_t>("wf", ir::DType::kInt8, {10, 72}, random_int8(720, 85)),
          b.f32("wfs", 0.01f), b.i8("wfz", 0),
          b.constant<std::int32_t>("bf", ir::DType::kInt32, {10}, random_int32(10, 86, -300, 300)),
          b.f32("fs", 0.2f), b.i8("fz", 0)},
         {"fc"}, "fc")
      .attributes["transB"] = std::int64_t{1};
  b.g.outputs = {"fc", a};  // also the conv output itself, to check the host turns it upright
  return b.g;
}

// The model through the whole path: host prefix on the reference, the device model from the GML
// bytes, host suffix on the reference.
ref::TensorMap run_whole_path(const CompileResult& r, const ref::TensorMap& inputs) {
  ref::TensorMap values = inputs;
  if (r.host_first())
    for (auto& [k, v] : ref::run_graph(*r.host_first(), values)) values[k] = v;
  std::map<std::string, ir::Tensor> dev_in;
  for (const auto& name : r.program.inputs) dev_in[name] = values.at(name);
  for (const auto& [name, v] : testing::run_on_device(r, dev_in)) {
    const ir::Tensor& t = r.ctx.graph.tensor(name);
    values[name] = int8_tensor(name, t.shape, v);
  }
  if (r.host_last()) {
    ref::TensorMap in;
    for (const auto& name : r.host_last()->inputs) in[name] = values.at(name);
    for (auto& [k, v] : ref::run_graph(*r.host_last(), in)) values[k] = v;
  }
  return values;
}

TEST(TransposeTallImages, TallCnnRunsSidewaysAndGivesTheSameIntegers) {
  const ir::Graph g = tall_cnn();
  const ref::TensorMap inputs = {{"x", int8_tensor("x", {1, 3, 24, 12}, random_int8(864, 87))}};
  // Ground truth: the untransposed lowering on the reference executor.
  CompileOptions plain;
  plain.allow_errata = true;
  const Context truth = lower(g, plain);
  const ref::TensorMap want = ref::run_graph(truth.graph, inputs);

  for (const isa::SaArch& arch : {isa::kArch9x8x8, isa::kArch9x4x4}) {
    CompileOptions opt;
    opt.arch = arch;
    const CompileResult r = compile(g, opt);
    EXPECT_NE(::testing::PrintToString(r.manifest.warnings).find("runs transposed"),
              std::string::npos);
    // The device sees the image 12 high and 24 wide.
    const isa::Instruction& conv1 = r.program.layers.at(0).instructions.at(0);
    EXPECT_EQ(conv1.get(isa::Field::CONV_IH), 12u);
    EXPECT_EQ(conv1.get(isa::Field::CONV_IW), 24u);
    EXPECT_EQ(conv1.get(isa::Field::CONV_PadTop), 0u);   // was left
    EXPECT_EQ(conv1.get(isa::Field::CONV_PadLeft), 1u);  // was top
    const isa::Instruction& pool = r.program.layers.at(1).instructions.at(0);
    EXPECT_EQ(pool.get(isa::Field::POOL_PoolHeight), 3u);
    EXPECT_EQ(pool.get(isa::Field::POOL_PoolStrideWidth), 2u);
    EXPECT_EQ(pool.get(isa::Field::POOL_PadRight), 1u);  // was bottom
    // Host work: one transpose in, one out (the fc output is a vector, not transposed).
    ASSERT_TRUE(r.host_first() && r.host_last());
    EXPECT_EQ(r.host_first()->nodes.size(), 1u);
    EXPECT_EQ(r.host_last()->nodes.size(), 1u);
    EXPECT_EQ(r.host_last()->nodes[0].op_type, "Transpose");

    const ref::TensorMap got = run_whole_path(r, inputs);
    for (const auto& out : g.outputs) {
      ASSERT_TRUE(got.count(out)) << out;
      EXPECT_EQ(got.at(out).shape, want.at(out).shape) << out;
      EXPECT_EQ(got.at(out).data, want.at(out).data) << out << " on " << arch.str();
    }
    // The device part matches its own (transposed) lowering too, layer by layer.
    CompileOptions every = opt;
    for (const auto& l : r.program.layers) every.dispatch.push_back(l.name);
    const CompileResult all = compile(g, every);
    std::map<std::string, ir::Tensor> dev_in;
    for (auto& [k, v] : ref::run_graph(*all.host_first(), inputs)) dev_in[k] = v;
    const auto dev = testing::run_on_device(all, dev_in);
    const auto ref = testing::run_on_reference(all.ctx, all.program, dev_in);
    ASSERT_FALSE(ref.empty());
    for (const auto& [name, values] : ref) EXPECT_EQ(dev.at(name), values) << name;
  }
}

TEST(TransposeTallImages, ProgramsTallBothWaysAreRefused) {
  // A conv on a 24x12 image, then (after a 4x1 pool) a conv on a 6x12 one: the second would be
  // tall once transposed (12 high, 6 wide), so nothing is transposed and the first is refused.
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 4, 24, 12});
  auto a = b.qconv("tall", "x", 0.05f, random_int8(8 * 4 * 9, 91), {8, 4, 3, 3}, 0.01f, 0.1f, {},
                   {1, 1, 1, 1});
  b.value("p_out", ir::DType::kInt8, {1, 8, 6, 12});
  ir::Node& p = b.node("MaxPool", "", {a}, {"p_out"}, "squash");
  p.attributes["kernel_shape"] = std::vector<std::int64_t>{4, 1};
  p.attributes["strides"] = std::vector<std::int64_t>{4, 1};
  a = b.qconv("wide", "p_out", 0.1f, random_int8(8 * 8 * 9, 92), {8, 8, 3, 3}, 0.01f, 0.1f, {},
              {1, 1, 1, 1});
  b.g.outputs = {a};
  try {
    compile(b.g, {});
    ADD_FAILURE() << "expected a refusal";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("layer 'tall'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("24-high, 12-wide"), std::string::npos) << msg;
    EXPECT_NE(msg.find("transposing the device part would make another conv hang"),
              std::string::npos)
        << msg;
  }
  // With --allow-errata it compiles as it is (simulation only).
  CompileOptions allow;
  allow.allow_errata = true;
  EXPECT_EQ(compile(b.g, allow).program.layers.at(0).instructions.at(0).get(isa::Field::CONV_IH),
            24u);
}

}  // namespace
}  // namespace npukit::compiler
