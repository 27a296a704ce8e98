// CONCAT megablock (opcode 0x9; gati.md 3.2, 8): joins up to four int8 activation tensors of the
// same square size IHn x IHn along the channel axis (input 1's channels first). The board copies
// whole channel groups, so every input but the last must have a channel count KNn that is a
// multiple of N_SA; the output is the activation layout (gati.md 6.1) of KN1 + ... + KN_InNum
// channels, written through the OutputBlock (int8, padding bytes 0). No requantization: that is
// a preceding EltWise ADD's job.
#pragma once

#include "device/block.h"

// Registers run_concat with the block registry (block.h).
#define NPUKIT_DEVICE_RUN_CONCAT 1

namespace npukit::device {

inline constexpr int kConcatMaxInputs = 4;

BlockTiming run_concat(LayerContext& ctx);

}  // namespace npukit::device
