// GMAC/s of the CONV arithmetic alone (device/conv_kernels.h dense_conv: packing, tiles and
// extraction; no DWP decode, weight mapping or tail) per ISA path, on resnet18's 3x3 layer
// shapes. Inputs are random int8 (`signed`) or random 0..127 (`relu`: what a layer after a ReLU
// reads, where the AVX2 level may take its u8 path). Rates are of CPU time.
#include "common/cpu.h"
#include "device/conv_kernels.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using namespace npukit::device::conv_kernels;

// Args: channels in = out, input size (square, before padding), stride, input kind (0 signed,
// 1 relu), level (1 scalar, 2 avx2, 3 avxvnni, 4 avx512vnni).
void BM_DenseConv(benchmark::State& state) {
  const auto level = static_cast<npukit::Isa>(state.range(4));
  if (!npukit::cpu::supports(level)) {
    state.SkipWithError("this CPU lacks the level");
    return;
  }
  const std::uint64_t c = static_cast<std::uint64_t>(state.range(0));
  const std::uint64_t hw = static_cast<std::uint64_t>(state.range(1)) + 2;  // padded by 1
  std::mt19937 rng(1);
  std::vector<std::int8_t> planes(c * hw * hw), weights(c * c * 9);
  const bool relu = state.range(3) != 0;
  for (auto& v : planes) v = static_cast<std::int8_t>(relu ? rng() % 128 : rng() % 256 - 128);
  for (auto& v : weights) v = static_cast<std::int8_t>(rng() % 256 - 128);
  DenseConv conv;
  conv.planes = planes.data();
  conv.plane_count = c;
  conv.padded_h = conv.padded_w = hw;
  conv.kh = conv.kw = 3;
  conv.stride = static_cast<std::uint64_t>(state.range(2));
  for (std::uint64_t i = 0; i < c; ++i) conv.channels.push_back(static_cast<std::int64_t>(i));
  conv.kn = c;
  conv.weights = weights.data();
  conv.split = c;
  conv.snapshot_from = c;
  std::vector<std::int32_t> acc(c * conv.oh() * conv.ow());
  for (auto _ : state) {
    dense_conv(conv, acc.data(), nullptr, level);
    benchmark::DoNotOptimize(acc.data());
  }
  const double macs = static_cast<double>(c * c * 9 * conv.oh() * conv.ow());
  state.counters["MAC/s"] = benchmark::Counter(macs, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(npukit::cpu::name(level)) + (relu ? " relu" : " signed"));
}
BENCHMARK(BM_DenseConv)
    ->ArgNames({"c", "hw", "s", "relu", "isa"})
    ->ArgsProduct({{64}, {56}, {1}, {0, 1}, {1, 2, 3, 4}})
    ->ArgsProduct({{128}, {28}, {1}, {0, 1}, {2, 3, 4}})
    ->ArgsProduct({{256}, {14}, {1}, {0, 1}, {2, 3, 4}})
    ->ArgsProduct({{512}, {7}, {1}, {0, 1}, {2, 3, 4}})
    ->ArgsProduct({{64}, {56}, {2}, {0, 1}, {2, 3, 4}})
    ->Unit(benchmark::kMillisecond);

// Depthwise 3x3 (one input plane per output channel, as conv.cpp runs kDepthwise layers) on
// mobilenet_v2's depthwise shapes, either way conv.cpp can run it: lanes 0 = pack_planes once per
// call plus connection_conv per channel, lanes 1 = depthwise_lanes (channels in the SIMD lanes,
// the whole layer in one call, its packing included). Args: channels, input size (square, before
// padding), stride, lanes, level (1 scalar, 2 avx2).
void BM_Depthwise(benchmark::State& state) {
  const auto level = static_cast<npukit::Isa>(state.range(4));
  if (!npukit::cpu::supports(level)) {
    state.SkipWithError("this CPU lacks the level");
    return;
  }
  const std::uint64_t c = static_cast<std::uint64_t>(state.range(0));
  const std::uint64_t hw = static_cast<std::uint64_t>(state.range(1)) + 2;  // padded by 1
  const std::uint64_t s = static_cast<std::uint64_t>(state.range(2));
  const bool lanes = state.range(3) != 0;
  std::mt19937 rng(1);
  std::vector<std::int8_t> planes(c * hw * hw), taps(c * 9);
  for (auto& v : planes) v = static_cast<std::int8_t>(rng() % 256 - 128);
  for (auto& v : taps) v = static_cast<std::int8_t>(rng() % 256 - 128);
  const std::uint64_t o = (hw - 3) / s + 1;
  std::vector<std::int32_t> acc(c * o * o);
  PlaneSet set;
  const DepthwiseLanes conv{planes.data(), c, hw, hw, 3, 3, s, taps.data()};
  for (auto _ : state) {
    if (lanes) {
      depthwise_lanes(conv, acc.data(), level);
    } else {
      pack_planes(planes.data(), c, hw, hw, 3, 3, s, set);
      std::fill(acc.begin(), acc.end(), 0);
      for (std::uint64_t k = 0; k < c; ++k)
        connection_conv(set, k, taps.data() + 9 * k, acc.data() + k * o * o, level);
    }
    benchmark::DoNotOptimize(acc.data());
  }
  const double macs = static_cast<double>(c * 9 * o * o);
  state.counters["MAC/s"] = benchmark::Counter(macs, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(npukit::cpu::name(level)));
}
BENCHMARK(BM_Depthwise)
    ->ArgNames({"c", "hw", "s", "lanes", "isa"})
    ->ArgsProduct({{96}, {112}, {2}, {0, 1}, {1, 2}})
    ->ArgsProduct({{144}, {56}, {1}, {0, 1}, {1, 2}})
    ->ArgsProduct({{384}, {14}, {1}, {0, 1}, {1, 2}})
    ->ArgsProduct({{960}, {7}, {1}, {0, 1}, {1, 2}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
