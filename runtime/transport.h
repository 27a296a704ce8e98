// How the host talks to a Gati device (DECISIONS.md 11). The board's own MIPI/Rah library is
// closed, so a Transport carries the same two byte streams Rah does: app 1 (DWP to the device,
// dispatch frames back) and app 2 (META to the device). Two real implementations:
//   - in-process: the device model in this process;
//   - TCP: length-prefixed frames (4-byte big-endian app id, 4-byte big-endian length, payload)
//     to a device model served by `npukit serve` (or anything speaking the same framing).
#pragma once

#include "common/bytes.h"
#include "device/device.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace npukit::runtime {

inline constexpr std::uint8_t kAppDwp = 1;   // RAH_APP_ID
inline constexpr std::uint8_t kAppMeta = 2;  // META_APP_ID
// npukit extension on TCP only: the served device model reports an error (UTF-8 text) instead of
// silently dropping a malformed program.
inline constexpr std::uint32_t kAppDeviceError = 0xFFFF;
// npukit extension on TCP only: after each run the served device model sends its cycle counts
// (encode_run_cycles), so a remote run reports the same cycles as an in-process one.
inline constexpr std::uint32_t kAppRunCycles = 0xFFFE;

// The cycles of one run: the total and, per layer, the megablock and its cycles.
struct RunCycles {
  std::uint64_t total = 0;
  std::vector<std::pair<isa::Opcode, std::uint64_t>> layers;
  // Per layer, the model's own wall time (device::LayerStats::model_seconds): in-process devices
  // only; not part of the record a board sends, so empty over the protocol.
  std::vector<double> model_seconds;
};
RunCycles run_cycles_of(const device::RunStats& stats);
// Big-endian: u32 layer count, u64 total, then per layer u8 opcode and u64 cycles.
Bytes encode_run_cycles(const RunCycles& cycles);
// Throws npukit::Error when the bytes are not such a record.
RunCycles decode_run_cycles(ByteSpan bytes);

class Transport {
 public:
  virtual ~Transport() = default;
  // Sends bytes to the device on `app` (kAppDwp or kAppMeta).
  virtual void write(std::uint8_t app, ByteSpan bytes) = 0;
  // Returns exactly `n` bytes the device sent on `app`, waiting for them if needed. Throws
  // npukit::Error if the device reports an error, the connection closes, or nothing arrives in
  // time.
  virtual Bytes read(std::uint8_t app, std::size_t n) = 0;
  // "in-process device model (9,8,8)", "tcp://host:port", ... for messages.
  virtual std::string describe() const = 0;
  // The in-process device (its warnings, DRAM); nullptr for remote devices.
  virtual device::Device* local_device() { return nullptr; }
  // The cycles of the run that has just produced its dispatch frames, as the device reports
  // them (in-process: its statistics; TCP: the kAppRunCycles frame, waited for).
  virtual RunCycles run_cycles() = 0;
};

std::unique_ptr<Transport> make_in_process_transport(device::DeviceConfig config);

// Connects to host:port (TCP). Reads wait at most `timeout` for data.
std::unique_ptr<Transport> connect_tcp(
    const std::string& host, std::uint16_t port,
    std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Parses "inproc" or "tcp://HOST:PORT" and returns the transport; in-process uses `config`.
std::unique_ptr<Transport> open_transport(const std::string& spec, device::DeviceConfig config);

}  // namespace npukit::runtime
