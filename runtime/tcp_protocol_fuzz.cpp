// libFuzzer: arbitrary bytes from a client to the TCP device server (one connection, over a
// socketpair) never crash, hang or make it allocate beyond the frame limit; the server answers
// with dispatch frames or error frames and closes. Seeds: fixtures/fuzz/tcp_protocol_fuzz.
#include "common/error.h"
#include "runtime/socket_io.h"
#include "runtime/tcp_server.h"

#include <sys/socket.h>
#include <unistd.h>
#include <cstddef>
#include <cstdint>
#include <thread>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace npukit::runtime;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 0;
  ServeOptions o;
  o.device.dram_bytes = 1 << 20;  // small board: the frame limit is about 1 MiB
  o.frame_timeout = std::chrono::seconds(2);
  o.idle_timeout = std::chrono::seconds(2);
  std::thread server([fd = sv[1], &o] { serve_stream(fd, o); });
  std::thread writer([fd = sv[0], data, size] {
    for (std::size_t sent = 0; sent < size;) {
      const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<std::size_t>(n);
    }
    ::shutdown(fd, SHUT_WR);
  });
  std::uint8_t sink[1 << 16];
  while (::recv(sv[0], sink, sizeof sink, 0) > 0) {
  }
  writer.join();
  server.join();
  ::close(sv[0]);
  return 0;
}
