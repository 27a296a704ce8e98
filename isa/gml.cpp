#include "isa/gml.h"

#include "common/error.h"
#include "isa/arch.h"
#include "isa/dwp.h"

#include <fmt/core.h>

#include <algorithm>

namespace npukit::isa {

namespace {

struct Range {
  std::uint64_t begin;
  std::uint64_t end;
  std::string what;
};

// Throws on the first pair of overlapping ranges.
void check_no_overlap(std::vector<Range> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (std::size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i - 1].end > ranges[i].begin)
      fail("{} [0x{:X}, 0x{:X}) overlaps {} [0x{:X}, 0x{:X}) in DRAM", ranges[i - 1].what,
           ranges[i - 1].begin, ranges[i - 1].end, ranges[i].what, ranges[i].begin, ranges[i].end);
}

}  // namespace

Bytes encode_gml(const GmlProgram& program) {
  const auto n = program.instructions.size();
  if (n == 0) fail("GML program has no instructions");
  const std::uint64_t region = instruction_region_bytes(n);
  if (region > 0xFFFFFFFFull) fail("GML program has too many instructions ({})", n);

  std::vector<Range> ranges{{0, region, "the instruction region"}};
  for (std::size_t i = 0; i < program.blobs.size(); ++i) {
    const auto& blob = program.blobs[i];
    if (blob.address % kDramWordBytes != 0)
      fail("blob {}: DRAM address 0x{:X} is not 32-byte aligned", i, blob.address);
    if (blob.data.empty() || blob.data.size() % kDramWordBytes != 0)
      fail("blob {} at DRAM 0x{:X}: size {} is not a positive multiple of 32 bytes; pad it", i,
           blob.address, blob.data.size());
    ranges.push_back(
        {blob.address, std::uint64_t{blob.address} + blob.data.size(), fmt::format("blob {}", i)});
  }
  check_no_overlap(ranges);

  Bytes payload;
  payload.reserve(region);
  const auto zeroth =
      Zeroth{static_cast<std::uint32_t>(kInstructionBytes), static_cast<std::uint32_t>(region)}
          .encode();
  payload.insert(payload.end(), zeroth.begin(), zeroth.end());
  for (const auto& inst : program.instructions) {
    const auto bytes = inst.encode();
    payload.insert(payload.end(), bytes.begin(), bytes.end());
  }
  Bytes out;
  append_dwp_packet(out, 0, payload);
  for (const auto& blob : program.blobs) append_dwp_packet(out, blob.address, blob.data);
  return out;
}

namespace {

// decode_gml's checks; the blobs' bytes are copied into the result only when copy_blobs (a
// validating load of a 124 MB resnet50 GML copied every weight byte once more to throw it away).
GmlProgram read_gml(ByteSpan gml, bool copy_blobs) {
  const auto packets = parse_dwp_stream(gml);
  if (packets.empty()) fail("empty GML: expected the instruction packet at DRAM address 0");
  const auto& first = packets.front();
  if (first.is_start() || first.address != 0)
    fail(
        "GML byte offset 0: the first packet must be the instruction packet at DRAM address 0, "
        "found {}",
        first.is_start() ? std::string("a start packet")
                         : fmt::format("a packet for address 0x{:X}", first.address));
  if (first.size < 2 * kInstructionBytes)
    fail(
        "GML byte offset 0: the instruction packet holds {} bytes, room for no instruction after "
        "the zeroth",
        first.size);

  const std::uint64_t zeroth_at = first.offset + kDwpHeaderBytes;
  const auto zeroth = Zeroth::decode(first.payload.first<kInstructionBytes>());
  if (zeroth.start != kInstructionBytes)
    fail(
        "GML byte offset {}: zeroth instruction ZerothStartAddress is {}, expected 32 (the "
        "instruction after the zeroth)",
        zeroth_at + 28, zeroth.start);
  if (zeroth.end != first.size)
    fail(
        "GML byte offset {}: zeroth instruction ZerothEndAddress is {}, but the instruction "
        "packet ends at DRAM {} (the end is exclusive: (n+1)*32)",
        zeroth_at + 24, zeroth.end, first.size);
  for (std::size_t b = 0; b < 24; ++b)
    if (first.payload[b] != 0)
      fail("GML byte offset {}: zeroth instruction bits [255:64] must be zero", zeroth_at + b);

  GmlProgram program;
  const std::size_t n = first.size / kInstructionBytes - 1;
  program.instructions.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t at = (i + 1) * kInstructionBytes;
    const auto bytes = first.payload.subspan(at).first<kInstructionBytes>();
    program.instructions.push_back(
        decode_strict(bytes, fmt::format("GML byte offset {}: instruction {} at DRAM 0x{:X}",
                                         zeroth_at + at, i + 1, at)));
  }

  std::vector<Range> ranges{{0, first.size, "the instruction region"}};
  for (std::size_t p = 1; p < packets.size(); ++p) {
    const auto& packet = packets[p];
    if (packet.is_start())
      fail(
          "GML byte offset {}: a start packet; a GML file holds only the program (the runtime "
          "appends the input tensor and the start packet)",
          packet.offset);
    ranges.push_back({packet.address, std::uint64_t{packet.address} + packet.size,
                      fmt::format("the packet at GML byte offset {}", packet.offset)});
    if (copy_blobs)
      program.blobs.push_back(
          {packet.address, Bytes(packet.payload.begin(), packet.payload.end())});
  }
  check_no_overlap(ranges);
  return program;
}

}  // namespace

GmlProgram decode_gml(ByteSpan gml) { return read_gml(gml, true); }

void validate_gml(ByteSpan gml) { (void)read_gml(gml, false); }

std::vector<std::string> lint_instruction_list(const std::vector<Instruction>& instructions) {
  std::vector<std::string> findings;
  std::size_t total = 0;
  for (const auto& inst : instructions) total += is_megablock(inst.opcode());
  std::size_t layer = 0;    // megablocks seen so far
  bool group_open = false;  // a megablock waits for its START
  for (std::size_t i = 0; i < instructions.size(); ++i) {
    const auto& inst = instructions[i];
    const auto where = fmt::format("instruction {} ({})", i + 1, name(inst.opcode()));
    if (is_megablock(inst.opcode())) {
      if (group_open)
        findings.push_back(fmt::format("{}: megablock {} starts before megablock {} got its START",
                                       where, layer + 1, layer));
      ++layer;
      group_open = true;
    } else if (inst.opcode() == Opcode::START) {
      const auto number = inst.get(Field::START_LayerNumber);
      const auto declared = inst.get(Field::START_TotalLayers);
      if (!group_open)
        findings.push_back(fmt::format("{}: START without a megablock before it", where));
      if (number != layer)
        findings.push_back(fmt::format("{}: LayerNumber is {}, expected {} (megablocks so far)",
                                       where, number, layer));
      if (declared != total)
        findings.push_back(fmt::format("{}: TotalLayers is {}, but the program has {} megablocks",
                                       where, declared, total));
      group_open = false;
    } else if (!group_open) {
      findings.push_back(
          fmt::format("{}: configures no megablock (it comes after a START or "
                      "first)",
                      where));
    }
  }
  if (group_open)
    findings.push_back(
        fmt::format("megablock {} has no START after it (the program never "
                    "finishes)",
                    layer));
  if (total == 0 && !instructions.empty()) findings.push_back("the program has no megablock");
  return findings;
}

}  // namespace npukit::isa
