// What every compiler pass shares: the options, the graph being rewritten and what the passes have
// learned so far (where each node runs and why, warnings). The passes are listed, in the order
// compile() runs them, in compiler/passes.h; each lives in its own pass_*.cpp file.
#pragma once

#include "ir/graph.h"
#include "isa/arch.h"

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace npukit::compiler {

inline constexpr const char* kGatiDomain = "npukit.gati";

// How a conv whose model gives one weight scale per output channel (torch's and onnxruntime's
// quantizers by default) runs, when the Gati has one QuantScale per instruction
// (split_channel_scales, docs/quantization.md "Per-channel weights"):
//   kPerTensor   weights requantized to one scale, max |w| / 127: one instruction;
//   kPerChannel  one instruction per output-channel group (whole N_SA groups), each with its own
//                QuantScale and its weights at the group's largest channel scale (exact when the
//                group's channels share a scale), writing channel views of the output;
//   kAuto        per channel when that keeps every output within 1 LSB of the model's
//                per-channel conv and per tensor does not (a bound from the weights'
//                requantization error over the full int8 input range), else per tensor.
enum class WeightScales { kAuto, kPerTensor, kPerChannel };
// "auto", "per-tensor", "per-channel"; an error names `what` (where the name came from).
WeightScales parse_weight_scales(const std::string& name,
                                 const std::string& what = "--weight-scales");
const char* weight_scales_name(WeightScales mode);  // the inverse

struct CompileOptions {
  isa::SaArch arch = isa::SaArch::default_arch();
  WeightScales weight_scales = WeightScales::kAuto;
  // Names of device layers (node names) or tensors whose values are dispatched back to the host
  // in addition to the device part's outputs (gaticc --dispatch l1,l2).
  std::vector<std::string> dispatch;
  std::uint64_t ramsize_mb = 512;  // board DRAM, gaticc --ramsize
  // Emit programs that hit known v1.0.0 errata (gati.md 14.6) instead of refusing; for
  // simulation-only work (DECISIONS.md 18).
  bool allow_errata = false;
  // assign_devices runs a QLinearLeakyRelu whose result leaves the device on the host when the
  // device's EltWise form differs from onnxruntime's table (exact ties, docs/compiler.md
  // "LeakyReLU"); false keeps it on the device (within 1 LSB; the tests of that form).
  bool leaky_relu_ties_to_host = true;
  // Print the graph after these passes (graph_pass_names(), or "all"), to dump_to or stderr.
  std::vector<std::string> dump_after;
  std::ostream* dump_to = nullptr;
};

enum class Placement { kHost, kDevice };

struct PlacementNote {
  Placement placement = Placement::kHost;
  std::string reason;
};

// One piece of the program that runs on one side: the partition pass cuts the graph into an ordered
// list of these (host, device, host, device, ...; as many as the model needs, docs/compiler.md).
struct Segment {
  Placement placement = Placement::kHost;
  std::vector<std::string> nodes;  // node names in execution order
  // partition's cost estimate (device segments; from the ONNX graph, before lowering):
  std::uint64_t macs = 0;             // multiply-accumulates of its convs and FCs
  std::uint64_t bytes_in = 0;         // host -> device (DWP packets, activation/vector layout)
  std::uint64_t bytes_out = 0;        // device -> host (dispatch frames)
  std::uint64_t compute_cycles = 0;   // estimated device cycles of its layers
  std::uint64_t transfer_cycles = 0;  // estimated DWP + start + dispatch cycles
  std::string why;                    // why the cut in front of it exists (--explain)
};

// Scale and zero point of a quantized value, as the (canonical QOperator) graph states it.
struct QuantInfo {
  double scale = 0;
  std::int64_t zero_point = 0;
};

// The model's own weights of a conv or FC (Gemm, MatMul) with per-channel weight scales, recorded
// by normalize_quantization (which requantizes them per tensor) for split_channel_scales.
struct ChannelWeights {
  ir::Shape shape;             // conv [KN, C / group, kh, kw]; FC [N, K] (outputs, inputs)
  std::vector<float> weights;  // float values (q - z) * s_k, OIHW or [N, K]
  std::vector<float> scales;   // the model's scale of each output channel
  std::vector<float> bias;     // float bias per output channel (empty: none)
  // Filled by lower_to_gati: the conv's native input scale, per-tensor weight scale and
  // requantization multiplier x_scale * w_scale / y_scale.
  double x_scale = 0, tensor_scale = 0, multiplier = 0;
};

struct Context {
  CompileOptions options;
  ir::Graph graph;  // rewritten in place by the passes
  // Why each node of the (original, then lowered) graph runs where it does, by node name.
  std::map<std::string, PlacementNote> placement;
  // Original node names in the order the passes recorded them (for --explain).
  std::vector<std::string> placement_order;
  std::vector<std::string> warnings;
  // Convs and FCs whose model weights had per-channel scales, by node name
  // (normalize_quantization).
  std::map<std::string, ChannelWeights> channel_weights;
  // Every quantized value's scale and zero point, read after canonicalize_qdq (before lowering
  // replaces the ops that state them): what the manifest tells the runtime about boundary tensors.
  std::map<std::string, QuantInfo> quantization;

  // The partition pass's result: the segments in execution order, and each node's segment index
  // (ctx.graph.nodes are sorted so that every segment's nodes are contiguous).
  std::vector<Segment> segments;
  std::map<std::string, int> segment_of;
  std::uint64_t model_macs = 0;   // all multiply-accumulates of the model (host and device)
  std::uint64_t device_macs = 0;  // those in device segments

  void place(const std::string& node, Placement where, std::string reason);
  bool on_device(const std::string& node) const;
  // Whether a node placed on the device makes `value` (false for model inputs and host values).
  bool made_on_device(const std::string& value) const;
};

// ---- small helpers shared by several passes -------------------------------------------------

// QuantScale/QuantShift for a real multiplier (DECISIONS.md 4): scale in [1, 32767] and the shift
// in [0, 31] that makes scale / 2^shift closest to `multiplier` (the larger shift on ties). Throws
// naming `what` when the multiplier cannot be represented (>= 32767.5 or so small that the scale
// rounds to 0).
struct ScaleShift {
  std::int64_t scale = 1;
  std::int64_t shift = 0;
  double value() const;
};
ScaleShift choose_scale_shift(double multiplier, const std::string& what);

// The unsigned 16-bit variant used by pools (PoolScale, GblPoolScale), kept <= 32767 so signed and
// unsigned readings agree (docs/ref-ops.md).
ScaleShift choose_pool_scale_shift(double multiplier, const std::string& what);

// Reads a constant scalar float (scale) or integer (zero point) input of a node; throws naming the
// node and input when it is not a constant.
float constant_float(const ir::Graph& g, const ir::Node& n, std::size_t input);
std::int64_t constant_int(const ir::Graph& g, const ir::Node& n, std::size_t input,
                          std::int64_t fallback);
// All elements of a constant as double (any numeric dtype).
std::vector<double> constant_values(const ir::Tensor& t);

// Output size of a conv/pool axis with floor division (gati.md 3.2).
std::int64_t conv_out(std::int64_t in, std::int64_t pad_begin, std::int64_t pad_end,
                      std::int64_t kernel, std::int64_t stride);

// A fresh tensor/node name based on `base` that is not yet used in g.
std::string unique_name(const ir::Graph& g, const std::string& base);

// Makes an int8/int32 constant tensor in g and returns its name.
std::string add_constant(ir::Graph& g, const std::string& base, ir::DType dtype,
                         const ir::Shape& shape, const void* data);

// Declares a new (non-constant) value in g, named after `base`, and returns its name.
std::string add_value(ir::Graph& g, const std::string& base, ir::DType dtype,
                      const ir::Shape& shape);

bool is_gati(const ir::Node& n);

}  // namespace npukit::compiler
