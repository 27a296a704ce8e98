// npukit: one git-style command line over every layer of the toolchain.
#include "common/cpu.h"
#include "common/error.h"
#include "common/parallel.h"
#include "tools/command_registry.h"

#include <fmt/core.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <string_view>
#include <thread>

namespace npukit::tools {

std::vector<CommandSpec>& command_registry() {
  static std::vector<CommandSpec> registry;
  return registry;
}

namespace {
int g_exit_status = 0;
}
void set_exit_status(int status) { g_exit_status = status; }
int exit_status() { return g_exit_status; }

}  // namespace npukit::tools

namespace {

// oneDNN (the float executor's convolutions) runs on libgomp, whose idle workers spin before
// they sleep. With both cores busy (a second job, or npukit's own pool running the ops between
// two convolutions) the spinning worker holds a core another thread needs: `quantize --threads 2`
// of resnet50 took 16.6 s against 8.1 s with OMP_WAIT_POLICY=PASSIVE on a loaded 2-core machine.
// libgomp reads the variable when it is loaded, before main, so the process restarts itself
// once with it set (about 10 ms), for the commands that run the float executor on more than one
// thread. A value the user set is kept; if the restart fails, npukit goes on as it is.
void restart_with_passive_openmp(int argc, char** argv) {
#if defined(__linux__)
  if (argc < 2 || std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  const std::string_view command = argv[1];
  if (command != "quantize" && command != "compare" && command != "eval" && command != "run")
    return;
  // The thread count as run/eval/compare/quantize will read it: the last --threads, else
  // NPUKIT_THREADS (common/parallel.cpp). One thread needs no restart.
  std::string_view threads;
  if (const char* env = std::getenv("NPUKIT_THREADS")) threads = env;
  for (int i = 2; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with("--threads="))
      threads = arg.substr(10);
    else if (arg == "--threads" && i + 1 < argc)
      threads = argv[i + 1];
  }
  if (threads == "1") return;
  if (std::thread::hardware_concurrency() <= 1) return;
  if (::setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
  ::execv("/proc/self/exe", argv);
  ::unsetenv("OMP_WAIT_POLICY");
#else
  (void)argc, (void)argv;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  using namespace npukit::tools;
  restart_with_passive_openmp(argc, argv);
  CLI::App app{
      "npukit: ONNX to Gati GML compiler, bit-exact Gati device model, NVDLA LUT and XS3 kernels"};
  // The SIMD level too: speed figures mean little without it (common/cpu.h, NPUKIT_ISA).
  app.set_version_flag("--version", [] {
    std::string simd;
    try {
      simd = fmt::format("SIMD kernels {} of {}", npukit::cpu::name(npukit::cpu::active()),
                         npukit::cpu::supported_names());
    } catch (const npukit::Error& e) {
      simd = e.what();
    }
    return std::string("npukit ") + NPUKIT_VERSION + " (Gati ISA v16; " + simd + ")";
  });
  app.require_subcommand(1);
  app.fallthrough(false);

  auto& registry = command_registry();
  std::sort(registry.begin(), registry.end(),
            [](const CommandSpec& a, const CommandSpec& b) { return a.name < b.name; });
  for (auto& spec : registry) {
    CLI::App* sub = app.add_subcommand(spec.name, spec.summary);
    spec.setup(*sub);
    // The commands that simulate or execute networks share the thread pool (common/parallel.h).
    static const char* const kThreaded[] = {"run", "eval", "compare", "quantize", "sim"};
    if (std::find(std::begin(kThreaded), std::end(kThreaded), spec.name) != std::end(kThreaded))
      sub->add_option_function<unsigned>(
             "--threads", [](unsigned n) { npukit::set_thread_count(n); },
             "worker threads for the device model and executor (default: every core; results "
             "are identical for every count)")
          ->check(CLI::Range(1u, 4096u));
  }

  std::string current = "npukit";
  try {
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      return app.exit(e);
    }
  } catch (const npukit::Error& e) {
    for (auto* sub : app.get_subcommands()) current = "npukit " + sub->get_name();
    fmt::print(stderr, "{}: error: {}\n", current, e.what());
    return 1;
  } catch (const std::exception& e) {
    for (auto* sub : app.get_subcommands()) current = "npukit " + sub->get_name();
    fmt::print(stderr, "{}: internal error: {}\n", current, e.what());
    return 2;
  }
  return exit_status();
}
