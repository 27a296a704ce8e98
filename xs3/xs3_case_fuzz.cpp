// libFuzzer: arbitrary text as an XS3 case file (xs3 check / xs3 run) gives results or
// npukit::Error, never a crash or hang. Seeds: fixtures/fuzz/xs3_case_fuzz (the XS3 fixtures).
#include "common/error.h"
#include "xs3/case_file.h"

#include <nlohmann/json.hpp>

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace npukit;
  const auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  try {
    (void)xs3::check_case(j, "fuzz");
  } catch (const Error&) {
  }
  return 0;
}
