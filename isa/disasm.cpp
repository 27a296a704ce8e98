#include "isa/disasm.h"

#include "common/error.h"
#include "isa/arch.h"
#include "isa/dwp.h"
#include "isa/gml.h"
#include "isa/isa.h"

#include <fmt/core.h>

#include <algorithm>

namespace npukit::isa {

using json = nlohmann::ordered_json;

std::string to_hex(ByteSpan bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (std::uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

namespace {

bool is_address_field(std::string_view name) {
  return name.ends_with("Address") || name.ends_with("Addr");
}

// Address fields that point at the first byte of a region (not its exclusive end).
bool is_region_start_field(std::string_view name) {
  return is_address_field(name) && name.find("End") == std::string_view::npos;
}

// The field holding the exclusive end of the region that `start` begins, e.g.
// CONV.WeightStartAddress -> CONV.WeightEndAddress, FC.ImageStartAddress -> FC.ImageEndAddr.
const FieldInfo* end_field_of(const FieldInfo& start) {
  const auto pos = start.name.find("Start");
  if (pos == std::string_view::npos) return nullptr;
  const std::string stem = std::string(start.name.substr(0, pos)) + "End";
  for (const auto& f : info(start.opcode).fields)
    if (f.name.starts_with(stem) && is_address_field(f.name)) return &f;
  return nullptr;
}

// Reserved bits [255:used_bits] shifted down to bit 0, as hex bytes (most significant first).
std::string reserved_hex(const Bits256& bits, unsigned used_bits) {
  Bits256 reserved{};
  for (unsigned lo = used_bits, out = 0; lo < 256; lo += 64, out += 64) {
    const unsigned width = std::min(64u, 256 - lo);
    deposit_bits(reserved, out, width, extract_bits(bits, lo, width));
  }
  const auto bytes = bytes_from_bits(reserved);
  auto first = std::find_if(bytes.begin(), bytes.end(), [](std::uint8_t b) { return b != 0; });
  if (first == bytes.end()) return "";
  return to_hex(ByteSpan(&*first, static_cast<std::size_t>(bytes.end() - first)));
}

}  // namespace

json disassemble(ByteSpan stream, const DisasmOptions& options) {
  const auto packets = parse_dwp_stream(stream);
  json listing;
  listing["packets"] = json::array();
  listing["instructions"] = json::array();
  json problems = json::array();
  json warnings = json::array();
  for (auto& w : dwp_warnings(packets)) warnings.push_back(std::move(w));
  if (packets.empty()) problems.push_back("the stream holds no DWP packet");

  // Every instruction of every instruction packet, in order, for the structure check and for
  // naming what each data packet holds.
  struct Located {
    std::size_t number;  // 1-based within its packet
    std::size_t packet;
    Instruction inst;
  };
  std::vector<Located> decoded;
  bool saw_instructions = false;

  for (std::size_t p = 0; p < packets.size(); ++p) {
    const auto& packet = packets[p];
    json entry{{"offset", packet.offset},
               {"address", packet.address},
               {"size", packet.size},
               {"kind", packet.is_start()     ? "start"
                        : packet.address == 0 ? "instructions"
                                              : "data"}};
    if (packet.is_start() || packet.address != 0) {
      listing["packets"].push_back(std::move(entry));
      continue;
    }
    // The instruction packet (GATI_INST_ORG = 0): the zeroth instruction, then n instructions.
    if (saw_instructions)
      warnings.push_back(
          fmt::format("a second instruction packet at byte offset {} replaces the program in DRAM",
                      packet.offset));
    saw_instructions = true;
    const std::uint64_t payload_at = packet.offset + kDwpHeaderBytes;
    const auto zeroth = Zeroth::decode(packet.payload.first<kInstructionBytes>());
    entry["zeroth"] = {{"ZerothStartAddress", zeroth.start}, {"ZerothEndAddress", zeroth.end}};
    if (zeroth.start != kInstructionBytes)
      problems.push_back(
          fmt::format("zeroth instruction at byte offset {}: ZerothStartAddress is {}, expected 32",
                      payload_at, zeroth.start));
    if (zeroth.end != packet.size)
      problems.push_back(fmt::format(
          "zeroth instruction at byte offset {}: ZerothEndAddress is {} but the instruction packet "
          "ends at DRAM {} (the end is exclusive, (n+1)*32)",
          payload_at, zeroth.end, packet.size));
    const auto zeroth_reserved =
        reserved_hex(bits_from_bytes(packet.payload.first<kInstructionBytes>()), 64);
    if (!zeroth_reserved.empty()) {
      entry["zeroth"]["reserved_bits"] = zeroth_reserved;
      problems.push_back(fmt::format(
          "zeroth instruction at byte offset {}: bits [255:64] are not zero", payload_at));
    }
    if (packet.size == kInstructionBytes)
      problems.push_back(fmt::format(
          "instruction packet at byte offset {} holds only the zeroth instruction", packet.offset));
    listing["packets"].push_back(std::move(entry));

    for (std::size_t at = kInstructionBytes; at < packet.size; at += kInstructionBytes) {
      const auto bytes = packet.payload.subspan(at).first<kInstructionBytes>();
      const Decoded d = decode(bytes);
      json inst{{"address", packet.address + at}, {"packet", p}};
      const std::size_t number = at / kInstructionBytes;
      if (d.instruction) {
        const auto& op = info(d.instruction->opcode());
        inst["opcode"] = op.name;
        json fields = json::object();
        for (const auto& f : op.fields) fields[std::string(f.name)] = d.instruction->get(f.id);
        inst["fields"] = std::move(fields);
        const auto reserved = reserved_hex(d.bits, op.used_bits);
        if (!reserved.empty()) inst["reserved_bits"] = reserved;
        decoded.push_back({number, p, *d.instruction});
      } else {
        inst["opcode"] = nullptr;
        inst["fields"] = json::object();
      }
      inst["raw"] = to_hex(bytes);
      json inst_problems = json::array();
      for (const auto& problem : d.problems)
        inst_problems.push_back(fmt::format("byte offset {}: {}", payload_at + at, problem));
      inst["problems"] = std::move(inst_problems);
      listing["instructions"].push_back(std::move(inst));
    }
  }
  if (!packets.empty() && !saw_instructions)
    warnings.push_back("no instruction packet at DRAM address 0 (a data-only DWP stream)");

  // Program structure, per instruction packet.
  for (std::size_t p = 0; p < packets.size(); ++p) {
    std::vector<Instruction> list;
    for (const auto& d : decoded)
      if (d.packet == p) list.push_back(d.inst);
    if (list.empty()) continue;
    for (auto& finding : lint_instruction_list(list))
      warnings.push_back(fmt::format("program at byte offset {}: {}", packets[p].offset, finding));
  }

  // What each data packet holds: the address fields that point at its first byte.
  for (std::size_t p = 0; p < packets.size(); ++p) {
    const auto& packet = packets[p];
    if (packet.is_start() || packet.address == 0) continue;
    json holds = json::array();
    for (const auto& d : decoded) {
      const auto& op = info(d.inst.opcode());
      for (const auto& f : op.fields) {
        if (!is_region_start_field(f.name) || d.inst.get(f.id) != packet.address) continue;
        holds.push_back(fmt::format("{} of instruction {}", qualified_name(f.id), d.number));
        const FieldInfo* end = end_field_of(f);
        if (end == nullptr) continue;
        const auto region_end = d.inst.get(end->id);
        if (region_end > packet.address && region_end - packet.address > packet.size)
          warnings.push_back(fmt::format(
              "data packet at byte offset {} holds {} bytes but instruction {} reads [0x{:X}, "
              "0x{:X}) ({} to {}): the rest comes from whatever DRAM held",
              packet.offset, packet.size, d.number, packet.address, region_end,
              qualified_name(f.id), end->name));
      }
    }
    auto& entry = listing["packets"][p];
    if (!holds.empty()) entry["holds"] = std::move(holds);
    if (options.include_data) entry["hex"] = to_hex(packet.payload);
  }

  listing["problems"] = std::move(problems);
  listing["warnings"] = std::move(warnings);
  return listing;
}

bool listing_has_problems(const json& listing) {
  if (!listing.at("problems").empty()) return true;
  for (const auto& inst : listing.at("instructions"))
    if (!inst.at("problems").empty()) return true;
  return false;
}

std::string render_listing(const json& listing) {
  std::string out;
  const auto& packets = listing.at("packets");
  const auto& instructions = listing.at("instructions");
  for (std::size_t p = 0; p < packets.size(); ++p) {
    const auto& packet = packets[p];
    const auto kind = packet.at("kind").get<std::string>();
    const auto address = packet.at("address").get<std::uint64_t>();
    const auto size = packet.at("size").get<std::uint64_t>();
    out +=
        fmt::format("packet {} at byte offset {}: ", p, packet.at("offset").get<std::uint64_t>());
    if (kind == "start") {
      out += "START (size 0: begin execution)\n";
      continue;
    }
    out += fmt::format("{} {} bytes -> DRAM [0x{:08X}, 0x{:08X})", kind, size, address,
                       address + size);
    if (packet.contains("holds")) {
      std::string holds;
      for (const auto& h : packet["holds"])
        holds += (holds.empty() ? "" : ", ") + h.get<std::string>();
      out += fmt::format(" = {}", holds);
    }
    out += "\n";
    if (kind == "data" && packet.contains("hex")) {
      const auto hex = packet["hex"].get<std::string>();
      out += fmt::format("    {}{}\n", hex.substr(0, 64), hex.size() > 64 ? " ..." : "");
    }
    if (kind != "instructions") continue;
    const auto& zeroth = packet.at("zeroth");
    out += fmt::format("  0x{:08X}  ZEROTH      ZerothStartAddress={} ZerothEndAddress={}\n",
                       address, zeroth.at("ZerothStartAddress").get<std::uint64_t>(),
                       zeroth.at("ZerothEndAddress").get<std::uint64_t>());
    for (const auto& inst : instructions) {
      if (inst.at("packet").get<std::size_t>() != p) continue;
      const auto at = inst.at("address").get<std::uint64_t>();
      if (inst.at("opcode").is_null()) {
        out +=
            fmt::format("  0x{:08X}  ??          raw={}\n", at, inst.at("raw").get<std::string>());
      } else {
        // Fields wrapped to about 100 columns, continuation lines aligned under the first field.
        std::string line =
            fmt::format("  0x{:08X}  {:<11} ", at, inst.at("opcode").get<std::string>());
        const std::size_t indent = line.size();
        std::size_t width = line.size();
        bool first = true;
        const auto* op = find_opcode(inst.at("opcode").get<std::string>());
        for (const auto& f : op->fields) {
          const auto value = inst.at("fields").at(std::string(f.name)).get<std::uint64_t>();
          std::string item = is_address_field(f.name) ? fmt::format("{}=0x{:X}", f.name, value)
                                                      : fmt::format("{}={}", f.name, value);
          if (!first && width + 1 + item.size() > 100) {
            line += "\n" + std::string(indent, ' ');
            width = indent;
          } else if (!first) {
            line += ' ';
            ++width;
          }
          line += item;
          width += item.size();
          first = false;
        }
        if (inst.contains("reserved_bits"))
          line += fmt::format("\n{}reserved_bits=0x{}", std::string(indent, ' '),
                              inst["reserved_bits"].get<std::string>());
        out += line + "\n";
      }
      for (const auto& problem : inst.at("problems"))
        out += fmt::format("    !! {}\n", problem.get<std::string>());
    }
  }
  for (const auto& problem : listing.at("problems"))
    out += fmt::format("!! {}\n", problem.get<std::string>());
  for (const auto& warning : listing.at("warnings"))
    out += fmt::format("warning: {}\n", warning.get<std::string>());
  std::size_t bad = 0;
  for (const auto& inst : instructions) bad += !inst.at("problems").empty();
  out += fmt::format(
      "{} packet(s), {} instruction(s), {} invalid instruction(s), {} stream "
      "problem(s), {} warning(s)\n",
      packets.size(), instructions.size(), bad, listing.at("problems").size(),
      listing.at("warnings").size());
  return out;
}

}  // namespace npukit::isa
