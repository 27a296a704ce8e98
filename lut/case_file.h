// LUT case files: register writes applied to a freshly reset unit, LUT inputs, and the expected
// outputs and statistics (docs/lut.md). Used by `npukit lut check|eval` and the tests.
#pragma once

#include "lut/lut.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace npukit::lut {

struct CaseFile {
  std::string source;  // file name, for messages
  std::string name;
  Unit unit = Unit::kSdp;
  Precision precision = Precision::kInt;
  std::string precision_text;  // as written, echoed back by eval
  std::vector<std::pair<std::string, std::uint32_t>> writes;
  std::vector<std::int64_t> inputs;
  std::optional<std::vector<std::int64_t>> expected_outputs;
  std::optional<Stats> expected_stats;
  // Codes of the error diagnostics the case expects (e.g. "write_past_end"). Without this list,
  // any error diagnostic fails the case.
  std::optional<std::vector<std::string>> expected_errors;
};

struct CaseResult {
  std::vector<std::int64_t> outputs;
  Stats stats;
  std::vector<Diagnostic> diagnostics;
};

// Parses and validates one case; errors name `source` and the offending field or element.
CaseFile parse_case(const nlohmann::json& json, const std::string& source);
CaseFile load_case(const std::string& path);
CaseResult run_case(const CaseFile& c);
// Empty when the result matches; otherwise one line per mismatch (first `limit` elements, then
// every counter and diagnostic difference).
std::vector<std::string> compare_case(const CaseFile& c, const CaseResult& r,
                                      std::size_t limit = 8);
// The case with "expected" replaced by the computed outputs, stats and diagnostics.
nlohmann::ordered_json case_to_json(const CaseFile& c, const CaseResult& r);
nlohmann::ordered_json stats_to_json(const Stats& s);

}  // namespace npukit::lut
