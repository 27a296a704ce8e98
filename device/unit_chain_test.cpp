// Unit chains (device/block.h UnitChain): a kernel split's CONV pieces whose work units run unit
// by unit instead of layer after layer. Each program here runs on two devices, one with chains
// and one without (DeviceConfig::unit_chains), and every byte of DRAM, every dispatch frame and
// every error must be the same; the resnet-like chain is also checked against plain NCHW loops
// (device/test_programs.h). The variants put each access the chain must respect in the way: a
// piece's input, weights or bias in a waiting piece's output, a dispatch, an output over waiting
// partial sums at another offset, a throw in the middle, and the thread count; and they check
// when a piece may take the previous piece's sums from the tile (carried), every bias with them.
#include "common/parallel.h"
#include "common/test_support/alloc_counter.h"
#include "device/conv_kernels.h"
#include "device/device.h"
#include "device/test_programs.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>

namespace npukit::device {
namespace {

using namespace testing;

const isa::SaArch kArch = isa::kArch9x8x8;
constexpr std::uint64_t kDram = 16ull << 20;
// Two int32 partial-sum regions, as the compiler places a stem's: the pieces ping-pong.
constexpr std::uint32_t kRegion1 = 0x400000, kRegion2 = 0x480000;

// A piece of a 72-channel 20x20 conv (400 pixels: 7 x 2 work units of the GEMM form): int32
// partial sums (OpWidth 4, QuantEn 0), or, for the last, int8 after the quantizer and ReLU.
ConvSpec piece(std::uint32_t seed, bool first, bool last) {
  ConvSpec s;
  s.ic = 8, s.ih = 20, s.iw = 20, s.kn = 72;
  fill_random(s, seed);
  s.bias_en = first;
  s.read_first = !first;
  s.quant_en = last;
  s.quant_scale = 3, s.quant_shift = 14;
  s.act_en = last;
  s.op_width = last ? 1 : 4;
  return s;
}

struct Piece {
  ConvSpec spec;
  std::uint32_t out_addr = 0, acc_addr = 0;
  std::optional<std::uint32_t> image_addr;  // default: its own input, a blob
};

struct Program {
  ProgramBuilder builder{kArch};
  std::uint32_t first_input_addr = 0;
  Bytes first_input;
};

// The pieces in order; `edit` may change any instruction of the assembled program.
Program assemble(const std::vector<Piece>& pieces,
                 const std::function<void(ProgramBuilder&)>& edit = {}) {
  Program p;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const Piece& pc = pieces[i];
    const Bytes input = pack_activation(kArch, pc.spec.ic, pc.spec.ih * pc.spec.iw, pc.spec.x);
    std::uint32_t in_addr = 0;
    if (pc.image_addr) {
      in_addr = *pc.image_addr;
    } else if (i == 0) {
      in_addr = p.builder.alloc(input.size());
      p.first_input = input;
      p.first_input_addr = in_addr;
    } else {
      in_addr = p.builder.add_blob(input);
    }
    p.builder.add_conv(pc.spec, in_addr, pc.out_addr, pc.acc_addr);
  }
  if (edit) edit(p.builder);
  p.builder.finish();
  return p;
}

struct Outcome {
  Bytes dram, dispatch;
  std::string error;
  std::vector<LayerStats> layers;
};

Outcome run(const Program& p, bool chains) {
  DeviceConfig cfg;
  cfg.arch = kArch;
  cfg.dram_bytes = kDram;
  cfg.unit_chains = chains;
  Device dev(cfg);
  Outcome o;
  try {
    dev.receive_dwp(p.builder.stream(p.first_input_addr, p.first_input));
  } catch (const Error& e) {
    o.error = e.what();
  }
  o.dram = dev.dram().read(0, kDram, "test");
  o.dispatch = dev.take_dispatch_output();
  o.layers = dev.stats().layers;
  return o;
}

// Runs with and without chains; every byte must agree. Returns the chained run.
Outcome expect_same_bytes(const Program& p, const std::string& what) {
  const Outcome off = run(p, false), on = run(p, true);
  EXPECT_EQ(on.error, off.error) << what;
  EXPECT_TRUE(on.dram == off.dram) << what << ": DRAM differs with unit chains";
  EXPECT_EQ(on.dispatch, off.dispatch) << what;
  for (const LayerStats& l : off.layers) EXPECT_FALSE(l.chained) << what;
  return on;
}

// One flag of every layer's stats.
std::vector<bool> flags(const Outcome& o, bool LayerStats::*flag) {
  std::vector<bool> v;
  for (const LayerStats& l : o.layers) v.push_back(l.*flag);
  return v;
}
std::vector<bool> chained(const Outcome& o) { return flags(o, &LayerStats::chained); }

// Whether this CPU's level has the row writer the chains need (not the scalar level).
bool chains_possible() { return conv_kernels::has_dense_conv_rows(); }

// The resnet stem's pattern: 1 -> R1, 2: R1 -> R2, 3: R2 -> R1, 4: R1 -> int8 over R2's start.
std::vector<Piece> stem_pieces() {
  return {{piece(11, true, false), kRegion1, 0, std::nullopt},
          {piece(12, false, false), kRegion2, kRegion1, std::nullopt},
          {piece(13, false, false), kRegion1, kRegion2, std::nullopt},
          {piece(14, false, true), kRegion2, kRegion1, std::nullopt}};
}

// The stem pattern's bytes with and without chains, and its int8 output (at R2) against plain
// loops, each piece adding its sums to the previous piece's. Returns the chained run.
Outcome expect_stem_equals_loops(const std::vector<Piece>& pieces, const std::string& what) {
  const Outcome on = expect_same_bytes(assemble(pieces), what);
  EXPECT_TRUE(on.error.empty()) << what << ": " << on.error;
  std::vector<std::int32_t> sums = ref_conv(pieces[0].spec);
  for (std::size_t i = 1; i < pieces.size(); ++i) sums = ref_conv(pieces[i].spec, &sums);
  const ConvSpec& last = pieces.back().spec;
  const std::uint64_t out_bytes = up(last.kn, 8) * up(last.out_pixels(), 4);
  const Bytes out(on.dram.begin() + kRegion2, on.dram.begin() + kRegion2 + out_bytes);
  EXPECT_EQ(unpack_activation(kArch, last.kn, last.out_pixels(), out), sums) << what;
  return on;
}

TEST(UnitChain, AStemLikeSplitEqualsTheLoopsAndCarriesItsSumsInTheTile) {
  const Outcome on = expect_stem_equals_loops(stem_pieces(), "stem");
  if (!chains_possible()) return;
  // All four run unit by unit. Pieces 2-4 add their sums to the previous piece's in the work
  // unit's tile instead of reading its words back. Piece 1's words were not written: piece 2
  // took its sums from the tile and piece 3 wrote the same words. Piece 4 writes int8 words over
  // R2's start, other units' words of piece 2, which piece 2 left unwritten (nothing reads them:
  // piece 3 carried piece 2's sums).
  EXPECT_EQ(chained(on), (std::vector<bool>{true, true, true, true}));
  EXPECT_EQ(flags(on, &LayerStats::carried), (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(flags(on, &LayerStats::output_unwritten),
            (std::vector<bool>{true, false, false, false}));
}

TEST(UnitChain, CarriedSumsTakeEveryPiecesBias) {
  // Each piece's bias (32-bit wrapping sums of them), or some pieces' only.
  std::vector<Piece> pieces = stem_pieces();
  for (Piece& p : pieces) p.spec.bias_en = true;
  Outcome on = expect_stem_equals_loops(pieces, "every piece biased");
  if (chains_possible()) {
    EXPECT_EQ(flags(on, &LayerStats::carried), (std::vector<bool>{false, true, true, true}));
  }
  pieces = stem_pieces();
  pieces[0].spec.bias_en = false;
  pieces[2].spec.bias_en = true;
  for (std::int32_t& b : pieces[2].spec.bias) b = b % 2 ? 2147480000 : -2147480000;  // wraps
  on = expect_stem_equals_loops(pieces, "piece 3 biased alone");
  if (chains_possible()) {
    EXPECT_EQ(flags(on, &LayerStats::carried), (std::vector<bool>{false, true, true, true}));
  }
}

TEST(UnitChain, ANonBiasTailIsReadBackNotCarried) {
  // Piece 1 quantizes its int32 output (QuantEn 1, OpWidth 4): its words are not its sums plus
  // bias, so piece 2 reads them from DRAM, and then piece 2's words are not its tile either.
  std::vector<Piece> pieces = stem_pieces();
  pieces[0].spec.quant_en = true;
  const Outcome on = expect_stem_equals_loops(pieces, "quantized int32 piece");
  if (!chains_possible()) return;
  EXPECT_EQ(flags(on, &LayerStats::carried), (std::vector<bool>{false, false, false, false}));
  EXPECT_EQ(flags(on, &LayerStats::output_unwritten),
            (std::vector<bool>{false, false, false, false}));
  // Piece 4's int8 words over R2, which piece 3 reads, keep it out of the chain.
  EXPECT_EQ(chained(on), (std::vector<bool>{true, true, true, false}));
}

TEST(UnitChain, APieceReadingAWaitingOutputRunsAfterIt) {
  // Piece 2's image is piece 1's int32 output (its first 3200 bytes as 8 int8 channels).
  std::vector<Piece> pieces = stem_pieces();
  pieces[1].image_addr = kRegion1;
  expect_same_bytes(assemble(pieces), "image in a waiting output");
  // Piece 2's weights lie in piece 1's output.
  expect_same_bytes(assemble(stem_pieces(),
                             [](ProgramBuilder& b) {
                               // instructions: 3 per piece (CONV, OutputBlock, TailBlock)
                               Instruction& conv = b.instructions[3];
                               const std::uint64_t bytes = conv.get(Field::CONV_WeightEndAddress) -
                                                           conv.get(Field::CONV_WeightStartAddress);
                               conv.set(Field::CONV_WeightStartAddress, kRegion1 + 4096)
                                   .set(Field::CONV_WeightEndAddress, kRegion1 + 4096 + bytes);
                             }),
                    "weights in a waiting output");
  // Piece 2's bias lies in piece 1's output.
  pieces = stem_pieces();
  pieces[1].spec.bias_en = true;
  expect_same_bytes(assemble(pieces,
                             [](ProgramBuilder& b) {
                               Instruction& tail = b.instructions[5];
                               const std::uint64_t bytes =
                                   tail.get(Field::TailBlock_BiasEndAddress) -
                                   tail.get(Field::TailBlock_BiasStartAddress);
                               tail.set(Field::TailBlock_BiasStartAddress, kRegion1 + 256)
                                   .set(Field::TailBlock_BiasEndAddress, kRegion1 + 256 + bytes);
                             }),
                    "bias in a waiting output");
}

TEST(UnitChain, AnOutputOverWaitingSumsAtAnotherOffsetJoinsOnlyWhenNothingReadsThem) {
  // Piece 3 writes R1 shifted by one 128-byte word: unit u's words there are other units' in
  // the region piece 1 writes. Piece 2 carries piece 1's sums, so nothing reads those words:
  // piece 1 leaves them unwritten and piece 3 joins.
  std::vector<Piece> pieces = stem_pieces();
  pieces[2].out_addr = kRegion1 + 128;
  pieces[3].acc_addr = kRegion1 + 128;
  Outcome on = expect_same_bytes(assemble(pieces), "shifted output");
  if (chains_possible()) {
    EXPECT_EQ(chained(on), (std::vector<bool>{true, true, true, true}));
  }
  // Piece 1 quantized: piece 2 reads R1 from DRAM, so piece 3 runs after pieces 1 and 2.
  pieces[0].spec.quant_en = true;
  on = expect_same_bytes(assemble(pieces), "shifted output over words read");
  if (chains_possible()) {
    EXPECT_EQ(chained(on), (std::vector<bool>{true, true, false, false}));
  }
  // Piece 4's int8 words one 32-byte word into R2: the part of piece 2's output they cover is
  // not whole 128-byte words of it, which piece 2 cannot leave out, so piece 4 runs after.
  // The same where it covers piece 2's last 96 bytes (and goes on past them).
  pieces = stem_pieces();
  pieces[3].out_addr = kRegion2 + 32;
  on = expect_same_bytes(assemble(pieces), "int8 output off piece 2's words");
  if (chains_possible()) {
    EXPECT_EQ(chained(on), (std::vector<bool>{true, true, true, false}));
  }
  const ConvSpec& s2 = pieces[1].spec;
  pieces[3].out_addr = kRegion2 + static_cast<std::uint32_t>(4 * s2.kn * s2.out_pixels() - 96);
  on = expect_same_bytes(assemble(pieces), "int8 output over piece 2's last 96 bytes");
  if (chains_possible()) {
    EXPECT_EQ(chained(on), (std::vector<bool>{true, true, true, false}));
  }
  // Piece 2 reading a region piece 1 writes at another offset.
  pieces = stem_pieces();
  pieces[1].acc_addr = kRegion1 + 128;
  expect_same_bytes(assemble(pieces), "shifted accumulants");
}

TEST(UnitChain, ADispatchedPieceRunsAtOnce) {
  std::vector<Piece> pieces = stem_pieces();
  pieces[1].spec.dispatch = true;
  const Outcome on = expect_same_bytes(assemble(pieces), "dispatch");
  EXPECT_FALSE(on.dispatch.empty());
  if (chains_possible()) {
    EXPECT_FALSE(on.layers.at(1).chained);
  }
}

TEST(UnitChain, AThrowLeavesTheBytesOfTheLayersBeforeIt) {
  // Piece 3's OutputBlock gives the wrong OH: pieces 1 and 2 (waiting) must have written.
  const Outcome on = expect_same_bytes(
      assemble(stem_pieces(),
               [](ProgramBuilder& b) { b.instructions[7].set(Field::OutputBlock_OH, 19); }),
      "throw");
  EXPECT_NE(on.error.find("OutputBlock"), std::string::npos) << on.error;
}

TEST(UnitChain, EveryThreadCountGivesTheSameBytes) {
  const Program p = assemble(stem_pieces());
  set_thread_count(1);
  const Outcome one = run(p, true);
  set_thread_count(2);
  const Outcome two = run(p, true);
  set_thread_count(0);
  EXPECT_TRUE(one.dram == two.dram);
}

TEST(UnitChain, ALaterImageAllocatesNothing) {
  // Two biased pieces wait at once (two tail pipelines alive), as eval runs image after image.
  std::vector<Piece> pieces = stem_pieces();
  pieces[1].spec.bias_en = true;
  const Program p = assemble(pieces);
  const unsigned threads = thread_count();
  set_thread_count(1);  // parallel_for's workers grow their own tile buffers
  DeviceConfig cfg;
  cfg.arch = kArch;
  cfg.dram_bytes = kDram;
  Device dev(cfg);
  dev.receive_dwp(p.builder.stream(p.first_input_addr, p.first_input));
  Bytes image;
  isa::append_dwp_packet(image, p.first_input_addr, p.first_input);
  isa::append_dwp_start(image);
  dev.receive_dwp(image);
  const test_support::AllocationCount third =
      test_support::count_allocations([&] { dev.receive_dwp(image); });
  set_thread_count(threads);
  EXPECT_EQ(third.calls, 0u);
  if (chains_possible()) {
    EXPECT_TRUE(dev.stats().layers.at(1).chained);
  }
}

}  // namespace
}  // namespace npukit::device
