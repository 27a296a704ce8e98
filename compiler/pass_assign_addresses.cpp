// Pass 15, assign_addresses: the DRAM map (gati.md 6, the one the RTL run used, section 4):
//
//   0                      instruction region: zeroth + n instructions, (n+1)*32 bytes
//   ...                    weights and biases, per layer in execution order, each 32-B aligned
//   arena_address          I/O arena: every device tensor at its allocate_buffers offset
//   accumulant_address     int32 partial sums of convs that cannot accumulate on chip
//   dram_end               must be <= --ramsize MB
//
// The hardware imposes no map (it reads every address from the instructions); this one keeps
// everything 32-byte aligned and non-overlapping.
#include "common/error.h"
#include "compiler/backend.h"
#include "compiler/geometry.h"

#include <algorithm>

namespace npukit::compiler {

std::size_t instruction_count(const DeviceProgram& prog, std::size_t layer) {
  const isa::Opcode op = prog.layers[layer].opcode;
  // MEGA + OutputBlock + START, plus the merged TailBlock for blocks with a tail pipeline, and an
  // empty TailBlock for a segment's first megablock without one (the v1.0.0 first-layer POOL
  // erratum).
  const bool has_tail =
      op == isa::Opcode::CONV || op == isa::Opcode::FC || op == isa::Opcode::EltWise;
  return 3 + ((has_tail || first_in_segment(prog, layer)) ? 1 : 0);
}

bool first_in_segment(const DeviceProgram& prog, std::size_t layer) {
  return layer == 0 || prog.layers[layer - 1].segment != prog.layers[layer].segment;
}

void assign_addresses(const Context& ctx, DeviceProgram& prog) {
  const ir::Graph& g = ctx.graph;
  std::size_t n = 0;
  for (std::size_t i = 0; i < prog.layers.size(); ++i) n += instruction_count(prog, i);
  std::uint64_t cursor = isa::instruction_region_bytes(n);
  for (auto& blob : prog.blobs) {
    cursor = ceil_mod(cursor, 32);
    blob.address = static_cast<std::uint32_t>(std::min<std::uint64_t>(cursor, 0xFFFFFFFFu));
    cursor += blob.bytes.size();
  }
  // allocate_buffers puts int32 tensors on OpWidth-4 words of the arena: it starts on one then.
  const bool int32_tensors =
      std::any_of(prog.tensors.begin(), prog.tensors.end(),
                  [](const auto& e) { return e.second.kind == TensorKind::kActivation32; });
  cursor = ceil_mod(cursor, int32_tensors ? kInt32WordBytes : 32);
  prog.arena_address = static_cast<std::uint32_t>(std::min<std::uint64_t>(cursor, 0xFFFFFFFFu));
  for (auto& [name, t] : prog.tensors)
    if (t.alias_of.empty())
      t.address =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(cursor + t.arena_offset, 0xFFFFFFFFu));
  for (auto& [name, t] : prog.tensors)  // views: at their offset in their root
    if (!t.alias_of.empty())
      t.address = static_cast<std::uint32_t>(std::min<std::uint64_t>(
          prog.tensors.at(t.alias_of).address + t.alias_offset, 0xFFFFFFFFu));
  cursor += prog.arena_bytes;

  // Convs that accumulate channel groups in DRAM (OnChipAcc = 0 and AccEn = 1) need
  // ImageDimAcc * COLS * 4 bytes per kernel iteration (gati.md 3.2); one region serves all layers
  // since layers run one after another.
  std::uint64_t acc = 0;
  for (const auto& layer : prog.layers) {
    if (layer.opcode != isa::Opcode::CONV) continue;
    const auto geo = conv_geometry(g, g.nodes[layer.node], prog.arch);
    const std::int64_t pixels = geo.oh * geo.ow;
    if (pixels > kOnChipAccPixels && geo.acc_en)
      acc = std::max<std::uint64_t>(acc, acc_pixels(pixels, prog.arch) * prog.arch.cols * 4 *
                                             static_cast<std::uint64_t>(geo.kitr));
  }
  prog.accumulant_address =
      static_cast<std::uint32_t>(std::min<std::uint64_t>(cursor, 0xFFFFFFFFu));
  prog.accumulant_bytes = ceil_mod(acc, 32);
  cursor += prog.accumulant_bytes;
  prog.dram_end = cursor;

  const std::uint64_t ram = ctx.options.ramsize_mb * 1024ull * 1024ull;
  if (prog.dram_end > ram || prog.dram_end > 0xFFFFFFFFull) {
    std::string biggest;
    std::uint64_t biggest_bytes = 0;
    for (const auto& [name, t] : prog.tensors)
      if (t.bytes > biggest_bytes) biggest_bytes = t.bytes, biggest = name;
    fail(
        "the program needs {} bytes of DRAM ({} instructions, {} bytes of weights and biases, a {}"
        "-byte I/O arena whose largest tensor is '{}' with {} bytes, {} accumulant bytes) but "
        "--ramsize is {} MB ({} bytes)",
        prog.dram_end, n, prog.arena_address - isa::instruction_region_bytes(n), prog.arena_bytes,
        biggest, biggest_bytes, prog.accumulant_bytes, ctx.options.ramsize_mb, ram);
  }
}

}  // namespace npukit::compiler
