#include "program/program.h"

#include "common/error.h"
#include "common/file_io.h"
#include "common/npy.h"
#include "isa/gml.h"
#include "onnx/onnx_io.h"

#include <filesystem>
#include <system_error>

namespace npukit::program {

namespace fs = std::filesystem;

const ir::Graph& Program::host_graph(std::size_t s) const {
  auto it = host_graphs.find(s);
  if (it == host_graphs.end())
    fail("program '{}': segment {} has no host subgraph", manifest.model, s);
  return it->second;
}

void check_gml(const Program& program, const std::string& where) {
  // A cut or padded GML would swallow the input stream and fail far away (as a dispatch size
  // mismatch): check it here, by its length and its framing.
  const auto& m = program.manifest;
  if (m.gml_bytes != 0 && program.gml.size() != m.gml_bytes)
    fail("{}: {} bytes, but the manifest says {} ({}; recompile the model)", where,
         program.gml.size(), m.gml_bytes,
         program.gml.size() < m.gml_bytes ? "the file is truncated" : "the file has extra bytes");
  try {
    isa::validate_gml(program.gml);
  } catch (const Error& e) {
    fail("{}: not a valid GML program: {}", where, e.what());
  }
}

Program load(const std::string& dir) {
  const fs::path manifest_path = fs::path(dir) / "manifest.json";
  if (!fs::exists(manifest_path))
    fail("{}: no manifest.json (compile the model first: npukit compile MODEL.onnx -o {})", dir,
         dir);
  Program p;
  p.manifest = isa::load_manifest(manifest_path.string());
  const std::string gml_path = (fs::path(dir) / p.manifest.gml).string();
  p.gml = read_file_shared(gml_path, std::uint64_t{p.manifest.ramsize_mb} << 20);
  check_gml(p, gml_path);
  for (std::size_t i = 0; i < p.manifest.segments.size(); ++i) {
    const auto& seg = p.manifest.segments[i];
    if (seg.is_device()) continue;
    if (!seg.host) fail("{}: manifest segment {} is a host segment without a subgraph", dir, i);
    const fs::path path = fs::path(dir) / seg.host->file;
    if (!fs::exists(path))
      fail("{}: host subgraph '{}' named in manifest.json is missing (recompile the model)", dir,
           seg.host->file);
    p.host_graphs[i] = onnxio::load_onnx(path.string());
  }
  return p;
}

void save(const Program& program, const std::string& dir) {
  const fs::path d = fs::absolute(fs::path(dir)).lexically_normal();
  const fs::path target = d.has_filename() ? d : d.parent_path();
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  if (ec) fail("cannot create output directory '{}': {}", dir, ec.message());
  const fs::path staging = target.parent_path() / ("." + target.filename().string() + ".partial");
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  if (ec) fail("cannot create output directory '{}': {}", staging.string(), ec.message());
  try {
    write_file_bytes((staging / program.manifest.gml).string(), program.gml);
    for (std::size_t s = 0; s < program.manifest.segments.size(); ++s) {
      const auto& seg = program.manifest.segments[s];
      if (seg.is_device()) continue;
      if (!seg.host) fail("program: host segment {} has no subgraph file", s);
      onnxio::save_onnx(program.host_graph(s), (staging / seg.host->file).string());
    }
    isa::save_manifest(program.manifest, (staging / "manifest.json").string());
    if (fs::exists(target)) {
      // Only ever replace a directory that holds a compiled program (or nothing).
      if (!fs::is_directory(target)) fail("output '{}' exists and is not a directory", dir);
      if (!fs::is_empty(target) && !fs::exists(target / "manifest.json"))
        fail(
            "output directory '{}' is not empty and holds no compiled program; give a new or "
            "empty directory",
            dir);
      fs::remove_all(target);
    }
    fs::rename(staging, target);
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }
}

}  // namespace npukit::program
