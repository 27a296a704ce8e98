// Pass 12, check_limits: everything the hardware cannot do is an error here, naming the layer and
// the limit, rather than a field that silently wraps later. Two kinds of checks:
//   * field widths and block limits of ISA v16 (image width/height <= 1023, channels <= 4095,
//     stride <= 4 and equal on both axes, pads 0..7, FC input <= fcbuf 32768, ...);
//   * the known v1.0.0 errata (gati.md 14.6, DECISIONS.md 18). By default the compiler refuses a
//     program that would hang or corrupt and says why; --allow-errata turns the refusal into a
//     warning for simulation-only work. Errata with an exact workaround were already avoided by
//     transpose_tall_images and pad_kernel_iterations; what reaches this pass is refused.
#include "common/error.h"
#include "compiler/geometry.h"
#include "compiler/passes.h"

#include <string>

namespace npukit::compiler {

namespace {

constexpr std::int64_t kMaxDim = 1023;          // 10-bit IW/IH/OH/OW fields
constexpr std::int64_t kMaxChannels = 4095;     // 12-bit IC/KN/KC fields
constexpr std::int64_t kMaxStride = 4;          // arch_param.vh STRIDE
constexpr std::int64_t kMaxPad = 7;             // 3-bit pad fields
constexpr std::int64_t kMaxRowSkip = 15;        // 4-bit StartRowSkip/EndRowSkip
constexpr std::int64_t kFcBufferBytes = 32768;  // gaticc --fcbuf-size

void limit(const ir::Node& n, const char* what, std::int64_t value, std::int64_t lo,
           std::int64_t hi) {
  if (value < lo || value > hi)
    fail("layer '{}' ({}): {} is {}, outside the hardware limit [{}, {}]", n.name, n.op_type, what,
         value, lo, hi);
}

struct Errata {
  Context& ctx;
  void hit(const ir::Node& n, const std::string& erratum) {
    const std::string msg = "layer '" + n.name + "': " + erratum;
    if (!ctx.options.allow_errata)
      fail(
          "{} (a known Gati v1.0.0 erratum, gati.md 14.6); the compiler refuses to emit a program "
          "that hits it. Change the model, or pass --allow-errata to compile it for simulation "
          "only",
          msg);
    ctx.warnings.push_back(msg + " (v1.0.0 erratum; compiled because of --allow-errata)");
  }
};

}  // namespace

void check_limits(Context& ctx) {
  const ir::Graph& g = ctx.graph;
  const isa::SaArch& arch = ctx.options.arch;
  Errata errata{ctx};
  std::vector<const ir::Node*> megablocks;
  for (const auto& n : g.nodes)
    if (is_gati(n)) megablocks.push_back(&n);

  if (arch == isa::kArch16x1x16 && megablocks.size() > 1)
    errata.hit(*megablocks[1], "the 16,1,16 configuration is incomplete: chained programs (" +
                                   std::to_string(megablocks.size()) +
                                   " layers) mismatch on v1.0.0");

  for (std::size_t i = 0; i < megablocks.size(); ++i) {
    const ir::Node& n = *megablocks[i];
    for (const auto& in : n.inputs) {
      if (in.empty()) continue;
      const ir::Tensor& t = g.tensor(in);
      if (!t.is_constant() && !t.shape.empty() && t.shape[0] != 1)
        fail(
            "layer '{}': input '{}' has batch {}; the device runs one image per start (export "
            "the model with batch 1; the runtime loops over batches)",
            n.name, in, t.shape[0]);
    }
    if (n.op_type == "GatiConv") {
      const auto c = conv_geometry(g, n, arch);
      limit(n, "input width", c.iw, 1, kMaxDim);
      limit(n, "input height", c.ih, 1, kMaxDim);
      limit(n, "input channels", c.ic, 1, kMaxChannels);
      limit(n, "kernel count", c.kn, 1, kMaxChannels);
      limit(n, "kernel width", c.kw, 1, 15);
      limit(n, "kernel height", c.kh, 1, 15);
      if (c.stride_h != c.stride_w)
        fail("layer '{}': strides {}x{} differ; CONV has one Stride for both axes", n.name,
             c.stride_h, c.stride_w);
      limit(n, "stride", c.stride_h, 1, kMaxStride);
      limit(n, "left padding", c.pad_left, 0, kMaxPad);
      limit(n, "right padding", c.pad_right, 0, kMaxPad);
      limit(n, "top padding (negative = StartRowSkip)", c.pad_top, -kMaxRowSkip, kMaxPad);
      limit(n, "bottom padding (negative = EndRowSkip)", c.pad_bottom, -kMaxRowSkip, kMaxPad);
      limit(n, "output width", c.ow, 1, kMaxDim);
      limit(n, "output height", c.oh, 1, kMaxDim);
      if (c.kh * c.kw > arch.rows)
        fail("layer '{}': a {}x{} kernel piece does not fit the {} rows of the {} array", n.name,
             c.kh, c.kw, arch.rows, arch.str());
      const bool split_piece = n.inputs.size() > 3 && !n.inputs[3].empty();
      if (c.depthwise && arch == isa::kArch16x1x16)
        errata.hit(n, "depthwise convolution on 16,1,16 mismatches on v1.0.0");
      // The device model flags ConvType PW as E6 too: it was never run on the RTL (gati.md 14.8).
      if (c.type == isa::ConvType::kPointwise)
        errata.hit(n,
                   "a 1x1 conv on 16,1,16 is ConvType PW, which was never run on the v1.0.0 RTL "
                   "(the 16,1,16 configuration is incomplete); use the 9,8,8 or 9,4,4 array");
      // Tall inputs (transpose_tall_images turned the program sideways when that helps).
      if (const std::string tall = tall_image_erratum(c); !tall.empty())
        errata.hit(n, tall + " (transposing the device part would make another conv hang)");
      // 9,4,4: a conv after a conv whose KernelItr is odd produces wrong output.
      if (arch == isa::kArch9x4x4 && i > 0 && megablocks[i - 1]->op_type == "GatiConv") {
        const auto prev = conv_geometry(g, *megablocks[i - 1], arch);
        if (prev.kitr % 2 == 1)
          errata.hit(n, "on 9,4,4 a conv that follows a conv with an odd KernelItr (" +
                            std::to_string(prev.kitr) + ", layer '" + megablocks[i - 1]->name +
                            "') produces wrong output; use 9,8,8 or make that conv's kernel count "
                            "a multiple of 8");
      }
      if (n.get_int("global_pool", 0) != 0)
        errata.hit(n,
                   "TailBlock global average pool (GblPoolEn) multiplies the sum unsigned and "
                   "does not clamp on v1.0.0 (gati.md 14.15)");
      // One warning per split conv, at its first piece (int32 output, no accumulant input).
      if (!split_piece && n.get_int("quant_en", 1) == 0)
        ctx.warnings.push_back("layer '" + n.name +
                               "' starts a chain of int32 partial sums (a split kernel or concat "
                               "copies); kernel-split pieces (StartRowSkip/EndRowSkip, "
                               "AccumulantReadFirst, OpWidth 4) were never run on the v1.0.0 RTL");
    } else if (n.op_type == "GatiPool") {
      const auto p = pool_geometry(g, n);
      limit(n, "input width", p.iw, 1, kMaxDim);
      limit(n, "input height", p.ih, 1, kMaxDim);
      limit(n, "input channels", p.ic, 1, kMaxChannels);
      if (p.type != isa::PoolType::kGlobalAverage) {
        limit(n, "pool width", p.kw, 1, 15);
        limit(n, "pool height", p.kh, 1, 15);
        limit(n, "pool stride width", p.stride_w, 1, 15);
        limit(n, "pool stride height", p.stride_h, 1, 15);
        for (auto pad : {p.pad_top, p.pad_left, p.pad_bottom, p.pad_right})
          limit(n, "pool padding", pad, 0, kMaxPad);
      }
      if (p.type == isa::PoolType::kAverage)
        errata.hit(n,
                   "a POOL average megablock adds with 8-bit wrap-around and applies no scale "
                   "on v1.0.0 (gati.md 14.15)");
      if (p.type == isa::PoolType::kGlobalAverage)
        errata.hit(n, "a POOL global average megablock writes zeros on v1.0.0 (gati.md 14.15)");
      // conv -> pool -> pool hangs on 9,4,4 and corrupts on 9,8,8.
      if (i >= 2 && megablocks[i - 1]->op_type == "GatiPool" &&
          megablocks[i - 2]->op_type == "GatiConv" && megablocks[i - 1]->outputs[0] == n.inputs[0])
        errata.hit(n, "conv -> pool -> pool ('" + megablocks[i - 2]->name + "', '" +
                          megablocks[i - 1]->name + "', '" + n.name +
                          "') hangs on 9,4,4 and corrupts output on 9,8,8");
    } else if (n.op_type == "GatiFC") {
      const ir::Tensor& x = g.tensor(n.inputs[0]);
      const ir::Tensor& w = g.tensor(n.inputs[1]);
      const auto in = chw_of(x);
      limit(n, "FC input length", in.c * in.h * in.w, 1, kFcBufferBytes);
      limit(n, "FC output features", w.shape[0], 1, 65535);
      limit(n, "FC image size H*W", in.h * in.w, 1, (1 << 20) - 1);
    } else if (n.op_type == "GatiEltwise" || n.op_type == "GatiResize") {
      const auto d = chw_of(g.tensor(n.inputs[0]));
      limit(n, "input width", d.w, 1, kMaxDim);
      limit(n, "input height", d.h, 1, kMaxDim);
      limit(n, "input channels", d.c, 1, kMaxChannels);
      if (n.op_type == "GatiResize") {
        limit(n, "output width", 2 * d.w, 1, kMaxDim);
        limit(n, "output height", 2 * d.h, 1, kMaxDim);
      }
    } else if (n.op_type == "GatiConcat") {
      errata.hit(n,
                 "CONCAT never raises layer_done on v1.0.0, so no later layer and no dispatch "
                 "of it ever runs (gati.md 14.15; lower_concat copies by convs instead)");
      limit(n, "input count", static_cast<std::int64_t>(n.inputs.size()), 1, 4);
      for (const auto& in : n.inputs) {
        const auto d = chw_of(g.tensor(in));
        limit(n, "input height (10-bit IHn)", d.h, 1, kMaxDim);
        limit(n, "input channels (10-bit KNn)", d.c, 1, kMaxDim);
      }
    }
  }
}

}  // namespace npukit::compiler
