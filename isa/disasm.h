// Disassembler for GML files and any DWP byte stream (GML + input packets + start). One model,
// a JSON listing, feeds both the --json output and the text output, so they never disagree.
//
// Listing shape (the stable part is what docs/wire-formats.md documents):
//   {"packets": [{"offset", "address", "size", "kind": "instructions"|"data"|"start",
//                 ["zeroth": {"ZerothStartAddress", "ZerothEndAddress"}], ["holds": [...]],
//                 ["hex": "..."]}],
//    "instructions": [{"address", "packet", "opcode": "CONV"|null, "fields": {"IW": 224, ...},
//                      "raw": "<64 hex digits>", ["reserved_bits": "<hex>"], "problems": [...]}],
//    "problems": [...],   // invalid: unknown opcode, reserved bits, zeroth range, ...
//    "warnings": [...]}   // suspicious but accepted: program structure, DWP layout
#pragma once

#include "common/bytes.h"

#include <nlohmann/json.hpp>

#include <string>

namespace npukit::isa {

struct DisasmOptions {
  bool include_data = true;  // put each data packet's bytes in "hex"
};

// Throws npukit::Error with the byte offset when the stream is not well-formed DWP (truncated,
// bad SOP, misaligned...). Invalid instructions do not throw; they are listed in "problems".
nlohmann::ordered_json disassemble(ByteSpan stream, const DisasmOptions& options = {});

// Human-readable listing of disassemble()'s result: every packet, every instruction with all
// its fields by name, problems marked "!!" and warnings "warning:".
std::string render_listing(const nlohmann::ordered_json& listing);

// True when the listing flags anything invalid (top-level or per-instruction problems).
bool listing_has_problems(const nlohmann::ordered_json& listing);

std::string to_hex(ByteSpan bytes);

}  // namespace npukit::isa
