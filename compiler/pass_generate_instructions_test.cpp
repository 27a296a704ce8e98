// Golden instruction fields: one conv and one conv + pool program compiled for 9,4,4, every field
// value worked out by hand from the RTL-confirmed rules of gati.md 3.2, 4, 6 and 14.9/14.10 (not
// from the compiler's code). The example is the spec's: 6 output channels of 6x6 on 9,4,4, whose
// dispatch is 320 bytes.
#include "common/error.h"
#include "compiler/compiler.h"
#include "compiler/test_graphs.h"
#include "isa/gml.h"

#include <gtest/gtest.h>

namespace npukit::compiler {
namespace {

using isa::Field;
using isa::Opcode;
using testing::GraphBuilder;

ir::Graph conv_6x6(bool with_pool) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 3, 6, 6});
  // M = 0.5 * 0.01 / 0.25 = 0.02: 0.02 * 2^20 = 20971.52 -> 20972 (2^21 would need 41943).
  auto y = b.qconv("conv1", "x", 0.5f, std::vector<std::int8_t>(6 * 3 * 9, 1), {6, 3, 3, 3}, 0.01f,
                   0.25f, {1, 2, 3, 4, 5, 6}, {1, 1, 1, 1});
  y = b.relu("relu1", y);
  if (with_pool) y = b.maxpool("pool1", y, 2, 2);
  b.g.outputs = {y};
  return b.g;
}

TEST(GenerateInstructions, SingleConvOn9x4x4) {
  CompileOptions opt;
  opt.arch = isa::kArch9x4x4;
  const CompileResult r = compile(conv_6x6(false), opt);
  ASSERT_EQ(r.program.instructions.size(), 4u);  // CONV, OutputBlock, TailBlock, START
  const auto& in = r.program.instructions;
  // DRAM map: instructions (4+1)*32 = 160 (gati.md 4: Start 32, End 160 for 4 instructions);
  // weights kitr*citr*ROW*COLS*N_SA = 2*1*9*4*4 = 288 bytes at 160; bias
  // ceil_mod(ceil_mod(6,4)*4, 32) = 32 at 448; input C'P' = 4*ceil_mod(36,8) = 160 at 480;
  // output 8*40 = 320 at 640.
  const auto& conv = in[0];
  EXPECT_EQ(conv.opcode(), Opcode::CONV);
  EXPECT_EQ(conv.get(Field::CONV_IW), 6u);
  EXPECT_EQ(conv.get(Field::CONV_IH), 6u);
  EXPECT_EQ(conv.get(Field::CONV_IC), 3u);
  EXPECT_EQ(conv.get(Field::CONV_KN), 6u);
  EXPECT_EQ(conv.get(Field::CONV_KW), 3u);
  EXPECT_EQ(conv.get(Field::CONV_KH), 3u);
  EXPECT_EQ(conv.get(Field::CONV_Stride), 1u);
  EXPECT_EQ(conv.get(Field::CONV_PadLeft), 1u);
  EXPECT_EQ(conv.get(Field::CONV_PadRight), 1u);
  EXPECT_EQ(conv.get(Field::CONV_PadTop), 1u);
  EXPECT_EQ(conv.get(Field::CONV_PadBottom), 1u);
  EXPECT_EQ(conv.get(Field::CONV_StartRowSkip), 0u);
  EXPECT_EQ(conv.get(Field::CONV_EndRowSkip), 0u);
  EXPECT_EQ(conv.get(Field::CONV_WeightStartAddress), 160u);
  EXPECT_EQ(conv.get(Field::CONV_WeightEndAddress), 448u);
  EXPECT_EQ(conv.get(Field::CONV_ImageStartAddress), 480u);
  EXPECT_EQ(conv.get(Field::CONV_ImageEndAddress), 640u);
  EXPECT_EQ(conv.get(Field::CONV_Im2colPrefetch), 1u);  // 36 < 1024
  EXPECT_EQ(conv.get(Field::CONV_KC), 3u);
  EXPECT_EQ(conv.get(Field::CONV_ConvType), 0u);
  EXPECT_EQ(conv.get(Field::CONV_ChannelDuplicate), 0u);

  const auto& out = in[1];
  EXPECT_EQ(out.opcode(), Opcode::OutputBlock);
  EXPECT_EQ(out.get(Field::OutputBlock_OutputAddr), 640u);
  EXPECT_EQ(out.get(Field::OutputBlock_ChannelItr), 1u);       // ceil(3/4)
  EXPECT_EQ(out.get(Field::OutputBlock_KernelItr), 2u);        // ceil(6/4)
  EXPECT_EQ(out.get(Field::OutputBlock_ImageDimOutput), 40u);  // ceil_mod(36, 8)
  EXPECT_EQ(out.get(Field::OutputBlock_ImageDimAcc), 36u);     // ceil_mod(36, max(1, 8/4))
  EXPECT_EQ(out.get(Field::OutputBlock_AccEn), 0u);            // IC 3 <= N_SA 4
  EXPECT_EQ(out.get(Field::OutputBlock_OnChipAcc), 1u);
  EXPECT_EQ(out.get(Field::OutputBlock_OH), 6u);
  EXPECT_EQ(out.get(Field::OutputBlock_OW), 6u);
  EXPECT_EQ(out.get(Field::OutputBlock_OpWidth), 1u);
  EXPECT_EQ(out.get(Field::OutputBlock_FlatController), 0u);
  EXPECT_EQ(out.get(Field::OutputBlock_AccumulantReadFirst), 0u);
  EXPECT_EQ(out.get(Field::OutputBlock_DispatchEn), 1u);
  // "conv1" = 99 + 111 + 110 + 118 + 49.
  EXPECT_EQ(out.get(Field::OutputBlock_DispatchID), 487u);
  EXPECT_EQ(out.get(Field::OutputBlock_AccumulantAddr) % 32, 0u);
  // Dispatch size ImageDimOutput * KernelItr * N_SA * OpWidth = 40 * 2 * 4 = 320 (gati.md 5.5).
  EXPECT_EQ(r.manifest.device_outputs().at(0).bytes, 320u);

  const auto& tail = in[2];
  EXPECT_EQ(tail.opcode(), Opcode::TailBlock);
  EXPECT_EQ(tail.get(Field::TailBlock_BiasEn), 1u);
  EXPECT_EQ(tail.get(Field::TailBlock_BiasWidth), 32u);
  EXPECT_EQ(tail.get(Field::TailBlock_BiasStartAddress), 448u);
  EXPECT_EQ(tail.get(Field::TailBlock_BiasEndAddress), 480u);
  EXPECT_EQ(tail.get(Field::TailBlock_QuantEn), 1u);
  EXPECT_EQ(tail.get(Field::TailBlock_QuantScale), 20972u);
  EXPECT_EQ(tail.get(Field::TailBlock_QuantShift), 20u);
  EXPECT_EQ(tail.get(Field::TailBlock_ActEn), 1u);
  EXPECT_EQ(tail.get(Field::TailBlock_ActType), 0u);
  EXPECT_EQ(tail.get(Field::TailBlock_GblPoolEn), 0u);

  EXPECT_EQ(in[3].opcode(), Opcode::START);
  EXPECT_EQ(in[3].get(Field::START_LayerNumber), 1u);
  EXPECT_EQ(in[3].get(Field::START_TotalLayers), 1u);

  // The GML: instruction packet at 0 with zeroth {32, 160}, then weights and bias at their
  // addresses (gati.md 4 order).
  const isa::GmlProgram gml = isa::decode_gml(r.gml);
  EXPECT_EQ(gml.instructions, r.program.instructions);
  ASSERT_EQ(gml.blobs.size(), 2u);
  EXPECT_EQ(gml.blobs[0].address, 160u);
  EXPECT_EQ(gml.blobs[0].data.size(), 288u);
  EXPECT_EQ(gml.blobs[1].address, 448u);
  EXPECT_EQ(gml.blobs[1].data.size(), 32u);
  EXPECT_TRUE(isa::lint_instruction_list(gml.instructions).empty());
  const std::size_t header = 12;
  EXPECT_EQ(r.gml[header + 24], 0);  // zeroth End = 160 = 0x000000A0 in stream bytes 24..27
  EXPECT_EQ(r.gml[header + 27], 0xA0);
  EXPECT_EQ(r.gml[header + 31], 0x20);  // Start = 32 in bytes 28..31

  // Manifest: the input tensor's address and size for the runtime.
  ASSERT_EQ(r.manifest.device_inputs().size(), 1u);
  EXPECT_EQ(r.manifest.device_inputs()[0].address, 480u);
  EXPECT_EQ(r.manifest.device_inputs()[0].bytes, 160u);
  EXPECT_EQ(r.manifest.device_outputs()[0].address, 640u);
  EXPECT_EQ(r.manifest.device_outputs()[0].dispatch_id, 487u);
  EXPECT_EQ(r.manifest.dram_bytes, 960u);
}

TEST(GenerateInstructions, ConvThenPoolOn9x8x8) {
  const CompileResult r = compile(conv_6x6(true), {});
  // Two megablocks: CONV, OutputBlock, TailBlock, START(1,2), POOL, OutputBlock, START(2,2);
  // the POOL after a conv has no TailBlock (gati.md 3.2).
  const auto& in = r.program.instructions;
  ASSERT_EQ(in.size(), 7u);
  EXPECT_EQ(in[3].get(Field::START_LayerNumber), 1u);
  EXPECT_EQ(in[3].get(Field::START_TotalLayers), 2u);
  EXPECT_EQ(in[4].opcode(), Opcode::POOL);
  EXPECT_EQ(in[5].opcode(), Opcode::OutputBlock);
  EXPECT_EQ(in[6].opcode(), Opcode::START);
  EXPECT_EQ(in[6].get(Field::START_LayerNumber), 2u);
  // 9,8,8: instructions (7+1)*32 = 256; weights 1*1*9*8*8 = 576 at 256; bias
  // ceil_mod(8*4, 32) = 32 at 832; I/O arena at 864: input C'P' = 8*ceil_mod(36,4) = 288 at 864,
  // conv output 8*36 = 288 at 1152, pool output (input dead by then) 8*ceil_mod(9,4) = 96 at 864.
  EXPECT_EQ(in[0].get(Field::CONV_WeightStartAddress), 256u);
  EXPECT_EQ(in[0].get(Field::CONV_WeightEndAddress), 832u);
  EXPECT_EQ(in[2].get(Field::TailBlock_BiasStartAddress), 832u);
  EXPECT_EQ(in[0].get(Field::CONV_ImageStartAddress), 864u);
  EXPECT_EQ(in[0].get(Field::CONV_ImageEndAddress), 1152u);
  EXPECT_EQ(in[1].get(Field::OutputBlock_OutputAddr), 1152u);
  EXPECT_EQ(in[1].get(Field::OutputBlock_KernelItr), 1u);
  EXPECT_EQ(in[1].get(Field::OutputBlock_ImageDimOutput), 36u);  // unpooled OH*OW (mega pool)
  EXPECT_EQ(in[1].get(Field::OutputBlock_DispatchEn), 0u);
  const auto& pool = in[4];
  EXPECT_EQ(pool.get(Field::POOL_IW), 6u);
  EXPECT_EQ(pool.get(Field::POOL_IH), 6u);
  EXPECT_EQ(pool.get(Field::POOL_IC), 6u);
  EXPECT_EQ(pool.get(Field::POOL_ImageStartAddress), 1152u);
  EXPECT_EQ(pool.get(Field::POOL_ImageEndAddress), 1440u);
  EXPECT_EQ(pool.get(Field::POOL_PoolType), 0u);
  EXPECT_EQ(pool.get(Field::POOL_PoolWidth), 2u);
  EXPECT_EQ(pool.get(Field::POOL_PoolHeight), 2u);
  EXPECT_EQ(pool.get(Field::POOL_PoolStrideWidth), 2u);
  EXPECT_EQ(pool.get(Field::POOL_PoolStrideHeight), 2u);
  EXPECT_EQ(pool.get(Field::POOL_PoolCeil), 0u);
  EXPECT_EQ(pool.get(Field::POOL_PoolScale), 0u);
  EXPECT_EQ(pool.get(Field::POOL_PoolShift), 0u);
  EXPECT_EQ(pool.get(Field::POOL_Im2colPrefetch), 1u);
  const auto& pout = in[5];
  EXPECT_EQ(pout.get(Field::OutputBlock_OutputAddr), 864u);
  EXPECT_EQ(pout.get(Field::OutputBlock_ChannelItr), 1u);
  EXPECT_EQ(pout.get(Field::OutputBlock_KernelItr), 1u);  // ceil(6/8)
  EXPECT_EQ(pout.get(Field::OutputBlock_AccEn), 0u);
  EXPECT_EQ(pout.get(Field::OutputBlock_OH), 3u);
  EXPECT_EQ(pout.get(Field::OutputBlock_OW), 3u);
  EXPECT_EQ(pout.get(Field::OutputBlock_ImageDimOutput), 12u);  // ceil_mod(9, 4)
  EXPECT_EQ(pout.get(Field::OutputBlock_ImageDimAcc), 9u);      // ceil_mod(9, max(1, 4/4))
  EXPECT_EQ(pout.get(Field::OutputBlock_DispatchEn), 1u);
  EXPECT_EQ(pout.get(Field::OutputBlock_DispatchID), 112u + 111 + 111 + 108 + 49);  // "pool1"
}

TEST(GenerateInstructions, KernelSplitPiecesUseRowSkipsAndAccumulants) {
  // 5x3 kernel, pads 0 top/bottom: piece 1 = rows 0..2 with EndRowSkip 2 (pads [0, 1, -2, 1]),
  // int32 output (QuantEn 0, OpWidth 4); piece 2 = rows 3..4 with StartRowSkip 3, reading piece
  // 1's sums (AccumulantReadFirst, AccumulantAddr = piece 1's OutputAddr).
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 6, 9, 7});
  auto y = b.qconv("conv", "x", 0.5f, std::vector<std::int8_t>(5 * 6 * 15, 1), {5, 6, 5, 3}, 0.01f,
                   0.25f, {}, {0, 1, 0, 1});
  b.g.outputs = {y};
  CompileOptions opt;
  opt.arch = isa::kArch9x4x4;
  const CompileResult r = compile(b.g, opt);
  const auto& in = r.program.instructions;
  ASSERT_EQ(in.size(), 8u);
  EXPECT_EQ(in[0].get(Field::CONV_KH), 3u);
  EXPECT_EQ(in[0].get(Field::CONV_PadTop), 0u);
  EXPECT_EQ(in[0].get(Field::CONV_PadBottom), 0u);
  EXPECT_EQ(in[0].get(Field::CONV_StartRowSkip), 0u);
  EXPECT_EQ(in[0].get(Field::CONV_EndRowSkip), 2u);
  EXPECT_EQ(in[1].get(Field::OutputBlock_OpWidth), 4u);
  EXPECT_EQ(in[1].get(Field::OutputBlock_AccumulantReadFirst), 0u);
  EXPECT_EQ(in[2].get(Field::TailBlock_QuantEn), 0u);
  EXPECT_EQ(in[4].get(Field::CONV_KH), 2u);
  EXPECT_EQ(in[4].get(Field::CONV_StartRowSkip), 3u);
  EXPECT_EQ(in[4].get(Field::CONV_EndRowSkip), 0u);
  EXPECT_EQ(in[5].get(Field::OutputBlock_AccumulantReadFirst), 1u);
  EXPECT_EQ(in[5].get(Field::OutputBlock_AccumulantAddr), in[1].get(Field::OutputBlock_OutputAddr));
  EXPECT_EQ(in[5].get(Field::OutputBlock_OpWidth), 1u);
  EXPECT_EQ(in[6].get(Field::TailBlock_QuantEn), 1u);
  // OH = 9 - 5 + 1 = 5, OW = 7: the int32 partials take 4 * C'P' = 4 * 8 * ceil_mod(35, 8) bytes.
  EXPECT_EQ(in[1].get(Field::OutputBlock_OH), 5u);
  EXPECT_EQ(r.program.tensors.at(r.ctx.graph.nodes[0].outputs[0]).bytes, 4u * 8 * 40);
}

TEST(GenerateInstructions, RamsizeOverflowIsAnError) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 64, 400, 400});
  auto y = b.qconv("big", "x", 0.5f, std::vector<std::int8_t>(64 * 64 * 9, 1), {64, 64, 3, 3},
                   0.01f, 0.25f, {}, {1, 1, 1, 1});
  b.g.outputs = {y};
  CompileOptions opt;
  opt.ramsize_mb = 16;
  try {
    compile(b.g, opt);
    FAIL() << "expected a DRAM overflow error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--ramsize is 16 MB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("largest tensor"), std::string::npos) << msg;
  }
  opt.ramsize_mb = 128;
  EXPECT_NO_THROW(compile(b.g, opt));
}

}  // namespace
}  // namespace npukit::compiler
