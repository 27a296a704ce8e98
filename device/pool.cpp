#include "device/pool.h"

#include "device/eltwise.h"  // field checks shared by the device-blocks megablocks

#include "common/parallel.h"

#include <algorithm>

namespace npukit::device {

using isa::Field;
using isa::PoolType;

// Pipeline depth of the pool PE arrays (im2col -> compare/add -> scale -> zero padder).
inline constexpr std::uint64_t kPoolPipelineCycles = 8;

std::uint64_t pool_output_size(std::uint64_t in, std::uint64_t kernel, std::uint64_t stride,
                               std::uint64_t pad_begin, std::uint64_t pad_end, bool ceil_mode) {
  const std::uint64_t padded = in + pad_begin + pad_end;
  if (kernel > padded || stride == 0) return 0;
  const std::uint64_t span = padded - kernel;
  std::uint64_t out = (ceil_mode ? ceil_div(span, stride) : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad_begin) --out;
  return out;
}

PoolShape pool_shape(const LayerContext& ctx) {
  const isa::Instruction& m = ctx.mega;
  PoolShape s;
  const std::uint64_t type = m.get(Field::POOL_PoolType);
  if (type > static_cast<std::uint64_t>(PoolType::kGlobalAverage))
    ctx.fail_field(Field::POOL_PoolType,
                   "{} is not a pool type (0 max, 1 average, 2 global average)", type);
  s.type = static_cast<PoolType>(type);
  s.iw = require_nonzero(ctx, Field::POOL_IW, "the image width");
  s.ih = require_nonzero(ctx, Field::POOL_IH, "the image height");
  s.scale = static_cast<std::int64_t>(m.get(Field::POOL_PoolScale));
  s.shift = static_cast<int>(m.get(Field::POOL_PoolShift));
  if (s.type == PoolType::kGlobalAverage) {
    s.oh = s.ow = 1;
    return s;
  }
  s.kw = require_nonzero(ctx, Field::POOL_PoolWidth, "the pool window width");
  s.kh = require_nonzero(ctx, Field::POOL_PoolHeight, "the pool window height");
  s.stride_w = require_nonzero(ctx, Field::POOL_PoolStrideWidth, "the horizontal stride");
  s.stride_h = require_nonzero(ctx, Field::POOL_PoolStrideHeight, "the vertical stride");
  s.pad_left = m.get(Field::POOL_PadLeft);
  s.pad_right = m.get(Field::POOL_PadRight);
  s.pad_top = m.get(Field::POOL_PadTop);
  s.pad_bottom = m.get(Field::POOL_PadBottom);
  s.ceil_mode = m.get(Field::POOL_PoolCeil) != 0;
  s.oh = pool_output_size(s.ih, s.kh, s.stride_h, s.pad_top, s.pad_bottom, s.ceil_mode);
  s.ow = pool_output_size(s.iw, s.kw, s.stride_w, s.pad_left, s.pad_right, s.ceil_mode);
  if (s.oh == 0)
    ctx.fail_field(Field::POOL_PoolHeight,
                   "window height {} is larger than the padded image height {} (IH {} + PadTop "
                   "{} + PadBottom {})",
                   s.kh, s.ih + s.pad_top + s.pad_bottom, s.ih, s.pad_top, s.pad_bottom);
  if (s.ow == 0)
    ctx.fail_field(Field::POOL_PoolWidth,
                   "window width {} is larger than the padded image width {} (IW {} + PadLeft {} "
                   "+ PadRight {})",
                   s.kw, s.iw + s.pad_left + s.pad_right, s.iw, s.pad_left, s.pad_right);
  return s;
}

std::int32_t detail::pool_scaled_average(std::int64_t sum, const PoolShape& s) {
  return static_cast<std::int32_t>(
      std::clamp<std::int64_t>(round_shift(sum * s.scale, s.shift), -128, 127));
}

// Every window position of a max or average pool, with the type fixed at compile time.
template <PoolType kType>
static void pool_windows(const PoolShape& s, std::span<const std::int8_t> in,
                         std::span<std::int32_t> out) {
  const auto w = static_cast<std::int64_t>(s.iw);
  for (std::uint64_t oy = 0; oy < s.oh; ++oy) {
    const auto [y_begin, y_end] = detail::pool_window(oy, s.stride_h, s.pad_top, s.kh, s.ih);
    for (std::uint64_t ox = 0; ox < s.ow; ++ox) {
      const auto [x_begin, x_end] = detail::pool_window(ox, s.stride_w, s.pad_left, s.kw, s.iw);
      std::int32_t best = -128;
      std::int64_t sum = 0;
      for (std::int64_t y = y_begin; y < y_end; ++y)
        for (std::int64_t x = x_begin; x < x_end; ++x) {
          const std::int8_t v = in[static_cast<std::size_t>(y * w + x)];
          if constexpr (kType == PoolType::kMax)
            best = std::max<std::int32_t>(best, v);
          else
            sum += v;
        }
      if constexpr (kType == PoolType::kMax)
        out[oy * s.ow + ox] = best;
      else
        out[oy * s.ow + ox] = detail::pool_scaled_average(sum, s);
    }
  }
}

void pool_plane(const PoolShape& s, std::span<const std::int8_t> in, std::span<std::int32_t> out,
                Isa isa) {
  if (s.type != PoolType::kAverage &&
      cpu::path_allowed(cpu::resolve(isa, "pool_plane"), Isa::kAvx2))
    return detail::pool_plane_avx2(s, in, out);
  if (s.type == PoolType::kGlobalAverage) {
    std::int64_t sum = 0;
    for (std::int8_t v : in) sum += v;
    out[0] = detail::pool_scaled_average(sum, s);
  } else if (s.type == PoolType::kMax) {
    pool_windows<PoolType::kMax>(s, in, out);
  } else {
    pool_windows<PoolType::kAverage>(s, in, out);
  }
}

static bool tail_is_empty(const isa::Instruction* tail) {
  return !tail || tail->bits() == isa::Instruction(isa::Opcode::TailBlock).bits();
}

// The planar path (every pool type and layout): the channels' planes, each pooled, written
// back. Returns the bytes written.
static std::uint64_t pool_planes(LayerContext& ctx, const PoolShape& s,
                                 const ActivationLayout& in_layout, std::uint64_t in_addr,
                                 const ActivationLayout& out_layout) {
  // Buffers kept between layers and images (no allocation once they have grown).
  thread_local std::vector<std::int8_t> in;
  thread_local std::vector<std::int32_t> out;
  const std::uint64_t ic = in_layout.channels, in_pixels = in_layout.pixels;
  const std::uint64_t out_pixels = out_layout.pixels;
  read_activation(ctx, Field::POOL_ImageStartAddress, in_addr, in_layout, in);
  out.resize(ic * out_pixels);
  for (std::uint64_t c = 0; c < ic; ++c)
    pool_plane(s, std::span<const std::int8_t>(in).subspan(c * in_pixels, in_pixels),
               std::span<std::int32_t>(out).subspan(c * out_pixels, out_pixels));
  return write_activation_output(ctx, out_layout, out);
}

// Max pool on the 9,8,8 words themselves at the AVX2 level (detail::max_pool_words_avx2): the
// input words read where they lie in DRAM, each group of 8 channels pooled, the output region
// written whole, so no planes, no copy of the input and no int32 values in between. Returns false,
// with nothing done, for other pools, layouts and levels, or an output region that overlaps the
// input (the planar path reads all of it first).
static bool max_pool_words(LayerContext& ctx, const PoolShape& s, const ActivationLayout& in_layout,
                           std::uint64_t in_addr, const ActivationLayout& out_layout) {
  if (s.type != PoolType::kMax || in_layout.channel_group != 8 || in_layout.pixels_per_word != 4 ||
      !cpu::path_allowed(cpu::resolve(Isa::kAuto, "pool words"), Isa::kAvx2))
    return false;
  // OpWidth 1: run_pool has required it (require_int8_output).
  const OutputConfig out = checked_output(ctx, out_layout);
  const std::uint64_t in_bytes = in_layout.bytes(), out_bytes = out_layout.bytes();
  if (!(out.output_addr + out_bytes <= in_addr || in_addr + in_bytes <= out.output_addr))
    return false;
  thread_local std::vector<const std::uint8_t*> pieces;
  thread_local std::vector<std::uint8_t> result;
  conv_kernels::ImageWords in;
  if (!read_activation_words(ctx, Field::POOL_ImageStartAddress, in_addr, in_layout, s.iw, 0, 0,
                             pieces, in))
    return false;
  result.resize(out_bytes);
  const std::uint64_t in_group = in_layout.padded_pixels() / 4;  // words
  const std::uint64_t out_group = out_layout.padded_pixels() * 8;
  const std::uint64_t ic = in_layout.channels;
  // The workers see their own thread_local buffers by name: hand them this thread's.
  std::uint8_t* const dst = result.data();
  parallel_for(in_layout.padded_channels() / 8, [&](std::uint64_t g) {
    detail::max_pool_words_avx2(s, in, g * in_group, dst + g * out_group,
                                std::min<std::uint64_t>(8, ic - g * 8));
  });
  ctx.dram.write(out.output_addr, result, "output write");
  return true;
}

BlockTiming run_pool(LayerContext& ctx) {
  const PoolShape s = pool_shape(ctx);
  const std::uint64_t ic = require_nonzero(ctx, Field::POOL_IC, "the channel count");
  const ActivationLayout in_layout = ActivationLayout::for_arch(ctx.arch, ic, s.ih * s.iw);
  const std::uint64_t in_addr = check_input_region(ctx, Field::POOL_ImageStartAddress,
                                                   Field::POOL_ImageEndAddress, in_layout.bytes());
  require_int8_output(ctx);
  check_output_dims(ctx, s.oh, s.ow);
  const std::uint64_t in_pixels = s.ih * s.iw, out_pixels = s.oh * s.ow;
  const ActivationLayout out_layout = ActivationLayout::for_arch(ctx.arch, ic, out_pixels);
  check_output_fits(ctx, out_layout.bytes());
  if (!tail_is_empty(ctx.tail))
    ctx.diag.warn(ctx.layer_number,
                  fmt::format("{}: the POOL megablock writes its result directly; the fields of "
                              "its TailBlock (instruction {}) are ignored",
                              ctx.where(), ctx.tail_index));

  // gati.md 14.15: the v1.0.0 mega pool has neither average nor global average.
  if (s.type == PoolType::kAverage)
    ctx.diag.erratum(ctx.layer_number, Erratum::kPoolAverage,
                     fmt::format("{}: PoolType 1 (average) {}x{}; the board writes 8-bit wrapping "
                                 "window sums; lower it as a depthwise conv",
                                 ctx.where(), s.kh, s.kw));
  if (s.type == PoolType::kGlobalAverage)
    ctx.diag.erratum(ctx.layer_number, Erratum::kPoolGlobalAverage,
                     fmt::format("{}: PoolType 2 (global average) over {}x{}; the board writes "
                                 "zeros; lower it as a depthwise conv",
                                 ctx.where(), s.ih, s.iw));
  const std::uint64_t written = max_pool_words(ctx, s, in_layout, in_addr, out_layout)
                                    ? out_layout.bytes()
                                    : pool_planes(ctx, s, in_layout, in_addr, out_layout);

  // Timing: N_SA channels in parallel; the im2col feeds ROW window values per cycle, so one
  // output pixel takes ceil(KH*KW / ROW) cycles (global average: one input pixel per cycle).
  const std::uint64_t groups = ceil_div(ic, static_cast<std::uint64_t>(ctx.arch.n_sa));
  const std::uint64_t per_group =
      s.type == PoolType::kGlobalAverage
          ? in_pixels
          : out_pixels * ceil_div(s.kh * s.kw, static_cast<std::uint64_t>(ctx.arch.rows));
  return streaming_timing(groups * per_group + kPoolPipelineCycles, in_layout.bytes(), written);
}

}  // namespace npukit::device
