// Test-only helpers: assemble Gati programs with the ISA encoder and compute the expected result
// with plain NCHW loops. Everything here is written from the spec (gati.md 3.2, 6, 7, 14) and
// shares no code with the device model (run_program only drives it), so a test that compares the
// two compares independent implementations.
#pragma once

#include "common/bytes.h"
#include "device/device.h"
#include "isa/arch.h"
#include "isa/dwp.h"
#include "isa/gml.h"
#include "isa/isa.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

namespace npukit::device::testing {

using isa::Field;
using isa::Instruction;
using isa::Opcode;

inline std::uint64_t up(std::uint64_t n, std::uint64_t m) { return (n + m - 1) / m * m; }
inline std::uint64_t cdiv(std::uint64_t n, std::uint64_t m) { return (n + m - 1) / m; }

// 6.1 activation layout: values[c][p] (int8 or int32 with width 4), zero padding.
inline Bytes pack_activation(const isa::SaArch& arch, int channels, int pixels,
                             const std::vector<std::int32_t>& values, int width = 1) {
  const std::uint64_t cd = arch.n_sa, dk = 32 / cd;
  const std::uint64_t pp = up(pixels, dk), cp = up(channels, cd);
  Bytes out(cp * pp * width, 0);
  for (int c = 0; c < channels; ++c)
    for (int p = 0; p < pixels; ++p) {
      const std::uint64_t off = (c / cd) * (cd * pp) + (p / dk) * 32 + (c % cd) * dk + (p % dk);
      const std::int32_t v = values[static_cast<std::size_t>(c) * pixels + p];
      if (width == 1) {
        out[off] = static_cast<std::uint8_t>(v);
      } else {
        std::uint32_t u = static_cast<std::uint32_t>(v);
        for (int b = 0; b < 4; ++b) out[off * 4 + b] = static_cast<std::uint8_t>(u >> (24 - 8 * b));
      }
    }
  return out;
}

inline std::vector<std::int32_t> unpack_activation(const isa::SaArch& arch, int channels,
                                                   int pixels, const Bytes& bytes, int width = 1) {
  const std::uint64_t cd = arch.n_sa, dk = 32 / cd;
  const std::uint64_t pp = up(pixels, dk);
  std::vector<std::int32_t> v(static_cast<std::size_t>(channels) * pixels);
  for (int c = 0; c < channels; ++c)
    for (int p = 0; p < pixels; ++p) {
      const std::uint64_t off = (c / cd) * (cd * pp) + (p / dk) * 32 + (c % cd) * dk + (p % dk);
      if (width == 1) {
        v[static_cast<std::size_t>(c) * pixels + p] = static_cast<std::int8_t>(bytes[off]);
      } else {
        std::uint32_t u = 0;
        for (int b = 0; b < 4; ++b) u = (u << 8) | bytes[off * 4 + b];
        v[static_cast<std::size_t>(c) * pixels + p] = static_cast<std::int32_t>(u);
      }
    }
  return v;
}

struct ConvSpec {
  int ic = 8, ih = 6, iw = 6, kn = 8, kh = 3, kw = 3, stride = 1;
  int pad_top = 1, pad_bottom = 1, pad_left = 1, pad_right = 1;
  int skip_top = 0, skip_bottom = 0;
  bool depthwise = false;
  // tail
  bool bias_en = true;
  bool quant_en = true;
  int quant_scale = 1, quant_shift = 0;
  bool act_en = false;
  int act_type = 0, act_param = 0, neg_alpha = 0, pos_alpha = 256;
  bool gbl_pool = false;
  int gbl_scale = 0, gbl_shift = 0;
  int op_width = 1;
  bool on_chip_acc = true;  // false: DRAM partial sums when citr > 1
  bool read_first = false;  // AccumulantReadFirst
  bool dispatch = false;
  std::uint32_t dispatch_id = 0x42;
  // data (filled by fill_random or by hand)
  std::vector<std::int32_t> x;     // [ic][ih*iw]
  std::vector<std::int32_t> w;     // [kn][kc][kh][kw]
  std::vector<std::int32_t> bias;  // [kn]

  int kc() const { return depthwise ? 1 : ic; }
  int oh() const { return (ih + pad_top + pad_bottom - skip_top - skip_bottom - kh) / stride + 1; }
  int ow() const { return (iw + pad_left + pad_right - kw) / stride + 1; }
  int out_pixels() const { return gbl_pool ? 1 : oh() * ow(); }
};

inline void fill_random(ConvSpec& s, std::uint32_t seed, int lo = -128, int hi = 127) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::uniform_int_distribution<int> b(-20000, 20000);
  s.x.resize(static_cast<std::size_t>(s.ic) * s.ih * s.iw);
  for (auto& v : s.x) v = d(rng);
  s.w.resize(static_cast<std::size_t>(s.kn) * s.kc() * s.kh * s.kw);
  for (auto& v : s.w) v = d(rng);
  s.bias.resize(s.kn);
  for (auto& v : s.bias) v = b(rng);
}

inline bool is_16x1x16(const isa::SaArch& a) { return a.cols != a.n_sa; }

// Iterations as gati.md 3.2 [RTL-confirmed] gives them.
inline int conv_kitr(const isa::SaArch& a, const ConvSpec& s) {
  if (s.depthwise || is_16x1x16(a)) return static_cast<int>(cdiv(s.kn, a.n_sa));
  return static_cast<int>(cdiv(s.kn, a.cols));
}
inline int conv_citr(const isa::SaArch& a, const ConvSpec& s) {
  if (s.depthwise) return 1;
  if (is_16x1x16(a)) return s.kc();
  return static_cast<int>(cdiv(s.kc(), a.n_sa));
}

// Weight blob of gati.md 6.2 / 14.1.
inline Bytes pack_conv_weights(const isa::SaArch& a, const ConvSpec& s) {
  const int kitr = conv_kitr(a, s), citr = conv_citr(a, s);
  const int rows = a.rows;
  const bool dup = is_16x1x16(a);
  const int kern_dim = dup ? a.n_sa : a.cols, chan_dim = dup ? a.cols : a.n_sa;
  Bytes blob(up(static_cast<std::uint64_t>(kitr) * citr * rows * a.cols * a.n_sa, 32), 0);
  const int taps = s.kh * s.kw;
  for (int kern = 0; kern < kitr; ++kern)
    for (int chan = 0; chan < citr; ++chan)
      for (int srow = 0; srow < rows; ++srow)
        for (int schan = 0; schan < chan_dim; ++schan)
          for (int skern = 0; skern < kern_dim; ++skern) {
            const std::size_t off =
                ((((static_cast<std::size_t>(kern) * citr + chan) * rows + (rows - 1 - srow)) *
                      chan_dim +
                  schan) *
                     kern_dim +
                 skern);
            if (srow >= taps) continue;
            int k = kern * kern_dim + skern, c = 0;
            if (s.depthwise) {
              if (!dup && schan != skern) continue;  // diagonal (14.1)
              if (k >= s.kn) continue;
              blob[off] = static_cast<std::uint8_t>(s.w[static_cast<std::size_t>(k) * taps + srow]);
              continue;
            }
            c = chan * chan_dim + schan;
            if (k >= s.kn || c >= s.kc()) continue;
            blob[off] = static_cast<std::uint8_t>(
                s.w[(static_cast<std::size_t>(k) * s.kc() + c) * taps + srow]);
          }
  return blob;
}

// Weight blob of a 1x1 ConvType PW layer on 16,1,16 (gati.md 6.2, sa_align_aux_pointwise): per
// (kern, chan) fold of 16 x 16 bytes, input channel chan*16 + 15 - ci at row ci, kernel kern*16 + r
// at byte r.
inline Bytes pack_pointwise_weights(const ConvSpec& s) {
  const int kitr = static_cast<int>(cdiv(s.kn, 16)), citr = static_cast<int>(cdiv(s.ic, 16));
  Bytes blob(up(static_cast<std::uint64_t>(kitr) * citr * 256, 32), 0);
  for (int kern = 0; kern < kitr; ++kern)
    for (int chan = 0; chan < citr; ++chan)
      for (int ci = 0; ci < 16; ++ci)
        for (int r = 0; r < 16; ++r) {
          const int k = kern * 16 + r, c = chan * 16 + (15 - ci);
          if (k < s.kn && c < s.ic)
            blob[static_cast<std::size_t>(((kern * citr + chan) * 16 + ci) * 16 + r)] =
                static_cast<std::uint8_t>(s.w[static_cast<std::size_t>(k) * s.ic + c]);
        }
  return blob;
}

// Turns the conv that add_conv made first in `b` into ConvType PW with `blob` as its weights
// (pack_pointwise_weights) and `citr` channel iterations.
struct ProgramBuilder;
void make_pointwise(ProgramBuilder& b, const Bytes& blob, int citr);

inline Bytes pack_conv_bias(const isa::SaArch& a, const std::vector<std::int32_t>& bias) {
  Bytes out(up(up(bias.size(), a.n_sa) * 4, 32), 0);
  for (std::size_t k = 0; k < bias.size(); ++k) {
    const auto u = static_cast<std::uint32_t>(bias[k]);
    for (int b = 0; b < 4; ++b) out[k * 4 + b] = static_cast<std::uint8_t>(u >> (24 - 8 * b));
  }
  return out;
}

// Plain quantizer and tail (DECISIONS.md 4, gati.md 7.2).
inline std::int64_t rshift_round(std::int64_t v, int s) {
  return s == 0 ? v : (v + (std::int64_t{1} << (s - 1))) >> s;
}
inline std::int32_t ref_tail_value(const ConvSpec& s, std::int64_t acc, int k) {
  std::int64_t v = static_cast<std::int32_t>(
      static_cast<std::uint32_t>(acc) + (s.bias_en ? static_cast<std::uint32_t>(s.bias[k]) : 0u));
  if (s.quant_en) {
    v = rshift_round(v * s.quant_scale, s.quant_shift);
    v = std::min<std::int64_t>(127, std::max<std::int64_t>(-128, v));
  }
  if (s.act_en) {
    if (s.act_type == 0 && v < 0) v = 0;
    if (s.act_type == 1) v = std::min<std::int64_t>(std::max<std::int64_t>(v, 0), s.act_param);
    if (s.act_type == 2) {
      v = ((v < 0 ? s.neg_alpha : s.pos_alpha) * v) >> 8;
      if (s.quant_en) v = std::min<std::int64_t>(127, std::max<std::int64_t>(-128, v));
    }
  }
  return static_cast<std::int32_t>(v);
}

// Raw int32 conv sums [kn][oh*ow], restricted to input channels [c_lo, c_hi).
inline std::vector<std::int64_t> ref_conv_sums(const ConvSpec& s, int c_lo = 0,
                                               int c_hi = 1 << 30) {
  const int oh = s.oh(), ow = s.ow();
  std::vector<std::int64_t> acc(static_cast<std::size_t>(s.kn) * oh * ow, 0);
  for (int k = 0; k < s.kn; ++k)
    for (int y = 0; y < oh; ++y)
      for (int xo = 0; xo < ow; ++xo) {
        std::int64_t sum = 0;
        for (int ci = 0; ci < s.kc(); ++ci) {
          const int c = s.depthwise ? k : ci;
          if (c < c_lo || c >= c_hi) continue;
          for (int i = 0; i < s.kh; ++i)
            for (int j = 0; j < s.kw; ++j) {
              const int iy = y * s.stride + i + s.skip_top - s.pad_top;
              const int ix = xo * s.stride + j - s.pad_left;
              if (iy < 0 || iy >= s.ih || ix < 0 || ix >= s.iw) continue;
              sum += static_cast<std::int64_t>(
                         s.x[(static_cast<std::size_t>(c) * s.ih + iy) * s.iw + ix]) *
                     s.w[((static_cast<std::size_t>(k) * s.kc() + ci) * s.kh + i) * s.kw + j];
            }
        }
        acc[(static_cast<std::size_t>(k) * oh + y) * ow + xo] = sum;
      }
  return acc;
}

// Expected output [kn][out_pixels] after the tail; `initial` (int32 [kn][oh*ow]) is added first.
inline std::vector<std::int32_t> ref_conv(const ConvSpec& s,
                                          const std::vector<std::int32_t>* initial = nullptr) {
  const auto sums = ref_conv_sums(s);
  const int p = s.oh() * s.ow();
  std::vector<std::int32_t> out(static_cast<std::size_t>(s.kn) * s.out_pixels());
  for (int k = 0; k < s.kn; ++k) {
    std::int64_t pool = 0;
    for (int i = 0; i < p; ++i) {
      std::int64_t a = sums[static_cast<std::size_t>(k) * p + i];
      if (initial)
        a = static_cast<std::int32_t>(
            static_cast<std::uint32_t>(a) +
            static_cast<std::uint32_t>((*initial)[static_cast<std::size_t>(k) * p + i]));
      const std::int32_t v = ref_tail_value(s, a, k);
      if (s.gbl_pool)
        pool += v;
      else
        out[static_cast<std::size_t>(k) * p + i] = v;
    }
    if (s.gbl_pool) {
      std::int64_t v = rshift_round(pool * s.gbl_scale, s.gbl_shift);
      if (s.quant_en) v = std::min<std::int64_t>(127, std::max<std::int64_t>(-128, v));
      out[k] = static_cast<std::int32_t>(v);
    }
  }
  return out;
}

// A program under construction: instructions plus blobs at increasing 32-aligned addresses.
struct ProgramBuilder {
  explicit ProgramBuilder(const isa::SaArch& a, std::vector<Instruction> insts = {},
                          std::vector<isa::Blob> blob_list = {})
      : arch(a), instructions(std::move(insts)), blobs(std::move(blob_list)) {}
  isa::SaArch arch;
  std::vector<Instruction> instructions;
  std::vector<isa::Blob> blobs;
  std::uint32_t next_addr = 0x10000;  // after a generous instruction region
  int megablocks = 0;

  std::uint32_t alloc(std::uint64_t bytes) {
    const std::uint32_t a = next_addr;
    next_addr = static_cast<std::uint32_t>(up(next_addr + std::max<std::uint64_t>(bytes, 32), 32));
    return a;
  }
  std::uint32_t add_blob(Bytes data) {
    data.resize(up(data.size(), 32), 0);
    const std::uint32_t a = alloc(data.size());
    blobs.push_back({a, std::move(data)});
    return a;
  }

  // CONV + OutputBlock + TailBlock; returns the OutputBlock index for later edits.
  std::size_t add_conv(const ConvSpec& s, std::uint32_t in_addr, std::uint32_t out_addr,
                       std::uint32_t acc_addr = 0) {
    const std::uint64_t cd = arch.n_sa, dk = 32 / cd;
    const int kitr = conv_kitr(arch, s), citr = conv_citr(arch, s);
    const std::uint32_t w_addr = add_blob(pack_conv_weights(arch, s));
    const std::uint64_t w_bytes =
        up(static_cast<std::uint64_t>(kitr) * citr * arch.rows * arch.cols * arch.n_sa, 32);
    Instruction conv(Opcode::CONV);
    conv.set(Field::CONV_IW, s.iw)
        .set(Field::CONV_IH, s.ih)
        .set(Field::CONV_IC, s.ic)
        .set(Field::CONV_KN, s.kn)
        .set(Field::CONV_KW, s.kw)
        .set(Field::CONV_KH, s.kh)
        .set(Field::CONV_Stride, s.stride)
        .set(Field::CONV_PadLeft, s.pad_left)
        .set(Field::CONV_PadRight, s.pad_right)
        .set(Field::CONV_PadTop, s.pad_top)
        .set(Field::CONV_PadBottom, s.pad_bottom)
        .set(Field::CONV_StartRowSkip, s.skip_top)
        .set(Field::CONV_EndRowSkip, s.skip_bottom)
        .set(Field::CONV_ImageStartAddress, in_addr)
        .set(Field::CONV_ImageEndAddress, in_addr + up(s.ic, cd) * up(s.ih * s.iw, dk))
        .set(Field::CONV_WeightStartAddress, w_addr)
        .set(Field::CONV_WeightEndAddress, w_addr + w_bytes)
        .set(Field::CONV_Im2colPrefetch, s.oh() * s.ow() < 1024 ? 1 : 0)
        .set(Field::CONV_KC, s.kc())
        .set(Field::CONV_ConvType, s.depthwise ? 1 : 0)
        .set(Field::CONV_ChannelDuplicate, !s.depthwise && is_16x1x16(arch) ? 1 : 0);
    const int p = s.oh() * s.ow();
    Instruction out(Opcode::OutputBlock);
    out.set(Field::OutputBlock_AccumulantAddr, acc_addr)
        .set(Field::OutputBlock_AccumulantReadFirst, s.read_first ? 1 : 0)
        .set(Field::OutputBlock_OutputAddr, out_addr)
        .set(Field::OutputBlock_ChannelItr, citr)
        .set(Field::OutputBlock_KernelItr, kitr)
        .set(Field::OutputBlock_ImageDimOutput, up(s.out_pixels(), dk))
        .set(Field::OutputBlock_ImageDimAcc, up(p, std::max<std::uint64_t>(1, dk / 4)))
        .set(Field::OutputBlock_AccEn,
             (!s.depthwise && (s.ic > arch.n_sa || is_16x1x16(arch))) ? 1 : 0)
        .set(Field::OutputBlock_DispatchEn, s.dispatch ? 1 : 0)
        .set(Field::OutputBlock_DispatchID, s.dispatch_id)
        .set(Field::OutputBlock_OnChipAcc, s.on_chip_acc ? 1 : 0)
        .set(Field::OutputBlock_OH, s.oh())
        .set(Field::OutputBlock_OW, s.ow())
        .set(Field::OutputBlock_OpWidth, s.op_width);
    Instruction tail(Opcode::TailBlock);
    if (s.bias_en) {
      const Bytes b = pack_conv_bias(arch, s.bias);
      const std::uint32_t b_addr = add_blob(b);
      tail.set(Field::TailBlock_BiasEn, 1)
          .set(Field::TailBlock_BiasWidth, 32)
          .set(Field::TailBlock_BiasStartAddress, b_addr)
          .set(Field::TailBlock_BiasEndAddress, b_addr + b.size());
    }
    tail.set(Field::TailBlock_QuantEn, s.quant_en ? 1 : 0)
        .set_signed(Field::TailBlock_QuantScale, s.quant_scale)
        .set(Field::TailBlock_QuantShift, s.quant_shift)
        .set(Field::TailBlock_ActEn, s.act_en ? 1 : 0)
        .set(Field::TailBlock_ActType, s.act_type)
        .set(Field::TailBlock_ActParam, s.act_param)
        .set(Field::TailBlock_NegAlpha, s.neg_alpha)
        .set(Field::TailBlock_PosAlpha, s.pos_alpha)
        .set(Field::TailBlock_GblPoolEn, s.gbl_pool ? 1 : 0)
        .set(Field::TailBlock_GblPoolScale, s.gbl_scale)
        .set(Field::TailBlock_GblPoolShift, s.gbl_shift);
    instructions.push_back(conv);
    instructions.push_back(out);
    const std::size_t out_index = instructions.size() - 1;
    instructions.push_back(tail);
    ++megablocks;
    return out_index;
  }

  // Appends START(i, N) after every megablock group; call once when all layers are added.
  void finish() {
    std::vector<Instruction> with_starts;
    int layer = 0;
    for (std::size_t i = 0; i < instructions.size(); ++i) {
      with_starts.push_back(instructions[i]);
      const bool group_end =
          i + 1 == instructions.size() || isa::is_megablock(instructions[i + 1].opcode());
      if (group_end) {
        Instruction st(Opcode::START);
        st.set(Field::START_LayerNumber, ++layer).set(Field::START_TotalLayers, megablocks);
        with_starts.push_back(st);
      }
    }
    instructions = std::move(with_starts);
  }

  // GML + input packet + start packet.
  Bytes stream(std::uint32_t input_addr, const Bytes& input) const {
    isa::GmlProgram prog{instructions, blobs};
    Bytes s = isa::encode_gml(prog);
    isa::append_dwp_packet(s, input_addr, input);
    isa::append_dwp_start(s);
    return s;
  }
};

inline void make_pointwise(ProgramBuilder& b, const Bytes& blob, int citr) {
  const std::uint32_t w_addr = b.add_blob(blob);
  b.instructions[0]
      .set(Field::CONV_ConvType, 2)
      .set(Field::CONV_ChannelDuplicate, 0)
      .set(Field::CONV_WeightStartAddress, w_addr)
      .set(Field::CONV_WeightEndAddress, w_addr + blob.size());
  b.instructions[1].set(Field::OutputBlock_ChannelItr, citr);
}

// The driver, not an expectation: a device of `arch` that has received `b`'s program, the input
// at `input_addr` and the start packet, as a board would.
inline std::unique_ptr<Device> run_program(const isa::SaArch& arch, const ProgramBuilder& b,
                                           std::uint32_t input_addr, const Bytes& input,
                                           std::uint64_t dram_bytes = 16ull << 20) {
  DeviceConfig cfg;
  cfg.arch = arch;
  cfg.dram_bytes = dram_bytes;
  auto dev = std::make_unique<Device>(cfg);
  dev->receive_dwp(b.stream(input_addr, input));
  return dev;
}

}  // namespace npukit::device::testing
