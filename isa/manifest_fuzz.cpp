// libFuzzer: arbitrary text as manifest.json gives a validated Manifest or npukit::Error, never a
// crash; an accepted manifest survives a write/read round trip unchanged.
// Seeds: fixtures/fuzz/manifest_fuzz.
#include "common/error.h"
#include "isa/manifest.h"

#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace npukit;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const isa::Manifest m = isa::manifest_from_json(text, "fuzz");
    if (!(isa::manifest_from_json(isa::manifest_to_json(m), "again") == m)) std::abort();
  } catch (const Error&) {
  }
  return 0;
}
