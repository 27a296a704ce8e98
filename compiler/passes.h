// The compiler's passes, in the order compile() runs them (NVDLA-compiler style: each is a named
// step over the graph, in its own file, readable and testable alone).
//
//  front end (ir::Graph -> ir::Graph, ONNX ops)
//   0. remove_noops          Identity, same-type Cast, all-zero Pad, 1x1 stride-1 pools dropped
//  0b. reduce_mean_to_pool   ReduceMean over H and W -> GlobalAveragePool (+ Flatten)
//   1. fuse_batchnorm        float Conv + BatchNormalization -> Conv with folded weights/bias
//   2. normalize_quantization  every quantized tensor into the native scheme (DECISIONS.md 5):
//                            uint8/zero-point activations and per-channel weights requantized,
//                            foreign QOperator nodes through their QDQ form
//   3. canonicalize_qdq      DequantizeLinear -> float op -> QuantizeLinear -> QOperator op
//  3a. hard_activations    DQ -> HardSigmoid/HardSwish -> Q -> depthwise 1x1 QLinearConv +
//  Clip/Relu
//                            (+ QLinearMul x * hardsigmoid(x) for HardSwish)
//  3b. constant_arithmetic   Add/Sub/Mul/Div by a scalar or per-channel constant and standalone
//                            BatchNormalization on one int8 activation -> depthwise 1x1 QLinearConv
//  3c. broadcast_mul         QLinearMul(x [1,C,H,W], s [1,C,1,1]) (squeeze-excitation): s broadcast
//                            by a depthwise all-ones conv and 2x Resizes, then a same-shape mul
//  3d. decompose_conv_transpose  int8 ConvTranspose -> sub-pixel QLinearConv (device) +
//                            DepthToSpace + Slice (host, exact int8 interleave and crop)
//  3e. quant_params          every int8 value's scale and zero point (ctx.quantization)
//  3f. channel_copies        int8 channel shuffle (Reshape-Transpose-Reshape) and channel Slice ->
//                            1x1 channel-copy QLinearConv (0/1 weights, requantized by exactly 1)
//   4. check_shapes          every value a device candidate touches has a known static shape
//   5. assign_devices        which nodes the Gati could run and which the host must, and why;
//                            a final sigmoid more than 1 LSB off at its scales runs on the host,
//                            so does a final LeakyReLU whose EltWise form differs from
//                            onnxruntime's table (exact ties)
//  5b. space_to_depth        a strided conv whose kernel is wider than the array has rows
//                            (alexnet's 11x11 s4), or a host-fed device conv that splits into
//                            fewer pieces so (resnet's 7x7 s2 stem) -> a stride-1 conv over the
//                            host's space-to-depth image
//   6. partition             the ordered host/device segments (a segment index per node), small
//                            device islands whose transfers cost more than they buy to the host;
//                            run again after pass 13 to give the lowered nodes their segments
//   7. legalize_host_ops     int8 host nodes the model's opset cannot express go back to float
//  lowering (ONNX ops -> npukit.gati ops, docs/ref-ops.md)
//   8. lower_to_gati         QLinear*/int8 ops -> Gati* with QuantScale/QuantShift folded in
//   9. fuse_tail             Gati op + activation (+ global average pool) -> one TailBlock
//   9d. fold_channel_copies  a channel copy folded into its producer's kernel order (free) or its
//                            consumers' weight columns (when cheaper by cycles), exactly
//  10. transpose_tall_images a device part with tall 3x3 convs (a v1.0.0 hang) runs sideways
//  10b. split_grouped_convs  a block-diagonal grouped conv -> one conv per m groups reading and
//                            writing channel views (Slice/Concat aliases, no copy), by cycles
//  10c. split_channel_scales  a conv or FC with per-channel weight scales in the model -> one
//                            conv/FC per output-channel group with its own QuantScale writing
//                            channel views (an FC read only by the host: device outputs
//                            concatenated on the host), or per-tensor weights; by error bound
//                            (--weight-scales) and cycles
//  11. split_kernels         kernels taller than the array -> row bands accumulated via acc input
//                            (per N_SA channel group when the accumulant is needed twice)
//  12. pad_kernel_iterations 9,4,4: a conv (depthwise too) before a conv padded to an even
//                            KernelItr (erratum)
//  13. check_limits          field widths, stride, width; remaining errata refused
//  back end (npukit.gati graph -> DRAM image and instructions; compiler/backend.h)
//  14. convert_layouts       weights/biases to DRAM blobs (gati.md 6.2, 14.1)
//  15. allocate_buffers      device tensors -> buffers reused when dead
//  16. assign_addresses      DRAM map, 32-B aligned, --ramsize check (gati.md 6)
//  17. generate_instructions MEGA, OutputBlock, TailBlock, START per layer (gati.md 3.2, 4, 14)
//  18. emit_gml              instruction blob + weight/bias packets (isa::encode_gml)
//  19. build_manifest        manifest.json: segments (host subgraphs, device layers, boundary
//                            tensors with addresses and dispatch ids), scales, MACs, warnings
//  errata passes (compiler/errata_passes.h), run right after 9. fuse_tail; no-ops with
//  --allow-errata:
//   9a. pools_as_convs       average / global average pools -> depthwise all-ones convs
//   9b. lower_concat         concat -> a view its producers write in place (whole N_SA groups),
//                            the rest chained 1x1 copy convs (CONCAT never completes)
//   9c. clear_resize_padding an identity conv after a RESIZE whose padding pixel is read
#pragma once

#include "compiler/context.h"

namespace npukit::compiler {

void remove_noops(Context& ctx);
void reduce_mean_to_pool(Context& ctx);
void fuse_batchnorm(Context& ctx);
void normalize_quantization(Context& ctx);
void canonicalize_qdq(Context& ctx);
void hard_activations(Context& ctx);
void constant_arithmetic(Context& ctx);
void broadcast_mul(Context& ctx);
void decompose_conv_transpose(Context& ctx);
void quant_params(Context& ctx);
void channel_copies(Context& ctx);
void check_shapes(Context& ctx);
void assign_devices(Context& ctx);
void space_to_depth(Context& ctx);
void partition(Context& ctx);
void legalize_host_ops(Context& ctx);
void lower_to_gati(Context& ctx);
void fuse_tail(Context& ctx);
void transpose_tall_images(Context& ctx);
void fold_channel_copies(Context& ctx);
void split_grouped_convs(Context& ctx);
// A Slice or Concat along channels that split_grouped_convs left on the device: no layer, its
// tensors are aliases of the tensor they view (collect_device_program).
bool is_device_view(const ir::Node& n);
// An ONNX Slice of channels [c0, c1) of the 4-D value x named `name`, its output value added to
// g; starts, ends and axes are inputs (opset >= 10, as every int8 model is), where
// collect_device_program reads a view's first channel.
ir::Node channel_slice(ir::Graph& g, const std::string& name, const std::string& x, std::int64_t c0,
                       std::int64_t c1);
void split_channel_scales(Context& ctx);
void split_kernels(Context& ctx);
// How split_kernels cuts a conv with `channels` input channels, a kh x kw kernel and
// `out_pixels` output pixels: `bands` bands of up to `band` kernel rows for each of `groups`
// groups of up to `group_channels` input channels (one group unless the accumulant would be
// needed twice). A kernel of at most 3x3 is one piece.
struct KernelSplit {
  std::int64_t band = 1, bands = 1, group_channels = 0, groups = 1;
  std::int64_t pieces() const { return bands * groups; }
};
KernelSplit kernel_split(std::int64_t channels, std::int64_t kh, std::int64_t kw,
                         std::int64_t out_pixels, const isa::SaArch& arch);
void pad_kernel_iterations(Context& ctx);
void check_limits(Context& ctx);

// partition's cost model (docs/compiler.md, "Segments"): multiply-accumulates of a conv or FC
// node (ONNX or npukit.gati; 0 for other ops), the bytes a tensor occupies in DRAM in the Gati's
// layout, and the cycles of writing it with DWP, of dispatching it, and of one segment's start.
std::uint64_t node_macs(const ir::Graph& g, const ir::Node& n);
std::uint64_t device_bytes_of(const ir::Tensor& t, const isa::SaArch& arch);
std::uint64_t dwp_cycles(std::uint64_t bytes);
std::uint64_t dispatch_cycles(std::uint64_t bytes);
std::uint64_t segment_start_cycles();

// The graph passes in compile() order (the names --dump-after takes).
const std::vector<std::string>& graph_pass_names();

// A channel copy: a 1x1 stride-1 conv (QLinearConv or GatiConv, group 1, no bias, no accumulator)
// whose int8 weights are 0/1 with exactly one 1 per output channel and at most one per input
// channel, requantized by exactly 1 (QLinearConv: weight scale 1, input scale = output scale, zero
// points 0; GatiConv: quant_scale = 2^quant_shift, no activation). Returns src, out[o] =
// in[src[o]]; empty when `n` is not one. Data movement: node_macs counts 0 MACs for it.
std::vector<std::int64_t> channel_copy_sources(const ir::Graph& g, const ir::Node& n);

// On how many of the 256 int8 inputs lower_to_gati's EltWise form of a QLinearLeakyRelu (input
// scale sx, output scale sy) differs from onnxruntime's lookup table: 0 unless an input is an
// exact tie (sx = sy, alpha 0.1: x = -15 gives -1.5) that onnxruntime rounds by float32 noise.
int leaky_relu_mismatches(double sx, double sy, double alpha);

// The ops assign_devices may put on the device: QOperator/int8 ONNX ops that lower_to_gati
// knows. Returns an empty string when `n` can run on the Gati, else why not.
std::string why_not_on_device(const ir::Graph& g, const ir::Node& n, const CompileOptions& opt);

}  // namespace npukit::compiler
