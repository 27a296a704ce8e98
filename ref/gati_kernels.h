// Gati-exact integer kernels: what each Gati megablock computes, in logical NCHW, with the
// hardware's widths, rounding and saturation (docs/ref-ops.md, gati.md 3.2/7/14, DECISIONS.md
// 4, 6-9). The independent reference for the device model: shares no code with device/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace npukit::ref::gati {

// (v + 2^(s-1)) >> s with an arithmetic shift; s == 0 leaves v unchanged.
std::int64_t round_shift(std::int64_t v, int shift);
std::int8_t clamp_int8(std::int64_t v);

enum class Act { kNone, kRelu, kClip, kLeaky };

// TailBlock: quantizer, activation and the optional global average pool.
struct Tail {
  bool quant_en = true;
  std::int32_t quant_scale = 1;  // signed 16-bit QuantScale
  int quant_shift = 0;           // 0..31
  Act act = Act::kNone;
  int act_param = 0;  // Clip maximum, unsigned 8-bit
  int neg_alpha = 0;  // LeakyReLU Q8 slopes, unsigned 10-bit
  int pos_alpha = 256;
  bool global_pool = false;
  std::int64_t global_pool_scale = 0;  // unsigned 16-bit
  int global_pool_shift = 0;
};

// The quantizer of one lane: rshift(acc * scale, shift), then the EltWise fp_cast shift, clamp.
std::int8_t quantize(std::int64_t acc, std::int32_t quant_scale, int quant_shift, int fp_cast = 0);
// ReLU / Clip / LeakyReLU on a quantized value.
std::int8_t activate(std::int8_t y, const Tail& tail);

struct ConvParams {
  int stride_h = 1, stride_w = 1;
  int pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int group = 1;
  Tail tail;
};
// x int8 [N,C,H,W], w int8 [KN,C/group,KH,KW], bias int32 [KN] or null, acc int32 [N,KN,OH,OW]
// or null. Output int8 (int32 when !quant_en), [N,KN,1,1] with the global pool.
ir::Tensor conv(const ir::Tensor& x, const ir::Tensor& w, const ir::Tensor* bias,
                const ir::Tensor* acc, const ConvParams& params);

// x int8 [N,K] or [N,C,H,W] (flattened C,H,W), w int8 [M,K], bias int32 [M] or null.
ir::Tensor fully_connected(const ir::Tensor& x, const ir::Tensor& w, const ir::Tensor* bias,
                           const Tail& tail);

enum class PoolMode { kMax, kAverage, kGlobalAverage };
struct PoolParams {
  PoolMode mode = PoolMode::kMax;
  int kernel_h = 1, kernel_w = 1;
  int stride_h = 1, stride_w = 1;
  int pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  bool ceil_mode = false;
  std::int64_t scale = 0;  // average pools: unsigned 16-bit PoolScale
  int shift = 0;
};
// Output length of one pooled axis (floor or ceil; a ceil window starting in the end padding is
// dropped).
std::int64_t pool_output_size(std::int64_t in, int kernel, int stride, int pad_begin, int pad_end,
                              bool ceil_mode);
ir::Tensor pool(const ir::Tensor& x, const PoolParams& params);

enum class EltOp { kAdd, kSub, kMult, kSigmoid, kTanh };
struct EltwiseParams {
  EltOp op = EltOp::kAdd;
  std::int32_t a_scale = 0, b_scale = 0;  // signed 18-bit, Q10 (Q16 for a with sigmoid/tanh)
  int a_zero_point = 0, b_zero_point = 0;
  Tail tail;
};
// The value handed to the quantizer for one lane (before the tail).
std::int64_t eltwise_value(std::int8_t a, std::int8_t b, const EltwiseParams& params);
// a, b int8 of the same shape (b may be null: zeros).
ir::Tensor eltwise(const ir::Tensor& a, const ir::Tensor* b, const EltwiseParams& params);

ir::Tensor resize2x(const ir::Tensor& x);
ir::Tensor concat_channels(const std::vector<const ir::Tensor*>& inputs);
ir::Tensor transpose_chw_to_hwc(const ir::Tensor& x);

struct NmsParams {
  bool center_point_box = false;
  std::int64_t iou_threshold = 0;  // 16-bit; threshold = iou_threshold / 2^iou_shift
  int iou_shift = 0;
  int score_threshold = -128;
  int max_output_boxes_per_class = 0;
};
// boxes int8 [1,B,4], scores int8 [1,K,B] -> int64 [S,3] (batch, class, box).
ir::Tensor nms(const ir::Tensor& boxes, const ir::Tensor& scores, const NmsParams& params);

// Parameter parsing from npukit.gati nodes (range-checked; errors name node and attribute).
ConvParams conv_params(const ir::Node& node);
Tail tail_params(const ir::Node& node, bool allow_global_pool);
PoolParams pool_params(const ir::Node& node);
EltwiseParams eltwise_params(const ir::Node& node);
NmsParams nms_params(const ir::Node& node);

}  // namespace npukit::ref::gati
