#include "device/concat.h"

#include "device/eltwise.h"  // field checks shared by the device-blocks megablocks

#include <array>

namespace npukit::device {

using isa::Field;

namespace {

struct ConcatInputFields {
  Field start, ih, kn;
};

constexpr std::array<ConcatInputFields, kConcatMaxInputs> kInputs = {{
    {Field::CONCAT_Image1StartAddress, Field::CONCAT_IH1, Field::CONCAT_KN1},
    {Field::CONCAT_Image2StartAddress, Field::CONCAT_IH2, Field::CONCAT_KN2},
    {Field::CONCAT_Image3StartAddress, Field::CONCAT_IH3, Field::CONCAT_KN3},
    {Field::CONCAT_Image4StartAddress, Field::CONCAT_IH4, Field::CONCAT_KN4},
}};

}  // namespace

BlockTiming run_concat(LayerContext& ctx) {
  const std::uint64_t inputs = ctx.mega.get(Field::CONCAT_InNum);
  if (inputs < 1 || inputs > kConcatMaxInputs)
    ctx.fail_field(Field::CONCAT_InNum, "is {} but CONCAT joins 1 to {} inputs", inputs,
                   kConcatMaxInputs);
  const std::uint64_t n_sa = static_cast<std::uint64_t>(ctx.arch.n_sa);
  const std::uint64_t side = require_nonzero(ctx, kInputs[0].ih, "the image size");
  const std::uint64_t pixels = side * side;
  const std::uint64_t pixel_group = 32 / n_sa;  // pixels per 32-byte word of one channel group
  if (pixels % pixel_group != 0)
    ctx.diag.erratum(ctx.layer_number, Erratum::kConcatPixelPadding,
                     fmt::format("{}: inputs are {}x{} = {} pixels, not a multiple of 32/N_SA = "
                                 "{}; the board copies floor(H*W*KN/32) words per input",
                                 ctx.where(), side, side, pixels, pixel_group));
  std::uint64_t channels = 0, read_bytes = 0;
  std::vector<std::int8_t> planar;
  for (std::uint64_t n = 0; n < inputs; ++n) {
    const ConcatInputFields& f = kInputs[n];
    const std::uint64_t ih = require_nonzero(ctx, f.ih, "the image size");
    if (ih != side)
      ctx.fail_field(f.ih, "is {} but input 1 is {}x{}: CONCAT joins images of one size", ih, side,
                     side);
    const std::uint64_t kn = require_nonzero(ctx, f.kn, "the channel count");
    if (n + 1 < inputs && kn % n_sa != 0)
      ctx.fail_field(f.kn,
                     "is {}, not a multiple of N_SA = {}: the board copies whole channel groups, "
                     "so this input's padding channels would land inside the output; pad its "
                     "channels to a multiple of {}",
                     kn, n_sa, n_sa);
    const ActivationLayout layout = ActivationLayout::for_arch(ctx.arch, kn, pixels);
    const std::uint64_t addr = check_input_start(ctx, f.start, layout.bytes());
    const std::vector<std::int8_t> part = read_activation(ctx, f.start, addr, layout);
    planar.insert(planar.end(), part.begin(), part.end());
    channels += kn;
    read_bytes += layout.bytes();
  }
  require_int8_output(ctx);
  check_output_dims(ctx, side, side);
  const ActivationLayout out_layout = ActivationLayout::for_arch(ctx.arch, channels, pixels);
  check_output_fits(ctx, out_layout.bytes());
  const std::vector<std::int32_t> values(planar.begin(), planar.end());
  const std::uint64_t written = write_activation_output(ctx, out_layout, values);
  // A streaming copy; switching to the next input costs one more read latency.
  const std::uint64_t compute = dram_beats(written) + (inputs - 1) * kDramReadLatencyCycles;
  return streaming_timing(compute, read_bytes, written);
}

}  // namespace npukit::device
