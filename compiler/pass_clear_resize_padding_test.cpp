// clear_resize_padding: on 9,4,4 a 2x resize of an image with an odd H*W leaves a padding pixel
// that the v1.0.0 RESIZE writes non-zero; when an EltWise streams it or it is dispatched, an
// identity depthwise conv follows the resize. Conv readers (im2col) and 9,8,8 need nothing.
#include "compiler/errata_test_support.h"

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;
using testing::random_int8;

// conv (3x5 image) -> resize 2x (6x10 = 60 pixels) -> [add with itself | conv | output]
ir::Graph resized(const std::string& then) {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 8, 3, 5});
  auto a = b.qconv("conv", "x", 0.05f, random_int8(8 * 8 * 9, 4), {8, 8, 3, 3}, 0.01f, 0.05f, {},
                   {1, 1, 1, 1});
  b.value("up", ir::DType::kInt8, {1, 8, 6, 10});
  auto& rs = b.node("Resize", "",
                    {a, "", b.constant<float>("scales", ir::DType::kFloat32, {4}, {1, 1, 2, 2})},
                    {"up"}, "resize");
  rs.attributes["mode"] = std::string("nearest");
  rs.attributes["coordinate_transformation_mode"] = std::string("asymmetric");
  rs.attributes["nearest_mode"] = std::string("floor");
  b.g.outputs = {"up"};
  if (then == "add") {
    b.value("sum", ir::DType::kInt8, {1, 8, 6, 10});
    b.node("QLinearAdd", "com.microsoft",
           {"up", "conv_ys", "conv_yz", "up", "conv_ys", "conv_yz", b.f32("ss", 0.1f), "conv_yz"},
           {"sum"}, "add");
    b.g.outputs = {"sum"};
  } else if (then == "conv") {
    b.g.outputs = {b.qconv("after", "up", 0.05f, random_int8(8 * 8 * 9, 6), {8, 8, 3, 3}, 0.01f,
                           0.05f, {}, {1, 1, 1, 1})};
  }
  return b.g;
}

TEST(ClearResizePadding, StreamedOrDispatchedResizeIsCopiedOn9x4x4) {
  for (const std::string then : {"add", "output"}) {
    const CompileResult r = testing::expect_rewrite_exact(resized(then), isa::kArch9x4x4, 13);
    ASSERT_EQ(errata_rewrites(r.ctx).size(), 1u) << then;
    EXPECT_EQ(errata_rewrites(r.ctx)[0].original, "resize");
  }
}

TEST(ClearResizePadding, ConvReadersAndWholeGroupsNeedNothing) {
  const CompileResult a = testing::expect_rewrite_exact(resized("conv"), isa::kArch9x4x4, 17);
  EXPECT_TRUE(errata_rewrites(a.ctx).empty());
  const CompileResult b = testing::expect_rewrite_exact(resized("add"), isa::kArch9x8x8, 19);
  EXPECT_TRUE(errata_rewrites(b.ctx).empty());  // 60 pixels: a multiple of 32/8
}

}  // namespace
}  // namespace npukit::compiler
