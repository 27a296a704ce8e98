// The device's byte interface: DWP decoding in any chunking, the start rule (14.4), the
// configuration block, START sequencing, META, and bad programs failing with named errors.
#include "device/device.h"
#include "device/test_programs.h"
#include "isa/dispatch.h"
#include "isa/meta.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <random>

namespace npukit::device {
namespace {

using namespace testing;
using ::testing::HasSubstr;

struct Program {
  Bytes stream;
  std::uint32_t out_addr;
  std::uint32_t out_bytes;
  ConvSpec spec;
  isa::SaArch arch;
};

Program small_program(const isa::SaArch& arch = isa::kArch9x8x8,
                      const std::function<void(ProgramBuilder&)>& edit = nullptr) {
  ConvSpec s;
  s.ic = 5, s.kn = 6, s.ih = 5, s.iw = 6, s.quant_shift = 8, s.dispatch = true,
  s.dispatch_id = 0x1234;
  fill_random(s, 99);
  ProgramBuilder b{arch};
  const std::uint64_t dk = 32 / arch.n_sa;
  const Bytes input = pack_activation(arch, s.ic, 30, s.x);
  const std::uint32_t in_addr = b.alloc(input.size());
  const auto out_bytes = static_cast<std::uint32_t>(up(s.kn, arch.n_sa) * up(s.oh() * s.ow(), dk));
  const std::uint32_t out_addr = b.alloc(out_bytes);
  b.add_conv(s, in_addr, out_addr, b.alloc(4096));
  b.finish();
  if (edit) edit(b);
  return {b.stream(in_addr, input), out_addr, out_bytes, s, arch};
}

std::unique_ptr<Device> make_device(const isa::SaArch& arch = isa::kArch9x8x8,
                                    std::uint64_t dram = 8ull << 20) {
  DeviceConfig cfg;
  cfg.arch = arch;
  cfg.dram_bytes = dram;
  return std::make_unique<Device>(cfg);
}

TEST(Device, RunsOnTheStartPacketAndDispatches) {
  const Program p = small_program();
  auto dev = make_device();
  dev->receive_dwp(p.stream);
  EXPECT_EQ(dev->stats().runs, 1u);
  EXPECT_TRUE(dev->dwp_idle());
  const auto frames = isa::parse_dispatch_frames(dev->take_dispatch_output());
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].id, 0x1234u);
  EXPECT_EQ(unpack_activation(p.arch, p.spec.kn, 30, frames[0].payload), ref_conv(p.spec));
  EXPECT_TRUE(dev->take_dispatch_output().empty());  // taken once
  const auto& layer = dev->stats().layers.at(0);
  EXPECT_EQ(layer.ack_order, (std::vector<std::string>{"CONV", "TailBlock", "OutputBlock"}));
  EXPECT_TRUE(layer.dispatched);
  EXPECT_GT(dev->stats().total_cycles, layer.timing.cycles);
}

TEST(Device, AnyChunkingGivesTheSameResult) {
  const Program p = small_program();
  auto whole = make_device();
  whole->receive_dwp(p.stream);
  const Bytes expected = whole->take_dispatch_output();
  std::mt19937 rng(5);
  for (int trial = 0; trial < 6; ++trial) {
    auto dev = make_device();
    std::size_t pos = 0;
    while (pos < p.stream.size()) {
      const std::size_t n = trial == 0 ? 1 : std::uniform_int_distribution<std::size_t>(1, 97)(rng);
      const std::size_t take = std::min(n, p.stream.size() - pos);
      dev->receive_dwp(ByteSpan(p.stream).subspan(pos, take));
      pos += take;
    }
    EXPECT_EQ(dev->take_dispatch_output(), expected) << "trial " << trial;
    EXPECT_EQ(dev->stats().runs, 1u);
  }
}

TEST(Device, BareStartPacketIsIgnored) {
  auto dev = make_device();
  Bytes s;
  isa::append_dwp_start(s);
  dev->receive_dwp(s);
  EXPECT_EQ(dev->stats().runs, 0u);
  EXPECT_EQ(dev->stats().ignored_starts, 1u);
  // A second start right after a run is also ignored: only a data packet re-arms it.
  const Program p = small_program();
  dev->receive_dwp(p.stream);
  dev->receive_dwp(s);
  EXPECT_EQ(dev->stats().runs, 1u);
  EXPECT_EQ(dev->stats().ignored_starts, 2u);
}

TEST(Device, MetaResetDispatchAndPayloadSize) {
  auto dev = make_device();
  Bytes meta;
  isa::append_meta_reset(meta);
  isa::append_meta_dispatch(meta, isa::DispatchTarget::kUart);
  isa::append_meta_payload_size(meta, 1234);
  for (std::uint8_t b : meta) dev->receive_meta(ByteSpan(&b, 1));  // byte by byte
  EXPECT_EQ(dev->dispatch_channel(), DispatchChannel::kUart);
  isa::append_meta_reset(meta);
  dev->receive_meta(meta);
  EXPECT_EQ(dev->dispatch_channel(), DispatchChannel::kRah);
}

TEST(Device, DramIsLazyAndReadsZeroWhereNothingWasWritten) {
  Dram d(512ull << 20);
  EXPECT_EQ(d.allocated_bytes(), 0u);
  EXPECT_EQ(d.read_u8(123456789, "t"), 0);
  d.write_be32(0x1000, 0xDEADBEEF, "t");
  EXPECT_EQ(d.read_be32(0x1000, "t"), 0xDEADBEEFu);
  EXPECT_EQ(d.allocated_bytes(), Dram::kPageBytes);
  // a write across a page boundary
  Bytes big(Dram::kPageBytes + 100, 7);
  d.write(Dram::kPageBytes - 50, big, "t");
  EXPECT_EQ(d.read_u8(Dram::kPageBytes * 2 + 49, "t"), 7);
  EXPECT_EQ(d.read_u8(Dram::kPageBytes * 2 + 50, "t"), 0);
  try {
    d.read(d.size() - 4, 8, "layer 3 CONV image read");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("layer 3 CONV image read"));
    EXPECT_THAT(e.what(), HasSubstr("0x1ffffffc"));
  }
}

TEST(Device, ActivationLayoutMatchesTheSpecFormula) {
  // gati.md 6.1 worked numbers: 9,4,4 -> dk 8 (NHW8C4), 9,8,8 -> dk 4, 16,1,16 -> dk 2.
  const auto l = ActivationLayout::for_arch(isa::kArch9x4x4, 6, 36);
  EXPECT_EQ(l.bytes(), 8u * 40u);  // C' 8 x P' 40 = 320 (the 5.5 example)
  EXPECT_EQ(l.offset(0, 0), 0u);
  EXPECT_EQ(l.offset(1, 0), 8u);
  EXPECT_EQ(l.offset(0, 8), 32u);
  EXPECT_EQ(l.offset(5, 9), 1u * 4 * 40 + 32 + 1 * 8 + 1);
  EXPECT_EQ(ActivationLayout::for_arch(isa::kArch16x1x16, 3, 5).bytes(), 16u * 6u);
}

// ---- bad programs ------------------------------------------------------------------------------

void expect_error(const Bytes& stream, std::initializer_list<const char*> parts,
                  const isa::SaArch& arch = isa::kArch9x8x8, std::uint64_t dram = 8ull << 20) {
  auto dev = make_device(arch, dram);
  try {
    dev->receive_dwp(stream);
    FAIL() << "no error; expected one mentioning " << *parts.begin();
  } catch (const Error& e) {
    for (const char* part : parts) EXPECT_THAT(e.what(), HasSubstr(part));
  }
}

TEST(DeviceErrors, UnknownOpcodeNamesTheInstruction) {
  Program p = small_program(isa::kArch9x8x8);
  // instruction 0 is at stream byte 12 (header) + 32 (zeroth); its last byte holds the opcode.
  p.stream[12 + 32 + 31] = (p.stream[12 + 32 + 31] & 0xF0) | 0xB;
  expect_error(p.stream, {"instruction 0", "opcode 0xb"});
}

TEST(DeviceErrors, SizesThatDisagreeNameTheField) {
  const Program p = small_program(isa::kArch9x8x8, [](ProgramBuilder& b) {
    b.instructions[0].set(Field::CONV_ImageEndAddress,
                          b.instructions[0].get(Field::CONV_ImageEndAddress) + 32);
  });
  expect_error(p.stream, {"layer 1, instruction 0 CONV.ImageEndAddress"});
  const Program q = small_program(
      isa::kArch9x8x8, [](ProgramBuilder& b) { b.instructions[1].set(Field::OutputBlock_OH, 9); });
  expect_error(q.stream, {"OutputBlock.OH"});
  const Program r = small_program(isa::kArch9x8x8, [](ProgramBuilder& b) {
    b.instructions[1].set(Field::OutputBlock_KernelItr, 3);
  });
  expect_error(r.stream, {"OutputBlock.KernelItr"});
  const Program t = small_program(isa::kArch9x8x8, [](ProgramBuilder& b) {
    b.instructions[2].set(Field::TailBlock_BiasEndAddress,
                          b.instructions[2].get(Field::TailBlock_BiasEndAddress) + 32);
  });
  expect_error(t.stream, {"TailBlock.BiasEndAddress"});
  const Program u = small_program(
      isa::kArch9x8x8, [](ProgramBuilder& b) { b.instructions[0].set(Field::CONV_Stride, 5); });
  expect_error(u.stream, {"CONV.Stride", "1 to 4"});
  const Program v = small_program(
      isa::kArch9x8x8, [](ProgramBuilder& b) { b.instructions[0].set(Field::CONV_ConvType, 2); });
  expect_error(v.stream, {"CONV.ConvType", "16,1,16"});
}

TEST(DeviceErrors, AddressOutsideDramNamesTheField) {
  const Program p = small_program(isa::kArch9x8x8, [](ProgramBuilder& b) {
    b.instructions[1].set(Field::OutputBlock_OutputAddr, 0x7FFFFFE0);
  });
  expect_error(p.stream, {"OutputBlock.OutputAddr", "outside"});
  const Program q = small_program(isa::kArch9x8x8, [](ProgramBuilder& b) {
    const std::uint64_t size = b.instructions[0].get(Field::CONV_ImageEndAddress) -
                               b.instructions[0].get(Field::CONV_ImageStartAddress);
    b.instructions[0].set(Field::CONV_ImageStartAddress, 0x7FFFFFE0);
    b.instructions[0].set(Field::CONV_ImageEndAddress, 0x7FFFFFE0 + size);
  });
  expect_error(q.stream, {"CONV.ImageStartAddress", "outside"});
}

TEST(DeviceErrors, LayerThatNeverFinishes) {
  // TotalLayers says 2 but there is only one layer: the board would wait forever.
  const Program p = small_program(isa::kArch9x8x8, [](ProgramBuilder& b) {
    b.instructions.back().set(Field::START_TotalLayers, 2);
  });
  expect_error(p.stream, {"TotalLayers (2)", "wait forever"});
  // No OutputBlock: the megablock's output has nowhere to go.
  const Program q = small_program(
      isa::kArch9x8x8, [](ProgramBuilder& b) { b.instructions.erase(b.instructions.begin() + 1); });
  expect_error(q.stream, {"no OutputBlock"});
  // Two OutputBlocks in one group.
  const Program r = small_program(isa::kArch9x8x8, [](ProgramBuilder& b) {
    b.instructions.insert(b.instructions.begin() + 1, b.instructions[1]);
  });
  expect_error(r.stream, {"second OutputBlock"});
}

TEST(DeviceErrors, InstructionRegionBeyondWhatWasWritten) {
  Program p = small_program();
  // ZerothEndAddress is stream bytes 12+24..12+27 (bits [63:32]); make it 32 instructions longer.
  const std::uint32_t end = load_be32(&p.stream[12 + 24]);
  store_be32(&p.stream[12 + 24], end + 32 * 32);
  expect_error(p.stream, {"beyond what the host wrote"});
}

TEST(DeviceErrors, MalformedDwpPackets) {
  Bytes s;
  append_be32(s, 0xFFFFFFFF);
  append_be32(s, 40);  // not a multiple of 32
  append_be32(s, 0);
  expect_error(s, {"stream byte 0", "DS = 40"});
  Bytes t;
  append_be32(t, 0xFFFFFFFF);
  append_be32(t, 64);
  append_be32(t, 0x10000);
  expect_error(t, {"outside"}, isa::kArch9x8x8, 0x10000);
  Bytes u;
  append_be32(u, 0xFFFFFFFF);
  append_be32(u, 32);
  append_be32(u, 0x11);
  expect_error(u, {"not 32-byte aligned"});
}

TEST(DeviceErrors, StartWithoutProgram) {
  Bytes s;
  isa::append_dwp_packet(s, 0x1000, Bytes(32, 1));
  isa::append_dwp_start(s);
  expect_error(s, {"zeroth instruction", "never written"});
}

TEST(DeviceErrors, DeviceStaysUsableAfterAnError) {
  const Program bad = small_program(
      isa::kArch9x8x8, [](ProgramBuilder& b) { b.instructions[0].set(Field::CONV_Stride, 0); });
  auto dev = make_device();
  EXPECT_THROW(dev->receive_dwp(bad.stream), Error);
  const Program good = small_program();
  dev->receive_dwp(good.stream);
  EXPECT_EQ(dev->stats().runs, 1u);
}

}  // namespace
}  // namespace npukit::device
