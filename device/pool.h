// POOL megablock (opcode 0x8; gati.md 3.2 [RTL-confirmed max pool], 8; DECISIONS.md 8): max,
// average and global-average pooling of an int8 activation tensor, with padding and ceil mode.
//   * max starts from -128 and takes only window positions inside the image (padding never wins);
//   * average sums the window positions inside the image (padding adds nothing) and scales the
//     sum: (sum * PoolScale + 2^(PoolShift-1)) >> PoolShift, clamped to int8;
//   * global average does the same over the whole H x W plane (output 1x1).
// The result goes straight to the OutputBlock (int8, activation layout); no tail pipeline.
#pragma once

#include "device/block.h"
#include "device/conv_kernels.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>

// Registers run_pool with the block registry (block.h).
#define NPUKIT_DEVICE_RUN_POOL 1

namespace npukit::device {

// Output length of one pooled axis: floor((in + pads - kernel) / stride) + 1, or with ceil mode
// the ceiling, dropping a last window that would start inside the end padding (as ONNX/PyTorch).
// 0 when the window is larger than the padded input.
std::uint64_t pool_output_size(std::uint64_t in, std::uint64_t kernel, std::uint64_t stride,
                               std::uint64_t pad_begin, std::uint64_t pad_end, bool ceil_mode);

struct PoolShape {
  isa::PoolType type = isa::PoolType::kMax;
  std::uint64_t ih = 0, iw = 0;
  std::uint64_t kh = 1, kw = 1, stride_h = 1, stride_w = 1;
  std::uint64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  bool ceil_mode = false;
  std::uint64_t oh = 0, ow = 0;  // filled by the decoder
  std::int64_t scale = 0;        // PoolScale, unsigned 16-bit
  int shift = 0;                 // PoolShift
};

// Decodes and checks the POOL fields of ctx.mega (type, sizes, window vs padded image).
PoolShape pool_shape(const LayerContext& ctx);

// One channel plane: in has ih*iw values, out gets oh*ow values. Paths (common/cpu.h): scalar
// (every window position, the definition), and AVX2 for max pool (per output row the column
// maxima of its window rows, 32 columns at a time, then the window's columns) and global average
// (the plane's sum 32 values at a time); average pool runs the scalar path everywhere.
void pool_plane(const PoolShape& s, std::span<const std::int8_t> in, std::span<std::int32_t> out,
                Isa isa = Isa::kAuto);
namespace detail {
void pool_plane_avx2(const PoolShape& s, std::span<const std::int8_t> in,
                     std::span<std::int32_t> out);
// Output position o's window along one axis, clipped to the image: input positions [first,
// second) (padded positions take no part; empty when the window lies in the padding).
inline std::pair<std::int64_t, std::int64_t> pool_window(std::uint64_t o, std::uint64_t stride,
                                                         std::uint64_t pad, std::uint64_t kernel,
                                                         std::uint64_t size) {
  const std::int64_t start = static_cast<std::int64_t>(o * stride) - static_cast<std::int64_t>(pad);
  return {std::max<std::int64_t>(start, 0),
          std::min<std::int64_t>(start + static_cast<std::int64_t>(kernel),
                                 static_cast<std::int64_t>(size))};
}
// The scaled, clamped average of a window sum: clamp((sum * PoolScale) rounding-shifted by
// PoolShift, -128, 127).
std::int32_t pool_scaled_average(std::int64_t sum, const PoolShape& s);
// Max pool of 8 channels straight between 9,8,8 DRAM words (32 bytes: 8 channels x 4 pixels,
// byte c * 4 + p % 4; gati.md 6.1), with no planes: the input is the ceil(ih * iw / 4) words
// from word `first` of `in` (read where they lie in DRAM), `out` gets ceil(oh * ow / 4), its
// padding bytes (the last word's pixels past oh * ow, and channels `channels` .. 7) 0. The same
// maxima as pool_plane: per pixel the 8 channels' bytes side by side, per output row the maxima
// of its window rows, then of its window columns (clipped to the image; a window wholly in the
// padding gives -128).
void max_pool_words_avx2(const PoolShape& s, const conv_kernels::ImageWords& in,
                         std::uint64_t first, std::uint8_t* out, std::uint64_t channels);
}  // namespace detail

BlockTiming run_pool(LayerContext& ctx);

}  // namespace npukit::device
