// npukit: one git-style command line over every layer of the toolchain.
#include "common/error.h"
#include "common/parallel.h"
#include "tools/command_registry.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <iterator>

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

int main(int argc, char** argv) {
  using namespace npukit::tools;
  CLI::App app{
      "npukit: ONNX to Gati GML compiler, bit-exact Gati device model, NVDLA LUT and XS3 kernels"};
  app.set_version_flag("--version", std::string("npukit ") + NPUKIT_VERSION + " (Gati ISA v16)");
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
