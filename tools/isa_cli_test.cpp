// npukit disasm / asm / isa, run as a user runs them (the real binary, NPUKIT_BIN).
#include "isa/test_hex.h"
#include "tools/cli_test_support.h"

#include <fmt/core.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

using npukit::tools::testing::CliResult;
CliResult run(const std::string& args) {
  return npukit::tools::testing::run_npukit(args, npukit::tools::testing::Stderr::kSeparate);
}

class IsaCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("npukit_isa_cli_{}", ::getpid());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const npukit::Bytes& bytes) {
    const auto path = dir_ / name;
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    return path.string();
  }
  npukit::Bytes read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return npukit::Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  fs::path dir_;
};

// Instruction packet with one of every v16 opcode (packed from the spec's table), the input
// tensor packet and the start packet.
npukit::Bytes every_opcode_stream() {
  using npukit::isa::testing::hex;
  npukit::Bytes s =
      hex("ffffffff 000001a0 00000000"
          "00000000 00000000 00000000 00000000 00000000 00000000 000001a0 00000020");
  for (const auto& v : npukit::isa::testing::hand_vectors()) {
    const auto b = hex(v.hex);
    s.insert(s.end(), b.begin(), b.end());
  }
  const auto tail = npukit::isa::testing::concat(
      {hex("ffffffff 00000020 000001a0"), npukit::Bytes(32, 1), hex("ffffffff 00000000 00000000")});
  s.insert(s.end(), tail.begin(), tail.end());
  return s;
}

const std::string kExample = std::string(NPUKIT_SOURCE_DIR) + "/examples/conv_relu_9x8x8.gml";

TEST_F(IsaCli, DisassemblesTheBundledExample) {
  const CliResult r = run("disasm " + kExample);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("ZEROTH      ZerothStartAddress=32 ZerothEndAddress=160"));
  EXPECT_THAT(r.out, HasSubstr("CONV        IW=8 IH=8 IC=8 KN=8 KW=3 KH=3"));
  EXPECT_THAT(r.out, HasSubstr("START       LayerNumber=1 TotalLayers=1"));
  EXPECT_THAT(r.out, HasSubstr("= CONV.WeightStartAddress of instruction 1"));
  EXPECT_THAT(r.out, HasSubstr("0 invalid instruction(s), 0 stream problem(s), 0 warning(s)"));
}

TEST_F(IsaCli, JsonListsEveryOpcodeOfAHandBuiltStream) {
  const CliResult r = run("disasm --json " + write("every.dwp", every_opcode_stream()));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto listing = nlohmann::json::parse(r.out);
  ASSERT_EQ(listing["packets"].size(), 3u);
  EXPECT_EQ(listing["packets"][0], nlohmann::json::parse(R"({"offset": 0, "address": 0,
      "size": 416, "kind": "instructions", "zeroth": {"ZerothStartAddress": 32,
      "ZerothEndAddress": 416}})"));
  EXPECT_EQ(listing["packets"][1]["kind"], "data");
  EXPECT_EQ(listing["packets"][1]["offset"], 428);
  EXPECT_EQ(listing["packets"][2]["kind"], "start");
  const auto& vectors = npukit::isa::testing::hand_vectors();
  ASSERT_EQ(listing["instructions"].size(), vectors.size());
  for (std::size_t i = 0; i < vectors.size(); ++i) {
    const auto& inst = listing["instructions"][i];
    EXPECT_EQ(inst["address"], 32 * (i + 1));
    EXPECT_EQ(inst["opcode"], vectors[i].opcode);
    for (const auto& [name, value] : vectors[i].fields) EXPECT_EQ(inst["fields"][name], value);
  }
}

TEST_F(IsaCli, AsmReproducesTheDisassembledBytes) {
  for (const auto& [name, bytes] :
       {std::pair{"every.dwp", every_opcode_stream()}, std::pair{"example.gml", read(kExample)}}) {
    const std::string in = write(name, bytes);
    const CliResult d = run("disasm --json " + in);
    ASSERT_EQ(d.status, 0) << d.err;
    std::ofstream((dir_ / "listing.json").string()) << d.out;
    const CliResult a = run(fmt::format("asm {} -o {}", (dir_ / "listing.json").string(),
                                        (dir_ / "again.bin").string()));
    ASSERT_EQ(a.status, 0) << a.err;
    EXPECT_EQ(read((dir_ / "again.bin").string()), bytes) << name;
  }
  // The example's own source assembles to the committed file.
  const CliResult a = run(fmt::format("asm {}/examples/conv_relu_9x8x8.json -o {}",
                                      NPUKIT_SOURCE_DIR, (dir_ / "ex.gml").string()));
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(read((dir_ / "ex.gml").string()), read(kExample));
}

TEST_F(IsaCli, BadStreamsExitNonZeroWithALocatedError) {
  auto bytes = every_opcode_stream();
  bytes.resize(bytes.size() - 5);
  CliResult r = run("disasm " + write("short.dwp", bytes));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, HasSubstr("npukit disasm: error:"));
  EXPECT_THAT(r.err, HasSubstr("truncated DWP header at byte offset 472"));

  bytes = every_opcode_stream();
  bytes[428] = 0x7f;
  r = run("disasm " + write("corrupt.dwp", bytes));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, HasSubstr("bad DWP start-of-packet at byte offset 428"));

  bytes = every_opcode_stream();
  bytes[12 + 2 * 32 + 31] = 0x0D;  // instruction 2: unknown opcode 0xD
  r = run("disasm " + write("invalid.dwp", bytes));
  EXPECT_EQ(r.status, 1);  // listed, flagged, exit 1
  EXPECT_THAT(r.out, HasSubstr("!! byte offset 76: unknown opcode 0xD"));
  EXPECT_THAT(r.out, HasSubstr("1 invalid instruction(s)"));

  r = run("disasm " + (dir_ / "missing.gml").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot open"));
}

TEST_F(IsaCli, AsmErrorsNameTheJsonLocation) {
  std::ofstream((dir_ / "bad.json").string())
      << R"({"instructions": [{"opcode": "CONV", "fields": {"IW": 4096}}]})";
  const CliResult r =
      run(fmt::format("asm {} -o {}", (dir_ / "bad.json").string(), (dir_ / "x").string()));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(
      r.err,
      HasSubstr("instructions[0].fields.IW: CONV.IW: value 4096 does not fit the 10-bit field"));
}

TEST_F(IsaCli, IsaTableIsTheCommittedReference) {
  const CliResult r = run("isa --markdown");
  EXPECT_EQ(r.status, 0);
  const auto doc = read(std::string(NPUKIT_SOURCE_DIR) + "/docs/isa-v16.md");
  EXPECT_EQ(r.out, std::string(doc.begin(), doc.end()));
  const CliResult conv = run("isa CONV");
  EXPECT_EQ(conv.status, 0);
  EXPECT_THAT(conv.out, HasSubstr("[13:4]"));
  EXPECT_THAT(conv.out, HasSubstr("[255:224]"));
  const CliResult bogus = run("isa BOGUS");
  EXPECT_EQ(bogus.status, 1);
  EXPECT_THAT(bogus.err, HasSubstr("unknown opcode 'BOGUS'"));
  for (const char* cmd : {"disasm", "asm", "isa"})
    EXPECT_EQ(run(std::string(cmd) + " --help").status, 0) << cmd;
}

}  // namespace
