// compiler/geometry.cpp must reject malformed window attributes with a message naming the layer,
// whatever pass produced the node (compile_fuzz once aborted on a pool `strides` of one entry).
#include "compiler/geometry.h"

#include "common/error.h"
#include "compiler/test_graphs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace npukit::compiler {
namespace {

using ::testing::HasSubstr;

std::string pool_error(std::vector<std::int64_t> kernel, std::vector<std::int64_t> strides,
                       std::vector<std::int64_t> pads) {
  testing::GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 4, 8, 8});
  auto& n = b.node("GatiPool", "npukit.gati", {"x"}, {"y"}, "p0");
  n.attributes["mode"] = std::string("max");
  n.attributes["kernel_shape"] = kernel;
  n.attributes["strides"] = strides;
  n.attributes["pads"] = pads;
  try {
    pool_geometry(b.g, b.g.nodes.back());
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Geometry, PoolWithMalformedStridesOrPadsIsAnErrorNotACrash) {
  EXPECT_THAT(pool_error({2, 2}, {2}, {0, 0, 0, 0}), HasSubstr("'p0': strides must have 2"));
  EXPECT_THAT(pool_error({2, 2}, {2, 2}, {0, 0}), HasSubstr("pads 4 entries"));
  EXPECT_THAT(pool_error({2, 2}, {0, 2}, {0, 0, 0, 0}), HasSubstr(">= 1"));
  EXPECT_THAT(pool_error({0, 2}, {1, 1}, {0, 0, 0, 0}), HasSubstr(">= 1"));
  EXPECT_EQ(pool_error({2, 2}, {2, 2}, {0, 0, 0, 0}), "(no error)");
}

}  // namespace
}  // namespace npukit::compiler
