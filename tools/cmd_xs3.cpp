// npukit xs3: run and check lib_nn kernel case files (docs/xs3.md).
#include "common/error.h"
#include "tools/command_registry.h"
#include "xs3/case_file.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <memory>
#include <string>
#include <vector>

namespace {

void add_check(CLI::App& xs3) {
  auto files = std::make_shared<std::vector<std::string>>();
  auto scalar = std::make_shared<bool>(false);
  CLI::App* check = xs3.add_subcommand(
      "check", "Run case files and compare with their expected output; exit 0 only if all pass");
  check->add_option("files", *files, "case files (JSON)")->required();
  check->add_flag("--scalar", *scalar, "use the scalar reference kernels, never AVX2");
  check->callback([files, scalar] {
    std::size_t failed = 0;
    const auto impl = *scalar ? npukit::xs3::Isa::kScalar : npukit::xs3::Isa::kAuto;
    for (const auto& file : *files) {
      const auto result = npukit::xs3::check_case(npukit::xs3::load_case(file), file, impl);
      if (result.pass) {
        fmt::print("pass {} ({}, {} outputs)\n", file, result.name, result.compared);
        continue;
      }
      ++failed;
      fmt::print("FAIL {} ({}): {} of {} outputs differ\n", file, result.name, result.mismatches,
                 result.compared);
      for (const auto& m : result.first) {
        fmt::print("  y[{}] (flat {}): expected {}, got {}\n", fmt::join(m.position, "]["), m.index,
                   m.expected, m.got);
      }
    }
    fmt::print("{} of {} case files passed\n", files->size() - failed, files->size());
    if (failed > 0) npukit::tools::set_exit_status(1);
  });
}

void add_run(CLI::App& xs3) {
  auto file = std::make_shared<std::string>();
  auto scalar = std::make_shared<bool>(false);
  CLI::App* run =
      xs3.add_subcommand("run", "Run a case file and print the computed output as JSON");
  run->add_option("file", *file, "case file (JSON)")->required();
  run->add_flag("--scalar", *scalar, "use the scalar reference kernels, never AVX2");
  run->callback([file, scalar] {
    const auto c = npukit::xs3::load_case(*file);
    const auto out = npukit::xs3::run_case(
        c, *file, *scalar ? npukit::xs3::Isa::kScalar : npukit::xs3::Isa::kAuto);
    fmt::print("{}\n", npukit::xs3::output_json(c, out).dump());
  });
}

const npukit::tools::CommandRegistrar kReg{
    "xs3", "XMOS XS3 lib_nn kernels: check and run case files", [](CLI::App& sub) {
      sub.require_subcommand(1);
      add_check(sub);
      add_run(sub);
    }};

}  // namespace
