// Test helper: literal byte strings written as hex (spaces and newlines ignored), so tests can
// spell out wire bytes by hand instead of building them with the code under test.
#pragma once

#include "common/bytes.h"

#include <stdexcept>
#include <string_view>

namespace npukit::isa::testing {

inline Bytes hex(std::string_view text) {
  Bytes out;
  int high = -1;
  for (char c : text) {
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
    if (digit < 0) {
      if (c == ' ' || c == '\n' || c == '\'') continue;
      throw std::invalid_argument("bad hex literal in test");
    }
    if (high < 0) {
      high = digit;
    } else {
      out.push_back(static_cast<std::uint8_t>(high << 4 | digit));
      high = -1;
    }
  }
  if (high >= 0) throw std::invalid_argument("odd hex literal in test");
  return out;
}

inline Bytes concat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

struct HandVector {
  const char* opcode;
  const char* hex;
  std::vector<std::pair<const char*, std::uint64_t>> fields;
};

// One instruction per v16 opcode, packed by isa/testdata/gen_hand_vectors.py straight from the
// spec's bit table (not from isa_v16.def or the encoder).
inline const std::vector<HandVector>& hand_vectors() {
  static const std::vector<HandVector> vectors = {
#include "isa/hand_vectors.inc"
  };
  return vectors;
}

}  // namespace npukit::isa::testing
