// npukit isa: the ISA v16 field table, generated from isa/isa_v16.def.
#include "common/error.h"
#include "isa/isa_doc.h"
#include "tools/command_registry.h"

#include <fmt/core.h>

namespace {

struct IsaOptions {
  bool markdown = false;
  std::string opcode;
};

const npukit::tools::CommandRegistrar kReg{
    "isa", "Print the Gati ISA v16 field table (every opcode, field, bit range and meaning)",
    [](CLI::App& sub) {
      auto options = std::make_shared<IsaOptions>();
      sub.add_option("opcode", options->opcode, "Show only this opcode (e.g. CONV)");
      sub.add_flag("--markdown", options->markdown,
                   "Print the Markdown reference (docs/isa-v16.md is exactly this output)");
      sub.callback([options]() {
        if (options->markdown) {
          if (!options->opcode.empty())
            npukit::fail("--markdown prints the whole table; drop the opcode '{}'",
                         options->opcode);
          fmt::print("{}", npukit::isa::isa_markdown());
        } else {
          fmt::print("{}", npukit::isa::isa_text(options->opcode));
        }
      });
    }};

}  // namespace
