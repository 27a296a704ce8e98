#include "device/resize.h"

#include "device/eltwise.h"  // field checks shared by the device-blocks megablocks

namespace npukit::device {

using isa::Field;

void upsample2x_plane(std::span<const std::int8_t> in, std::uint64_t ih, std::uint64_t iw,
                      std::span<std::int32_t> out) {
  const std::uint64_t ow = 2 * iw;
  for (std::uint64_t y = 0; y < 2 * ih; ++y)
    for (std::uint64_t x = 0; x < ow; ++x) out[y * ow + x] = in[(y / 2) * iw + x / 2];
}

BlockTiming run_resize(LayerContext& ctx) {
  const std::uint64_t iw = require_nonzero(ctx, Field::RESIZE_IW, "the image width");
  const std::uint64_t ih = require_nonzero(ctx, Field::RESIZE_IH, "the image height");
  const std::uint64_t ic = require_nonzero(ctx, Field::RESIZE_IC, "the channel count");
  const ActivationLayout in_layout = ActivationLayout::for_arch(ctx.arch, ic, ih * iw);
  const std::uint64_t addr = check_input_region(ctx, Field::RESIZE_ImageStartAddress,
                                                Field::RESIZE_ImageEndAddress, in_layout.bytes());
  require_int8_output(ctx);
  check_output_dims(ctx, 2 * ih, 2 * iw);
  const std::uint64_t in_pixels = ih * iw, out_pixels = 4 * in_pixels;
  const ActivationLayout out_layout = ActivationLayout::for_arch(ctx.arch, ic, out_pixels);
  check_output_fits(ctx, out_layout.bytes());
  const std::vector<std::int8_t> in =
      read_activation(ctx, Field::RESIZE_ImageStartAddress, addr, in_layout);
  std::vector<std::int32_t> out(ic * out_pixels);
  for (std::uint64_t c = 0; c < ic; ++c)
    upsample2x_plane(std::span<const std::int8_t>(in).subspan(c * in_pixels, in_pixels), ih, iw,
                     std::span<std::int32_t>(out).subspan(c * out_pixels, out_pixels));
  const std::uint64_t written = write_activation_output(ctx, out_layout, out);
  // Each input row is written into BRAM once and read out twice, each element twice: the output
  // side runs at one 32-byte word per cycle, the input side overlaps with it.
  const std::uint64_t compute = dram_beats(written) + dram_beats(in_layout.bytes()) / 2;
  return streaming_timing(compute, in_layout.bytes(), written);
}

}  // namespace npukit::device
