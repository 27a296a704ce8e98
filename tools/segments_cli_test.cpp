// Models with host ops between device parts (fixtures/segments/, made by make_segments.py),
// quantized and compiled by the real binary, run segment by segment by runtime::Session over the
// in-process and the TCP transport: their outputs are bit for bit the reference executor's on the
// lowered graph, and the manifest's share of device MACs is the hand-counted one.
// resize_middle has a host nearest Resize (3x: RESIZE does 2x only) between two device segments,
// fed int8 values by the first: legalize_host_ops runs it in float on the host.
#include "common/npy.h"
#include "compiler/compiler.h"
#include "ir/tensor_util.h"
#include "isa/manifest.h"
#include "onnx/onnx_io.h"
#include "ref/executor.h"
#include "runtime/session.h"
#include "runtime/tcp_server.h"
#include "tools/cli_test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <thread>

namespace {

namespace fs = std::filesystem;
using npukit::tools::testing::run_npukit;

const std::string kDir = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/segments/";

struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() /
           ("npukit_segments_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

struct LoopbackServer {
  std::atomic<bool> stop{false};
  std::promise<std::uint16_t> port;
  std::thread thread;
  LoopbackServer() {
    thread = std::thread([this] {
      npukit::runtime::ServeOptions o;
      o.port = 0;
      o.stop = &stop;
      o.on_listening = [this](std::uint16_t p) { port.set_value(p); };
      npukit::runtime::serve_tcp(o);
    });
  }
  ~LoopbackServer() {
    stop = true;
    thread.join();
  }
};

// Quantizes fixtures/segments/NAME.onnx and compiles it with the npukit binary into DIR/prog.
std::string compile_fixture(const std::string& name, const fs::path& dir, std::string* out) {
  const fs::path q = dir / (name + ".int8.onnx");
  auto r = run_npukit("quantize " + kDir + name + ".onnx --calib " + kDir + name +
                      ".calib.npy -o " + q.string());
  EXPECT_EQ(r.status, 0) << r.out;
  r = run_npukit("compile " + q.string() + " -o " + (dir / "prog").string());
  EXPECT_EQ(r.status, 0) << r.out;
  if (out) *out = r.out;
  return q.string();
}

npukit::ir::Tensor input(const std::string& name, int k) {
  return npukit::onnxio::load_tensor_file(kDir + name + ".input_" + std::to_string(k) + ".npy");
}

// Runs every input through the program on `transport` and through the reference executor on
// the lowered graph; returns the number of differing output values.
std::size_t differences(const std::string& name, const std::string& int8_model,
                        const fs::path& prog, const std::string& transport) {
  const npukit::ir::Graph model = npukit::onnxio::load_onnx(int8_model);
  const auto lowered = npukit::compiler::lower(model, {});
  npukit::runtime::SessionOptions so;
  so.transport = transport;
  npukit::runtime::Session session(prog.string(), so);
  std::size_t differ = 0;
  for (int k = 0; k < 2; ++k) {
    npukit::ir::Tensor x = input(name, k);
    x.name = model.inputs.at(0);
    const auto device = session.run({{x.name, x}});
    const auto reference = npukit::ref::run_graph(lowered.graph, {{x.name, x}});
    for (const auto& out : model.outputs) {
      const auto a = npukit::ir::to_float_vector(device.outputs.at(out));
      const auto b = npukit::ir::to_float_vector(reference.at(out));
      EXPECT_EQ(a.size(), b.size());
      for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) differ += a[i] != b[i];
    }
  }
  return differ;
}

// Compiles NAME, checks its segments alternate, and runs it in process and over TCP.
void check_fixture(const char* name, std::size_t min_device_segments = 2) {
  SCOPED_TRACE(name);
  TempDir dir;
  const std::string q = compile_fixture(name, dir.path, nullptr);
  const auto m = npukit::isa::load_manifest((dir.path / "prog" / "manifest.json").string());
  EXPECT_EQ(m.version, 2);
  EXPECT_GE(m.device_segment_count(), min_device_segments);
  for (std::size_t i = 1; i < m.segments.size(); ++i)
    EXPECT_NE(m.segments[i].is_device(), m.segments[i - 1].is_device()) << "segments alternate";
  EXPECT_EQ(differences(name, q, dir.path / "prog", "inproc"), 0u);
  LoopbackServer server;
  const std::uint16_t port = server.port.get_future().get();
  EXPECT_EQ(differences(name, q, dir.path / "prog", "tcp://127.0.0.1:" + std::to_string(port)), 0u);
}

TEST(Segments, HostOpsBetweenDevicePartsMatchTheReferenceInProcessAndOverTcp) {
  for (const char* name : {"softmax_middle", "three_parts"}) check_fixture(name);
  // The squeeze-excitation Mul runs on the device since broadcast_mul: one device segment.
  check_fixture("se_block", 1);
}

TEST(Segments, HostResizeBetweenDevicePartsGetsFloatValues) { check_fixture("resize_middle"); }

TEST(Segments, ThreePartsHasThreeDeviceSegments) {
  TempDir dir;
  compile_fixture("three_parts", dir.path, nullptr);
  const auto m = npukit::isa::load_manifest((dir.path / "prog" / "manifest.json").string());
  EXPECT_EQ(m.device_segment_count(), 3u);
  // Device segments after the first are started by rewriting the zeroth instruction: their
  // instruction ranges follow each other through the one instruction list.
  int next = 0;
  for (const auto& s : m.segments)
    if (s.is_device()) {
      EXPECT_EQ(s.first_instruction, next);
      next += s.instruction_count;
    }
  EXPECT_EQ(static_cast<std::uint64_t>(next), m.instruction_count);
}

TEST(Segments, CompilePrintsAndRecordsTheShareOfMacsOnTheDevice) {
  // dilated_middle: convs 3->32, 32->32 on the device, a dilated 32->32 conv on the host, then
  // 32->32 and 32->8 on the device, all 3x3 on 16x16 (stride 1, same padding):
  //   3->32: 256 * 32 * 3 * 9 = 221184; 32->32: 256 * 32 * 32 * 9 = 2359296 (three of them);
  //   32->8: 256 * 8 * 32 * 9 = 589824. Model 7888896, device 5529600 = 70.09 %.
  TempDir dir;
  std::string out;
  compile_fixture("dilated_middle", dir.path, &out);
  const auto m = npukit::isa::load_manifest((dir.path / "prog" / "manifest.json").string());
  EXPECT_EQ(m.model_macs, 7888896u);
  EXPECT_EQ(m.device_macs, 5529600u);
  EXPECT_NE(out.find("70.1 % of the model's MACs on the device"), std::string::npos) << out;
  EXPECT_EQ(m.device_segment_count(), 2u);
  std::ifstream f(dir.path / "prog" / "manifest.json");
  const auto j = nlohmann::json::parse(f);
  EXPECT_NEAR(j.at("macs").at("device_share").get<double>(), 5529600.0 / 7888896.0, 1e-12);
}

TEST(Segments, RunReportsEverySegmentInStatsJson) {
  TempDir dir;
  compile_fixture("softmax_middle", dir.path, nullptr);
  const fs::path stats = dir.path / "stats.json";
  const auto r = run_npukit("run " + (dir.path / "prog").string() + " --input " + kDir +
                            "softmax_middle.input_0.npy -o " + (dir.path / "out").string() +
                            " --stats-json " + stats.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("segments ("), std::string::npos) << r.out;
  std::ifstream f(stats);
  const auto j = nlohmann::json::parse(f);
  const auto m = npukit::isa::load_manifest((dir.path / "prog" / "manifest.json").string());
  ASSERT_EQ(j.at("segments").size(), m.segments.size());
  for (std::size_t i = 0; i < m.segments.size(); ++i) {
    const auto& s = j.at("segments")[i];
    EXPECT_EQ(s.at("where"), m.segments[i].is_device() ? "device" : "host");
    if (m.segments[i].is_device()) {
      EXPECT_GT(s.at("cycles").get<double>(), 0);
      EXPECT_GT(s.at("bytes_to_device").get<double>(), 0);
      EXPECT_GT(s.at("bytes_from_device").get<double>(), 0);
    } else {
      EXPECT_GE(s.at("host_seconds").get<double>(), 0);
    }
  }
  // Every device layer with what the in-process model took for it.
  ASSERT_FALSE(j.at("layers").empty());
  for (const auto& l : j.at("layers")) EXPECT_GT(l.at("model_seconds").get<double>(), 0) << l;
}

}  // namespace
