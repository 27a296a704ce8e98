// Simulation speed of the device model's CONV on resnet18-shaped layers, fed as bytes: the whole
// layer as a board receives it (DWP decode, weight mapping, conv, tail, write-back).
#include "common/cpu.h"
#include "device/bench_support.h"
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
  // The last argument: the cpu.h level (0 = the CPU's best, 1 scalar, 2 avx2, 3 avxvnni,
  // 4 avx512vnni).
  const auto level = static_cast<npukit::Isa>(state.range(7));
  if (bench::skipped_without(level, state)) return;
  const npukit::cpu::ScopedIsa forced(level);
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
}
BENCHMARK(BM_Conv)
    ->ArgNames({"arch", "ic", "kn", "hw", "k", "s", "dw", "isa"})
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
    // resnet50 layer1's 1x1 convs: 4x more output than input values, and 4x less
    ->Args({1, 64, 256, 56, 1, 1, 0, 0})
    ->Args({1, 256, 64, 56, 1, 1, 0, 0})
    // a mobilenet-style depthwise 3x3, and stride 2
    ->Args({1, 64, 64, 56, 3, 1, 1, 0})
    ->Args({1, 128, 128, 56, 3, 2, 1, 0})
    // every level (1 scalar, 2 avx2, 3 avxvnni, 4 avx512vnni; those the CPU lacks are skipped)
    ->ArgsProduct({{1}, {64}, {64}, {56}, {3}, {1}, {0, 1}, {1, 2, 3, 4}})
    ->ArgsProduct({{1}, {512}, {512}, {7}, {3}, {1}, {0}, {1, 2, 3, 4}})
    ->Unit(benchmark::kMillisecond);

// The DRAM's page walks (issue 13): read, equals, write and fill of `bytes` from an address that
// starts mid-page, on a DRAM whose pages have all been written (the activation and weight traffic
// of a layer). Bytes per second over all four calls.
void BM_Dram(benchmark::State& state) {
  const std::uint64_t bytes = static_cast<std::uint64_t>(state.range(0));
  Dram dram(64ull << 20);
  const std::uint64_t addr = Dram::kPageBytes / 2 + 32;
  npukit::Bytes data(bytes);
  for (std::uint64_t i = 0; i < bytes; ++i) data[i] = static_cast<std::uint8_t>(i * 7 + 1);
  npukit::Bytes back(bytes);
  dram.write(addr, data, "bench");
  for (auto _ : state) {
    dram.write(addr, data, "bench");
    dram.read(addr, back, "bench");
    benchmark::DoNotOptimize(dram.equals(addr, back, "bench"));
    dram.fill(addr + bytes, bytes / 4, 0, "bench");
    benchmark::DoNotOptimize(back.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes * 3 + bytes / 4));
}
BENCHMARK(BM_Dram)->Arg(4096)->Arg(200704)->Arg(3211264);

}  // namespace
