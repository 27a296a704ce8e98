// CONV megablock and tail, run as whole programs through the device's byte interface and compared
// with plain NCHW loops (device/test_programs.h) and hand-worked values.
#include "common/parallel.h"
#include "device/blocks_test_support.h"
#include "device/device.h"
#include "device/test_programs.h"
#include "isa/dispatch.h"

#include <gtest/gtest.h>

#include <barrier>
#include <functional>
#include <thread>

namespace npukit::device {
namespace {

using namespace testing;

const isa::SaArch kArchs[] = {isa::kArch9x4x4, isa::kArch9x8x8, isa::kArch16x1x16};

struct RunResult {
  std::vector<std::int32_t> out;
  Bytes raw;  // the whole output region
  Bytes dispatch;
  std::unique_ptr<Device> device;
};

// Builds a one-conv program, runs it, returns the unpacked output. Regions start at multiples
// of `align` bytes.
RunResult run_one_conv(const isa::SaArch& arch, ConvSpec s, std::uint32_t* acc_addr_out = nullptr,
                       const std::vector<std::int32_t>* initial_acc = nullptr,
                       std::uint32_t align = 32,
                       const std::function<void(Bytes& weight_blob)>& edit_weights = {}) {
  ProgramBuilder b{arch};
  auto aligned = [&] {
    b.next_addr = static_cast<std::uint32_t>(up(b.next_addr, align));
    return &b;
  };
  const std::uint64_t dk = 32 / arch.n_sa;
  const Bytes input = pack_activation(arch, s.ic, s.ih * s.iw, s.x);
  const std::uint32_t in_addr = aligned()->alloc(input.size());
  const std::uint32_t out_bytes =
      static_cast<std::uint32_t>(up(s.kn, arch.n_sa) * up(s.out_pixels(), dk) * s.op_width);
  const std::uint32_t out_addr = aligned()->alloc(out_bytes);
  const std::uint32_t acc_bytes =
      static_cast<std::uint32_t>(up(s.kn, arch.n_sa) * up(s.oh() * s.ow(), dk) * 4 + 4096);
  std::uint32_t acc_addr = aligned()->alloc(acc_bytes);
  if (initial_acc) {
    acc_addr = aligned()->add_blob(pack_activation(arch, s.kn, s.oh() * s.ow(), *initial_acc, 4));
  }
  if (acc_addr_out) *acc_addr_out = acc_addr;
  const std::size_t weight_blob = b.blobs.size();  // add_conv adds the weights first
  b.add_conv(s, in_addr, out_addr, acc_addr);
  if (edit_weights) edit_weights(b.blobs[weight_blob].data);
  b.finish();
  RunResult r;
  DeviceConfig cfg;
  cfg.arch = arch;
  cfg.dram_bytes = 64ull << 20;
  r.device = std::make_unique<Device>(cfg);
  r.device->receive_dwp(b.stream(in_addr, input));
  EXPECT_EQ(r.device->stats().runs, 1u);
  const Bytes raw = r.device->dram().read(out_addr, out_bytes, "test");
  r.out = unpack_activation(arch, s.kn, s.out_pixels(), raw, s.op_width);
  r.raw = raw;
  // every padding byte of the output region is 0
  const Bytes repacked = pack_activation(arch, s.kn, s.out_pixels(), r.out, s.op_width);
  EXPECT_EQ(raw, repacked) << "padding bytes of the output region must be written as 0";
  r.dispatch = r.device->take_dispatch_output();
  return r;
}

TEST(Conv, HandWorked2x2Stride2On9x4x4) {
  // 1 channel 4x4 input 1..16, one 2x2 kernel of ones, stride 2, no pad, bias -10:
  // windows sum to 14, 22, 46, 54; minus 10 -> 4, 12, 36, 44.
  ConvSpec s;
  s.ic = 1, s.ih = 4, s.iw = 4, s.kn = 1, s.kh = 2, s.kw = 2, s.stride = 2;
  s.pad_top = s.pad_bottom = s.pad_left = s.pad_right = 0;
  for (int i = 1; i <= 16; ++i) s.x.push_back(i);
  s.w = {1, 1, 1, 1};
  s.bias = {-10};
  const RunResult r = run_one_conv(isa::kArch9x4x4, s);
  EXPECT_EQ(r.out, (std::vector<std::int32_t>{4, 12, 36, 44}));
  // The output region of 9,4,4 is C' = 4 channels x P' = 8 pixels = one 32-byte word: channel 0
  // holds bytes 0..7 (pixels 4..7 are padding), channels 1..3 are padding; all padding is 0.
  Bytes expected(32, 0);
  expected[0] = 4, expected[1] = 12, expected[2] = 36, expected[3] = 44;
  EXPECT_EQ(r.raw, expected);
}

TEST(Conv, HandWorkedQuantizerRoundsHalfUpAndClamps) {
  // 1x1 conv, weight 1, scale 3, shift 4: x*3/16 rounded half up; clamp at 127 / -128; ReLU after.
  ConvSpec s;
  s.ic = 1, s.ih = 1, s.iw = 4, s.kn = 1, s.kh = 1, s.kw = 1;
  s.pad_top = s.pad_bottom = s.pad_left = s.pad_right = 0;
  s.x = {8, -8, 120, -128};
  s.w = {127};
  s.bias = {0};
  s.quant_scale = 3, s.quant_shift = 4;
  // 8*127 = 1016 -> 3048+8 >> 4 = 191 -> 127; -1016 -> (-3048+8)>>4 = -190 -> -128;
  // 15240 -> 127; -16256 -> -128.
  EXPECT_EQ(run_one_conv(isa::kArch9x8x8, s).out,
            (std::vector<std::int32_t>{127, -128, 127, -128}));
  s.w = {1};
  // 8*3 = 24 + 8 = 32 >> 4 = 2; -24 + 8 = -16 >> 4 = -1; 360+8 >> 4 = 23; -384+8 >> 4 = -24 (floor)
  EXPECT_EQ(run_one_conv(isa::kArch9x8x8, s).out, (std::vector<std::int32_t>{2, -1, 23, -24}));
  s.act_en = true;  // ReLU after quantization
  EXPECT_EQ(run_one_conv(isa::kArch9x8x8, s).out, (std::vector<std::int32_t>{2, 0, 23, 0}));
}

struct Case {
  const char* name;
  ConvSpec spec;
};

std::vector<Case> conv_cases() {
  std::vector<Case> cases;
  auto base = [] {
    ConvSpec s;
    s.quant_scale = 1;
    s.quant_shift = 8;
    return s;
  };
  {
    ConvSpec s = base();
    cases.push_back({"regular3x3_pad1", s});
  }
  {
    ConvSpec s = base();
    s.ic = 5, s.kn = 7, s.ih = 7, s.iw = 9;
    cases.push_back({"regular3x3_odd_channels", s});
  }
  {
    ConvSpec s = base();
    s.kh = s.kw = 2, s.pad_top = s.pad_left = 0, s.pad_bottom = s.pad_right = 1;
    cases.push_back({"regular2x2_asym", s});
  }
  {
    ConvSpec s = base();
    s.kh = s.kw = 1, s.pad_top = s.pad_bottom = s.pad_left = s.pad_right = 0;
    s.ic = 20, s.kn = 12;
    cases.push_back({"pointwise1x1", s});
  }
  {
    ConvSpec s = base();
    s.ih = 11, s.iw = 13, s.stride = 2;
    cases.push_back({"stride2", s});
  }
  {
    ConvSpec s = base();
    s.ih = 13, s.iw = 14, s.stride = 3, s.pad_top = 2, s.pad_bottom = 0, s.pad_left = 0,
    s.pad_right = 2;
    cases.push_back({"stride3_asym_pads", s});
  }
  {
    ConvSpec s = base();
    s.ih = 17, s.iw = 16, s.stride = 4, s.pad_top = 1, s.pad_bottom = 2, s.pad_left = 2,
    s.pad_right = 1;
    cases.push_back({"stride4", s});
  }
  {
    ConvSpec s = base();
    s.ic = 40, s.kn = 20, s.quant_shift = 10;
    cases.push_back({"citr_kitr_gt1_onchip", s});
  }
  {
    ConvSpec s = base();
    s.ic = 24, s.kn = 12, s.ih = 9, s.iw = 10, s.quant_shift = 10, s.on_chip_acc = false;
    cases.push_back({"citr_gt1_dram_accumulants", s});
  }
  {
    ConvSpec s = base();
    s.depthwise = true, s.ic = s.kn = 13;
    s.quant_shift = 6;
    cases.push_back({"depthwise3x3", s});
  }
  {
    ConvSpec s = base();
    s.depthwise = true, s.ic = s.kn = 9, s.stride = 2, s.ih = 10, s.iw = 11;
    s.quant_shift = 6;
    cases.push_back({"depthwise_stride2", s});
  }
  {
    ConvSpec s = base();
    s.act_en = true, s.act_type = 1, s.act_param = 6;
    cases.push_back({"clip", s});
  }
  {
    ConvSpec s = base();
    s.act_en = true, s.act_type = 2, s.neg_alpha = 26, s.pos_alpha = 256;
    cases.push_back({"leaky_relu", s});
  }
  {
    ConvSpec s = base();
    s.gbl_pool = true, s.gbl_scale = 1311, s.gbl_shift = 15, s.ih = 5, s.iw = 5;
    cases.push_back({"global_avg_pool", s});
  }
  {
    ConvSpec s = base();
    s.quant_en = false, s.op_width = 4;
    cases.push_back({"int32_output", s});
  }
  {
    ConvSpec s = base();
    s.kh = 3, s.skip_top = 1, s.skip_bottom = 1, s.ih = 8;
    cases.push_back({"row_skips", s});
  }
  {
    // A global pool's piece (split_kernels): one row of a 7x7 image, 7 taps wide, one output;
    // the planes hold just that row, the other words are not read.
    ConvSpec s = base();
    s.depthwise = true, s.ic = s.kn = 20, s.ih = s.iw = 7, s.kh = 1, s.kw = 7;
    s.pad_top = s.pad_bottom = s.pad_left = s.pad_right = 0;
    s.skip_top = 4, s.skip_bottom = 2, s.quant_shift = 6;
    cases.push_back({"depthwise_row_band", s});
  }
  {
    // A band of rows with padding left and right (zeroed beside each image row).
    ConvSpec s = base();
    s.depthwise = true, s.ic = s.kn = 11, s.ih = 9, s.iw = 7, s.kh = 2, s.kw = 3;
    s.skip_top = 2, s.skip_bottom = 3, s.quant_shift = 6;
    cases.push_back({"depthwise_padded_band", s});
  }
  return cases;
}

class ConvSweep : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ConvSweep, MatchesPlainNchwReference) {
  const isa::SaArch arch = kArchs[std::get<0>(GetParam())];
  Case c = conv_cases()[static_cast<std::size_t>(std::get<1>(GetParam()))];
  fill_random(c.spec, 1000 + std::get<1>(GetParam()));
  const RunResult r = run_one_conv(arch, c.spec);
  EXPECT_EQ(r.out, ref_conv(c.spec)) << c.name << " on " << arch.str();
}

INSTANTIATE_TEST_SUITE_P(
    AllArrays, ConvSweep,
    ::testing::Combine(::testing::Range(0, 3),
                       ::testing::Range(0, static_cast<int>(conv_cases().size()))),
    [](const auto& info) {
      return std::string(kArchs[std::get<0>(info.param)].str() == "9,4,4"   ? "a944"
                         : kArchs[std::get<0>(info.param)].str() == "9,8,8" ? "a988"
                                                                            : "a16116") +
             "_" + conv_cases()[static_cast<std::size_t>(std::get<1>(info.param))].name;
    });

// The model keeps mapped weights from run to run (a network runs image after image); weights
// rewritten at the same address with the same geometry must be read again, in every mode.
TEST(Conv, RewrittenWeightsAtTheSameAddressAreReadAgain) {
  for (const isa::SaArch& arch : kArchs)
    for (std::size_t i = 0; i < conv_cases().size(); ++i) {
      Case c = conv_cases()[i];
      fill_random(c.spec, 7000 + static_cast<unsigned>(i));
      EXPECT_EQ(run_one_conv(arch, c.spec).out, ref_conv(c.spec)) << c.name;
      for (auto& w : c.spec.w) w = w == 127 ? -128 : w + 1;
      EXPECT_EQ(run_one_conv(arch, c.spec).out, ref_conv(c.spec)) << c.name << " rewritten";
    }
}

// One conv program on its own board, run again by DWP packets: a START alone, or one that
// rewrites bytes first.
struct ConvBoard {
  const isa::SaArch arch;
  const ConvSpec spec;
  ProgramBuilder b{arch};
  std::uint32_t in_addr = 0, out_addr = 0, w_addr = 0;
  std::uint64_t out_bytes = 0;
  std::unique_ptr<Device> dev;

  ConvBoard(const isa::SaArch& a, const ConvSpec& s) : arch(a), spec(s) {
    const std::uint64_t dk = 32 / arch.n_sa;
    const Bytes input = pack_activation(arch, spec.ic, spec.ih * spec.iw, spec.x);
    in_addr = b.alloc(input.size());
    out_bytes = up(spec.kn, arch.n_sa) * up(spec.out_pixels(), dk);
    out_addr = b.alloc(out_bytes * 4);
    const std::uint32_t acc_addr = b.alloc(out_bytes * 4 + 4096);
    b.add_conv(spec, in_addr, out_addr, acc_addr);
    b.finish();
    w_addr = b.blobs[0].address;  // add_conv adds the weights first
    dev = run_program(arch, b, in_addr, input);
  }
  const Bytes& blob() const { return b.blobs[0].data; }
  std::vector<std::int32_t> output() const {
    return unpack_activation(arch, spec.kn, spec.out_pixels(),
                             dev->dram().read(out_addr, out_bytes * spec.op_width, "test"),
                             spec.op_width);
  }
  void rerun(std::uint32_t addr = 0, const Bytes& bytes = {}) {
    Bytes s;
    if (!bytes.empty()) isa::append_dwp_packet(s, addr, bytes);
    isa::append_dwp_start(s);
    dev->receive_dwp(s);
  }
  // Changes the first non-zero weight by one: exactly one byte of the packed blob differs, and
  // DWP packets carry whole 32-byte words, so the word around it is rewritten, the rest unchanged.
  ConvSpec rewrite_one_weight() {
    ConvSpec changed = spec;
    std::size_t w = 0;
    while (w < changed.w.size() && changed.w[w] == 0) ++w;
    EXPECT_LT(w, changed.w.size());
    if (w == changed.w.size()) return spec;
    changed.w[w] = changed.w[w] == 127 ? -128 : static_cast<std::int8_t>(changed.w[w] + 1);
    const Bytes new_blob = pack_conv_weights(arch, changed);
    std::vector<std::size_t> diff;
    for (std::size_t j = 0; j < new_blob.size(); ++j)
      if (new_blob[j] != blob()[j]) diff.push_back(j);
    EXPECT_EQ(diff.size(), 1u);
    const std::size_t word = diff.empty() ? 0 : diff[0] / 32 * 32;
    rerun(w_addr + static_cast<std::uint32_t>(word),
          Bytes(new_blob.begin() + static_cast<std::ptrdiff_t>(word),
                new_blob.begin() + static_cast<std::ptrdiff_t>(word + 32)));
    return changed;
  }
};

// The same board, run again after the host rewrote one weight byte through a DWP packet (the
// transport path): the mapping kept from the first run must not be reused (Dram write tracking),
// in every mode. Rewriting blob bytes with what they hold keeps the result right too.
TEST(Conv, OneWeightByteRewrittenOnTheSameBoardIsReadAgain) {
  for (const isa::SaArch& arch : kArchs)
    for (std::size_t i = 0; i < conv_cases().size(); ++i) {
      Case c = conv_cases()[i];
      SCOPED_TRACE(std::string(c.name) + " on " + arch.str());
      fill_random(c.spec, 9000 + static_cast<unsigned>(i));
      ConvBoard board(arch, c.spec);
      ASSERT_EQ(board.output(), ref_conv(c.spec));
      // The blob's first word rewritten with the bytes it holds: same result.
      board.rerun(board.w_addr, Bytes(board.blob().begin(), board.blob().begin() + 32));
      EXPECT_EQ(board.output(), ref_conv(c.spec)) << "after the same bytes were written again";
      const ConvSpec changed = board.rewrite_one_weight();
      EXPECT_EQ(board.dev->stats().runs, 3u);
      EXPECT_EQ(board.output(), ref_conv(changed)) << "after one weight byte was rewritten";
    }
}

// The same board, run again after the host rewrote an instruction word (the TailBlock's
// QuantShift, through a DWP packet): the device decodes each instruction once and keeps it
// while its bytes stay, so the second run must see the new shift.
TEST(Conv, ARewrittenInstructionIsDecodedAgain) {
  ConvSpec s;
  s.quant_shift = 6;
  fill_random(s, 4242);
  ConvBoard board(isa::kArch9x8x8, s);
  ASSERT_EQ(board.output(), ref_conv(s));
  // The GML's instructions follow the zeroth one: CONV, OutputBlock, TailBlock, START.
  const std::uint32_t tail_addr = 32 + 2 * 32;
  const auto old_word = board.b.instructions[2].encode();
  ASSERT_EQ(board.dev->dram().read(tail_addr, 32, "test"), Bytes(old_word.begin(), old_word.end()));
  ConvSpec shifted = s;
  shifted.quant_shift = 9;
  isa::Instruction tail = board.b.instructions[2];
  tail.set(Field::TailBlock_QuantShift, 9);
  const auto word = tail.encode();
  board.rerun(tail_addr, Bytes(word.begin(), word.end()));
  EXPECT_EQ(board.output(), ref_conv(shifted));
  ASSERT_NE(ref_conv(shifted), ref_conv(s));
  board.rerun();  // and again, unchanged
  EXPECT_EQ(board.output(), ref_conv(shifted));
}

// Parallel eval workers each run their own board; the mapped and packed weights are kept once
// for the whole process (device/conv.cpp). Three boards run the same program at once, image after
// image: every output is the plain loop's. Then board 1 rewrites one weight byte: it alone sees
// the new weights, boards 0 and 2 keep the old ones, and a fresh board loading the old blob at
// the same address gets the old weights too.
TEST(Conv, BoardsOnThreadsShareKeptWeightsAndEachSeesItsOwnRewrite) {
  for (const isa::SaArch& arch : kArchs)
    for (std::size_t i = 0; i < conv_cases().size(); ++i) {
      Case c = conv_cases()[i];
      SCOPED_TRACE(std::string(c.name) + " on " + arch.str());
      fill_random(c.spec, 11000 + static_cast<unsigned>(i));
      const std::vector<std::int32_t> want = ref_conv(c.spec);
      constexpr int kBoards = 3;
      std::barrier sync(kBoards);
      std::vector<std::vector<std::vector<std::int32_t>>> got(kBoards);
      std::vector<std::int32_t> want_changed;
      std::vector<std::thread> threads;
      for (int t = 0; t < kBoards; ++t)
        threads.emplace_back([&, t] {
          auto board = std::make_unique<ConvBoard>(arch, c.spec);
          got[t].push_back(board->output());
          for (int image = 0; image < 2; ++image) {
            board->rerun();
            got[t].push_back(board->output());
          }
          sync.arrive_and_wait();
          if (t == 1) want_changed = ref_conv(board->rewrite_one_weight());
          if (t == 2) board = std::make_unique<ConvBoard>(arch, c.spec);
          if (t == 0) board->rerun();
          got[t].push_back(board->output());
          sync.arrive_and_wait();
          board->rerun();
          got[t].push_back(board->output());
        });
      for (std::thread& th : threads) th.join();
      for (int t = 0; t < kBoards; ++t) {
        ASSERT_EQ(got[t].size(), 5u);
        for (std::size_t run = 0; run < got[t].size(); ++run)
          EXPECT_EQ(got[t][run], t == 1 && run >= 3 ? want_changed : want)
              << "board " << t << " run " << run;
      }
    }
}

TEST(Conv, DramAccumulantRegionHoldsPartialSumOfAllButLastChannelGroup) {
  for (const isa::SaArch& arch : {isa::kArch9x4x4, isa::kArch9x8x8}) {
    for (int kn : {8, 20}) {  // kitr 1 and > 1 on 9,8,8
      ConvSpec s;
      s.ic = 3 * arch.n_sa - 1, s.kn = kn, s.ih = 6, s.iw = 7, s.quant_shift = 10;
      s.on_chip_acc = false;
      fill_random(s, 77 + kn);
      std::uint32_t acc_addr = 0;
      const RunResult r = run_one_conv(arch, s, &acc_addr);
      EXPECT_EQ(r.out, ref_conv(s));
      const int citr = conv_citr(arch, s), kitr = conv_kitr(arch, s);
      const auto partial = ref_conv_sums(s, 0, (citr - 1) * arch.n_sa);
      const int p_count = s.oh() * s.ow();
      const int dim_acc = static_cast<int>(up(p_count, std::max(1, 32 / arch.n_sa / 4)));
      const Bytes region = r.device->dram().read(
          acc_addr, static_cast<std::uint64_t>(dim_acc) * arch.cols * 4, "test");
      for (int p = 0; p < dim_acc; ++p)
        for (int j = 0; j < arch.cols; ++j) {
          const int k = (kitr - 1) * arch.cols + j;
          std::int32_t expected = 0;
          if (p < p_count && k < s.kn)
            expected =
                static_cast<std::int32_t>(partial[static_cast<std::size_t>(k) * p_count + p]);
          const std::uint32_t got =
              load_be32(&region[(static_cast<std::size_t>(p) * arch.cols + j) * 4]);
          ASSERT_EQ(static_cast<std::int32_t>(got), expected)
              << arch.str() << " kn " << kn << " p " << p << " j " << j;
        }
    }
  }
}

// ConvType PW on 16,1,16 with several kernel and channel iterations: each fold is the 6.2
// sa_align_aux_pointwise block of ROW x N_SA = 256 bytes (c = N_SA-1..0, r = 0..ROW-1 ->
// W[kern * N_SA + r][chan * ROW + c]), written here from the spec formula.
TEST(Conv, PointwiseConvTypeReadsEveryFoldOf16x1x16) {
  const isa::SaArch arch = isa::kArch16x1x16;
  ConvSpec s;
  s.ic = 40, s.kn = 20, s.ih = 3, s.iw = 5, s.kh = s.kw = 1;  // kitr 2, citr 3
  s.pad_top = s.pad_bottom = s.pad_left = s.pad_right = 0;
  s.quant_en = false, s.op_width = 4;  // raw int32 sums + bias
  fill_random(s, 12);
  const int citr = 3;
  const Bytes blob = pack_pointwise_weights(s);
  ASSERT_EQ(blob.size(), 2u * citr * 256);  // kitr 2
  ProgramBuilder b{arch};
  const Bytes input = pack_activation(arch, s.ic, s.ih * s.iw, s.x);
  const std::uint32_t in_addr = b.alloc(input.size());
  const std::uint32_t out_bytes = 32 * 2 * 16 * 4;
  const std::uint32_t out_addr = b.alloc(out_bytes);
  b.add_conv(s, in_addr, out_addr, b.alloc(4096));
  make_pointwise(b, blob, citr);
  b.finish();
  const auto dev = run_program(arch, b, in_addr, input);
  EXPECT_EQ(unpack_activation(arch, s.kn, s.out_pixels(),
                              dev->dram().read(out_addr, out_bytes, "test"), 4),
            ref_conv(s));
}

TEST(Conv, OnChipAccumulationWritesNothingOutsideTheOutput) {
  ConvSpec s;
  s.ic = 24, s.kn = 8, s.quant_shift = 10;
  fill_random(s, 5);
  std::uint32_t acc_addr = 0;
  const RunResult r = run_one_conv(isa::kArch9x8x8, s, &acc_addr);
  const Bytes region = r.device->dram().read(acc_addr, 4096, "test");
  EXPECT_TRUE(std::all_of(region.begin(), region.end(), [](std::uint8_t b) { return b == 0; }));
}

TEST(Conv, AccumulantReadFirstAddsInitialInt32Values) {
  ConvSpec s;
  s.ic = 8, s.kn = 8, s.quant_shift = 9;
  s.read_first = true;
  fill_random(s, 11);
  std::vector<std::int32_t> init(static_cast<std::size_t>(s.kn) * s.oh() * s.ow());
  for (std::size_t i = 0; i < init.size(); ++i)
    init[i] = static_cast<std::int32_t>(i * 977 % 40000) - 20000;
  const RunResult r = run_one_conv(isa::kArch9x8x8, s, nullptr, &init);
  EXPECT_EQ(r.out, ref_conv(s, &init));
}

TEST(Conv, KernelSplitWithRowSkipsEqualsTheFullKernel) {
  // A 5x3 kernel done as two pieces: rows 0..2 (EndRowSkip 2) written as int32, then rows 3..4
  // (StartRowSkip 3) reading those as accumulants (AccumulantReadFirst) and quantizing.
  for (const isa::SaArch& arch : {isa::kArch9x4x4, isa::kArch9x8x8}) {
    ConvSpec full;
    full.ic = 6, full.kn = 5, full.ih = 9, full.iw = 7, full.kh = 5, full.kw = 3;
    full.pad_top = full.pad_bottom = 0, full.pad_left = full.pad_right = 1;
    full.quant_shift = 9;
    fill_random(full, 3);
    ConvSpec top = full, bottom = full;
    top.kh = 3, top.skip_bottom = 2, top.bias_en = false, top.quant_en = false, top.op_width = 4;
    bottom.kh = 2, bottom.skip_top = 3, bottom.read_first = true;
    top.w.clear(), bottom.w.clear();
    for (int k = 0; k < full.kn; ++k)
      for (int c = 0; c < full.ic; ++c)
        for (int i = 0; i < 5; ++i)
          for (int j = 0; j < 3; ++j)
            (i < 3 ? top.w : bottom.w)
                .push_back(full.w[((static_cast<std::size_t>(k) * full.ic + c) * 5 + i) * 3 + j]);
    ASSERT_EQ(top.oh(), full.oh());
    ASSERT_EQ(bottom.oh(), full.oh());

    ProgramBuilder b{arch};
    const std::uint64_t dk = 32 / arch.n_sa;
    const Bytes input = pack_activation(arch, full.ic, full.ih * full.iw, full.x);
    const std::uint32_t in_addr = b.alloc(input.size());
    const std::uint32_t partial_addr =
        b.alloc(up(full.kn, arch.n_sa) * up(full.oh() * full.ow(), dk) * 4);
    const std::uint32_t out_bytes =
        static_cast<std::uint32_t>(up(full.kn, arch.n_sa) * up(full.oh() * full.ow(), dk));
    const std::uint32_t out_addr = b.alloc(out_bytes);
    b.add_conv(top, in_addr, partial_addr, b.alloc(4096));
    b.add_conv(bottom, in_addr, out_addr, partial_addr);
    b.finish();
    const auto dev = run_program(arch, b, in_addr, input);
    const auto got = unpack_activation(arch, full.kn, full.oh() * full.ow(),
                                       dev->dram().read(out_addr, out_bytes, "t"));
    EXPECT_EQ(got, ref_conv(full)) << arch.str();
  }
}

// The direct output (the GEMM work units write the output words through the tail themselves,
// TailPipeline::RowWriter: 9,8,8 at the AVX2 level) and the planar path of every other level
// against the plain NCHW loops, where units and words end early: pixels not a multiple of 4 or
// 64, channels not of 8 or 64, 7x7, 14x14 and 56x56 (more pixels than the on-chip accumulator:
// DRAM partial sums beside the direct output), every tail kind (int8 with ReLU / Clip / none,
// int32 quantized and passed through, accumulants read first, LeakyReLU, which stays planar),
// regions aligned for the direct path or not (OpWidth 4 then stays planar), 1, 2 and 3 threads.
TEST(Conv, DirectOutputEqualsTheReferenceAtEveryLevelAndThreadCount) {
  struct Shape {
    const char* name;
    int ic, ih, iw, kn, k, stride;
    bool on_chip;
  };
  const Shape shapes[] = {{"7x7", 20, 7, 7, 70, 3, 1, true},
                          {"14x14", 9, 14, 14, 13, 3, 1, true},
                          {"56x56", 12, 56, 56, 64, 1, 1, false},
                          {"5x7 stride 2", 5, 9, 13, 9, 3, 2, true},
                          {"6x6 130 channels", 16, 6, 6, 130, 3, 1, true}};
  struct Tail {
    const char* name;
    bool quant, act;
    int act_type, width;
    bool read_first;
  };
  const Tail tails[] = {{"relu", true, true, 0, 1, false},
                        {"clip", true, true, 1, 1, false},
                        {"none", true, false, 0, 1, false},
                        {"int32 relu", true, true, 0, 4, false},
                        {"int32 sums", false, false, 0, 4, false},
                        {"accumulants", true, true, 0, 1, true},
                        {"int32 accumulants", false, false, 0, 4, true},
                        {"leaky", true, true, 2, 1, false}};
  const std::vector<Isa> levels = blocks_testing::isa_paths();
  std::uint32_t seed = 500;
  for (const Shape& sh : shapes)
    for (const Tail& t : tails) {
      ConvSpec s;
      s.ic = sh.ic, s.ih = sh.ih, s.iw = sh.iw, s.kn = sh.kn, s.kh = s.kw = sh.k;
      s.stride = sh.stride, s.on_chip_acc = sh.on_chip;
      s.pad_top = s.pad_bottom = s.pad_left = s.pad_right = sh.k / 2;
      s.quant_en = t.quant, s.quant_scale = 3, s.quant_shift = 10;
      s.act_en = t.act, s.act_type = t.act_type, s.act_param = 6;
      s.neg_alpha = 26, s.pos_alpha = 256;
      s.op_width = t.width, s.read_first = t.read_first;
      fill_random(s, ++seed);
      std::vector<std::int32_t> init;
      if (t.read_first) {
        std::mt19937 rng(seed);
        init.resize(static_cast<std::size_t>(s.kn) * s.oh() * s.ow());
        for (std::int32_t& v : init)
          v = t.quant ? static_cast<std::int32_t>(rng() % 200001) - 100000
                      : static_cast<std::int32_t>(rng());
      }
      const std::vector<std::int32_t> want = ref_conv(s, t.read_first ? &init : nullptr);
      for (const Isa level : levels) {
        const cpu::ScopedIsa forced(level);
        for (const unsigned threads : {1u, 2u, 3u})
          for (const std::uint32_t align : {128u, 32u}) {
            set_thread_count(threads);
            const RunResult r =
                run_one_conv(isa::kArch9x8x8, s, nullptr, t.read_first ? &init : nullptr, align);
            set_thread_count(0);
            EXPECT_EQ(r.out, want) << sh.name << " " << t.name << " " << cpu::name(level) << " "
                                   << threads << " threads, regions aligned to " << align;
          }
      }
    }
}

// A 1x1 kernel has one tap: on the 9,8,8 array only PE row 8 of each fold multiplies image
// values. A non-zero byte in rows 0-7 of a real output channel is warned about and changes no
// output; one of a padded output channel (k >= KN) is not warned about (its outputs are 0 anyway).
// KN = 11: fold 0 has 8 real output channels, fold 1 has 3 and 5 padded ones.
TEST(Conv, NonZeroBytesInRowsBeyondTheKernelAreWarnedAndIgnored) {
  ConvSpec s;
  s.ic = 5, s.kn = 11, s.kh = s.kw = 1, s.ih = 4, s.iw = 3, s.quant_shift = 6;
  s.pad_top = s.pad_bottom = s.pad_left = s.pad_right = 0;
  fill_random(s, 21);
  const std::vector<std::int32_t> want = ref_conv(s);
  // Byte (row, a, b) of fold `kern` (one channel iteration): row 0..8 (8 is tap 0), a the input
  // channel, b the output channel kern * 8 + b.
  const auto at = [](int kern, int row, int a, int b) {
    return static_cast<std::size_t>(((kern * 9 + row) * 8 + a) * 8 + b);
  };
  struct Case {
    const char* name;
    int kern, row, a, b;
    bool warned;
  };
  // Each case runs on a fresh board with the same live bytes, so each also checks the kept
  // weights' compare across boards (device/conv.cpp same_blob): a mapping kept from a blob whose
  // dead rows were all zero must not serve one with a non-zero byte there, nor the other way.
  for (const Case c :
       {Case{"clean", -1, 0, 0, 0, false}, Case{"fold 0, row 0, channel 7", 0, 0, 2, 7, true},
        Case{"fold 0, row 7, channel 0", 0, 7, 4, 0, true},
        Case{"fold 1, row 3, channel 10", 1, 3, 1, 2, true},
        Case{"fold 1, row 3, padded channel 14", 1, 3, 1, 6, false}}) {
    const RunResult r = run_one_conv(isa::kArch9x8x8, s, nullptr, nullptr, 32, [&](Bytes& blob) {
      if (c.kern >= 0) blob[at(c.kern, c.row, c.a, c.b)] = 0x5A;
    });
    EXPECT_EQ(r.out, want) << c.name;
    bool warned = false;
    for (const Warning& w : r.device->diagnostics().warnings())
      warned |= w.text().find("PE rows beyond") != std::string::npos;
    EXPECT_EQ(warned, c.warned) << c.name;
  }
}

TEST(Conv, TallImageWarnsErratumButComputesTheIntendedResult) {
  ConvSpec s;
  s.ih = 9, s.iw = 6, s.quant_shift = 8;
  fill_random(s, 9);
  const RunResult r = run_one_conv(isa::kArch9x8x8, s);
  EXPECT_EQ(r.out, ref_conv(s));
  ASSERT_TRUE(r.device->diagnostics().has_erratum(Erratum::kTallImageHang));
  const std::string text = r.device->diagnostics().warnings().front().text();
  EXPECT_NE(text.find("layer 1"), std::string::npos) << text;
  EXPECT_NE(text.find("E1"), std::string::npos) << text;
}

TEST(Conv, DispatchFrameCarriesTheWholeAlignedOutputRegion) {
  ConvSpec s;
  s.ic = 3, s.kn = 6, s.ih = 6, s.iw = 6, s.dispatch = true, s.dispatch_id = 0xBEEF,
  s.quant_shift = 7;
  fill_random(s, 21);
  const RunResult r = run_one_conv(isa::kArch9x4x4, s);
  const auto frames = isa::parse_dispatch_frames(r.dispatch);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].id, 0xBEEFu);
  EXPECT_EQ(frames[0].payload.size(), 320u);  // gati.md 5.5: 6 channels of 6x6 on 9,4,4
  EXPECT_EQ(unpack_activation(isa::kArch9x4x4, s.kn, 36, frames[0].payload), ref_conv(s));
  // footer FFFFFFFF 00000000 00000000 (14.7)
  const Bytes tail(r.dispatch.end() - 12, r.dispatch.end());
  EXPECT_EQ(tail, (Bytes{0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0}));
}

TEST(Conv, ChainedLayersFeedEachOther) {
  for (const isa::SaArch& arch : kArchs) {
    ConvSpec a, c2;
    a.ic = 3, a.kn = 10, a.ih = 8, a.iw = 8, a.quant_shift = 7, a.act_en = true;
    fill_random(a, 31);
    c2.ic = 10, c2.kn = 6, c2.ih = 8, c2.iw = 8, c2.stride = 2, c2.quant_shift = 9,
    c2.dispatch = true;
    fill_random(c2, 32);
    c2.x = ref_conv(a);
    ProgramBuilder b{arch};
    const std::uint64_t dk = 32 / arch.n_sa;
    const Bytes input = pack_activation(arch, a.ic, 64, a.x);
    const std::uint32_t in_addr = b.alloc(input.size());
    const std::uint32_t mid = b.alloc(up(10, arch.n_sa) * up(64, dk));
    const std::uint32_t out = b.alloc(up(6, arch.n_sa) * up(16, dk));
    b.add_conv(a, in_addr, mid, b.alloc(4096));
    b.add_conv(c2, mid, out, b.alloc(4096));
    b.finish();
    const auto dev = run_program(arch, b, in_addr, input);
    const auto frames = isa::parse_dispatch_frames(dev->take_dispatch_output());
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(unpack_activation(arch, 6, 16, frames[0].payload), ref_conv(c2)) << arch.str();
    ASSERT_EQ(dev->stats().layers.size(), 2u);
    EXPECT_GT(dev->stats().layers[1].timing.cycles, 0u);
    // Errata of chained layers (14.6): the first conv has KernelItr 3 on 9,4,4 (odd), 2 on 9,8,8;
    // every chained layer on 16,1,16 is flagged.
    const Diagnostics& diag = dev->diagnostics();
    EXPECT_EQ(diag.has_erratum(Erratum::kOddKernelItr9x4x4), arch == isa::kArch9x4x4) << arch.str();
    EXPECT_EQ(diag.has_erratum(Erratum::kIncomplete16x1x16), arch == isa::kArch16x1x16)
        << arch.str();
    for (const Warning& w : diag.warnings()) {
      if (!w.erratum.empty()) {
        EXPECT_EQ(w.layer, 2) << w.text();
      }
    }
  }
}

TEST(Conv, MeasuredLayerTimingIsCloseToTheRtl) {
  // gati.md 14.12: 3x3 conv 32 -> 32 channels on 28x28, ~63.4k cycles on 9,4,4, ~16.2k on 9,8,8.
  for (const auto& [arch, measured] :
       {std::pair{isa::kArch9x4x4, 63400.0}, std::pair{isa::kArch9x8x8, 16200.0}}) {
    ConvSpec s;
    s.ic = 32, s.kn = 32, s.ih = 28, s.iw = 28, s.quant_shift = 10;
    fill_random(s, 1);
    const RunResult r = run_one_conv(arch, s);
    const double cycles = static_cast<double>(r.device->stats().layers.at(0).timing.cycles);
    EXPECT_NEAR(cycles / measured, 1.0, 0.05) << arch.str() << ": " << cycles;
    std::printf("[ timing ] %s 3x3 32->32 28x28: %.0f cycles (RTL ~%.0f)\n", arch.str().c_str(),
                cycles, measured);
  }
}

}  // namespace
}  // namespace npukit::device
