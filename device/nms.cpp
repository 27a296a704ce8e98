#include "device/nms.h"

#include "device/eltwise.h"  // field checks shared by the device-blocks megablocks

#include <algorithm>

namespace npukit::device {

NmsBox nms_box(const NmsBoxWords& w, bool center_format) {
  NmsBox box{};
  if (center_format) {
    // Doubled coordinates: 2*centre -/+ size. A negative size flips the corners; normalise.
    const std::int32_t a0 = 2 * w[0] - w[2], a1 = 2 * w[0] + w[2];
    const std::int32_t b0 = 2 * w[1] - w[3], b1 = 2 * w[1] + w[3];
    box = {std::min(a0, a1), std::min(b0, b1), std::max(a0, a1), std::max(b0, b1)};
  } else {
    box = {2 * std::min(w[0], w[2]), 2 * std::min(w[1], w[3]), 2 * std::max(w[0], w[2]),
           2 * std::max(w[1], w[3])};
  }
  return box;
}

bool nms_iou_exceeds(const NmsBox& x, const NmsBox& y, std::uint32_t iou, unsigned iou_shift) {
  // Doubled int8 coordinates span < 2^10, so areas are < 2^20 and every product below fits in
  // 64 bits with room to spare (iou < 2^16, 2^shift <= 2^15).
  const std::int64_t inter_a =
      std::max<std::int64_t>(0, std::int64_t{std::min(x.a_hi, y.a_hi)} - std::max(x.a_lo, y.a_lo));
  const std::int64_t inter_b =
      std::max<std::int64_t>(0, std::int64_t{std::min(x.b_hi, y.b_hi)} - std::max(x.b_lo, y.b_lo));
  const std::int64_t inter = inter_a * inter_b;
  const std::int64_t area_x = std::int64_t{x.a_hi - x.a_lo} * (x.b_hi - x.b_lo);
  const std::int64_t area_y = std::int64_t{y.a_hi - y.a_lo} * (y.b_hi - y.b_lo);
  const std::int64_t uni = area_x + area_y - inter;
  if (uni <= 0) return false;
  return (inter << iou_shift) > std::int64_t{iou} * uni;
}

std::vector<NmsSelection> nms_select(const NmsParams& p, std::span<const NmsBoxWords> boxes,
                                     std::span<const std::int8_t> scores,
                                     std::uint64_t* iou_tests) {
  std::vector<NmsBox> decoded;
  decoded.reserve(boxes.size());
  for (const auto& w : boxes) decoded.push_back(nms_box(w, p.center_format));

  std::vector<NmsSelection> out;
  std::vector<std::uint32_t> order;
  std::vector<std::uint32_t> kept;
  for (std::uint32_t c = 0; c < p.total_classes; ++c) {
    const std::int8_t* s = scores.data() + std::size_t{c} * p.total_boxes;
    order.clear();
    for (std::uint32_t i = 0; i < p.total_boxes; ++i) {
      if (s[i] > p.score_thresh) order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t l, std::uint32_t r) { return s[l] > s[r]; });
    kept.clear();
    for (std::uint32_t i : order) {
      if (kept.size() >= p.max_out_boxes) break;
      const bool suppressed = std::any_of(kept.begin(), kept.end(), [&](std::uint32_t k) {
        if (iou_tests) ++*iou_tests;
        return nms_iou_exceeds(decoded[k], decoded[i], p.iou, p.iou_shift);
      });
      if (!suppressed) kept.push_back(i);
    }
    for (std::uint32_t k : kept) out.push_back({c, k});
  }
  return out;
}

std::uint64_t nms_box_region_bytes(std::uint32_t total_boxes) {
  return ceil_mod(std::uint64_t{total_boxes} * 4, 32);
}

std::uint64_t nms_score_region_bytes(std::uint32_t total_boxes, std::uint32_t total_classes) {
  return ceil_mod(std::uint64_t{total_boxes} * total_classes, 32);
}

std::uint64_t nms_result_region_bytes(std::uint32_t max_out_boxes, std::uint32_t total_classes) {
  return ceil_mod(4 + std::uint64_t{max_out_boxes} * total_classes * 8, 32);
}

Bytes nms_encode_result(const std::vector<NmsSelection>& selected, std::uint32_t max_out_boxes,
                        std::uint32_t total_classes) {
  Bytes out;
  out.reserve(nms_result_region_bytes(max_out_boxes, total_classes));
  append_be32(out, static_cast<std::uint32_t>(selected.size()));
  for (const auto& sel : selected) {
    append_be32(out, sel.class_index);
    append_be32(out, sel.box_index);
  }
  out.resize(nms_result_region_bytes(max_out_boxes, total_classes), 0);
  return out;
}

BlockTiming run_nms(LayerContext& ctx) {
  using isa::Field;
  const isa::Instruction& m = ctx.mega;
  NmsParams p;
  p.iou = static_cast<std::uint32_t>(m.get(Field::NMS_IOU));
  p.iou_shift = static_cast<unsigned>(m.get(Field::NMS_IOUShift));
  p.score_thresh = static_cast<std::int32_t>(m.get_signed(Field::NMS_ScoreThresh));
  p.total_boxes = static_cast<std::uint32_t>(m.get(Field::NMS_TotalInBoxes));
  p.max_out_boxes = static_cast<std::uint32_t>(m.get(Field::NMS_MaxOutBoxes));
  p.center_format = m.get(Field::NMS_CornerCord) != 0;
  p.total_classes = static_cast<std::uint32_t>(m.get(Field::NMS_TotalClasses));

  const std::uint64_t box_bytes = nms_box_region_bytes(p.total_boxes);
  const std::uint64_t score_bytes = nms_score_region_bytes(p.total_boxes, p.total_classes);
  const std::uint64_t box_addr =
      check_input_region(ctx, Field::NMS_BoxStartAddr, Field::NMS_BoxEndAddr, box_bytes);
  const std::uint64_t score_addr =
      check_input_region(ctx, Field::NMS_ScoreStartAddr, Field::NMS_ScoreEndAddr, score_bytes);
  const Bytes box_raw = ctx.dram.read(box_addr, box_bytes, ctx.field_name(Field::NMS_BoxStartAddr));
  const Bytes score_raw =
      ctx.dram.read(score_addr, score_bytes, ctx.field_name(Field::NMS_ScoreStartAddr));
  std::vector<NmsBoxWords> boxes(p.total_boxes);
  for (std::size_t i = 0; i < boxes.size(); ++i)
    for (std::size_t k = 0; k < 4; ++k) boxes[i][k] = static_cast<std::int8_t>(box_raw[4 * i + k]);
  std::vector<std::int8_t> scores(std::size_t{p.total_boxes} * p.total_classes);
  for (std::size_t i = 0; i < scores.size(); ++i)
    scores[i] = static_cast<std::int8_t>(score_raw[i]);

  std::uint64_t iou_tests = 0;
  const std::vector<NmsSelection> selected = nms_select(p, boxes, scores, &iou_tests);
  const Bytes result = nms_encode_result(selected, p.max_out_boxes, p.total_classes);

  const isa::Instruction& out = ctx.require_output();
  std::uint64_t written = 0;
  if (out.get(Field::OutputBlock_FlatController) == 1) {
    written = write_flat_output(ctx, result);
  } else {
    const std::uint64_t dim = out.get(Field::OutputBlock_ImageDimOutput);
    if (dim != 0)
      ctx.fail_field(Field::OutputBlock_ImageDimOutput,
                     "is {} but NMS writes a flat {}-byte result: set FlatController = 1 and "
                     "ImageDimOutput = {} to dispatch it, or leave both 0",
                     dim, result.size(), result.size());
    const std::uint64_t addr = out.get(Field::OutputBlock_OutputAddr);
    ctx.check_dram_range(Field::OutputBlock_OutputAddr, addr, result.size());
    ctx.dram.write(addr, result, ctx.field_name(Field::OutputBlock_OutputAddr));
    written = result.size();
  }
  // One score compared per cycle, a sort of the candidates, one IoU test per cycle.
  std::uint64_t candidates = 0;
  for (std::int8_t s : scores) candidates += s > p.score_thresh;
  std::uint64_t sort_cycles = 0;
  for (std::uint64_t n = candidates; n > 1; n >>= 1) sort_cycles += candidates;
  const std::uint64_t compute = scores.size() + sort_cycles + iou_tests;
  return streaming_timing(compute, box_bytes + score_bytes, written);
}

}  // namespace npukit::device
