// The facts about one lowered layer that several passes need (limits, layouts, allocation,
// instruction generation): sizes, conv type and iteration counts per array configuration
// (gati.md 3.2 RTL-confirmed notes, 14.1, 14.8). One source of truth for each of them.
#pragma once

#include "ir/graph.h"
#include "isa/arch.h"
#include "isa/isa.h"

#include <cstdint>

namespace npukit::compiler {

// Output pixels the on-chip accumulator holds (accbuf_size 4096 / 4, gati.md 3.2): a conv with
// at most this many has OnChipAcc = 1; one with more and several channel iterations sums them
// through the DRAM accumulant region.
constexpr std::int64_t kOnChipAccPixels = 1024;

struct ConvGeometry {
  // Input (real sizes; a depthwise conv padded with all-zero kernels reads ic = kn channels, the
  // extra ones beyond its input tensor's real channel groups).
  std::int64_t ic = 0, ih = 0, iw = 0;
  std::int64_t kn = 0, kc = 0, kh = 0, kw = 0;  // kh: rows this (maybe split) piece runs
  // Kernels in the model's weight tensor; kn (what the array computes) is larger when
  // pad_kernel_iterations pads the layer with all-zero kernels (attribute kernel_count_padded).
  std::int64_t kn_weights = 0;
  std::int64_t row_offset = 0;  // first kernel row of a split piece
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;  // may be < 0 (row skip)
  std::int64_t oh = 0, ow = 0;
  bool depthwise = false;
  isa::ConvType type = isa::ConvType::kRegular;
  bool channel_duplicate = false;
  std::int64_t kitr = 0, citr = 0;
  bool acc_en = false;
  // The weight nest's (kernel, channel) block dims (gati.md 6.2): (COLS, N_SA) on regular-optimal
  // arrays, (N_SA, COLS) otherwise.
  std::int64_t kern_dim = 0, chan_dim = 0;
};

ConvGeometry conv_geometry(const ir::Graph& g, const ir::Node& conv, const isa::SaArch& arch);

// Estimated cycles of a conv with c input channels, kn kernels, `pixels` output pixels and a
// kernel of `area` taps on `geo`'s array: the fitted per-layer, per-pass and per-writing-pass
// constants of gati.md 14.14 plus the MACs at 77 % of the array (split_grouped_convs,
// fold_channel_copies and split_channel_scales choose forms by it).
double conv_cycles_estimate(std::int64_t c, std::int64_t kn, std::int64_t pixels, std::int64_t area,
                            const ConvGeometry& geo, const isa::SaArch& arch);

// Estimated cycles of an FC layer with k inputs and n outputs: the fitted per-layer constant, the
// FC engine's stream (every input row once per block of 32 outputs, gati.md 3.2) and the output
// beats (device/timing_table.inc's layer, fc_stream and output_beat; split_channel_scales).
double fc_cycles_estimate(std::int64_t k, std::int64_t n);

// The same conv on the transposed image with the transposed kernel (height and width swapped).
ConvGeometry transposed(ConvGeometry c);

// gati.md 14.6: a regular 3x3 stride-1 conv whose input is at least 1.5x taller than wide, or
// exactly 48 high and 40 wide, never finishes on v1.0.0. Empty when `c` is fine, else what hangs.
std::string tall_image_erratum(const ConvGeometry& c);

struct PoolGeometry {
  std::int64_t ic = 0, ih = 0, iw = 0, kh = 0, kw = 0, stride_h = 0, stride_w = 0;
  std::int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0, oh = 0, ow = 0;
  bool ceil_mode = false;
  isa::PoolType type = isa::PoolType::kMax;
};

PoolGeometry pool_geometry(const ir::Graph& g, const ir::Node& pool);

// P' for H*W pixels (OutputBlock.ImageDimOutput).
std::uint64_t aligned_pixels(std::int64_t pixels, const isa::SaArch& arch);
// OutputBlock.ImageDimAcc = ceil_mod(OH*OW, max(1, (32/N_SA)/4)).
std::uint64_t acc_pixels(std::int64_t pixels, const isa::SaArch& arch);

// C, H, W of a device tensor: [N, C, H, W] -> (C, H, W); [N, K] -> (K, 1, 1).
struct Chw {
  std::int64_t c = 0, h = 1, w = 1;
};
Chw chw_of(const ir::Tensor& t);

}  // namespace npukit::compiler
