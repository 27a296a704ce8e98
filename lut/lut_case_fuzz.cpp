// libFuzzer: arbitrary text as a LUT case file (lut check / lut eval) gives results or
// npukit::Error, never a crash or hang. Seeds: fixtures/fuzz/lut_case_fuzz (the LUT fixtures).
#include "common/error.h"
#include "lut/case_file.h"

#include <nlohmann/json.hpp>

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace npukit;
  const auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  try {
    const lut::CaseFile c = lut::parse_case(j, "fuzz");
    const lut::CaseResult r = lut::run_case(c);
    (void)lut::compare_case(c, r);
    (void)lut::case_to_json(c, r).dump();
  } catch (const Error&) {
  }
  return 0;
}
