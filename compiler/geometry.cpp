#include "compiler/geometry.h"

#include "common/bytes.h"
#include "common/error.h"
#include "compiler/context.h"

#include <algorithm>

namespace npukit::compiler {

Chw chw_of(const ir::Tensor& t) {
  if (t.shape.size() == 4) return {t.shape[1], t.shape[2], t.shape[3]};
  if (t.shape.size() == 2) return {t.shape[1], 1, 1};
  fail("tensor '{}' has rank {}; device tensors are [N, C, H, W] or [N, K]", t.name,
       t.shape.size());
}

std::uint64_t aligned_pixels(std::int64_t pixels, const isa::SaArch& arch) {
  return ceil_mod(static_cast<std::uint64_t>(pixels),
                  static_cast<std::uint64_t>(arch.pixels_per_word()));
}

std::uint64_t acc_pixels(std::int64_t pixels, const isa::SaArch& arch) {
  const std::uint64_t m = std::max(1, arch.pixels_per_word() / 4);
  return ceil_mod(static_cast<std::uint64_t>(pixels), m);
}

ConvGeometry conv_geometry(const ir::Graph& g, const ir::Node& conv, const isa::SaArch& arch) {
  ConvGeometry c;
  const ir::Tensor& x = g.tensor(conv.inputs.at(0));
  const ir::Tensor& w = g.tensor(conv.inputs.at(1));
  if (x.shape.size() != 4 || w.shape.size() != 4)
    fail("layer '{}': conv input and weights must be 4-D", conv.name);
  c.ic = x.shape[1];
  c.ih = x.shape[2];
  c.iw = x.shape[3];
  c.kn_weights = w.shape[0];
  c.kn = std::max(c.kn_weights, conv.get_int("kernel_count_padded", 0));
  c.kh = w.shape[2];
  c.kw = w.shape[3];
  const auto strides = conv.get_ints("strides", {1, 1});
  const auto pads = conv.get_ints("pads", {0, 0, 0, 0});
  if (strides.size() != 2 || pads.size() != 4)
    fail("layer '{}': strides must have 2 and pads 4 entries", conv.name);
  c.stride_h = strides[0];
  c.stride_w = strides[1];
  c.pad_top = pads[0];
  c.pad_left = pads[1];
  c.pad_bottom = pads[2];
  c.pad_right = pads[3];
  // A kernel-split piece (split_kernels): the hardware runs only rows [r0, r1) of the kernel.
  if (conv.has("kernel_rows")) {
    const auto rows = conv.get_ints("kernel_rows", {});
    if (rows.size() != 2 || rows[0] < 0 || rows[1] <= rows[0] || rows[1] > c.kh)
      fail("layer '{}': kernel_rows must be [r0, r1] within the kernel's {} rows", conv.name, c.kh);
    c.pad_top -= rows[0];
    c.pad_bottom -= c.kh - rows[1];
    c.kh = rows[1] - rows[0];
    c.row_offset = rows[0];
  }
  c.oh = conv_out(c.ih, c.pad_top, c.pad_bottom, c.kh, c.stride_h);
  c.ow = conv_out(c.iw, c.pad_left, c.pad_right, c.kw, c.stride_w);
  const std::int64_t group = conv.get_int("group", 1);
  c.depthwise = group != 1 && group == c.ic && w.shape[1] == 1;
  // A padded depthwise conv (pad_kernel_iterations) also reads as many input channels as it has
  // kernels (the RTL's depthwise needs KN = IC): the extra ones meet all-zero weights.
  if (c.depthwise) c.ic = std::max(c.ic, c.kn);
  c.kc = c.depthwise ? 1 : w.shape[1];
  const auto cols = static_cast<std::int64_t>(arch.cols),
             nsa = static_cast<std::int64_t>(arch.n_sa),
             rows = static_cast<std::int64_t>(arch.rows);
  if (c.depthwise) {
    // gati.md 14.1: the diagonal layout; one channel group per kernel iteration.
    c.type = isa::ConvType::kDepthwise;
    c.kitr = static_cast<std::int64_t>(ceil_div(c.kn, nsa));
    c.citr = 1;
    c.acc_en = false;
  } else if (arch.regular_optimal()) {
    // 9,4,4 and 9,8,8: every non-depthwise conv, 1x1 included, is REGULAR (gati.md 14.8).
    c.type = isa::ConvType::kRegular;
    c.kitr = static_cast<std::int64_t>(ceil_div(c.kn, cols));
    c.citr = static_cast<std::int64_t>(ceil_div(c.kc, nsa));
    c.acc_en = c.ic > nsa;
  } else if (c.kh == 1 && c.kw == 1) {
    // 16,1,16 pointwise (gati.md 3.2; untested on the RTL).
    c.type = isa::ConvType::kPointwise;
    c.kitr = static_cast<std::int64_t>(ceil_div(c.kn, nsa));
    c.citr = static_cast<std::int64_t>(ceil_div(c.kc, rows));
    c.acc_en = c.ic > nsa;
  } else {
    // 16,1,16 regular: ChannelDuplicate, one input channel per channel iteration.
    c.type = isa::ConvType::kRegular;
    c.channel_duplicate = true;
    c.kitr = static_cast<std::int64_t>(ceil_div(c.kn, nsa));
    c.citr = c.kc;
    c.acc_en = true;
  }
  if (c.type == isa::ConvType::kRegular && !c.channel_duplicate) {
    c.kern_dim = cols;
    c.chan_dim = nsa;
  } else if (c.depthwise && arch.regular_optimal()) {
    c.kern_dim = cols;
    c.chan_dim = nsa;
  } else {
    c.kern_dim = nsa;
    c.chan_dim = cols;
  }
  return c;
}

ConvGeometry transposed(ConvGeometry c) {
  std::swap(c.ih, c.iw);
  std::swap(c.kh, c.kw);
  std::swap(c.oh, c.ow);
  std::swap(c.stride_h, c.stride_w);
  std::swap(c.pad_top, c.pad_left);
  std::swap(c.pad_bottom, c.pad_right);
  return c;
}

std::string tall_image_erratum(const ConvGeometry& c) {
  if (!c.depthwise && c.kh == 3 && c.kw == 3 && c.stride_h == 1 && 2 * c.ih >= 3 * c.iw)
    return fmt::format(
        "a regular 3x3 stride-1 conv on a {}-high, {}-wide input (height >= 1.5 x width) never "
        "finishes",
        c.ih, c.iw);
  // Seen with a 3x3 conv; which other convs it affects is unknown, so every conv avoids it.
  if (c.ih == 48 && c.iw == 40) return "a 48-high by 40-wide conv input hangs";
  return {};
}

PoolGeometry pool_geometry(const ir::Graph& g, const ir::Node& pool) {
  PoolGeometry p;
  const ir::Tensor& x = g.tensor(pool.inputs.at(0));
  if (x.shape.size() != 4) fail("layer '{}': pool input must be 4-D", pool.name);
  p.ic = x.shape[1];
  p.ih = x.shape[2];
  p.iw = x.shape[3];
  const std::string mode = pool.get_string("mode", "max");
  if (mode == "global_average") {
    p.type = isa::PoolType::kGlobalAverage;
    p.kh = p.ih;
    p.kw = p.iw;
    p.stride_h = p.stride_w = 1;
    p.oh = p.ow = 1;
    return p;
  }
  p.type = mode == "max" ? isa::PoolType::kMax : isa::PoolType::kAverage;
  const auto k = pool.get_ints("kernel_shape", {});
  if (k.size() != 2) fail("layer '{}': kernel_shape must have 2 entries", pool.name);
  const auto s = pool.get_ints("strides", {1, 1});
  const auto pads = pool.get_ints("pads", {0, 0, 0, 0});
  if (s.size() != 2 || pads.size() != 4)
    fail("layer '{}': strides must have 2 and pads 4 entries (has {} and {})", pool.name, s.size(),
         pads.size());
  if (k[0] < 1 || k[1] < 1 || s[0] < 1 || s[1] < 1)
    fail("layer '{}': kernel_shape and strides must be >= 1", pool.name);
  p.kh = k[0];
  p.kw = k[1];
  p.stride_h = s.at(0);
  p.stride_w = s.at(1);
  p.pad_top = pads.at(0);
  p.pad_left = pads.at(1);
  p.pad_bottom = pads.at(2);
  p.pad_right = pads.at(3);
  p.ceil_mode = pool.get_int("ceil_mode", 0) != 0;
  auto axis = [&](std::int64_t in, std::int64_t b, std::int64_t e, std::int64_t kk,
                  std::int64_t st) {
    const std::int64_t span = in + b + e - kk;
    if (span < 0) return std::int64_t{0};
    std::int64_t o = (p.ceil_mode ? (span + st - 1) / st : span / st) + 1;
    if (p.ceil_mode && (o - 1) * st >= in + b) --o;  // last window entirely in the end padding
    return o;
  };
  p.oh = axis(p.ih, p.pad_top, p.pad_bottom, p.kh, p.stride_h);
  p.ow = axis(p.iw, p.pad_left, p.pad_right, p.kw, p.stride_w);
  return p;
}

double conv_cycles_estimate(std::int64_t c, std::int64_t kn, std::int64_t pixels, std::int64_t area,
                            const ConvGeometry& geo, const isa::SaArch& arch) {
  constexpr double kEfficiency = 0.77, kLayer = 90.6, kPass = 78.3, kWritePass = 48.1;
  auto up = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
  const std::int64_t kitr = up(kn, std::max<std::int64_t>(geo.kern_dim, 1));
  const std::int64_t citr = up(c, std::max<std::int64_t>(geo.chan_dim, 1));
  const double macs = static_cast<double>(pixels * kn * c * area);
  return kLayer + static_cast<double>(kitr * citr) * kPass +
         static_cast<double>(kitr) * kWritePass +
         macs / (kEfficiency * static_cast<double>(arch.rows * arch.cols * arch.n_sa));
}

double fc_cycles_estimate(std::int64_t k, std::int64_t n) {
  constexpr double kLayer = 90.6, kFcStream = 1.4728, kOutputBeat = 0.7469;
  const std::int64_t blocks = (n + isa::kFcEngineCols - 1) / isa::kFcEngineCols;
  const std::int64_t rows = (k + 31) / 32 * 32;
  return kLayer + static_cast<double>(blocks * rows) * kFcStream +
         static_cast<double>(blocks) * kOutputBeat;
}

}  // namespace npukit::compiler
