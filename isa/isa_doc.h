// The ISA v16 field table as text and Markdown, generated from isa_v16.def. docs/isa-v16.md is
// this Markdown, committed; a test keeps the two identical.
#pragma once

#include <string>
#include <string_view>

namespace npukit::isa {

std::string isa_markdown();
// Plain-text table; `only` restricts it to one opcode by name ("" = all). Throws npukit::Error
// for an unknown opcode name.
std::string isa_text(std::string_view only = "");

}  // namespace npukit::isa
