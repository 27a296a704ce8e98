// The EltWise add's arithmetic on a residual add of resnet50's layer1 (64 x 56 x 56 int8 values,
// the compiler's parameters: AScale 43344, BScale 65536, QuantScale 27905, QuantShift 21 + the
// fp_cast 10, ReLU), from the operands' bytes to the output's, values per second:
//   path 0: the scalar level's three passes (eltwise_span, quantize_span, the low bytes);
//   path 1: the AVX2 fused pass with the zero points 1 (the 64-bit quantizer);
//   path 2: the same with both zero points 0, as the compiler emits them (16-bit limbs);
//   path 3: the limbs 64 values a step at the AVX-512 VNNI level.
#include "device/bench_support.h"
#include "device/block.h"
#include "device/eltwise.h"

#include <cstdint>
#include <random>
#include <vector>

namespace {

using namespace npukit;
using namespace npukit::device;

void BM_EltwiseAdd(benchmark::State& state) {
  const auto path = state.range(0);
  if (path > 0 && bench::skipped_without(Isa::kAvx2, state)) return;
  if (path == 3 && bench::skipped_without(Isa::kAvx512Vnni, state)) return;
  constexpr std::uint64_t kValues = 64 * 56 * 56;
  constexpr std::int32_t kScale = 27905;
  constexpr int kShift = 21, kAct = 0;
  const int fp_cast = eltwise_fp_cast_shift(isa::EltType::kAdd);
  const std::int32_t zero = path == 1 ? 1 : 0;
  const EltwiseLaneParams p{isa::EltType::kAdd, 43344, 65536, zero, zero};
  std::mt19937 rng(7);
  std::vector<std::int8_t> a(kValues), b(kValues);
  for (auto& v : a) v = static_cast<std::int8_t>(rng() % 128);
  for (auto& v : b) v = static_cast<std::int8_t>(rng() % 256 - 128);
  std::vector<std::uint8_t> out(kValues);
  std::vector<std::int32_t> lanes(kValues), values(kValues);
  for (auto _ : state) {
    if (path == 0) {
      eltwise_span(p, a.data(), b.data(), lanes.data(), kValues, Isa::kScalar);
      quantize_span(lanes.data(), values.data(), kValues, 0, kScale, kShift, fp_cast, kAct, 0,
                    Isa::kScalar);
      for (std::uint64_t i = 0; i < kValues; ++i) out[i] = static_cast<std::uint8_t>(values[i]);
    } else {
      detail::eltwise_quantized_bytes_avx2(p, a.data(), b.data(), out.data(), kValues, kScale,
                                           kShift, fp_cast, kAct, 0, path == 3);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kValues));
  state.SetLabel(path == 0   ? "scalar"
                 : path == 1 ? "avx2 64-bit quantizer"
                 : path == 2 ? "avx2 16-bit limbs"
                             : "avx512vnni 16-bit limbs");
}
BENCHMARK(BM_EltwiseAdd)->ArgName("path")->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);

}  // namespace
