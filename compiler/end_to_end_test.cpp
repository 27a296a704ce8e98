// Whole programs: small QOperator graphs built here are compiled, run on the device model from the
// GML bytes exactly as a board receives them, and compared bit for bit with the reference executor
// running the lowered npukit.gati graph (docs/ref-ops.md; ref/ shares no code with device/).
#include "compiler/device_run.h"
#include "compiler/errata_passes.h"
#include "compiler/passes.h"
#include "compiler/test_graphs.h"
#include "device/timing.h"

#include <gtest/gtest.h>

#include <cstring>

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;
using testing::int8_tensor;
using testing::random_int32;
using testing::random_int8;

std::map<std::string, ir::Tensor> random_inputs(const ir::Graph& g, unsigned seed) {
  std::map<std::string, ir::Tensor> in;
  for (const auto& name : g.inputs) {
    const ir::Tensor& t = g.tensor(name);
    in[name] = int8_tensor(
        name, t.shape, random_int8(static_cast<std::size_t>(ir::element_count(t.shape)), seed++));
  }
  return in;
}

void expect_device_equals_reference(const ir::Graph& g, const isa::SaArch& arch, unsigned seed = 1,
                                    bool allow_errata = false,
                                    std::vector<std::string> dispatch = {}) {
  CompileOptions opt;
  opt.arch = arch;
  opt.allow_errata = allow_errata;
  opt.dispatch = std::move(dispatch);
  const CompileResult r = compile(g, opt);
  const auto inputs = random_inputs(g, seed);
  const auto dev = testing::run_on_device(r, inputs);
  const auto ref = testing::run_on_reference(r.ctx, r.program, inputs);
  ASSERT_FALSE(ref.empty());
  for (const auto& [name, values] : ref) {
    ASSERT_TRUE(dev.count(name)) << name;
    ASSERT_EQ(dev.at(name).size(), values.size()) << name;
    std::size_t differ = 0, nonzero = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      differ += dev.at(name)[i] != values[i];
      nonzero += values[i] != 0;
    }
    EXPECT_EQ(differ, 0u) << name << " on " << arch.str() << ": " << differ << " of "
                          << values.size() << " values differ";
    EXPECT_GT(nonzero, 0u) << name << ": an all-zero output tests nothing";
  }
}

std::vector<std::int32_t> bias(std::size_t n, unsigned seed) {
  return random_int32(n, seed, -2000, 2000);
}

// conv 3x3 + relu -> max pool -> 1x1 conv -> depthwise 3x3 stride 2 -> conv + relu6 + global pool
ir::Graph cnn(std::int64_t c0) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, c0, 9, 10});
  auto a = b.qconv("c1", "x", 0.05f, random_int8(12 * c0 * 9, 2), {12, c0, 3, 3}, 0.01f, 0.1f,
                   bias(12, 3), {1, 0, 1, 2});
  a = b.relu("r1", a);
  a = b.maxpool("p1", a, 2, 2);  // 10x10 -> 5x5 (4x5 after the asymmetric conv below)
  a = b.qconv("c2", a, 0.1f, random_int8(16 * 12, 4), {16, 12, 1, 1}, 0.01f, 0.1f, bias(16, 5),
              {0, 0, 0, 0});
  a = b.qconv("dw", a, 0.1f, random_int8(16 * 9, 6), {16, 1, 3, 3}, 0.02f, 0.1f, bias(16, 7),
              {1, 1, 1, 1}, 2, 16);
  a = b.qconv("c3", a, 0.1f, random_int8(8 * 16 * 9, 8), {8, 16, 3, 3}, 0.01f, 0.05f, bias(8, 9),
              {1, 1, 1, 1});
  b.value("clip_out", ir::DType::kInt8, b.g.tensor(a).shape);
  b.node("Clip", "", {a, b.i8("lo", 0), b.i8("hi", 120)}, {"clip_out"}, "relu6");
  b.value("gap", ir::DType::kInt8, {1, 8, 1, 1});
  b.node("QLinearGlobalAveragePool", "com.microsoft",
         {"clip_out", "c3_ys", "c3_yz", b.f32("gs", 0.02f), "c3_yz"}, {"gap"}, "pool");
  b.g.outputs = {"gap"};
  return b.g;
}

TEST(EndToEnd, CnnOn9x8x8And9x4x4) {
  expect_device_equals_reference(cnn(3), isa::kArch9x8x8);
  expect_device_equals_reference(cnn(5), isa::kArch9x4x4, 7);
}

TEST(EndToEnd, CnnOn16x1x16WithErrataAllowed) {
  // 16,1,16 chained and depthwise programs are v1.0.0 errata: refused by default.
  CompileOptions hw;
  hw.arch = isa::kArch16x1x16;
  EXPECT_THROW(compile(cnn(3), hw), Error);
  expect_device_equals_reference(cnn(3), isa::kArch16x1x16, 3, true);
}

TEST(EndToEnd, PointwiseConvOn16x1x16IsRefusedUnlessErrataAllowed) {
  // A single 1x1 conv on 16,1,16 lowers to ConvType PW, which the RTL never ran and the device
  // model flags as erratum E6: the compiler must not emit it by default.
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 20, 6, 7});
  const auto y = b.qconv("pw", "x", 0.05f, random_int8(24 * 20, 11), {24, 20, 1, 1}, 0.01f, 0.1f,
                         bias(24, 12), {0, 0, 0, 0});
  b.g.outputs = {y};
  CompileOptions hw;
  hw.arch = isa::kArch16x1x16;
  try {
    compile(b.g, hw);
    ADD_FAILURE() << "a ConvType PW program compiled without --allow-errata";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ConvType PW"), std::string::npos) << e.what();
  }
  expect_device_equals_reference(b.g, isa::kArch16x1x16, 13, true);
}

TEST(EndToEnd, ConvFlattenFcReluFc) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 6, 5, 5});
  auto a = b.qconv("conv", "x", 0.05f, random_int8(10 * 6 * 9, 11), {10, 6, 3, 3}, 0.01f, 0.1f,
                   bias(10, 12), {0, 0, 0, 0});
  b.value("flat", ir::DType::kInt8, {1, 90});
  b.node("Flatten", "", {a}, {"flat"}, "flatten");
  b.value("fc1", ir::DType::kInt8, {1, 40});
  auto& g1 =
      b.node("QGemm", "com.microsoft",
             {"flat", "conv_ys", "conv_yz",
              b.constant<std::int8_t>("w1", ir::DType::kInt8, {40, 90}, random_int8(3600, 13)),
              b.f32("ws1", 0.01f), b.i8("z", 0),
              b.constant<std::int32_t>("b1", ir::DType::kInt32, {40}, bias(40, 14)),
              b.f32("s1", 0.2f), "z"},
             {"fc1"}, "fc1");
  g1.attributes["transB"] = std::int64_t{1};
  auto r = b.relu("relu", "fc1");
  b.value("fc2", ir::DType::kInt8, {1, 7});
  b.node(
      "QLinearMatMul", "",
      {r, "s1", "z", b.constant<std::int8_t>("w2", ir::DType::kInt8, {40, 7}, random_int8(280, 15)),
       b.f32("ws2", 0.02f), "z", b.f32("s2", 0.1f), "z"},
      {"fc2"}, "fc2");
  b.g.outputs = {"fc2"};
  expect_device_equals_reference(b.g, isa::kArch9x8x8, 21);
  expect_device_equals_reference(b.g, isa::kArch9x4x4, 22);
  // Dispatching the FC layer by name keeps its ReLU out of its tail: the ReLU becomes an EltWise
  // on the FC's output vector (a bug once: the EltWise read it as a 40-channel image).
  expect_device_equals_reference(b.g, isa::kArch9x8x8, 23, false, {"fc1"});
  expect_device_equals_reference(b.g, isa::kArch9x4x4, 24, false, {"fc1"});
  expect_device_equals_reference(b.g, isa::kArch16x1x16, 25, true, {"fc1"});
}

TEST(EndToEnd, GroupedConvAsBlockDiagonalWeightsEqualsTheGroupedConv) {
  // regnet/resnext-style grouped 3x3 convs (groups 2 and 4, then 8 with 2 channels per group)
  // with a ReLU, lowered to regular convs with block-diagonal weights. The device is compared
  // with the reference running the lowered graph and, independently of the weight expansion, with
  // the reference running the GatiConvs with the original grouped weights and `group`.
  for (const std::int64_t groups : {2, 4, 8}) {
    GraphBuilder b;
    b.input("x", ir::DType::kInt8, {1, 16, 7, 7});
    const std::int64_t cg = 16 / groups;
    auto c = b.qconv("gconv", "x", 0.05f, random_int8(static_cast<std::size_t>(24 * cg * 9), 41),
                     {24, cg, 3, 3}, 0.01f, 0.1f, bias(24, 42), {1, 1, 1, 1}, 1, groups);
    auto r = b.relu("relu", c);
    b.g.outputs = {r};
    for (const isa::SaArch& arch : isa::kSupportedArchs) {
      expect_device_equals_reference(b.g, arch, 43, arch == isa::kArch16x1x16);
      CompileOptions opt;
      opt.arch = arch;
      opt.allow_errata = arch == isa::kArch16x1x16;
      CompileResult res = compile(b.g, opt);
      const auto inputs = random_inputs(b.g, 43);
      const auto dev = testing::run_on_device(res, inputs);
      Context grouped = res.ctx;
      for (auto& n : grouped.graph.nodes)
        if (n.name == "gconv") {
          ASSERT_EQ(n.get_int("group", 0), 1);
          n.inputs[1] = "gconv_w";
          n.attributes["group"] = groups;
        }
      const auto ref = testing::run_on_reference(grouped, res.program, inputs);
      EXPECT_EQ(dev.at(r), ref.at(r)) << "groups " << groups << " on " << arch.str();
    }
  }
}

TEST(EndToEnd, ResidualAddSigmoidLeakyConcatResize) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 8, 6, 6});
  auto c1 = b.qconv("c1", "x", 0.05f, random_int8(8 * 8 * 9, 31), {8, 8, 3, 3}, 0.01f, 0.1f,
                    bias(8, 32), {1, 1, 1, 1});
  auto c2 = b.qconv("c2", c1, 0.1f, random_int8(8 * 8 * 9, 33), {8, 8, 3, 3}, 0.01f, 0.2f,
                    bias(8, 34), {1, 1, 1, 1});
  b.value("sum", ir::DType::kInt8, {1, 8, 6, 6});
  b.node("QLinearAdd", "com.microsoft",
         {c1, "c1_ys", "c1_yz", c2, "c2_ys", "c2_yz", b.f32("ss", 0.15f), "c1_yz"}, {"sum"}, "add");
  const auto leaky = b.qleaky("leaky", "sum", "ss", "c1_yz", 0.1f, 0.1f);
  b.value("sig", ir::DType::kInt8, {1, 8, 6, 6});
  b.node("QLinearSigmoid", "com.microsoft",
         {c2, "c2_ys", "c1_yz", b.f32("s_sig", 1.0f / 256), "c1_yz"}, {"sig"}, "sigmoid");
  b.value("cat", ir::DType::kInt8, {1, 16, 6, 6});
  b.node("QLinearConcat", "com.microsoft",
         {"leaky_ys", "c1_yz", leaky, "leaky_ys", "c1_yz", "sig", "s_sig", "c1_yz"}, {"cat"},
         "concat")
      .attributes["axis"] = std::int64_t{1};
  b.value("up", ir::DType::kInt8, {1, 16, 12, 12});
  auto& rs =
      b.node("Resize", "",
             {"cat", "", b.constant<float>("scales", ir::DType::kFloat32, {4}, {1, 1, 2, 2})},
             {"up"}, "up");
  rs.attributes["mode"] = std::string("nearest");
  rs.attributes["coordinate_transformation_mode"] = std::string("asymmetric");
  rs.attributes["nearest_mode"] = std::string("floor");
  b.g.outputs = {"up"};
  expect_device_equals_reference(b.g, isa::kArch9x8x8, 41);
}

TEST(EndToEnd, SplitKernelEqualsTheUnsplitConv) {
  // A 5x5 conv runs as 5 one-row pieces accumulated through int32 accumulants on the device; the
  // result must equal the reference's single 5x5 GatiConv (the lowering before split_kernels).
  // With 3 kernels on 9,4,4 every piece has an odd KernelItr and is followed by another piece:
  // the whole chain is padded to 8 kernels (pad_kernel_iterations).
  for (const auto& [arch, kn] : {std::pair{isa::kArch9x8x8, 6}, std::pair{isa::kArch9x4x4, 6},
                                 std::pair{isa::kArch9x4x4, 3}}) {
    GraphBuilder b;
    b.input("x", ir::DType::kInt8, {1, 5, 9, 11});
    auto y = b.qconv("conv", "x", 0.05f, random_int8(kn * 5 * 25, 51), {kn, 5, 5, 5}, 0.01f, 0.3f,
                     bias(static_cast<std::size_t>(kn), 52), {2, 1, 2, 3});
    auto r = b.relu("relu", y);
    b.g.outputs = {r};
    CompileOptions opt;
    opt.arch = arch;
    const CompileResult res = compile(b.g, opt);
    ASSERT_EQ(res.program.layers.size(), 5u);
    for (const auto& l : res.program.layers)
      EXPECT_EQ(l.instructions[0].get(isa::Field::CONV_KN), kn == 3 ? 8u : 6u);
    const auto inputs = random_inputs(b.g, 53);
    const auto dev = testing::run_on_device(res, inputs);
    const Context whole = lower_unsplit(b.g, opt);
    ref::TensorMap in{{"x", inputs.at("x")}};
    const auto ref = ref::run_graph(whole.graph, in);
    const ir::Tensor& expect = ref.at(r);
    ASSERT_EQ(dev.at(r).size(), expect.data.size());
    EXPECT_EQ(std::memcmp(dev.at(r).data(), expect.data.data(), expect.data.size()), 0)
        << arch.str() << " " << kn << " kernels";
  }
}

TEST(EndToEnd, OddKernelIterationBeforeAConvIsPaddedOn9x4x4) {
  // conv (5 kernels: KernelItr 2 on 9,4,4, fine) -> conv (3 kernels: KernelItr 1, odd) -> conv.
  // The second conv computes 8 kernels, 5 of them all zero, so the third does not follow an odd
  // KernelItr (gati.md 14.6); its 3 real channels and everything downstream are unchanged.
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 3, 7, 9});
  auto a = b.qconv("c1", "x", 0.05f, random_int8(5 * 3 * 9, 71), {5, 3, 3, 3}, 0.01f, 0.1f,
                   bias(5, 72), {1, 1, 1, 1});
  a = b.qconv("c2", a, 0.1f, random_int8(3 * 5 * 9, 73), {3, 5, 3, 3}, 0.01f, 0.1f, bias(3, 74),
              {1, 1, 1, 1});
  a = b.qconv("c3", a, 0.1f, random_int8(6 * 3 * 9, 75), {6, 3, 3, 3}, 0.01f, 0.1f, bias(6, 76),
              {1, 1, 1, 1});
  b.g.outputs = {a};
  CompileOptions opt;
  opt.arch = isa::kArch9x4x4;
  const CompileResult r = compile(b.g, opt);
  ASSERT_EQ(r.program.layers.size(), 3u);
  const auto conv_field = [&](int layer, isa::Field f) {
    return r.program.layers[static_cast<std::size_t>(layer)].instructions[0].get(f);
  };
  const auto kitr = [&](int layer) {
    return r.program.layers[static_cast<std::size_t>(layer)].instructions[1].get(
        isa::Field::OutputBlock_KernelItr);
  };
  EXPECT_EQ(conv_field(0, isa::Field::CONV_KN), 5u);
  EXPECT_EQ(conv_field(1, isa::Field::CONV_KN), 8u);
  EXPECT_EQ(kitr(1), 2u);
  EXPECT_EQ(conv_field(2, isa::Field::CONV_KN), 6u);  // the last conv is followed by no conv
  EXPECT_EQ(conv_field(2, isa::Field::CONV_IC), 3u);
  // c2's weight blob: 2 kernel iterations x 2 channel iterations of 9x4x4 bytes; the second
  // kernel iteration holds kernels 4..7, all padding, so all of it is zero.
  const auto& w = r.program.blobs[static_cast<std::size_t>(r.program.layers[1].weights)].bytes;
  ASSERT_EQ(w.size(), 2u * 2 * 144);
  for (std::size_t i = 2 * 144; i < w.size(); ++i) EXPECT_EQ(w[i], 0) << i;
  // c2's output region holds 8 channels (2 groups); c3 reads the first group only.
  const auto& mid = r.program.tensors.at(r.ctx.graph.nodes[r.program.layers[1].node].outputs[0]);
  EXPECT_EQ(mid.bytes, 4u * 64);      // 3 channels: 1 group of 4 x ceil_mod(7 * 9, 8) pixels
  EXPECT_EQ(mid.footprint, 8u * 64);  // 8 channels: 2 groups
  EXPECT_EQ(conv_field(2, isa::Field::CONV_ImageEndAddress),
            conv_field(2, isa::Field::CONV_ImageStartAddress) + 4 * 64);
  EXPECT_NE(::testing::PrintToString(r.manifest.warnings).find("'c2': computes 8 kernels"),
            std::string::npos);
  // Bit-exact against the reference, and the device model sees no erratum (run_on_device).
  expect_device_equals_reference(b.g, isa::kArch9x4x4, 77);
  // Dispatching the padded layer's output gives the host its 3 real channels.
  opt.dispatch = {"c2"};
  const CompileResult d = compile(b.g, opt);
  const auto inputs = random_inputs(b.g, 78);
  const auto dev = testing::run_on_device(d, inputs);
  const auto ref = testing::run_on_reference(d.ctx, d.program, inputs);
  for (const auto& [name, values] : ref) EXPECT_EQ(dev.at(name), values) << name;
  // With --allow-errata the program is left as the model says.
  opt.dispatch.clear();
  opt.allow_errata = true;
  EXPECT_EQ(compile(b.g, opt).program.layers[1].instructions[0].get(isa::Field::CONV_KN), 3u);
}

TEST(EndToEnd, DepthwiseConvWithAnOddKernelIterationIsPaddedOn9x4x4) {
  // depthwise 3x3 on 4 channels (KernelItr 1 on 9,4,4) -> conv: the depthwise conv computes 8
  // channels (KN = IC = 8, gati.md 14.6 workaround), reading its input's next channel group
  // too, whose bytes are whatever the buffer holds: here garbage written there before the run.
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 4, 7, 9});
  auto a = b.qconv("dw", "x", 0.05f, random_int8(4 * 9, 81), {4, 1, 3, 3}, 0.02f, 0.1f, bias(4, 82),
                   {1, 1, 1, 1}, 1, 4);
  a = b.qconv("pw", a, 0.1f, random_int8(6 * 4, 83), {6, 4, 1, 1}, 0.01f, 0.1f, bias(6, 84),
              {0, 0, 0, 0});
  a = b.relu("relu", a);
  b.g.outputs = {a};
  CompileOptions opt;
  opt.arch = isa::kArch9x4x4;
  opt.dispatch = {"dw"};
  CompileResult r = compile(b.g, opt);
  ASSERT_EQ(r.program.layers.size(), 2u);
  const auto& dw = r.program.layers[0].instructions;
  EXPECT_EQ(dw[0].get(isa::Field::CONV_ConvType), 1u);
  EXPECT_EQ(dw[0].get(isa::Field::CONV_KN), 8u);
  EXPECT_EQ(dw[0].get(isa::Field::CONV_IC), 8u);
  EXPECT_EQ(dw[1].get(isa::Field::OutputBlock_KernelItr), 2u);
  const DeviceTensor& x = r.program.tensors.at("x");
  const std::uint64_t group = 4 * 64;  // 4 channels x ceil_mod(7 * 9, 8) pixels
  EXPECT_EQ(x.bytes, group);
  EXPECT_EQ(x.reserved, 2 * group);  // its buffer holds the padding group the conv reads
  EXPECT_EQ(
      dw[0].get(isa::Field::CONV_ImageEndAddress) - dw[0].get(isa::Field::CONV_ImageStartAddress),
      2 * group);
  // The second kernel iteration's weights (channels 4..7) are all zero.
  const auto& w = r.program.blobs[static_cast<std::size_t>(r.program.layers[0].weights)].bytes;
  ASSERT_EQ(w.size(), 2u * 144);
  for (std::size_t i = 144; i < w.size(); ++i) EXPECT_EQ(w[i], 0) << i;
  EXPECT_NE(::testing::PrintToString(r.manifest.warnings).find("'dw': computes 8 channels"),
            std::string::npos);
  // --explain: the rewrite, the erratum and its cost (padded minus unpadded layer on the timing
  // model); the unpadded layer is what --allow-errata emits.
  const auto plain = unpadded_instructions(r, 0);
  EXPECT_EQ(plain[0].get(isa::Field::CONV_KN), 4u);
  EXPECT_EQ(plain[0].get(isa::Field::CONV_IC), 4u);
  EXPECT_EQ(plain[1].get(isa::Field::OutputBlock_KernelItr), 1u);
  const auto timer = [&](const std::vector<isa::Instruction>& ins) {
    device::timing::LayerInput in;
    in.arch = r.program.arch;
    in.mega = &ins[0];
    in.output = &ins[1];
    in.tail = &ins[2];
    return device::timing::time_layer(in).cycles;
  };
  const std::uint64_t extra = timer(dw) - timer(plain);
  EXPECT_GT(extra, 0u);
  EXPECT_NE(explain_errata(r, {}, timer)
                .find("'dw' avoids erratum E5 9,4,4 conv after odd KernelItr "
                      "(pad_kernel_iterations): computes 8 channels of a depthwise conv"),
            std::string::npos)
      << explain_errata(r, {}, timer);
  EXPECT_NE(explain_errata(r, {}, timer).find(std::to_string(extra) + " extra cycles"),
            std::string::npos);
  // Garbage in the padding group (a DWP write after the program, before the input's own).
  Bytes garbage(group);
  for (std::size_t i = 0; i < garbage.size(); ++i)
    garbage[i] = static_cast<std::uint8_t>(i * 37 + 11);
  isa::append_dwp_packet(r.gml, x.address + static_cast<std::uint32_t>(group), garbage);
  const auto inputs = random_inputs(b.g, 85);
  const auto dev = testing::run_on_device(r, inputs);
  const auto ref = testing::run_on_reference(r.ctx, r.program, inputs);
  ASSERT_EQ(ref.size(), 2u);  // the dispatched depthwise output and the result
  for (const auto& [name, values] : ref) EXPECT_EQ(dev.at(name), values) << name;
  // With --allow-errata the program is left as the model says: the unpadded layer above.
  opt.allow_errata = true;
  const CompileResult sim = compile(b.g, opt);
  EXPECT_EQ(sim.program.layers[0].instructions[0].get(isa::Field::CONV_KN), 4u);
  EXPECT_EQ(timer(sim.program.layers[0].instructions), timer(plain));
}

TEST(EndToEnd, FirstLayerPoolGetsAnEmptyTailBlock) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 8, 8, 8});
  auto p = b.maxpool("pool", "x", 3, 2, 1);
  auto c = b.qconv("conv", p, 0.05f, random_int8(8 * 8 * 9, 61), {8, 8, 3, 3}, 0.01f, 0.1f,
                   bias(8, 62), {1, 1, 1, 1});
  b.g.outputs = {c};
  const CompileResult r = compile(b.g, {});
  const auto& ins = r.program.layers[0].instructions;
  ASSERT_EQ(ins.size(), 4u);
  EXPECT_EQ(ins[2].opcode(), isa::Opcode::TailBlock);
  EXPECT_EQ(ins[2], isa::Instruction(isa::Opcode::TailBlock));
  expect_device_equals_reference(b.g, isa::kArch9x8x8, 63);
}

}  // namespace
}  // namespace npukit::compiler
