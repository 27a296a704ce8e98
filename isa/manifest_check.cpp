// validate_manifest: everything in a manifest the runtime relies on, checked once at load time so
// a hand-edited or corrupt manifest gets a message naming the field instead of a wrong answer, a
// huge allocation or an exception from deep inside a run. Kept apart from the JSON reader so each
// manifest version adds its own rules here.
#include "isa/manifest_check.h"
#include "common/error.h"
#include "isa/host_layout.h"
#include "isa/isa.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace npukit::isa {
namespace {

// No tensor crossing the manifest is anywhere near this; the bound keeps products of dims exact.
constexpr std::int64_t kMaxElements = std::int64_t{1} << 31;
constexpr std::uint64_t kMaxRamsizeMb = 4096;  // DRAM addresses are 32-bit

bool plain_file_name(const std::string& f) {
  return !f.empty() && f.find('/') == std::string::npos && f.find('\\') == std::string::npos &&
         f != "." && f != "..";
}

void check_tensor(const ManifestTensor& t, const std::string& where, std::uint64_t ram_bytes,
                  bool device, const SaArch& arch) {
  static const std::set<std::string> kDtypes = {"int8",    "uint8",   "int16",   "int32", "int64",
                                                "float32", "float64", "float16", "bool"};
  if (t.name.empty()) fail("{}: name is empty", where);
  if (!kDtypes.count(t.dtype))
    fail(
        "{} '{}': dtype '{}' is not one of int8, uint8, int16, int32, int64, float16, float32, "
        "float64, bool",
        where, t.name, t.dtype);
  if (t.shape.size() > 8)
    fail("{} '{}': shape has {} dimensions (at most 8)", where, t.name, t.shape.size());
  std::int64_t elements = 1;
  for (std::size_t d = 0; d < t.shape.size(); ++d) {
    // 0 marks a dimension left free (a dynamic batch); negative values mean nothing.
    if (t.shape[d] < 0 || t.shape[d] > kMaxElements)
      fail("{} '{}': shape[{}] = {} is out of range (0..{})", where, t.name, d, t.shape[d],
           kMaxElements);
    elements *= std::max<std::int64_t>(t.shape[d], 1);
    if (elements > kMaxElements)
      fail("{} '{}': shape has more than {} elements", where, t.name, kMaxElements);
  }
  if (!std::isfinite(t.scale) || t.scale < 0)
    fail("{} '{}': scale {} must be finite and >= 0", where, t.name, t.scale);
  if (t.zero_point < -128 || t.zero_point > 255)
    fail("{} '{}': zero_point {} is out of range (-128..255)", where, t.name, t.zero_point);
  if (!device) return;
  if (t.dtype != "int8") fail("{} '{}': a device tensor is int8, not {}", where, t.name, t.dtype);
  if (t.layout == "activation" && t.shape.size() != 4)
    fail("{} '{}': activation layout needs a 4-D NCHW shape, got {} dimensions", where, t.name,
         t.shape.size());
  if (t.layout == "activation" || t.layout == "vector") {
    for (std::size_t d = 1; d < t.shape.size(); ++d)
      if (t.shape[d] < 1) fail("{} '{}': shape[{}] must be >= 1 on the device", where, t.name, d);
    std::int64_t per_image = 1;
    for (std::size_t d = 1; d < t.shape.size(); ++d) per_image *= t.shape[d];
    const std::uint64_t need = t.layout == "activation"
                                   ? activation_bytes(t.shape[1], t.shape[2], t.shape[3], arch)
                                   : vector_bytes(per_image);
    if (t.bytes < need)
      fail("{} '{}': bytes {} is less than the {} bytes its shape needs in DRAM", where, t.name,
           t.bytes, need);
  }
  if (t.bytes > ram_bytes || t.address > ram_bytes - t.bytes)
    fail("{} '{}': DRAM range [{}, {}) is outside the board's {} bytes (ramsize_mb)", where, t.name,
         t.address, std::uint64_t{t.address} + t.bytes, ram_bytes);
}

}  // namespace

void validate_manifest(const Manifest& m, const std::string& what) {
  if (m.ramsize_mb < 1 || m.ramsize_mb > kMaxRamsizeMb)
    fail("{}: ramsize_mb {} is out of range (1..{})", what, m.ramsize_mb, kMaxRamsizeMb);
  const std::uint64_t ram = m.ramsize_mb << 20;
  const SaArch arch = m.arch();
  if (!plain_file_name(m.gml))
    fail("{}: gml '{}' must be a plain file name in the program directory", what, m.gml);
  if (m.gml_bytes > ram)
    fail("{}: gml_bytes {} is larger than the board's {} bytes of DRAM", what, m.gml_bytes, ram);
  if (m.dram_bytes > ram)
    fail("{}: dram_bytes {} is larger than the board's {} bytes of DRAM", what, m.dram_bytes, ram);
  if (m.instruction_count > ram / kInstructionBytes)
    fail("{}: instruction_count {} cannot fit the board's DRAM", what, m.instruction_count);
  auto check_all = [&](const std::vector<ManifestTensor>& list, const std::string& key,
                       bool device) {
    std::set<std::string> names;
    for (std::size_t i = 0; i < list.size(); ++i) {
      check_tensor(list[i], fmt::format("{}: {}[{}]", what, key, i), ram, device, arch);
      if (!names.insert(list[i].name).second)
        fail("{}: {} lists '{}' twice", what, key, list[i].name);
    }
  };
  check_all(m.inputs, "inputs", false);
  check_all(m.outputs, "outputs", false);
  if (m.inputs.empty()) fail("{}: the model has no inputs", what);
  if (m.outputs.empty()) fail("{}: the model has no outputs", what);
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const auto& l = m.layers[i];
    if (l.first_instruction < 0 || l.instruction_count < 0 ||
        static_cast<std::uint64_t>(l.first_instruction) +
                static_cast<std::uint64_t>(l.instruction_count) >
            m.instruction_count)
      fail("{}: layers[{}] '{}': instructions [{}, {}) are outside the program's {} instructions",
           what, i, l.name, l.first_instruction,
           static_cast<std::int64_t>(l.first_instruction) + l.instruction_count,
           m.instruction_count);
  }

  // Segments in order, and the data flow: every value a segment consumes is produced before it.
  std::set<std::string> available;
  for (const auto& t : m.inputs) available.insert(t.name);
  auto consume = [&](const std::string& name, const std::string& who) {
    if (!available.count(name))
      fail(
          "{}: {} needs '{}', which nothing before it produces (a model input or an earlier "
          "segment's output)",
          what, who, name);
  };
  std::set<std::uint32_t> ids;
  for (std::size_t i = 0; i < m.segments.size(); ++i) {
    const auto& s = m.segments[i];
    const std::string where = fmt::format("segments[{}]", i);
    if (!s.is_device()) {
      if (!s.host) fail("{}: {} is a host segment without a subgraph", what, where);
      if (!plain_file_name(s.host->file))
        fail("{}: {}: host subgraph file '{}' must be a plain file name in the program directory",
             what, where, s.host->file);
      for (const auto& n : s.host->inputs) consume(n, where);
      available.insert(s.host->outputs.begin(), s.host->outputs.end());
      continue;
    }
    check_all(s.device_inputs, (where + ".inputs").c_str(), true);
    check_all(s.device_outputs, (where + ".outputs").c_str(), true);
    for (const auto& t : s.device_inputs) consume(t.name, where);
    if (s.device_outputs.empty())
      fail("{}: {} is a device segment without outputs, so nothing comes back", what, where);
    for (const auto& t : s.device_outputs) {
      if (t.dispatch_id && !ids.insert(*t.dispatch_id).second)
        fail("{}: dispatch_id {} is used by two device outputs", what, *t.dispatch_id);
      available.insert(t.name);
    }
  }
  for (const auto& t : m.outputs) consume(t.name, "model output");
}

}  // namespace npukit::isa
