// ISA v16 encoder/decoder against instructions packed independently from the spec's bit table.
#include "isa/isa.h"

#include "common/error.h"
#include "isa/test_hex.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <set>

namespace npukit::isa {
namespace {

using testing::hand_vectors;
using ::testing::HasSubstr;
using testing::hex;

std::span<const std::uint8_t, kInstructionBytes> as_inst(const Bytes& b) {
  EXPECT_EQ(b.size(), kInstructionBytes);
  return std::span<const std::uint8_t, kInstructionBytes>(b.data(), kInstructionBytes);
}

TEST(Isa, HandVectorsCoverEveryV16Opcode) {
  std::set<std::string> in_vectors, in_table;
  for (const auto& v : hand_vectors()) in_vectors.insert(v.opcode);
  for (const auto& op : opcodes()) in_table.insert(std::string(op.name));
  EXPECT_EQ(in_vectors, in_table);
  EXPECT_EQ(in_table.size(), 12u);  // DECISIONS.md 1: 12 opcodes plus the zeroth instruction
}

TEST(Isa, EveryOpcodeEncodesToTheHandPackedBytes) {
  for (const auto& v : hand_vectors()) {
    SCOPED_TRACE(v.opcode);
    const OpcodeInfo* op = find_opcode(v.opcode);
    ASSERT_NE(op, nullptr);
    Instruction inst(op->opcode);
    ASSERT_EQ(v.fields.size(), op->fields.size());
    for (const auto& [name, value] : v.fields) {
      const FieldInfo* f = find_field(op->opcode, name);
      ASSERT_NE(f, nullptr) << name;
      inst.set(f->id, value);
    }
    const auto bytes = inst.encode();
    EXPECT_EQ(Bytes(bytes.begin(), bytes.end()), hex(v.hex));
  }
}

TEST(Isa, EveryOpcodeDecodesTheHandPackedBytes) {
  for (const auto& v : hand_vectors()) {
    SCOPED_TRACE(v.opcode);
    const Bytes bytes = hex(v.hex);
    const Decoded d = decode(as_inst(bytes));
    ASSERT_TRUE(d.ok()) << (d.problems.empty() ? "" : d.problems.front());
    EXPECT_EQ(name(d.instruction->opcode()), v.opcode);
    for (const auto& [field, value] : v.fields)
      EXPECT_EQ(d.instruction->get(find_field(d.instruction->opcode(), field)->id), value) << field;
    EXPECT_EQ(decode_strict(as_inst(bytes), "test"), *d.instruction);
  }
}

// Worked by hand from the table: START LayerNumber [15:4] = 1, TotalLayers [27:16] = 1,
// opcode [3:0] = 0xF -> 0x0001001F in the low word; byte 31 holds bits [7:0].
TEST(Isa, StartWorkedByHand) {
  Instruction start(Opcode::START);
  start.set(Field::START_LayerNumber, 1).set(Field::START_TotalLayers, 1);
  const auto bytes = start.encode();
  EXPECT_EQ(Bytes(bytes.begin(), bytes.end()),
            hex("00000000 00000000 00000000 00000000 00000000 00000000 00000000 0001001f"));
}

// CONV IW [13:4] = 224 = 0xE0 -> 0xE00; IH [23:14] = 224 -> 0xE0 << 14 = 0x380000.
TEST(Isa, ConvImageSizeWorkedByHand) {
  Instruction conv(Opcode::CONV);
  conv.set(Field::CONV_IW, 224).set(Field::CONV_IH, 224);
  const auto bytes = conv.encode();
  EXPECT_EQ(Bytes(bytes.begin(), bytes.end()),
            hex("00000000 00000000 00000000 00000000 00000000 00000000 00000000 00380e00"));
}

TEST(Isa, ZerothWorkedByHand) {
  // Start [31:0] = 32, End [63:32] = 160: stream bytes 24..27 = End, 28..31 = Start.
  const Bytes expected =
      hex("00000000 00000000 00000000 00000000 00000000 00000000 000000a0 00000020");
  const auto bytes = Zeroth{32, 160}.encode();
  EXPECT_EQ(Bytes(bytes.begin(), bytes.end()), expected);
  const auto z = Zeroth::decode(as_inst(expected));
  EXPECT_EQ(z.start, 32u);
  EXPECT_EQ(z.end, 160u);
}

TEST(Isa, ValueTooWideForFieldNamesInstructionAndField) {
  Instruction conv(Opcode::CONV);
  try {
    conv.set(Field::CONV_IW, 1024);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("CONV.IW"));
    EXPECT_THAT(e.what(), HasSubstr("1024"));
    EXPECT_THAT(e.what(), HasSubstr("10-bit"));
  }
  EXPECT_NO_THROW(conv.set(Field::CONV_IW, 1023));
  Instruction tail(Opcode::TailBlock);
  EXPECT_THAT([&] { tail.set_signed(Field::TailBlock_QuantScale, 40000); },
              ::testing::ThrowsMessage<Error>(HasSubstr("TailBlock.QuantScale")));
  EXPECT_THAT([&] { tail.set_signed(Field::TailBlock_QuantScale, -32769); },
              ::testing::ThrowsMessage<Error>(HasSubstr("TailBlock.QuantScale")));
  EXPECT_THAT([&] { tail.set(Field::TailBlock_ActEn, 2); },
              ::testing::ThrowsMessage<Error>(HasSubstr("TailBlock.ActEn")));
}

TEST(Isa, FieldOfAnotherOpcodeIsRejected) {
  Instruction conv(Opcode::CONV);
  EXPECT_THAT([&] { conv.set(Field::POOL_IW, 1); },
              ::testing::ThrowsMessage<Error>(HasSubstr("POOL.IW")));
  EXPECT_THROW((void)conv.get(Field::TailBlock_QuantScale), Error);
}

TEST(Isa, SignedFieldsAreTwosComplementWithinTheirWidth) {
  Instruction tail(Opcode::TailBlock);
  tail.set_signed(Field::TailBlock_QuantScale, -3);
  EXPECT_EQ(tail.get(Field::TailBlock_QuantScale), 0xFFFDu);
  EXPECT_EQ(tail.get_signed(Field::TailBlock_QuantScale), -3);
  // Neighbours untouched.
  EXPECT_EQ(tail.get(Field::TailBlock_QuantEn), 0u);
  EXPECT_EQ(tail.get(Field::TailBlock_QuantShift), 0u);
  tail.set_signed(Field::TailBlock_QuantScale, 32767);
  EXPECT_EQ(tail.get_signed(Field::TailBlock_QuantScale), 32767);
}

TEST(Isa, UnknownOpcodesAreReported) {
  for (int code : {0xB, 0xC, 0xD, 0xE}) {
    Bytes bytes(kInstructionBytes, 0);
    bytes[31] = static_cast<std::uint8_t>(code);
    const Decoded d = decode(as_inst(bytes));
    EXPECT_FALSE(d.ok());
    EXPECT_FALSE(d.instruction.has_value());
    ASSERT_EQ(d.problems.size(), 1u);
    EXPECT_THAT(d.problems[0], HasSubstr(fmt::format("unknown opcode 0x{:X}", code)));
    EXPECT_THAT([&] { (void)decode_strict(as_inst(bytes), "instruction 7 at DRAM 0xE0"); },
                ::testing::ThrowsMessage<Error>(HasSubstr("instruction 7 at DRAM 0xE0")));
  }
}

TEST(Isa, NonZeroReservedBitsAreReported) {
  // START uses bits [27:0]; byte 28 holds bits [31:24], so 0x10 there sets reserved bit 28.
  Bytes start = hex("00000000 00000000 00000000 00000000 00000000 00000000 00000000 1001001f");
  Decoded d = decode(as_inst(start));
  ASSERT_EQ(d.problems.size(), 1u);
  EXPECT_THAT(d.problems[0], HasSubstr("reserved bits [255:28]"));
  EXPECT_THAT(d.problems[0], HasSubstr("highest set bit 28"));
  EXPECT_TRUE(d.instruction.has_value());  // still decoded, so a listing can show the fields
  // The top bit of every opcode's word is reserved (no v16 instruction uses bit 255).
  for (const auto& v : hand_vectors()) {
    Bytes bytes = hex(v.hex);
    bytes[0] |= 0x80;
    const Decoded r = decode(as_inst(bytes));
    ASSERT_EQ(r.problems.size(), 1u) << v.opcode;
    EXPECT_THAT(r.problems[0], HasSubstr("highest set bit 255"));
  }
}

// Plain bit-at-a-time reference for the word-wise extract/deposit.
std::uint64_t naive_extract(const Bits256& bits, unsigned lo, unsigned width) {
  std::uint64_t v = 0;
  for (unsigned i = 0; i < width; ++i) v |= ((bits[(lo + i) / 64] >> ((lo + i) % 64)) & 1) << i;
  return v;
}

TEST(Isa, BitExtractAndDepositAgreeWithABitwiseReference) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 20000; ++trial) {
    Bits256 bits{rng(), rng(), rng(), rng()};
    const unsigned width = 1 + static_cast<unsigned>(rng() % 64);
    const unsigned lo = static_cast<unsigned>(rng() % (257 - width));
    ASSERT_EQ(extract_bits(bits, lo, width), naive_extract(bits, lo, width));
    const std::uint64_t value = rng();
    Bits256 expected = bits;
    for (unsigned i = 0; i < width; ++i) {
      const unsigned b = lo + i;
      expected[b / 64] =
          (expected[b / 64] & ~(1ull << (b % 64))) | (((value >> i) & 1) << (b % 64));
    }
    deposit_bits(bits, lo, width, value);
    ASSERT_EQ(bits, expected) << "lo " << lo << " width " << width;
  }
}

TEST(Isa, NamesAndLookups) {
  EXPECT_EQ(qualified_name(Field::OutputBlock_DispatchID), "OutputBlock.DispatchID");
  EXPECT_EQ(find_opcode(std::uint8_t{0xA})->name, "RESIZE");
  EXPECT_EQ(find_opcode(std::uint8_t{0xB}), nullptr);
  EXPECT_EQ(find_opcode("EltWise")->opcode, Opcode::EltWise);
  EXPECT_EQ(find_field(Opcode::FC, "Vec2MatCols")->width, 16);
  EXPECT_EQ(find_field(Opcode::FC, "IW"), nullptr);
  EXPECT_TRUE(is_megablock(Opcode::POOL));  // gati.md 3.2: POOL counts as a megablock
  EXPECT_FALSE(is_megablock(Opcode::OutputBlock));
  EXPECT_FALSE(is_megablock(Opcode::START));
}

}  // namespace
}  // namespace npukit::isa
