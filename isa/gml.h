// GML: a Gati program file as the public compiler writes it (gati.md 4 and 5.2, DECISIONS.md 2).
// It is a DWP stream: first the instruction packet at DRAM 0 holding the zeroth instruction
// {ZerothStartAddress = 32, ZerothEndAddress = (n+1)*32 (exclusive)} followed by the n
// instructions, then one data packet per blob (weights, biases) in program order. A GML holds no
// input tensor and no start packet; those are appended when the program is run.
#pragma once

#include "common/bytes.h"
#include "isa/isa.h"

#include <cstdint>
#include <string>
#include <vector>

namespace npukit::isa {

struct Blob {
  std::uint32_t address = 0;  // DRAM byte address, 32-byte aligned
  Bytes data;                 // a multiple of 32 bytes
  bool operator==(const Blob&) const = default;
};

struct GmlProgram {
  std::vector<Instruction> instructions;  // without the zeroth instruction
  std::vector<Blob> blobs;                // in stream order
  bool operator==(const GmlProgram&) const = default;
};

// Bytes of the instruction region for n instructions: the zeroth plus n, 32 bytes each.
constexpr std::uint64_t instruction_region_bytes(std::size_t n) {
  return (std::uint64_t{n} + 1) * kInstructionBytes;
}

// Throws npukit::Error when the program is empty, a blob is misaligned, empty, not a multiple of
// 32 bytes, or overlaps the instruction region or another blob.
Bytes encode_gml(const GmlProgram& program);

// Strict reader. Throws npukit::Error with the byte offset for a malformed DWP stream, a first
// packet that is not the instruction packet at address 0, a zeroth instruction whose range is
// not [32, packet size), an invalid instruction (unknown opcode, non-zero reserved bits), a start
// packet, or blobs overlapping each other or the instruction region.
GmlProgram decode_gml(ByteSpan gml);

// decode_gml's checks alone, without copying the blobs out (what a loader runs before it sends
// the bytes as they are).
void validate_gml(ByteSpan gml);

// Structural checks of an instruction list against the stream layout the RTL ran (gati.md 3.2,
// 4): every megablock is followed by its group and a START(i, N), LayerNumber counts 1..N, and
// N is the number of megablocks. Returns human-readable findings, empty when it all holds.
std::vector<std::string> lint_instruction_list(const std::vector<Instruction>& instructions);

}  // namespace npukit::isa
