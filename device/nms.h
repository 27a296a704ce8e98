// NMS megablock (opcode 0x4; gati.md 3.2, 7.5; DECISIONS.md 9). No public hardware implements it;
// npukit's device does greedy per-class non-maximum suppression with ONNX NonMaxSuppression
// semantics and an exact integer IoU test (no division, no perimeter approximation). The DRAM
// formats of boxes, scores and the result are ours and are documented in docs/device-nms.md.
#pragma once

#include "common/bytes.h"
#include "device/block.h"
#include "isa/isa.h"

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace npukit::device {

// One box as stored: four int8 values. CornerCord 0: two opposite corners (a1, b1, a2, b2),
// in either order (ONNX allows flipped corners); CornerCord 1: (centre_a, centre_b, size_a,
// size_b) as ONNX center_point_box = 1. a/b are the two axes; IoU does not care which is x.
using NmsBoxWords = std::array<std::int8_t, 4>;

// A box as two corners in doubled coordinates (so centre format needs no division), lo <= hi.
struct NmsBox {
  std::int32_t a_lo, b_lo, a_hi, b_hi;
};
NmsBox nms_box(const NmsBoxWords& words, bool center_format);

// IoU(x, y) > iou / 2^iou_shift, decided exactly in integers:
// inter * 2^shift > iou * union. Boxes with zero union never overlap (IoU taken as 0).
bool nms_iou_exceeds(const NmsBox& x, const NmsBox& y, std::uint32_t iou, unsigned iou_shift);

struct NmsParams {
  std::uint32_t iou = 0;             // IOU threshold numerator (16 bits)
  unsigned iou_shift = 0;            // threshold = iou / 2^iou_shift
  std::int32_t score_thresh = -128;  // a box is a candidate only if score > score_thresh
  std::uint32_t total_boxes = 0;     // N
  std::uint32_t max_out_boxes = 0;   // per class, as ONNX max_output_boxes_per_class
  bool center_format = false;        // CornerCord
  std::uint32_t total_classes = 0;
};

struct NmsSelection {
  std::uint32_t class_index;
  std::uint32_t box_index;
  bool operator==(const NmsSelection&) const = default;
};

// Greedy NMS, class by class: candidates with score > score_thresh in descending score order
// (equal scores: lower box index first); a candidate is kept unless its IoU with an already kept
// box of the same class exceeds the threshold; at most max_out_boxes per class.
// scores are class-major: scores[c * N + i].
// iou_tests, when given, counts the pairwise IoU tests made (for timing).
std::vector<NmsSelection> nms_select(const NmsParams& params, std::span<const NmsBoxWords> boxes,
                                     std::span<const std::int8_t> scores,
                                     std::uint64_t* iou_tests = nullptr);

// DRAM sizes (bytes, 32-B aligned) of the three regions for given parameters.
std::uint64_t nms_box_region_bytes(std::uint32_t total_boxes);
std::uint64_t nms_score_region_bytes(std::uint32_t total_boxes, std::uint32_t total_classes);
// Result: u32 count, then max_out_boxes * total_classes entries of (u32 class, u32 box), all
// big-endian, unused entries zero, padded with zeros to 32 bytes.
std::uint64_t nms_result_region_bytes(std::uint32_t max_out_boxes, std::uint32_t total_classes);
Bytes nms_encode_result(const std::vector<NmsSelection>& selected, std::uint32_t max_out_boxes,
                        std::uint32_t total_classes);

// The megablock: reads NMS fields, boxes and scores (flat int8, see docs/device-nms.md), writes
// the result at OutputBlock.OutputAddr. The OutputBlock either carries only OutputAddr
// (ImageDimOutput 0: nothing to dispatch) or FlatController 1 with ImageDimOutput = the result
// region size, which lets DispatchEn send the result to the host.
BlockTiming run_nms(LayerContext& ctx);

}  // namespace npukit::device

// Registers run_nms with the block registry (block.h).
#define NPUKIT_DEVICE_RUN_NMS 1
