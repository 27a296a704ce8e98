// NMS: the exact integer IoU test against hand-worked rationals, and greedy selection against a
// plain floating-point ONNX-style NMS written here.
#include "device/nms.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

#include "common/error.h"
#include "device/blocks_test_support.h"
#include "device/test_programs.h"

namespace npukit::device {
namespace {
using namespace blocks_testing;
using isa::Field;

TEST(NmsIou, ExactThresholdAtTheBoundary) {
  // Two 10x10 boxes shifted by 5 in x: inter 50, union 150, IoU exactly 1/3.
  const NmsBox x = nms_box({0, 0, 10, 10}, false);
  const NmsBox y = nms_box({5, 0, 15, 10}, false);
  // threshold 1/3 is not exceeded (strictly greater suppresses): 21845/65536 < 1/3 < 21846/65536.
  EXPECT_TRUE(nms_iou_exceeds(x, y, 21845, 16));
  EXPECT_FALSE(nms_iou_exceeds(x, y, 21846, 16));
  // 1/4 < 1/3 with a small shift; 1/2 > 1/3.
  EXPECT_TRUE(nms_iou_exceeds(x, y, 1, 2));
  EXPECT_FALSE(nms_iou_exceeds(x, y, 1, 1));
}

TEST(NmsIou, CornerOrderAndCentreFormatAgree) {
  const NmsBox corners = nms_box({2, 4, 8, 10}, false);
  const NmsBox flipped = nms_box({8, 10, 2, 4}, false);
  const NmsBox centre = nms_box({5, 7, 6, 6}, true);  // centre (5,7), size 6x6
  EXPECT_EQ(corners.a_lo, flipped.a_lo);
  EXPECT_EQ(corners.b_hi, flipped.b_hi);
  EXPECT_EQ(corners.a_lo, centre.a_lo);
  EXPECT_EQ(corners.a_hi, centre.a_hi);
  EXPECT_EQ(corners.b_lo, centre.b_lo);
  EXPECT_EQ(corners.b_hi, centre.b_hi);
  // Odd sizes stay exact in doubled coordinates: centre 0, size 3 -> [-1.5, 1.5] -> [-3, 3].
  const NmsBox odd = nms_box({0, 0, 3, 3}, true);
  EXPECT_EQ(odd.a_lo, -3);
  EXPECT_EQ(odd.a_hi, 3);
}

TEST(NmsIou, DisjointAndDegenerateBoxesNeverOverlap) {
  EXPECT_FALSE(nms_iou_exceeds(nms_box({0, 0, 1, 1}, false), nms_box({2, 2, 3, 3}, false), 0, 0));
  EXPECT_FALSE(nms_iou_exceeds(nms_box({0, 0, 0, 0}, false), nms_box({0, 0, 0, 0}, false), 0, 0));
  // Identical boxes: IoU 1 exceeds anything below 1.
  EXPECT_TRUE(
      nms_iou_exceeds(nms_box({0, 0, 4, 4}, false), nms_box({0, 0, 4, 4}, false), 65535, 16));
  EXPECT_FALSE(nms_iou_exceeds(nms_box({0, 0, 4, 4}, false), nms_box({0, 0, 4, 4}, false), 1, 0));
}

TEST(NmsSelect, HandWorkedTwoClasses) {
  // Boxes: 0 and 1 overlap heavily (IoU 81/119), 2 is apart.
  const std::vector<NmsBoxWords> boxes = {{0, 0, 10, 10}, {1, 1, 11, 11}, {20, 20, 30, 30}};
  // Class 0 scores: 1 best, then 0, then 2. Class 1: only box 2 above the threshold.
  const std::vector<std::int8_t> scores = {90, 95, 10, -100, -90, 70};
  NmsParams p;
  p.iou = 1;
  p.iou_shift = 1;  // 0.5
  p.score_thresh = 5;
  p.total_boxes = 3;
  p.max_out_boxes = 10;
  p.total_classes = 2;
  const auto sel = nms_select(p, boxes, scores);
  const std::vector<NmsSelection> expect = {{0, 1}, {0, 2}, {1, 2}};
  EXPECT_EQ(sel, expect);
  // Threshold 0.75 keeps box 0 too; max_out_boxes 1 keeps only the best per class.
  p.iou = 3;
  p.iou_shift = 2;
  EXPECT_EQ(nms_select(p, boxes, scores),
            (std::vector<NmsSelection>{{0, 1}, {0, 0}, {0, 2}, {1, 2}}));
  p.max_out_boxes = 1;
  EXPECT_EQ(nms_select(p, boxes, scores), (std::vector<NmsSelection>{{0, 1}, {1, 2}}));
  // Score equal to the threshold is not a candidate; equal scores keep the lower index first.
  const std::vector<std::int8_t> ties = {5, 60, 60};
  p.total_classes = 1;
  p.max_out_boxes = 5;
  EXPECT_EQ(nms_select(p, boxes, ties), (std::vector<NmsSelection>{{0, 1}, {0, 2}}));
}

// Plain float NMS as ONNX NonMaxSuppression defines it (one batch, centre_point_box = 0).
std::vector<NmsSelection> float_nms(const std::vector<NmsBoxWords>& b,
                                    const std::vector<std::int8_t>& s, std::uint32_t n,
                                    std::uint32_t classes, std::uint32_t max_out, double iou_t,
                                    double score_t) {
  auto iou = [&](std::uint32_t i, std::uint32_t j) {
    const double ax1 = std::min(b[i][0], b[i][2]), ax2 = std::max(b[i][0], b[i][2]);
    const double ay1 = std::min(b[i][1], b[i][3]), ay2 = std::max(b[i][1], b[i][3]);
    const double bx1 = std::min(b[j][0], b[j][2]), bx2 = std::max(b[j][0], b[j][2]);
    const double by1 = std::min(b[j][1], b[j][3]), by2 = std::max(b[j][1], b[j][3]);
    const double iw = std::max(0.0, std::min(ax2, bx2) - std::max(ax1, bx1));
    const double ih = std::max(0.0, std::min(ay2, by2) - std::max(ay1, by1));
    const double inter = iw * ih;
    const double uni = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - inter;
    return uni <= 0 ? 0.0 : inter / uni;
  };
  std::vector<NmsSelection> out;
  for (std::uint32_t c = 0; c < classes; ++c) {
    std::vector<std::uint32_t> idx;
    for (std::uint32_t i = 0; i < n; ++i)
      if (s[c * n + i] > score_t) idx.push_back(i);
    std::sort(idx.begin(), idx.end(), [&](auto l, auto r) {
      return s[c * n + l] != s[c * n + r] ? s[c * n + l] > s[c * n + r] : l < r;
    });
    std::vector<std::uint32_t> kept;
    for (auto i : idx) {
      if (kept.size() == max_out) break;
      bool ok = true;
      for (auto k : kept) ok = ok && !(iou(k, i) > iou_t);
      if (ok) kept.push_back(i);
    }
    for (auto k : kept) out.push_back({c, k});
  }
  return out;
}

TEST(NmsSelect, MatchesFloatNmsOnRandomBoxes) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> coord(-64, 63), size(0, 64), score(-128, 127);
  for (int trial = 0; trial < 40; ++trial) {
    const std::uint32_t n = 1 + trial * 3, classes = 1 + trial % 4;
    std::vector<NmsBoxWords> boxes;
    for (std::uint32_t i = 0; i < n; ++i) {
      const int x = coord(rng), y = coord(rng);
      boxes.push_back({static_cast<std::int8_t>(x), static_cast<std::int8_t>(y),
                       static_cast<std::int8_t>(x + size(rng)),
                       static_cast<std::int8_t>(y + size(rng))});
    }
    std::vector<std::int8_t> scores(n * classes);
    for (auto& v : scores) v = static_cast<std::int8_t>(score(rng));
    NmsParams p;
    p.iou = 13107;  // 0.2 approx; irrational-free so the float reference is exact enough
    p.iou_shift = 15;
    p.score_thresh = -20;
    p.total_boxes = n;
    p.max_out_boxes = 1 + trial % 7;
    p.total_classes = classes;
    const auto got = nms_select(p, boxes, scores);
    const auto want = float_nms(boxes, scores, n, classes, p.max_out_boxes, 13107.0 / 32768.0, -20);
    ASSERT_EQ(got, want) << "trial " << trial;
  }
}

TEST(NmsResult, EncodingIsCountThenPairsPaddedTo32) {
  const Bytes bytes = nms_encode_result({{1, 2}, {3, 0x10000}}, 2, 2);
  ASSERT_EQ(bytes.size(), 64u);  // 4 + 2*2*8 = 36 -> 64
  EXPECT_EQ(load_be32(&bytes[0]), 2u);
  EXPECT_EQ(load_be32(&bytes[4]), 1u);
  EXPECT_EQ(load_be32(&bytes[8]), 2u);
  EXPECT_EQ(load_be32(&bytes[12]), 3u);
  EXPECT_EQ(load_be32(&bytes[16]), 0x10000u);
  for (std::size_t i = 20; i < bytes.size(); ++i) EXPECT_EQ(bytes[i], 0) << i;
  EXPECT_EQ(nms_box_region_bytes(8), 32u);
  EXPECT_EQ(nms_box_region_bytes(9), 64u);
  EXPECT_EQ(nms_score_region_bytes(11, 3), 64u);
}

// The megablock: boxes and scores from DRAM, the result region at OutputAddr.
struct NmsProgram {
  Dram dram{1 << 20};
  isa::Instruction mega{isa::Opcode::NMS};
  isa::Instruction out{isa::Opcode::OutputBlock};
};

void setup_nms(NmsProgram& p, const std::vector<NmsBoxWords>& boxes,
               const std::vector<std::int8_t>& scores, std::uint32_t classes, std::uint32_t iou,
               unsigned shift, int score_thresh, std::uint32_t max_out, bool centre) {
  const std::uint32_t n = static_cast<std::uint32_t>(boxes.size());
  Bytes box_bytes, score_bytes(scores.begin(), scores.end());
  for (const auto& b : boxes)
    for (auto v : b) box_bytes.push_back(static_cast<std::uint8_t>(v));
  p.dram.write(0x1000, box_bytes, "test");
  p.dram.write(0x8000, score_bytes, "test");
  p.mega.set(Field::NMS_IOU, iou)
      .set(Field::NMS_IOUShift, shift)
      .set_signed(Field::NMS_ScoreThresh, score_thresh)
      .set(Field::NMS_TotalInBoxes, n)
      .set(Field::NMS_MaxOutBoxes, max_out)
      .set(Field::NMS_CornerCord, centre)
      .set(Field::NMS_TotalClasses, classes)
      .set(Field::NMS_BoxStartAddr, 0x1000)
      .set(Field::NMS_BoxEndAddr, 0x1000 + ceil_mod(4 * n, 32))
      .set(Field::NMS_ScoreStartAddr, 0x8000)
      .set(Field::NMS_ScoreEndAddr, 0x8000 + ceil_mod(n * classes, 32));
  p.out.set(Field::OutputBlock_OutputAddr, 0x20000);
}

TEST(NmsBlock, WritesCountAndPairsAtOutputAddr) {
  NmsProgram p;
  // Centre format (cx, cy, w, h): boxes 0 and 1 overlap (inter 6x8 = 48, union 80: IoU 0.6), box 2
  // apart.
  setup_nms(p, {{10, 10, 8, 8}, {12, 10, 8, 8}, {50, 50, 4, 4}}, {20, 30, -5, 1, 2, 3}, 2, 1, 1, 0,
            4, true);
  p.dram.fill(0x20000, 96, 0xEE, "test");
  Diagnostics diag;
  const BlockTiming t = run_block(&run_nms, isa::kArch9x8x8, p.dram, diag, p.mega, &p.out, nullptr);
  // Class 0: box 1 (30) kept, box 0 suppressed (0.6 > 1/2), box 2 (-5) below the threshold 0.
  // Class 1: boxes 2, 1, 0 by score; 0 is suppressed by 1.
  const std::vector<std::uint32_t> want = {3, 0, 1, 1, 2, 1, 1};
  const Bytes got = p.dram.read(0x20000, 96, "test");
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(load_be32(&got[4 * i]), want[i]) << i;
  // 4 + 4 * 2 * 8 = 68 bytes -> 96, zero beyond the entries.
  for (std::size_t i = 4 * want.size(); i < 96; ++i) EXPECT_EQ(got[i], 0) << i;
  EXPECT_EQ(t.dram_read_bytes, 64u);
  EXPECT_EQ(t.dram_write_bytes, 96u);
}

TEST(NmsBlock, FlatOutputBlockMakesTheResultDispatchable) {
  NmsProgram p;
  setup_nms(p, {{0, 0, 4, 4}}, {9}, 1, 1, 1, -128, 1, false);
  p.out.set(Field::OutputBlock_FlatController, 1).set(Field::OutputBlock_ImageDimOutput, 32);
  Diagnostics diag;
  run_block(&run_nms, isa::kArch9x4x4, p.dram, diag, p.mega, &p.out, nullptr);
  EXPECT_EQ(p.dram.read_be32(0x20000, "test"), 1u);
  EXPECT_EQ(dispatch_size(isa::kArch9x4x4, OutputConfig::from(p.out)), 32u);
}

TEST(NmsBlock, BadFieldsNameTheInstructionAndField) {
  NmsProgram p;
  setup_nms(p, {{0, 0, 4, 4}, {1, 1, 5, 5}}, {9, 8}, 1, 1, 1, -128, 1, false);
  Diagnostics diag;
  auto run = [&] {
    return error_of(
        [&] { run_block(&run_nms, isa::kArch9x4x4, p.dram, diag, p.mega, &p.out, nullptr); });
  };
  EXPECT_EQ(run(), "");
  p.mega.set(Field::NMS_BoxEndAddr, 0x1040);
  std::string e = run();
  EXPECT_NE(e.find("instruction 1 NMS.BoxEndAddr"), std::string::npos) << e;
  p.mega.set(Field::NMS_BoxEndAddr, 0x1020).set(Field::NMS_ScoreStartAddr, 0xFFFFFFE0);
  e = run();
  EXPECT_NE(e.find("NMS.ScoreStartAddr"), std::string::npos) << e;
  p.mega.set(Field::NMS_ScoreStartAddr, 0x8000);
  p.out.set(Field::OutputBlock_ImageDimOutput, 64);
  e = run();
  EXPECT_NE(e.find("instruction 2 OutputBlock.ImageDimOutput"), std::string::npos) << e;
}

// Whole program through Device: scores arrive as the input packet, boxes as a blob, the result
// is dispatched (FlatController 1) and matches the float ONNX-style NMS of this file.
TEST(NmsProgram, DispatchesTheSelectionOnEveryArray) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> coord(-60, 60), size(1, 50), score(-128, 127);
  for (const auto& arch : isa::kSupportedArchs) {
    const std::uint32_t n = 37, classes = 3, max_out = 5;
    std::vector<NmsBoxWords> boxes;
    Bytes box_bytes;
    for (std::uint32_t i = 0; i < n; ++i) {
      const int x = coord(rng), y = coord(rng);
      boxes.push_back({static_cast<std::int8_t>(x), static_cast<std::int8_t>(y),
                       static_cast<std::int8_t>(x + size(rng)),
                       static_cast<std::int8_t>(y + size(rng))});
      for (auto v : boxes.back()) box_bytes.push_back(static_cast<std::uint8_t>(v));
    }
    std::vector<std::int8_t> scores(n * classes);
    for (auto& v : scores) v = static_cast<std::int8_t>(score(rng));
    testing::ProgramBuilder b{arch, {}, {}};
    const std::uint32_t box_addr = b.add_blob(box_bytes);
    const std::uint32_t score_addr = b.alloc(ceil_mod(n * classes, 32));
    const std::uint32_t out = b.alloc(nms_result_region_bytes(max_out, classes));
    isa::Instruction mega(isa::Opcode::NMS);
    mega.set(Field::NMS_IOU, 3)
        .set(Field::NMS_IOUShift, 3)  // 0.375
        .set_signed(Field::NMS_ScoreThresh, -10)
        .set(Field::NMS_TotalInBoxes, n)
        .set(Field::NMS_MaxOutBoxes, max_out)
        .set(Field::NMS_TotalClasses, classes)
        .set(Field::NMS_BoxStartAddr, box_addr)
        .set(Field::NMS_BoxEndAddr, box_addr + ceil_mod(4 * n, 32))
        .set(Field::NMS_ScoreStartAddr, score_addr)
        .set(Field::NMS_ScoreEndAddr, score_addr + ceil_mod(n * classes, 32));
    isa::Instruction ob(isa::Opcode::OutputBlock);
    ob.set(Field::OutputBlock_OutputAddr, out)
        .set(Field::OutputBlock_FlatController, 1)
        .set(Field::OutputBlock_ImageDimOutput, nms_result_region_bytes(max_out, classes))
        .set(Field::OutputBlock_OpWidth, 1)
        .set(Field::OutputBlock_DispatchEn, 1)
        .set(Field::OutputBlock_DispatchID, 0x4E4D53);
    add_group(b, mega, ob, nullptr);
    b.finish();
    Bytes score_bytes(scores.begin(), scores.end());
    score_bytes.resize(ceil_mod(score_bytes.size(), 32), 0);
    const auto want = float_nms(boxes, scores, n, classes, max_out, 0.375, -10);
    EXPECT_EQ(run_program_dispatch(b, score_addr, score_bytes, 0x4E4D53, nullptr),
              nms_encode_result(want, max_out, classes))
        << arch.str();
  }
}

}  // namespace
}  // namespace npukit::device
