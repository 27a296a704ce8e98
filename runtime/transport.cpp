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
      Bytes out = device_.take_dispatch_output();
      received_.insert(received_.end(), out.begin(), out.end());
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

 private:
  device::Device device_;
  Bytes received_;
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(Socket socket, std::string name, std::chrono::milliseconds timeout)
      : socket_(std::move(socket)), name_(std::move(name)), timeout_(timeout) {}

  void write(std::uint8_t app, ByteSpan bytes) override { send_frame(socket_, app, bytes); }

  Bytes read(std::uint8_t app, std::size_t n) override {
    Bytes& buffer = received_[app];
    while (buffer.size() < n) {
      auto frame = receive_frame(socket_, timeout_, name_);
      if (!frame) fail("{}: the device closed the connection", name_);
      if (frame->app == kAppDeviceError)
        fail("{}: device error: {}", name_,
             std::string(frame->payload.begin(), frame->payload.end()));
      Bytes& dest = received_[static_cast<std::uint8_t>(frame->app)];
      dest.insert(dest.end(), frame->payload.begin(), frame->payload.end());
    }
    return take_front(buffer, n);
  }

  std::string describe() const override { return name_; }

 private:
  Socket socket_;
  std::string name_;
  std::chrono::milliseconds timeout_;
  std::map<std::uint8_t, Bytes> received_;
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
