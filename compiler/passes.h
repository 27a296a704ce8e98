// The compiler's passes, in the order compile() runs them (NVDLA-compiler style: each is a named
// step over the graph, in its own file, readable and testable alone).
//
//  front end (ir::Graph -> ir::Graph, ONNX ops)
//   1. fuse_batchnorm        float Conv + BatchNormalization -> Conv with folded weights/bias
//   2. normalize_quantization  every quantized tensor into the native scheme (DECISIONS.md 5):
//                            uint8/zero-point activations and per-channel weights requantized,
//                            foreign QOperator nodes through their QDQ form
//   3. canonicalize_qdq      DequantizeLinear -> float op -> QuantizeLinear -> QOperator op
//   4. check_shapes          every value a device candidate touches has a known static shape
//   5. assign_devices        which nodes the Gati runs and which the host runs, and why
//   6. legalize_host_ops     int8 host nodes the model's opset cannot express go back to float
//  lowering (ONNX ops -> npukit.gati ops, docs/ref-ops.md)
//   7. lower_to_gati         QLinear*/int8 ops -> Gati* with QuantScale/QuantShift folded in
//   8. fuse_tail             Gati op + activation (+ global average pool) -> one TailBlock
//   9. transpose_tall_images a device part with tall 3x3 convs (a v1.0.0 hang) runs sideways
//  10. split_kernels         kernels taller than the array -> row bands accumulated via acc input
//  11. pad_kernel_iterations 9,4,4: a conv before a conv padded to an even KernelItr (erratum)
//  12. check_limits          field widths, stride, width; remaining errata refused
//  back end (npukit.gati graph -> DRAM image and instructions; compiler/backend.h)
//  13. convert_layouts       weights/biases to DRAM blobs (gati.md 6.2, 14.1)
//  14. allocate_buffers      device tensors -> buffers reused when dead
//  15. assign_addresses      DRAM map, 32-B aligned, --ramsize check (gati.md 6)
//  16. generate_instructions MEGA, OutputBlock, TailBlock, START per layer (gati.md 3.2, 4, 14)
//  17. emit_gml              instruction blob + weight/bias packets (isa::encode_gml)
#pragma once

#include "compiler/context.h"

namespace npukit::compiler {

void fuse_batchnorm(Context& ctx);
void normalize_quantization(Context& ctx);
void canonicalize_qdq(Context& ctx);
void check_shapes(Context& ctx);
void assign_devices(Context& ctx);
void legalize_host_ops(Context& ctx);
void lower_to_gati(Context& ctx);
void fuse_tail(Context& ctx);
void transpose_tall_images(Context& ctx);
void split_kernels(Context& ctx);
void pad_kernel_iterations(Context& ctx);
void check_limits(Context& ctx);

// The ops assign_devices may put on the device: QOperator/int8 ONNX ops that lower_to_gati
// knows. Returns an empty string when `n` can run on the Gati, else why not.
std::string why_not_on_device(const ir::Graph& g, const ir::Node& n, const CompileOptions& opt);

}  // namespace npukit::compiler
