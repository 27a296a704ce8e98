#include "device/eltwise.h"

#include "common/error.h"
#include "device/tanh_engine.h"

#include <algorithm>
#include <array>

namespace npukit::device {

using isa::EltType;
using isa::Field;

std::int32_t eltwise_scale_from_field(std::uint64_t field) {
  const std::uint32_t low18 = static_cast<std::uint32_t>(field) & 0x3FFFFu;
  // Sign-extend bit 17.
  return static_cast<std::int32_t>(low18 ^ 0x20000u) - 0x20000;
}

EltwiseLaneParams eltwise_lane_params(const isa::Instruction& inst, std::string_view where) {
  const std::uint64_t type = inst.get(Field::EltWise_EltType);
  if (type > static_cast<std::uint64_t>(EltType::kTanh)) {
    fail("{}: EltWise.EltType = {} is not an operation (0 add, 1 sub, 2 mult, 3 sigmoid, 4 tanh)",
         where, type);
  }
  EltwiseLaneParams p;
  p.type = static_cast<EltType>(type);
  p.a_scale = eltwise_scale_from_field(inst.get(Field::EltWise_AScale));
  p.b_scale = eltwise_scale_from_field(inst.get(Field::EltWise_BScale));
  p.a_zero = static_cast<std::int8_t>(inst.get(Field::EltWise_AZeroPoint));
  p.b_zero = static_cast<std::int8_t>(inst.get(Field::EltWise_BZeroPoint));
  return p;
}

int eltwise_fp_cast_shift(EltType type) {
  return type == EltType::kSigmoid || type == EltType::kTanh ? 16 : 10;
}

namespace {

// The lane arithmetic of one operation (eltwise_lane's switch resolved by the caller).
// |operand| <= 255 and |scale| < 2^17, so L and R fit in 26 bits; 64-bit covers L * R.
template <EltType kType>
std::int32_t lane_of(const EltwiseLaneParams& p, std::int8_t a, std::int8_t b) {
  const std::int64_t left = std::int64_t{a - p.a_zero} * p.a_scale;
  const std::int64_t right = std::int64_t{b - p.b_zero} * p.b_scale;
  std::int64_t result = 0;
  if constexpr (kType == EltType::kAdd) result = left + right;
  if constexpr (kType == EltType::kSub) result = left - right;
  if constexpr (kType == EltType::kMult) result = (left * right + (std::int64_t{1} << 9)) >> 10;
  if constexpr (kType == EltType::kSigmoid) result = sigmoid_q16(static_cast<std::int32_t>(left));
  if constexpr (kType == EltType::kTanh) result = tanh_q16(static_cast<std::int32_t>(left));
  // The lane's output bus is 32 bits wide: keep the low 32 bits (two's complement).
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(result)));
}

inline bool wraps(std::int8_t x, std::int32_t zero) {
  const int d = x - zero;
  return d < -128 || d > 127;
}

template <EltType kType>
std::uint64_t span_of(const EltwiseLaneParams& p, const std::int8_t* a, const std::int8_t* b,
                      std::int32_t* out, std::uint64_t n) {
  constexpr bool kUnary = kType == EltType::kSigmoid || kType == EltType::kTanh;
  std::uint64_t wrapped = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::int8_t y = kUnary ? std::int8_t{0} : b[i];
    wrapped += wraps(a[i], p.a_zero) || (!kUnary && wraps(y, p.b_zero));
    out[i] = lane_of<kType>(p, a[i], y);
  }
  return wrapped;
}

}  // namespace

std::int32_t eltwise_lane(const EltwiseLaneParams& p, std::int8_t a, std::int8_t b) {
  switch (p.type) {
    case EltType::kAdd:
      return lane_of<EltType::kAdd>(p, a, b);
    case EltType::kSub:
      return lane_of<EltType::kSub>(p, a, b);
    case EltType::kMult:
      return lane_of<EltType::kMult>(p, a, b);
    case EltType::kSigmoid:
      return lane_of<EltType::kSigmoid>(p, a, b);
    case EltType::kTanh:
      return lane_of<EltType::kTanh>(p, a, b);
  }
  return 0;
}

bool eltwise_zero_point_wraps(std::int8_t x, std::int32_t zero) { return wraps(x, zero); }

std::uint64_t eltwise_span(const EltwiseLaneParams& p, const std::int8_t* a, const std::int8_t* b,
                           std::int32_t* out, std::uint64_t n, Isa isa) {
  const bool unary = p.type == EltType::kSigmoid || p.type == EltType::kTanh;
  if (!unary && cpu::path_allowed(cpu::resolve(isa, "eltwise_span"), Isa::kAvx2))
    return detail::eltwise_span_avx2(p, a, b, out, n);
  switch (p.type) {
    case EltType::kAdd:
      return span_of<EltType::kAdd>(p, a, b, out, n);
    case EltType::kSub:
      return span_of<EltType::kSub>(p, a, b, out, n);
    case EltType::kMult:
      return span_of<EltType::kMult>(p, a, b, out, n);
    case EltType::kSigmoid:
      return span_of<EltType::kSigmoid>(p, a, b, out, n);
    case EltType::kTanh:
      return span_of<EltType::kTanh>(p, a, b, out, n);
  }
  return 0;
}

}  // namespace npukit::device

// ---------------------------------------------------------------------------------------------
// Shared field checks

namespace npukit::device {

std::uint64_t require_nonzero(const LayerContext& ctx, isa::Field field, std::string_view what) {
  const std::uint64_t v = ctx.mega.get(field);
  if (v == 0) ctx.fail_field(field, "is 0, but {} must be at least 1", what);
  return v;
}

std::uint64_t check_input_start(const LayerContext& ctx, isa::Field start, std::uint64_t bytes) {
  const std::uint64_t addr = ctx.mega.get(start);
  if (addr % kDramBeatBytes != 0)
    ctx.fail_field(start, "address 0x{:x} is not 32-byte aligned (DRAM is read in 32-byte words)",
                   addr);
  ctx.check_dram_range(start, addr, bytes);
  return addr;
}

std::uint64_t check_input_region(const LayerContext& ctx, isa::Field start, isa::Field end,
                                 std::uint64_t bytes) {
  const std::uint64_t addr = check_input_start(ctx, start, bytes);
  const std::uint64_t stop = ctx.mega.get(end);
  if (stop != addr + bytes)
    ctx.fail_field(end,
                   "is 0x{:x} but the tensor at 0x{:x} is {} bytes, so the (exclusive) end "
                   "address must be 0x{:x}",
                   stop, addr, bytes, addr + bytes);
  return addr;
}

void check_output_dims(const LayerContext& ctx, std::uint64_t oh, std::uint64_t ow) {
  const isa::Instruction& out = ctx.require_output();
  const std::uint64_t got_h = out.get(Field::OutputBlock_OH);
  const std::uint64_t got_w = out.get(Field::OutputBlock_OW);
  if (got_h != 0 && got_h != oh)
    ctx.fail_field(Field::OutputBlock_OH, "is {} but the {} output is {} high", got_h,
                   isa::name(ctx.mega.opcode()), oh);
  if (got_w != 0 && got_w != ow)
    ctx.fail_field(Field::OutputBlock_OW, "is {} but the {} output is {} wide", got_w,
                   isa::name(ctx.mega.opcode()), ow);
}

void check_output_fits(const LayerContext& ctx, std::uint64_t bytes) {
  ctx.check_dram_range(Field::OutputBlock_OutputAddr,
                       ctx.require_output().get(Field::OutputBlock_OutputAddr), bytes);
}

void require_int8_output(const LayerContext& ctx) {
  const std::uint64_t width = ctx.require_output().get(Field::OutputBlock_OpWidth);
  if (width != 1)
    ctx.fail_field(Field::OutputBlock_OpWidth, "is {} but {} writes int8 values: OpWidth must be 1",
                   width, isa::name(ctx.mega.opcode()));
}

// ---------------------------------------------------------------------------------------------
// The megablock

namespace {

void warn_wrapped(LayerContext& ctx, std::uint64_t wrapped) {
  if (wrapped)
    ctx.diag.warn(ctx.layer_number,
                  fmt::format("{}: {} elements minus their zero point leave int8; the v1.0.0 RTL "
                              "subtracts zero points in an 8-bit register and would wrap there, "
                              "the model computes the exact difference",
                              ctx.where(), wrapped));
}

// The words of an add / sub / mult whose whole pipeline is the same for every channel (issue 13):
// byte i of the output region is a function of byte i of each operand alone, so the 9,8,8 layout
// (8 channels x 4 pixels per word) is computed word by word straight from the operands' DRAM
// pages into the output's, with no planar copies. Taken only when the tail has no bias, quantizes
// (QuantEn, ActEn off / ReLU / Clip: quantize_span's arithmetic), has no global pool, the
// OutputBlock writes OpWidth 1 to a 32-byte aligned address and passes the checks
// write_activation_output makes, the output region is each operand's or apart from it, and the
// AVX2 path may run; otherwise false, with nothing read or written. Padding bytes are written 0
// and left out of `wrapped`, as the planar path does.
bool eltwise_words(LayerContext& ctx, const EltwiseLaneParams& lane, const ActivationLayout& layout,
                   std::uint64_t left_addr, std::uint64_t right_addr, const TailPipeline& tail,
                   std::uint64_t& wrapped) {
  const TailConfig& cfg = tail.config();
  const int fp_cast = eltwise_fp_cast_shift(lane.type);
  const int act = cfg.act_en ? cfg.act_type : -1;
  if (layout.channel_group != 8 || layout.pixels_per_word != 4 || cfg.gbl_pool_en || cfg.bias_en ||
      !cfg.quant_en || act > 1 || cfg.act_param < 0 || cfg.quant_shift < 0 ||
      cfg.quant_shift + fp_cast > 62)
    return false;
  const Isa level = cpu::resolve(Isa::kAuto, "eltwise words");
  if (!cpu::path_allowed(level, Isa::kAvx2)) return false;
  const bool avx512 = cpu::path_allowed(level, Isa::kAvx512Vnni);
  const OutputConfig out = OutputConfig::from(ctx.require_output());
  const std::uint64_t bytes = layout.bytes(), o = out.output_addr;
  auto apart_or_same = [&](std::uint64_t in) {
    return in == o || in + bytes <= o || o + bytes <= in;
  };
  if (out.op_width != 1 || out.flat || out.image_dim_output != layout.padded_pixels() ||
      std::uint64_t{out.kernel_itr} * static_cast<std::uint64_t>(ctx.arch.n_sa) !=
          layout.padded_channels() ||
      o % kDramBeatBytes != 0 || o + bytes > ctx.dram.size() || !apart_or_same(left_addr) ||
      !apart_or_same(right_addr))
    return false;

  const std::uint64_t group_words = layout.padded_pixels() / 4;
  const std::uint64_t last_group = layout.padded_channels() / 8 - 1;
  const std::uint64_t real_c = layout.channels % 8, real_p = layout.pixels % 4;
  const bool padded = real_c != 0 || real_p != 0;
  // n bytes (whole words) from byte `at` of the layout: a and b the operands', y the output's.
  auto run = [&](std::uint64_t at, const std::uint8_t* a, const std::uint8_t* b, std::uint8_t* y,
                 std::uint64_t n) {
    // The padding bytes: left out of `wrapped` (read before y is written: y may be a), then 0.
    // Only the words that hold some are visited, each once: the last word of every group when
    // the pixels pad it, every word of the last group when the channels do.
    auto each_padding_byte = [&](auto f) {
      const std::uint64_t w0 = at / 32, w1 = (at + n) / 32;
      const auto word = [&](std::uint64_t w) {
        const bool pad_c = real_c != 0 && w / group_words == last_group;
        const bool pad_p = real_p != 0 && w % group_words == group_words - 1;
        for (std::uint64_t k = 0; k < 32; ++k)
          if ((pad_c && k / 4 >= real_c) || (pad_p && k % 4 >= real_p)) f(w * 32 - at + k);
      };
      const std::uint64_t last_group_first = last_group * group_words;
      if (real_p != 0)  // the groups' last words, but the last group's when it is visited whole
        for (std::uint64_t w = w0 / group_words * group_words + group_words - 1;
             w < w1 && (real_c == 0 || w < last_group_first); w += group_words)
          word(w);
      if (real_c != 0)
        for (std::uint64_t w = std::max(w0, last_group_first); w < w1; ++w) word(w);
    };
    // With both zero points 0, as the compiler emits them, no int8 operand wraps: no pass (on
    // resnet50's 7x7 x 2048 adds, 3 of every 13 words padding, it took 2/3 of the layer's time).
    if (padded && (lane.a_zero != 0 || lane.b_zero != 0))
      each_padding_byte([&](std::uint64_t e) {
        wrapped -= eltwise_zero_point_wraps(static_cast<std::int8_t>(a[e]), lane.a_zero) ||
                   eltwise_zero_point_wraps(static_cast<std::int8_t>(b[e]), lane.b_zero);
      });
    wrapped += detail::eltwise_quantized_bytes_avx2(
        lane, reinterpret_cast<const std::int8_t*>(a), reinterpret_cast<const std::int8_t*>(b), y,
        n, cfg.quant_scale, cfg.quant_shift, fp_cast, act, cfg.act_param, avx512);
    if (padded) each_padding_byte([&](std::uint64_t e) { y[e] = 0; });
  };
  // Addresses and pages are multiples of 32, so every page piece is whole words. A page never
  // written reads as zeros. The output's page is taken for writing first: with the output on an
  // operand, each chunk is read before it is written.
  static constexpr std::array<std::uint8_t, Dram::kPageBytes> kZeros{};
  Dram& dram = ctx.dram;
  dram.write_pages(
      o, bytes, "output write", [&](std::uint64_t done, std::uint8_t* y, std::uint64_t n) {
        dram.read_pages(left_addr + done, n, "activation read",
                        [&](std::uint64_t d2, const std::uint8_t* a, std::uint64_t n2) {
                          dram.read_pages(
                              right_addr + done + d2, n2, "activation read",
                              [&](std::uint64_t d3, const std::uint8_t* b, std::uint64_t n3) {
                                run(done + d2 + d3, a ? a + d3 : kZeros.data(),
                                    b ? b : kZeros.data(), y + d2 + d3, n3);
                              });
                        });
      });
  return true;
}

}  // namespace

BlockTiming run_eltwise(LayerContext& ctx) {
  const std::uint64_t type = ctx.mega.get(Field::EltWise_EltType);
  if (type > static_cast<std::uint64_t>(EltType::kTanh))
    ctx.fail_field(Field::EltWise_EltType,
                   "{} is not an operation (0 add, 1 sub, 2 mult, 3 sigmoid, 4 tanh)", type);
  const EltwiseLaneParams lane = eltwise_lane_params(ctx.mega, ctx.where());
  const std::uint64_t iw = require_nonzero(ctx, Field::EltWise_IW, "the image width");
  const std::uint64_t ih = require_nonzero(ctx, Field::EltWise_IH, "the image height");
  const std::uint64_t ic = require_nonzero(ctx, Field::EltWise_IC, "the channel count");
  const bool unary = lane.type == EltType::kSigmoid || lane.type == EltType::kTanh;
  // The datapath uses bits [17:0] of each scale; a 32-bit value that is not the sign extension of
  // those bits means the program meant a scale the hardware cannot hold.
  for (const Field f : {Field::EltWise_AScale, Field::EltWise_BScale}) {
    const std::uint64_t raw = ctx.mega.get(f);
    const std::int32_t used = eltwise_scale_from_field(raw);
    if (static_cast<std::uint32_t>(used) != static_cast<std::uint32_t>(raw) &&
        !(unary && f == Field::EltWise_BScale))
      ctx.diag.warn(ctx.layer_number,
                    fmt::format("{}: 0x{:08x} does not fit the signed 18-bit scale; the hardware "
                                "uses bits [17:0] only, i.e. {}",
                                ctx.field_name(f), raw, used));
  }

  const ActivationLayout layout = ActivationLayout::for_arch(ctx.arch, ic, ih * iw);
  const std::uint64_t left_addr =
      check_input_region(ctx, Field::EltWise_LeftOperandStartAddress,
                         Field::EltWise_LeftOperandEndAddress, layout.bytes());
  // Sigmoid and tanh ignore the right operand; it is neither checked nor read.
  const std::uint64_t right_addr =
      unary ? 0
            : check_input_region(ctx, Field::EltWise_RightOperandStartAddress,
                                 Field::EltWise_RightOperandEndAddress, layout.bytes());

  const TailPipeline tail(ctx, ic, eltwise_fp_cast_shift(lane.type));
  // With the tail's global average pool the OutputBlock sees a 1x1 image.
  if (tail.global_pool())
    check_output_dims(ctx, 1, 1);
  else
    check_output_dims(ctx, ih, iw);
  const std::uint64_t pixels = layout.pixels;
  const std::uint64_t out_pixels = tail.output_pixels(pixels);
  const ActivationLayout out_layout = ActivationLayout::for_arch(ctx.arch, ic, out_pixels);
  check_output_fits(
      ctx, out_layout.bytes() *
               std::max<std::uint64_t>(1, ctx.require_output().get(Field::OutputBlock_OpWidth)));
  std::uint64_t wrapped = 0;
  const std::uint64_t n_sa = static_cast<std::uint64_t>(ctx.arch.n_sa);
  const std::uint64_t compute =
      layout.bytes() / n_sa + kEltwisePipelineCycles + (unary ? kTanhPipelineCycles : 0);
  if (!unary && eltwise_words(ctx, lane, layout, left_addr, right_addr, tail, wrapped)) {
    warn_wrapped(ctx, wrapped);
    return streaming_timing(compute, layout.bytes() * 2, layout.bytes());
  }
  // Buffers kept between layers and images (no allocation once they have grown).
  thread_local std::vector<std::int8_t> left, right;
  thread_local std::vector<std::int32_t> lanes, out;
  read_activation(ctx, Field::EltWise_LeftOperandStartAddress, left_addr, layout, left);
  if (!unary)
    read_activation(ctx, Field::EltWise_RightOperandStartAddress, right_addr, layout, right);
  lanes.resize(pixels);
  out.resize(ic * out_pixels);
  for (std::uint64_t c = 0; c < ic; ++c) {
    wrapped += eltwise_span(lane, left.data() + c * pixels,
                            unary ? nullptr : right.data() + c * pixels, lanes.data(), pixels);
    tail.run_channel(c, lanes, std::span<std::int32_t>(out).subspan(c * out_pixels, out_pixels));
  }
  warn_wrapped(ctx, wrapped);

  const std::uint64_t written = write_activation_output(ctx, out_layout, out);
  return streaming_timing(compute, layout.bytes() * (unary ? 1 : 2), written);
}

}  // namespace npukit::device
