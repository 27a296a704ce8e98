// validate_manifest: the manifest's rules, apart from the JSON reader so each manifest version can
// add its own (isa/manifest_check.cpp, docs/robustness.md).
#pragma once

#include "isa/manifest.h"

#include <string>

namespace npukit::isa {

// Checks every field the runtime relies on (ranges, shapes, dtypes, DRAM ranges against
// ramsize_mb, instruction ranges, file names confined to the program directory, and that every
// value a stage consumes is produced before it). manifest_from_json calls it; throws npukit::Error
// naming `what` and the field.
void validate_manifest(const Manifest& m, const std::string& what);

}  // namespace npukit::isa
