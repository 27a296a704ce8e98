// npukit asm: write a GML / DWP byte stream from a JSON program (the `disasm --json` shape).
#include "common/error.h"
#include "common/file_io.h"
#include "isa/assembler.h"
#include "tools/command_registry.h"

#include <fmt/core.h>

#include <cstdio>
#include <fstream>

namespace {

struct AsmCli {
  std::string input;
  std::string output;
};

const npukit::tools::CommandRegistrar kReg{
    "asm", "Assemble a JSON program (instructions + data packets) into a GML / DWP byte stream",
    [](CLI::App& sub) {
      auto cli = std::make_shared<AsmCli>();
      sub.add_option("program", cli->input, "JSON program, e.g. examples/conv_relu_9x8x8.json")
          ->required()
          ->check(CLI::ExistingFile);
      sub.add_option("-o,--output", cli->output, "Output file (.gml)")->required();
      sub.footer(
          "Format: {\"instructions\": [{\"opcode\": \"CONV\", \"fields\": {\"IW\": 8, ...}}], "
          "\"packets\": [{\"kind\": \"instructions\"}, {\"kind\": \"data\", \"address\": 160, "
          "\"hex\"|\"base64\"|\"file\"|\"int8\"|\"int32\": ..., \"pad\": true}, {\"kind\": "
          "\"start\"}]}. Missing fields are 0. See docs/wire-formats.md.");
      sub.callback([cli]() {
        const auto assembled = npukit::isa::assemble_file(cli->input);
        for (const auto& warning : assembled.warnings)
          fmt::print(stderr, "npukit asm: warning: {}\n", warning);
        npukit::write_file_bytes(cli->output, assembled.bytes);
        fmt::print("wrote {} ({} bytes)\n", cli->output, assembled.bytes.size());
      });
    }};

}  // namespace
