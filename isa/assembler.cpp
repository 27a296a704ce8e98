#include "isa/assembler.h"

#include "common/error.h"
#include "common/file_io.h"
#include "isa/arch.h"
#include "isa/dwp.h"
#include "isa/gml.h"
#include "isa/isa.h"

#include <fmt/core.h>

#include <charconv>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>

namespace npukit::isa {

using json = nlohmann::ordered_json;

namespace {

// Fields the hardware reads as two's complement (the device model reads them with get_signed:
// scales, zero points, the NMS threshold); every other field is unsigned, and a negative value
// for it is an error rather than a wrapped bit pattern.
bool is_signed_field(Field field) {
  switch (field) {
    case Field::TailBlock_QuantScale:
    case Field::EltWise_AScale:
    case Field::EltWise_BScale:
    case Field::EltWise_AZeroPoint:
    case Field::EltWise_BZeroPoint:
    case Field::NMS_ScoreThresh:
      return true;
    default:
      return false;
  }
}

// A JSON number or a numeric string ("42", "0x2A", "-3") as a signed 128-bit-free pair.
struct Number {
  bool negative = false;
  std::uint64_t magnitude = 0;
};

Number read_number(const json& value, const std::string& where) {
  if (value.is_number_unsigned()) return {false, value.get<std::uint64_t>()};
  if (value.is_number_integer()) {
    const auto v = value.get<std::int64_t>();
    return {v < 0, v < 0 ? std::uint64_t(0) - static_cast<std::uint64_t>(v) : std::uint64_t(v)};
  }
  if (value.is_string()) {
    std::string_view s = value.get_ref<const std::string&>();
    Number n;
    if (!s.empty() && s.front() == '-') {
      n.negative = true;
      s.remove_prefix(1);
    }
    int base = 10;
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
      base = 16;
      s.remove_prefix(2);
    }
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n.magnitude, base);
    if (!s.empty() && ec == std::errc() && end == s.data() + s.size()) return n;
  }
  fail("{}: expected an integer (number, \"0x..\" or \"-..\" string), got {}", where, value.dump());
}

std::uint32_t read_u32(const json& value, const std::string& where) {
  const Number n = read_number(value, where);
  if (n.negative || n.magnitude > 0xFFFFFFFFull)
    fail("{}: {} is not a 32-bit unsigned value", where, value.dump());
  return static_cast<std::uint32_t>(n.magnitude);
}

Bytes read_hex(const json& value, const std::string& where) {
  if (!value.is_string()) fail("{}: expected a hex string", where);
  const auto& s = value.get_ref<const std::string&>();
  Bytes out;
  int high = -1;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == ' ' || c == '\n' || c == '_') continue;
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
    if (digit < 0) fail("{}: '{}' at character {} is not a hex digit", where, c, i);
    if (high < 0) {
      high = digit;
    } else {
      out.push_back(static_cast<std::uint8_t>(high << 4 | digit));
      high = -1;
    }
  }
  if (high >= 0) fail("{}: odd number of hex digits", where);
  return out;
}

Bytes read_base64(const json& value, const std::string& where) {
  if (!value.is_string()) fail("{}: expected a base64 string", where);
  const auto& s = value.get_ref<const std::string&>();
  Bytes out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    int v = c >= 'A' && c <= 'Z'   ? c - 'A'
            : c >= 'a' && c <= 'z' ? c - 'a' + 26
            : c >= '0' && c <= '9' ? c - '0' + 52
            : c == '+'             ? 62
            : c == '/'             ? 63
                                   : -1;
    if (c == '=' || c == '\n' || c == ' ') continue;
    if (v < 0) fail("{}: '{}' at character {} is not base64", where, c, i);
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<std::uint8_t>(acc >> bits));
    }
  }
  return out;
}

Bytes read_file_bytes(const std::filesystem::path& path, const std::string& where) {
  try {
    return npukit::read_file_bytes(path.string());
  } catch (const Error& e) {
    fail("{}: {}", where, e.what());
  }
}

void check_keys(const json& object, const std::string& where,
                std::initializer_list<std::string_view> allowed) {
  if (!object.is_object()) fail("{}: expected a JSON object, got {}", where, object.type_name());
  for (const auto& [key, value] : object.items()) {
    (void)value;
    bool ok = false;
    for (auto a : allowed) ok = ok || a == key;
    if (!ok) {
      std::string list;
      for (auto a : allowed) list += fmt::format("{}\"{}\"", list.empty() ? "" : ", ", a);
      fail("{}: unknown key \"{}\" (allowed: {})", where, key, list);
    }
  }
}

std::array<std::uint8_t, kInstructionBytes> assemble_instruction(const json& entry,
                                                                 const std::string& where) {
  check_keys(
      entry, where,
      {"address", "packet", "opcode", "fields", "raw", "reserved_bits", "problems", "comment"});
  const bool has_opcode = entry.contains("opcode") && !entry["opcode"].is_null();
  if (!has_opcode) {
    if (!entry.contains("raw"))
      fail("{}: needs \"opcode\" (with \"fields\") or \"raw\" (64 hex digits)", where);
    const Bytes raw = read_hex(entry["raw"], where + ".raw");
    if (raw.size() != kInstructionBytes)
      fail("{}.raw: {} bytes, an instruction is 32 (64 hex digits)", where, raw.size());
    std::array<std::uint8_t, kInstructionBytes> out{};
    std::copy(raw.begin(), raw.end(), out.begin());
    return out;
  }
  if (!entry["opcode"].is_string()) fail("{}.opcode: expected a name such as \"CONV\"", where);
  const auto& op_name = entry["opcode"].get_ref<const std::string&>();
  const OpcodeInfo* op = find_opcode(op_name);
  if (op == nullptr) {
    std::string names;
    for (const auto& o : opcodes()) names += fmt::format("{}{}", names.empty() ? "" : ", ", o.name);
    fail("{}.opcode: unknown opcode \"{}\" (ISA v16: {})", where, clip(op_name), names);
  }
  Instruction inst(op->opcode);
  if (entry.contains("fields")) {
    const auto& fields = entry["fields"];
    if (!fields.is_object()) fail("{}.fields: expected an object of field values", where);
    for (const auto& [key, value] : fields.items()) {
      const std::string field_where = fmt::format("{}.fields.{}", where, key);
      const FieldInfo* f = find_field(op->opcode, key);
      if (f == nullptr) {
        std::string names;
        for (const auto& x : op->fields)
          names += fmt::format("{}{}", names.empty() ? "" : ", ", x.name);
        fail("{}: {} has no field \"{}\" (fields: {})", clip(field_where), op->name, clip(key),
             names);
      }
      const Number n = read_number(value, field_where);
      try {
        if (n.negative) {
          if (!is_signed_field(f->id))
            fail("value -{} is negative; {} is an unsigned {}-bit field (range 0..{})", n.magnitude,
                 f->name, f->width, f->max_value());
          if (n.magnitude > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
            fail("value -{} is out of range", n.magnitude);
          inst.set_signed(f->id, -static_cast<std::int64_t>(n.magnitude));
        } else {
          inst.set(f->id, n.magnitude);
        }
      } catch (const Error& e) {
        fail("{}: {}", field_where, e.what());
      }
    }
  }
  Bits256 bits = inst.bits();
  if (entry.contains("reserved_bits")) {
    const Bytes reserved = read_hex(entry["reserved_bits"], where + ".reserved_bits");
    const unsigned room = 256 - op->used_bits;
    // Big-endian hex: the last byte holds reserved bits [used_bits+7 : used_bits].
    for (std::size_t i = 0; i < reserved.size(); ++i) {
      const std::uint8_t byte = reserved[reserved.size() - 1 - i];
      for (unsigned b = 0; b < 8; ++b) {
        if (!((byte >> b) & 1)) continue;
        const unsigned bit = static_cast<unsigned>(8 * i + b);
        if (bit >= room)
          fail("{}.reserved_bits: {} has only {} reserved bits [255:{}]", where, op->name, room,
               op->used_bits);
        deposit_bits(bits, op->used_bits + bit, 1, 1);
      }
    }
  }
  return bytes_from_bits(bits);
}

Bytes data_of(const json& entry, const std::string& where, const std::filesystem::path& base_dir) {
  const char* sources[] = {"hex", "base64", "file", "int8", "int32"};
  const char* chosen = nullptr;
  for (const char* s : sources) {
    if (!entry.contains(s)) continue;
    if (chosen) fail("{}: give the data once, not both \"{}\" and \"{}\"", where, chosen, s);
    chosen = s;
  }
  if (!chosen)
    fail("{}: a data packet needs one of \"hex\", \"base64\", \"file\", \"int8\", \"int32\"",
         where);
  const std::string key = chosen;
  const json& value = entry[key];
  const std::string value_where = where + "." + key;
  if (key == "hex") return read_hex(value, value_where);
  if (key == "base64") return read_base64(value, value_where);
  if (key == "file") {
    if (!value.is_string()) fail("{}: expected a path", value_where);
    std::filesystem::path path = value.get<std::string>();
    if (path.is_relative()) path = base_dir / path;
    return read_file_bytes(path, value_where);
  }
  if (!value.is_array()) fail("{}: expected an array of integers", value_where);
  Bytes out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const std::string item_where = fmt::format("{}[{}]", value_where, i);
    const Number n = read_number(value[i], item_where);
    if (key == "int8") {
      if (n.negative ? n.magnitude > 128 : n.magnitude > 255)
        fail("{}: {} does not fit a byte (-128..255)", item_where, value[i].dump());
      out.push_back(static_cast<std::uint8_t>(n.negative ? 256 - n.magnitude : n.magnitude));
    } else {
      if (n.negative ? n.magnitude > 0x80000000ull : n.magnitude > 0xFFFFFFFFull)
        fail("{}: {} does not fit 32 bits", item_where, value[i].dump());
      append_be32(out, static_cast<std::uint32_t>(
                           n.negative ? std::uint64_t(0x100000000ull) - n.magnitude : n.magnitude));
    }
  }
  return out;
}

}  // namespace

Assembled assemble(const json& program, const std::filesystem::path& base_dir) {
  check_keys(program, "program",
             {"instructions", "packets", "problems", "warnings", "comment", "arch"});
  if (program.contains("arch")) {
    if (!program["arch"].is_string()) fail("program.arch: expected a string such as \"9,8,8\"");
    SaArch::parse(program["arch"].get<std::string>());  // documents the target; validated only
  }
  Assembled result;
  std::vector<std::array<std::uint8_t, kInstructionBytes>> instructions;
  if (program.contains("instructions")) {
    const auto& list = program["instructions"];
    if (!list.is_array()) fail("instructions: expected an array");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string where = fmt::format("instructions[{}]", i);
      instructions.push_back(assemble_instruction(list[i], where));
      if (list[i].contains("address")) {
        const auto address = read_u32(list[i]["address"], where + ".address");
        if (address != instruction_region_bytes(i))
          fail("{}.address: {} but instruction {} sits at DRAM {} (the zeroth is at 0)", where,
               address, i + 1, instruction_region_bytes(i));
      }
    }
  }

  json packets = program.contains("packets") ? program["packets"] : json::array();
  if (!packets.is_array()) fail("packets: expected an array");
  if (!program.contains("packets") && !instructions.empty())
    packets.push_back(json{{"kind", "instructions"}});
  if (packets.empty()) fail("program: nothing to assemble (no instructions and no packets)");

  bool wrote_instructions = false;
  for (std::size_t p = 0; p < packets.size(); ++p) {
    const auto& entry = packets[p];
    const std::string where = fmt::format("packets[{}]", p);
    check_keys(entry, where,
               {"offset", "address", "size", "kind", "zeroth", "holds", "hex", "base64", "file",
                "int8", "int32", "pad", "comment"});
    if (!entry.contains("kind") || !entry["kind"].is_string())
      fail("{}: needs \"kind\": \"instructions\", \"data\" or \"start\"", where);
    const auto kind = entry["kind"].get<std::string>();
    if (kind == "instructions") {
      if (wrote_instructions) fail("{}: a second instruction packet (asm writes one)", where);
      if (instructions.empty())
        fail("{}: an instruction packet but \"instructions\" is empty", where);
      if (entry.contains("address") && read_u32(entry["address"], where + ".address") != 0)
        fail("{}.address: the instruction packet is at DRAM 0", where);
      const auto region = instruction_region_bytes(instructions.size());
      Zeroth zeroth{static_cast<std::uint32_t>(kInstructionBytes),
                    static_cast<std::uint32_t>(region)};
      if (entry.contains("zeroth")) {
        const auto& z = entry["zeroth"];
        check_keys(z, where + ".zeroth",
                   {"ZerothStartAddress", "ZerothEndAddress", "reserved_bits"});
        if (z.contains("ZerothStartAddress"))
          zeroth.start = read_u32(z["ZerothStartAddress"], where + ".zeroth.ZerothStartAddress");
        if (z.contains("ZerothEndAddress"))
          zeroth.end = read_u32(z["ZerothEndAddress"], where + ".zeroth.ZerothEndAddress");
        if (zeroth.start != kInstructionBytes || zeroth.end != region)
          result.warnings.push_back(fmt::format(
              "{}: zeroth instruction written as given, [{}, {}), not [32, {}) (the program's "
              "instruction range)",
              where, zeroth.start, zeroth.end, region));
      }
      auto z = zeroth.encode();
      if (entry.contains("zeroth") && entry["zeroth"].contains("reserved_bits")) {
        // Bits [255:64] of the zeroth word, big-endian hex: only for building bad streams.
        const Bytes reserved =
            read_hex(entry["zeroth"]["reserved_bits"], where + ".zeroth.reserved_bits");
        if (reserved.size() > 24)
          fail("{}.zeroth.reserved_bits: {} bytes, the zeroth word has 24 above bit 63", where,
               reserved.size());
        for (std::size_t i = 0; i < reserved.size(); ++i)
          z[24 - reserved.size() + i] |= reserved[i];
        result.warnings.push_back(
            fmt::format("{}: zeroth instruction has reserved bits set", where));
      }
      Bytes payload;
      payload.insert(payload.end(), z.begin(), z.end());
      for (const auto& inst : instructions) payload.insert(payload.end(), inst.begin(), inst.end());
      if (entry.contains("size") && read_u32(entry["size"], where + ".size") != payload.size())
        fail("{}.size: {} but {} instructions make {} bytes", where, entry["size"].dump(),
             instructions.size(), payload.size());
      append_dwp_packet(result.bytes, 0, payload);
      wrote_instructions = true;
    } else if (kind == "data") {
      if (!entry.contains("address")) fail("{}: a data packet needs \"address\"", where);
      const auto address = read_u32(entry["address"], where + ".address");
      Bytes data = data_of(entry, where, base_dir);
      if (entry.contains("pad")) {
        if (!entry["pad"].is_boolean()) fail("{}.pad: expected true or false", where);
        if (entry["pad"].get<bool>()) data.resize(ceil_mod(data.size(), kDramWordBytes), 0);
      }
      if (entry.contains("size") && read_u32(entry["size"], where + ".size") != data.size())
        fail("{}.size: {} but the data holds {} bytes", where, entry["size"].dump(), data.size());
      try {
        append_dwp_packet(result.bytes, address, data);
      } catch (const Error& e) {
        fail("{}: {}{}", where, e.what(),
             data.size() % kDramWordBytes ? " (or set \"pad\": true)" : "");
      }
    } else if (kind == "start") {
      const auto address =
          entry.contains("address") ? read_u32(entry["address"], where + ".address") : 0u;
      if (entry.contains("size") && read_u32(entry["size"], where + ".size") != 0)
        fail("{}.size: a start packet has size 0", where);
      append_be32(result.bytes, kDwpSop);
      append_be32(result.bytes, 0);
      append_be32(result.bytes, address);
    } else {
      fail("{}.kind: \"{}\" is not \"instructions\", \"data\" or \"start\"", where, kind);
    }
  }
  if (!instructions.empty() && !wrote_instructions)
    fail(
        "packets: \"instructions\" are given but no {{\"kind\": \"instructions\"}} packet places "
        "them");

  // Report what the disassembler would warn about, so a hand-written program gets the same
  // feedback at build time.
  const auto parsed = parse_dwp_stream(result.bytes);
  for (auto& w : dwp_warnings(parsed)) result.warnings.push_back(std::move(w));
  std::vector<Instruction> decoded;
  for (std::size_t i = 0; i < instructions.size(); ++i) {
    const Decoded d = decode(instructions[i]);
    for (const auto& problem : d.problems)
      result.warnings.push_back(fmt::format("instructions[{}]: {}", i, problem));
    if (d.instruction) decoded.push_back(*d.instruction);
  }
  for (auto& finding : lint_instruction_list(decoded))
    result.warnings.push_back(std::move(finding));
  return result;
}

Assembled assemble_file(const std::filesystem::path& json_path) {
  const std::string text = read_text_file(json_path.string());
  json program;
  try {
    program = json::parse(text);
  } catch (const json::parse_error& e) {
    fail("{}: not valid JSON: {}", json_path.string(), clip(e.what(), 200));
  }
  try {
    return assemble(program, json_path.parent_path());
  } catch (const Error& e) {
    fail("{}: {}", json_path.string(), e.what());
  }
}

}  // namespace npukit::isa
