// Case files: one JSON object naming an op, its inputs and its expected output (docs/xs3.md).
// `npukit xs3 check` and `npukit xs3 run` are thin wrappers over these functions.
#pragma once

#include "xs3/kernels.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace npukit::xs3 {

// The ops a case file may name.
const std::vector<std::string>& case_ops();

struct CaseOutput {
  std::vector<int> shape;          // y_shape
  std::vector<std::int64_t> data;  // computed output, flat in standard (C) order
};

// Parses a case file; errors name the file.
nlohmann::json load_case(const std::string& path);

// Runs the case's op on its inputs. `where` (usually the file name) prefixes every error, which
// names the offending field and what is expected of it.
// impl picks the AVX2 or scalar kernels where both exist.
CaseOutput run_case(const nlohmann::json& c, const std::string& where, Isa impl = Isa::kAuto);

struct Mismatch {
  std::size_t index = 0;
  std::vector<int> position;  // index unravelled by y_shape
  std::int64_t expected = 0;
  std::int64_t got = 0;
};

struct CheckResult {
  std::string name;
  bool pass = false;
  std::size_t mismatches = 0;
  std::size_t compared = 0;
  std::vector<Mismatch> first;  // up to max_reported
};

// Runs the case and compares with "expected"."data".
CheckResult check_case(const nlohmann::json& c, const std::string& where, Isa impl = Isa::kAuto,
                       std::size_t max_reported = 8);

// {"name", "op", "y_shape", "data"}: the computed output in the shape of the case's "expected".
nlohmann::json output_json(const nlohmann::json& c, const CaseOutput& out);

}  // namespace npukit::xs3
