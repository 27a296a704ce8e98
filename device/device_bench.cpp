// Simulation speed of the device model: a resnet-style 3x3 conv 64 -> 64 on 56x56, fed as bytes.
#include "device/device.h"
#include "device/test_programs.h"

#include <benchmark/benchmark.h>

namespace {

using namespace npukit::device;
using namespace npukit::device::testing;

void BM_Conv3x3_64x64_56x56(benchmark::State& state) {
  const npukit::isa::SaArch arch = npukit::isa::kSupportedArchs[state.range(0)];
  ConvSpec s;
  s.ic = 64, s.kn = 64, s.ih = 56, s.iw = 56, s.quant_shift = 12, s.act_en = true;
  s.on_chip_acc = false;  // 3136 pixels > the 1024-pixel on-chip accumulator
  fill_random(s, 1);
  ProgramBuilder b{arch};
  const std::uint64_t dk = 32 / arch.n_sa;
  const npukit::Bytes input = pack_activation(arch, s.ic, 56 * 56, s.x);
  const std::uint32_t in_addr = b.alloc(input.size());
  const std::uint32_t out_addr = b.alloc(up(64, arch.n_sa) * up(56 * 56, dk));
  b.add_conv(s, in_addr, out_addr, b.alloc(64 * 56 * 56 * 4));
  b.finish();
  const npukit::Bytes stream = b.stream(in_addr, input);
  const double macs = 64.0 * 64 * 9 * 56 * 56;
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
BENCHMARK(BM_Conv3x3_64x64_56x56)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

}  // namespace
