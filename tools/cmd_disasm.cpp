// npukit disasm: decode a GML file or any DWP byte stream (GML + input packets + start).
#include "common/error.h"
#include "common/file_io.h"
#include "isa/disasm.h"
#include "tools/command_registry.h"

#include <fmt/core.h>

#include <fstream>
#include <iterator>

namespace {

struct DisasmCli {
  std::string file;
  bool json = false;
  bool no_data = false;
};

const npukit::tools::CommandRegistrar kReg{
    "disasm",
    "Decode a GML or DWP byte stream: every packet and every instruction with its fields; exit "
    "1 if anything is invalid",
    [](CLI::App& sub) {
      auto cli = std::make_shared<DisasmCli>();
      sub.add_option("file", cli->file, "GML file or DWP byte stream ('-' reads stdin)")
          ->required();
      sub.add_flag("--json", cli->json,
                   "Print JSON: {\"packets\": [...], \"instructions\": [...], \"problems\", "
                   "\"warnings\"}; `npukit asm` reads it back");
      sub.add_flag("--no-data", cli->no_data, "Leave the data packets' bytes out of the JSON");
      sub.footer(
          "Exit status: 0 when the stream is valid, 1 when an instruction or the zeroth "
          "instruction is invalid (the listing marks it) or the stream is malformed (the error "
          "names the byte offset). Warnings (program structure, DWP layout) do not change it.");
      sub.callback([cli]() {
        npukit::Bytes bytes;
        if (cli->file == "-") {
          bytes.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
        } else {
          bytes = npukit::read_file_bytes(cli->file);
        }
        nlohmann::ordered_json listing;
        try {
          listing = npukit::isa::disassemble(bytes, {.include_data = !cli->no_data});
        } catch (const npukit::Error& e) {
          npukit::fail("{}: {}", cli->file, e.what());
        }
        if (cli->json)
          fmt::print("{}\n", listing.dump(2));
        else
          fmt::print("{}", npukit::isa::render_listing(listing));
        if (npukit::isa::listing_has_problems(listing)) npukit::tools::set_exit_status(1);
      });
    }};

}  // namespace
