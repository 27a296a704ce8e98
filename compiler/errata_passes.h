// The passes that steer around the v1.0.0 errata of the optional blocks (gati.md 14.15,
// DECISIONS.md 19), run by lower_unsplit() right after fuse_tail (docs/compiler.md, passes 9a-9c):
//   9a. pools_as_convs        average / global average pools -> depthwise all-ones convs
//   9b. lower_concat          concat -> a view its producers write in place (whole N_SA
//                             groups), the rest chained 1x1 copy convs (CONCAT never completes)
//   9c. clear_resize_padding  an identity conv after a RESIZE whose padding pixel is read
// and, later (pass 12, passes.h), pad_kernel_iterations: on 9,4,4 a conv before a conv computes
// all-zero kernels up to an even KernelItr (reported here too, attribute kernel_count_padded).
// With --allow-errata they do nothing (today's lowering, for simulation).
//
// Each rewritten layer's placement note (ctx.placement, shown by --explain) says which node it
// replaces, which pass did it and which erratum it avoids; errata_rewrites() reads them back.
#pragma once

#include "compiler/compiler.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace npukit::compiler {

void pools_as_convs(Context& ctx);

// How many 3x3 stride-3 average stages pools_as_convs puts before the final all-ones conv of a
// global average pool over an h x w image on an array with `rows` rows (0: one exact conv). Each
// stage rounds its averages to int8 at the pool's input scale.
int global_pool_stages(std::int64_t h, std::int64_t w, int rows);
void lower_concat(Context& ctx);
void clear_resize_padding(Context& ctx);

struct ErrataRewrite {
  std::string original, pass, erratum, how;
  std::vector<std::string> layers;  // the device layers (node names) doing the work now
  // pad_kernel_iterations: the layer itself computes more (all-zero) kernels; its cost is the
  // difference to the unpadded layer, not the layer's whole cycles.
  bool padded = false;
};

// Records `layer` (a node made by `pass`) as part of the rewrite of `original`.
void note_errata_rewrite(Context& ctx, const std::string& layer, const std::string& original,
                         const std::string& pass, const std::string& erratum,
                         const std::string& how);
// The rewrites of the lowering, in the order they were made.
std::vector<ErrataRewrite> errata_rewrites(const Context& ctx);

// A layer's cycles from its instructions (MEGA, OutputBlock, [TailBlock], START), as the device
// model's timing gives them (the compiler does not link the device model: the caller passes it).
using LayerTimer = std::function<std::uint64_t(const std::vector<isa::Instruction>&)>;

// The instructions layer `layer` of `result` would have without pad_kernel_iterations' padding
// (KN, IC of a depthwise conv, KernelItr and the image/weight/bias ends as the real kernel count
// gives them); the layer's own instructions when it is not padded.
std::vector<isa::Instruction> unpadded_instructions(const CompileResult& result, std::size_t layer);

// The "Errata rewrites" section of `npukit compile --explain`; `layer_cycles` (per program layer,
// from a device model run; empty when not run) adds each rewrite's cycle cost, `timer` the cost of
// each kernel padding (padded minus unpadded layer).
std::string explain_errata(const CompileResult& result,
                           const std::vector<std::uint64_t>& layer_cycles,
                           const LayerTimer& timer = {});

}  // namespace npukit::compiler
