// Pass 17, emit_gml: the program file the board loads (gati.md 4, 5.2; isa/gml.h): the instruction
// packet at DRAM 0 (zeroth instruction + instructions), then each weight and bias blob at its
// address, in the stream order of assign_addresses (per layer: weights, then bias).
#include "compiler/backend.h"

namespace npukit::compiler {

Bytes emit_gml(const DeviceProgram& prog) {
  isa::GmlProgram gml;
  gml.instructions = prog.instructions;
  for (const auto& b : prog.blobs) gml.blobs.push_back({b.address, b.bytes});
  return isa::encode_gml(gml);
}

}  // namespace npukit::compiler
