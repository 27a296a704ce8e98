// FC megablock: weights, bias order and flattening from gati.md 6.2 / 8, against plain loops.
#include "device/fc.h"
#include "device/device.h"
#include "device/test_programs.h"
#include "ir/graph.h"
#include "isa/dispatch.h"
#include "ref/gati_kernels.h"

#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <random>

namespace npukit::device {
namespace {

using namespace testing;

struct FcSpec {
  int k = 40, m = 37;              // inputs, outputs
  std::vector<std::int32_t> w;     // [m][k]
  std::vector<std::int32_t> bias;  // [m]
  int scale = 1, shift = 9;
  bool relu = false;
};

void fill(FcSpec& f, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-128, 127), b(-30000, 30000);
  f.w.resize(static_cast<std::size_t>(f.m) * f.k);
  for (auto& v : f.w) v = d(rng);
  f.bias.resize(f.m);
  for (auto& v : f.bias) v = b(rng);
}

Bytes pack_fc_weights(const FcSpec& f) {
  const std::uint64_t kp = up(f.k, 32), mp = up(f.m, 32);
  Bytes blob(kp * mp, 0);
  for (std::uint64_t i = 0; i < mp / 32; ++i)
    for (int j = 0; j < f.k; ++j)
      for (int kk = 0; kk < 32; ++kk) {
        const std::uint64_t out = i * 32 + kk;
        if (out < static_cast<std::uint64_t>(f.m))
          blob[(i * kp + j) * 32 + kk] = static_cast<std::uint8_t>(f.w[out * f.k + j]);
      }
  return blob;
}

// gati.md 6.2: within each group of 32, position j*N_SA + k holds bias[i*32 + k*(32/N_SA) + j].
Bytes pack_fc_bias(const isa::SaArch& a, const FcSpec& f) {
  const int n = a.n_sa, dk = 32 / n;
  Bytes out(up(f.m, 32) * 4, 0);
  for (int i = 0; i < static_cast<int>(up(f.m, 32) / 32); ++i)
    for (int j = 0; j < dk; ++j)
      for (int k = 0; k < n; ++k) {
        const int neuron = i * 32 + k * dk + j;
        if (neuron >= f.m) continue;
        store_be32(&out[(static_cast<std::size_t>(i) * 32 + j * n + k) * 4],
                   static_cast<std::uint32_t>(f.bias[neuron]));
      }
  return out;
}

std::vector<std::int32_t> ref_fc(const FcSpec& f, const std::vector<std::int32_t>& x) {
  std::vector<std::int32_t> y(f.m);
  for (int o = 0; o < f.m; ++o) {
    std::int64_t acc = f.bias[o];
    for (int j = 0; j < f.k; ++j)
      acc += static_cast<std::int64_t>(f.w[static_cast<std::size_t>(o) * f.k + j]) * x[j];
    std::int64_t q = rshift_round(acc * f.scale, f.shift);
    q = std::min<std::int64_t>(127, std::max<std::int64_t>(-128, q));
    if (f.relu && q < 0) q = 0;
    y[o] = static_cast<std::int32_t>(q);
  }
  return y;
}

// Adds FC + OutputBlock + TailBlock.
void add_fc(ProgramBuilder& b, const FcSpec& f, bool flatten, int image_dim, std::uint32_t in_addr,
            std::uint64_t in_bytes, std::uint32_t out_addr, bool dispatch) {
  const std::uint32_t w_addr = b.add_blob(pack_fc_weights(f));
  const Bytes bias = pack_fc_bias(b.arch, f);
  const std::uint32_t b_addr = b.add_blob(bias);
  isa::Instruction fc(isa::Opcode::FC);
  fc.set(Field::FC_WeightRows, f.k)
      .set(Field::FC_WeightCols, f.m)
      .set(Field::FC_InputRows, f.k)
      .set(Field::FC_Flatten, flatten ? 1 : 0)
      .set(Field::FC_ImageDim, flatten ? image_dim : 0)
      .set(Field::FC_ImageStartAddress, in_addr)
      .set(Field::FC_ImageEndAddr, in_addr + in_bytes)
      .set(Field::FC_WeightStartAddress, w_addr)
      .set(Field::FC_WeightEndAddress, w_addr + up(f.k, 32) * up(f.m, 32))
      .set(Field::FC_Vec2MatCols, in_bytes / 32);
  isa::Instruction out(isa::Opcode::OutputBlock);
  out.set(Field::OutputBlock_OutputAddr, out_addr)
      .set(Field::OutputBlock_ChannelItr, 1)
      .set(Field::OutputBlock_KernelItr, up(f.m, 32) / 32)
      .set(Field::OutputBlock_ImageDimOutput, 32 / b.arch.n_sa)
      .set(Field::OutputBlock_DispatchEn, dispatch ? 1 : 0)
      .set(Field::OutputBlock_DispatchID, 77)
      .set(Field::OutputBlock_OpWidth, 1)
      .set(Field::OutputBlock_OH, 1)
      .set(Field::OutputBlock_OW, 1);
  isa::Instruction tail(isa::Opcode::TailBlock);
  tail.set(Field::TailBlock_BiasEn, 1)
      .set(Field::TailBlock_BiasWidth, 32)
      .set(Field::TailBlock_BiasStartAddress, b_addr)
      .set(Field::TailBlock_BiasEndAddress, b_addr + bias.size())
      .set(Field::TailBlock_QuantEn, 1)
      .set_signed(Field::TailBlock_QuantScale, f.scale)
      .set(Field::TailBlock_QuantShift, f.shift)
      .set(Field::TailBlock_ActEn, f.relu ? 1 : 0);
  b.instructions.push_back(fc);
  b.instructions.push_back(out);
  b.instructions.push_back(tail);
  ++b.megablocks;
}

const isa::SaArch kArchs[] = {isa::kArch9x4x4, isa::kArch9x8x8, isa::kArch16x1x16};

// Runs one vector-input FC of f on x (dispatched) on `arch` and returns the dispatched payload;
// `lead` zero bytes are placed before the weight blob, to move it inside its DRAM page.
Bytes run_vector_fc(const isa::SaArch& arch, const FcSpec& f, const std::vector<std::int32_t>& x,
                    std::uint64_t lead = 0) {
  ProgramBuilder b{arch};
  Bytes input(up(f.k, 32), 0);
  for (int j = 0; j < f.k; ++j) input[j] = static_cast<std::uint8_t>(x[j]);
  const std::uint32_t in_addr = b.alloc(input.size());
  const std::uint32_t out_addr = b.alloc(up(f.m, 32));
  if (lead != 0) b.add_blob(Bytes(lead, 0));
  add_fc(b, f, false, 0, in_addr, input.size(), out_addr, true);
  b.finish();
  const auto dev = run_program(arch, b, in_addr, input, 8ull << 20);
  const auto frames = isa::parse_dispatch_frames(dev->take_dispatch_output());
  EXPECT_EQ(frames.size(), 1u);
  return frames.empty() ? Bytes{} : frames[0].payload;
}

TEST(Fc, VectorInputMatchesPlainLoops) {
  for (const auto& arch : kArchs) {
    FcSpec f;
    f.relu = true;
    fill(f, 3);
    std::vector<std::int32_t> x(f.k);
    std::mt19937 rng(8);
    for (auto& v : x) v = std::uniform_int_distribution<int>(-128, 127)(rng);
    const Bytes payload = run_vector_fc(arch, f, x);
    ASSERT_EQ(payload.size(), up(f.m, 32));
    const auto expected = ref_fc(f, x);
    for (int o = 0; o < f.m; ++o)
      EXPECT_EQ(static_cast<std::int8_t>(payload[o]), expected[o]) << arch.str() << " o " << o;
    for (std::size_t o = f.m; o < payload.size(); ++o) EXPECT_EQ(payload[o], 0);
  }
}

TEST(Fc, FlattensAConvOutputChannelMajor) {
  for (const auto& arch : kArchs) {
    ConvSpec c;
    c.ic = 3, c.kn = 6, c.ih = 5, c.iw = 5, c.stride = 2, c.quant_shift = 8, c.act_en = true;
    fill_random(c, 41);
    const auto conv_out = ref_conv(c);  // [6][3*3]
    FcSpec f;
    f.k = c.kn * c.oh() * c.ow();
    f.m = 10;
    fill(f, 4);
    ProgramBuilder b{arch};
    const std::uint64_t dk = 32 / arch.n_sa;
    const Bytes input = pack_activation(arch, c.ic, 25, c.x);
    const std::uint32_t in_addr = b.alloc(input.size());
    const std::uint64_t mid_bytes = up(c.kn, arch.n_sa) * up(9, dk);
    const std::uint32_t mid = b.alloc(mid_bytes);
    const std::uint32_t out_addr = b.alloc(32);
    b.add_conv(c, in_addr, mid, b.alloc(4096));
    add_fc(b, f, true, 9, mid, mid_bytes, out_addr, true);
    b.finish();
    const auto dev = run_program(arch, b, in_addr, input, 8ull << 20);
    const auto frames = isa::parse_dispatch_frames(dev->take_dispatch_output());
    ASSERT_EQ(frames.size(), 1u);
    const auto expected = ref_fc(f, conv_out);
    for (int o = 0; o < f.m; ++o)
      EXPECT_EQ(static_cast<std::int8_t>(frames[0].payload[o]), expected[o]) << arch.str();
    EXPECT_EQ(dev->stats().layers.at(1).opcode, isa::Opcode::FC);
  }
}

// resnet50's FC has a 2 MiB weight blob: the weights span several 64 KiB DRAM pages, read piece
// by piece, with the blob starting at different places in its first page. Inputs with zeros (the
// skipped products) and a neuron count that is not a multiple of 32.
TEST(Fc, WeightsAcrossDramPagesMatchPlainLoops) {
  const auto& arch = isa::kArch9x8x8;
  for (const std::uint64_t lead : {0u, 32u, 96u}) {
    FcSpec f;
    f.k = 1500, f.m = 70, f.shift = 14;
    fill(f, 17 + static_cast<std::uint32_t>(lead));
    std::vector<std::int32_t> x(f.k);
    std::mt19937 rng(5);
    for (auto& v : x) v = rng() % 3 == 0 ? 0 : std::uniform_int_distribution<int>(-128, 127)(rng);
    const Bytes payload = run_vector_fc(arch, f, x, lead);
    ASSERT_EQ(payload.size(), up(f.m, 32));
    const auto expected = ref_fc(f, x);
    for (int o = 0; o < f.m; ++o)
      EXPECT_EQ(static_cast<std::int8_t>(payload[o]), expected[o]) << "lead " << lead << " o " << o;
  }
}

// Every FC row path the CPU has against the plain loop, directly: row counts 0 to 13 and 256 to
// 259 (the VNNI paths' steps of 4 and every remainder, the AVX2 rows' pairs and an odd last),
// random bytes and the extremes (inputs -128 and 127 against weights -128 and 127), onto sums
// that are not zero.
TEST(Fc, RowPathsEqualThePlainLoop) {
  namespace d = detail;
  const std::pair<Isa, d::FcRows> paths[] = {{Isa::kAvx2, d::fc_rows_avx2},
                                             {Isa::kAvxVnni, d::fc_rows_avxvnni},
                                             {Isa::kAvx512Vnni, d::fc_rows_avx512vnni}};
  std::mt19937 rng(31);
  std::vector<std::uint64_t> counts;
  for (std::uint64_t c = 0; c <= 13; ++c) counts.push_back(c);
  for (std::uint64_t c = 256; c <= 259; ++c) counts.push_back(c);
  for (const auto& [isa, rows] : paths) {
    if (!cpu::supports(isa)) {
      std::cout << "[ skipped  ] the " << cpu::name(isa) << " FC rows: this CPU lacks them\n";
      continue;
    }
    for (const std::uint64_t count : counts)
      for (int kind = 0; kind < 3; ++kind) {
        std::vector<std::uint8_t> w(count * 32);
        std::vector<std::int8_t> x(count);
        for (auto& v : w)
          v = static_cast<std::uint8_t>(kind == 0 ? rng() : kind == 1 ? 0x80 : 0x7F);
        for (auto& v : x)
          v = static_cast<std::int8_t>(kind == 0   ? rng()
                                       : kind == 1 ? -128
                                                   : (rng() % 2 ? 127 : -128));
        std::vector<std::int32_t> want(32), got(32);
        for (int k = 0; k < 32; ++k)
          want[k] = got[k] = static_cast<std::int32_t>(rng() % 2001) - 1000;
        d::fc_rows_scalar(want.data(), w.data(), x.data(), count);
        rows(got.data(), w.data(), x.data(), count);
        EXPECT_EQ(got, want) << cpu::name(isa) << " rows " << count << " kind " << kind;
      }
  }
}

// The VNNI levels' rows take the weights as w + 128 against signed inputs and remove 128 times
// the inputs' sum at the end: at the extremes (every input -128 or 127, weights -128, 127, 1, 0
// in turn, 258 rows: 64 steps of 4 and 2 left to the AVX2 rows) the sums must be the plain
// loops' to the unit: scale 1 and shift 0 pass them through, and the weights nearly cancel.
TEST(Fc, ExtremeInputsAndWeightsMatchPlainLoops) {
  const auto& arch = isa::kArch9x8x8;
  for (const int xv : {-128, 127}) {
    FcSpec f;
    f.k = 258, f.m = 40, f.scale = 1, f.shift = 0;
    fill(f, 9);
    const int pattern[4] = {-128, 127, 1, 0};
    for (int o = 0; o < f.m; ++o) {
      for (int j = 0; j < f.k; ++j) f.w[o * f.k + j] = pattern[(j + o) % 4];
      f.bias[o] = xv < 0 ? -100 : 100;
    }
    const std::vector<std::int32_t> x(f.k, xv);
    const Bytes payload = run_vector_fc(arch, f, x);
    const auto expected = ref_fc(f, x);
    for (int o = 0; o < f.m; ++o)
      EXPECT_EQ(static_cast<std::int8_t>(payload[o]), expected[o]) << "x " << xv << " o " << o;
  }
}

TEST(Fc, RandomShapesMatchTheRefKernels) {
  namespace rg = npukit::ref::gati;
  std::mt19937 rng(12);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 12; ++trial) {
    const auto& arch = kArchs[trial % 3];
    FcSpec f;
    f.k = pick(1, 300), f.m = pick(1, 100), f.scale = pick(1, 32767), f.shift = pick(12, 24);
    f.relu = trial % 2 == 1;
    fill(f, 100 + trial);
    std::vector<std::int32_t> x(f.k);
    for (auto& v : x) v = pick(-128, 127);
    ProgramBuilder b{arch};
    Bytes input(up(f.k, 32), 0);
    for (int j = 0; j < f.k; ++j) input[j] = static_cast<std::uint8_t>(x[j]);
    const std::uint32_t in_addr = b.alloc(input.size());
    const std::uint32_t out_addr = b.alloc(up(f.m, 32));
    add_fc(b, f, false, 0, in_addr, input.size(), out_addr, false);
    b.finish();
    const auto dev = run_program(arch, b, in_addr, input, 8ull << 20);
    const Bytes got = dev->dram().read(out_addr, f.m, "test");

    auto make = [](ir::DType t, ir::Shape shape, const std::vector<std::int32_t>& v,
                   std::size_t size) {
      ir::Tensor r;
      r.dtype = t;
      r.shape = std::move(shape);
      r.data.resize(v.size() * size);
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (size == 1) {
          const auto e = static_cast<std::int8_t>(v[i]);
          std::memcpy(&r.data[i], &e, 1);
        } else {
          std::memcpy(&r.data[i * 4], &v[i], 4);
        }
      }
      return r;
    };
    const ir::Tensor xt = make(ir::DType::kInt8, {1, f.k}, x, 1);
    const ir::Tensor wt = make(ir::DType::kInt8, {f.m, f.k}, f.w, 1);
    const ir::Tensor bt = make(ir::DType::kInt32, {f.m}, f.bias, 4);
    rg::Tail tail;
    tail.quant_scale = f.scale;
    tail.quant_shift = f.shift;
    tail.act = f.relu ? rg::Act::kRelu : rg::Act::kNone;
    const ir::Tensor y = rg::fully_connected(xt, wt, &bt, tail);
    for (int o = 0; o < f.m; ++o)
      EXPECT_EQ(static_cast<std::int8_t>(got[o]), y.as<std::int8_t>()[o])
          << arch.str() << " trial " << trial << " o " << o;
  }
}

}  // namespace
}  // namespace npukit::device
