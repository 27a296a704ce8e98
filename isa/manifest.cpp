#include "isa/manifest.h"

#include "common/error.h"
#include "common/file_io.h"
#include "isa/manifest_check.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>
#include <utility>

namespace npukit::isa {

using nlohmann::json;

namespace {

json tensor_json(const ManifestTensor& t) {
  json j = {{"name", t.name},
            {"shape", t.shape},
            {"dtype", t.dtype},
            {"scale", t.scale},
            {"zero_point", t.zero_point}};
  if (!t.layout.empty()) {
    j["layout"] = t.layout;
    j["address"] = t.address;
    j["bytes"] = t.bytes;
  }
  if (t.dispatch_id) j["dispatch_id"] = *t.dispatch_id;
  if (!t.layer.empty()) j["layer"] = t.layer;
  return j;
}

json subgraph_json(const std::optional<ManifestSubgraph>& s) {
  if (!s) return nullptr;
  return {{"file", s->file}, {"inputs", s->inputs}, {"outputs", s->outputs}, {"nodes", s->nodes}};
}

struct Reader {
  const std::string& what;
  template <typename T>
  T get(const json& j, const char* key, const std::string& path) const {
    if (!j.is_object() || !j.contains(key))
      fail("{}: manifest key '{}{}' is missing", what, path, key);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      return integer<T>(j.at(key), std::string(path) + key);
    } else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
      const json& v = j.at(key);
      if (!v.is_array()) fail("{}: manifest key '{}{}' is not a list", what, path, key);
      std::vector<std::int64_t> out;
      for (std::size_t i = 0; i < v.size(); ++i)
        out.push_back(integer<std::int64_t>(v[i], fmt::format("{}{}[{}]", path, key, i)));
      return out;
    }
    try {
      return j.at(key).get<T>();
    } catch (const json::exception& e) {
      fail("{}: manifest key '{}{}' has the wrong type ({})", what, path, key, clip(e.what(), 200));
    }
  }
  // An integer that fits T exactly: no silent narrowing of 2^40 into a 32-bit address, no
  // truncation of 3.5.
  template <typename T>
  T integer(const json& v, const std::string& name) const {
    if (!v.is_number_integer())
      fail("{}: manifest key '{}' must be an integer, got {}", what, name, clip(v.dump(), 40));
    const bool fits = v.is_number_unsigned() ? std::in_range<T>(v.get<std::uint64_t>())
                                             : std::in_range<T>(v.get<std::int64_t>());
    if (!fits)
      fail("{}: manifest key '{}' = {} is out of range ({}..{})", what, name, v.dump(),
           std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
    return v.is_number_unsigned() ? static_cast<T>(v.get<std::uint64_t>())
                                  : static_cast<T>(v.get<std::int64_t>());
  }
  template <typename T>
  T opt(const json& j, const char* key, T fallback, const std::string& path) const {
    if (!j.contains(key) || j.at(key).is_null()) return fallback;
    return get<T>(j, key, path);
  }
  ManifestTensor tensor(const json& j, const std::string& path) const {
    ManifestTensor t;
    t.name = get<std::string>(j, "name", path);
    t.shape = get<std::vector<std::int64_t>>(j, "shape", path);
    t.dtype = get<std::string>(j, "dtype", path);
    t.scale = opt<double>(j, "scale", 0.0, path);
    t.zero_point = opt<std::int64_t>(j, "zero_point", 0, path);
    t.layout = opt<std::string>(j, "layout", "", path);
    if (!t.layout.empty()) {
      if (t.layout != "activation" && t.layout != "vector")
        fail("{}: {}layout '{}' is not 'activation' or 'vector'", what, path, t.layout);
      t.address = get<std::uint32_t>(j, "address", path);
      t.bytes = get<std::uint64_t>(j, "bytes", path);
      if (t.address % 32 != 0)
        fail("{}: {}address {} is not 32-byte aligned", what, path, t.address);
    }
    if (j.contains("dispatch_id")) t.dispatch_id = get<std::uint32_t>(j, "dispatch_id", path);
    t.layer = opt<std::string>(j, "layer", "", path);
    return t;
  }
  // The list under `key`, each entry read by read(entry, "PATHKEY[i].").
  template <typename F>
  auto list(const json& j, const char* key, const std::string& path, F read) const {
    const auto arr = get<json>(j, key, path);
    if (!arr.is_array()) fail("{}: manifest key '{}{}' is not a list", what, path, key);
    std::vector<decltype(read(arr, path))> out;
    for (std::size_t i = 0; i < arr.size(); ++i)
      out.push_back(read(arr[i], path + key + "[" + std::to_string(i) + "]."));
    return out;
  }
  std::vector<ManifestTensor> tensors(const json& j, const char* key,
                                      const std::string& path) const {
    return list(j, key, path, [this](const json& t, const std::string& p) { return tensor(t, p); });
  }
  std::optional<ManifestSubgraph> subgraph(const json& j, const char* key) const {
    if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
    return subgraph_at(j.at(key), std::string(key) + ".");
  }
  ManifestSubgraph subgraph_at(const json& s, const std::string& path) const {
    ManifestSubgraph g;
    g.file = get<std::string>(s, "file", path);
    if (g.file.find("..") != std::string::npos || (!g.file.empty() && g.file[0] == '/'))
      fail("{}: {}file '{}' must be a plain file name next to the manifest", what, path, g.file);
    g.inputs = get<std::vector<std::string>>(s, "inputs", path);
    g.outputs = get<std::vector<std::string>>(s, "outputs", path);
    g.nodes = opt<std::vector<std::string>>(s, "nodes", {}, path);
    return g;
  }
};

}  // namespace

std::string manifest_to_json(const Manifest& m) {
  json j;
  j["format"] = "npukit-manifest";
  j["version"] = m.version;
  j["model"] = m.model;
  j["isa_version"] = m.isa_version;
  j["sa_arch"] = m.sa_arch;
  j["ramsize_mb"] = m.ramsize_mb;
  j["allow_errata"] = m.allow_errata;
  j["weight_scales"] = m.weight_scales;
  j["gml"] = m.gml;
  j["gml_bytes"] = m.gml_bytes;
  auto list = [](const std::vector<ManifestTensor>& v) {
    json a = json::array();
    for (const auto& t : v) a.push_back(tensor_json(t));
    return a;
  };
  j["inputs"] = list(m.inputs);
  j["outputs"] = list(m.outputs);
  json segments = json::array();
  for (const auto& s : m.segments) {
    json js;
    if (s.is_device()) {
      js = {{"kind", "device"},
            {"first_layer", s.first_layer},
            {"layer_count", s.layer_count},
            {"first_instruction", s.first_instruction},
            {"instruction_count", s.instruction_count},
            {"zeroth", {{"start", s.zeroth_start()}, {"end", s.zeroth_end()}}},
            {"inputs", list(s.device_inputs)},
            {"outputs", list(s.device_outputs)}};
    } else {
      js = subgraph_json(s.host);
      js["kind"] = "host";
    }
    js["macs"] = s.macs;
    js["bytes_in"] = s.bytes_in;
    js["bytes_out"] = s.bytes_out;
    js["compute_cycles"] = s.compute_cycles;
    js["transfer_cycles"] = s.transfer_cycles;
    js["why"] = s.why;
    segments.push_back(js);
  }
  j["segments"] = segments;
  j["macs"] = {
      {"model", m.model_macs}, {"device", m.device_macs}, {"device_share", m.device_mac_share()}};
  json layers = json::array();
  for (const auto& l : m.layers)
    layers.push_back({{"name", l.name},
                      {"opcode", l.opcode},
                      {"inputs", l.inputs},
                      {"outputs", l.outputs},
                      {"first_instruction", l.first_instruction},
                      {"instruction_count", l.instruction_count}});
  j["layers"] = layers;
  j["instruction_count"] = m.instruction_count;
  j["dram_bytes"] = m.dram_bytes;
  j["warnings"] = m.warnings;
  return j.dump(2) + "\n";
}

Manifest manifest_from_json(const std::string& text, const std::string& what) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: not valid JSON ({})", what, clip(e.what(), 200));
  }
  Reader r{what};
  if (r.opt<std::string>(j, "format", "", "") != "npukit-manifest")
    fail("{}: not an npukit manifest (key 'format' is not \"npukit-manifest\")", what);
  Manifest m;
  m.version = r.get<int>(j, "version", "");
  if (m.version != 1 && m.version != kManifestVersion)
    fail(
        "{}: manifest version {} is not supported (this npukit reads versions 1 and {}); "
        "recompile the model with npukit compile",
        what, m.version, kManifestVersion);
  m.model = r.opt<std::string>(j, "model", "", "");
  m.isa_version = r.get<int>(j, "isa_version", "");
  if (m.isa_version != 16) fail("{}: ISA version {} is not 16", what, m.isa_version);
  m.sa_arch = r.get<std::string>(j, "sa_arch", "");
  (void)SaArch::parse(m.sa_arch);
  m.ramsize_mb = r.opt<std::uint64_t>(j, "ramsize_mb", 512, "");
  m.allow_errata = r.opt<bool>(j, "allow_errata", false, "");
  m.weight_scales = r.opt<std::string>(j, "weight_scales", "auto", "");
  m.gml = r.get<std::string>(j, "gml", "");
  m.gml_bytes = r.opt<std::uint64_t>(j, "gml_bytes", 0, "");
  m.inputs = r.tensors(j, "inputs", "");
  m.outputs = r.tensors(j, "outputs", "");
  m.layers = r.list(j, "layers", "", [&r](const json& jl, const std::string& path) {
    ManifestLayer l;
    l.name = r.get<std::string>(jl, "name", path);
    l.opcode = r.get<std::string>(jl, "opcode", path);
    l.inputs = r.get<std::vector<std::string>>(jl, "inputs", path);
    l.outputs = r.get<std::vector<std::string>>(jl, "outputs", path);
    l.first_instruction = r.get<int>(jl, "first_instruction", path);
    l.instruction_count = r.get<int>(jl, "instruction_count", path);
    return l;
  });
  m.instruction_count = r.get<std::uint64_t>(j, "instruction_count", "");
  m.dram_bytes = r.get<std::uint64_t>(j, "dram_bytes", "");
  m.warnings = r.opt<std::vector<std::string>>(j, "warnings", {}, "");
  if (m.version == 1) {
    // One device part between an optional host prefix and suffix: three segments at most.
    if (auto before = r.subgraph(j, "host_before")) {
      ManifestSegment s;
      s.host = before;
      m.segments.push_back(s);
    }
    ManifestSegment d;
    d.kind = ManifestSegment::Kind::kDevice;
    d.layer_count = static_cast<int>(m.layers.size());
    d.instruction_count = static_cast<int>(m.instruction_count);
    d.device_inputs = r.tensors(j, "device_inputs", "");
    d.device_outputs = r.tensors(j, "device_outputs", "");
    m.segments.push_back(d);
    if (auto after = r.subgraph(j, "host_after")) {
      ManifestSegment s;
      s.host = after;
      m.segments.push_back(s);
    }
  } else {
    const auto segments = r.get<json>(j, "segments", "");
    if (!segments.is_array() || segments.empty())
      fail("{}: manifest key 'segments' is not a non-empty list", what);
    m.segments = r.list(j, "segments", "", [&](const json& js, const std::string& path) {
      ManifestSegment s;
      const auto kind = r.get<std::string>(js, "kind", path);
      if (kind == "host") {
        s.host = r.subgraph_at(js, path);
      } else if (kind == "device") {
        s.kind = ManifestSegment::Kind::kDevice;
        s.first_layer = r.get<int>(js, "first_layer", path);
        s.layer_count = r.get<int>(js, "layer_count", path);
        s.first_instruction = r.get<int>(js, "first_instruction", path);
        s.instruction_count = r.get<int>(js, "instruction_count", path);
        s.device_inputs = r.tensors(js, "inputs", path);
        s.device_outputs = r.tensors(js, "outputs", path);
        if (s.first_layer < 0 || s.layer_count < 1 ||
            static_cast<std::size_t>(s.first_layer + s.layer_count) > m.layers.size())
          fail("{}: {}layers [{}, {}) are not within the {} layers", what, path, s.first_layer,
               s.first_layer + s.layer_count, m.layers.size());
        if (s.first_instruction < 0 || s.instruction_count < 1 ||
            static_cast<std::uint64_t>(s.first_instruction + s.instruction_count) >
                m.instruction_count)
          fail("{}: {}instructions [{}, {}) are not within the {} instructions", what, path,
               s.first_instruction, s.first_instruction + s.instruction_count, m.instruction_count);
      } else {
        fail("{}: {}kind '{}' is not 'host' or 'device'", what, path, kind);
      }
      s.macs = r.opt<std::uint64_t>(js, "macs", 0, path);
      s.bytes_in = r.opt<std::uint64_t>(js, "bytes_in", 0, path);
      s.bytes_out = r.opt<std::uint64_t>(js, "bytes_out", 0, path);
      s.compute_cycles = r.opt<std::uint64_t>(js, "compute_cycles", 0, path);
      s.transfer_cycles = r.opt<std::uint64_t>(js, "transfer_cycles", 0, path);
      s.why = r.opt<std::string>(js, "why", "", path);
      return s;
    });
    if (j.contains("macs") && j.at("macs").is_object()) {
      m.model_macs = r.opt<std::uint64_t>(j.at("macs"), "model", 0, "macs.");
      m.device_macs = r.opt<std::uint64_t>(j.at("macs"), "device", 0, "macs.");
    }
  }
  for (const auto& s : m.segments)
    if (s.is_device()) {
      for (const auto& t : s.device_inputs)
        if (t.layout.empty()) fail("{}: device input '{}' has no layout/address", what, t.name);
      for (const auto& t : s.device_outputs) {
        if (t.layout.empty()) fail("{}: device output '{}' has no layout/address", what, t.name);
        if (!t.dispatch_id) fail("{}: device output '{}' has no dispatch_id", what, t.name);
      }
    }
  validate_manifest(m, what);
  return m;
}

std::vector<ManifestTensor> Manifest::device_inputs() const {
  std::vector<ManifestTensor> v;
  for (const auto& s : segments) v.insert(v.end(), s.device_inputs.begin(), s.device_inputs.end());
  return v;
}

std::vector<ManifestTensor> Manifest::device_outputs() const {
  std::vector<ManifestTensor> v;
  for (const auto& s : segments)
    v.insert(v.end(), s.device_outputs.begin(), s.device_outputs.end());
  return v;
}

std::size_t Manifest::device_segment_count() const {
  std::size_t n = 0;
  for (const auto& s : segments) n += s.is_device() ? 1 : 0;
  return n;
}

void save_manifest(const Manifest& m, const std::string& path) {
  write_text_file(path, manifest_to_json(m));
}

Manifest load_manifest(const std::string& path) {
  std::string text;
  try {
    text = read_text_file(path, std::uint64_t{64} << 20);  // a manifest is kilobytes
  } catch (const Error& e) {
    fail("cannot read manifest: {} (does the directory hold a compiled model?)", e.what());
  }
  return manifest_from_json(text, path);
}

}  // namespace npukit::isa
