// The back end's view of the device part: the lowered npukit.gati layers in execution order, the
// device tensors with their DRAM placement, the weight/bias blobs and the instructions. Filled in
// by passes 13-17 (see compiler/passes.h), each adding one kind of fact.
#pragma once

#include "common/bytes.h"
#include "compiler/context.h"
#include "isa/gml.h"
#include "isa/isa.h"
#include "isa/manifest.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace npukit::compiler {

enum class TensorKind {
  kActivation,    // int8 [C, H, W] in the gati.md 6.1 layout, C' * P' bytes
  kActivation32,  // int32 partial sums (OpWidth 4), 4 * C' * P' bytes
  kVector,        // int8 FC vector, ceil_mod(K, 32) bytes
};
const char* kind_name(TensorKind k);
// One OpWidth-4 word (8 channels x 4 pixels of int32): where int32 tensors start in DRAM.
constexpr std::uint64_t kInt32WordBytes = 128;

struct DeviceTensor {
  std::string name;
  TensorKind kind = TensorKind::kActivation;
  std::int64_t c = 0, h = 1, w = 1;
  std::uint64_t bytes = 0;  // the tensor as its readers see it (C' * P', gati.md 6.1)
  // What the producing megablock writes: more than `bytes` for a conv padded with all-zero
  // kernels (pad_kernel_iterations), whose extra channel groups nobody reads.
  std::uint64_t footprint = 0;
  // What its buffer holds: more than `footprint` when a depthwise conv padded with all-zero
  // kernels reads channel groups beyond the tensor (pad_kernel_iterations); 0: the footprint.
  std::uint64_t reserved = 0;
  std::uint64_t buffer_bytes() const { return std::max(footprint, reserved); }
  int produced_at = -1;  // layer index; -1 for a device input (written by the host)
  int last_used_at = -1;
  bool device_input = false, device_output = false;
  std::uint64_t arena_offset = 0;  // allocate_buffers
  std::uint32_t address = 0;       // assign_addresses
  // A view (split_grouped_convs' channel Slice/Concat): the bytes at `alias_offset` of the
  // tensor `alias_of`, which owns the buffer; not allocated itself.
  std::string alias_of;
  std::uint64_t alias_offset = 0;
};

struct LayerBlob {
  std::string layer, what;  // what: "weights" or "bias"
  Bytes bytes;
  std::uint32_t address = 0;
};

struct DeviceLayer {
  std::string name;      // the npukit.gati node's name
  std::size_t node = 0;  // index into Context::graph.nodes
  isa::Opcode opcode = isa::Opcode::CONV;
  int weights = -1, bias = -1;  // indices into DeviceProgram::blobs
  int segment = 0;              // index into Context::segments
  bool dispatch = false;
  std::uint32_t dispatch_id = 0;
  std::vector<isa::Instruction> instructions;  // MEGA, OutputBlock, [TailBlock], START
};

// One device segment: a range of the layers (and so of the instruction list) that the host starts
// on its own, by rewriting the zeroth instruction to that range (docs/compiler.md, "Segments").
struct DeviceSegment {
  int segment = 0;  // index into Context::segments
  std::size_t first_layer = 0, layer_count = 0;
  std::size_t first_instruction = 0, instruction_count = 0;  // generate_instructions
  std::vector<std::string> inputs;                           // written by the host before its start
  std::vector<std::string> outputs;                          // dispatched to the host while it runs
};

struct DeviceProgram {
  isa::SaArch arch;
  std::vector<DeviceLayer> layers;
  std::map<std::string, DeviceTensor> tensors;
  std::vector<std::string> inputs, outputs;  // all device segments' boundaries, in graph order
  std::vector<DeviceSegment> segments;       // in execution order
  std::vector<LayerBlob> blobs;              // in stream order
  std::uint64_t arena_bytes = 0;             // the I/O buffers
  std::uint32_t arena_address = 0;
  std::uint32_t accumulant_address = 0;
  std::uint64_t accumulant_bytes = 0;
  std::uint64_t dram_end = 0;  // first byte after everything the program uses
  std::vector<isa::Instruction> instructions;
};

// Collects the device layers and tensors from the lowered graph (the Gati nodes placed on the
// device) and decides which tensors the host writes and which it receives.
DeviceProgram collect_device_program(const Context& ctx);

// Passes 14-18.
void convert_layouts(const Context& ctx, DeviceProgram& prog);
void allocate_buffers(const Context& ctx, DeviceProgram& prog);
void assign_addresses(const Context& ctx, DeviceProgram& prog);
void generate_instructions(Context& ctx, DeviceProgram& prog);
Bytes emit_gml(const DeviceProgram& prog);
// Pass 19: the manifest (isa/manifest.h) of the compiled program, `gml_bytes` long; fills
// `host_graphs` with each host segment's subgraph by segment index (compile() runs it last).
isa::Manifest build_manifest(const Context& ctx, const DeviceProgram& prog, const ir::Graph& model,
                             std::size_t gml_bytes, std::map<std::size_t, ir::Graph>& host_graphs);

// Whether layer i is the first of its device segment (the hardware sees it as a first layer).
bool first_in_segment(const DeviceProgram& prog, std::size_t layer);
// Number of instructions generate_instructions emits for layer i (assign_addresses needs it to
// size the instruction region before the instructions exist).
std::size_t instruction_count(const DeviceProgram& prog, std::size_t layer);
// gaticc's DispatchID: the sum of the name's characters (gati.md 3.2).
std::uint32_t dispatch_hash(const std::string& name);
// The megablock opcode of an npukit.gati op type ("GatiConv" -> CONV); throws for others.
isa::Opcode megablock_of(const std::string& op_type);

}  // namespace npukit::compiler
