// DWP, GML, META, dispatch frames and SaArch against byte strings written out by hand from
// gati.md 4 and 5 (not produced by the writers under test).
#include "common/error.h"
#include "isa/arch.h"
#include "isa/dispatch.h"
#include "isa/dwp.h"
#include "isa/gml.h"
#include "isa/meta.h"
#include "isa/test_hex.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace npukit::isa {
namespace {

using testing::concat;
using ::testing::HasSubstr;
using testing::hex;
using ::testing::ThrowsMessage;

const Bytes kPayload32 = hex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");

// ---------------------------------------------------------------------------------------- DWP

TEST(Dwp, ParsesADataPacketAndTheStartCommand) {
  const Bytes stream =
      concat({hex("ffffffff 00000020 00000040"), kPayload32, hex("ffffffff 00000000 00000000")});
  const auto packets = parse_dwp_stream(stream);
  ASSERT_EQ(packets.size(), 2u);
  EXPECT_EQ(packets[0].offset, 0u);
  EXPECT_EQ(packets[0].address, 0x40u);
  EXPECT_EQ(packets[0].size, 32u);
  EXPECT_FALSE(packets[0].is_start());
  EXPECT_EQ(packets[0].payload.data(), stream.data() + 12);  // a view, not a copy
  EXPECT_EQ(Bytes(packets[0].payload.begin(), packets[0].payload.end()), kPayload32);
  EXPECT_EQ(packets[1].offset, 44u);
  EXPECT_TRUE(packets[1].is_start());
  EXPECT_TRUE(dwp_warnings(packets).empty());
  EXPECT_TRUE(parse_dwp_stream({}).empty());
}

TEST(Dwp, WriterProducesTheSpecBytes) {
  Bytes out;
  append_dwp_packet(out, 0x40, kPayload32);
  append_dwp_start(out);
  EXPECT_EQ(out, concat({hex("ffffffff 00000020 00000040"), kPayload32,
                         hex("ffffffff 00000000 00000000")}));
}

TEST(Dwp, WriterRejectsWhatTheBoardWouldNot) {
  Bytes out;
  EXPECT_THAT([&] { append_dwp_packet(out, 0x40, {}); },
              ThrowsMessage<Error>(HasSubstr("start command")));
  EXPECT_THAT([&] { append_dwp_packet(out, 0x40, ByteSpan(kPayload32).first(20)); },
              ThrowsMessage<Error>(HasSubstr("not a multiple of 32")));
  EXPECT_THAT([&] { append_dwp_packet(out, 0x44, kPayload32); },
              ThrowsMessage<Error>(HasSubstr("not 32-byte aligned")));
  EXPECT_THAT([&] { append_dwp_packet(out, 0xFFFFFFE0u + 0, Bytes(64, 0)); },
              ThrowsMessage<Error>(HasSubstr("4 GiB")));
  EXPECT_TRUE(out.empty());
}

void expect_parse_error(const Bytes& stream, const std::string& a, const std::string& b) {
  try {
    (void)parse_dwp_stream(stream);
    ADD_FAILURE() << "no error for " << a;
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(a));
    EXPECT_THAT(e.what(), HasSubstr(b));
  }
}

TEST(Dwp, MalformedStreamsAreRejectedWithTheirByteOffset) {
  const Bytes good = concat({hex("ffffffff 00000020 00000040"), kPayload32});  // 44 bytes
  expect_parse_error(hex("ffffffff 0000"), "truncated DWP header at byte offset 0", "6 byte(s)");
  expect_parse_error(concat({good, hex("ffffffff 00000020")}),
                     "truncated DWP header at byte offset 44", "8 byte(s)");
  expect_parse_error(concat({good, hex("fffffffe 00000020 00000040"), kPayload32}),
                     "bad DWP start-of-packet at byte offset 44", "0xFFFFFFFE");
  expect_parse_error(concat({good, hex("ffffffff 00000021 00000040")}), "byte offset 44",
                     "not a multiple of 4");
  expect_parse_error(concat({good, hex("ffffffff 00000024 00000040"), Bytes(36, 0)}),
                     "byte offset 44", "not a multiple of 32");
  expect_parse_error(concat({good, hex("ffffffff 00000020 00000050"), kPayload32}),
                     "byte offset 44", "0x50 is not 32-byte aligned");
  expect_parse_error(concat({good, hex("ffffffff 00000040 00000040"), kPayload32}),
                     "packet at byte offset 44", "declares 64 bytes, only 32 remain");
  expect_parse_error(hex("ffffffff 00000040 ffffffe0"), "byte offset 0", "4 GiB");
  // A payload one byte shorter than DS swallows the next SOP's first byte: the error points at
  // the misread header.
  Bytes short_payload = concat({hex("ffffffff 00000020 00000040"), Bytes(31, 0),
                                hex("ffffffff 00000020 00000080"), kPayload32});
  expect_parse_error(short_payload, "bad DWP start-of-packet at byte offset 44", "0xFFFFFF00");
}

TEST(Dwp, WarnsAboutStartsTheRtlIgnoresAndOverlaps) {
  const Bytes stream = concat({hex("ffffffff 00000000 00000000"),  // bare start first
                               hex("ffffffff 00000020 00000040"), kPayload32,
                               hex("ffffffff 00000020 00000040"), kPayload32,  // same address
                               hex("ffffffff 00000000 00000123")});            // address word set
  const auto warnings = dwp_warnings(parse_dwp_stream(stream));
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_THAT(warnings[0], HasSubstr("byte offset 0 does not follow a data packet"));
  EXPECT_THAT(warnings[1], HasSubstr("byte offset 100 has address word 0x123"));
  EXPECT_THAT(warnings[2], HasSubstr("byte offsets 12 and 56 overlap"));
}

// ---------------------------------------------------------------------------------------- GML

// Hand-built: instruction packet (3 words: zeroth {32, 96}, START(1,1), a CONV) + one blob.
const Bytes kStart11 =
    hex("00000000 00000000 00000000 00000000 00000000 00000000 00000000 0001001f");
// CONV IW = 8 [13:4], IH = 8 [23:14]: 0x80 | 0x20000 = 0x20080.
const Bytes kConv8x8 =
    hex("00000000 00000000 00000000 00000000 00000000 00000000 00000000 00020080");
const Bytes kGml = concat({hex("ffffffff 00000060 00000000"),
                           hex("00000000 00000000 00000000 00000000 00000000 00000000 "
                               "00000060 00000020"),
                           kConv8x8, kStart11, hex("ffffffff 00000020 00000060"), kPayload32});

TEST(Gml, DecodesAHandBuiltFile) {
  const GmlProgram program = decode_gml(kGml);
  ASSERT_EQ(program.instructions.size(), 2u);
  EXPECT_EQ(program.instructions[0].opcode(), Opcode::CONV);
  EXPECT_EQ(program.instructions[0].get(Field::CONV_IW), 8u);
  EXPECT_EQ(program.instructions[0].get(Field::CONV_IH), 8u);
  EXPECT_EQ(program.instructions[1].opcode(), Opcode::START);
  EXPECT_EQ(program.instructions[1].get(Field::START_LayerNumber), 1u);
  EXPECT_EQ(program.instructions[1].get(Field::START_TotalLayers), 1u);
  ASSERT_EQ(program.blobs.size(), 1u);
  EXPECT_EQ(program.blobs[0].address, 0x60u);
  EXPECT_EQ(program.blobs[0].data, kPayload32);
}

TEST(Gml, EncodesTheSameBytes) {
  GmlProgram program;
  Instruction conv(Opcode::CONV);
  conv.set(Field::CONV_IW, 8).set(Field::CONV_IH, 8);
  Instruction start(Opcode::START);
  start.set(Field::START_LayerNumber, 1).set(Field::START_TotalLayers, 1);
  program.instructions = {conv, start};
  program.blobs = {{0x60, kPayload32}};
  EXPECT_EQ(encode_gml(program), kGml);
  EXPECT_EQ(decode_gml(encode_gml(program)), program);
  EXPECT_NO_THROW(validate_gml(encode_gml(program)));
}

// decode_gml and validate_gml (the same checks without the blob copies) both refuse it, with
// the same message.
void expect_gml_error(const Bytes& gml, const std::string& a, const std::string& b = "") {
  for (const bool decode : {true, false}) {
    try {
      if (decode)
        (void)decode_gml(gml);
      else
        validate_gml(gml);
      ADD_FAILURE() << "no error for " << a << (decode ? " (decode_gml)" : " (validate_gml)");
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(a));
      EXPECT_THAT(e.what(), HasSubstr(b));
    }
  }
}

TEST(Gml, RejectsInconsistentOrCorruptFilesWithTheirByteOffset) {
  expect_gml_error({}, "empty GML");
  Bytes bad = kGml;
  bad[12 + 27] = 0x80;  // ZerothEndAddress = 128, packet holds 96
  expect_gml_error(bad, "GML byte offset 36", "ZerothEndAddress is 128");
  bad = kGml;
  bad[12 + 31] = 0x40;  // ZerothStartAddress = 64
  expect_gml_error(bad, "GML byte offset 40", "ZerothStartAddress is 64");
  bad = kGml;
  bad[12 + 3] = 0x01;  // a reserved bit of the zeroth instruction
  expect_gml_error(bad, "GML byte offset 15", "bits [255:64]");
  bad = kGml;
  bad[12 + 63] = 0x0B;  // CONV -> unknown opcode 0xB
  expect_gml_error(bad, "GML byte offset 44: instruction 1 at DRAM 0x20", "unknown opcode 0xB");
  bad = kGml;
  bad[12 + 64 + 27] = 0x01;  // START reserved bit 32
  expect_gml_error(bad, "instruction 2 at DRAM 0x40", "reserved bits");
  bad = kGml;
  bad[11] = 0x20;  // instruction packet at DRAM 0x20
  expect_gml_error(bad, "byte offset 0", "instruction packet at DRAM address 0");
  expect_gml_error(concat({kGml, hex("ffffffff 00000000 00000000")}), "GML byte offset 152",
                   "start packet");
  expect_gml_error(concat({kGml, hex("ffffffff 00000020 00000040"), kPayload32}),
                   "overlaps the packet at GML byte offset 152");
  expect_gml_error(Bytes(kGml.begin(), kGml.end() - 1), "truncated DWP payload",
                   "packet at byte offset 108");
  expect_gml_error(concat({hex("ffffffff 00000020 00000000"), Bytes(32, 0)}),
                   "room for no instruction");
}

TEST(Gml, WriterRejectsBadPrograms) {
  GmlProgram program;
  EXPECT_THAT([&] { (void)encode_gml(program); },
              ThrowsMessage<Error>(HasSubstr("no instructions")));
  program.instructions.push_back(Instruction(Opcode::START));
  program.blobs = {{0x30, kPayload32}};
  EXPECT_THAT([&] { (void)encode_gml(program); },
              ThrowsMessage<Error>(HasSubstr("blob 0: DRAM address 0x30 is not 32-byte aligned")));
  program.blobs = {{0x40, Bytes(33, 0)}};
  EXPECT_THAT([&] { (void)encode_gml(program); },
              ThrowsMessage<Error>(HasSubstr("blob 0 at DRAM 0x40: size 33")));
  program.blobs = {{0x20, kPayload32}};  // instruction region is [0, 64)
  EXPECT_THAT(
      [&] { (void)encode_gml(program); },
      ThrowsMessage<Error>(HasSubstr("the instruction region [0x0, 0x40) overlaps blob 0")));
  program.blobs = {{0x40, Bytes(64, 0)}, {0x60, kPayload32}};
  EXPECT_THAT([&] { (void)encode_gml(program); },
              ThrowsMessage<Error>(HasSubstr("blob 0 [0x40, 0x80) overlaps blob 1")));
}

Instruction start_inst(int layer, int total) {
  Instruction s(Opcode::START);
  s.set(Field::START_LayerNumber, layer).set(Field::START_TotalLayers, total);
  return s;
}

TEST(Gml, LintChecksTheRtlInstructionLayout) {
  const Instruction conv(Opcode::CONV), out(Opcode::OutputBlock), tail(Opcode::TailBlock),
      pool(Opcode::POOL);
  EXPECT_TRUE(
      lint_instruction_list({conv, out, tail, start_inst(1, 2), pool, out, start_inst(2, 2)})
          .empty());
  auto findings = lint_instruction_list({conv, out, tail, start_inst(1, 1), pool, out});
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_THAT(findings[0], HasSubstr("TotalLayers is 1, but the program has 2 megablocks"));
  EXPECT_THAT(findings[1], HasSubstr("megablock 2 has no START"));
  findings = lint_instruction_list({tail, conv, out, start_inst(2, 1)});
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_THAT(findings[0], HasSubstr("instruction 1 (TailBlock): configures no megablock"));
  EXPECT_THAT(findings[1], HasSubstr("LayerNumber is 2, expected 1"));
}

// --------------------------------------------------------------------------------------- META

TEST(Meta, WriterProducesThe48BitWordsOfTheSpec) {
  Bytes out;
  append_meta_reset(out);
  EXPECT_EQ(out, hex("ffffffffffff 000000000000 000000000000"));
  out.clear();
  append_meta_dispatch(out, DispatchTarget::kUart);
  EXPECT_EQ(out, hex("ffffffffffff 000000000006 000000000001 000000000001"));
  out.clear();
  append_meta_payload_size(out, 0x12345678);
  EXPECT_EQ(out, hex("ffffffffffff 000000000006 000000000002 000012345678"));
}

TEST(Meta, ParsesAMixedStream) {
  const Bytes stream =
      hex("ffffffffffff 000000000000 000000000000"
          "ffffffffffff 000000000006 000000000001 000000000002"
          "ffffffffffff 000000000006 000000000002 0000000002c4");
  const auto packets = parse_meta_stream(stream);
  ASSERT_EQ(packets.size(), 3u);
  EXPECT_EQ(packets[0].type, MetaType::kReset);
  EXPECT_EQ(packets[1].offset, 18u);
  EXPECT_EQ(packets[1].type, MetaType::kDispatch);
  EXPECT_EQ(packets[1].target, DispatchTarget::kSpi);
  EXPECT_EQ(packets[2].offset, 42u);
  EXPECT_EQ(packets[2].type, MetaType::kPayloadSize);
  EXPECT_EQ(packets[2].payload_size, 0x2c4u);
  EXPECT_EQ(parse_dispatch_target("UART"), DispatchTarget::kUart);
  EXPECT_THAT([] { (void)parse_dispatch_target("usb"); },
              ThrowsMessage<Error>(HasSubstr("rah, uart or spi")));
}

void expect_meta_error(const Bytes& stream, const std::string& a, const std::string& b = "") {
  try {
    (void)parse_meta_stream(stream);
    ADD_FAILURE() << "no error for " << a;
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(a));
    EXPECT_THAT(e.what(), HasSubstr(b));
  }
}

TEST(Meta, MalformedStreamsAreRejectedWithTheirByteOffset) {
  const Bytes reset = hex("ffffffffffff 000000000000 000000000000");
  expect_meta_error(concat({reset, hex("ffff")}), "not a whole number", "byte offset 18");
  expect_meta_error(concat({reset, hex("fffffffffffe 000000000000 000000000000")}),
                    "bad META start-of-packet at byte offset 18");
  expect_meta_error(concat({reset, hex("ffffffffffff 000000000000")}),
                    "truncated META packet at byte offset 18");
  expect_meta_error(hex("ffffffffffff 000000000000 000000000001"), "byte offset 0",
                    "SIZE 0 with TYPE 1");
  expect_meta_error(hex("ffffffffffff 000000000006 000000000003 000000000000"), "TYPE 3");
  expect_meta_error(hex("ffffffffffff 000000000006 000000000000 000000000000"),
                    "TYPE 0 with SIZE 6");
  expect_meta_error(hex("ffffffffffff 000000000006 000000000001"),
                    "needs a data word at byte offset 18");
  expect_meta_error(hex("ffffffffffff 000000000006 000000000001 000000000003"), "unknown target 3");
  expect_meta_error(hex("ffffffffffff 000000000006 000000000002 000100000000"),
                    "does not fit 32 bits");
}

// ----------------------------------------------------------------------------------- Dispatch

TEST(Dispatch, FrameBytesFollowTheRtl) {
  // 14.7: header FFFFFFFF | size | id, payload, footer FFFFFFFF 00000000 00000000.
  const Bytes frame = encode_dispatch_frame(0xBEEF, ByteSpan(kPayload32).first(8));
  EXPECT_EQ(frame, hex("ffffffff 00000008 0000beef 00010203 04050607 ffffffff 00000000 00000000"));
  EXPECT_THAT([] { (void)encode_dispatch_frame(1, Bytes(6, 0)); },
              ThrowsMessage<Error>(HasSubstr("not a multiple of 4")));
}

TEST(Dispatch, RoundTripsSeveralFrames) {
  const std::vector<DispatchFrame> frames = {
      {0x42, kPayload32}, {0x1234, {}}, {0xBEEF, Bytes(320, 7)}};
  Bytes stream;
  for (const auto& f : frames) append_dispatch_frame(stream, f.id, f.payload);
  EXPECT_EQ(stream.size(), 32 + 320 + 3 * kDispatchOverheadBytes);
  EXPECT_EQ(parse_dispatch_frames(stream), frames);
}

void expect_dispatch_error(const Bytes& stream, const std::string& a, const std::string& b = "") {
  try {
    (void)parse_dispatch_frames(stream);
    ADD_FAILURE() << "no error for " << a;
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(a));
    EXPECT_THAT(e.what(), HasSubstr(b));
  }
}

TEST(Dispatch, HeaderAlone) {
  const DispatchHeader h = parse_dispatch_header(hex("ffffffff 00000140 0000beef"));
  EXPECT_EQ(h.size, 320u);
  EXPECT_EQ(h.id, 0xBEEFu);
  EXPECT_THAT([] { (void)parse_dispatch_header(hex("fffffffe 00000004 00000001"), 56); },
              ThrowsMessage<Error>(HasSubstr("start-of-frame at byte offset 56")));
  EXPECT_THAT([] { (void)parse_dispatch_header(hex("ffffffff 00000006 00000001")); },
              ThrowsMessage<Error>(HasSubstr("size 6 is not a multiple of 4")));
  EXPECT_THAT([] { (void)parse_dispatch_header(hex("ffffffff 0000")); },
              ThrowsMessage<Error>(HasSubstr("truncated dispatch header")));
}

TEST(Dispatch, MalformedFramesAreRejectedWithTheirByteOffset) {
  const Bytes good = hex("ffffffff 00000004 00000042 01020304 ffffffff 00000000 00000000");  // 28
  expect_dispatch_error(concat({good, hex("ffffffff 0000")}),
                        "truncated dispatch header at byte offset 28");
  expect_dispatch_error(concat({good, hex("00000000 00000004 00000042")}),
                        "bad dispatch start-of-frame at byte offset 28");
  expect_dispatch_error(hex("ffffffff 00000006 00000042 01020304 0506"), "byte offset 0", "size 6");
  expect_dispatch_error(hex("ffffffff 00000008 00000042 01020304"), "truncated dispatch payload",
                        "declares 8 bytes, only 4 remain");
  expect_dispatch_error(hex("ffffffff 00000004 00000042 01020304 ffffffff 00000000"),
                        "truncated dispatch footer at byte offset 16");
  // The old (wrong) footer FFFFFFFF | 0 | ID is rejected: word 2 is the id.
  expect_dispatch_error(hex("ffffffff 00000004 00000042 01020304 ffffffff 00000000 00000042"),
                        "bad dispatch footer at byte offset 24", "word 2 is 0x00000042");
}

// -------------------------------------------------------------------------------------- Arch

TEST(Arch, ParsesTheThreeV16Configurations) {
  EXPECT_EQ(SaArch::parse("9,4,4"), kArch9x4x4);
  EXPECT_EQ(SaArch::parse("9, 8, 8"), kArch9x8x8);
  EXPECT_EQ(SaArch::parse("16,1,16"), kArch16x1x16);
  EXPECT_EQ(SaArch::default_arch(), kArch9x8x8);
  EXPECT_EQ(SaArch{}.str(), "9,8,8");
  EXPECT_EQ(kArch9x4x4.pixels_per_word(), 8);  // NHW8C4
  EXPECT_EQ(kArch9x8x8.pixels_per_word(), 4);  // NHW4C8
  EXPECT_EQ(kArch16x1x16.pixels_per_word(), 2);
  EXPECT_TRUE(kArch9x4x4.regular_optimal());
  EXPECT_TRUE(kArch9x8x8.regular_optimal());
  EXPECT_FALSE(kArch16x1x16.regular_optimal());
  EXPECT_EQ(kClockHz, 81'000'000);
  EXPECT_EQ(kDramWordBytes, 32);
}

TEST(Arch, RejectsEverythingElse) {
  for (const char* bad :
       {"", "9,8", "9,8,8,1", "9,8,4", "8,8,8", "a,b,c", "9,,8", "9,8,8x", "-9,8,8"})
    EXPECT_THAT([&] { (void)SaArch::parse(bad); },
                ThrowsMessage<Error>(HasSubstr("9,4,4 or 9,8,8 (default) or 16,1,16")))
        << bad;
}

}  // namespace
}  // namespace npukit::isa
