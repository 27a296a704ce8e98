// npukit profile MODEL|DIR: device cycles per layer from the timing model alone (no values are
// computed), as a terminal table, JSON, a Chrome/Perfetto trace or a self-contained HTML page;
// with several --sa-arch configurations, a comparison of the arrays (design-space sweep).
#include "analysis/profile.h"
#include "common/bytes.h"
#include "common/error.h"
#include "compiler/compiler.h"
#include "isa/arch.h"
#include "isa/manifest.h"
#include "onnx/onnx_io.h"
#include "tools/command_registry.h"
#include "tools/program_dir.h"

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>

namespace {

namespace fs = std::filesystem;
using npukit::fail;

struct ProfileArgs {
  std::string model;
  double clock_mhz = static_cast<double>(npukit::isa::kClockHz) / 1e6;
  std::string json, trace, html;
  bool json_stdout = false;
  npukit::tools::ProgramOptions program;
};

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!out) fail("cannot write '{}'", path);
  out << text;
  if (!out) fail("writing '{}' failed", path);
}

npukit::Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open '{}'", path);
  return npukit::Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The GML's packets at DRAM 0 (the instruction blob), seeking past weight and bias payloads,
// which a timing-only run never reads; the whole file when it is not a clean packet sequence
// (profile_program then feeds it whole and the device names the problem).
npukit::Bytes read_instruction_packets(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open '{}'", path);
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::uint64_t>(in.tellg());
  npukit::Bytes out;
  for (std::uint64_t pos = 0; pos < size;) {
    std::uint8_t head[12];
    in.seekg(static_cast<std::streamoff>(pos));
    if (size - pos < 12 || !in.read(reinterpret_cast<char*>(head), 12) ||
        npukit::load_be32(head) != 0xFFFFFFFFu)
      return read_bytes(path);
    const std::uint64_t ds = npukit::load_be32(head + 4);
    if (ds > size - pos - 12) return read_bytes(path);
    if (npukit::load_be32(head + 8) == 0) {
      const std::size_t at = out.size();
      out.resize(at + 12 + ds);
      std::copy(head, head + 12, out.begin() + static_cast<std::ptrdiff_t>(at));
      if (!in.read(reinterpret_cast<char*>(out.data() + at + 12), static_cast<std::streamsize>(ds)))
        return read_bytes(path);
    }
    pos += 12 + ds;
  }
  return out;
}

// "9,4,4" or a list of triples "9,4,4,9,8,8,16,1,16".
std::vector<npukit::isa::SaArch> parse_archs(const std::string& spec) {
  std::vector<std::string> parts;
  std::stringstream ss(spec);
  for (std::string item; std::getline(ss, item, ',');) parts.push_back(item);
  if (parts.empty() || parts.size() % 3 != 0)
    fail(
        "--sa-arch '{}': give ROW,COLS,N_SA, or several triples for a sweep (e.g. "
        "9,4,4,9,8,8,16,1,16)",
        spec);
  std::vector<npukit::isa::SaArch> archs;
  for (std::size_t i = 0; i < parts.size(); i += 3)
    archs.push_back(npukit::isa::SaArch::parse(parts[i] + "," + parts[i + 1] + "," + parts[i + 2]));
  return archs;
}

void run_profile(const ProfileArgs& a) {
  if (!(a.clock_mhz > 0) || a.clock_mhz > 1e5)
    fail("--clock-mhz {} is not a clock frequency in MHz (e.g. 81)", a.clock_mhz);
  const double hz = a.clock_mhz * 1e6;
  const auto archs = parse_archs(a.program.sa_arch);
  std::vector<npukit::analysis::Profile> profiles;
  std::vector<std::pair<std::string, std::string>> failed;
  if (fs::is_directory(a.model)) {
    if (archs.size() > 1)
      fail(
          "--sa-arch with several configurations needs an ONNX model: '{}' is compiled for one "
          "array",
          a.model);
    const fs::path dir(a.model);
    if (!fs::exists(dir / "manifest.json"))
      fail(
          "'{}' is a directory without manifest.json: give an ONNX model or a directory written "
          "by `npukit compile`",
          a.model);
    const npukit::isa::Manifest m = npukit::isa::load_manifest((dir / "manifest.json").string());
    const npukit::Bytes gml = read_instruction_packets((dir / m.gml).string());
    profiles.push_back(npukit::analysis::profile_program(m, gml, hz));
  } else {
    if (!fs::exists(a.model)) fail("'{}' does not exist", a.model);
    const npukit::ir::Graph model = npukit::onnxio::load_onnx(a.model);
    for (const auto& arch : archs) {
      npukit::tools::ProgramOptions po = a.program;
      po.sa_arch = arch.str();
      try {
        auto result = npukit::compiler::compile(model, po.compile_options());
        for (const auto& w : result.ctx.warnings)
          std::cerr << "npukit: compile warning: " << w << "\n";
        auto p = npukit::analysis::profile_program(result.manifest, result.gml, hz);
        if (p.model.empty()) p.model = fs::path(a.model).filename().string();
        profiles.push_back(std::move(p));
      } catch (const npukit::Error& e) {
        if (archs.size() == 1) throw;
        failed.emplace_back(arch.str(), e.what());  // the sweep reports it and goes on
      }
    }
  }
  if (archs.size() > 1) {
    std::cout << npukit::analysis::sweep_table(profiles);
    for (const auto& [arch, why] : failed)
      std::cout << fmt::format("{:<9} not compiled: {}\n", arch, why);
    if (profiles.empty()) fail("no configuration of the sweep compiled");
    return;
  }
  const auto& p = profiles.front();
  if (a.json == "-")
    std::cout << npukit::analysis::profile_json(p);
  else
    std::cout << npukit::analysis::profile_table(p);
  if (!a.json.empty() && a.json != "-") write_text(a.json, npukit::analysis::profile_json(p));
  if (!a.trace.empty()) write_text(a.trace, npukit::analysis::profile_trace(p));
  if (!a.html.empty()) write_text(a.html, npukit::analysis::profile_html(p));
}

const npukit::tools::CommandRegistrar kReg{
    "profile",
    "Device cycles per layer from the timing model alone (table, JSON, trace, HTML, array sweep)",
    [](CLI::App& sub) {
      auto args = std::make_shared<ProfileArgs>();
      sub.add_option("model", args->model, "int8 ONNX model, or a directory from `npukit compile`")
          ->required();
      sub.add_option("--clock-mhz", args->clock_mhz, "core clock for the times")
          ->capture_default_str();
      sub.add_option("--json", args->json, "write the profile as JSON to FILE (- for stdout)");
      sub.add_option("--trace", args->trace,
                     "write a Chrome/Perfetto trace (one track per block) to FILE.json");
      sub.add_option("--html", args->html,
                     "write a self-contained page (roofline, per-layer bars, table) to FILE.html");
      npukit::tools::add_program_options(sub, args->program);
      sub.callback([args] { run_profile(*args); });
    }};

}  // namespace
