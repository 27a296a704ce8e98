// `npukit profile`: timing-only runs of a compiled program on the device model and the reports
// made from them (terminal table, JSON, Chrome/Perfetto trace, self-contained HTML page).
#pragma once

#include "common/bytes.h"
#include "device/device.h"
#include "isa/arch.h"
#include "isa/manifest.h"

#include <cstdint>
#include <string>
#include <vector>

namespace npukit::analysis {

struct ProfileLayer {
  std::string name;  // manifest layer name (or the opcode)
  device::LayerStats stats;
};

struct Profile {
  std::string model;
  isa::SaArch arch;
  double clock_hz = 0;
  std::uint64_t run_start_cycles = 0;
  std::uint64_t total_cycles = 0;
  std::vector<ProfileLayer> layers;
  double host_seconds = 0;  // wall time of the timing-only run (instruction walk + model)
};

// Feeds the GML and an input/start packet to a timing-only device: the cycles equal a full
// simulation's, no value is computed. Throws npukit::Error for a malformed program.
Profile profile_program(const isa::Manifest& manifest, ByteSpan gml, double clock_hz);

std::string profile_table(const Profile& p);
std::string profile_json(const Profile& p);
std::string profile_trace(const Profile& p);  // Chrome trace-event JSON
std::string profile_html(const Profile& p);   // one self-contained page
// The --sa-arch sweep: one row per configuration.
std::string sweep_table(const std::vector<Profile>& profiles);

}  // namespace npukit::analysis
