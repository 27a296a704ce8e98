// assign_devices: which nodes could run on the Gati and why (partition then cuts the segments).
#include "common/error.h"
#include "compiler/compiler.h"
#include "compiler/device_sigmoid.h"
#include "compiler/passes.h"
#include "compiler/test_graphs.h"

#include <gtest/gtest.h>

#include <cmath>

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;

TEST(AssignDevices, LeadingAndTrailingHostWork) {
  GraphBuilder b;
  b.input("x", ir::DType::kFloat32, {1, 3, 8, 8});
  b.value("xq", ir::DType::kInt8, {1, 3, 8, 8});
  b.node("QuantizeLinear", "", {"x", b.f32("s", 0.1f), b.i8("z", 0)}, {"xq"}, "quant");
  auto c = b.qconv("conv", "xq", 0.1f, std::vector<std::int8_t>(4 * 3 * 9, 1), {4, 3, 3, 3}, 0.01f,
                   0.2f, {}, {1, 1, 1, 1});
  b.value("y", ir::DType::kFloat32, {1, 4, 8, 8});
  b.node("DequantizeLinear", "", {c, "conv_ys", "conv_yz"}, {"y"}, "dequant");
  b.value("sm", ir::DType::kFloat32, {1, 4, 8, 8});
  b.node("Softmax", "", {"y"}, {"sm"}, "softmax");
  b.g.outputs = {"sm"};
  Context ctx;
  ctx.graph = b.g;
  assign_devices(ctx);
  EXPECT_FALSE(ctx.on_device("quant"));
  EXPECT_TRUE(ctx.on_device("conv"));
  EXPECT_FALSE(ctx.on_device("dequant"));
  EXPECT_FALSE(ctx.on_device("softmax"));
  EXPECT_EQ(ctx.placement["quant"].reason.rfind("host: ", 0), 0u);
  EXPECT_EQ(ctx.placement["softmax"].reason.rfind("host: ", 0), 0u);
  EXPECT_NE(ctx.placement["softmax"].reason.find("Softmax has no Gati lowering"),
            std::string::npos);
}

TEST(AssignDevices, DecidesEachNodeOnItsOwn) {
  // conv1 -> DQ -> Softmax -> Q -> conv2: conv2 sits after host work and can still run on the
  // device (partition decides whether the cut pays for itself).
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 4, 6, 6});
  auto c1 = b.qconv("conv1", "x", 0.1f, std::vector<std::int8_t>(4 * 4 * 9, 1), {4, 4, 3, 3}, 0.01f,
                    0.2f, {}, {1, 1, 1, 1});
  b.value("f", ir::DType::kFloat32, {1, 4, 6, 6});
  b.node("DequantizeLinear", "", {c1, "conv1_ys"}, {"f"}, "dq");
  b.value("sm", ir::DType::kFloat32, {1, 4, 6, 6});
  b.node("Softmax", "", {"f"}, {"sm"}, "softmax");
  b.value("q", ir::DType::kInt8, {1, 4, 6, 6});
  b.node("QuantizeLinear", "", {"sm", b.f32("s", 0.01f)}, {"q"}, "requant");
  auto c2 = b.qconv("conv2", "q", 0.01f, std::vector<std::int8_t>(4 * 4 * 9, 1), {4, 4, 3, 3},
                    0.01f, 0.2f, {}, {1, 1, 1, 1});
  b.g.outputs = {c2};
  Context ctx;
  ctx.graph = b.g;
  assign_devices(ctx);
  EXPECT_TRUE(ctx.on_device("conv1"));
  EXPECT_FALSE(ctx.on_device("softmax"));
  EXPECT_TRUE(ctx.on_device("conv2"));
}

TEST(AssignDevices, ReasonsForUnsupportedInt8Ops) {
  GraphBuilder b;
  b.input("x", ir::DType::kUInt8, {1, 4, 6, 6});
  b.qconv("conv", "x", 0.1f, std::vector<std::int8_t>(4 * 4 * 9, 1), {4, 4, 3, 3}, 0.01f, 0.2f, {},
          {1, 1, 1, 1});
  Context ctx;
  ctx.graph = b.g;
  ctx.graph.outputs = {"conv_out"};
  EXPECT_NE(why_not_on_device(ctx.graph, ctx.graph.nodes[0], ctx.options).find("uint8"),
            std::string::npos);
  // Nothing for the device at all is an error that says what to do.
  EXPECT_THROW(assign_devices(ctx), Error);
}

TEST(AssignDevices, DilatedConvsStayOnTheHostGroupedConvsDoNot) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 4, 6, 6});
  b.qconv("conv", "x", 0.1f, std::vector<std::int8_t>(4 * 2 * 9, 1), {4, 2, 3, 3}, 0.01f, 0.2f, {},
          {1, 1, 1, 1}, 1, 2);
  EXPECT_EQ(why_not_on_device(b.g, b.g.nodes[0], {}), "");  // lowered with block-diagonal weights
  b.g.nodes[0].attributes["group"] = std::int64_t{3};
  EXPECT_NE(why_not_on_device(b.g, b.g.nodes[0], {}).find("does not divide"), std::string::npos);
  b.g.nodes[0].attributes["group"] = std::int64_t{1};
  b.g.nodes[0].attributes["dilations"] = std::vector<std::int64_t>{2, 2};
  EXPECT_NE(why_not_on_device(b.g, b.g.nodes[0], {}).find("dilat"), std::string::npos);
}

TEST(AssignDevices, KernelWiderThanTheArrayRunsOnTheHostNotRefused) {
  // alexnet's first conv (11x11, stride 4): split_kernels cuts rows, never columns, so on a
  // 9-row array assign_devices leaves the conv on the host and the rest of the model compiles.
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 3, 27, 27});
  auto c1 = b.qconv("wide", "x", 0.05f, testing::random_int8(8 * 3 * 121, 7), {8, 3, 11, 11}, 0.01f,
                    0.1f, {}, {2, 2, 2, 2}, 4);
  auto c2 = b.qconv("conv", c1, 0.1f, testing::random_int8(8 * 8 * 9, 8), {8, 8, 3, 3}, 0.01f, 0.1f,
                    {}, {1, 1, 1, 1});
  b.g.outputs = {c2};
  Context ctx;
  ctx.graph = b.g;
  assign_devices(ctx);
  EXPECT_FALSE(ctx.on_device("wide"));
  EXPECT_NE(ctx.placement["wide"].reason.find("wider than the 9,8,8 array has rows"),
            std::string::npos)
      << ctx.placement["wide"].reason;
  EXPECT_TRUE(ctx.on_device("conv"));
  // space_to_depth (pass 5b) then runs it on the device as a 3x3 conv over 48 channels of the
  // host's space-to-depth image (pass_space_to_depth_test.cpp).
  const CompileResult r = compile(b.g, {});
  EXPECT_EQ(r.program.layers.size(), 2u);
  EXPECT_TRUE(r.ctx.on_device("wide"));
  // On 16,1,16 (16 rows) the 11x11 kernel fits the rows and is split into bands on the device.
  Context wide;
  wide.graph = b.g;
  wide.options.arch = isa::kArch16x1x16;
  assign_devices(wide);
  EXPECT_TRUE(wide.on_device("wide"));
}

// The device's sigmoid against the exact one, worked by hand for s_x = 0.02, s_y = 1/127: code 1
// is x = 1311 in Q16 (round(0.02 * 65536)), the engine gets 1311 >> 1 = 655 <= 896, its dead
// zone (tanh 0), so sigmoid is 32767 / 65536 and the tail (127 = 32512 / 2^8) gives
// (32767 * 127 / 65536) = 63.498 -> 63, where the exact value is 127 / (1 + e^-0.02) = 64.135.
TEST(AssignDevices, DeviceSigmoidErrorByHand) {
  const SigmoidError e = device_sigmoid_error(0.02, 1.0 / 127, "test");
  EXPECT_EQ(e.code, 1);
  EXPECT_EQ(e.device, 63);
  EXPECT_NEAR(e.exact, 127 / (1 + std::exp(-0.02)), 1e-9);
  EXPECT_NEAR(e.lsb, 64.135 - 63, 1e-3);
  EXPECT_TRUE(e.dead_zone);
  // Output scale 1/128: code 0 gives 64 = 0.5 * 128 exactly; the dead zone now costs at most
  // 0.25 * 0.02 * 128 = 0.64 LSB, so no code is more than 1 LSB off.
  EXPECT_LE(device_sigmoid_error(0.02, 1.0 / 128, "test").lsb, 1.0);
  // Input scale 0.05: code 1 is 3277 >> 1 = 1638, past the dead zone.
  EXPECT_LE(device_sigmoid_error(0.05, 1.0 / 127, "test").lsb, 1.0);
}

// conv -> QLinearSigmoid (-> conv2 when `mid`): a sigmoid whose result leaves the device runs on
// the host when the device's form is more than 1 LSB off; in the middle of device work it stays.
ir::Graph conv_sigmoid(float sx, float sy, bool mid) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 8, 8, 8});
  auto c = b.qconv("conv", "x", 0.1f, std::vector<std::int8_t>(8 * 8 * 9, 1), {8, 8, 3, 3},
                   sx / 0.1f, sx, {}, {1, 1, 1, 1});
  b.value("sig", ir::DType::kInt8, {1, 8, 8, 8});
  b.node("QLinearSigmoid", "com.microsoft", {c, "conv_ys", "conv_yz", b.f32("sy", sy), "conv_yz"},
         {"sig"}, "sigmoid");
  b.g.outputs = {"sig"};
  if (mid)
    b.g.outputs = {b.qconv("conv2", "sig", sy, std::vector<std::int8_t>(8 * 8 * 9, 1), {8, 8, 3, 3},
                           0.01f, 0.2f, {}, {1, 1, 1, 1})};
  return b.g;
}

TEST(AssignDevices, InexactFinalSigmoidRunsOnTheHost) {
  Context ctx;
  ctx.graph = conv_sigmoid(0.02f, 1.0f / 127, false);
  assign_devices(ctx);
  EXPECT_TRUE(ctx.on_device("conv"));
  EXPECT_FALSE(ctx.on_device("sigmoid"));
  const std::string& why = ctx.placement["sigmoid"].reason;
  EXPECT_NE(why.find("1.13 output LSBs from the exact one (input code 1: device 63, exact 64.13"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("dead zone"), std::string::npos) << why;
  EXPECT_NE(why.find("512 lookups per image, no extra transfer"), std::string::npos) << why;

  ctx = Context{};
  ctx.graph = conv_sigmoid(0.02f, 1.0f / 128, false);  // within 1 LSB: the device runs it
  assign_devices(ctx);
  EXPECT_TRUE(ctx.on_device("sigmoid"));

  ctx = Context{};
  ctx.graph = conv_sigmoid(0.02f, 1.0f / 127, true);  // read by a device conv: stays
  assign_devices(ctx);
  EXPECT_TRUE(ctx.on_device("sigmoid"));
}

// conv [1, 8, 12, 40] -> QLinearGlobalAveragePool (s_in 1/16, s_out `sy`) -> 1x1 conv "fc", then
// (`stays`) an EltWise add of fc's result to itself on the device. On 9,8,8 the 12x40 pool is two
// 3x3 stride-3 average stages on the device, each rounding at 1/16: up to 2 x 0.5 x (1/16) / sy
// output LSBs before the final rounding.
ir::Graph conv_pool_fc(float sy, bool stays) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 8, 12, 40});
  auto c = b.qconv("conv", "x", 0.1f, std::vector<std::int8_t>(8 * 8, 1), {8, 8, 1, 1}, 0.625f,
                   0.0625f, {}, {0, 0, 0, 0});
  b.value("pool", ir::DType::kInt8, {1, 8, 1, 1});
  b.node("QLinearGlobalAveragePool", "com.microsoft",
         {c, "conv_ys", "conv_yz", b.f32("pool_ys", sy), "conv_yz"}, {"pool"}, "gap");
  auto fc = b.qconv("fc", "pool", sy, std::vector<std::int8_t>(8 * 8, 1), {8, 8, 1, 1}, 0.1f, sy,
                    {}, {0, 0, 0, 0});
  b.g.outputs = {fc};
  if (stays) {
    b.value("sum", ir::DType::kInt8, {1, 8, 1, 1});
    b.node("QLinearAdd", "com.microsoft",
           {fc, "fc_ys", "fc_yz", fc, "fc_ys", "fc_yz", "fc_ys", "fc_yz"}, {"sum"}, "add");
    b.g.outputs = {"sum"};
  }
  return b.g;
}

TEST(AssignDevices, InexactStagedGlobalPoolBeforeTheHostRunsOnTheHost) {
  Context ctx;
  ctx.graph = conv_pool_fc(0.004f, false);
  assign_devices(ctx);
  EXPECT_TRUE(ctx.on_device("conv"));
  EXPECT_FALSE(ctx.on_device("gap"));
  EXPECT_FALSE(ctx.on_device("fc"));  // between the pool and the graph output: goes along
  const std::string& why = ctx.placement["gap"].reason;
  // 2 stages x 0.5 x 15.6 = 15.6 LSBs, + 0.5 for the final rounding.
  EXPECT_NE(why.find("over 12x40 would take 2 3x3 stride-3 average stage(s) rounding at its input "
                     "scale 0.0625, 15.6 times its output scale: up to 16.12 output LSBs"),
            std::string::npos)
      << why;
  EXPECT_EQ(ctx.placement["fc"].reason, why);

  ctx = Context{};
  ctx.graph = conv_pool_fc(0.125f, false);  // s_out = 2 s_in: within 1 LSB, the device runs it
  assign_devices(ctx);
  EXPECT_TRUE(ctx.on_device("gap"));
  EXPECT_TRUE(ctx.on_device("fc"));

  ctx = Context{};
  ctx.graph = conv_pool_fc(0.004f, true);  // the result stays on the device: so does the pool
  assign_devices(ctx);
  EXPECT_TRUE(ctx.on_device("gap"));
  EXPECT_TRUE(ctx.on_device("add"));

  // A model whose only device candidates are the pool and its chain has nothing for the device:
  // refused with their reason (not an empty program).
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 8, 12, 40});
  b.value("pool", ir::DType::kInt8, {1, 8, 1, 1});
  b.node("QLinearGlobalAveragePool", "com.microsoft",
         {"x", b.f32("xs", 0.0625f), b.i8("z", 0), b.f32("ys", 0.004f), "z"}, {"pool"}, "gap");
  b.g.outputs = {"pool"};
  ctx = Context{};
  ctx.graph = b.g;
  try {
    assign_devices(ctx);
    ADD_FAILURE() << "a model with nothing left for the device compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nothing in this model can run on the Gati"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("gap (QLinearGlobalAveragePool): host: on the device"),
              std::string::npos)
        << e.what();
  }

  ctx = Context{};
  ctx.options.allow_errata = true;  // GatiPool global_average, no stages
  ctx.graph = conv_pool_fc(0.004f, false);
  assign_devices(ctx);
  EXPECT_TRUE(ctx.on_device("gap"));
}

// int8 [1, 8, 1, 1] -> Flatten -> QGemm: the flatten is folded into the FC (FC.Flatten) unless its
// own output is a graph output too (then nothing on the device would write it: the host does).
TEST(AssignDevices, FlattenThatIsAlsoAGraphOutputRunsOnTheHost) {
  for (const bool flat_out : {false, true}) {
    GraphBuilder b;
    b.input("x", ir::DType::kInt8, {1, 8, 1, 1});
    b.value("flat", ir::DType::kInt8, {1, 8});
    b.node("Flatten", "", {"x"}, {"flat"}, "flatten");
    b.value("y", ir::DType::kInt8, {1, 4});
    ir::Node& fc = b.node(
        "QGemm", "com.microsoft",
        {"flat", b.f32("xs", 0.1f), b.i8("z", 0),
         b.constant<std::int8_t>("w", ir::DType::kInt8, {4, 8}, std::vector<std::int8_t>(32, 1)),
         b.f32("ws", 0.01f), "z", "", b.f32("ys", 0.05f), "z"},
        {"y"}, "fc");
    fc.attributes["transB"] = std::int64_t{1};
    b.g.outputs = flat_out ? std::vector<std::string>{"flat", "y"} : std::vector<std::string>{"y"};
    Context ctx;
    ctx.graph = b.g;
    assign_devices(ctx);
    EXPECT_TRUE(ctx.on_device("fc"));
    EXPECT_EQ(ctx.on_device("flatten"), !flat_out) << ctx.placement["flatten"].reason;
    if (flat_out) {
      EXPECT_NE(ctx.placement["flatten"].reason.find("its output is a graph output"),
                std::string::npos);
    }
  }
}

TEST(AssignDevices, LeakyReluWithTiesWhoseResultLeavesRunsOnTheHost) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 8, 4, 4});
  auto c = b.qconv("conv", "x", 0.02f, std::vector<std::int8_t>(8 * 8 * 9, 1), {8, 8, 3, 3}, 0.01f,
                   0.05f, {}, {1, 1, 1, 1});
  const auto l = b.qleaky("leaky", c, "conv_ys", "conv_yz", 0.05f, 0.1f);
  b.g.outputs = {l};
  // s_x = s_y: x = -5, -15, ... are exact ties; the EltWise form's table differs from
  // onnxruntime's on some of them (leaky_relu_mismatches, computed independently here).
  EXPECT_GT(leaky_relu_mismatches(0.05, 0.05, 0.1), 0);
  EXPECT_EQ(leaky_relu_mismatches(0.05, 0.05 * (1 + 1.0 / 1024), 0.1), 0);  // npukit quantize's
  Context ctx;
  ctx.graph = b.g;
  assign_devices(ctx);
  EXPECT_EQ(ctx.placement.at("leaky").placement, Placement::kHost);
  EXPECT_EQ(ctx.placement.at("conv").placement, Placement::kDevice);
  EXPECT_NE(ctx.placement.at("leaky").reason.find("onnxruntime's lookup table"), std::string::npos);
  // Read by a device op, it stays (moving it would cut the segment).
  b.value("m", ir::DType::kInt8, {1, 8, 3, 3});
  b.node("MaxPool", "", {l}, {"m"}, "pool").attributes["kernel_shape"] =
      std::vector<std::int64_t>{2, 2};
  b.g.outputs = {"m"};
  Context chain;
  chain.graph = b.g;
  assign_devices(chain);
  EXPECT_EQ(chain.placement.at("leaky").placement, Placement::kDevice);
}

}  // namespace
}  // namespace npukit::compiler
