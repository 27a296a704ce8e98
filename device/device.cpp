#include "device/device.h"

#include "device/timing.h"

#include "common/error.h"
#include "isa/dispatch.h"
#include "isa/dwp.h"
#include "isa/meta.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <exception>
#include <optional>

namespace npukit::device {

using isa::Field;
using isa::Opcode;

// ---------------------------------------------------------------------------------------------
// DWP decoder: the RTL's fifo_wr_ctrl FSM (gati.md 5.2), fed any number of bytes at a time.
// IDLE -> (word == SOP) -> SIZE -> ADDR -> PAYLOAD (DS bytes) -> IDLE. Words that are not SOP
// in IDLE are skipped, as the RTL does, and reported once per run of garbage.

struct Device::DwpDecoder {
  enum class State { kIdle, kSize, kAddr, kPayload };
  State state = State::kIdle;
  std::array<std::uint8_t, 4> word{};
  int word_fill = 0;
  std::uint64_t stream_offset = 0;  // bytes consumed so far
  std::uint64_t packet_offset = 0;  // offset of the current packet's SOP
  std::uint32_t size = 0;
  std::uint32_t address = 0;
  std::uint32_t remaining = 0;
  bool last_was_data = false;  // the previous complete packet carried data (gati.md 14.4)
  std::optional<std::uint64_t> garbage_from;
};

struct Device::MetaDecoder {
  enum class State { kIdle, kSize, kType, kData };
  State state = State::kIdle;
  std::array<std::uint8_t, isa::kMetaWordBytes> word{};
  int word_fill = 0;
  std::uint64_t stream_offset = 0;
  std::uint64_t packet_offset = 0;
  std::uint64_t size = 0;
  std::uint64_t type = 0;
  std::uint32_t last_payload_size = 0;
};

Device::Device(DeviceConfig config)
    : config_(config),
      dram_(config.dram_bytes),
      dwp_(std::make_unique<DwpDecoder>()),
      meta_(std::make_unique<MetaDecoder>()),
      chain_(make_unit_chain()) {
  diag_.set_sink(config_.warnings);
}

Device::~Device() = default;

bool Device::dwp_idle() const {
  return dwp_->state == DwpDecoder::State::kIdle && dwp_->word_fill == 0;
}

void Device::reset() {
  const std::uint64_t dwp_offset = dwp_->stream_offset;
  *dwp_ = DwpDecoder{};
  dwp_->stream_offset = dwp_offset;
  dispatch_out_.clear();
  stats_ = RunStats{};
  diag_.clear();
  dispatch_channel_ = DispatchChannel::kRah;
}

Bytes Device::take_dispatch_output() {
  Bytes out;
  out.swap(dispatch_out_);
  return out;
}

void Device::take_dispatch_output(Bytes& into) {
  into.clear();
  into.swap(dispatch_out_);
}

void Device::note_written(std::uint64_t addr, std::uint64_t bytes) {
  if (bytes == 0) return;
  std::uint64_t lo = addr, hi = addr + bytes;
  // Merge with every overlapping or touching range; the list stays sorted and disjoint.
  auto it =
      std::lower_bound(written_.begin(), written_.end(), std::make_pair(lo, std::uint64_t{0}));
  if (it != written_.begin() && std::prev(it)->second >= lo) --it;
  auto first = it;
  while (it != written_.end() && it->first <= hi) {
    lo = std::min(lo, it->first);
    hi = std::max(hi, it->second);
    ++it;
  }
  it = written_.erase(first, it);
  written_.insert(it, {lo, hi});
}

bool Device::was_written(std::uint64_t addr, std::uint64_t bytes) const {
  if (bytes == 0) return true;
  auto it =
      std::upper_bound(written_.begin(), written_.end(), std::make_pair(addr, ~std::uint64_t{0}));
  if (it == written_.begin()) return false;
  --it;
  return it->first <= addr && it->second >= addr + bytes;
}

void Device::receive_dwp(ByteSpan bytes) {
  DwpDecoder& d = *dwp_;
  std::size_t i = 0;
  stats_.dwp_bytes += bytes.size();
  while (i < bytes.size()) {
    if (d.state == DwpDecoder::State::kPayload) {
      // Bulk copy of the payload straight into DRAM.
      const std::size_t n = std::min<std::size_t>(d.remaining, bytes.size() - i);
      const std::uint64_t addr = std::uint64_t{d.address} + (d.size - d.remaining);
      // The message is formatted only for a range that fails (no allocation per packet).
      if (addr > dram_.size() || n > dram_.size() - addr)
        dram_.check_range(addr, n, fmt::format("DWP packet at stream byte {}", d.packet_offset));
      dram_.write(addr, bytes.subspan(i, n), "DWP packet");
      note_written(addr, n);
      d.remaining -= static_cast<std::uint32_t>(n);
      d.stream_offset += n;
      i += n;
      if (d.remaining == 0) {
        d.state = DwpDecoder::State::kIdle;
        d.last_was_data = true;
        ++stats_.dwp_packets;
      }
      continue;
    }
    d.word[d.word_fill++] = bytes[i++];
    ++d.stream_offset;
    if (d.word_fill < 4) continue;
    d.word_fill = 0;
    const std::uint32_t w = load_be32(d.word.data());
    const std::uint64_t word_offset = d.stream_offset - 4;
    switch (d.state) {
      case DwpDecoder::State::kIdle:
        if (w == isa::kDwpSop) {
          if (d.garbage_from) {
            diag_.warn(0, fmt::format("DWP stream bytes [{}, {}) are not a packet (no SOP word "
                                      "FFFFFFFF); the decoder skipped them",
                                      *d.garbage_from, word_offset));
            d.garbage_from.reset();
          }
          d.packet_offset = word_offset;
          d.state = DwpDecoder::State::kSize;
        } else if (!d.garbage_from) {
          d.garbage_from = word_offset;
        }
        break;
      case DwpDecoder::State::kSize:
        d.size = w;
        d.state = DwpDecoder::State::kAddr;
        break;
      case DwpDecoder::State::kAddr: {
        d.address = w;
        d.state = DwpDecoder::State::kIdle;
        if (d.size == 0) {
          ++stats_.dwp_packets;
          if (!d.last_was_data) {
            ++stats_.ignored_starts;
            diag_.warn(0, fmt::format("start packet at stream byte {} ignored: the board starts "
                                      "only on a start packet right after a data packet "
                                      "(gati.md 14.4)",
                                      d.packet_offset));
            break;
          }
          d.last_was_data = false;
          run_program();
          break;
        }
        if (d.size % 32 != 0)
          fail(
              "DWP packet at stream byte {}: DS = {} bytes is not a multiple of 32 (the write "
              "controller writes whole 32-byte DRAM words); pad the payload",
              d.packet_offset, d.size);
        if (d.address % 32 != 0)
          fail("DWP packet at stream byte {}: ADDR = 0x{:x} is not 32-byte aligned",
               d.packet_offset, d.address);
        if (std::uint64_t{d.address} + d.size > dram_.size())
          fail("DWP packet at stream byte {}: [0x{:x}, 0x{:x}) is outside the {} bytes of DRAM",
               d.packet_offset, d.address, std::uint64_t{d.address} + d.size, dram_.size());
        d.remaining = d.size;
        d.state = DwpDecoder::State::kPayload;
        break;
      }
      case DwpDecoder::State::kPayload:
        break;  // handled above
    }
  }
}

void Device::receive_meta(ByteSpan bytes) {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    MetaDecoder& m = *meta_;
    m.word[m.word_fill++] = bytes[i];
    ++m.stream_offset;
    if (m.word_fill < static_cast<int>(isa::kMetaWordBytes)) continue;
    m.word_fill = 0;
    const std::uint64_t w = load_be48(m.word.data());
    const std::uint64_t word_offset = m.stream_offset - isa::kMetaWordBytes;
    switch (m.state) {
      case MetaDecoder::State::kIdle:
        if (w == isa::kMetaSop) {
          m.packet_offset = word_offset;
          m.state = MetaDecoder::State::kSize;
        } else {
          diag_.warn(
              0, fmt::format("META word at stream byte {} is not an SOP; skipped", word_offset));
        }
        break;
      case MetaDecoder::State::kSize:
        m.size = w;
        m.state = MetaDecoder::State::kType;
        break;
      case MetaDecoder::State::kType:
        m.type = w;
        if (m.size != 0) {
          m.state = MetaDecoder::State::kData;
          break;
        }
        m.state = MetaDecoder::State::kIdle;
        if (m.type == static_cast<std::uint64_t>(isa::MetaType::kReset)) {
          reset();
        } else {
          diag_.warn(0, fmt::format("META packet at stream byte {}: type {} with no data word "
                                    "is ignored (meta_app.v acts only on RESET without data)",
                                    m.packet_offset, m.type));
        }
        break;
      case MetaDecoder::State::kData:
        m.state = MetaDecoder::State::kIdle;
        if (m.type == static_cast<std::uint64_t>(isa::MetaType::kDispatch)) {
          if (w > 2)
            fail("META DISPATCH at stream byte {}: target {} is not 0 (Rah), 1 (UART) or 2 (SPI)",
                 m.packet_offset, w);
          dispatch_channel_ = static_cast<DispatchChannel>(w);
        } else if (m.type == static_cast<std::uint64_t>(isa::MetaType::kPayloadSize)) {
          m.last_payload_size = static_cast<std::uint32_t>(w);
        } else {
          diag_.warn(0, fmt::format("META packet at stream byte {}: type {} is not handled by "
                                    "the board (meta_app.v); ignored",
                                    m.packet_offset, m.type));
        }
        break;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Configuration block + START sequencing (gati.md 4).

namespace {

struct Group {
  std::optional<isa::Instruction> mega, output, tail;
  int mega_index = -1, output_index = -1, tail_index = -1;
  bool empty() const { return !mega && !output && !tail; }
};

struct LayerHistory {
  Opcode opcode;
  std::uint32_t kernel_itr;
};

std::string inst_where(int index, std::uint64_t addr, Opcode op) {
  return fmt::format("instruction {} at DRAM 0x{:x} ({})", index, addr, isa::name(op));
}

}  // namespace

const isa::Decoded& Device::decode_instruction(
    std::uint64_t index, const std::array<std::uint8_t, isa::kInstructionBytes>& raw) {
  constexpr std::uint64_t kMaxCached = 1 << 16;  // instructions kept (resnet50 has 330)
  if (index >= kMaxCached) return decoded_uncached_ = isa::decode(raw);
  if (index >= decoded_.size()) decoded_.resize(index + 1);
  DecodedInstruction& d = decoded_[index];
  if (d.raw != raw || !d.decoded.instruction) {
    d.decoded = isa::decode(raw);
    d.raw = raw;
  }
  return d.decoded;
}

void Device::run_program() {
  // The layers' stats are rewritten in place (their ack_order storage kept from run to run) and
  // trimmed to the layers this run completed, also when it throws.
  std::size_t layers_done = 0;
  struct Trim {
    std::vector<LayerStats>& layers;
    const std::size_t& done;
    ~Trim() { layers.resize(done); }
  } trim{stats_.layers, layers_done};
  stats_.total_cycles = 0;
  const isa::SaArch& arch = config_.arch;

  // The zeroth instruction: the instruction region [start, end).
  std::array<std::uint8_t, isa::kInstructionBytes> raw{};
  if (!was_written(0, raw.size()))
    fail(
        "start command: DRAM address 0 (the zeroth instruction) was never written; send the "
        "GML (instruction packet at address 0) before the input and start packets");
  dram_.read(0, raw, "configuration block (zeroth instruction)");
  const isa::Zeroth zeroth = isa::Zeroth::decode(raw);
  if (zeroth.start % 32 != 0 || zeroth.end % 32 != 0)
    fail(
        "zeroth instruction: ZerothStartAddress 0x{:x} and ZerothEndAddress 0x{:x} must be "
        "32-byte aligned",
        zeroth.start, zeroth.end);
  if (zeroth.start < 32)
    fail(
        "zeroth instruction: ZerothStartAddress 0x{:x} overlaps the zeroth instruction itself; "
        "instructions start at 32",
        zeroth.start);
  if (zeroth.end <= zeroth.start)
    fail(
        "zeroth instruction: ZerothEndAddress 0x{:x} is not after ZerothStartAddress 0x{:x} "
        "(the end is exclusive: start + 32 * instructions)",
        zeroth.end, zeroth.start);
  const std::uint64_t n_inst = (zeroth.end - zeroth.start) / 32;
  if (n_inst > config_.max_instructions)
    fail(
        "zeroth instruction: the region [0x{:x}, 0x{:x}) holds {} instructions, more than the "
        "{} this model accepts",
        zeroth.start, zeroth.end, n_inst, config_.max_instructions);
  if (zeroth.end > dram_.size())
    fail("zeroth instruction: ZerothEndAddress 0x{:x} is outside the {} bytes of DRAM", zeroth.end,
         dram_.size());
  if (!was_written(zeroth.start, zeroth.end - zeroth.start))
    fail(
        "zeroth instruction: the instruction region [0x{:x}, 0x{:x}) ({} instructions) reaches "
        "beyond what the host wrote; check ZerothEndAddress against the instruction packet",
        zeroth.start, zeroth.end, n_inst);

  // Cycles come from the timing model (device/timing.h), never from the value code, so a
  // timing-only run gives the same figures. The run's start-up is its kRunStart constant.
  std::uint64_t cycle = timing::run_start_cycles();
  // CONV pieces' work units may wait in the chain (block.h UnitChain) until a layer other than a
  // CONV, a dispatch, the end of the program, or a throw; their wall time goes to the last
  // piece's stats.
  UnitChain& chain = *chain_;
  begin_program(chain, zeroth.start, zeroth.end);
  // `with_current`: the layer being run has waiting pieces of its own (its stats entry is not
  // yet among the layers done).
  const auto account_chain = [&](bool with_current = false) {
    const ChainTime t = take_chain_time(chain);
    if (t.layer_number == 0) return 0.0;
    for (std::size_t i = layers_done + (with_current ? 1 : 0); i-- > 0;) {
      LayerStats& done = stats_.layers[i];
      if (done.layer_number < t.first_layer_number) break;
      if (done.layer_number > t.layer_number) continue;
      done.chained = t.first_layer_number != t.layer_number;
      const int bit = done.layer_number - t.first_layer_number;
      done.carried = bit < 64 && (t.carried >> bit & 1);
      done.output_unwritten = bit < 64 && (t.unwritten >> bit & 1);
      if (done.layer_number == t.layer_number) done.model_seconds += t.seconds;
    }
    return t.seconds;
  };
  const auto run_waiting = [&](bool with_current = false) {
    run_unit_chain(chain);
    account_chain(with_current);
  };
  // A throw (bad instruction, bad field) leaves DRAM as the layers before it left it.
  struct RunWaitingOnThrow {
    UnitChain& chain;
    int exceptions = std::uncaught_exceptions();
    ~RunWaitingOnThrow() {
      if (std::uncaught_exceptions() == exceptions) return;
      try {
        run_unit_chain(chain);
      } catch (...) {  // the first error is the one to report
      }
    }
  } run_on_throw{chain};
  Group group;
  std::optional<LayerHistory> prev, prev2;
  struct RaggedResize {
    int layer;
    std::uint64_t begin, end;
  };
  std::vector<RaggedResize> ragged_resizes;
  int expected_layer = 1;
  std::optional<std::uint64_t> total_layers;
  bool finished = false;

  for (std::uint64_t i = 0; i < n_inst && !finished; ++i) {
    const std::uint64_t addr = zeroth.start + i * 32;
    dram_.read(addr, raw, "configuration block");
    const int index = static_cast<int>(i);
    const isa::Decoded& decoded = decode_instruction(i, raw);
    if (!decoded.instruction)
      fail(
          "instruction {} at DRAM 0x{:x}: opcode 0x{:x} is not an ISA v16 opcode; the bus "
          "master has no block to send it to",
          index, addr, decoded.opcode_value);
    if (!decoded.problems.empty())
      fail("instruction {} at DRAM 0x{:x}: {}", index, addr, decoded.problems.front());
    const isa::Instruction& inst = *decoded.instruction;
    const Opcode op = inst.opcode();

    if (op == Opcode::OutputBlock || op == Opcode::TailBlock) {
      auto& slot = op == Opcode::OutputBlock ? group.output : group.tail;
      int& slot_index = op == Opcode::OutputBlock ? group.output_index : group.tail_index;
      if (slot)
        fail(
            "{}: a second {} before START (the first is instruction {}); the configuration "
            "block would wait forever for the first one's acknowledgement",
            inst_where(index, addr, op), isa::name(op), slot_index);
      slot = inst;
      slot_index = index;
      continue;
    }
    if (op != Opcode::START) {
      if (group.mega)
        fail(
            "{}: a second megablock in one START group (instruction {} is {}); put a START "
            "between them",
            inst_where(index, addr, op), group.mega_index, isa::name(group.mega->opcode()));
      group.mega = inst;
      group.mega_index = index;
      continue;
    }

    // START: fire the blocks that received an instruction, wait for their acks.
    const std::uint64_t layer_number = inst.get(Field::START_LayerNumber);
    const std::uint64_t total = inst.get(Field::START_TotalLayers);
    if (total_layers && *total_layers != total)
      diag_.warn(static_cast<int>(layer_number),
                 fmt::format("{}: START.TotalLayers = {} but an earlier START said {}",
                             inst_where(index, addr, op), total, *total_layers));
    total_layers = total;
    if (!group.mega) {
      if (group.output || group.tail)
        fail(
            "{}: the group has an {} but no megablock, so nothing would ever feed it and the "
            "layer would never finish",
            inst_where(index, addr, op), group.output ? "OutputBlock" : "TailBlock");
      diag_.warn(static_cast<int>(layer_number),
                 fmt::format("{}: START with no instruction since the previous START",
                             inst_where(index, addr, op)));
      if (layer_number == total) finished = true;
      continue;
    }
    if (layer_number != static_cast<std::uint64_t>(expected_layer))
      diag_.warn(static_cast<int>(layer_number),
                 fmt::format("{}: START.LayerNumber = {} but this is megablock {}",
                             inst_where(index, addr, op), layer_number, expected_layer));

    const Opcode mega_op = group.mega->opcode();
    const int layer = static_cast<int>(layer_number);
    LayerContext ctx{arch,
                     dram_,
                     *group.mega,
                     group.output ? &*group.output : nullptr,
                     group.tail ? &*group.tail : nullptr,
                     layer,
                     diag_,
                     group.mega_index,
                     group.output_index,
                     group.tail_index,
                     config_.accbuf_depth};

    // Errata that depend on the sequence of layers (gati.md 14.6).
    if (mega_op == Opcode::POOL && expected_layer == 1 && !group.tail)
      diag_.erratum(layer, Erratum::kPoolFirstNeedsTail,
                    "a POOL first layer without a TailBlock hangs; add an empty TailBlock");
    if (mega_op == Opcode::POOL && prev && prev->opcode == Opcode::POOL && prev2 &&
        prev2->opcode == Opcode::CONV)
      diag_.erratum(layer, Erratum::kConvPoolPool, "this POOL follows CONV -> POOL");
    if (mega_op == Opcode::CONV && arch == isa::kArch9x4x4 && prev &&
        prev->opcode == Opcode::CONV && prev->kernel_itr % 2 == 1)
      diag_.erratum(layer, Erratum::kOddKernelItr9x4x4,
                    fmt::format("the previous conv has KernelItr = {}", prev->kernel_itr));
    if (prev && prev->opcode == Opcode::CONCAT)
      diag_.erratum(
          layer, Erratum::kConcatNoLayerDone,
          fmt::format("layer {} is a CONCAT, so this layer never starts on the board", layer - 1));
    // A RESIZE output whose pixel padding holds a non-zero byte on the board (gati.md 14.15):
    // harmless to layers that address pixels by coordinates (CONV, POOL), an erratum for a
    // layer that streams the region (EltWise, FC, CONCAT, ...) or for a dispatch of it.
    if (mega_op != Opcode::CONV && mega_op != Opcode::POOL)
      for (const isa::FieldInfo& f : isa::info(mega_op).fields) {
        const bool input = f.name.find("Start") != std::string_view::npos &&
                           (f.name.find("Image") != std::string_view::npos ||
                            f.name.find("Operand") != std::string_view::npos);
        if (!input) continue;
        const std::uint64_t a = group.mega->get(f.id);
        for (const RaggedResize& r : ragged_resizes)
          if (a >= r.begin && a < r.end)
            diag_.erratum(layer, Erratum::kResizePaddingPixel,
                          fmt::format("{} reads the output of RESIZE layer {}, whose pixel "
                                      "padding is not 0 on the board",
                                      isa::qualified_name(f.id), r.layer));
      }
    if (mega_op == Opcode::RESIZE) {
      const std::uint64_t group_pixels = 32 / static_cast<std::uint64_t>(arch.n_sa);
      const std::uint64_t pixels =
          4 * group.mega->get(Field::RESIZE_IH) * group.mega->get(Field::RESIZE_IW);
      if (pixels % group_pixels != 0 && group.output) {
        const OutputConfig o = OutputConfig::from(*group.output);
        const std::uint64_t bytes =
            ceil_mod(group.mega->get(Field::RESIZE_IC), static_cast<std::uint64_t>(arch.n_sa)) *
            ceil_mod(pixels, group_pixels);
        ragged_resizes.push_back({layer, o.output_addr, o.output_addr + bytes});
        if (o.dispatch_en)
          diag_.erratum(layer, Erratum::kResizePaddingPixel,
                        fmt::format("the output has {} pixels, not a multiple of 32/N_SA = {}, "
                                    "and is dispatched: its first padding pixel is not 0",
                                    pixels, group_pixels));
      }
    }
    if (arch == isa::kArch16x1x16 && expected_layer > 1)
      diag_.erratum(layer, Erratum::kIncomplete16x1x16, "a chained layer on 16,1,16");

    const BlockFn fn = find_block(mega_op);
    if (!fn)
      fail("{}: the {} megablock is not built into this device model",
           inst_where(group.mega_index, zeroth.start + 32ull * group.mega_index, mega_op),
           isa::name(mega_op));
    ctx.require_output();
    if (layers_done == stats_.layers.size()) stats_.layers.emplace_back();
    LayerStats& ls = stats_.layers[layers_done];
    std::vector<std::string> acks = std::move(ls.ack_order);
    acks.clear();
    ls = LayerStats{};
    ls.ack_order = std::move(acks);
    ls.layer_number = layer;
    ls.opcode = mega_op;
    ls.instruction_index = group.mega_index;
    ls.start_cycle = cycle;
    if (!config_.timing_only) {
      if (mega_op == Opcode::CONV)
        ctx.chain = config_.unit_chains ? &chain : nullptr;  // it decides what waits
      else
        run_waiting();
      const auto began = std::chrono::steady_clock::now();
      ls.timing = fn(ctx);
      ls.model_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
      ls.model_seconds -= account_chain();  // earlier pieces' units that ran inside
    }
    ls.ack_order.push_back(std::string(isa::name(mega_op)));
    if (group.tail) ls.ack_order.push_back("TailBlock");
    ls.ack_order.push_back("OutputBlock");

    const OutputConfig out = OutputConfig::from(*group.output);
    if (out.dispatch_en) {
      // Dispatcher: reads the output region and packs it into 32-bit words; scheduling waits.
      const std::uint64_t size = dispatch_size(arch, out);
      ctx.check_dram_range(Field::OutputBlock_OutputAddr, out.output_addr, size);
      if (!config_.timing_only) {
        run_waiting(true);  // a dispatching conv does not wait; this is the rule's backstop
        thread_local Bytes payload;  // kept between layers and images
        payload.resize(size);
        dram_.read(out.output_addr, payload, "dispatch read");  // range checked above
        isa::append_dispatch_frame(dispatch_out_, out.dispatch_id, payload);
      }
      ls.dispatched = true;
      ls.dispatch_bytes = size;
    }
    ls.model = timing::time_layer(timing::LayerInput{arch, &*group.mega, &*group.output,
                                                     group.tail ? &*group.tail : nullptr,
                                                     ls.dispatch_bytes});
    ls.timing.cycles = ls.model.cycles;
    ls.timing.compute_cycles = ls.model.compute_cycles;
    ls.timing.dram_cycles = ls.model.dram_cycles;
    ls.timing.dram_read_bytes = ls.model.dram_read_bytes;
    ls.timing.dram_write_bytes = ls.model.dram_write_bytes;
    ls.timing.macs = ls.model.macs;
    cycle += ls.model.cycles;
    ++layers_done;

    std::uint32_t kitr = out.kernel_itr;
    prev2 = prev;
    prev = LayerHistory{mega_op, kitr};
    group = Group{};
    ++expected_layer;
    if (layer_number == total) finished = true;
  }
  run_waiting();
  if (!finished)
    fail(
        "the instruction region [0x{:x}, 0x{:x}) ends without a START whose LayerNumber equals "
        "TotalLayers{}; the board would wait forever for the next instruction",
        zeroth.start, zeroth.end,
        total_layers ? fmt::format(" ({})", *total_layers) : std::string(" (no START at all)"));
  stats_.total_cycles = cycle;
  ++stats_.runs;
}

}  // namespace npukit::device
