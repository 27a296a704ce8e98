// The runtime against the device model, without the compiler: a conv program assembled by hand
// from gati.md's RTL-confirmed field values, run through both transports and through a Session,
// and checked against a plain convolution computed here.
#include "common/error.h"
#include "common/npy.h"
#include "common/scratch_dir.h"
#include "ir/tensor_util.h"
#include "isa/dispatch.h"
#include "isa/dwp.h"
#include "isa/gml.h"
#include "isa/manifest.h"
#include "isa/meta.h"
#include "runtime/session.h"
#include "runtime/socket_io.h"
#include "runtime/tcp_server.h"
#include "runtime/transport.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <future>
#include <set>
#include <thread>

namespace npukit::runtime {
namespace {

using isa::Field;
using isa::Instruction;
using isa::Opcode;

// 3x3 conv, pad 1, stride 1, IC = 3 -> KN = 2 on a 4x4 image, 9,8,8 array, ReLU, one layer.
// DRAM map (gati.md 4 and 14.9): instructions [0, 160), weights [160, 736), bias [736, 768),
// input [768, 896), output [896, 1024), accumulants at 1024.
constexpr int kIC = 3, kKN = 2, kH = 4, kW = 4;
constexpr std::uint32_t kWeights = 160, kBias = 736, kInput = 768, kOutput = 896, kAcc = 1024;
constexpr std::uint32_t kDispatchId = 0x42;
constexpr int kQuantScale = 3, kQuantShift = 4;

std::int8_t weight(int k, int c, int kh, int kw) {
  return static_cast<std::int8_t>(((k * 7 + c * 5 + kh * 3 + kw) % 9) - 4);
}
std::int32_t bias(int k) { return k == 0 ? 5 : -20; }
std::int8_t input(int c, int h, int w) {
  return static_cast<std::int8_t>(((c * 31 + h * 17 + w * 11) % 61) - 30);
}

Bytes conv_program() {
  isa::GmlProgram p;
  Instruction conv(Opcode::CONV);
  conv.set(Field::CONV_IW, kW).set(Field::CONV_IH, kH).set(Field::CONV_IC, kIC);
  conv.set(Field::CONV_KN, kKN).set(Field::CONV_KW, 3).set(Field::CONV_KH, 3);
  conv.set(Field::CONV_Stride, 1).set(Field::CONV_PadLeft, 1).set(Field::CONV_PadRight, 1);
  conv.set(Field::CONV_PadTop, 1).set(Field::CONV_PadBottom, 1);
  conv.set(Field::CONV_ImageStartAddress, kInput).set(Field::CONV_ImageEndAddress, kInput + 128);
  conv.set(Field::CONV_WeightStartAddress, kWeights)
      .set(Field::CONV_WeightEndAddress, kWeights + 576);
  conv.set(Field::CONV_Im2colPrefetch, 1).set(Field::CONV_KC, kIC);
  Instruction out(Opcode::OutputBlock);
  out.set(Field::OutputBlock_AccumulantAddr, kAcc).set(Field::OutputBlock_OutputAddr, kOutput);
  out.set(Field::OutputBlock_ChannelItr, 1).set(Field::OutputBlock_KernelItr, 1);
  out.set(Field::OutputBlock_ImageDimOutput, 16).set(Field::OutputBlock_ImageDimAcc, 16);
  out.set(Field::OutputBlock_DispatchEn, 1).set(Field::OutputBlock_DispatchID, kDispatchId);
  out.set(Field::OutputBlock_OnChipAcc, 1).set(Field::OutputBlock_OH, kH);
  out.set(Field::OutputBlock_OW, kW).set(Field::OutputBlock_OpWidth, 1);
  Instruction tail(Opcode::TailBlock);
  tail.set(Field::TailBlock_BiasEn, 1).set(Field::TailBlock_BiasWidth, 32);
  tail.set(Field::TailBlock_BiasStartAddress, kBias)
      .set(Field::TailBlock_BiasEndAddress, kBias + 32);
  tail.set(Field::TailBlock_QuantEn, 1).set(Field::TailBlock_QuantScale, kQuantScale);
  tail.set(Field::TailBlock_QuantShift, kQuantShift).set(Field::TailBlock_ActEn, 1);
  Instruction start(Opcode::START);
  start.set(Field::START_LayerNumber, 1).set(Field::START_TotalLayers, 1);
  p.instructions = {conv, out, tail, start};

  // Weights, gati.md 6.2 on 9,8,8 (kern_dim = COLS = 8, chan_dim = N_SA = 8), written out here
  // directly: byte ((ROW-1-srow) * 8 + schan) * 8 + skern = W[skern][schan][srow].
  Bytes w(576, 0);
  for (int srow = 0; srow < 9; ++srow)
    for (int c = 0; c < kIC; ++c)
      for (int k = 0; k < kKN; ++k)
        w[((8 - srow) * 8 + c) * 8 + k] =
            static_cast<std::uint8_t>(weight(k, c, srow / 3, srow % 3));
  Bytes b(32, 0);
  for (int k = 0; k < kKN; ++k) store_be32(&b[4 * k], static_cast<std::uint32_t>(bias(k)));
  p.blobs = {{kWeights, w}, {kBias, b}};
  return isa::encode_gml(p);
}

// The int8 input image in the 9,8,8 activation layout (dk = 4), written out directly.
Bytes input_bytes() {
  Bytes x(128, 0);
  for (int c = 0; c < kIC; ++c)
    for (int p = 0; p < kH * kW; ++p)
      x[(p / 4) * 32 + c * 4 + p % 4] = static_cast<std::uint8_t>(input(c, p / kW, p % kW));
  return x;
}

// Plain NCHW reference of the same arithmetic (DECISIONS.md 4, ReLU after the clamp).
std::vector<std::int8_t> expected_output() {
  std::vector<std::int8_t> y(kKN * kH * kW);
  for (int k = 0; k < kKN; ++k)
    for (int oh = 0; oh < kH; ++oh)
      for (int ow = 0; ow < kW; ++ow) {
        std::int64_t acc = bias(k);
        for (int c = 0; c < kIC; ++c)
          for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) {
              int h = oh + i - 1, x = ow + j - 1;
              if (h >= 0 && h < kH && x >= 0 && x < kW) acc += weight(k, c, i, j) * input(c, h, x);
            }
        std::int64_t q = (acc * kQuantScale + (1 << (kQuantShift - 1))) >> kQuantShift;
        q = std::clamp<std::int64_t>(q, -128, 127);
        y[(k * kH + oh) * kW + ow] = static_cast<std::int8_t>(std::max<std::int64_t>(q, 0));
      }
  return y;
}

Bytes run_stream(Transport& t) {
  Bytes meta;
  isa::append_meta_reset(meta);
  isa::append_meta_dispatch(meta, isa::DispatchTarget::kRah);
  t.write(kAppMeta, meta);
  t.write(kAppDwp, conv_program());
  Bytes stream;
  isa::append_dwp_packet(stream, kInput, input_bytes());
  isa::append_dwp_start(stream);
  t.write(kAppDwp, stream);
  return t.read(kAppDwp, 128 + isa::kDispatchOverheadBytes);
}

TEST(Transport, InProcessDispatchesTheConvResult) {
  auto t = make_in_process_transport({});
  auto frames = isa::parse_dispatch_frames(run_stream(*t));
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].id, kDispatchId);
  const auto y = expected_output();
  for (int k = 0; k < 8; ++k)
    for (int p = 0; p < 16; ++p) {
      std::uint8_t got = frames[0].payload[(p / 4) * 32 + k * 4 + p % 4];
      std::uint8_t want = k < kKN ? static_cast<std::uint8_t>(y[k * 16 + p]) : 0;
      EXPECT_EQ(got, want) << "channel " << k << " pixel " << p;
    }
  EXPECT_THROW(t->read(kAppDwp, 1), Error);  // nothing more was sent
}

// Starts `npukit serve`'s server loop on a free loopback port in a thread.
struct LoopbackServer {
  std::atomic<bool> stop{false};
  std::promise<std::uint16_t> port;
  std::thread thread;
  explicit LoopbackServer(int connections) {
    thread = std::thread([this, connections] {
      ServeOptions o;
      o.port = 0;
      o.max_connections = connections;
      o.stop = &stop;
      o.on_listening = [this](std::uint16_t p) { port.set_value(p); };
      serve_tcp(o);
    });
  }
  ~LoopbackServer() {
    stop = true;
    thread.join();
  }
};

TEST(Transport, TcpCarriesTheSameBytesAsInProcess) {
  LoopbackServer server(1);
  const std::uint16_t port = server.port.get_future().get();
  auto tcp = connect_tcp("127.0.0.1", port, std::chrono::seconds(20));
  auto local = make_in_process_transport({});
  EXPECT_EQ(run_stream(*tcp), run_stream(*local));
}

TEST(Transport, TcpReportsDeviceErrorsInsteadOfHanging) {
  LoopbackServer server(1);
  const std::uint16_t port = server.port.get_future().get();
  auto tcp = connect_tcp("127.0.0.1", port, std::chrono::seconds(20));
  // An instruction region holding an unknown opcode (0xC), then an input packet and start.
  Bytes bad;
  Bytes inst(64, 0);
  store_be32(&inst[24], 64);  // zeroth: end
  store_be32(&inst[28], 32);  // zeroth: start
  inst[63] = 0x0C;
  isa::append_dwp_packet(bad, 0, inst);
  isa::append_dwp_packet(bad, 1024, Bytes(32, 1));
  isa::append_dwp_start(bad);
  tcp->write(kAppDwp, bad);
  try {
    tcp->read(kAppDwp, 12);
    FAIL() << "expected a device error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device error"), std::string::npos) << e.what();
  }
}

TEST(Transport, RunCyclesRecordRoundTripsAndRejectsBadLengths) {
  RunCycles c;
  c.total = (1ull << 40) + 7;
  c.layers = {{isa::Opcode::CONV, 123456789012ull}, {isa::Opcode::POOL, 5}};
  const RunCycles d = decode_run_cycles(encode_run_cycles(c));
  EXPECT_EQ(d.total, c.total);
  EXPECT_EQ(d.layers, c.layers);
  Bytes bad = encode_run_cycles(c);
  bad.pop_back();
  EXPECT_THROW(decode_run_cycles(bad), Error);
  EXPECT_THROW(decode_run_cycles(Bytes(5, 0)), Error);
}

TEST(Transport, RejectsUnknownTransportSpecs) {
  EXPECT_THROW(open_transport("udp://x:1", {}), Error);
  EXPECT_THROW(open_transport("tcp://localhost", {}), Error);
  EXPECT_THROW(open_transport("tcp://localhost:99999", {}), Error);
}

// A Session over a hand-written manifest: packs the float input, quantizes it with the
// manifest's scale, runs the device and unpacks the dispatched output.
TEST(Session, RunsAHandWrittenProgramDirectory) {
  namespace fs = std::filesystem;
  const npukit::testing::ScratchDir scratch("session_test");
  const fs::path dir = scratch.path();
  const Bytes gml = conv_program();
  write_file_bytes((dir / "model.gml").string(), gml);
  isa::Manifest m;
  m.model = "hand";
  m.gml_bytes = gml.size();
  isa::ManifestTensor in{"x", {1, kIC, kH, kW}, "float32", 0.5};
  m.inputs = {in};
  isa::ManifestTensor din = in;
  din.dtype = "int8";
  din.layout = "activation";
  din.address = kInput;
  din.bytes = 128;
  isa::ManifestSegment seg;
  seg.kind = isa::ManifestSegment::Kind::kDevice;
  seg.layer_count = 1;
  seg.instruction_count = static_cast<int>(isa::decode_gml(gml).instructions.size());
  seg.device_inputs = {din};
  isa::ManifestTensor dout{"y", {1, kKN, kH, kW}, "int8", 1.0};
  dout.layout = "activation";
  dout.address = kOutput;
  dout.bytes = 128;
  dout.dispatch_id = kDispatchId;
  seg.device_outputs = {dout};
  m.segments = {seg};
  m.layers = {{"conv", "CONV", {"x"}, {"y"}, 0, seg.instruction_count}};
  m.instruction_count = static_cast<std::uint64_t>(seg.instruction_count);
  m.outputs = {dout};
  isa::save_manifest(m, (dir / "manifest.json").string());

  Session session(dir.string());
  std::vector<float> x(kIC * kH * kW);
  for (int c = 0; c < kIC; ++c)
    for (int h = 0; h < kH; ++h)
      for (int w = 0; w < kW; ++w) x[(c * kH + h) * kW + w] = 0.5f * input(c, h, w);
  // A batch of two identical images exercises the per-image loop.
  std::vector<float> batch = x;
  batch.insert(batch.end(), x.begin(), x.end());
  auto result = session.run({{"x", ir::make_tensor({2, kIC, kH, kW}, batch, "x")}});
  const ir::Tensor& y = result.outputs.at("y");
  ASSERT_EQ(y.shape, (ir::Shape{2, kKN, kH, kW}));
  auto want = expected_output();
  auto got = ir::to_vector<std::int8_t>(y);
  EXPECT_EQ(std::vector<std::int8_t>(got.begin(), got.begin() + 32), want);
  EXPECT_EQ(std::vector<std::int8_t>(got.begin() + 32, got.end()), want);
  EXPECT_GT(result.device_cycles, 0u);
  ASSERT_EQ(result.layers.size(), 1u);

  {
    // Over TCP the cycles travel in the protocol (kAppRunCycles): the same figures.
    LoopbackServer server(1);
    SessionOptions so;
    so.transport = "tcp://127.0.0.1:" + std::to_string(server.port.get_future().get());
    Session remote(dir.string(), so);
    auto r2 = remote.run({{"x", ir::make_tensor({2, kIC, kH, kW}, batch, "x")}});
    EXPECT_EQ(r2.device_cycles, result.device_cycles);
    ASSERT_EQ(r2.layers.size(), result.layers.size());
    for (std::size_t i = 0; i < r2.layers.size(); ++i) {
      EXPECT_EQ(r2.layers[i].cycles, result.layers[i].cycles);
      EXPECT_EQ(r2.layers[i].opcode, result.layers[i].opcode);
    }
  }

  EXPECT_THROW(session.run({{"wrong", ir::make_tensor({1, kIC, kH, kW}, x, "wrong")}}), Error);
  EXPECT_THROW(Session((dir / "missing").string()), Error);
}

// ---- The TCP device server under abuse (issue 16): stalled, garbage, oversized and concurrent
// clients on loopback. Every wait is bounded by a client timeout, never by sleeping.

struct AbuseServer {
  std::atomic<bool> stop{false};
  std::uint16_t port = 0;
  std::thread thread;
  explicit AbuseServer(ServeOptions o) {
    std::promise<std::uint16_t> listening;
    o.port = 0;
    o.stop = &stop;
    o.on_listening = [&listening](std::uint16_t p) { listening.set_value(p); };
    thread = std::thread([o] { serve_tcp(o); });
    port = listening.get_future().get();
  }
  ~AbuseServer() {
    stop = true;
    thread.join();
  }
};

Socket raw_connect(std::uint16_t port) {
  Socket s(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw Error("cannot connect to the test server");
  return s;
}

void raw_send(const Socket& s, const Bytes& bytes) {
  ASSERT_EQ(::send(s.fd(), bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

Bytes frame_header(std::uint32_t app, std::uint32_t length) {
  Bytes h(8);
  store_be32(h.data(), app);
  store_be32(h.data() + 4, length);
  return h;
}

// Everything the server says until it closes the connection: the error frames' texts.
std::string read_until_close(const Socket& s) {
  std::string said;
  while (auto f = receive_frame(s, std::chrono::seconds(10), "server"))
    if (f->app == kAppDeviceError) said += std::string(f->payload.begin(), f->payload.end());
  return said;
}

TEST(TcpServer, StalledClientsDoNotDelayAWellFormedClient) {
  ServeOptions o;
  o.idle_timeout = std::chrono::hours(1);  // a serial server would wait on them for an hour
  o.frame_timeout = std::chrono::hours(1);
  AbuseServer server(o);
  Socket idle = raw_connect(server.port);  // connects and sends nothing
  Socket in_header = raw_connect(server.port);
  raw_send(in_header, {0, 0, 0});  // three bytes of a header, then silence
  Socket in_payload = raw_connect(server.port);
  Bytes part = frame_header(kAppDwp, 4096);
  part.resize(part.size() + 100, 0);  // 100 of 4096 payload bytes, then silence
  raw_send(in_payload, part);

  const auto t0 = std::chrono::steady_clock::now();
  auto tcp = connect_tcp("127.0.0.1", server.port, std::chrono::seconds(5));
  auto local = make_in_process_transport({});
  EXPECT_EQ(run_stream(*tcp), run_stream(*local));
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  RecordProperty("well_formed_client_ms", static_cast<int>(ms));
  std::printf("well-formed client served in %lld ms beside 3 stalled clients\n",
              static_cast<long long>(ms));
}

TEST(TcpServer, IdleAndStalledConnectionsAreClosedWithAMessage) {
  ServeOptions o;
  o.idle_timeout = std::chrono::milliseconds(200);
  o.frame_timeout = std::chrono::milliseconds(200);
  AbuseServer server(o);
  Socket idle = raw_connect(server.port);
  EXPECT_NE(read_until_close(idle).find("idle for 200 ms"), std::string::npos);
  Socket in_header = raw_connect(server.port);
  raw_send(in_header, {0, 0, 0, 1, 0});
  EXPECT_NE(read_until_close(in_header).find("inside a frame (header)"), std::string::npos);
  Socket in_payload = raw_connect(server.port);
  raw_send(in_payload, frame_header(kAppDwp, 64));
  EXPECT_NE(read_until_close(in_payload).find("inside a frame (payload)"), std::string::npos);
}

TEST(TcpServer, OversizedUnknownAndGarbageFramesAreRefusedAndOthersStillServed) {
  ServeOptions o;
  o.device.dram_bytes = 1 << 20;
  AbuseServer server(o);
  {
    Socket s = raw_connect(server.port);
    raw_send(s, frame_header(kAppDwp, 1u << 30));  // claims 1 GiB: refused before any payload
    const std::string said = read_until_close(s);
    EXPECT_NE(said.find("DWP frame of 1073741824 bytes exceeds the"), std::string::npos) << said;
    EXPECT_NE(said.find("1 MiB of DRAM"), std::string::npos) << said;
  }
  {
    Socket s = raw_connect(server.port);
    raw_send(s, frame_header(kAppMeta, 1u << 20));
    EXPECT_NE(read_until_close(s).find("META frame"), std::string::npos);
  }
  {
    Socket s = raw_connect(server.port);
    raw_send(s, frame_header(7, 4));
    EXPECT_NE(read_until_close(s).find("no Rah app 7"), std::string::npos);
  }
  {
    Socket s = raw_connect(server.port);
    Bytes garbage(300);
    std::uint32_t x = 12345;
    for (auto& b : garbage) b = static_cast<std::uint8_t>((x = x * 1103515245u + 12345u) >> 24);
    raw_send(s, garbage);
    EXPECT_FALSE(read_until_close(s).empty());
  }
  auto tcp = connect_tcp("127.0.0.1", server.port, std::chrono::seconds(5));
  auto local = make_in_process_transport({});
  EXPECT_EQ(run_stream(*tcp), run_stream(*local));
}

TEST(TcpServer, ConcurrentClientsEachGetTheirOwnResult) {
  AbuseServer server(ServeOptions{});
  // Each client loads the program and then runs its own input on its own board; every result
  // must equal the in-process run of that client's input (no client sees another's data).
  auto run_with_input = [](Transport& t, std::uint8_t salt) {
    Bytes meta;
    isa::append_meta_reset(meta);
    isa::append_meta_dispatch(meta, isa::DispatchTarget::kRah);
    t.write(kAppMeta, meta);
    t.write(kAppDwp, conv_program());
    Bytes x = input_bytes();
    for (auto& b : x) b = static_cast<std::uint8_t>(b ^ salt);
    Bytes stream;
    isa::append_dwp_packet(stream, kInput, x);
    isa::append_dwp_start(stream);
    t.write(kAppDwp, stream);
    return t.read(kAppDwp, 128 + isa::kDispatchOverheadBytes);
  };
  constexpr int kClients = 8;
  std::vector<std::future<Bytes>> results;
  for (int c = 0; c < kClients; ++c)
    results.push_back(std::async(std::launch::async, [&, c] {
      auto tcp = connect_tcp("127.0.0.1", server.port, std::chrono::seconds(10));
      return run_with_input(*tcp, static_cast<std::uint8_t>(c * 37));
    }));
  std::set<Bytes> distinct;
  for (int c = 0; c < kClients; ++c) {
    auto local = make_in_process_transport({});
    const Bytes got = results[c].get();
    EXPECT_EQ(got, run_with_input(*local, static_cast<std::uint8_t>(c * 37))) << "client " << c;
    distinct.insert(got);
  }
  EXPECT_EQ(distinct.size(), static_cast<std::size_t>(kClients));
}

TEST(TcpServer, ConnectionsBeyondTheCapAreToldBusy) {
  ServeOptions o;
  o.max_concurrent = 2;
  AbuseServer server(o);
  Socket a = raw_connect(server.port), b = raw_connect(server.port);
  Socket c = raw_connect(server.port);
  EXPECT_NE(read_until_close(c).find("server busy: 2 connections"), std::string::npos);
}

// A connect storm: far more clients than max_concurrent connect at once. Every connect must
// complete (the listen backlog holds them; with a backlog of 4 the kernel dropped SYNs and
// clients waited a second or more for the retransmit), the ones beyond the cap are told busy,
// and a well-formed client is still served after the storm.
TEST(TcpServer, ConnectStormIsAcceptedToldBusyAndThenServed) {
  ServeOptions o;
  o.max_concurrent = 4;
  AbuseServer server(o);
  constexpr int kStorm = 200;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Socket> storm;
  for (int i = 0; i < kStorm; ++i) storm.push_back(raw_connect(server.port));
  const auto connect_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  std::printf("%d connects completed in %lld ms\n", kStorm, static_cast<long long>(connect_ms));
  RecordProperty("storm_connect_ms", static_cast<int>(connect_ms));
  // Those beyond the first max_concurrent are each told busy and closed; close the rest.
  int busy = 0;
  for (int i = static_cast<int>(o.max_concurrent); i < kStorm; ++i)
    busy += read_until_close(storm[static_cast<std::size_t>(i)]).find("server busy") !=
            std::string::npos;
  EXPECT_EQ(busy, kStorm - static_cast<int>(o.max_concurrent));
  storm.clear();
  // The server frees a slot when its handler sees the close; until then a new client is told
  // busy, as any client may be, and tries again (bounded).
  auto local = make_in_process_transport({});
  const Bytes want = run_stream(*local);
  Bytes got;
  for (int attempt = 0; attempt < 200 && got.empty(); ++attempt) {
    try {
      auto tcp = connect_tcp("127.0.0.1", server.port, std::chrono::seconds(10));
      got = run_stream(*tcp);
    } catch (const Error&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace npukit::runtime
