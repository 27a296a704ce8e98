// --dump-after: the graph as a named pass leaves it, and a clear error for an unknown pass name.
#include "common/error.h"
#include "compiler/compiler.h"
#include "compiler/test_graphs.h"

#include <gtest/gtest.h>

#include <sstream>

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;

ir::Graph conv_relu() {
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 8, 4, 4});
  auto c = b.qconv("conv", "x", 0.02f, std::vector<std::int8_t>(8 * 8 * 9, 1), {8, 8, 3, 3}, 0.01f,
                   0.05f, {}, {1, 1, 1, 1});
  b.g.outputs = {b.relu("relu", c)};
  return b.g;
}

TEST(DumpAfter, PrintsTheGraphAfterTheNamedPasses) {
  std::ostringstream out;
  CompileOptions opt;
  opt.dump_after = {"lower_to_gati", "fuse_tail"};
  opt.dump_to = &out;
  compile(conv_relu(), opt);
  const std::string s = out.str();
  const auto a = s.find("; after lower_to_gati");
  const auto b = s.find("; after fuse_tail");
  ASSERT_NE(a, std::string::npos) << s;
  ASSERT_NE(b, std::string::npos) << s;
  EXPECT_LT(a, b);
  // After lowering: a GatiConv and the ReLU as an EltWise; after fusion only the conv, with the
  // ReLU in its tail, writing the ReLU's output.
  const std::string lowered = s.substr(a, b - a), fused = s.substr(b);
  EXPECT_NE(lowered.find("conv = npukit.gati.GatiConv(x:int8[1, 8, 4, 4]"), std::string::npos)
      << lowered;
  EXPECT_NE(lowered.find("relu = npukit.gati.GatiEltwise("), std::string::npos) << lowered;
  EXPECT_EQ(fused.find("GatiEltwise"), std::string::npos) << fused;
  EXPECT_NE(fused.find("act=\"relu\""), std::string::npos) << fused;
  EXPECT_NE(fused.find("[device]"), std::string::npos) << fused;
  EXPECT_EQ(s.find("; after check_limits"), std::string::npos);
}

TEST(DumpAfter, UnknownPassNamesTheValidOnes) {
  CompileOptions opt;
  opt.dump_after = {"lower"};
  try {
    compile(conv_relu(), opt);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--dump-after 'lower'"), std::string::npos) << m;
    EXPECT_NE(m.find("quant_params"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace npukit::compiler
