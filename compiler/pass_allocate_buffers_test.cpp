// allocate_buffers and assign_addresses: live tensors never overlap, dead ones are reused, the
// map is 32-byte aligned and in the order of gati.md 4/6.
#include "compiler/backend.h"
#include "compiler/compiler.h"
#include "compiler/test_graphs.h"

#include <gtest/gtest.h>

namespace npukit::compiler {
namespace {

using testing::GraphBuilder;

TEST(AllocateBuffers, ChainReusesDeadBuffersAndKeepsLiveOnesApart) {
  // x -> c1 -> c2 -> c3 (+ c1 output reused by an add at the end: it stays alive).
  GraphBuilder b;
  b.input("x", ir::DType::kInt8, {1, 8, 8, 8});
  auto c1 = b.qconv("c1", "x", 0.1f, std::vector<std::int8_t>(8 * 8 * 9, 1), {8, 8, 3, 3}, 0.01f,
                    0.1f, {}, {1, 1, 1, 1});
  auto c2 = b.qconv("c2", c1, 0.1f, std::vector<std::int8_t>(8 * 8 * 9, 1), {8, 8, 3, 3}, 0.01f,
                    0.1f, {}, {1, 1, 1, 1});
  auto c3 = b.qconv("c3", c2, 0.1f, std::vector<std::int8_t>(8 * 8 * 9, 1), {8, 8, 3, 3}, 0.01f,
                    0.1f, {}, {1, 1, 1, 1});
  b.value("sum", ir::DType::kInt8, {1, 8, 8, 8});
  b.node("QLinearAdd", "com.microsoft",
         {c1, "c1_ys", "c1_yz", c3, "c3_ys", "c3_yz", "c1_ys", "c1_yz"}, {"sum"}, "add");
  b.g.outputs = {"sum"};
  const CompileResult r = compile(b.g, {});
  const auto& t = r.program.tensors;
  // Every tensor is 8 channels x 64 pixels = 512 bytes.
  for (const auto& [name, d] : t) {
    EXPECT_EQ(d.bytes, 512u) << name;
    EXPECT_EQ(d.address % 32, 0u) << name;
  }
  auto overlap = [&](const std::string& a, const std::string& b2) {
    const auto &p = t.at(a), &q = t.at(b2);
    return p.address < q.address + q.bytes && q.address < p.address + p.bytes;
  };
  EXPECT_FALSE(overlap("x", c1));
  EXPECT_FALSE(overlap(c1, c2));
  EXPECT_FALSE(overlap(c1, c3));  // c1 is read by the add after c3
  EXPECT_FALSE(overlap(c2, c3));
  EXPECT_FALSE(overlap(c3, "sum"));
  EXPECT_FALSE(overlap(c1, "sum"));
  EXPECT_TRUE(overlap("x", c2));  // x is dead after c1: its buffer is reused
  EXPECT_EQ(r.program.arena_bytes, 3u * 512);
  // The map: instructions, then weights/biases in layer order, then the arena.
  std::uint64_t cursor = isa::instruction_region_bytes(r.program.instructions.size());
  for (const auto& blob : r.program.blobs) {
    EXPECT_EQ(blob.address, cursor) << blob.layer << " " << blob.what;
    cursor += blob.bytes.size();
  }
  EXPECT_EQ(r.program.arena_address, cursor);
}

}  // namespace
}  // namespace npukit::compiler
