#include "runtime/transport.h"

#include "common/error.h"
#include "runtime/socket_io.h"

#include <fmt/core.h>

#include <netdb.h>
#include <sys/socket.h>
#include <charconv>
#include <cstring>
#include <map>

namespace npukit::runtime {

RunCycles run_cycles_of(const device::RunStats& stats) {
  RunCycles c;
  c.total = stats.total_cycles;
  for (const auto& l : stats.layers) {
    c.layers.emplace_back(l.opcode, l.timing.cycles);
    c.model_seconds.push_back(l.model_seconds);
  }
  return c;
}

Bytes encode_run_cycles(const RunCycles& c) {
  Bytes out(12 + 9 * c.layers.size());
  store_be32(out.data(), static_cast<std::uint32_t>(c.layers.size()));
  store_be32(out.data() + 4, static_cast<std::uint32_t>(c.total >> 32));
  store_be32(out.data() + 8, static_cast<std::uint32_t>(c.total));
  std::uint8_t* p = out.data() + 12;
  for (const auto& [op, cycles] : c.layers) {
    p[0] = static_cast<std::uint8_t>(op);
    store_be32(p + 1, static_cast<std::uint32_t>(cycles >> 32));
    store_be32(p + 5, static_cast<std::uint32_t>(cycles));
    p += 9;
  }
  return out;
}

RunCycles decode_run_cycles(ByteSpan b) {
  if (b.size() < 12)
    fail("run-cycles record from the device: {} bytes, shorter than its 12-byte header", b.size());
  const std::uint64_t n = load_be32(b.data());
  if (b.size() != 12 + 9 * n)
    fail("run-cycles record from the device: {} bytes for {} layers (expected {})", b.size(), n,
         12 + 9 * n);
  RunCycles c;
  c.total = (std::uint64_t{load_be32(b.data() + 4)} << 32) | load_be32(b.data() + 8);
  const std::uint8_t* p = b.data() + 12;
  for (std::uint64_t i = 0; i < n; ++i, p += 9)
    c.layers.emplace_back(static_cast<isa::Opcode>(p[0]),
                          (std::uint64_t{load_be32(p + 1)} << 32) | load_be32(p + 5));
  return c;
}

namespace {

// Takes n bytes from the front of a receive buffer.
Bytes take_front(Bytes& buffer, std::size_t n) {
  Bytes out(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(n));
  buffer.erase(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(n));
  return out;
}

class InProcessTransport final : public Transport {
 public:
  explicit InProcessTransport(device::DeviceConfig config) : device_(config) {}

  void write(std::uint8_t app, ByteSpan bytes) override {
    if (app == kAppMeta) {
      device_.receive_meta(bytes);
    } else if (app == kAppDwp) {
      device_.receive_dwp(bytes);
      device_.take_dispatch_output(out_);  // into a kept buffer: no allocation per image
      received_.insert(received_.end(), out_.begin(), out_.end());
    } else {
      fail("no Rah app {} on the device (app 1 carries DWP, app 2 META)", app);
    }
  }

  Bytes read(std::uint8_t app, std::size_t n) override {
    if (app != kAppDwp) fail("the device sends nothing on app {} (dispatch frames use app 1)", app);
    // The model runs synchronously: whatever it will send has been sent.
    if (received_.size() < n)
      fail(
          "expected {} bytes of dispatch output from the device, it sent {} (does the program "
          "dispatch the layers the manifest expects?)",
          n, received_.size());
    return take_front(received_, n);
  }

  std::string describe() const override {
    return fmt::format("in-process device model ({})", device_.config().arch.str());
  }
  device::Device* local_device() override { return &device_; }
  RunCycles run_cycles() override { return run_cycles_of(device_.stats()); }

 private:
  device::Device device_;
  Bytes received_, out_;
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(Socket socket, std::string name, std::chrono::milliseconds timeout)
      : socket_(std::move(socket)), name_(std::move(name)), timeout_(timeout) {}

  void write(std::uint8_t app, ByteSpan bytes) override { send_frame(socket_, app, bytes); }

  Bytes read(std::uint8_t app, std::size_t n) override {
    Bytes& buffer = received_[app];
    while (buffer.size() < n) receive_one();
    return take_front(buffer, n);
  }

  RunCycles run_cycles() override {
    while (cycles_.empty()) receive_one();
    RunCycles c = std::move(cycles_.front());
    cycles_.erase(cycles_.begin());
    return c;
  }

  std::string describe() const override { return name_; }

 private:
  Socket socket_;
  std::string name_;
  std::chrono::milliseconds timeout_;
  std::map<std::uint32_t, Bytes> received_;
  std::vector<RunCycles> cycles_;

  void receive_one() {
    auto frame = receive_frame(socket_, timeout_, name_);
    if (!frame) fail("{}: the device closed the connection", name_);
    if (frame->app == kAppDeviceError)
      fail("{}: device error: {}", name_,
           std::string(frame->payload.begin(), frame->payload.end()));
    if (frame->app == kAppRunCycles) {
      cycles_.push_back(decode_run_cycles(frame->payload));
      return;
    }
    Bytes& dest = received_[frame->app];
    dest.insert(dest.end(), frame->payload.begin(), frame->payload.end());
  }
};

}  // namespace

std::unique_ptr<Transport> make_in_process_transport(device::DeviceConfig config) {
  return std::make_unique<InProcessTransport>(config);
}

std::unique_ptr<Transport> connect_tcp(const std::string& host, std::uint16_t port,
                                       std::chrono::milliseconds timeout) {
  const std::string name = fmt::format("tcp://{}:{}", host, port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port_text = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &found); rc != 0)
    fail("{}: cannot resolve host: {}", name, gai_strerror(rc));
  std::string last_error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
    if (!s.valid()) continue;
    if (::connect(s.fd(), a->ai_addr, a->ai_addrlen) == 0) {
      ::freeaddrinfo(found);
      return std::make_unique<TcpTransport>(std::move(s), name, timeout);
    }
    last_error = std::strerror(errno);
  }
  ::freeaddrinfo(found);
  fail("{}: cannot connect: {} (start a device with `npukit serve --port {}`)", name, last_error,
       port);
}

std::unique_ptr<Transport> open_transport(const std::string& spec, device::DeviceConfig config) {
  if (spec == "inproc" || spec.empty()) return make_in_process_transport(config);
  constexpr std::string_view kTcp = "tcp://";
  if (spec.starts_with(kTcp)) {
    std::string rest = spec.substr(kTcp.size());
    auto colon = rest.rfind(':');
    unsigned port = 0;
    if (colon != std::string::npos) {
      const char* b = rest.data() + colon + 1;
      const char* e = rest.data() + rest.size();
      auto [p, ec] = std::from_chars(b, e, port);
      if (ec != std::errc() || p != e || port == 0 || port > 65535) colon = std::string::npos;
    }
    if (colon == std::string::npos)
      fail("transport '{}': expected tcp://HOST:PORT with a port in 1..65535", spec);
    return connect_tcp(rest.substr(0, colon), static_cast<std::uint16_t>(port));
  }
  fail(
      "unknown transport '{}': use 'inproc' (the device model in this process) or "
      "tcp://HOST:PORT (a device served by `npukit serve`)",
      spec);
}

}  // namespace npukit::runtime
