// npukit compile model.onnx -o DIR [--sa-arch 9,8,8] [--dispatch L1,L2] [--ramsize MB]
//                                 [--allow-errata] [--explain]
// Writes DIR/model.gml, DIR/manifest.json and, when the model has host work before or after the
// device part, DIR/host_before.onnx / DIR/host_after.onnx (docs/compiler.md).
#include "common/error.h"
#include "compiler/compiler.h"
#include "onnx/onnx_io.h"
#include "tools/command_registry.h"

#include <fmt/core.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

namespace {

struct CompileArgs {
  std::string model, out_dir, sa_arch = "9,8,8";
  std::vector<std::string> dispatch;
  std::uint64_t ramsize_mb = 512;
  bool allow_errata = false, explain = false;
};

void write_file(const std::filesystem::path& path, const npukit::Bytes& bytes) {
  std::ofstream f(path, std::ios::binary);
  if (!f) npukit::fail("cannot write '{}'", path.string());
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) npukit::fail("error writing '{}'", path.string());
}

void run(const CompileArgs& a) {
  namespace fs = std::filesystem;
  npukit::compiler::CompileOptions opt;
  opt.arch = npukit::isa::SaArch::parse(a.sa_arch);
  opt.dispatch = a.dispatch;
  if (a.ramsize_mb == 0) npukit::fail("--ramsize must be at least 1 MB");
  opt.ramsize_mb = a.ramsize_mb;
  opt.allow_errata = a.allow_errata;
  const npukit::ir::Graph model = npukit::onnxio::load_onnx(a.model);
  auto result = npukit::compiler::compile(model, opt);
  if (a.explain) std::cout << npukit::compiler::explain(result);
  for (const auto& w : result.ctx.warnings) std::cerr << "npukit compile: warning: " << w << "\n";
  if (a.out_dir.empty()) {
    if (!a.explain)
      npukit::fail("give an output directory with -o DIR (or --explain to only print)");
    return;
  }
  std::error_code ec;
  fs::create_directories(a.out_dir, ec);
  if (ec) npukit::fail("cannot create output directory '{}': {}", a.out_dir, ec.message());
  const fs::path dir(a.out_dir);
  write_file(dir / result.manifest.gml, result.gml);
  if (result.host_before)
    npukit::onnxio::save_onnx(*result.host_before,
                              (dir / result.manifest.host_before->file).string());
  if (result.host_after)
    npukit::onnxio::save_onnx(*result.host_after,
                              (dir / result.manifest.host_after->file).string());
  npukit::isa::save_manifest(result.manifest, (dir / "manifest.json").string());
  std::cout << fmt::format(
      "compiled {}: {} device layers, {} instructions, {} bytes of GML, {} bytes of DRAM -> {}\n",
      a.model, result.program.layers.size(), result.program.instructions.size(), result.gml.size(),
      result.program.dram_end, a.out_dir);
}

const npukit::tools::CommandRegistrar kReg{
    "compile", "Compile an int8 ONNX model into a Gati program (GML + manifest)",
    [](CLI::App& sub) {
      auto args = std::make_shared<CompileArgs>();
      sub.add_option("model", args->model, "ONNX model (int8 QOperator or QDQ)")->required();
      sub.add_option("-o,--output", args->out_dir,
                     "output directory for model.gml and manifest.json");
      sub.add_option("--sa-arch", args->sa_arch,
                     "systolic array ROW,COLS,N_SA: 9,4,4 | 9,8,8 | 16,1,16");
      sub.add_option("--dispatch", args->dispatch, "also dispatch these layers' outputs (names)")
          ->delimiter(',');
      sub.add_option("--ramsize", args->ramsize_mb, "board DRAM in MB (default 512)");
      sub.add_flag("--allow-errata", args->allow_errata,
                   "emit programs that hit known v1.0.0 hardware errata (simulation only)");
      sub.add_flag("--explain", args->explain,
                   "print each layer's placement and why, its instructions and DRAM footprint");
      sub.callback([args] { run(*args); });
    }};

}  // namespace
