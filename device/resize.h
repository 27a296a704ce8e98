// RESIZE megablock (opcode 0xA; gati.md 3.2, 8; DECISIONS.md 10): 2x nearest-neighbour upsample
// of an int8 activation tensor, IC x IH x IW -> IC x 2IH x 2IW (every element twice, every row
// twice), activation layout in and out. Other resize modes run on the host.
#pragma once

#include "device/block.h"

#include <cstdint>
#include <span>

// Registers run_resize with the block registry (block.h).
#define NPUKIT_DEVICE_RUN_RESIZE 1

namespace npukit::device {

// One channel plane: in has ih*iw values, out gets 4*ih*iw values.
void upsample2x_plane(std::span<const std::int8_t> in, std::uint64_t ih, std::uint64_t iw,
                      std::span<std::int32_t> out);

BlockTiming run_resize(LayerContext& ctx);

}  // namespace npukit::device
