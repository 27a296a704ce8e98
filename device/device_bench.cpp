// Simulation speed of the device model's CONV on resnet18-shaped layers, fed as bytes: the whole
// layer as a board receives it (DWP decode, weight mapping, conv, tail, write-back).
#include "device/conv_kernels.h"
#include "device/device.h"
#include "device/test_programs.h"

#include <benchmark/benchmark.h>

namespace {

using namespace npukit::device;
using namespace npukit::device::testing;

// Args: array index (kSupportedArchs), channels in, channels out, input size (square), kernel
// size (square), stride, depthwise, and for BM_ConvScalar the conv arithmetic forced to the
// scalar reference path (what a CPU without AVX2 runs).
void BM_Conv(benchmark::State& state) {
  conv_kernels::set_impl(state.range(7) ? conv_kernels::Impl::kScalar : conv_kernels::Impl::kAuto);
  const npukit::isa::SaArch arch = npukit::isa::kSupportedArchs[state.range(0)];
  ConvSpec s;
  s.ic = static_cast<int>(state.range(1));
  s.kn = static_cast<int>(state.range(2));
  s.ih = s.iw = static_cast<int>(state.range(3));
  s.kh = s.kw = static_cast<int>(state.range(4));
  s.stride = static_cast<int>(state.range(5));
  s.depthwise = state.range(6) != 0;
  const int pad = s.kh / 2;
  s.pad_top = s.pad_bottom = s.pad_left = s.pad_right = pad;
  s.quant_shift = 12, s.act_en = true;
  const int pixels = s.oh() * s.ow();
  s.on_chip_acc = pixels <= 1024;  // larger outputs round-trip partial sums through DRAM
  fill_random(s, 1);
  ProgramBuilder b{arch};
  const std::uint64_t dk = 32 / arch.n_sa;
  const npukit::Bytes input = pack_activation(arch, s.ic, s.ih * s.iw, s.x);
  const std::uint32_t in_addr = b.alloc(input.size());
  const std::uint32_t out_addr = b.alloc(up(s.kn, arch.n_sa) * up(pixels, dk));
  b.add_conv(s, in_addr, out_addr, b.alloc(up(s.kn, 16) * up(pixels, 8) * 4));
  b.finish();
  const npukit::Bytes stream = b.stream(in_addr, input);
  const double macs = static_cast<double>(s.kn) * s.kc() * s.kh * s.kw * pixels;
  std::uint64_t cycles = 0;
  for (auto _ : state) {
    DeviceConfig cfg;
    cfg.arch = arch;
    cfg.dram_bytes = 64ull << 20;
    Device dev(cfg);
    dev.receive_dwp(stream);
    cycles = dev.stats().layers.at(0).timing.cycles;
    benchmark::DoNotOptimize(dev.take_dispatch_output());
  }
  state.counters["MAC/s"] = benchmark::Counter(macs, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["sim_cycles"] = static_cast<double>(cycles);
  state.SetLabel(arch.str());
  conv_kernels::set_impl(conv_kernels::Impl::kAuto);
}
BENCHMARK(BM_Conv)
    ->ArgNames({"arch", "ic", "kn", "hw", "k", "s", "dw", "scalar"})
    // resnet18 layer1..layer4 3x3 convs
    ->Args({0, 64, 64, 56, 3, 1, 0, 0})
    ->Args({1, 64, 64, 56, 3, 1, 0, 0})
    ->Args({2, 64, 64, 56, 3, 1, 0, 0})
    ->Args({1, 128, 128, 28, 3, 1, 0, 0})
    ->Args({1, 256, 256, 14, 3, 1, 0, 0})
    ->Args({1, 512, 512, 7, 3, 1, 0, 0})
    // resnet18 layer2's first conv (stride 2) and its 1x1 stride-2 downsample
    ->Args({1, 64, 128, 56, 3, 2, 0, 0})
    ->Args({1, 64, 128, 56, 1, 2, 0, 0})
    // a mobilenet-style depthwise 3x3
    ->Args({1, 64, 64, 56, 3, 1, 1, 0})
    // the scalar path
    ->Args({1, 64, 64, 56, 3, 1, 0, 1})
    ->Args({1, 512, 512, 7, 3, 1, 0, 1})
    ->Unit(benchmark::kMillisecond);

}  // namespace
