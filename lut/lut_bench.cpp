// LUT evaluations per second for each pipeline (items/s = evaluations/s).
#include "lut/designer.h"
#include "lut/lut.h"
#include "lut/nvdla_fp.h"

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

namespace {

using namespace npukit::lut;

void run(benchmark::State& state, const LutConfig& c, const std::vector<std::int64_t>& xs) {
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(evaluate(c, xs[i]).output);
    if (++i == xs.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}

std::vector<std::int64_t> inputs(std::int64_t lo, std::int64_t hi) {
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<std::int64_t> d(lo, hi);
  std::vector<std::int64_t> xs(4096);
  for (auto& x : xs) x = d(rng);
  return xs;
}

void BM_SdpInt(benchmark::State& state) {
  DesignRequest r;
  r.function = "sigmoid";
  const Design d = design_lut(r);
  run(state, d.config, inputs(-(1 << 24), 1 << 24));
}
BENCHMARK(BM_SdpInt);

void BM_SdpFp16(benchmark::State& state) {
  const LutConfig c = nvdla_sw_config("sigmoid");
  std::vector<std::int64_t> xs;
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> d(-20, 20);
  for (int i = 0; i < 4096; ++i) xs.push_back(npukit::lut::fp::fp32_bits(d(rng)));
  run(state, c, xs);
}
BENCHMARK(BM_SdpFp16);

void BM_CdpInt16Lrn(benchmark::State& state) {
  DesignRequest r;
  r.function = "lrn";
  r.unit = Unit::kCdp;
  r.precision = Precision::kInt16;
  const Design d = design_lut(r);
  run(state, d.config, inputs(0, std::int64_t(1) << 37));
}
BENCHMARK(BM_CdpInt16Lrn);

void BM_CdpFp16Lrn(benchmark::State& state) {
  DesignRequest r;
  r.function = "lrn";
  r.unit = Unit::kCdp;
  r.precision = Precision::kFp16;
  const Design d = design_lut(r);
  std::vector<std::int64_t> xs;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(0, 1e6);
  for (int i = 0; i < 4096; ++i) xs.push_back(npukit::lut::fp::fp32_bits(dist(rng)));
  run(state, d.config, xs);
}
BENCHMARK(BM_CdpFp16Lrn);

}  // namespace
