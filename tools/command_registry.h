// Subcommand self-registration: each tools/cmd_*.cpp defines one
//   static const npukit::tools::CommandRegistrar kReg{"name", "summary", setup};
// where setup(CLI::App& sub) adds options and a callback. main.cpp knows no command by name.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace npukit::tools {

struct CommandSpec {
  std::string name;
  std::string summary;
  // Adds options and sets sub.callback(). Throwing npukit::Error from the callback prints
  // "npukit <name>: error: ..." and exits 1.
  std::function<void(CLI::App& sub)> setup;
};

std::vector<CommandSpec>& command_registry();

struct CommandRegistrar {
  CommandRegistrar(std::string name, std::string summary, std::function<void(CLI::App&)> setup) {
    command_registry().push_back({std::move(name), std::move(summary), std::move(setup)});
  }
};

// Exit status a command asks for without being an error (e.g. "check" found mismatches).
void set_exit_status(int status);
int exit_status();

}  // namespace npukit::tools
