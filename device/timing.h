// The Gati timing model: cycles from the instruction fields alone, never from the values.
//
// It follows the structure the v1.0.0 RTL shows (gati.md 14.14): a run pays a start-up (zeroth
// instruction, first instruction burst), every layer a START/acknowledge cost, and a CONV layer
// is KernelItr x ChannelItr serialised passes, each paying its own overhead (image re-request,
// weight load, array fill and drain, tail) plus the im2col stream of the padded image; passes that
// write output cost more; on 16,1,16 the array starts only after the stream, so a pass costs the
// stream plus a pass over the output pixels. With OnChipAcc = 0 a pass is bound by its DRAM traffic
// (one request at a time: 16-beat read bursts behind the read latency, 16-beat write bursts plus
// address cycles). A max pool re-streams its padded input per channel group. Dispatch emits
// header, payload words and footer at well under a word per cycle.
//
// Every layer is described by a vector of structural counts (`Terms`: passes, streamed elements,
// DRAM-bound excess cycles, ...). The cycles are the dot product of those counts with ONE table of
// constants, `timing_table.inc`, written by scripts/fit_timing.py (weighted least squares against
// the RTL's own counts in ../shared/rtl-calibration and ../shared/rtl-blocks). The table names
// where each constant comes from. Value code (conv.cpp, pool.cpp, ...) does not feed this model,
// so a timing-only run (`npukit profile`) gives exactly the cycles of a full simulation.
#pragma once

#include "isa/arch.h"
#include "isa/isa.h"

#include <array>
#include <cstdint>
#include <string_view>

namespace npukit::device::timing {

// The structural counts. Keep in sync with kTermInfo in timing.cpp and timing_table.inc.
enum Term : int {
  kRunStart,       // 1 per run: soft start, zeroth instruction, first instruction burst
  kLayer,          // 1 per layer: START broadcast, acknowledgements, instruction prefetch
  kConvPass,       // per CONV pass (KernelItr x ChannelItr): image re-request, fill/drain, tail
  kConvWritePass,  // per CONV pass that writes output (one per kernel iteration)
  kConvStream,    // im2col elements streamed (padded, row-skipped image per pass; 16,1,16: + OH*OW)
  kWeightBeat,    // 32-byte weight beats loaded per pass (ROW*COLS*N_SA bytes)
  kOutputBeat,    // 32-byte output beats written (mostly hidden behind the stream)
  kDramBound,     // OnChipAcc = 0: cycles a pass's DRAM traffic exceeds its stream
  kPoolGroup,     // per POOL channel group (a pass over the whole input)
  kPoolStream,    // POOL elements streamed (padded input per channel group)
  kBlockGroup,    // EltWise / RESIZE: per channel group of N_SA (a pass over the pixels)
  kEltStream,     // EltWise / activation: pixels streamed (channel groups x padded pixels)
  kFcStream,      // FC: input rows x output blocks of 32
  kResizeStream,  // RESIZE: output pixels written (channel groups x padded output pixels)
  kOtherStream,   // TRANSPOSE / RESHAPE / CONCAT / NMS: 32-byte beats moved (not recorded)
  kDispatchFrame,  // per dispatched frame: 3-word header, 3-word footer, start wait
  kDispatchBeat,   // per dispatched 32-byte beat: wait for data, 8 words, handshake
  kTermCount
};

using Terms = std::array<double, kTermCount>;

struct Constant {
  std::string_view name;
  double value;
  std::string_view source;  // "fit: ..." or the spec/testbench fact it comes from
};

// The one table (timing_table.inc), indexed by Term.
extern const std::array<Constant, kTermCount> kConstants;

// Hardware facts used inside the structural counts (not fitted).
inline constexpr double kReadLatency = 12;  // testbench AXI read latency (rtl-calibration README)
inline constexpr double kBurstBeats = 16;   // every DRAM burst is 16 beats (gati.md 14.14)
inline constexpr double kWriteAddressCycles = 4;  // "a few address cycles" per write burst (14.14)
// One request at a time: a read burst costs its latency plus 16 beats, a write burst 16 beats
// plus its address cycles.
inline constexpr double kReadCyclesPerBeat = (kReadLatency + kBurstBeats) / kBurstBeats;
inline constexpr double kWriteCyclesPerBeat = (kBurstBeats + kWriteAddressCycles) / kBurstBeats;

// What bounds a layer (the largest share of its cycles).
enum class Bound : std::uint8_t { kCompute, kDram, kOverhead, kDispatch };
std::string_view bound_name(Bound b);

// One layer's timing, from its instructions.
struct LayerTiming {
  Terms terms{};
  std::uint64_t cycles = 0;  // dot(terms, kConstants), rounded
  // The same cycles split by where they go (they sum to `cycles`, up to rounding):
  std::uint64_t overhead_cycles = 0;  // START, pass overheads, fill/drain, weight loads
  std::uint64_t compute_cycles = 0;   // im2col stream / array / block streams
  std::uint64_t dram_cycles = 0;      // DRAM-bound excess and output beats
  std::uint64_t dispatch_cycles = 0;  // dispatcher
  Bound bound = Bound::kOverhead;
  std::uint64_t macs = 0;
  std::uint64_t peak_macs_per_cycle = 0;  // ROW*COLS*N_SA (CONV), 32 (FC), 0 otherwise
  std::uint64_t dram_read_bytes = 0;      // image per pass, weights, bias, partial sums
  std::uint64_t dram_write_bytes = 0;     // output, partial sums
  std::uint64_t weight_bytes = 0;
  std::uint64_t passes = 0;  // CONV passes / POOL groups / 1
  std::uint64_t stream = 0;  // elements the im2col (or block) streams in total
};

struct LayerInput {
  isa::SaArch arch;
  const isa::Instruction* mega = nullptr;    // required
  const isa::Instruction* output = nullptr;  // required
  const isa::Instruction* tail = nullptr;
  std::uint64_t dispatch_bytes = 0;  // payload of the dispatch frame, 0 when not dispatched
};

// Never throws for field values a block would reject; malformed layers get the best estimate.
LayerTiming time_layer(const LayerInput& in);

// The run's fixed start-up (kRunStart), in cycles.
std::uint64_t run_start_cycles();

// dot(terms, kConstants).
double evaluate(const Terms& terms);

}  // namespace npukit::device::timing
