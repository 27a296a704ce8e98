#include "runtime/socket_io.h"

#include "common/error.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>

namespace npukit::runtime {

Socket::~Socket() {
  if (fd_ >= 0) ::close(fd_);
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

namespace {

void send_all(const Socket& s, const std::uint8_t* data, std::size_t n) {
  while (n > 0) {
    ssize_t sent = ::send(s.fd(), data, n, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      fail("TCP send failed: {}", std::strerror(errno));
    }
    data += sent;
    n -= static_cast<std::size_t>(sent);
  }
}

// Reads exactly n bytes; returns false if the peer closed before the first byte.
bool receive_exact(const Socket& s, std::uint8_t* data, std::size_t n,
                   std::chrono::milliseconds timeout, const std::string& what, bool at_boundary) {
  std::size_t got = 0;
  while (got < n) {
    pollfd p{s.fd(), POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (ready < 0) {
      if (errno == EINTR) continue;
      fail("{}: poll failed: {}", what, std::strerror(errno));
    }
    if (ready == 0)
      fail("{}: no data for {} ms (is the device running and was a start packet sent?)", what,
           timeout.count());
    ssize_t r = ::recv(s.fd(), data + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      fail("{}: receive failed: {}", what, std::strerror(errno));
    }
    if (r == 0) {
      if (got == 0 && at_boundary) return false;
      fail("{}: connection closed in the middle of a frame", what);
    }
    got += static_cast<std::size_t>(r);
  }
  return true;
}

}  // namespace

void send_frame(const Socket& s, std::uint32_t app, ByteSpan payload) {
  if (payload.size() > kMaxFrameBytes) fail("TCP frame of {} bytes is too large", payload.size());
  std::uint8_t header[8];
  store_be32(header, app);
  store_be32(header + 4, static_cast<std::uint32_t>(payload.size()));
  send_all(s, header, sizeof header);
  send_all(s, payload.data(), payload.size());
}

std::optional<Frame> receive_frame(const Socket& s, std::chrono::milliseconds timeout,
                                   const std::string& what) {
  std::uint8_t header[8];
  if (!receive_exact(s, header, sizeof header, timeout, what, true)) return std::nullopt;
  Frame f;
  f.app = load_be32(header);
  std::uint32_t length = load_be32(header + 4);
  if (length > kMaxFrameBytes)
    fail("{}: frame length {} exceeds the {}-byte limit (corrupt stream?)", what, length,
         kMaxFrameBytes);
  // Grown as the payload arrives, so a length word alone never allocates a gigabyte.
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  for (std::size_t got = 0; got < length;) {
    const std::size_t n = std::min<std::size_t>(kChunk, length - got);
    f.payload.resize(got + n);
    receive_exact(s, f.payload.data() + got, n, timeout, what, false);
    got += n;
  }
  return f;
}

}  // namespace npukit::runtime
