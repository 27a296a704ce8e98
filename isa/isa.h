// Gati ISA v16 in C++: opcodes, fields and the 256-bit Instruction, all generated from
// isa_v16.def so that there is one table of facts.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace npukit::isa {

inline constexpr int kIsaVersion = 16;
inline constexpr std::size_t kInstructionBytes = 32;  // INST_SIZE_BITS 256

enum class Opcode : std::uint8_t {
#define NPUKIT_ISA_OPCODE(name, code, summary) name = code,
#define NPUKIT_ISA_FIELD(op, name, lo, width, meaning)
#include "isa/isa_v16.def"
#undef NPUKIT_ISA_OPCODE
#undef NPUKIT_ISA_FIELD
};

// Every field of every opcode, named <OPCODE>_<Field> as in the spec table.
enum class Field : std::uint16_t {
#define NPUKIT_ISA_OPCODE(name, code, summary)
#define NPUKIT_ISA_FIELD(op, name, lo, width, meaning) op##_##name,
#include "isa/isa_v16.def"
#undef NPUKIT_ISA_OPCODE
#undef NPUKIT_ISA_FIELD
  kCount
};

struct FieldInfo {
  Field id;
  Opcode opcode;
  std::string_view name;     // without the opcode prefix, e.g. "IW"
  std::string_view meaning;  // one line, our own words
  std::uint16_t lo;          // lowest bit
  std::uint16_t width;       // bits
  std::uint16_t hi() const { return static_cast<std::uint16_t>(lo + width - 1); }
  std::uint64_t max_value() const { return width >= 64 ? ~0ull : (1ull << width) - 1; }
};

struct OpcodeInfo {
  Opcode opcode;
  std::string_view name;  // "CONV", "TailBlock", ...
  std::string_view summary;
  std::span<const FieldInfo> fields;  // in bit order
  std::uint16_t used_bits;            // bits [used_bits, 256) are reserved
};

// All opcodes of ISA v16, in table order.
std::span<const OpcodeInfo> opcodes();
// nullptr for an opcode value v16 does not define.
const OpcodeInfo* find_opcode(std::uint8_t value);
const OpcodeInfo* find_opcode(std::string_view name);
const OpcodeInfo& info(Opcode op);
const FieldInfo& info(Field field);
// The field of `op` called `name` (without prefix), or nullptr.
const FieldInfo* find_field(Opcode op, std::string_view name);

std::string_view name(Opcode op);
// "CONV.IW": what error messages call a field.
std::string qualified_name(Field field);

// Megablocks read and write DRAM themselves and are each followed by START in a program.
bool is_megablock(Opcode op);

// A raw 256-bit instruction word. Bit i of the instruction is bit (i % 64) of word i / 64.
using Bits256 = std::array<std::uint64_t, 4>;

std::uint64_t extract_bits(const Bits256& bits, unsigned lo, unsigned width);
void deposit_bits(Bits256& bits, unsigned lo, unsigned width, std::uint64_t value);

// One v16 instruction. Fields are read and written by id; a field of another opcode or a value
// that does not fit the field's width throws npukit::Error naming the instruction and field.
class Instruction {
 public:
  explicit Instruction(Opcode op);

  Opcode opcode() const { return opcode_; }
  std::uint64_t get(Field field) const;
  Instruction& set(Field field, std::uint64_t value);
  // Signed view of a field (two's complement within its width), e.g. TailBlock.QuantScale.
  std::int64_t get_signed(Field field) const;
  Instruction& set_signed(Field field, std::int64_t value);

  const Bits256& bits() const { return bits_; }
  // Serialised as on the wire and in DRAM: byte 0 holds bits [255:248].
  std::array<std::uint8_t, kInstructionBytes> encode() const;

  bool operator==(const Instruction&) const = default;

 private:
  const FieldInfo& check_field(Field field) const;
  Opcode opcode_;
  Bits256 bits_{};
};

// What decoding 32 bytes found. `instruction` is empty when the opcode is unknown.
struct Decoded {
  Bits256 bits{};
  std::uint8_t opcode_value = 0;
  std::optional<Instruction> instruction;
  std::vector<std::string> problems;  // unknown opcode, non-zero reserved bits
  bool ok() const { return instruction.has_value() && problems.empty(); }
};

Decoded decode(std::span<const std::uint8_t, kInstructionBytes> bytes);
Bits256 bits_from_bytes(std::span<const std::uint8_t, kInstructionBytes> bytes);
// The inverse: byte 0 holds bits [255:248].
std::array<std::uint8_t, kInstructionBytes> bytes_from_bits(const Bits256& bits);
// Decodes and throws npukit::Error (with `where`, e.g. "instruction 3 at DRAM 0x60") on problems.
Instruction decode_strict(std::span<const std::uint8_t, kInstructionBytes> bytes,
                          std::string_view where);

// The zeroth instruction at DRAM address 0: the instruction region [start, end), end exclusive.
struct Zeroth {
  // Bit positions (instructions.vh): ZerothStartAddress [31:0], ZerothEndAddress [63:32];
  // bits [255:64] are zero.
  static constexpr unsigned kStartLo = 0, kEndLo = 32, kAddressWidth = 32;
  std::uint32_t start = 0;
  std::uint32_t end = 0;
  std::array<std::uint8_t, kInstructionBytes> encode() const;
  static Zeroth decode(std::span<const std::uint8_t, kInstructionBytes> bytes);
};

// Named constants of instructions.vh v16.
enum class ActType : std::uint8_t { kRelu = 0, kClip = 1, kLeakyRelu = 2 };
enum class PoolType : std::uint8_t { kMax = 0, kAverage = 1, kGlobalAverage = 2 };
enum class EltType : std::uint8_t { kAdd = 0, kSub = 1, kMult = 2, kSigmoid = 3, kTanh = 4 };
enum class ConvType : std::uint8_t { kRegular = 0, kDepthwise = 1, kPointwise = 2 };

}  // namespace npukit::isa
