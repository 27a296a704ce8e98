#include "device/reshape_transpose.h"

#include "device/eltwise.h"  // field checks shared by the device-blocks megablocks

namespace npukit::device {

using isa::Field;

// BRAM write, bank-major read and output packing stages.
inline constexpr std::uint64_t kReshapePipelineCycles = 4;

Bytes flat_chw(std::span<const std::int8_t> planar) {
  Bytes out(planar.size());
  for (std::size_t i = 0; i < planar.size(); ++i) out[i] = static_cast<std::uint8_t>(planar[i]);
  return out;
}

Bytes flat_hwc(std::span<const std::int8_t> planar, std::uint64_t channels, std::uint64_t pixels) {
  Bytes out(channels * pixels);
  for (std::uint64_t c = 0; c < channels; ++c)
    for (std::uint64_t p = 0; p < pixels; ++p)
      out[p * channels + c] = static_cast<std::uint8_t>(planar[c * pixels + p]);
  return out;
}

namespace {

struct FlatFields {
  Field ic, ih, iw, start;
};

BlockTiming run_flat(LayerContext& ctx, const FlatFields& f, bool transpose) {
  const std::uint64_t ic = require_nonzero(ctx, f.ic, "the channel count");
  const std::uint64_t ih = require_nonzero(ctx, f.ih, "the image height");
  const std::uint64_t iw = require_nonzero(ctx, f.iw, "the image width");
  const ActivationLayout layout = ActivationLayout::for_arch(ctx.arch, ic, ih * iw);
  const std::uint64_t addr = check_input_start(ctx, f.start, layout.bytes());
  if (ctx.require_output().get(Field::OutputBlock_FlatController) != 1)
    ctx.fail_field(Field::OutputBlock_FlatController,
                   "is 0 but {} writes flat bytes: FlatController must be 1",
                   isa::name(ctx.mega.opcode()));
  const std::vector<std::int8_t> planar = read_activation(ctx, f.start, addr, layout);
  const Bytes flat = transpose ? flat_hwc(planar, ic, ih * iw) : flat_chw(planar);
  const std::uint64_t written = write_flat_output(ctx, flat);
  // Two serial phases: the input words go into the BRAM banks, then the banks are read out.
  const std::uint64_t compute =
      dram_beats(layout.bytes()) + dram_beats(written) + kReshapePipelineCycles;
  return streaming_timing(compute, layout.bytes(), written);
}

}  // namespace

BlockTiming run_reshape(LayerContext& ctx) {
  return run_flat(
      ctx,
      {Field::RESHAPE_IC, Field::RESHAPE_IH, Field::RESHAPE_IW, Field::RESHAPE_ImageStartAddress},
      false);
}

BlockTiming run_transpose(LayerContext& ctx) {
  return run_flat(ctx,
                  {Field::TRANSPOSE_IC, Field::TRANSPOSE_IH, Field::TRANSPOSE_IW,
                   Field::TRANSPOSE_ImageStartAddress},
                  true);
}

}  // namespace npukit::device
