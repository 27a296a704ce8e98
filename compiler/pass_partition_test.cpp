// partition: the ordered host/device segments, a segment index per node, and the cost rule that
// keeps small device islands on the host.
#include "common/error.h"
#include "compiler/passes.h"
#include "compiler/test_graphs.h"
#include "isa/host_layout.h"

#include <gtest/gtest.h>

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;

// x (int8) -> conv1 -> DequantizeLinear -> Softmax -> QuantizeLinear -> conv2 -> y, C channels of
// HxW: a host op in the middle of two convs.
ir::Graph host_op_in_the_middle(std::int64_t c, std::int64_t h) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, c, h, h});
  const std::vector<std::int8_t> w(static_cast<std::size_t>(c * c * 9), 1);
  auto c1 = b.qconv("conv1", "x", 0.1f, w, {c, c, 3, 3}, 0.01f, 0.2f, {}, {1, 1, 1, 1});
  b.value("f", ir::DType::kFloat32, {1, c, h, h});
  b.node("DequantizeLinear", "", {c1, "conv1_ys"}, {"f"}, "dq");
  b.value("sm", ir::DType::kFloat32, {1, c, h, h});
  b.node("Softmax", "", {"f"}, {"sm"}, "softmax");
  b.value("q", ir::DType::kInt8, {1, c, h, h});
  b.node("QuantizeLinear", "", {"sm", b.f32("s", 0.01f)}, {"q"}, "requant");
  auto c2 = b.qconv("conv2", "q", 0.01f, w, {c, c, 3, 3}, 0.01f, 0.2f, {}, {1, 1, 1, 1});
  b.g.outputs = {c2};
  return b.g;
}

Context partitioned(const ir::Graph& g) {
  Context ctx;
  ctx.graph = g;
  assign_devices(ctx);
  partition(ctx);
  return ctx;
}

TEST(Partition, AHostOpInTheMiddleIsAHostSegmentBetweenTwoDeviceSegments) {
  // 64 channels of 16x16: each conv is 9.4 M MACs (~21 k device cycles at 77 % of 576 MAC per
  // cycle), its transfers 16 KB each way (~8.7 k cycles): both cuts pay for themselves.
  const Context ctx = partitioned(host_op_in_the_middle(64, 16));
  ASSERT_EQ(ctx.segments.size(), 3u);
  EXPECT_EQ(ctx.segments[0].placement, Placement::kDevice);
  EXPECT_EQ(ctx.segments[1].placement, Placement::kHost);
  EXPECT_EQ(ctx.segments[2].placement, Placement::kDevice);
  EXPECT_EQ(ctx.segment_of.at("conv1"), 0);
  EXPECT_EQ(ctx.segment_of.at("dq"), 1);
  EXPECT_EQ(ctx.segment_of.at("softmax"), 1);
  EXPECT_EQ(ctx.segment_of.at("requant"), 1);
  EXPECT_EQ(ctx.segment_of.at("conv2"), 2);
  EXPECT_EQ(ctx.segments[1].nodes, (std::vector<std::string>{"dq", "softmax", "requant"}));
  // MACs: 16 * 16 * 64 outputs of 64 * 9 products each, per conv; all on the device.
  const std::uint64_t per_conv = 16ull * 16 * 64 * 64 * 9;
  EXPECT_EQ(ctx.segments[0].macs, per_conv);
  EXPECT_EQ(ctx.model_macs, 2 * per_conv);
  EXPECT_EQ(ctx.device_macs, 2 * per_conv);
  // conv2's segment reads one activation from the host and sends one back (the model output):
  // 64 channels of 16x16 in the 9,8,8 layout are 16384 bytes each way.
  const std::uint64_t bytes = isa::activation_bytes(64, 16, 16, isa::kArch9x8x8);
  EXPECT_EQ(ctx.segments[2].bytes_in, bytes);
  EXPECT_EQ(ctx.segments[2].bytes_out, bytes);
  EXPECT_EQ(ctx.segments[2].transfer_cycles,
            segment_start_cycles() + dwp_cycles(bytes) + dispatch_cycles(bytes));
  EXPECT_GT(ctx.segments[2].compute_cycles, ctx.segments[2].transfer_cycles);
  EXPECT_NE(ctx.segments[1].why.find("cut: softmax (Softmax): host: Softmax has no Gati lowering"),
            std::string::npos)
      << ctx.segments[1].why;
}

TEST(Partition, ASmallDeviceIslandStaysOnTheHost) {
  // 8 channels of 12x12: conv2 is 82944 MACs (~187 cycles at 77 % of 576 MACs per cycle) plus
  // one layer and one pass (~217 cycles, gati.md 14.14's fit) and its 72 DRAM beats, ~476 device
  // cycles, while moving its 1152-byte input and output and starting it costs ~672: it goes back
  // to the host, and says why.
  const Context ctx = partitioned(host_op_in_the_middle(8, 12));
  EXPECT_TRUE(ctx.on_device("conv1"));
  EXPECT_FALSE(ctx.on_device("conv2"));
  EXPECT_NE(ctx.placement.at("conv2").reason.find("small device island"), std::string::npos)
      << ctx.placement.at("conv2").reason;
  ASSERT_EQ(ctx.segments.size(), 2u);
  EXPECT_EQ(ctx.segments[0].placement, Placement::kDevice);
  EXPECT_EQ(ctx.segments[1].placement, Placement::kHost);
  EXPECT_EQ(ctx.device_macs * 2, ctx.model_macs);
}

TEST(Partition, NodesAreSortedSoEachSegmentIsContiguous) {
  // A host op on a side branch that the graph lists first: a -> Softmax (host) and x -> conv
  // (device), joined on the host. Graph order host, device, host becomes device, host.
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 64, 16, 16});
  b.input("a", ir::DType::kFloat32, {1, 4});
  b.value("sa", ir::DType::kFloat32, {1, 4});
  b.node("Softmax", "", {"a"}, {"sa"}, "side");
  auto c = b.qconv("conv", "x", 0.1f, std::vector<std::int8_t>(64 * 64 * 9, 1), {64, 64, 3, 3},
                   0.01f, 0.2f, {}, {1, 1, 1, 1});
  b.value("f", ir::DType::kFloat32, {1, 64, 16, 16});
  b.node("DequantizeLinear", "", {c, "conv_ys"}, {"f"}, "dq");
  b.g.outputs = {"f", "sa"};
  const Context ctx = partitioned(b.g);
  ASSERT_EQ(ctx.segments.size(), 3u);
  EXPECT_EQ(ctx.segments[0].nodes, (std::vector<std::string>{"side"}));
  EXPECT_EQ(ctx.segments[1].nodes, (std::vector<std::string>{"conv"}));
  EXPECT_EQ(ctx.segments[2].nodes, (std::vector<std::string>{"dq"}));
  std::vector<std::string> order;
  for (const auto& n : ctx.graph.nodes) order.push_back(n.name);
  EXPECT_EQ(order, (std::vector<std::string>{"side", "conv", "dq"}));
}

TEST(Partition, MacsOfConvsAndFullyConnectedLayers) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 8, 10, 10});
  // Depthwise 3x3 stride 2: 5x5 outputs per channel, 9 products each.
  auto c = b.qconv("dw", "x", 0.1f, std::vector<std::int8_t>(8 * 9, 1), {8, 1, 3, 3}, 0.01f, 0.2f,
                   {}, {1, 1, 1, 1}, 2, 8);
  EXPECT_EQ(node_macs(b.g, b.g.nodes.back()), 8u * 5 * 5 * 9);
  (void)c;
}

}  // namespace
}  // namespace npukit::compiler
