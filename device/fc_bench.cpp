// G MAC/s of the FC engine's row paths (device/fc.h): one 32-neuron block's rows against the
// input, per ISA path. Rows 2048 with 32 blocks is resnet50's 2048 -> 1000 FC (2 MiB of weights,
// which an image reads once: from L3 in eval); 4 blocks keep the weights in L2.
#include "common/cpu.h"
#include "device/bench_support.h"
#include "device/fc.h"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

namespace {

using npukit::Isa;
using npukit::device::bench::skipped_without;
namespace d = npukit::device::detail;

// Args: blocks of 32 neurons, level (1 scalar, 2 avx2, 3 avxvnni, 4 avx512vnni).
void BM_FcRows(benchmark::State& state) {
  constexpr std::uint64_t kRows = 2048;
  const auto blocks = static_cast<std::uint64_t>(state.range(0));
  const auto level = static_cast<Isa>(state.range(1));
  if (skipped_without(level, state)) return;
  const d::FcRows rows = level == Isa::kScalar ? d::fc_rows_scalar : d::fc_rows_for(level);
  std::mt19937 rng(3);
  std::vector<std::uint8_t> w(blocks * kRows * 32);
  std::vector<std::int8_t> x(kRows);
  for (auto& v : w) v = static_cast<std::uint8_t>(rng());
  for (auto& v : x) v = static_cast<std::int8_t>(rng());
  std::vector<std::int32_t> acc(blocks * 32);
  for (auto _ : state) {
    for (std::uint64_t b = 0; b < blocks; ++b)
      rows(acc.data() + b * 32, w.data() + b * kRows * 32, x.data(), kRows);
    benchmark::DoNotOptimize(acc.data());
  }
  state.counters["MAC/s"] = benchmark::Counter(static_cast<double>(blocks * kRows * 32),
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(npukit::cpu::name(level)));
}
BENCHMARK(BM_FcRows)
    ->ArgNames({"blocks", "isa"})
    ->ArgsProduct({{4, 32}, {1, 2, 3, 4}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
