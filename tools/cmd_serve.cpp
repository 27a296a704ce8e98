// npukit serve: the device model as a stand-alone board on TCP (DECISIONS.md 11).
#include "common/error.h"
#include "isa/arch.h"
#include "runtime/tcp_server.h"
#include "tools/command_registry.h"

#include <iostream>
#include <memory>

namespace {

struct ServeArgs {
  std::string sa_arch = "9,8,8";
  int port = 9090;
  std::string bind = "127.0.0.1";
  int connections = -1;
  unsigned dram_mib = 512;
  int max_clients = 16;
  double idle_s = 300, frame_s = 10;
};

const npukit::tools::CommandRegistrar kServe{
    "serve", "Serve the Gati device model over TCP (length-prefixed Rah frames)",
    [](CLI::App& sub) {
      auto args = std::make_shared<ServeArgs>();
      sub.add_option("--port", args->port, "TCP port (0 = any free port)")
          ->check(CLI::Range(0, 65535))
          ->capture_default_str();
      sub.add_option("--bind", args->bind, "IPv4 address to listen on")->capture_default_str();
      sub.add_option("--sa-arch", args->sa_arch, "array configuration ROW,COLS,N_SA")
          ->capture_default_str();
      sub.add_option("--dram-mib", args->dram_mib, "device DRAM size in MiB")
          ->check(CLI::Range(1u, 4096u))
          ->capture_default_str();
      sub.add_option("--connections", args->connections,
                     "exit after serving this many connections (-1 = forever)")
          ->check(CLI::Range(-1, 1 << 30))
          ->capture_default_str();
      sub.add_option("--max-clients", args->max_clients,
                     "connections served at once; one more is told \"busy\" and closed")
          ->check(CLI::Range(1, 1024))
          ->capture_default_str();
      sub.add_option("--idle-timeout", args->idle_s,
                     "seconds a connection may stay silent between frames")
          ->check(CLI::Range(0.1, 86400.0))
          ->capture_default_str();
      sub.add_option("--frame-timeout", args->frame_s,
                     "seconds without a byte inside a frame (or a blocked send) before closing")
          ->check(CLI::Range(0.1, 3600.0))
          ->capture_default_str();
      sub.footer(
          "Each connection is a fresh board. Frames: 4-byte big-endian app id, 4-byte big-endian "
          "length, payload. App 1 carries DWP to the device and dispatch frames back, app 2 META. "
          "Device errors come back as app 0xFFFF frames holding the message. Clients are served "
          "concurrently, each on its own board state; device runs are serialised. A frame longer "
          "than the DRAM (plus packet headers) is refused from its header. See "
          "docs/robustness.md.");
      sub.callback([args] {
        npukit::runtime::ServeOptions o;
        o.port = static_cast<std::uint16_t>(args->port);
        o.bind_address = args->bind;
        o.device.arch = npukit::isa::SaArch::parse(args->sa_arch);
        o.device.dram_bytes = std::uint64_t{args->dram_mib} << 20;
        o.device.warnings = &std::cerr;
        o.max_connections = args->connections;
        o.max_concurrent = args->max_clients;
        o.idle_timeout = std::chrono::milliseconds(static_cast<long long>(args->idle_s * 1000));
        o.frame_timeout = std::chrono::milliseconds(static_cast<long long>(args->frame_s * 1000));
        o.log = &std::cerr;
        npukit::runtime::serve_tcp(o);
      });
    }};

}  // namespace
