// Blocking socket helpers shared by the TCP transport and the TCP device server.
#pragma once

#include "common/bytes.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace npukit::runtime {

// Owns a socket file descriptor.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

struct Frame {
  std::uint32_t app = 0;
  Bytes payload;
};

// Frames are capped so a corrupt length word cannot make us allocate gigabytes.
inline constexpr std::uint32_t kMaxFrameBytes = 1u << 30;

void send_frame(const Socket& s, std::uint32_t app, ByteSpan payload);
// Returns nullopt on an orderly close before a frame starts. Throws npukit::Error on timeout,
// a close inside a frame, or an oversized frame. `what` names the peer in messages.
std::optional<Frame> receive_frame(const Socket& s, std::chrono::milliseconds timeout,
                                   const std::string& what);

}  // namespace npukit::runtime
