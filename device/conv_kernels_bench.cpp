// GMAC/s of the CONV arithmetic alone (device/conv_kernels.h dense_conv: packing, tiles and
// extraction; no DWP decode, weight mapping or tail) per ISA path, on resnet18's 3x3 layer
// shapes. Inputs are random int8 (`signed`) or random 0..127 (`relu`: what a layer after a ReLU
// reads, where the AVX2 level may take its u8 path). Rates are of CPU time.
#include "common/cpu.h"
#include "common/parallel.h"
#include "device/bench_support.h"
#include "device/conv_kernels.h"
#include "device/conv_winograd.h"
#include "device/depthwise.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace {

// Figures per thread, for the whole npukit_device_bench binary: the pool would otherwise split
// each call over every core, while Google Benchmark's CPU time counts the calling thread only.
[[maybe_unused]] const bool kOneThread = (npukit::set_thread_count(1), true);

using namespace npukit::device::conv_kernels;
using npukit::device::bench::skipped_without;

// Args: input channels, output channels, kernel size (square), input size (square, before
// padding: a k x k kernel gets (k - 1) / 2 on each side, as resnet's), stride, input kind (0
// signed, 1 relu), level (1 scalar, 2 avx2, 3 avxvnni, 4 avx512vnni), kept (1: the weights are
// packed once and kept in a WeightPacks, as conv.cpp runs a network image after image; 0: packed
// on every call), form (0: dense_conv as it dispatches; 1: the Winograd path with its AVX2
// pieces, device/conv_winograd.h, for 3x3 stride-1 shapes whichever form dense_conv picks),
// weights (0: uniform on -128..127, the worst case for the u8 quads' step pairs, pair_steps;
// 1: as a per-channel symmetric quantizer leaves a trained layer: normal, each output channel
// scaled to a largest magnitude of 127).
void BM_DenseConv(benchmark::State& state) {
  const auto level = static_cast<npukit::Isa>(state.range(6));
  if (skipped_without(level, state)) return;
  const std::uint64_t cin = static_cast<std::uint64_t>(state.range(0));
  const std::uint64_t cout = static_cast<std::uint64_t>(state.range(1));
  const std::uint64_t k = static_cast<std::uint64_t>(state.range(2));
  const std::uint64_t hw = static_cast<std::uint64_t>(state.range(3)) + (k - 1) / 2 * 2;
  std::mt19937 rng(1);
  std::vector<std::int8_t> planes(cin * hw * hw), weights(cout * cin * k * k);
  const bool relu = state.range(5) != 0;
  for (auto& v : planes) v = static_cast<std::int8_t>(relu ? rng() % 128 : rng() % 256 - 128);
  if (state.range(9) == 0) {
    for (auto& v : weights) v = static_cast<std::int8_t>(rng() % 256 - 128);
  } else {
    std::normal_distribution<double> normal;
    const std::uint64_t per_channel = cin * k * k;
    std::vector<double> real(per_channel);
    for (std::uint64_t o = 0; o < cout; ++o) {
      double largest = 0;
      for (double& r : real) largest = std::max(largest, std::abs(r = normal(rng)));
      for (std::uint64_t i = 0; i < per_channel; ++i)
        weights[o * per_channel + i] =
            static_cast<std::int8_t>(std::lround(real[i] / largest * 127));
    }
  }
  DenseConv conv;
  conv.planes = planes.data();
  conv.plane_count = cin;
  conv.padded_h = conv.padded_w = hw;
  conv.kh = conv.kw = k;
  conv.stride = static_cast<std::uint64_t>(state.range(4));
  for (std::uint64_t i = 0; i < cin; ++i) conv.channels.push_back(static_cast<std::int64_t>(i));
  if (conv.channels.size() % 2) conv.channels.push_back(-1);
  conv.kn = cout;
  conv.weights = weights.data();
  conv.split = conv.channels.size();
  conv.snapshot_from = cout;
  WeightPacks packs;
  if (state.range(7) != 0) conv.packs = &packs;
  std::vector<std::int32_t> acc(cout * conv.oh() * conv.ow());
  const bool winograd = state.range(8) != 0;
  if (winograd && (level != npukit::Isa::kAvx2 || !winograd_applies(conv))) {
    state.SkipWithError("the Winograd form runs 3x3 stride-1 shapes at the AVX2 level");
    return;
  }
  for (auto _ : state) {
    if (winograd)
      detail::dense_conv_winograd(conv, acc.data(), nullptr, detail::winograd_kernels_avx2());
    else
      dense_conv(conv, acc.data(), nullptr, level);
    benchmark::DoNotOptimize(acc.data());
  }
  const double macs = static_cast<double>(cin * cout * k * k * conv.oh() * conv.ow());
  state.counters["MAC/s"] = benchmark::Counter(macs, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(npukit::cpu::name(level)) + (relu ? " relu" : " signed") +
                 (conv.packs ? " kept" : "") + (winograd ? " winograd" : "") +
                 (state.range(9) ? " quantized" : ""));
}
// resnet18's 3x3 layers (also packing the weights on every call, as before the packs were kept),
// its first layer (7x7 stride 2 on the signed 3-channel image), and resnet50's 1x1 layers.
BENCHMARK(BM_DenseConv)
    ->ArgNames({"ci", "co", "k", "hw", "s", "relu", "isa", "kept", "wino", "wt"})
    ->ArgsProduct({{64}, {64}, {3}, {56}, {1}, {0, 1}, {1, 2, 3, 4}, {0, 1}, {0}, {0, 1}})
    ->ArgsProduct({{128}, {128}, {3}, {28}, {1}, {0, 1}, {2, 3, 4}, {0, 1}, {0}, {0, 1}})
    ->ArgsProduct({{256}, {256}, {3}, {14}, {1}, {0, 1}, {2, 3, 4}, {0, 1}, {0}, {0, 1}})
    ->ArgsProduct({{512}, {512}, {3}, {7}, {1}, {0, 1}, {2, 3, 4}, {0, 1}, {0}, {0, 1}})
    // the Winograd form on the same 3x3 stride-1 shapes (weights kept)
    ->ArgsProduct({{64}, {64}, {3}, {56}, {1}, {0, 1}, {2}, {1}, {1}, {0}})
    ->ArgsProduct({{128}, {128}, {3}, {28}, {1}, {0, 1}, {2}, {1}, {1}, {0}})
    ->ArgsProduct({{256}, {256}, {3}, {14}, {1}, {0, 1}, {2}, {1}, {1}, {0}})
    ->ArgsProduct({{512}, {512}, {3}, {7}, {1}, {0, 1}, {2}, {1}, {1}, {0}})
    ->ArgsProduct({{64}, {64}, {3}, {56}, {2}, {0, 1}, {2, 3, 4}, {1}, {0}, {0, 1}})
    ->ArgsProduct({{3}, {64}, {7}, {224}, {2}, {0}, {2, 3, 4}, {1}, {0}, {0}})
    ->ArgsProduct({{256}, {64}, {1}, {56}, {1}, {1}, {2, 3, 4}, {1}, {0}, {0, 1}})
    ->ArgsProduct({{64}, {256}, {1}, {56}, {1}, {1}, {2, 3, 4}, {1}, {0}, {0, 1}})
    ->ArgsProduct({{1024}, {256}, {1}, {14}, {1}, {1}, {2, 3, 4}, {1}, {0}, {0, 1}})
    ->ArgsProduct({{2048}, {512}, {1}, {7}, {1}, {1}, {2, 3, 4}, {1}, {0}, {0, 1}})
    ->ArgsProduct({{512}, {2048}, {1}, {7}, {1}, {1}, {2, 3, 4}, {1}, {0}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

// One GEMM work unit of the AVX2 tiles with its operands in L1 and L2 (64 pixels x 64 output
// channels over `steps` steps), what a unit costs when nothing waits for memory. The input words
// of step s lie s * stride words apart (a conv's plane stride: 3136 is a 56x56 plane, 13225 the
// stem's 115x115 space-to-depth plane). Args: steps, stride. At the AVX2 level only.
void gemm_unit(benchmark::State& state, bool quads) {
  if (skipped_without(npukit::Isa::kAvx2, state)) return;
  const std::uint64_t steps = static_cast<std::uint64_t>(state.range(0));
  const std::uint64_t stride = static_cast<std::uint64_t>(state.range(1));
  constexpr std::uint64_t kPixels = 64, kBlocks = 8;
  std::mt19937 rng(1);
  std::vector<std::uint32_t> x(steps * stride + kPixels), w(kBlocks * steps * detail::kGemmBlock);
  // Quads: inputs 0..127 and weights 0..15, so every pair of steps fits int16; pairs: any int16
  // input, weights 0..255.
  for (auto& v : x) v = rng() & (quads ? 0x7f7f7f7fu : 0xffffffffu);
  for (auto& v : w) v = rng() & (quads ? 0x0f0f0f0fu : 0x00ff00ffu);
  std::vector<std::int64_t> offset(steps);
  for (std::uint64_t s = 0; s < steps; ++s) offset[s] = static_cast<std::int64_t>(s * stride);
  StepPairs pairs;
  pairs.begin.assign(kBlocks / 2 + 1, 0);  // no single step in any group
  detail::GemmOperands op;
  op.x = x.data(), op.offset = offset.data(), op.steps = steps, op.w = w.data();
  if (quads) detail::set_step_pairs(pairs, op);
  std::uint64_t q[kPixels];
  for (std::uint64_t i = 0; i < kPixels; ++i) q[i] = i;
  std::vector<std::int32_t> y(kPixels * detail::kGemmK + 8);
  // The pairs carry their sums in from y, as a chain's pieces (a stem's) do.
  const auto tiles = quads ? detail::gemm_quads_avx2 : detail::gemm_pairs_avx2;
  for (auto _ : state) {
    for (std::uint64_t b = 0; b < kBlocks; b += 2)
      tiles(op, b, 2, q, kPixels, 0, steps, !quads, y.data() + b * detail::kGemmBlock);
    benchmark::DoNotOptimize(y.data());
  }
  const double macs =
      static_cast<double>(kPixels * kBlocks * detail::kGemmBlock * steps * (quads ? 4 : 2));
  state.counters["MAC/s"] = benchmark::Counter(macs, benchmark::Counter::kIsIterationInvariantRate);
}
// The u8 quad tiles, every step paired.
void BM_GemmQuadUnit(benchmark::State& state) { gemm_unit(state, true); }
BENCHMARK(BM_GemmQuadUnit)
    ->ArgNames({"steps", "stride"})
    ->ArgsProduct({{16, 128}, {64, 264, 3136, 3200}})
    ->Unit(benchmark::kMicrosecond);
// The int16 pair tiles (signed inputs) at the live step counts of resnet's stem pieces (7, 14,
// 30; 77 is all four in one list).
void BM_GemmPairUnit(benchmark::State& state) { gemm_unit(state, false); }
BENCHMARK(BM_GemmPairUnit)
    ->ArgNames({"steps", "stride"})
    ->ArgsProduct({{7, 14, 30, 77}, {64, 13225}})
    ->Unit(benchmark::kMicrosecond);

// One GEMM work unit of the AVX-512 VNNI tiles (a unit's 64 pixels x 64 output channels in one
// call of 8 blocks, 6 pixels x 4 zmm a tile) over `steps` steps whose input words lie `stride`
// words apart (3136: a 56x56 plane, each step's words on their own lines; 49: 7x7), in calls of
// `chunk` steps (the sums carried in y between them; 4096: one call). 64 steps are resnet50's
// 1x1 256 -> 64, 576 and 1152 its 3x3 convs on 256 and 512 channels. The operands are warm
// (the unit repeats): inside eval a layer's first pass over its pixels finds the weights in L3
// (GemmOperands::prefetch). Read against BM_VpdpbusdCeiling, measured in the same run.
void BM_VnniUnit(benchmark::State& state) {
  if (skipped_without(npukit::Isa::kAvx512Vnni, state)) return;
  const std::uint64_t steps = static_cast<std::uint64_t>(state.range(0));
  const std::uint64_t stride = static_cast<std::uint64_t>(state.range(1));
  constexpr std::uint64_t kPixels = 64, kBlocks = detail::kGemmVnniBlocks;
  std::mt19937 rng(1);
  std::vector<std::uint32_t> x(steps * stride + kPixels), w(kBlocks * steps * detail::kGemmBlock);
  for (auto& v : x) v = rng();
  for (auto& v : w) v = rng();
  std::vector<std::int64_t> offset(steps);
  for (std::uint64_t s = 0; s < steps; ++s) offset[s] = static_cast<std::int64_t>(s * stride);
  detail::GemmOperands op;
  op.x = x.data(), op.offset = offset.data(), op.steps = steps, op.w = w.data();
  op.w_joined = w.data();  // the layout differs, the work does not
  std::uint64_t q[kPixels];
  for (std::uint64_t i = 0; i < kPixels; ++i) q[i] = i;
  std::vector<std::int32_t> y(kPixels * detail::kGemmK + 8);
  const std::uint64_t chunk = static_cast<std::uint64_t>(state.range(2));
  for (auto _ : state) {
    for (std::uint64_t s = 0; s < steps; s += chunk)
      detail::gemm_quads_avx512vnni(op, 0, kBlocks, q, kPixels, s, std::min(steps, s + chunk),
                                    s > 0, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  const double macs = static_cast<double>(kPixels * kBlocks * detail::kGemmBlock * steps * 4);
  state.counters["MAC/s"] = benchmark::Counter(macs, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_VnniUnit)
    ->ArgNames({"steps", "stride", "chunk"})
    ->ArgsProduct({{64, 576, 1152, 2048}, {49, 3136}, {32, 64, 128, 4096}})
    ->Unit(benchmark::kMicrosecond);

#if defined(__x86_64__)
// The core's rate for the u8 tile's instruction mix alone: per 512 MACs (4 pixels x 16 channels x
// 2 steps of 4 inputs) 8 input broadcasts, 16 vpmaddubsw (half on register weights, half on
// memory), 8 vpaddw, 8 vpmaddwd and 8 vpaddd, from fixed L1 addresses with no address
// arithmetic: the ceiling BM_GemmQuadUnit is read against (docs/performance.md, stop 45).
__attribute__((target("avx2"))) void BM_QuadTileMixCeiling(benchmark::State& state) {
  if (skipped_without(npukit::Isa::kAvx2, state)) return;
  alignas(64) static std::uint32_t buf[2048] = {};
  constexpr int kIterations = 1000;
  for (auto _ : state) {
    for (int i = 0; i < kIterations; ++i)
#define NPUKIT_PIXEL(a0, a1, b)                                                       \
  "vpbroadcastd " #b "(%0), %%ymm8\n\t vpbroadcastd " #b                              \
  "+4(%0), %%ymm9\n\t"                                                                \
  "vpmaddubsw %%ymm12, %%ymm8, %%ymm10\n\t vpmaddubsw %%ymm13, %%ymm9, %%ymm11\n\t"   \
  "vpaddw %%ymm11, %%ymm10, %%ymm10\n\t vpmaddwd %%ymm15, %%ymm10, %%ymm10\n\t"       \
  "vpaddd %%ymm10, %%ymm" #a0 ", %%ymm" #a0                                           \
  "\n\t"                                                                              \
  "vpmaddubsw 4096(%0), %%ymm8, %%ymm10\n\t vpmaddubsw 4128(%0), %%ymm9, %%ymm11\n\t" \
  "vpaddw %%ymm11, %%ymm10, %%ymm10\n\t vpmaddwd %%ymm15, %%ymm10, %%ymm10\n\t"       \
  "vpaddd %%ymm10, %%ymm" #a1 ", %%ymm" #a1 "\n\t"
      asm volatile("vmovdqu (%0), %%ymm12\n\t vmovdqu 32(%0), %%ymm13\n\t" NPUKIT_PIXEL(0, 1, 2048)
                       NPUKIT_PIXEL(2, 3, 2056) NPUKIT_PIXEL(4, 5, 2064) NPUKIT_PIXEL(6, 7, 2072)
                   :
                   : "r"(buf)
                   : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
                     "xmm10", "xmm11", "xmm12", "xmm13", "xmm15", "memory");
#undef NPUKIT_PIXEL
  }
  state.counters["MAC/s"] =
      benchmark::Counter(512.0 * kIterations, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_QuadTileMixCeiling)->Unit(benchmark::kMicrosecond);

// The core's rate for vpdpbusd on zmm alone: 24 independent sums (as a tile of 6 pixels x 4
// vectors), register operands, no loads. Noisy shared machines move this from run to run, so
// BM_VnniUnit is read against it measured in the same run.
__attribute__((target("avx512f,avx512vnni"))) void BM_VpdpbusdCeiling(benchmark::State& state) {
  if (skipped_without(npukit::Isa::kAvx512Vnni, state)) return;
  constexpr int kIterations = 1000;
  for (auto _ : state) {
    for (int i = 0; i < kIterations; ++i)
#define NPUKIT_DOT(i) "vpdpbusd %%zmm30, %%zmm31, %%zmm" #i "\n\t"
      asm volatile(NPUKIT_DOT(0) NPUKIT_DOT(1) NPUKIT_DOT(2) NPUKIT_DOT(3) NPUKIT_DOT(4)
                       NPUKIT_DOT(5) NPUKIT_DOT(6) NPUKIT_DOT(7) NPUKIT_DOT(8) NPUKIT_DOT(9)
                           NPUKIT_DOT(10) NPUKIT_DOT(11) NPUKIT_DOT(12) NPUKIT_DOT(13)
                               NPUKIT_DOT(14) NPUKIT_DOT(15) NPUKIT_DOT(16) NPUKIT_DOT(17)
                                   NPUKIT_DOT(18) NPUKIT_DOT(19) NPUKIT_DOT(20) NPUKIT_DOT(21)
                                       NPUKIT_DOT(22) NPUKIT_DOT(23)
                   :
                   :
                   : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
                     "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17",
                     "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23");
#undef NPUKIT_DOT
  }
  state.counters["MAC/s"] =
      benchmark::Counter(24.0 * 64 * kIterations, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_VpdpbusdCeiling)->Unit(benchmark::kMicrosecond);
#endif

// Depthwise 3x3 (one input plane per output channel, as conv.cpp runs kDepthwise layers) on
// mobilenet_v2's depthwise shapes, each way conv.cpp can run it. form 0 = pack_planes once per
// call plus connection_conv per channel; 1 = depthwise_lanes (channels in the SIMD lanes);
// 2 = depthwise() as conv.cpp calls it (device/depthwise.h: planar at strides 1 and 2). The timed
// region is a whole layer from the padded int8 planes to the int32 sums in [channel][pixel]
// order, every packing, widening and transpose the form needs included (what the device pays
// per image); MAC/s counts real MACs (9 per output pixel). Args: channels, input size (square,
// before padding), stride, form, level (1 scalar, 2 avx2).
void BM_Depthwise(benchmark::State& state) {
  const auto level = static_cast<npukit::Isa>(state.range(4));
  if (skipped_without(level, state)) return;
  const std::uint64_t c = static_cast<std::uint64_t>(state.range(0));
  const std::uint64_t hw = static_cast<std::uint64_t>(state.range(1)) + 2;  // padded by 1
  const std::uint64_t s = static_cast<std::uint64_t>(state.range(2));
  const std::int64_t form = state.range(3);
  std::mt19937 rng(1);
  std::vector<std::int8_t> planes(c * hw * hw), taps(c * 9);
  for (auto& v : planes) v = static_cast<std::int8_t>(rng() % 256 - 128);
  for (auto& v : taps) v = static_cast<std::int8_t>(rng() % 256 - 128);
  const std::uint64_t o = (hw - 3) / s + 1;
  std::vector<std::int32_t> acc(c * o * o);
  PlaneSet set;
  const DepthwiseLanes conv{planes.data(), c, hw, hw, 3, 3, s, taps.data()};
  for (auto _ : state) {
    if (form == 2) {
      depthwise(conv, acc.data(), level);
    } else if (form == 1) {
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
    ->ArgNames({"c", "hw", "s", "form", "isa"})
    ->ArgsProduct({{96}, {112}, {2}, {0, 1, 2}, {1, 2}})
    ->ArgsProduct({{144}, {56}, {1}, {0, 1, 2}, {1, 2}})
    ->ArgsProduct({{384}, {14}, {1}, {0, 1, 2}, {1, 2}})
    ->ArgsProduct({{960}, {7}, {1}, {0, 1, 2}, {1, 2}})
    ->ArgsProduct({{32}, {112}, {1}, {1, 2}, {2}})
    ->ArgsProduct({{576}, {14}, {2}, {1, 2}, {2}})
    ->Unit(benchmark::kMillisecond);

// A global average pool's pieces as compiled for resnet (one kernel row of the 7x7 plane, 1x7
// into one pixel per channel): the few-outputs case. form 1 = depthwise_lanes, 3 = the windows
// form (what depthwise() takes at AVX2 for at most kFewOutputs outputs); level 1 runs the plain
// loop. Args: channels, form, level.
void BM_DepthwiseFewOutputs(benchmark::State& state) {
  const auto level = static_cast<npukit::Isa>(state.range(2));
  if (skipped_without(level, state)) return;
  const std::uint64_t c = static_cast<std::uint64_t>(state.range(0));
  const auto form = state.range(1) == 3 ? DepthwiseForm::kWindows : DepthwiseForm::kLanes;
  std::mt19937 rng(1);
  std::vector<std::int8_t> planes(c * 7), taps(c * 7);
  for (auto& v : planes) v = static_cast<std::int8_t>(rng() % 256 - 128);
  for (auto& v : taps) v = static_cast<std::int8_t>(rng() % 256 - 128);
  std::vector<std::int32_t> acc(c);
  const DepthwiseLanes conv{planes.data(), c, 1, 7, 1, 7, 1, taps.data()};
  for (auto _ : state) {
    depthwise(conv, acc.data(), level, form);
    benchmark::DoNotOptimize(acc.data());
  }
  state.counters["MAC/s"] =
      benchmark::Counter(static_cast<double>(c * 7), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(npukit::cpu::name(level)));
}
BENCHMARK(BM_DepthwiseFewOutputs)
    ->ArgNames({"c", "form", "isa"})
    ->ArgsProduct({{512, 2048}, {1, 3}, {1, 2}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
