// The Gati v1.0.0 device model: a board in software. Its only input is what a board receives
// (DWP bytes on Rah app 1, META bytes on app 2) and its only output is what a board sends back
// (dispatch frames). Everything in between (DRAM, the configuration block, START sequencing, the
// megablocks, the tail pipeline, the dispatcher) is modelled bit-exactly (gati.md 4, 5, 6, 7, 14;
// DECISIONS.md). See docs/device.md.
//
// Execution is synchronous: the start command (a DWP packet with DS = 0, honoured only right after
// a data packet, gati.md 14.4) runs the whole program inside the receive_dwp() call that delivers
// it, then decoding resumes with the bytes after it. Bytes may arrive in any chunking; the DWP
// decoder is an incremental state machine like the RTL's.
//
// A malformed program throws npukit::Error from receive_dwp() naming the instruction and field
// (or the stream offset for framing errors). The run is abandoned, DRAM keeps what was written so
// far, dispatch frames already emitted stay available, and the decoder is ready for the next
// packet; bytes that followed the failing packet in the same receive_dwp() call are dropped. Every
// loop is bounded by sizes that were checked first, so a bad program never hangs.
#pragma once

#include "common/bytes.h"
#include "device/block.h"
#include "device/dram.h"
#include "device/timing.h"
#include "isa/arch.h"
#include "isa/isa.h"

#include <array>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace npukit::device {

struct DeviceConfig {
  isa::SaArch arch = isa::SaArch::default_arch();
  std::uint64_t dram_bytes = kDefaultDramBytes;
  std::uint32_t accbuf_depth = 1024;  // on-chip accumulator pixels (gaticc accbuf_size 4096)
  std::uint32_t max_instructions = 1u << 20;  // instruction region bound (32 MiB of instructions)
  // Warnings (errata, questionable programs) are also printed here as they happen if non-null.
  std::ostream* warnings = nullptr;
  // Timing only (`npukit profile`): sequence the instructions and run the timing model, but
  // compute no values (no megablock runs, no dispatch frames). Cycles equal a full run's.
  bool timing_only = false;
  // Kernel-split CONV pieces run unit by unit where that gives the same bytes (block.h,
  // UnitChain); false runs every layer to its end before the next (tests compare the two).
  bool unit_chains = true;
};

// What happened in one layer (one START group).
struct LayerStats {
  int layer_number = 0;  // START.LayerNumber
  isa::Opcode opcode = isa::Opcode::CONV;
  int instruction_index = 0;  // index of the megablock in the instruction region
  BlockTiming timing;         // cycles and bytes from the timing model (device/timing.h)
  timing::LayerTiming model;  // the timing model's full account of the layer
  // The blocks that received an instruction in this group, in the order their acknowledgements
  // reach the configuration block (the megablock first, the OutputBlock last: it acks after the
  // last write).
  std::vector<std::string> ack_order;
  bool dispatched = false;
  std::uint64_t dispatch_bytes = 0;  // payload bytes of the frame, if dispatched
  std::uint64_t start_cycle = 0;     // cycle the layer's START fired, from the soft start
  // This model's own wall time for the layer's block (what simulating it cost on this host, not
  // the board's time, which is `timing`): for finding where the simulator's time goes. Of
  // kernel-split pieces whose work units ran together (`chained`), each carries its setup and
  // the last also the units of all.
  double model_seconds = 0;
  bool chained = false;  // its work units ran unit by unit with its neighbours' (block.h UnitChain)
  // Chained, and took the previous piece's sums from the work unit's tile, not from DRAM.
  bool carried = false;
  // Chained, and its output words were not written: a later piece wrote the same words, and
  // nothing read them in between (the next piece carried the sums).
  bool output_unwritten = false;
};

struct RunStats {
  std::vector<LayerStats> layers;    // of the last run
  std::uint64_t total_cycles = 0;    // of the last run: soft start to last layer done
  std::uint64_t runs = 0;            // completed runs since construction or reset
  std::uint64_t dwp_bytes = 0;       // DWP bytes received
  std::uint64_t dwp_packets = 0;     // complete DWP packets (start commands included)
  std::uint64_t ignored_starts = 0;  // start packets not right after a data packet (14.4)
};

enum class DispatchChannel : std::uint8_t { kRah = 0, kUart = 1, kSpi = 2 };

class Device {
 public:
  explicit Device(DeviceConfig config = {});
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // Rah app 1: DWP bytes, any chunking. Runs the program when a valid start command arrives.
  void receive_dwp(ByteSpan bytes);
  // Rah app 2: META bytes, any chunking (RESET, DISPATCH channel, PAYLOAD_SIZE, INST_ORIGIN).
  void receive_meta(ByteSpan bytes);

  // Dispatch frames produced since the last call, concatenated (gati.md 5.5, 14.7):
  // FFFFFFFF | size | DispatchID | payload | FFFFFFFF 00000000 00000000.
  Bytes take_dispatch_output();
  // The same into `into` (its previous contents are dropped), whose storage the device keeps for
  // the next frames: a caller that passes the same buffer each image allocates nothing.
  void take_dispatch_output(Bytes& into);

  const RunStats& stats() const { return stats_; }
  const Diagnostics& diagnostics() const { return diag_; }
  const DeviceConfig& config() const { return config_; }
  DispatchChannel dispatch_channel() const { return dispatch_channel_; }
  Dram& dram() { return dram_; }
  const Dram& dram() const { return dram_; }

  // True when the DWP decoder is between packets (no partial packet pending).
  bool dwp_idle() const;
  // The META RESET pulse: decoder states, pending dispatch output, stats and warnings are
  // cleared; DRAM keeps its contents (the reset does not touch the board's DDR).
  void reset();

 private:
  struct DwpDecoder;
  struct MetaDecoder;
  void run_program();
  // The instruction at `index` of the region, decoded from `raw` (its bytes in DRAM now).
  const isa::Decoded& decode_instruction(
      std::uint64_t index, const std::array<std::uint8_t, isa::kInstructionBytes>& raw);
  void note_written(std::uint64_t addr, std::uint64_t bytes);
  bool was_written(std::uint64_t addr, std::uint64_t bytes) const;

  DeviceConfig config_;
  Dram dram_;
  Diagnostics diag_;
  RunStats stats_;
  Bytes dispatch_out_;
  DispatchChannel dispatch_channel_ = DispatchChannel::kRah;
  std::unique_ptr<DwpDecoder> dwp_;
  std::unique_ptr<MetaDecoder> meta_;
  UnitChainPtr chain_;  // CONV pieces whose work units wait (block.h)
  // Decoded instructions by index, with the bytes they were decoded from: a program run image
  // after image decodes each instruction once (its bytes are compared on every run).
  struct DecodedInstruction {
    std::array<std::uint8_t, isa::kInstructionBytes> raw{};
    isa::Decoded decoded;
  };
  std::vector<DecodedInstruction> decoded_;
  isa::Decoded decoded_uncached_;
  // Byte ranges [begin, end) written by DWP, merged and sorted: the configuration block refuses
  // an instruction region the host never wrote.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> written_;
};

}  // namespace npukit::device
