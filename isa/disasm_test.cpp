// Disassembler and assembler against a stream built by hand: the instruction packet holds one
// instruction of every v16 opcode, packed from the spec's bit table (isa/hand_vectors.inc).
#include "isa/disasm.h"
#include "common/scratch_dir.h"

#include "common/error.h"
#include "isa/assembler.h"
#include "isa/gml.h"
#include "isa/test_hex.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace npukit::isa {
namespace {

using json = nlohmann::ordered_json;
using testing::concat;
using testing::hand_vectors;
using ::testing::HasSubstr;
using testing::hex;
using ::testing::ThrowsMessage;

// [0] instruction packet: 12 instructions + zeroth = 416 = 0x1A0 bytes at DRAM 0;
// [428] data packet, 32 bytes at DRAM 0x1A0; [472] start.
Bytes hand_built_stream() {
  Bytes stream = hex("ffffffff 000001a0 00000000");
  const Bytes zeroth =
      hex("00000000 00000000 00000000 00000000 00000000 00000000 000001a0 00000020");
  stream.insert(stream.end(), zeroth.begin(), zeroth.end());
  for (const auto& v : hand_vectors()) {
    const Bytes inst = hex(v.hex);
    stream.insert(stream.end(), inst.begin(), inst.end());
  }
  return concat({stream, hex("ffffffff 00000020 000001a0"), Bytes(32, 0x5a),
                 hex("ffffffff 00000000 00000000")});
}

TEST(Disasm, DecodesEveryOpcodeOfAHandBuiltStream) {
  const json listing = disassemble(hand_built_stream());
  const auto& packets = listing["packets"];
  ASSERT_EQ(packets.size(), 3u);
  EXPECT_EQ(packets[0]["offset"], 0);
  EXPECT_EQ(packets[0]["address"], 0);
  EXPECT_EQ(packets[0]["size"], 416);
  EXPECT_EQ(packets[0]["kind"], "instructions");
  EXPECT_EQ(packets[0]["zeroth"]["ZerothStartAddress"], 32);
  EXPECT_EQ(packets[0]["zeroth"]["ZerothEndAddress"], 416);
  EXPECT_EQ(packets[1]["offset"], 428);
  EXPECT_EQ(packets[1]["address"], 0x1a0);
  EXPECT_EQ(packets[1]["size"], 32);
  EXPECT_EQ(packets[1]["kind"], "data");
  EXPECT_EQ(packets[2]["offset"], 472);
  EXPECT_EQ(packets[2]["kind"], "start");

  const auto& instructions = listing["instructions"];
  ASSERT_EQ(instructions.size(), hand_vectors().size());
  for (std::size_t i = 0; i < instructions.size(); ++i) {
    const auto& v = hand_vectors()[i];
    const auto& inst = instructions[i];
    SCOPED_TRACE(v.opcode);
    EXPECT_EQ(inst["address"], 32 * (i + 1));
    EXPECT_EQ(inst["opcode"], v.opcode);
    EXPECT_EQ(inst["fields"].size(), v.fields.size());
    for (const auto& [name, value] : v.fields) EXPECT_EQ(inst["fields"][name], value) << name;
    EXPECT_TRUE(inst["problems"].empty());
    EXPECT_EQ(inst["raw"], v.hex);
  }
  EXPECT_FALSE(listing_has_problems(listing));
  EXPECT_TRUE(listing["problems"].empty());
  // One of each opcode is not a runnable program: the structure check says so.
  EXPECT_FALSE(listing["warnings"].empty());
}

TEST(Disasm, DataPacketHexIsTheStreamBytes) {
  const json listing = disassemble(hand_built_stream());
  std::string expected;
  for (int i = 0; i < 32; ++i) expected += "5a";
  EXPECT_EQ(listing["packets"][1]["hex"], expected);
  const json no_data = disassemble(hand_built_stream(), {.include_data = false});
  EXPECT_FALSE(no_data["packets"][1].contains("hex"));
}

TEST(Disasm, FlagsInvalidInstructionsWithTheirByteOffset) {
  Bytes stream = hand_built_stream();
  stream[12 + 3 * 32 + 31] = (stream[12 + 3 * 32 + 31] & 0xF0) | 0xC;  // instruction 3 -> 0xC
  stream[12 + 5 * 32] |= 0x80;                                         // instruction 5 bit 255
  const json listing = disassemble(stream);
  const auto& inst3 = listing["instructions"][2];
  EXPECT_TRUE(inst3["opcode"].is_null());
  ASSERT_EQ(inst3["problems"].size(), 1u);
  EXPECT_THAT(inst3["problems"][0].get<std::string>(),
              HasSubstr("byte offset 108: unknown opcode 0xC"));
  const auto& inst5 = listing["instructions"][4];
  EXPECT_EQ(inst5["opcode"], hand_vectors()[4].opcode);
  EXPECT_THAT(inst5["problems"][0].get<std::string>(), HasSubstr("byte offset 172"));
  EXPECT_THAT(inst5["problems"][0].get<std::string>(), HasSubstr("reserved bits"));
  // Instruction 5 is START (bits [27:0] used): bit 255 is reserved bit 227 -> 0x08 << 224.
  EXPECT_EQ(inst5["reserved_bits"], "08" + std::string(56, '0'));
  EXPECT_TRUE(listing_has_problems(listing));
  const std::string text = render_listing(listing);
  EXPECT_THAT(text, HasSubstr("!! byte offset 108: unknown opcode 0xC"));
}

TEST(Disasm, FlagsAZerothRangeThatDisagreesWithThePacket) {
  Bytes stream = hand_built_stream();
  stream[12 + 27] = 0x80;  // ZerothEndAddress 0x180 instead of 0x1A0
  const json listing = disassemble(stream);
  ASSERT_EQ(listing["problems"].size(), 1u);
  EXPECT_THAT(
      listing["problems"][0].get<std::string>(),
      HasSubstr(
          "byte offset 12: ZerothEndAddress is 384 but the instruction packet ends at DRAM 416"));
  EXPECT_TRUE(listing_has_problems(listing));
}

TEST(Disasm, MalformedStreamsThrowWithTheByteOffset) {
  const Bytes stream = hand_built_stream();
  EXPECT_THAT([&] { (void)disassemble(ByteSpan(stream).first(stream.size() - 1)); },
              ThrowsMessage<Error>(HasSubstr("truncated DWP header at byte offset 472")));
  EXPECT_THAT([&] { (void)disassemble(ByteSpan(stream).first(400)); },
              ThrowsMessage<Error>(HasSubstr("packet at byte offset 0")));
  Bytes corrupt = stream;
  corrupt[428] = 0x00;
  EXPECT_THAT([&] { (void)disassemble(corrupt); },
              ThrowsMessage<Error>(HasSubstr("bad DWP start-of-packet at byte offset 428")));
}

TEST(Disasm, TextListingNamesEveryField) {
  const std::string text = render_listing(disassemble(hand_built_stream()));
  EXPECT_THAT(text, HasSubstr("packet 0 at byte offset 0: instructions 416 bytes"));
  EXPECT_THAT(text, HasSubstr("ZEROTH      ZerothStartAddress=32 ZerothEndAddress=416"));
  EXPECT_THAT(text, HasSubstr("packet 2 at byte offset 472: START"));
  for (const auto& v : hand_vectors()) {
    EXPECT_THAT(text, HasSubstr(std::string(v.opcode) + " "));
    for (const auto& [name, value] : v.fields)
      EXPECT_THAT(text, HasSubstr(std::string(name) + "="));
  }
}

TEST(Disasm, NamesWhatADataPacketHolds) {
  GmlProgram program;
  Instruction conv(Opcode::CONV);
  Instruction start(Opcode::START);
  start.set(Field::START_LayerNumber, 1).set(Field::START_TotalLayers, 1);
  program.instructions = {conv, Instruction(Opcode::OutputBlock), start};
  program.blobs = {{0x80, Bytes(32, 1)}, {0xA0, Bytes(32, 2)}};
  program.instructions[0]
      .set(Field::CONV_WeightStartAddress, 0x80)
      .set(Field::CONV_WeightEndAddress, 0xC0);
  const json listing = disassemble(encode_gml(program));
  ASSERT_TRUE(listing["packets"][1].contains("holds"));
  EXPECT_EQ(listing["packets"][1]["holds"][0], "CONV.WeightStartAddress of instruction 1");
  EXPECT_FALSE(listing["packets"][2].contains("holds"));
  // WeightEnd - WeightStart = 64 but the packet at 0x80 holds 32: warned.
  bool warned = false;
  for (const auto& w : listing["warnings"])
    warned = warned || w.get<std::string>().find("holds 32 bytes but instruction 1 reads") !=
                           std::string::npos;
  EXPECT_TRUE(warned);
}

// --------------------------------------------------------------------------------------- asm

TEST(Asm, DisassemblyAssemblesBackToTheSameBytes) {
  const Bytes stream = hand_built_stream();
  const Assembled a = assemble(disassemble(stream), ".");
  EXPECT_EQ(a.bytes, stream);
  // Also through text JSON, as the CLI does.
  const Assembled b = assemble(json::parse(disassemble(stream).dump()), ".");
  EXPECT_EQ(b.bytes, stream);
}

TEST(Asm, InvalidInstructionsRoundTripThroughRawAndReservedBits) {
  Bytes stream = hand_built_stream();
  stream[12 + 3 * 32 + 31] = (stream[12 + 3 * 32 + 31] & 0xF0) | 0xC;
  stream[12 + 5 * 32] |= 0x80;
  stream[12 + 27] = 0x80;
  const Assembled a = assemble(disassemble(stream), ".");
  EXPECT_EQ(a.bytes, stream);
  EXPECT_FALSE(a.warnings.empty());
}

TEST(Asm, HandWrittenProgram) {
  const json program = json::parse(R"({
    "instructions": [
      {"opcode": "CONV", "fields": {"IW": 8, "IH": "0x8"}},
      {"opcode": "START", "fields": {"LayerNumber": 1, "TotalLayers": 1}}
    ],
    "packets": [
      {"kind": "instructions"},
      {"kind": "data", "address": 96, "int8": [-1, 2, 255], "pad": true},
      {"kind": "data", "address": "0x80", "int32": [-2, 1], "pad": true},
      {"kind": "data", "address": 160, "base64": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="},
      {"kind": "start"}
    ]})");
  const Assembled a = assemble(program, ".");
  const Bytes expected =
      concat({hex("ffffffff 00000060 00000000"),
              hex("00000000 00000000 00000000 00000000 00000000 00000000 00000060 00000020"),
              hex("00000000 00000000 00000000 00000000 00000000 00000000 00000000 00020080"),
              hex("00000000 00000000 00000000 00000000 00000000 00000000 00000000 0001001f"),
              hex("ffffffff 00000020 00000060"), hex("ff02ff"), Bytes(29, 0),
              hex("ffffffff 00000020 00000080"), hex("fffffffe 00000001"), Bytes(24, 0),
              hex("ffffffff 00000020 000000a0"),
              hex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"),
              hex("ffffffff 00000000 00000000")});
  EXPECT_EQ(a.bytes, expected);
  EXPECT_TRUE(a.warnings.empty()) << a.warnings.front();
}

void expect_asm_error(const std::string& text, const std::string& a, const std::string& b = "") {
  try {
    (void)assemble(json::parse(text), ".");
    ADD_FAILURE() << "no error for " << a;
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(a));
    EXPECT_THAT(e.what(), HasSubstr(b));
  }
}

TEST(Asm, ErrorsNameTheJsonLocation) {
  expect_asm_error(R"({"instructions": [{"opcode": "CONV", "fields": {"IW": 1024}}]})",
                   "instructions[0].fields.IW",
                   "CONV.IW: value 1024 does not fit the 10-bit field");
  expect_asm_error(
      R"({"instructions": [{"opcode": "START"}, {"opcode": "CONV", "fields": {"XX": 1}}]})",
      "instructions[1].fields.XX: CONV has no field \"XX\"", "IW, IH");
  expect_asm_error(R"({"instructions": [{"opcode": "CONVOLUTION"}]})",
                   "instructions[0].opcode: unknown opcode \"CONVOLUTION\"", "TailBlock");
  expect_asm_error(R"({"instructions": [{"opcode": "CONV", "fields": {"IW": "eight"}}]})",
                   "instructions[0].fields.IW: expected an integer");
  expect_asm_error(R"({"instructions": [{"raw": "00"}]})", "instructions[0].raw: 1 bytes");
  expect_asm_error(R"({"instructions": [{"opcode": "START", "adress": 32}]})",
                   "instructions[0]: unknown key \"adress\"");
  expect_asm_error(R"({"instructions": [{"opcode": "START", "address": 64}]})",
                   "instructions[0].address: 64 but instruction 1 sits at DRAM 32");
  expect_asm_error(R"({"instructions": [{"opcode": "START"}],
                      "packets": [{"kind": "instructions"}, {"kind": "data", "address": 64, "hex": "0102"}]})",
                   "packets[1]", "set \"pad\": true");
  expect_asm_error(R"({"instructions": [{"opcode": "START"}],
                      "packets": [{"kind": "instructions"}, {"kind": "data", "address": 64, "hex": "0g"}]})",
                   "packets[1].hex: 'g' at character 1 is not a hex digit");
  expect_asm_error(R"({"instructions": [{"opcode": "START"}],
                      "packets": [{"kind": "instructions"}, {"kind": "data", "address": 64, "int8": [300]}]})",
                   "packets[1].int8[0]: 300 does not fit a byte");
  expect_asm_error(
      R"({"instructions": [{"opcode": "START"}], "packets": [{"kind": "data", "address": 64, "int8": [1], "pad": true}]})",
      "no {\"kind\": \"instructions\"} packet");
  expect_asm_error(R"({"instructions": [{"opcode": "START"}], "packets": [{"kind": "blob"}]})",
                   "packets[0].kind: \"blob\"");
  expect_asm_error(R"({"arch": "9,8,4"})", "unsupported systolic-array configuration");
  expect_asm_error(R"({})", "nothing to assemble");
}

TEST(Asm, DataFromAFileNextToTheProgram) {
  const npukit::testing::ScratchDir scratch("isa_asm_test");
  const auto& dir = scratch.path();
  {
    std::ofstream(dir / "w.bin", std::ios::binary).write("0123456789abcdef0123456789abcdef", 32);
    std::ofstream(dir / "p.json") << R"({"instructions": [{"opcode": "START"}],
      "packets": [{"kind": "instructions"}, {"kind": "data", "address": 64, "file": "w.bin"}]})";
  }
  const Assembled a = assemble_file(dir / "p.json");
  const auto packets = decode_gml(a.bytes);
  ASSERT_EQ(packets.blobs.size(), 1u);
  EXPECT_EQ(std::string(packets.blobs[0].data.begin(), packets.blobs[0].data.end()),
            "0123456789abcdef0123456789abcdef");
  std::ofstream(dir / "bad.json") << "{\"instructions\": [";
  EXPECT_THAT([&] { (void)assemble_file(dir / "bad.json"); },
              ThrowsMessage<Error>(HasSubstr("bad.json: not valid JSON")));
}

}  // namespace
}  // namespace npukit::isa
