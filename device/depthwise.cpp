// device/depthwise.h: the choice of form and the checks; the kernels are in depthwise_avx2.cpp
// (planar) and conv_kernels*.cpp (lanes, and the scalar loop).
#include "device/depthwise.h"

#include "common/error.h"
#include "common/parallel.h"

#include <algorithm>

namespace npukit::device::conv_kernels {

bool depthwise_planar_fits(const DepthwiseLanes& c) {
  return (c.stride == 1 || c.stride == 2) && c.kh >= 1 && c.kw >= 1 && c.kh * c.kw <= 16 &&
         c.padded_h >= c.kh && c.padded_w >= c.kw;
}

void depthwise(const DepthwiseLanes& c, std::int32_t* acc, Isa isa, DepthwiseForm form) {
  const Isa level = cpu::resolve(isa, "depthwise");
  const bool avx2 = cpu::path_allowed(level, Isa::kAvx2);
  if (form == DepthwiseForm::kPlanar && !depthwise_planar_fits(c))
    fail(
        "depthwise: the planar form takes strides 1 and 2 with kh * kw <= 16, not a {}x{} "
        "kernel with stride {} on a {}x{} plane",
        c.kh, c.kw, c.stride, c.padded_h, c.padded_w);
  if (!avx2) return depthwise_lanes(c, acc, level);
  if (form == DepthwiseForm::kAuto)
    form = c.oh() * c.ow() <= kFewOutputs ? DepthwiseForm::kWindows
           : depthwise_planar_fits(c)     ? DepthwiseForm::kPlanar
                                          : DepthwiseForm::kLanes;
  if (form == DepthwiseForm::kLanes) return depthwise_lanes(c, acc, level);
  // Channels are independent (own plane, own acc rows). A work unit is at least 8 channels and
  // about 32 K MACs (the call's fixed cost, a few hundred cycles, is then small next to a 7x7
  // plane's 441 MACs per channel); the grouping changes which thread sums a channel, not how.
  const std::uint64_t macs = c.oh() * c.ow() * c.kh * c.kw;
  const std::uint64_t group = std::max<std::uint64_t>(8, (32768 + macs - 1) / macs);
  parallel_for((c.channels + group - 1) / group, [&](std::uint64_t g) {
    const std::uint64_t begin = g * group, end = std::min(c.channels, (g + 1) * group);
    if (form == DepthwiseForm::kWindows)
      detail::depthwise_windows_avx2(c, begin, end, acc);
    else
      detail::depthwise_planar_avx2(c, begin, end, acc);
  });
}

}  // namespace npukit::device::conv_kernels
