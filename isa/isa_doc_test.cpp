// docs/isa-v16.md is generated; this keeps the committed file and the generator identical.
#include "isa/isa_doc.h"

#include "common/error.h"
#include "isa/isa.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace npukit::isa {
namespace {

TEST(IsaDoc, CommittedMarkdownEqualsTheGeneratedOne) {
  std::ifstream in(std::string(NPUKIT_SOURCE_DIR) + "/docs/isa-v16.md", std::ios::binary);
  ASSERT_TRUE(in) << "docs/isa-v16.md is missing";
  std::stringstream committed;
  committed << in.rdbuf();
  EXPECT_EQ(committed.str(), isa_markdown())
      << "docs/isa-v16.md is stale: regenerate it with `npukit isa --markdown > docs/isa-v16.md`";
}

TEST(IsaDoc, EveryFieldAppearsWithItsBitRange) {
  const std::string md = isa_markdown();
  EXPECT_THAT(md, ::testing::HasSubstr("| IW | 13:4 | 10 |"));
  EXPECT_THAT(md, ::testing::HasSubstr("| DispatchID | 190:159 | 32 |"));
  EXPECT_THAT(md, ::testing::HasSubstr("| ZerothEndAddress | 63:32 | 32 |"));
  std::size_t rows = 0;
  for (const auto& op : opcodes()) rows += op.fields.size();
  EXPECT_EQ(rows, 131u);  // every field of the v16 table (opcode nibbles not counted)
  const std::string text = isa_text("POOL");
  EXPECT_THAT(text, ::testing::HasSubstr("[102:100]"));
  EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr("CONV")));
  EXPECT_THROW((void)isa_text("BOGUS"), Error);
}

}  // namespace
}  // namespace npukit::isa
