// npukit sim: run byte streams through the Gati device model exactly as a board receives them.
#include "common/bytes.h"
#include "common/error.h"
#include "common/file_io.h"
#include "device/device.h"
#include "isa/arch.h"
#include "tools/command_registry.h"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

namespace {

using npukit::Bytes;
using npukit::fail;

struct SimArgs {
  std::vector<std::string> streams;
  std::string sa_arch = "9,8,8";
  std::string dispatch_out;
  std::vector<std::string> dumps;
  std::string stats_json;
  unsigned dram_mib = 512;
};

std::uint64_t parse_number(const std::string& text, const std::string& what,
                           const std::string& spec) {
  try {
    std::size_t used = 0;
    const std::uint64_t v = std::stoull(text, &used, 0);
    if (used != text.size()) throw std::invalid_argument(text);
    return v;
  } catch (const std::exception&) {
    fail("--dump-dram '{}': {} '{}' is not a number (decimal or 0x hex)", spec, what, text);
  }
}

struct Dump {
  std::uint64_t addr, size;
  std::string file;
};

Dump parse_dump(const std::string& spec) {
  const auto a = spec.find(':');
  const auto b = a == std::string::npos ? a : spec.find(':', a + 1);
  if (a == std::string::npos || b == std::string::npos)
    fail("--dump-dram '{}': expected ADDR:SIZE:FILE, e.g. 0x20000:4096:out.bin", spec);
  return {parse_number(spec.substr(0, a), "ADDR", spec),
          parse_number(spec.substr(a + 1, b - a - 1), "SIZE", spec), spec.substr(b + 1)};
}

void run_sim(const SimArgs& args) {
  std::vector<Dump> dumps;
  for (const auto& d : args.dumps) dumps.push_back(parse_dump(d));
  npukit::device::DeviceConfig cfg;
  cfg.arch = npukit::isa::SaArch::parse(args.sa_arch);
  cfg.dram_bytes = std::uint64_t{args.dram_mib} << 20;
  cfg.warnings = &std::cerr;
  npukit::device::Device dev(cfg);

  // Fed file by file in 64 KiB chunks, as a transport would deliver them.
  constexpr std::size_t kChunk = 64 * 1024;
  Bytes dispatched;
  for (const auto& path : args.streams) {
    const Bytes data = npukit::read_file_bytes(path);
    for (std::size_t pos = 0; pos < data.size(); pos += kChunk) {
      const std::size_t n = std::min(kChunk, data.size() - pos);
      dev.receive_dwp(npukit::ByteSpan(data).subspan(pos, n));
    }
    const Bytes out = dev.take_dispatch_output();
    dispatched.insert(dispatched.end(), out.begin(), out.end());
    // A stream file that ends inside a packet is cut short; its tail would otherwise swallow the
    // next file's bytes and fail far away (e.g. as a dispatch size mismatch).
    if (!dev.dwp_idle())
      fail("{}: the stream ends in the middle of a DWP packet (the file is truncated or cut)",
           path);
  }
  if (!dev.dwp_idle())
    fail("the streams end in the middle of a DWP packet (a truncated header or payload)");
  const auto& st = dev.stats();
  if (st.runs == 0)
    fail(
        "the program never started: the streams need a start packet (FFFFFFFF 00000000 "
        "00000000) right after the input data packet (gati.md 14.4)");

  const double hz = static_cast<double>(npukit::isa::kClockHz);
  std::uint64_t macs = 0;
  fmt::print("array {}  runs {}  (per-layer figures are for the last run)\n", cfg.arch.str(),
             st.runs);
  fmt::print("{:>5}  {:<11} {:>5}  {:>12}  {:>10}  {:>12}  {:>12}  {}\n", "layer", "block", "inst",
             "cycles", "ms@81MHz", "DRAM rd B", "DRAM wr B", "dispatch");
  for (const auto& l : st.layers) {
    macs += l.timing.macs;
    fmt::print("{:>5}  {:<11} {:>5}  {:>12}  {:>10.3f}  {:>12}  {:>12}  {}\n", l.layer_number,
               npukit::isa::name(l.opcode), l.instruction_index, l.timing.cycles,
               1e3 * static_cast<double>(l.timing.cycles) / hz, l.timing.dram_read_bytes,
               l.timing.dram_write_bytes,
               l.dispatched ? fmt::format("{} B", l.dispatch_bytes) : "-");
  }
  const double seconds = static_cast<double>(st.total_cycles) / hz;
  fmt::print(
      "total  {} cycles = {:.3f} ms at 81 MHz; {} MACs ({:.1f} MAC/cycle)\n", st.total_cycles,
      seconds * 1e3, macs,
      st.total_cycles ? static_cast<double>(macs) / static_cast<double>(st.total_cycles) : 0.0);

  // Every output is staged and renamed into place only when all of them succeeded.
  npukit::PendingOutputs outputs;
  if (!args.dispatch_out.empty()) outputs.write(args.dispatch_out, dispatched);
  for (const auto& d : dumps) {
    if (d.addr > dev.dram().size() || d.size > dev.dram().size() - d.addr)
      fail("--dump-dram: [0x{:x}, 0x{:x}) is outside the {} bytes of DRAM", d.addr, d.addr + d.size,
           dev.dram().size());
    outputs.write(d.file, dev.dram().read(d.addr, d.size, "--dump-dram"));
  }
  if (!args.stats_json.empty()) {
    nlohmann::json j;
    j["sa_arch"] = cfg.arch.str();
    j["clock_hz"] = npukit::isa::kClockHz;
    j["runs"] = st.runs;
    j["total_cycles"] = st.total_cycles;
    j["total_seconds"] = seconds;
    j["dispatch_bytes"] = dispatched.size();
    j["layers"] = nlohmann::json::array();
    for (const auto& l : st.layers) {
      j["layers"].push_back({{"layer", l.layer_number},
                             {"block", std::string(npukit::isa::name(l.opcode))},
                             {"instruction", l.instruction_index},
                             {"start_cycle", l.start_cycle},
                             {"cycles", l.timing.cycles},
                             {"compute_cycles", l.timing.compute_cycles},
                             {"dram_cycles", l.timing.dram_cycles},
                             {"dram_read_bytes", l.timing.dram_read_bytes},
                             {"dram_write_bytes", l.timing.dram_write_bytes},
                             {"macs", l.timing.macs},
                             {"dispatched", l.dispatched},
                             {"dispatch_bytes", l.dispatch_bytes},
                             {"ack_order", l.ack_order}});
      nlohmann::json terms = nlohmann::json::object();
      for (int i = 0; i < npukit::device::timing::kTermCount; ++i)
        terms[std::string(npukit::device::timing::kConstants[i].name)] = l.model.terms[i];
      j["layers"].back()["timing_terms"] = terms;
      j["layers"].back()["bound"] = std::string(npukit::device::timing::bound_name(l.model.bound));
    }
    j["warnings"] = nlohmann::json::array();
    for (const auto& w : dev.diagnostics().warnings()) j["warnings"].push_back(w.text());
    outputs.write_text(args.stats_json, j.dump(2) + "\n");
  }
  outputs.commit();
}

const npukit::tools::CommandRegistrar kSim{
    "sim", "Run Gati byte streams (GML, input DWP, start) on the device model", [](CLI::App& sub) {
      auto args = std::make_shared<SimArgs>();
      sub.add_option("streams", args->streams,
                     "DWP stream files fed in order, as a board receives them (e.g. model.gml "
                     "input.dwp, where input.dwp ends with the start packet)")
          ->required();
      sub.add_option("--sa-arch", args->sa_arch,
                     "array configuration ROW,COLS,N_SA (9,4,4 9,8,8 16,1,16)")
          ->capture_default_str();
      sub.add_option("--dispatch-out", args->dispatch_out,
                     "write the dispatch frames the board sends back, raw");
      sub.add_option("--dump-dram", args->dumps,
                     "write DRAM [ADDR, ADDR+SIZE) to FILE: ADDR:SIZE:FILE");
      sub.add_option("--stats-json", args->stats_json, "write per-layer cycles and totals as JSON");
      sub.add_option("--dram-mib", args->dram_mib, "device DRAM size in MiB")
          ->check(CLI::Range(1u, 4096u))
          ->capture_default_str();
      sub.callback([args] { run_sim(*args); });
    }};

}  // namespace
