// The manifest: the portable contract between the compiler and the runtime, written next to the
// GML (DIR/manifest.json). It holds everything the runtime needs to run a compiled model without
// the compiler: the model's inputs and outputs, and its segments in execution order, each run by
// the host (an ONNX subgraph beside the manifest) or by the device (a range of the GML's
// instructions started on its own), with every tensor crossing the host/device boundary: shape,
// quantization scale, DRAM address, layout and (outputs) dispatch id. docs/compiler.md describes
// the format; `version` changes with any incompatible change. Version 1 manifests (one device part
// between host_before and host_after) are still read, as the segments they describe.
#pragma once

#include "isa/arch.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace npukit::isa {

inline constexpr int kManifestVersion = 2;

struct ManifestTensor {
  std::string name;
  std::vector<std::int64_t> shape;  // logical NCHW or [N, K]
  std::string dtype;                // "int8", "float32", ...
  double scale = 0;                 // quantization scale (0 when unknown or not quantized)
  std::int64_t zero_point = 0;
  // Device tensors only:
  std::string layout;         // "activation" (gati.md 6.1, N_SA-grouped) or "vector" (FC, linear)
  std::uint32_t address = 0;  // DRAM byte address
  std::uint64_t bytes = 0;    // bytes in DRAM (C' * P' or ceil_mod(K, 32))
  std::optional<std::uint32_t> dispatch_id;  // outputs: the id in the dispatch frame header
  std::string layer;                         // outputs: the device layer that writes it
  bool operator==(const ManifestTensor&) const = default;
};

struct ManifestSubgraph {
  std::string file;  // relative to the manifest, e.g. "host_before.onnx"
  std::vector<std::string> inputs, outputs;
  std::vector<std::string> nodes;  // node names, for humans
  bool operator==(const ManifestSubgraph&) const = default;
};

// One segment. Host: its ONNX subgraph. Device: a range of the layers and of the instruction list;
// the host writes `device_inputs`, points the zeroth instruction at the range (when the program
// has more than one device segment), sends the start packet and receives `device_outputs`.
struct ManifestSegment {
  enum class Kind { kHost, kDevice };
  Kind kind = Kind::kHost;
  std::optional<ManifestSubgraph> host;  // host segments
  // Device segments:
  int first_layer = 0, layer_count = 0;              // in `layers`
  int first_instruction = 0, instruction_count = 0;  // in the instruction list (no zeroth)
  std::vector<ManifestTensor> device_inputs, device_outputs;
  // The compiler's estimate (docs/compiler.md, "Segments"):
  std::uint64_t macs = 0;
  std::uint64_t bytes_in = 0, bytes_out = 0;
  std::uint64_t compute_cycles = 0, transfer_cycles = 0;
  std::string why;  // why the cut in front of it exists
  bool operator==(const ManifestSegment&) const = default;
  bool is_device() const { return kind == Kind::kDevice; }
  // The zeroth instruction that starts it: its instructions' DRAM range [start, end).
  std::uint32_t zeroth_start() const {
    return 32u * (1u + static_cast<unsigned>(first_instruction));
  }
  std::uint32_t zeroth_end() const {
    return zeroth_start() + 32u * static_cast<unsigned>(instruction_count);
  }
};

struct ManifestLayer {
  std::string name, opcode;  // device layer (npukit.gati node) and its megablock
  std::vector<std::string> inputs, outputs;
  int first_instruction = 0, instruction_count = 0;  // in the instruction list (no zeroth)
  bool operator==(const ManifestLayer&) const = default;
};

struct Manifest {
  int version = kManifestVersion;
  std::string model;
  int isa_version = 16;
  std::string sa_arch = "9,8,8";
  std::uint64_t ramsize_mb = 512;
  bool allow_errata = false;
  // How convs with per-channel weight scales were compiled (compiler::WeightScales by name:
  // "auto", "per-tensor", "per-channel"; --weight-scales): the reference of a compiled
  // directory (`npukit compare DIR --onnx`) lowers the model with it.
  std::string weight_scales = "auto";
  std::string gml = "model.gml";
  std::uint64_t gml_bytes = 0;
  std::vector<ManifestTensor> inputs, outputs;  // the model's own (as the host sees them)
  std::vector<ManifestSegment> segments;        // in execution order
  std::vector<ManifestLayer> layers;
  std::uint64_t instruction_count = 0;
  std::uint64_t dram_bytes = 0;  // first byte after everything the program uses
  std::vector<std::string> warnings;
  std::uint64_t model_macs = 0, device_macs = 0;  // the share of the model's MACs on the device
  bool operator==(const Manifest&) const = default;

  SaArch arch() const { return SaArch::parse(sa_arch); }
  // All device segments' inputs / outputs, in order.
  std::vector<ManifestTensor> device_inputs() const;
  std::vector<ManifestTensor> device_outputs() const;
  std::size_t device_segment_count() const;
  double device_mac_share() const {
    return model_macs ? static_cast<double>(device_macs) / static_cast<double>(model_macs) : 0.0;
  }
};

std::string manifest_to_json(const Manifest& m);
// Throws npukit::Error naming `what` (a file name) and the JSON path of a missing or mistyped key.
Manifest manifest_from_json(const std::string& text, const std::string& what);
void save_manifest(const Manifest& m, const std::string& path);
Manifest load_manifest(const std::string& path);

}  // namespace npukit::isa
