// RESHAPE (opcode 0x6) and TRANSPOSE (opcode 0x7) megablocks (gati.md 3.2, 8): both read an int8
// activation tensor of IC x IH x IW in the activation layout (gati.md 6.1) and write flat bytes
// through an OutputBlock with FlatController = 1, zero-padded to a multiple of 32 bytes:
//   RESHAPE   -> C·H·W bytes in CHW order (the tensor without the layout's grouping and padding);
//   TRANSPOSE -> H·W·C bytes in HWC order (channel fastest), as the RTL's slice transpose does.
// IC is taken as given: when the compiler passes the channel count padded to N_SA, the padded
// (zero) channels are part of the flat output.
#pragma once

#include "device/block.h"

#include <cstdint>
#include <span>

// Registers run_reshape and run_transpose with the block registry (block.h).
#define NPUKIT_DEVICE_RUN_RESHAPE_TRANSPOSE 1

namespace npukit::device {

// planar [C][P] -> flat CHW (a copy) or HWC bytes.
Bytes flat_chw(std::span<const std::int8_t> planar);
Bytes flat_hwc(std::span<const std::int8_t> planar, std::uint64_t channels, std::uint64_t pixels);

BlockTiming run_reshape(LayerContext& ctx);
BlockTiming run_transpose(LayerContext& ctx);

}  // namespace npukit::device
