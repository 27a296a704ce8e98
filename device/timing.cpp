// The timing model (see timing.h and docs/device.md, "Timing"). Only instruction fields go in.
#include "device/timing.h"

#include "common/bytes.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <iterator>

namespace npukit::device::timing {

using isa::Field;
using isa::Opcode;

const std::array<Constant, kTermCount> kConstants = {{
#include "device/timing_table.inc"
}};

std::string_view bound_name(Bound b) {
  switch (b) {
    case Bound::kCompute:
      return "compute";
    case Bound::kDram:
      return "DRAM";
    case Bound::kOverhead:
      return "overhead";
    case Bound::kDispatch:
      return "dispatch";
  }
  return "?";
}

double evaluate(const Terms& terms) {
  double sum = 0;
  for (int i = 0; i < kTermCount; ++i) sum += terms[i] * kConstants[i].value;
  return sum;
}

std::uint64_t run_start_cycles() {
  return static_cast<std::uint64_t>(std::llround(std::max(0.0, kConstants[kRunStart].value)));
}

namespace {

std::uint64_t sat_sub(std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; }
std::uint64_t at_least_1(std::uint64_t v) { return v ? v : 1; }
double beats(std::uint64_t bytes) {
  return static_cast<double>(ceil_div(bytes, std::uint64_t{32}));
}

// Bytes of a C x P activation in the 6.1 layout (C' * P').
std::uint64_t layout_bytes(const isa::SaArch& arch, std::uint64_t channels, std::uint64_t pixels) {
  return ceil_mod(channels, static_cast<std::uint64_t>(arch.n_sa)) *
         ceil_mod(pixels, static_cast<std::uint64_t>(arch.pixels_per_word()));
}

struct OutFields {
  std::uint64_t kitr, citr, dim_out, dim_acc, op_width, oh, ow;
  bool acc_en, on_chip, flat;
  std::uint64_t bytes;  // output region written
};

OutFields out_fields(const isa::SaArch& arch, const isa::Instruction& o) {
  OutFields f{};
  f.kitr = at_least_1(o.get(Field::OutputBlock_KernelItr));
  f.citr = at_least_1(o.get(Field::OutputBlock_ChannelItr));
  f.dim_out = o.get(Field::OutputBlock_ImageDimOutput);
  f.dim_acc = o.get(Field::OutputBlock_ImageDimAcc);
  f.op_width = at_least_1(o.get(Field::OutputBlock_OpWidth));
  f.oh = o.get(Field::OutputBlock_OH);
  f.ow = o.get(Field::OutputBlock_OW);
  f.acc_en = o.get(Field::OutputBlock_AccEn) != 0;
  f.on_chip = o.get(Field::OutputBlock_OnChipAcc) != 0;
  f.flat = o.get(Field::OutputBlock_FlatController) != 0;
  f.bytes =
      f.flat ? f.dim_out : f.dim_out * f.kitr * static_cast<std::uint64_t>(arch.n_sa) * f.op_width;
  return f;
}

std::uint64_t tail_bias_bytes(const isa::Instruction* tail) {
  if (!tail || tail->get(Field::TailBlock_BiasEn) == 0) return 0;
  return sat_sub(tail->get(Field::TailBlock_BiasEndAddress),
                 tail->get(Field::TailBlock_BiasStartAddress));
}

void time_conv(const LayerInput& in, const OutFields& o, LayerTiming& t) {
  const isa::Instruction& m = *in.mega;
  const isa::SaArch& arch = in.arch;
  const std::uint64_t rows = static_cast<std::uint64_t>(arch.rows);
  const std::uint64_t cols = static_cast<std::uint64_t>(arch.cols);
  const std::uint64_t n_sa = static_cast<std::uint64_t>(arch.n_sa);
  const std::uint64_t iw = m.get(Field::CONV_IW), ih = m.get(Field::CONV_IH);
  const std::uint64_t hp = sat_sub(ih + m.get(Field::CONV_PadTop) + m.get(Field::CONV_PadBottom),
                                   m.get(Field::CONV_StartRowSkip) + m.get(Field::CONV_EndRowSkip));
  const std::uint64_t wp = iw + m.get(Field::CONV_PadLeft) + m.get(Field::CONV_PadRight);
  const std::uint64_t out_pixels = o.oh * o.ow;
  const bool late_start = arch.cols == 1;  // 16,1,16: the array waits for the whole stream (14.14)
  const std::uint64_t stream = hp * wp + (late_start ? out_pixels : 0);
  const std::uint64_t passes = o.kitr * o.citr;
  const double weight_beats = static_cast<double>(rows * cols * n_sa) / 32.0;
  const double image_beats = beats(layout_bytes(arch, n_sa, ih * iw));  // one channel group
  const double out_beats_per_kitr = beats(o.bytes) / static_cast<double>(o.kitr);

  t.terms[kConvPass] = static_cast<double>(passes);
  t.terms[kConvWritePass] = static_cast<double>(o.kitr);
  t.terms[kConvStream] = static_cast<double>(passes * stream);
  t.terms[kWeightBeat] = static_cast<double>(passes) * weight_beats;
  t.terms[kOutputBeat] = beats(o.bytes);

  // Partial sums through DRAM (OnChipAcc = 0, AccEn = 1): every channel iteration but the last
  // writes them, every one but the first reads them back; the pass is bound by its DRAM traffic.
  std::uint64_t psum_read = 0, psum_write = 0;
  if (!o.on_chip && o.acc_en) {
    const std::uint64_t lanes = arch.regular_optimal() ? cols : n_sa;
    const std::uint64_t psum_bytes = o.dim_acc * lanes * 4;
    const double ps = beats(psum_bytes);
    double excess = 0;
    for (std::uint64_t c = 0; c < o.citr; ++c) {
      const double rd = image_beats + (c > 0 ? ps : 0.0);
      const double wr = c + 1 < o.citr ? ps : out_beats_per_kitr;
      excess += std::max(
          0.0, kReadCyclesPerBeat * rd + kWriteCyclesPerBeat * wr - static_cast<double>(stream));
    }
    t.terms[kDramBound] = excess * static_cast<double>(o.kitr);
    psum_read = psum_bytes * o.kitr * (o.citr - 1);
    psum_write = psum_bytes * o.kitr * (o.citr - 1);
  }

  const std::uint64_t kh = m.get(Field::CONV_KH), kw = m.get(Field::CONV_KW);
  const std::uint64_t kn = m.get(Field::CONV_KN), kc = m.get(Field::CONV_KC);
  const std::uint64_t conv_type = m.get(Field::CONV_ConvType);
  if (conv_type == 1)
    t.macs = out_pixels * kn * kh * kw;
  else if (conv_type == 2)
    t.macs = out_pixels * kn * kc;
  else
    t.macs = out_pixels * kn * kc * kh * kw;
  t.peak_macs_per_cycle = rows * cols * n_sa;
  t.weight_bytes =
      sat_sub(m.get(Field::CONV_WeightEndAddress), m.get(Field::CONV_WeightStartAddress));
  t.dram_read_bytes = passes * static_cast<std::uint64_t>(image_beats) * 32 + t.weight_bytes +
                      tail_bias_bytes(in.tail) + psum_read;
  t.dram_write_bytes = o.bytes + psum_write;
  t.passes = passes;
  t.stream = passes * stream;
}

void time_pool(const LayerInput& in, const OutFields& o, LayerTiming& t) {
  const isa::Instruction& m = *in.mega;
  const std::uint64_t iw = m.get(Field::POOL_IW), ih = m.get(Field::POOL_IH);
  const std::uint64_t ic = m.get(Field::POOL_IC);
  const std::uint64_t hp = ih + m.get(Field::POOL_PadTop) + m.get(Field::POOL_PadBottom);
  const std::uint64_t wp = iw + m.get(Field::POOL_PadLeft) + m.get(Field::POOL_PadRight);
  const std::uint64_t groups = at_least_1(ceil_div(ic, static_cast<std::uint64_t>(in.arch.n_sa)));
  t.terms[kPoolGroup] = static_cast<double>(groups);
  t.terms[kPoolStream] = static_cast<double>(groups * hp * wp);
  t.terms[kOutputBeat] = beats(o.bytes);
  t.dram_read_bytes = layout_bytes(in.arch, ic, ih * iw);
  t.dram_write_bytes = o.bytes;
  t.passes = groups;
  t.stream = groups * hp * wp;
}

void time_other(const LayerInput& in, const OutFields& o, LayerTiming& t) {
  const isa::Instruction& m = *in.mega;
  const isa::SaArch& arch = in.arch;
  t.passes = 1;
  switch (m.opcode()) {
    case Opcode::EltWise: {
      const std::uint64_t ic = m.get(Field::EltWise_IC);
      const std::uint64_t pixels = m.get(Field::EltWise_IW) * m.get(Field::EltWise_IH);
      const std::uint64_t bytes = layout_bytes(arch, ic, pixels);
      const auto type = static_cast<isa::EltType>(m.get(Field::EltWise_EltType));
      const bool unary = type == isa::EltType::kSigmoid || type == isa::EltType::kTanh;
      const std::uint64_t groups = at_least_1(ceil_div(ic, static_cast<std::uint64_t>(arch.n_sa)));
      t.terms[kBlockGroup] = static_cast<double>(groups);
      t.terms[kEltStream] = static_cast<double>(
          groups * ceil_mod(pixels, static_cast<std::uint64_t>(arch.pixels_per_word())));
      t.passes = groups;
      t.dram_read_bytes = bytes * (unary ? 1 : 2);
      t.stream = bytes;
      break;
    }
    case Opcode::FC: {
      const std::uint64_t rows = m.get(Field::FC_WeightRows), cols = m.get(Field::FC_WeightCols);
      const std::uint64_t blocks = at_least_1(ceil_div(cols, std::uint64_t{isa::kFcEngineCols}));
      t.terms[kFcStream] = static_cast<double>(blocks * ceil_mod(rows, std::uint64_t{32}));
      t.macs = rows * cols;
      t.peak_macs_per_cycle = isa::kFcEngineCols;
      t.weight_bytes =
          sat_sub(m.get(Field::FC_WeightEndAddress), m.get(Field::FC_WeightStartAddress));
      t.dram_read_bytes =
          t.weight_bytes +
          sat_sub(m.get(Field::FC_ImageEndAddr), m.get(Field::FC_ImageStartAddress)) +
          tail_bias_bytes(in.tail);
      t.passes = blocks;
      t.stream = blocks * rows;
      break;
    }
    case Opcode::RESIZE: {
      const std::uint64_t ic = m.get(Field::RESIZE_IC);
      const std::uint64_t pixels = m.get(Field::RESIZE_IW) * m.get(Field::RESIZE_IH);
      const std::uint64_t groups = at_least_1(ceil_div(ic, static_cast<std::uint64_t>(arch.n_sa)));
      t.terms[kBlockGroup] = static_cast<double>(groups);
      t.terms[kResizeStream] = static_cast<double>(
          groups * ceil_mod(4 * pixels, static_cast<std::uint64_t>(arch.pixels_per_word())));
      t.passes = groups;
      t.dram_read_bytes = layout_bytes(arch, ic, pixels);
      t.stream = o.bytes;
      break;
    }
    default: {  // TRANSPOSE, RESHAPE, CONCAT, NMS: bytes moved, not recorded on the RTL
      t.terms[kOtherStream] = beats(o.bytes);
      t.dram_read_bytes = o.bytes;
      t.stream = o.bytes;
      break;
    }
  }
  t.terms[kOutputBeat] = beats(o.bytes);
  t.dram_write_bytes = o.bytes;
}

std::uint64_t part(const Terms& terms, std::initializer_list<Term> which) {
  double sum = 0;
  for (Term w : which) sum += terms[w] * kConstants[w].value;
  return static_cast<std::uint64_t>(std::llround(std::max(0.0, sum)));
}

}  // namespace

LayerTiming time_layer(const LayerInput& in) {
  LayerTiming t;
  const OutFields o = out_fields(in.arch, *in.output);
  t.terms[kLayer] = 1;
  switch (in.mega->opcode()) {
    case Opcode::CONV:
      time_conv(in, o, t);
      break;
    case Opcode::POOL:
      time_pool(in, o, t);
      break;
    default:
      time_other(in, o, t);
      break;
  }
  if (in.dispatch_bytes) {
    t.terms[kDispatchFrame] = 1;
    t.terms[kDispatchBeat] = beats(in.dispatch_bytes);
  }
  t.overhead_cycles =
      part(t.terms, {kLayer, kConvPass, kConvWritePass, kWeightBeat, kPoolGroup, kBlockGroup});
  t.compute_cycles =
      part(t.terms, {kConvStream, kPoolStream, kEltStream, kFcStream, kResizeStream, kOtherStream});
  t.dram_cycles = part(t.terms, {kOutputBeat, kDramBound});
  t.dispatch_cycles = part(t.terms, {kDispatchFrame, kDispatchBeat});
  t.cycles = static_cast<std::uint64_t>(std::llround(std::max(0.0, evaluate(t.terms))));
  const std::uint64_t parts[] = {t.compute_cycles, t.dram_cycles, t.overhead_cycles,
                                 t.dispatch_cycles};
  const Bound names[] = {Bound::kCompute, Bound::kDram, Bound::kOverhead, Bound::kDispatch};
  t.bound = names[std::max_element(std::begin(parts), std::end(parts)) - std::begin(parts)];
  return t;
}

}  // namespace npukit::device::timing
