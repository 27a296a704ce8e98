// Text form of the graph a pass leaves behind (`npukit compile --dump-after PASS`, like LLVM's
// -print-after): one line per node with its inputs and outputs (name:dtype[shape], constants
// marked), attributes and placement.
#pragma once

#include "compiler/context.h"

#include <string>

namespace npukit::compiler {

std::string dump_graph(const Context& ctx);

}  // namespace npukit::compiler
