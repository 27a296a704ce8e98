#include "runtime/tcp_server.h"

#include "common/error.h"
#include "runtime/socket_io.h"
#include "runtime/transport.h"

#include <fmt/ostream.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

namespace npukit::runtime {

std::uint64_t max_dwp_frame_bytes(const device::DeviceConfig& device) {
  // A DWP stream can usefully carry at most the whole DRAM, plus its 12-byte packet headers and
  // a start packet: one header per 64 KiB is far more than any encoder writes.
  const std::uint64_t limit = device.dram_bytes + device.dram_bytes / 4096 + 64 * 1024;
  return std::min<std::uint64_t>(limit, kMaxFrameBytes);
}

namespace {

using Clock = std::chrono::steady_clock;
// Waits are sliced so a stop request is honoured within this time.
constexpr int kSliceMs = 100;
constexpr std::size_t kChunkBytes = 64 * 1024;

class Server;

// Ends a connection: a protocol violation or stall (told to the peer), or a stop request.
struct ConnectionClosed {
  std::string reason;  // empty: the server is stopping
};

class Connection {
 public:
  Connection(Server& server, Socket socket, int id);
  void serve();

 private:
  enum class Wait { kReady, kTimeout, kStop };
  Wait wait_readable(std::chrono::milliseconds timeout);
  // Reads up to n bytes (at least one); throws ConnectionClosed on a stall or a close.
  std::size_t read_some(std::uint8_t* data, std::size_t n, const char* where);
  void read_exact(std::uint8_t* data, std::size_t n, const char* where);
  void send_error(const std::string& text);
  // The board's dispatch frames, then (when the frame finished a run) its cycles.
  void send_dispatch_output(std::uint64_t runs_before);
  void serve_frame(std::uint32_t app, std::uint64_t length);

  Server& server_;
  Socket socket_;
  int id_;
  device::Device board_;
};

class Server {
 public:
  explicit Server(const ServeOptions& o) : o_(o) {}
  const ServeOptions& options() const { return o_; }
  bool stopping() const { return o_.stop && o_.stop->load(); }
  void log(const std::string& text) {
    if (!o_.log) return;
    std::lock_guard lock(log_mutex_);
    *o_.log << "npukit serve: " << text << std::endl;
  }
  // The one board: held for every call into a device, never while waiting for the network.
  std::mutex& board() { return board_mutex_; }

  void run(const Socket& listener);

 private:
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  void reap(bool all);

  const ServeOptions& o_;
  std::mutex log_mutex_, board_mutex_;
  std::list<Worker> workers_;
};

Connection::Connection(Server& server, Socket socket, int id)
    : server_(server), socket_(std::move(socket)), id_(id), board_(server.options().device) {
  // A client that stops reading cannot block a send forever.
  const auto ms = server.options().frame_timeout.count();
  timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
  ::setsockopt(socket_.fd(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

Connection::Wait Connection::wait_readable(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (server_.stopping()) return Wait::kStop;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return Wait::kTimeout;
    pollfd p{socket_.fd(), POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, kSliceMs)));
    if (ready > 0) return Wait::kReady;
    if (ready < 0 && errno != EINTR) throw ConnectionClosed{std::strerror(errno)};
  }
}

std::size_t Connection::read_some(std::uint8_t* data, std::size_t n, const char* where) {
  const auto timeout = server_.options().frame_timeout;
  switch (wait_readable(timeout)) {
    case Wait::kStop:
      throw ConnectionClosed{};
    case Wait::kTimeout:
      throw ConnectionClosed{
          fmt::format("no data for {} ms inside a frame ({}); closing", timeout.count(), where)};
    case Wait::kReady:
      break;
  }
  for (;;) {
    const ssize_t r = ::recv(socket_.fd(), data, n, 0);
    if (r > 0) return static_cast<std::size_t>(r);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    throw ConnectionClosed{r == 0 ? fmt::format("connection closed inside a frame ({})", where)
                                  : fmt::format("receive failed: {}", std::strerror(errno))};
  }
}

void Connection::read_exact(std::uint8_t* data, std::size_t n, const char* where) {
  for (std::size_t got = 0; got < n;) got += read_some(data + got, n - got, where);
}

// The last words on a connection: the error frame, then a half-close and a short, bounded drain
// of whatever the peer still sends, so closing with unread input does not reset the connection
// and destroy the message before the peer reads it.
void Connection::send_error(const std::string& text) {
  try {
    send_frame(socket_, kAppDeviceError,
               ByteSpan(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
  } catch (const Error&) {
    return;  // the peer is gone or does not read; the connection ends anyway
  }
  ::shutdown(socket_.fd(), SHUT_WR);
  const auto deadline = Clock::now() + std::chrono::milliseconds(500);
  std::uint8_t sink[4096];
  while (Clock::now() < deadline && !server_.stopping()) {
    pollfd p{socket_.fd(), POLLIN, 0};
    if (::poll(&p, 1, kSliceMs) <= 0) continue;
    if (::recv(socket_.fd(), sink, sizeof sink, 0) <= 0) break;
  }
}

void Connection::send_dispatch_output(std::uint64_t runs_before) {
  Bytes out, cycles;
  {
    std::lock_guard lock(server_.board());
    out = board_.take_dispatch_output();
    // The cycles travel in the protocol (kAppRunCycles), after the run's dispatch frames.
    if (board_.stats().runs != runs_before)
      cycles = encode_run_cycles(run_cycles_of(board_.stats()));
  }
  if (!out.empty()) send_frame(socket_, kAppDwp, out);
  if (!cycles.empty()) send_frame(socket_, kAppRunCycles, cycles);
}

// One frame whose header has arrived: its payload goes to the board chunk by chunk as it
// arrives, so memory grows only with data actually received.
void Connection::serve_frame(std::uint32_t app, std::uint64_t length) {
  const auto& o = server_.options();
  const bool meta = app == kAppMeta, dwp = app == kAppDwp;
  if (!meta && !dwp) {
    throw ConnectionClosed{
        fmt::format("no Rah app {} on the device (app 1 carries DWP, app 2 META); closing", app)};
  }
  const std::uint64_t limit = meta ? kMaxMetaFrameBytes : max_dwp_frame_bytes(o.device);
  if (length > limit)
    throw ConnectionClosed{fmt::format(
        "{} frame of {} bytes exceeds the {}-byte limit for this device ({} MiB of DRAM); closing",
        meta ? "META" : "DWP", length, limit, o.device.dram_bytes >> 20)};
  std::uint64_t runs_before = 0;
  {
    std::lock_guard lock(server_.board());
    runs_before = board_.stats().runs;
  }
  std::string device_error;
  std::vector<std::uint8_t> chunk(
      static_cast<std::size_t>(std::min<std::uint64_t>(length, kChunkBytes)));
  for (std::uint64_t left = length; left > 0;) {
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(left, chunk.size()));
    const std::size_t got = read_some(chunk.data(), want, "payload");
    left -= got;
    if (got == 0 || !device_error.empty()) continue;  // after an error the rest is drained
    try {
      std::lock_guard lock(server_.board());
      if (meta)
        board_.receive_meta(ByteSpan(chunk.data(), got));
      else
        board_.receive_dwp(ByteSpan(chunk.data(), got));
    } catch (const Error& e) {
      device_error = e.what();
    }
  }
  if (!device_error.empty()) {
    server_.log(fmt::format("connection {}: device error: {}", id_, device_error));
    send_frame(
        socket_, kAppDeviceError,
        ByteSpan(reinterpret_cast<const std::uint8_t*>(device_error.data()), device_error.size()));
  }
  send_dispatch_output(runs_before);
}

void Connection::serve() {
  const auto& o = server_.options();
  try {
    for (;;) {
      switch (wait_readable(o.idle_timeout)) {
        case Wait::kStop:
          return;
        case Wait::kTimeout:
          throw ConnectionClosed{fmt::format("idle for {} ms without starting a frame; closing",
                                             o.idle_timeout.count())};
        case Wait::kReady:
          break;
      }
      std::uint8_t header[8];
      const ssize_t r = ::recv(socket_.fd(), header, sizeof header, 0);
      if (r == 0) return;  // an orderly close between frames
      if (r < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
        throw ConnectionClosed{fmt::format("receive failed: {}", std::strerror(errno))};
      }
      const auto got = static_cast<std::size_t>(r);
      read_exact(header + got, sizeof header - got, "header");
      serve_frame(load_be32(header), load_be32(header + 4));
    }
  } catch (const ConnectionClosed& c) {
    if (!c.reason.empty()) {
      server_.log(fmt::format("connection {}: {}", id_, c.reason));
      send_error(c.reason);
    }
  } catch (const Error& e) {  // a send failed: the peer is gone
    server_.log(fmt::format("connection {} dropped: {}", id_, e.what()));
  }
}

void Server::reap(bool all) {
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (all || it->done->load()) {
      it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
}

void Server::run(const Socket& listener) {
  int accepted = 0;
  while (!stopping() && (o_.max_connections < 0 || accepted < o_.max_connections)) {
    reap(false);
    pollfd p{listener.fd(), POLLIN, 0};
    if (::poll(&p, 1, kSliceMs) <= 0) continue;
    Socket client(::accept(listener.fd(), nullptr, nullptr));
    if (!client.valid()) continue;
    const int id = ++accepted;
    if (static_cast<int>(workers_.size()) >= std::max(1, o_.max_concurrent)) {
      const std::string text =
          fmt::format("server busy: {} connections are being served (the limit); try again later",
                      workers_.size());
      log(fmt::format("connection {} refused: {}", id, text));
      timeval tv{1, 0};
      ::setsockopt(client.fd(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      try {
        send_frame(client, kAppDeviceError,
                   ByteSpan(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
      } catch (const Error&) {
      }
      continue;
    }
    log(fmt::format("connection {} opened", id));
    auto done = std::make_shared<std::atomic<bool>>(false);
    auto socket = std::make_shared<Socket>(std::move(client));
    workers_.push_back({std::thread([this, socket, done, id] {
                          try {
                            Connection c(*this, std::move(*socket), id);
                            c.serve();
                          } catch (const std::exception& e) {
                            log(fmt::format("connection {} failed: {}", id, e.what()));
                          }
                          log(fmt::format("connection {} closed", id));
                          done->store(true);
                        }),
                        done});
  }
  reap(true);
}

}  // namespace

void serve_stream(int fd, const ServeOptions& o) {
  Server server(o);
  Connection c(server, Socket(fd), 1);
  c.serve();
}

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
  // A connect storm queues in the kernel instead of waiting for SYN retransmits.
  if (::listen(listener.fd(), 256) != 0) fail("listen failed: {}", std::strerror(errno));
  socklen_t len = sizeof addr;
  ::getsockname(listener.fd(), reinterpret_cast<sockaddr*>(&addr), &len);
  const std::uint16_t port = ntohs(addr.sin_port);
  Server server(o);
  server.log(fmt::format("device model ({}) listening on {}:{}, up to {} connections at once",
                         o.device.arch.str(), o.bind_address, port, o.max_concurrent));
  if (o.on_listening) o.on_listening(port);
  server.run(listener);
}

}  // namespace npukit::runtime
