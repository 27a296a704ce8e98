#include "runtime/tcp_server.h"

#include "common/error.h"
#include "runtime/socket_io.h"
#include "runtime/transport.h"

#include <fmt/ostream.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <cerrno>
#include <cstring>

namespace npukit::runtime {
namespace {

void log_line(const ServeOptions& o, const std::string& text) {
  if (o.log) *o.log << "npukit serve: " << text << std::endl;
}

bool stop_requested(const ServeOptions& o) { return o.stop && o.stop->load(); }

// One connection = one fresh board.
void serve_connection(const ServeOptions& o, const Socket& client) {
  device::Device board(o.device);
  // Idle connections are polled so a stop request is honoured within a second.
  constexpr auto kPoll = std::chrono::milliseconds(1000);
  while (!stop_requested(o)) {
    pollfd p{client.fd(), POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(kPoll.count()));
    if (ready == 0) continue;
    if (ready < 0 && errno == EINTR) continue;
    auto frame = receive_frame(client, std::chrono::seconds(30), "client");
    if (!frame) return;
    const std::uint64_t runs_before = board.stats().runs;
    try {
      if (frame->app == kAppMeta) {
        board.receive_meta(frame->payload);
      } else if (frame->app == kAppDwp) {
        board.receive_dwp(frame->payload);
      } else {
        fail("no Rah app {} on the device (app 1 carries DWP, app 2 META)", frame->app);
      }
    } catch (const Error& e) {
      log_line(o, fmt::format("device error: {}", e.what()));
      std::string text = e.what();
      send_frame(client, kAppDeviceError,
                 ByteSpan(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
    }
    Bytes out = board.take_dispatch_output();
    if (!out.empty()) send_frame(client, kAppDwp, out);
    // The cycles travel in the protocol (kAppRunCycles), after the run's dispatch frames.
    if (board.stats().runs != runs_before)
      send_frame(client, kAppRunCycles, encode_run_cycles(run_cycles_of(board.stats())));
  }
}

}  // namespace

void serve_tcp(const ServeOptions& o) {
  Socket listener(::socket(AF_INET, SOCK_STREAM, 0));
  if (!listener.valid()) fail("cannot create a socket: {}", std::strerror(errno));
  int one = 1;
  ::setsockopt(listener.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(o.port);
  if (::inet_pton(AF_INET, o.bind_address.c_str(), &addr.sin_addr) != 1)
    fail("bind address '{}' is not an IPv4 address", o.bind_address);
  if (::bind(listener.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    fail("cannot listen on {}:{}: {} (is another server using the port?)", o.bind_address, o.port,
         std::strerror(errno));
  if (::listen(listener.fd(), 4) != 0) fail("listen failed: {}", std::strerror(errno));
  socklen_t len = sizeof addr;
  ::getsockname(listener.fd(), reinterpret_cast<sockaddr*>(&addr), &len);
  const std::uint16_t port = ntohs(addr.sin_port);
  log_line(o, fmt::format("device model ({}) listening on {}:{}", o.device.arch.str(),
                          o.bind_address, port));
  if (o.on_listening) o.on_listening(port);

  for (int served = 0; o.max_connections < 0 || served < o.max_connections;) {
    if (stop_requested(o)) return;
    pollfd p{listener.fd(), POLLIN, 0};
    int ready = ::poll(&p, 1, 200);
    if (ready <= 0) continue;
    Socket client(::accept(listener.fd(), nullptr, nullptr));
    if (!client.valid()) continue;
    ++served;
    log_line(o, "connection opened");
    try {
      serve_connection(o, client);
    } catch (const Error& e) {
      log_line(o, fmt::format("connection dropped: {}", e.what()));
    }
    log_line(o, "connection closed");
  }
}

}  // namespace npukit::runtime
