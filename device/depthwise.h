// Depthwise layers whole (issue 13): output channel k reads input plane k alone through its own
// kh*kw taps (kh * kw <= 16, a PE column's rows), summed exactly in int32 (|sum| <= 16 * 2^14).
//
// Two forms, chosen per shape by `depthwise` (both give the same integers; only speed differs):
// - planar (AVX2, strides 1 and 2): one channel at a time, 8 output pixels of a row in the 8
//   int32 lanes, output rows written straight into the channel's acc plane (no transposes). Taps
//   go in horizontally adjacent pairs (j, j + 1) so one _mm256_madd_epi16 does 2 taps for 8
//   pixels (a 3x3 kernel is 3 rows x 2 pairs, the odd tap paired with weight 0). The int16 pair
//   words are built per channel, into a per-thread buffer that stays in L1/L2, straight from the
//   int8 plane with _mm256_cvtepi8_epi16: at stride 1 a "pair plane" (word f = (x[f], x[f + 1]),
//   one unpack and one widening per 8 words), at stride 2 the plane widened to int16 is already
//   the pair plane of the outputs (word m = (x[2m], x[2m + 1])), so output x's pair (j, j + 1)
//   is word x + j/2: there the int8 plane is read directly, each load of 16 bytes widened to the
//   8 words (a buffer only for the layer's last plane, whose loads could run past its end).
// - lanes (conv_kernels::depthwise_lanes): 8 channels in the lanes; strides 3 and 4.
// - windows (AVX2, any stride): per output pixel, each kernel row's taps in one int16 multiply.
//   kAuto takes it for at most kFewOutputs outputs per channel (a global pool's 7x1 pieces have
//   one), where the other forms' per-channel setup outweighs the few multiplies.
// The scalar level is depthwise_lanes' plain loop for every form.
#pragma once

#include "device/conv_kernels.h"

namespace npukit::device::conv_kernels {

enum class DepthwiseForm { kAuto, kPlanar, kLanes, kWindows };
inline constexpr std::uint64_t kFewOutputs = 4;

// Whether the planar form takes this shape (strides 1 and 2, kh * kw <= 16).
bool depthwise_planar_fits(const DepthwiseLanes& conv);

// acc[k * oh*ow + p] = the sum over taps of taps[k][t] * input (overwritten; exact in int32).
// form kPlanar on a shape it does not fit throws; kAuto picks windows for at most kFewOutputs
// outputs, else planar where it fits, else lanes (at AVX2 and above; the scalar level is the
// same plain loop for every form).
void depthwise(const DepthwiseLanes& conv, std::int32_t* acc, Isa isa = Isa::kAuto,
               DepthwiseForm form = DepthwiseForm::kAuto);

namespace detail {
// The windows form for the channels [k_begin, k_end).
void depthwise_windows_avx2(const DepthwiseLanes& conv, std::uint64_t k_begin, std::uint64_t k_end,
                            std::int32_t* acc);
// The planar form for the channels [k_begin, k_end).
void depthwise_planar_avx2(const DepthwiseLanes& conv, std::uint64_t k_begin, std::uint64_t k_end,
                           std::int32_t* acc);
}  // namespace detail

}  // namespace npukit::device::conv_kernels
