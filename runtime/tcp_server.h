// A device model served over TCP: the stand-alone board the TCP transport talks to.
#pragma once

#include "device/device.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <ostream>

namespace npukit::runtime {

struct ServeOptions {
  std::uint16_t port = 9090;  // 0 = any free port (see on_listening)
  std::string bind_address = "127.0.0.1";
  device::DeviceConfig device;
  int max_connections = -1;  // stop after this many connections; -1 = serve forever
  // Connections served at the same time; one more is told "busy" (an error frame) and closed.
  int max_concurrent = 16;
  // A connection that starts no frame for this long is closed (after an error frame saying so).
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(5)};
  // Once a frame has started, its header and payload must keep arriving: a gap this long between
  // bytes closes the connection. Also bounds a send to a client that does not read.
  std::chrono::milliseconds frame_timeout{std::chrono::seconds(10)};
  std::ostream* log = nullptr;
  std::function<void(std::uint16_t port)> on_listening;  // called once the socket listens
  const std::atomic<bool>* stop = nullptr;               // polled; true ends serving
};

// The largest META frame the server accepts (META commands are a few words).
inline constexpr std::uint32_t kMaxMetaFrameBytes = 64 * 1024;
// The largest DWP frame: the device's DRAM plus room for packet headers. Anything longer cannot
// be a program for this board; the server answers with an error frame and closes the connection.
std::uint64_t max_dwp_frame_bytes(const device::DeviceConfig& device);

// Serves up to max_concurrent connections at once, each on its own thread with its own fresh
// device (a fresh board: one client never sees another's program or data). The device model
// itself is one board: every call into a device holds one lock, so program runs are serialised
// and a waiting or stalled client never holds it. Frames on app 2 go to Device::receive_meta,
// app 1 to Device::receive_dwp as the bytes arrive (never buffered whole); whatever the device
// dispatches is sent back as app-1 frames, and an npukit::Error from the device as one
// kAppDeviceError frame (the connection then stays usable). A protocol error (unknown app, an
// oversized frame, a stall inside a frame, an idle connection) gets an error frame and the
// connection is closed. Throws npukit::Error if the port cannot be bound.
void serve_tcp(const ServeOptions& options);

// Serves one already connected stream socket (TCP, or a socketpair in tests and the protocol
// fuzzer) exactly as serve_tcp serves each connection, on the calling thread, until the peer
// closes or the connection is ended for a protocol error. Takes ownership of `fd`.
void serve_stream(int fd, const ServeOptions& options);

}  // namespace npukit::runtime
