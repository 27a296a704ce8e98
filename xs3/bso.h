// Bias-Scale-Offset tensors (lib_nn generation B, xs3-arithmetic.md §1.8) and the output pipeline
// they drive (§1.7 B, DECISIONS.md 15).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace npukit::xs3 {

// Row indices inside one 7x16 BSO block.
enum BsoRow : int {
  kBsoBiasHi = 0,
  kBsoBiasLo = 1,
  kBsoShift1 = 2,
  kBsoScale = 3,
  kBsoOffsetScale = 4,
  kBsoOffset = 5,
  kBsoShift2 = 6,
  kBsoRows = 7,
};
inline constexpr int kChannelsPerGroup = 16;
inline constexpr int kBsoBlockElements = kBsoRows * kChannelsPerGroup;

// Largest shift1/shift2 accepted: lib_nn's C computes acc + (1 << (s-1)) in int32, undefined from
// 32 on, and lib_xcore_math sign-fills there, so the sources disagree beyond 31.
inline constexpr int kMaxBsoShift = 31;

// One output channel's parameters.
struct BsoChannel {
  std::int32_t bias = 0;
  int shift1 = 0;
  std::int16_t scale = 0;
  std::int16_t offset_scale = 0;
  std::int16_t offset = 0;
  int shift2 = 0;
  bool operator==(const BsoChannel&) const = default;
};

// Number of uint16 elements of a BSO tensor for c_out channels: ceil(c_out/16) * 7 * 16.
std::size_t bso_size(int c_out);

// Packs channels into the flat (ceil(C_out/16), 7, 16) tensor: element [g][row][lane] at
// (g*7 + row)*16 + lane. Tail lanes are padded with zero bias, shifts, scales and offsets
// (lib_nn computes but never stores them). Throws for shifts outside [0, kMaxBsoShift].
std::vector<std::uint16_t> pack_bso(std::span<const BsoChannel> channels);

// Reads the first c_out channels back. Throws if the tensor size is not bso_size(c_out) or a
// channel's shift (read as int16) is negative or above kMaxBsoShift, naming the channel.
std::vector<BsoChannel> unpack_bso(std::span<const std::uint16_t> bso, int c_out);

// Output lower bound of the int8 kernels: -128 (lib_nn default) or -127 (the
// CONFIG_SYMMETRIC_SATURATION_<op> option).
struct OutputOptions {
  bool symmetric = false;
  int lower_bound() const { return symmetric ? -127 : -128; }
};

// Generation B pipeline after accumulation, split so each stage can be tested:
//   y16 = sat16(rshr_round(acc, shift1))                   VLSAT, 16-bit mode
//   t   = sat32(y16*scale + offset_scale*offset)           two VLMACCs, no >> 14
std::int16_t bso_stage1(std::int32_t accumulator, const BsoChannel& channel);
std::int32_t bso_stage2(std::int16_t y16, const BsoChannel& channel);
// int8 result: clamp(rshr_round(t, shift2), lower_bound, 127); no extra >> 8.
std::int8_t bso_output8(std::int32_t accumulator, const BsoChannel& channel,
                        OutputOptions options = {});
// int16 result (fully_connected_16): sat16(rshr_round(t, shift2)).
std::int16_t bso_output16(std::int32_t accumulator, const BsoChannel& channel);

}  // namespace npukit::xs3
