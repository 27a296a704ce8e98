// Exact integer Winograd F(2x2, 3x3) for the 3x3 stride-1 dense convolutions of
// device/conv_kernels.h (dense_conv does not dispatch to it: see the note there).
//
// Every 2x2 block of outputs ("tile") reads a 4x4 block of the padded input (tiles step 2). With
// integer matrices (no fractions):
//   G' = 2G = [[2,0,0],[1,1,1],[1,-1,1],[0,0,2]]     U = G' g G'^T    per (output k, input c)
//   B^T = [[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]]  V = B^T d B  per (input c, tile)
//   A^T = [[1,1,1,0],[0,1,-1,-1]]                     Y' = A^T (sum_c U . V) A = 4 Y
// where . is the element-wise product of the 4x4 matrices and Y the 2x2 block of the direct
// convolution. |U| <= 9 * 128 = 1152 and |V| <= 4 * 128 = 512 fit int16, so the 16 products per
// (k, c, tile) are 16 GEMMs on int16 channel pairs (_mm256_madd_epi16: |pair sum| < 2^21) instead
// of 36 multiplies. Exactness: every step after the transforms is a ring operation, so int32
// arithmetic that wraps (mod 2^32) still gives Y' mod 2^32; Y' = 4 Y with |4 Y| <= channels * 9 *
// 128 * 128 * 4, below 2^31 for channels <= kWinogradMaxChannels, so Y' is the true value and
// Y = Y' >> 2 exactly (arithmetic shift). The wrapping adds are done in unsigned or in intrinsics
// (signed overflow in C++ would be undefined).
#pragma once

#include "device/conv_kernels.h"

#include <cstdint>

namespace npukit::device::conv_kernels {

// Whether `conv` may take the Winograd path: a 3x3 kernel, stride 1, and at most
// kWinogradMaxChannels listed channels (the bound above; more fall back to the direct form).
bool winograd_applies(const DenseConv& conv);
// Whether it can be faster than the direct form: planes of at least kWinogradMinTiles tiles.
// Measured (BM_DenseConv, one thread): 512 channels on 7x7 (16 tiles, 49 of their 64 outputs
// used, 8 MB of transformed weights against 2.4 MB) ran at 43 G direct-MAC/s against 71 for the
// direct u8 form; 256 on 14x14 (49 tiles) at 104 against 79. Inside `npukit eval` even the
// larger planes do not pay on both resnets (docs/device.md), so dense_conv does not dispatch it.
bool winograd_pays(const DenseConv& conv);

namespace detail {

// 3640 * 9 * 128 * 128 * 4 = 2146959360 < 2^31 <= 3641 * 9 * 128 * 128 * 4.
constexpr std::uint64_t kWinogradMaxChannels = 3640;
constexpr std::uint64_t kWinogradMinTiles = 25;
// Tiles per work unit: whole rows of tiles, as many as fit in this many tiles (at least one row).
constexpr std::uint64_t kWinogradBandTiles = 32;
// Words of slack the buffers keep past the data (the AVX2 transforms run 8 tiles past a row).
constexpr std::uint64_t kWinogradSlack = 32;

// One channel pair's padded planes (lo, hi; null = a zero channel) of ph x pw as int16 pairs in
// one word per position, zero-extended to xh x xw (xh >= ph, xw >= pw), then kWinogradSlack zero
// words.
using WinogradPackFn = void(const std::int8_t* lo, const std::int8_t* hi, std::uint64_t ph,
                            std::uint64_t pw, std::uint64_t xh, std::uint64_t xw, std::uint32_t* x);
// V = B^T d B for every tile (ty < tiles_h, tx < tiles_w) of one pair's words x (rows of xw =
// 2 * tiles_w + 2 words, 2 * tiles_h + 2 rows): v[xi * xi_stride + ty * tiles_w + tx], xi = 4 *
// row + column of V, each word the pair's two int16 values. Writes up to 8 words past a row of
// tiles (xi_stride >= tiles_h * tiles_w + 8; rows are written in order, so a row overwrites what
// the previous one spilt).
using WinogradInputFn = void(const std::uint32_t* x, std::uint64_t xw, std::uint64_t tiles_h,
                             std::uint64_t tiles_w, std::uint32_t* v, std::uint64_t xi_stride);
// The 16 GEMMs' arithmetic for one position xi of one band: for tiles t < n and output channel
// blocks b < blocks (8 channels each), y[t * kGemmK + 8 b + j] (+)= the sum over pairs g in
// [g_begin, g_end) of the int16 pair products of v[g * tile_stride + t] (V of pair g and tile t)
// and u[(b * pairs + g) * 8 + j] (U of output channel 8 b + j); wrapping int32 (see above).
// accumulate = false starts at 0.
using WinogradGemmFn = void(const std::uint32_t* v, std::uint64_t tile_stride, std::uint64_t n,
                            const std::uint32_t* u, std::uint64_t pairs, std::uint64_t blocks,
                            std::uint64_t g_begin, std::uint64_t g_end, bool accumulate,
                            std::int32_t* y);
// Y = (A^T M A) >> 2 for a band of `rows` rows of tiles_w tiles, straight into output planes:
// M[xi] for tile i and lane k at y[xi * xi_stride + i * kGemmK + k]; for the lanes k in
// [k_first, k_first + k_count) and the output rows r < out_rows and columns x < ow of the band,
// out[(k - k_first) * out_stride + r * ow + x]. Reads lanes of up to 3 tiles past the band's
// last one (y needs 3 * kGemmK words of slack).
using WinogradOutputFn = void(const std::int32_t* y, std::uint64_t xi_stride, std::uint64_t rows,
                              std::uint64_t tiles_w, std::uint64_t out_rows, std::uint64_t ow,
                              std::uint64_t k_first, std::uint64_t k_count, std::int32_t* out,
                              std::uint64_t out_stride);

WinogradPackFn winograd_pack_scalar, winograd_pack_avx2;
WinogradInputFn winograd_input_scalar, winograd_input_avx2;
WinogradGemmFn winograd_gemm_scalar, winograd_gemm_avx2;
WinogradOutputFn winograd_output_scalar, winograd_output_avx2;

struct WinogradKernels {
  WinogradPackFn* pack;
  WinogradInputFn* input;
  WinogradGemmFn* tiles;
  WinogradOutputFn* output;
};
// Plain C++ throughout (tests the scheme on any CPU), and AVX2.
WinogradKernels winograd_kernels_scalar();
WinogradKernels winograd_kernels_avx2();

// U = G' g G'^T of every (output channel, listed channel) as the GEMM form's weight words:
// [xi][kn_padded / 8][pairs][8], each word the int16 values of a channel pair.
void winograd_weights(const DenseConv& conv, std::vector<std::uint32_t>& u);

// dense_conv by the Winograd path (winograd_applies must hold; an Error otherwise), with the
// given pieces. Same results as dense_conv, acc and snapshot alike.
void dense_conv_winograd(const DenseConv& conv, std::int32_t* acc, std::int32_t* snapshot,
                         const WinogradKernels& kernels);

}  // namespace detail
}  // namespace npukit::device::conv_kernels
