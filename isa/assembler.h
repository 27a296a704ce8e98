// Assembler: the inverse of the disassembler. Reads the JSON program format (the same shape
// `npukit disasm --json` writes, so a listing assembles back to the same bytes) and writes the
// DWP byte stream: a GML, or a GML followed by input packets and a start packet.
//
//   {"instructions": [{"opcode": "CONV", "fields": {"IW": 8, ...}}      // missing fields are 0
//                     | {"raw": "<64 hex digits>"}, ...],               // any 256-bit word
//    "packets": [{"kind": "instructions"},                             // default: just this one
//                {"kind": "data", "address": 160,
//                 "hex" | "base64" | "file" | "int8" | "int32": ...,   // int32 = big-endian
//                 "pad": true},                                         // zero-fill to 32 bytes
//                {"kind": "start"}]}
// Numbers may be JSON numbers or strings ("0x2A0", "-3"); negative values set a field as two's
// complement. Informative keys from a listing ("offset", "holds", "problems", "warnings",
// "packet") are ignored; "address" and "size" are checked against what is written; "zeroth" is
// written as given (to build bad streams on purpose) with a warning when it is not the usual
// {32, (n+1)*32}.
#pragma once

#include "common/bytes.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace npukit::isa {

struct Assembled {
  Bytes bytes;
  std::vector<std::string> warnings;  // program structure, DWP layout, unusual zeroth
};

// Throws npukit::Error naming the JSON location (e.g. "instructions[2].fields.IW") and the
// problem. `base_dir` resolves "file" references.
Assembled assemble(const nlohmann::ordered_json& program, const std::filesystem::path& base_dir);

// Reads and assembles a JSON file; errors name the file.
Assembled assemble_file(const std::filesystem::path& json_path);

}  // namespace npukit::isa
