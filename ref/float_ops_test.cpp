// Hand-worked checks of standard ONNX kernels on cases the ONNX conformance data leaves out or
// that exported detection/classification models rely on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "ir/tensor_util.h"
#include "ref/executor.h"

namespace npukit::ref {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatEq;
using ::testing::HasSubstr;

ir::Tensor run_node(const std::string& op, std::vector<ir::Tensor> inputs,
                    std::map<std::string, ir::Attribute> attributes = {}, std::int64_t opset = 13) {
  ir::Graph g;
  g.opset = opset;
  ir::Node n;
  n.name = op;
  n.op_type = op;
  n.attributes = std::move(attributes);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype == ir::DType::kUndefined) {
      n.inputs.push_back("");
      continue;
    }
    const std::string name = "in" + std::to_string(i);
    inputs[i].name = name;
    g.tensors[name] = inputs[i];
    n.inputs.push_back(name);
  }
  n.outputs = {"out"};
  g.outputs = {"out"};
  g.nodes.push_back(n);
  return run_graph(g, {}).at("out");
}

ir::Tensor f32(const ir::Shape& shape, std::vector<float> v) {
  return ir::make_tensor<float>(shape, v);
}
ir::Tensor i64(std::vector<std::int64_t> v) {
  return ir::make_tensor<std::int64_t>({static_cast<std::int64_t>(v.size())}, v);
}

TEST(Resize, NearestTwiceAsTorchExportsUpsample) {
  // opset 13 export of nn.Upsample(scale_factor=2): asymmetric, floor.
  auto y =
      run_node("Resize", {f32({1, 1, 2, 2}, {1, 2, 3, 4}), ir::Tensor{}, f32({4}, {1, 1, 2, 2})},
               {{"mode", std::string("nearest")},
                {"coordinate_transformation_mode", std::string("asymmetric")},
                {"nearest_mode", std::string("floor")}});
  EXPECT_EQ(y.shape, (ir::Shape{1, 1, 4, 4}));
  EXPECT_THAT(ir::to_vector<float>(y), ElementsAre(1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4));
}

TEST(Resize, BilinearHalfPixel) {
  // 1x2 -> 1x4 half_pixel: source x = (o + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25, clamped:
  // 0 -> 10, 0.25 -> 12.5, 0.75 -> 17.5, 1 -> 20
  auto y = run_node("Resize", {f32({1, 1, 1, 2}, {10, 20}), ir::Tensor{}, f32({4}, {1, 1, 1, 2})},
                    {{"mode", std::string("linear")}});
  EXPECT_THAT(ir::to_vector<float>(y), ElementsAre(10, 12.5f, 17.5f, 20));
}

TEST(Softmax, OldOpsetsCoerceToTwoDimensions) {
  auto x = f32({1, 2, 2}, {0, 0, 0, 0});
  // opset 11, axis 1: normalise over the 4 trailing values together -> 0.25 each
  EXPECT_THAT(ir::to_vector<float>(run_node("Softmax", {x}, {{"axis", std::int64_t{1}}}, 11)),
              ElementsAre(0.25f, 0.25f, 0.25f, 0.25f));
  // opset 13, axis 1: over the 2 values of axis 1 only -> 0.5 each
  EXPECT_THAT(ir::to_vector<float>(run_node("Softmax", {x}, {{"axis", std::int64_t{1}}}, 13)),
              ElementsAre(0.5f, 0.5f, 0.5f, 0.5f));
}

TEST(NonMaxSuppression, CenterBoxesThresholdsAndOrder) {
  // Center boxes (cx, cy, w, h): b0 (5,5,10,10), b1 (6,5,10,10) IoU 90/110, b2 (50,50,10,10)
  auto boxes = f32({1, 3, 4}, {5, 5, 10, 10, 6, 5, 10, 10, 50, 50, 10, 10});
  auto scores = f32({1, 1, 3}, {0.7f, 0.9f, 0.3f});
  auto y =
      run_node("NonMaxSuppression", {boxes, scores, i64({10}), f32({1}, {0.5f}), f32({1}, {0.3f})},
               {{"center_point_box", std::int64_t{1}}});
  // b1 first (0.9), b0 suppressed (0.82 > 0.5), b2's score 0.3 is not > 0.3
  EXPECT_EQ(y.shape, (ir::Shape{1, 3}));
  EXPECT_THAT(ir::to_vector<std::int64_t>(y), ElementsAre(0, 0, 1));
}

TEST(Pad, ReflectAndEdge) {
  auto x = f32({3}, {1, 2, 3});
  EXPECT_THAT(
      ir::to_vector<float>(run_node("Pad", {x, i64({2, 2})}, {{"mode", std::string("reflect")}})),
      ElementsAre(3, 2, 1, 2, 3, 2, 1));
  EXPECT_THAT(
      ir::to_vector<float>(run_node("Pad", {x, i64({1, 2})}, {{"mode", std::string("edge")}})),
      ElementsAre(1, 1, 2, 3, 3, 3));
  EXPECT_THAT(ir::to_vector<float>(run_node("Pad", {x, i64({1, 0}), f32({}, {9})})),
              ElementsAre(9, 1, 2, 3));
}

// The host segment's space-to-depth of an int8 image (perm 0 3 5 1 2 4 of [1, c, h, 2, w, 2]:
// rows of w read every other byte; the two rows of one input run split in one pass, 16 outputs
// each at a time), against the index definition, for row lengths around its steps. With a
// trailing axis of 1 the rows are read one at a time (every other byte), checked the same way.
TEST(Transpose, Int8SpaceToDepthEqualsTheIndexDefinition) {
  for (const bool trailing_one : {false, true})
    for (const std::int64_t w : {1, 15, 16, 17, 18, 33, 115}) {
      ir::Shape shape = {1, 3, 5, 2, w, 2};
      std::vector<std::int64_t> perm = {0, 3, 5, 1, 2, 4};
      if (trailing_one) shape.push_back(1), perm = {0, 3, 5, 6, 1, 2, 4};
      std::vector<std::int8_t> x(static_cast<std::size_t>(ir::element_count(shape)));
      for (std::size_t i = 0; i < x.size(); ++i)
        x[i] = static_cast<std::int8_t>(i * 37 % 251 - 125);
      const ir::Tensor out =
          run_node("Transpose", {ir::make_tensor<std::int8_t>(shape, x)}, {{"perm", perm}});
      ir::Shape expected = {1, 2, 2, 3, 5, w};
      if (trailing_one) expected.insert(expected.begin() + 3, 1);
      ASSERT_EQ(out.shape, expected);
      const auto got = ir::to_vector<std::int8_t>(out);
      std::size_t k = 0;
      for (std::int64_t dy = 0; dy < 2; ++dy)
        for (std::int64_t dx = 0; dx < 2; ++dx)
          for (std::int64_t c = 0; c < 3; ++c)
            for (std::int64_t y = 0; y < 5; ++y)
              for (std::int64_t xb = 0; xb < w; ++xb, ++k) {
                const std::int64_t at = (((c * 5 + y) * 2 + dy) * w + xb) * 2 + dx;
                ASSERT_EQ(got[k], x[static_cast<std::size_t>(at)]) << "w " << w << " output " << k;
              }
    }
}

// Slice against the index definition. Trailing axes taken whole fold into one run with the axis
// before them when its step is 1 (a channel slice of NCHW is one copy); the cases cover a fold
// through every axis, a fold stopped by a step of 2, by a part of an axis, and by a negative
// step, and no fold at all.
TEST(Slice, RunsOfWholeTrailingAxesEqualTheIndexDefinition) {
  const ir::Shape shape = {2, 5, 3, 4};
  std::vector<float> x(static_cast<std::size_t>(ir::element_count(shape)));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  struct Case {
    std::vector<std::int64_t> starts, ends, axes, steps;
  };
  const std::vector<Case> cases = {
      {{1}, {4}, {1}, {1}},                    // channels 1..3: one run per image
      {{0, 1}, {2, 4}, {0, 1}, {1, 1}},        // folds through axis 0
      {{1}, {4}, {1}, {2}},                    // channels 1, 3: runs of one channel
      {{1, 1}, {4, 3}, {1, 2}, {1, 1}},        // part of axis 2: rows of axis 3
      {{4, 0}, {0, 0}, {1, 3}, {-1, 1}},       // channels backwards, no fold into axis 1
      {{0}, {4}, {3}, {3}},                    // every third column
      {{-2, 2}, {-100, 0}, {2, 3}, {-1, -1}},  // both last axes backwards
  };
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const Case& k = cases[c];
    const ir::Tensor out =
        run_node("Slice", {f32(shape, x), i64(k.starts), i64(k.ends), i64(k.axes), i64(k.steps)});
    // The index definition: each axis's start, step and count, clamped as ONNX says.
    std::vector<std::int64_t> begin(4, 0), step(4, 1), count(shape.begin(), shape.end());
    for (std::size_t i = 0; i < k.axes.size(); ++i) {
      const std::int64_t a = k.axes[i], dim = shape[a], st = k.steps[i];
      auto norm = [&](std::int64_t v) { return v < 0 ? v + dim : v; };
      std::int64_t b = norm(k.starts[i]), e = norm(k.ends[i]);
      if (st > 0) {
        b = std::clamp<std::int64_t>(b, 0, dim), e = std::clamp<std::int64_t>(e, 0, dim);
        count[a] = std::max<std::int64_t>(0, (e - b + st - 1) / st);
      } else {
        b = std::clamp<std::int64_t>(b, -1, dim - 1), e = std::clamp<std::int64_t>(e, -1, dim - 1);
        count[a] = std::max<std::int64_t>(0, (b - e - st - 1) / -st);
      }
      begin[a] = b, step[a] = st;
    }
    ASSERT_EQ(out.shape, (ir::Shape{count[0], count[1], count[2], count[3]})) << "case " << c;
    const auto got = ir::to_vector<float>(out);
    std::size_t n = 0;
    for (std::int64_t i0 = 0; i0 < count[0]; ++i0)
      for (std::int64_t i1 = 0; i1 < count[1]; ++i1)
        for (std::int64_t i2 = 0; i2 < count[2]; ++i2)
          for (std::int64_t i3 = 0; i3 < count[3]; ++i3, ++n) {
            const std::int64_t at = (((begin[0] + i0 * step[0]) * 5 + begin[1] + i1 * step[1]) * 3 +
                                     begin[2] + i2 * step[2]) *
                                        4 +
                                    begin[3] + i3 * step[3];
            ASSERT_EQ(got[n], x[static_cast<std::size_t>(at)]) << "case " << c << " output " << n;
          }
  }
}

TEST(MaxPool, CeilModeAndPadding) {
  // 3x3 input, 2x2 stride 2 ceil: windows {1,2,4,5}, {3,6}, {7,8}, {9}
  auto y = run_node("MaxPool", {f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})},
                    {{"kernel_shape", std::vector<std::int64_t>{2, 2}},
                     {"strides", std::vector<std::int64_t>{2, 2}},
                     {"ceil_mode", std::int64_t{1}}});
  EXPECT_THAT(ir::to_vector<float>(y), ElementsAre(5, 6, 8, 9));
}

TEST(Conv, DepthwiseStridedAsymmetricPads) {
  // 2 channels, depthwise 2x2 kernels of ones, stride 2, pads (top 0, left 1, bottom 1, right 0)
  auto x = f32({1, 2, 2, 2}, {1, 2, 3, 4, 10, 20, 30, 40});
  auto w = f32({2, 1, 2, 2}, {1, 1, 1, 1, 1, 1, 1, 1});
  auto y = run_node("Conv", {x, w},
                    {{"group", std::int64_t{2}},
                     {"strides", std::vector<std::int64_t>{2, 2}},
                     {"pads", std::vector<std::int64_t>{0, 1, 1, 0}}});
  // OH = (2+0+1-2)/2+1 = 1, OW = (2+1+0-2)/2+1 = 1; window rows 0..1, cols -1..0: x[0][0] + x[1][0]
  EXPECT_EQ(y.shape, (ir::Shape{1, 2, 1, 1}));
  EXPECT_THAT(ir::to_vector<float>(y), ElementsAre(4, 40));
}

TEST(FloatOps, ShapeMismatchesNameTheProblem) {
  EXPECT_THAT(
      [&] {
        run_node("Add", {f32({2}, {1, 2}), f32({3}, {1, 2, 3})});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("do not broadcast")));
  EXPECT_THAT(
      [&] {
        run_node("Reshape", {f32({2}, {1, 2}), i64({3})});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("cannot reshape [2] to [3]")));
  EXPECT_THAT(
      [&] {
        run_node("MaxPool", {f32({1, 1, 1, 1, 1}, {1})},
                 {{"kernel_shape", std::vector<std::int64_t>{1, 1, 1}}});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("not supported")));
}

}  // namespace
}  // namespace npukit::ref
