// conv2d_deep, fully_connected_8 and conv2d_depthwise throughput in int8 MACs per second, scalar
// reference vs AVX2 (items_per_second is MACs/s). Run: build/xs3/npukit_xs3_bench
#include "common/cpu.h"
#include "xs3/kernels.h"

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

namespace {

using namespace npukit::xs3;

std::vector<std::int8_t> random_int8(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-128, 127);
  std::vector<std::int8_t> v(n);
  for (auto& e : v) e = static_cast<std::int8_t>(d(rng));
  return v;
}

std::vector<std::uint16_t> typical_bso(int c_out) {
  std::vector<BsoChannel> chans(std::size_t(c_out), BsoChannel{1000, 10, 20000, 100, 5, 20});
  return pack_bso(chans);
}

Isa impl_of(const benchmark::State& state) { return state.range(0) ? Isa::kAvx2 : Isa::kScalar; }

// 16x16x64 image, 3x3 window with padding 1, 64 output channels: a typical deep layer.
void BM_Conv2dDeep(benchmark::State& state) {
  if (state.range(0) && !npukit::cpu::supports(npukit::Isa::kAvx2)) {
    state.SkipWithError("no AVX2");
    return;
  }
  ConvParams p;
  p.x = {16, 16, 64};
  p.y = {16, 16, 64};
  p.window = {3, 3, -1, -1, 1, 1};
  const auto x = random_int8(p.x.elements(), 1);
  const auto k = random_int8(64u * 9 * 64, 2);
  const auto bso = typical_bso(64);
  for (auto _ : state) benchmark::DoNotOptimize(conv2d_deep(x, k, bso, p, impl_of(state)));
  const std::int64_t macs = 16 * 16 * 64 * 9 * 64;
  state.SetItemsProcessed(state.iterations() * macs);
  state.SetLabel(state.range(0) ? "avx2" : "scalar");
}
BENCHMARK(BM_Conv2dDeep)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// 32x32x64 image, 3x3 depthwise with padding 1.
void BM_Conv2dDepthwise(benchmark::State& state) {
  if (state.range(0) && !npukit::cpu::supports(npukit::Isa::kAvx2)) {
    state.SkipWithError("no AVX2");
    return;
  }
  ConvParams p;
  p.x = {32, 32, 64};
  p.y = {32, 32, 64};
  p.window = {3, 3, -1, -1, 1, 1};
  const auto x = random_int8(p.x.elements(), 5);
  const auto k = random_int8(9u * 64, 6);
  const auto bso = typical_bso(64);
  for (auto _ : state) benchmark::DoNotOptimize(conv2d_depthwise(x, k, bso, p, impl_of(state)));
  state.SetItemsProcessed(state.iterations() * std::int64_t{32 * 32 * 64 * 9});
  state.SetLabel(state.range(0) ? "avx2" : "scalar");
}
BENCHMARK(BM_Conv2dDepthwise)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// 1024 inputs, 256 outputs.
void BM_FullyConnected8(benchmark::State& state) {
  if (state.range(0) && !npukit::cpu::supports(npukit::Isa::kAvx2)) {
    state.SkipWithError("no AVX2");
    return;
  }
  const int c_in = 1024, c_out = 256;
  const auto x = random_int8(std::size_t(c_in), 3);
  const auto w = random_int8(std::size_t(c_in) * std::size_t(c_out), 4);
  const auto bso = typical_bso(c_out);
  for (auto _ : state) {
    benchmark::DoNotOptimize(fully_connected_8(x, w, c_out, bso, {}, impl_of(state)));
  }
  state.SetItemsProcessed(state.iterations() * std::int64_t{c_in} * c_out);
  state.SetLabel(state.range(0) ? "avx2" : "scalar");
}
BENCHMARK(BM_FullyConnected8)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
