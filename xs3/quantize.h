// Maps a TFLite/ONNX per-channel int8 requantization onto BSO values (the 2020 ai_tools scheme,
// xs3-arithmetic.md §3) and measures how far the XS3 pipeline lands from the ideal result.
//
// Ideal (TFLite) result for channel c and true accumulator a = bias[c] + sum (x - in_zp)*w:
//   y = clamp(round(a * M_c) + out_zp, lower_bound, 127),  M_c = s_in * s_w[c] / s_out.
// On the device the accumulator is bias' + sum x*w with bias' = bias - in_zp * sum w (the input
// zero point folded into the bias; padding reads in_zp so borders stay exact), and the output
// zero point is added as offset_scale * offset = out_zp * 2^shift2 before shift2.
#pragma once

#include "xs3/bso.h"

#include <cstdint>
#include <span>
#include <vector>

namespace npukit::xs3 {

struct Requantization {
  double input_scale = 1.0;
  int input_zero_point = 0;           // int8
  std::vector<double> weight_scales;  // one per output channel, or one shared by all
  double output_scale = 1.0;
  int output_zero_point = 0;       // int8
  std::vector<std::int32_t> bias;  // int32 in units of s_in*s_w[c]; empty means all zero
};

struct ChannelReport {
  double multiplier = 0;         // M_c
  std::int64_t folded_bias = 0;  // bias - in_zp * sum w, before clipping to int32
  bool bias_clipped = false;     // folded bias did not fit int32 and was clipped
  double max_error_lsb = 0;      // max |device - clamp(a*M + zp)| over the checked accumulators
  int max_rounded_diff = 0;      // max |device - ideal rounded output|
  std::int64_t worst_accumulator = 0;  // an accumulator reaching max_error_lsb
};

struct QuantizedBso {
  std::vector<BsoChannel> channels;
  std::vector<std::uint16_t> bso;  // pack_bso(channels)
  std::vector<ChannelReport> report;
  double max_error_lsb = 0;
  int max_rounded_diff = 0;
  bool within_one_lsb() const { return max_rounded_diff <= 1; }
};

// Per-channel shift1/scale/shift2 for multiplier m (ai_tools _shift_scale): scale in
// [2^14, 2^15), shift1 = max(r, 0), shift2 = 21 + min(r, 0). Throws when m is not positive and
// finite, needs shift2 < 0 (m >= 2^15) or shift1 > 31 (m below about 2^-25).
BsoChannel multiplier_to_bso(double m);

// weights: int8 [C_out, K] (any K), used for sum w when folding the input zero point.
QuantizedBso quantize_requantization(const Requantization& q, std::span<const std::int8_t> weights,
                                     int c_out, OutputOptions output = {});

// The ideal TFLite output for accumulator a (true accumulator, input zero point included).
int ideal_output(std::int64_t accumulator, double multiplier, int output_zero_point,
                 OutputOptions output = {});

}  // namespace npukit::xs3
