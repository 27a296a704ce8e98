// A device model served over TCP: the stand-alone board the TCP transport talks to.
#pragma once

#include "device/device.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <ostream>

namespace npukit::runtime {

struct ServeOptions {
  std::uint16_t port = 9090;  // 0 = any free port (see on_listening)
  std::string bind_address = "127.0.0.1";
  device::DeviceConfig device;
  int max_connections = -1;  // stop after this many connections; -1 = serve forever
  std::ostream* log = nullptr;
  std::function<void(std::uint16_t port)> on_listening;  // called once the socket listens
  const std::atomic<bool>* stop = nullptr;               // polled; true ends serving
};

// Serves one connection at a time. Each connection gets a fresh device (a fresh board): frames on
// app 2 go to Device::receive_meta, app 1 to Device::receive_dwp; whatever the device dispatches
// is sent back as app-1 frames, and an npukit::Error from the device as one kAppDeviceError frame
// (the connection then stays usable). Throws npukit::Error if the port cannot be bound.
void serve_tcp(const ServeOptions& options);

}  // namespace npukit::runtime
