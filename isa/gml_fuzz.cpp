// libFuzzer: the GML reader and the disassembler never crash; an accepted GML re-encodes to the
// same bytes, validate_gml accepts exactly what decode_gml accepts, and a disassembled stream
// assembles back to the same bytes.
#include "common/error.h"
#include "isa/assembler.h"
#include "isa/disasm.h"
#include "isa/gml.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace npukit;
  const ByteSpan stream(data, size);
  bool decoded = false, validated = false;
  try {
    const isa::GmlProgram program = isa::decode_gml(stream);
    decoded = true;
    const Bytes again = isa::encode_gml(program);
    if (again.size() != size || !std::equal(again.begin(), again.end(), data)) std::abort();
  } catch (const Error&) {
  }
  try {
    isa::validate_gml(stream);
    validated = true;
  } catch (const Error&) {
  }
  if (decoded != validated) std::abort();
  try {
    const auto listing = isa::disassemble(stream);
    (void)isa::render_listing(listing);
    if (!listing["instructions"].empty() || !listing["packets"].empty()) {
      const auto assembled = isa::assemble(listing, ".");
      if (assembled.bytes.size() != size ||
          !std::equal(assembled.bytes.begin(), assembled.bytes.end(), data))
        std::abort();
    }
  } catch (const Error&) {
  }
  return 0;
}
