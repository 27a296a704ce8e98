// npukit sim, run as the real binary on streams assembled with the ISA encoder.
#include "device/test_programs.h"
#include "isa/dispatch.h"
#include "tools/cli_test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace {

using namespace npukit::device::testing;
namespace fs = std::filesystem;

using Result = npukit::tools::testing::CliResult;
Result run(const std::string& args) { return npukit::tools::testing::run_npukit(args); }

fs::path temp_dir() {
  return npukit::tools::testing::scratch_dir(
      ::testing::UnitTest::GetInstance()->current_test_info()->name());
}

void write(const fs::path& p, const npukit::Bytes& b) {
  std::ofstream o(p, std::ios::binary);
  o.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

npukit::Bytes read(const fs::path& p) {
  std::ifstream i(p, std::ios::binary);
  return npukit::Bytes(std::istreambuf_iterator<char>(i), std::istreambuf_iterator<char>());
}

struct Built {
  npukit::Bytes gml, input_and_start;
  ConvSpec spec;
  std::uint32_t out_addr, out_bytes;
};

Built build(const npukit::isa::SaArch& arch, bool break_stride = false) {
  ConvSpec s;
  s.ic = 6, s.kn = 10, s.ih = 7, s.iw = 8, s.quant_shift = 8, s.dispatch = true,
  s.dispatch_id = 0xABCD;
  fill_random(s, 17);
  ProgramBuilder b{arch};
  const std::uint64_t dk = 32 / arch.n_sa;
  const npukit::Bytes input = pack_activation(arch, s.ic, 56, s.x);
  const std::uint32_t in_addr = b.alloc(input.size());
  const auto out_bytes = static_cast<std::uint32_t>(up(s.kn, arch.n_sa) * up(56, dk));
  const std::uint32_t out_addr = b.alloc(out_bytes);
  b.add_conv(s, in_addr, out_addr, b.alloc(4096));
  b.finish();
  if (break_stride) b.instructions[0].set(npukit::isa::Field::CONV_Stride, 7);
  Built r;
  r.gml = npukit::isa::encode_gml({b.instructions, b.blobs});
  npukit::isa::append_dwp_packet(r.input_and_start, in_addr, input);
  npukit::isa::append_dwp_start(r.input_and_start);
  r.spec = s;
  r.out_addr = out_addr;
  r.out_bytes = out_bytes;
  return r;
}

TEST(SimCli, RunsAProgramWritesDispatchStatsAndDramDumps) {
  const fs::path d = temp_dir();
  const Built p = build(npukit::isa::kArch9x4x4);
  write(d / "model.gml", p.gml);
  write(d / "input.dwp", p.input_and_start);
  const Result r =
      run("sim " + (d / "model.gml").string() + " " + (d / "input.dwp").string() +
          " --sa-arch 9,4,4 --dispatch-out " + (d / "out.bin").string() + " --stats-json " +
          (d / "stats.json").string() + " --dump-dram " + std::to_string(p.out_addr) + ":" +
          std::to_string(p.out_bytes) + ":" + (d / "dram.bin").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("CONV"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("total"), std::string::npos) << r.out;
  const auto frames = npukit::isa::parse_dispatch_frames(read(d / "out.bin"));
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].id, 0xABCDu);
  const auto expected = ref_conv(p.spec);
  EXPECT_EQ(unpack_activation(npukit::isa::kArch9x4x4, p.spec.kn, 56, frames[0].payload), expected);
  EXPECT_EQ(read(d / "dram.bin"), frames[0].payload);
  const auto j = nlohmann::json::parse(read(d / "stats.json"));
  EXPECT_EQ(j["sa_arch"], "9,4,4");
  ASSERT_EQ(j["layers"].size(), 1u);
  EXPECT_EQ(j["layers"][0]["block"], "CONV");
  EXPECT_GT(j["layers"][0]["cycles"].get<std::uint64_t>(), 0u);
  EXPECT_GT(j["total_cycles"].get<std::uint64_t>(), j["layers"][0]["cycles"].get<std::uint64_t>());
  fs::remove_all(d);
}

TEST(SimCli, BadProgramFailsNamingTheField) {
  const fs::path d = temp_dir();
  const Built p = build(npukit::isa::kArch9x8x8, true);
  write(d / "model.gml", p.gml);
  write(d / "input.dwp", p.input_and_start);
  const Result r = run("sim " + (d / "model.gml").string() + " " + (d / "input.dwp").string());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("npukit sim: error:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CONV.Stride"), std::string::npos) << r.out;
  fs::remove_all(d);
}

TEST(SimCli, StreamWithoutStartPacketSaysSo) {
  const fs::path d = temp_dir();
  const Built p = build(npukit::isa::kArch9x8x8);
  write(d / "model.gml", p.gml);
  const Result r = run("sim " + (d / "model.gml").string());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("start packet"), std::string::npos) << r.out;
  const Result bad =
      run("sim " + (d / "model.gml").string() + " --dump-dram 12:zz:" + (d / "x").string());
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("SIZE"), std::string::npos) << bad.out;
  fs::remove_all(d);
}

}  // namespace
