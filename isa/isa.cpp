#include "isa/isa.h"

#include "common/error.h"

#include <fmt/core.h>

#include <algorithm>

namespace npukit::isa {
namespace {

constexpr FieldInfo kFields[] = {
#define NPUKIT_ISA_OPCODE(name, code, summary)
#define NPUKIT_ISA_FIELD(op, name, lo, width, meaning) \
  {Field::op##_##name, Opcode::op, #name, meaning, lo, width},
#include "isa/isa_v16.def"
#undef NPUKIT_ISA_OPCODE
#undef NPUKIT_ISA_FIELD
};
static_assert(std::size(kFields) == static_cast<std::size_t>(Field::kCount));

constexpr std::size_t count_fields(Opcode op) {
  std::size_t n = 0;
  for (const auto& f : kFields) n += f.opcode == op;
  return n;
}
constexpr std::size_t first_field(Opcode op) {
  for (std::size_t i = 0; i < std::size(kFields); ++i)
    if (kFields[i].opcode == op) return i;
  return std::size(kFields);
}
constexpr std::uint16_t used_bits(Opcode op) {
  std::uint16_t top = 4;
  for (const auto& f : kFields)
    if (f.opcode == op) top = std::max<std::uint16_t>(top, f.lo + f.width);
  return top;
}

// Checks the table itself at compile time: fields of one opcode are contiguous in the list,
// in bit order, never overlap, never touch the opcode bits and stay inside 256 bits.
constexpr bool table_is_sound() {
  for (std::size_t i = 0; i < std::size(kFields); ++i) {
    const auto& f = kFields[i];
    if (f.lo < 4 || f.width == 0 || f.width > 64 || f.lo + f.width > 256) return false;
    if (i > 0 && kFields[i - 1].opcode == f.opcode &&
        kFields[i - 1].lo + kFields[i - 1].width > f.lo)
      return false;
  }
  return true;
}
static_assert(table_is_sound(), "isa_v16.def: overlapping, unordered or out-of-range fields");

constexpr OpcodeInfo kOpcodes[] = {
#define NPUKIT_ISA_OPCODE(name, code, summary)                                                  \
  {Opcode::name, #name, summary,                                                                \
   std::span<const FieldInfo>(kFields + first_field(Opcode::name), count_fields(Opcode::name)), \
   used_bits(Opcode::name)},
#define NPUKIT_ISA_FIELD(op, name, lo, width, meaning)
#include "isa/isa_v16.def"
#undef NPUKIT_ISA_OPCODE
#undef NPUKIT_ISA_FIELD
};

}  // namespace

std::span<const OpcodeInfo> opcodes() { return kOpcodes; }

const OpcodeInfo* find_opcode(std::uint8_t value) {
  for (const auto& op : kOpcodes)
    if (static_cast<std::uint8_t>(op.opcode) == value) return &op;
  return nullptr;
}

const OpcodeInfo* find_opcode(std::string_view name) {
  for (const auto& op : kOpcodes)
    if (op.name == name) return &op;
  return nullptr;
}

const OpcodeInfo& info(Opcode op) { return *find_opcode(static_cast<std::uint8_t>(op)); }
const FieldInfo& info(Field field) { return kFields[static_cast<std::size_t>(field)]; }

const FieldInfo* find_field(Opcode op, std::string_view name) {
  for (const auto& f : info(op).fields)
    if (f.name == name) return &f;
  return nullptr;
}

std::string_view name(Opcode op) { return info(op).name; }

std::string qualified_name(Field field) {
  const auto& f = info(field);
  return fmt::format("{}.{}", name(f.opcode), f.name);
}

bool is_megablock(Opcode op) {
  switch (op) {
    case Opcode::CONV:
    case Opcode::FC:
    case Opcode::NMS:
    case Opcode::EltWise:
    case Opcode::RESHAPE:
    case Opcode::TRANSPOSE:
    case Opcode::POOL:
    case Opcode::CONCAT:
    case Opcode::RESIZE:
      return true;
    default:
      return false;
  }
}

// Word-wise: a field of up to 64 bits spans at most two 64-bit words.
std::uint64_t extract_bits(const Bits256& bits, unsigned lo, unsigned width) {
  if (width == 0 || width > 64 || lo + width > 256)
    fail("bit range [{}+:{}] is outside a 256-bit instruction", lo, width);
  const unsigned word = lo / 64, shift = lo % 64;
  std::uint64_t value = bits[word] >> shift;
  if (shift != 0 && shift + width > 64) value |= bits[word + 1] << (64 - shift);
  return width == 64 ? value : value & ((std::uint64_t{1} << width) - 1);
}

void deposit_bits(Bits256& bits, unsigned lo, unsigned width, std::uint64_t value) {
  if (width == 0 || width > 64 || lo + width > 256)
    fail("bit range [{}+:{}] is outside a 256-bit instruction", lo, width);
  const std::uint64_t mask = width == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << width) - 1;
  value &= mask;
  const unsigned word = lo / 64, shift = lo % 64;
  bits[word] = (bits[word] & ~(mask << shift)) | (value << shift);
  if (shift != 0 && shift + width > 64) {
    const unsigned spill = 64 - shift;  // bits of value already placed in `word`
    bits[word + 1] = (bits[word + 1] & ~(mask >> spill)) | (value >> spill);
  }
}

Instruction::Instruction(Opcode op) : opcode_(op) {
  deposit_bits(bits_, 0, 4, static_cast<std::uint8_t>(op));
}

const FieldInfo& Instruction::check_field(Field field) const {
  const auto& f = info(field);
  if (f.opcode != opcode_)
    fail("{} has no field {} (it is a field of {})", name(opcode_), qualified_name(field),
         name(f.opcode));
  return f;
}

std::uint64_t Instruction::get(Field field) const {
  const auto& f = check_field(field);
  return extract_bits(bits_, f.lo, f.width);
}

Instruction& Instruction::set(Field field, std::uint64_t value) {
  const auto& f = check_field(field);
  if (value > f.max_value())
    fail("{}: value {} does not fit the {}-bit field (maximum {})", qualified_name(field), value,
         f.width, f.max_value());
  deposit_bits(bits_, f.lo, f.width, value);
  return *this;
}

std::int64_t Instruction::get_signed(Field field) const {
  const auto& f = check_field(field);
  std::uint64_t raw = extract_bits(bits_, f.lo, f.width);
  if (f.width < 64 && (raw >> (f.width - 1)) & 1ull) raw |= ~f.max_value();
  return static_cast<std::int64_t>(raw);
}

Instruction& Instruction::set_signed(Field field, std::int64_t value) {
  const auto& f = check_field(field);
  const std::int64_t lo = -(std::int64_t{1} << (f.width - 1));
  const std::int64_t hi = (std::int64_t{1} << (f.width - 1)) - 1;
  if (value < lo || value > hi)
    fail("{}: value {} does not fit the signed {}-bit field (range {}..{})", qualified_name(field),
         value, f.width, lo, hi);
  deposit_bits(bits_, f.lo, f.width, static_cast<std::uint64_t>(value) & f.max_value());
  return *this;
}

std::array<std::uint8_t, kInstructionBytes> bytes_from_bits(const Bits256& bits) {
  std::array<std::uint8_t, kInstructionBytes> out{};
  for (std::size_t i = 0; i < kInstructionBytes; ++i) {
    unsigned lo = static_cast<unsigned>(8 * (kInstructionBytes - 1 - i));
    out[i] = static_cast<std::uint8_t>(bits[lo / 64] >> (lo % 64));
  }
  return out;
}

Bits256 bits_from_bytes(std::span<const std::uint8_t, kInstructionBytes> bytes) {
  Bits256 bits{};
  for (std::size_t i = 0; i < kInstructionBytes; ++i) {
    unsigned lo = static_cast<unsigned>(8 * (kInstructionBytes - 1 - i));
    bits[lo / 64] |= std::uint64_t{bytes[i]} << (lo % 64);
  }
  return bits;
}

std::array<std::uint8_t, kInstructionBytes> Instruction::encode() const {
  return bytes_from_bits(bits_);
}

Decoded decode(std::span<const std::uint8_t, kInstructionBytes> bytes) {
  Decoded d;
  d.bits = bits_from_bytes(bytes);
  d.opcode_value = static_cast<std::uint8_t>(d.bits[0] & 0xF);
  const OpcodeInfo* op = find_opcode(d.opcode_value);
  if (op == nullptr) {
    d.problems.push_back(
        fmt::format("unknown opcode 0x{:X} (ISA v16 defines 0x0-0xA and 0xF)", d.opcode_value));
    return d;
  }
  Instruction inst(op->opcode);
  for (const auto& f : op->fields) inst.set(f.id, extract_bits(d.bits, f.lo, f.width));
  for (unsigned b = op->used_bits; b < 256; ++b) {
    if ((d.bits[b / 64] >> (b % 64)) & 1ull) {
      unsigned top = b;
      for (unsigned c = b; c < 256; ++c)
        if ((d.bits[c / 64] >> (c % 64)) & 1ull) top = c;
      d.problems.push_back(
          fmt::format("{}: reserved bits [255:{}] are not zero (highest set bit {})", op->name,
                      op->used_bits, top));
      break;
    }
  }
  d.instruction = inst;
  return d;
}

Instruction decode_strict(std::span<const std::uint8_t, kInstructionBytes> bytes,
                          std::string_view where) {
  Decoded d = decode(bytes);
  if (!d.problems.empty()) fail("{}: {}", where, d.problems.front());
  return *d.instruction;
}

std::array<std::uint8_t, kInstructionBytes> Zeroth::encode() const {
  Bits256 bits{};
  deposit_bits(bits, kStartLo, kAddressWidth, start);
  deposit_bits(bits, kEndLo, kAddressWidth, end);
  return bytes_from_bits(bits);
}

Zeroth Zeroth::decode(std::span<const std::uint8_t, kInstructionBytes> bytes) {
  Bits256 bits = bits_from_bytes(bytes);
  return Zeroth{static_cast<std::uint32_t>(extract_bits(bits, kStartLo, kAddressWidth)),
                static_cast<std::uint32_t>(extract_bits(bits, kEndLo, kAddressWidth))};
}

}  // namespace npukit::isa
