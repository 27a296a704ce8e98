// lib_nn's int8 kernels (BSO era, generation B; legacy generation A fc) with the XS3 vector unit's
// exact arithmetic, so a PC predicts bit-exactly what an xcore.ai computes.
//
// Accumulation (DECISIONS.md 16): accumulators start at the BSO bias and saturate to ±(2^31-1)
// after every VLMACCR, i.e. per chunk of 32 products, in the order kernel row, kernel column,
// 32-channel chunk (the C_in tail chunk last). conv2d_shallowin does one VLMACCR per kernel row;
// depthwise and pooling use VLMACC, one product per lane and instruction, so they saturate after
// every tap. Results that saturate part-way are order-dependent on hardware (notes.md Note 3); only
// results without intermediate saturation are portable.
#pragma once

#include "xs3/bso.h"

#include "common/cpu.h"

#include <cstdint>
#include <span>
#include <vector>

namespace npukit::xs3 {

struct ImageShape {
  int height = 0;
  int width = 0;
  int channels = 0;
  std::size_t elements() const;
};

// nn_window_params_t: window shape, top-left corner of output (0,0)'s window (may be negative:
// implied padding) and strides. Output (r, c) reads the window at start + (r*stride_v, c*stride_h).
struct Window {
  int height = 1;
  int width = 1;
  int start_row = 0;
  int start_col = 0;
  int stride_v = 1;
  int stride_h = 1;
};

// Which path runs (common/cpu.h): kAuto follows the project-wide level (NPUKIT_ISA, else the
// best the CPU has); conv2d_deep, fully_connected_8 (and conv2d_1x1 through it) and
// conv2d_depthwise have an AVX2 path, used at every level from avx2 up; kScalar forces the
// reference; naming a level the CPU lacks throws.
using npukit::Isa;

struct ConvParams {
  ImageShape x;  // H, W, C_in
  ImageShape y;  // H', W', C_out
  Window window;
  std::int8_t zero_point = 0;  // value of every implied-padding element
  OutputOptions output;
};

// K [C_out, K_h, K_w, C_in]; window.height/width must equal K_h/K_w.
std::vector<std::int8_t> conv2d_deep(std::span<const std::int8_t> x, std::span<const std::int8_t> k,
                                     std::span<const std::uint16_t> bso, const ConvParams& p,
                                     Isa impl = Isa::kAuto);

// K [C_out, K_h, 32/C_in, C_in] with C_in in {4, 8, 16, 32}; columns at or beyond K_w must be 0.
std::vector<std::int8_t> conv2d_shallowin(std::span<const std::int8_t> x,
                                          std::span<const std::int8_t> k,
                                          std::span<const std::uint16_t> bso, const ConvParams& p);

// 1x1 window, stride 1, start (0,0), no padding: y has x's height and width. K [C_out, C_in].
// Runs fully_connected_8 per pixel, so it has the AVX2 path too.
std::vector<std::int8_t> conv2d_1x1(std::span<const std::int8_t> x, ImageShape x_shape,
                                    std::span<const std::int8_t> k, int c_out,
                                    std::span<const std::uint16_t> bso, OutputOptions output = {},
                                    Isa impl = Isa::kAuto);

// K [K_h, K_w, C]; y.channels must equal x.channels.
std::vector<std::int8_t> conv2d_depthwise(std::span<const std::int8_t> x,
                                          std::span<const std::int8_t> k,
                                          std::span<const std::uint16_t> bso, const ConvParams& p,
                                          Isa impl = Isa::kAuto);

// W [C_out, C_in], x [C_in]; computes all C_out outputs.
std::vector<std::int8_t> fully_connected_8(std::span<const std::int8_t> x,
                                           std::span<const std::int8_t> w, int c_out,
                                           std::span<const std::uint16_t> bso,
                                           OutputOptions output = {}, Isa impl = Isa::kAuto);
std::vector<std::int16_t> fully_connected_16(std::span<const std::int8_t> x,
                                             std::span<const std::int8_t> w, int c_out,
                                             std::span<const std::uint16_t> bso);

struct PoolParams {
  ImageShape x;          // H, W, C
  ImageShape y;          // H', W', C (same C)
  Window window;         // must lie inside the image for every output: pooling has no padding
  OutputOptions output;  // avgpool2d only
};

// Per-channel max over the window, starting from -128.
std::vector<std::int8_t> maxpool2d(std::span<const std::int8_t> x, const PoolParams& p);

// lib_nn's avgpool2d scale/shift for a window of n pixels: n = 2^c gives (1, c); otherwise
// scale = round((2^31 div n) / 2^(31-c-6)) in (64, 128) and shift = c + 6, c = ceil(log2 n).
struct AvgPoolScale {
  int scale = 1;
  int shift = 0;
};
AvgPoolScale avgpool2d_scale_shift(int window_pixels);

// y = clamp(rshr_round(sum(x*scale), shift), lower_bound, 127), scale/shift from above.
std::vector<std::int8_t> avgpool2d(std::span<const std::int8_t> x, const PoolParams& p);

// y[c] = clamp(rshr_round(bias + sum over pixels of x*scale, shift), lower_bound, 127);
// scale is int8, shift in [0, 31].
std::vector<std::int8_t> avgpool2d_global(std::span<const std::int8_t> x, ImageShape x_shape,
                                          std::int32_t bias, int scale, int shift,
                                          OutputOptions output = {});

// y = clamp(round_half_up(x / 256), lower_bound, 127).
std::vector<std::int8_t> requantize_16_to_8(std::span<const std::int16_t> x,
                                            OutputOptions output = {});

// Legacy generation A (Jan-Mar 2020) fully connected, C_out <= 16, C_in % 32 == 0:
//   acc = bias + W.x (sat32 per 32 products); y16 = sat16(rshr_round(acc, shift));
//   y16 = VLMUL16(y16, scale)  (Q1.14: round(y16*scale / 2^14), sat16);
//   _8 additionally applies VDEPTH8: sat8(round_half_up(y16 / 2^8)), bounds ±127.
struct LegacyFcParams {
  std::vector<std::int32_t> bias;
  std::vector<int> shifts;
  std::vector<std::int16_t> scales;  // Q1.14
};
std::vector<std::int16_t> fc_deepin_shallowout_16(std::span<const std::int8_t> x,
                                                  std::span<const std::int8_t> w, int c_out,
                                                  const LegacyFcParams& p);
std::vector<std::int8_t> fc_deepin_shallowout_8(std::span<const std::int8_t> x,
                                                std::span<const std::int8_t> w, int c_out,
                                                const LegacyFcParams& p);

// Internals shared by the scalar and AVX2 implementations (validated inputs only).
namespace detail {
// sat32(acc + dot(a, b)) chunk by chunk: one saturation per 32 products.
std::int32_t accumulate_chunked(std::int32_t acc, const std::int8_t* a, const std::int8_t* b,
                                int n);
void conv2d_deep_scalar(std::int8_t* y, const std::int8_t* x, const std::int8_t* k,
                        std::span<const BsoChannel> bso, const ConvParams& p);
void conv2d_deep_avx2(std::int8_t* y, const std::int8_t* x, const std::int8_t* k,
                      std::span<const BsoChannel> bso, const ConvParams& p);
void fully_connected_8_scalar(std::int8_t* y, const std::int8_t* x, const std::int8_t* w, int c_in,
                              std::span<const BsoChannel> bso, OutputOptions output);
void fully_connected_8_avx2(std::int8_t* y, const std::int8_t* x, const std::int8_t* w, int c_in,
                            std::span<const BsoChannel> bso, OutputOptions output);
void conv2d_depthwise_scalar(std::int8_t* y, const std::int8_t* x, const std::int8_t* k,
                             std::span<const BsoChannel> bso, const ConvParams& p);
void conv2d_depthwise_avx2(std::int8_t* y, const std::int8_t* x, const std::int8_t* k,
                           std::span<const BsoChannel> bso, const ConvParams& p);
}  // namespace detail

}  // namespace npukit::xs3
