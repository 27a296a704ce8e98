// Speed of the reference kernels on resnet18-sized layers (plain loops: these numbers say how long
// `npukit compare` and calibration spend in ref/, not how fast a good CPU kernel could be).
#include <benchmark/benchmark.h>

#include <chrono>
#include <map>
#include <random>

#include "common/parallel.h"
#include "ir/tensor_util.h"
#include "ref/executor.h"
#include "ref/gati_kernels.h"
#include "ref/space_to_depth_segment.h"

namespace npukit::ref {
namespace {

// Figures per thread: the pool would otherwise split each call over every core, while Google
// Benchmark's CPU time counts the calling thread only.
[[maybe_unused]] const bool kOneThread = (set_thread_count(1), true);

template <typename T>
ir::Tensor random_tensor(const ir::Shape& shape) {
  std::mt19937 rng(7);
  std::vector<T> v(static_cast<std::size_t>(ir::element_count(shape)));
  for (auto& e : v) {
    if constexpr (std::is_floating_point_v<T>)
      e = std::uniform_real_distribution<T>(-1, 1)(rng);
    else
      e = static_cast<T>(std::uniform_int_distribution<int>(-128, 127)(rng));
  }
  return ir::make_tensor<T>(shape, v);
}

// Gati conv, C -> K channels on an HxH image, pad k/2 (resnet18 layer shapes).
// Args: C, K, H, kernel size, stride.
void BM_GatiConv(benchmark::State& state) {
  const std::int64_t c = state.range(0), kn = state.range(1), h = state.range(2),
                     k = state.range(3), s = state.range(4);
  auto x = random_tensor<std::int8_t>({1, c, h, h});
  auto w = random_tensor<std::int8_t>({kn, c, k, k});
  gati::ConvParams p;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = static_cast<int>(k / 2);
  p.stride_h = p.stride_w = static_cast<int>(s);
  p.tail.quant_scale = 3;
  p.tail.quant_shift = 12;
  p.tail.act = gati::Act::kRelu;
  const std::int64_t o = (h + 2 * (k / 2) - k) / s + 1;
  for (auto _ : state) benchmark::DoNotOptimize(gati::conv(x, w, nullptr, nullptr, p));
  state.counters["MAC/s"] = benchmark::Counter(static_cast<double>(kn * c * k * k * o * o),
                                               benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GatiConv)
    ->ArgNames({"c", "kn", "hw", "k", "s"})
    ->Args({64, 64, 56, 3, 1})
    ->Args({128, 128, 28, 3, 1})
    ->Args({256, 256, 14, 3, 1})
    ->Args({512, 512, 7, 3, 1})
    ->Args({64, 128, 56, 3, 2})
    ->Args({64, 128, 56, 1, 2})
    ->Unit(benchmark::kMillisecond);

// ONNX QLinearConv (uint8 activations with a zero point, per-channel int8 weights), 3x3 pad 1.
void BM_QLinearConv3x3(benchmark::State& state) {
  const std::int64_t c = state.range(0), h = state.range(1);
  ir::Graph g;
  g.inputs = {"x"};
  g.outputs = {"y"};
  auto add = [&](const std::string& name, ir::Tensor t) {
    t.name = name;
    g.tensors[name] = std::move(t);
  };
  g.tensors["x"] = ir::Tensor{"x", ir::DType::kUInt8, {1, c, h, h}, {}};
  add("xs", ir::make_tensor<float>({}, {0.02f}));
  add("xz", ir::make_tensor<std::uint8_t>({}, {128}));
  add("w", random_tensor<std::int8_t>({c, c, 3, 3}));
  add("ws", ir::make_tensor<float>({c}, std::vector<float>(static_cast<std::size_t>(c), 0.01f)));
  add("wz",
      ir::make_tensor<std::int8_t>({c}, std::vector<std::int8_t>(static_cast<std::size_t>(c), 0)));
  add("ys", ir::make_tensor<float>({}, {0.5f}));
  add("yz", ir::make_tensor<std::uint8_t>({}, {128}));
  ir::Node n;
  n.name = "conv";
  n.op_type = "QLinearConv";
  n.inputs = {"x", "xs", "xz", "w", "ws", "wz", "ys", "yz"};
  n.outputs = {"y"};
  n.attributes["pads"] = std::vector<std::int64_t>{1, 1, 1, 1};
  g.nodes.push_back(n);
  std::mt19937 rng(3);
  std::vector<std::uint8_t> xv(static_cast<std::size_t>(c * h * h));
  for (auto& v : xv) v = static_cast<std::uint8_t>(rng());
  TensorMap in{{"x", ir::make_tensor<std::uint8_t>({1, c, h, h}, xv)}};
  for (auto _ : state) benchmark::DoNotOptimize(run_graph(g, in));
  state.counters["MAC/s"] = benchmark::Counter(static_cast<double>(c * c * 9 * h * h),
                                               benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_QLinearConv3x3)->Args({64, 56})->Args({512, 7})->Unit(benchmark::kMillisecond);

void BM_FloatConv3x3(benchmark::State& state) {
  const std::int64_t c = state.range(0), h = state.range(1);
  ir::Graph g;
  g.inputs = {"x"};
  g.outputs = {"y"};
  g.tensors["x"] = ir::Tensor{"x", ir::DType::kFloat32, {1, c, h, h}, {}};
  g.tensors["w"] = random_tensor<float>({c, c, 3, 3});
  g.tensors["w"].name = "w";
  ir::Node n;
  n.name = "conv";
  n.op_type = "Conv";
  n.inputs = {"x", "w"};
  n.outputs = {"y"};
  n.attributes["pads"] = std::vector<std::int64_t>{1, 1, 1, 1};
  g.nodes.push_back(n);
  TensorMap in{{"x", random_tensor<float>({1, c, h, h})}};
  for (auto _ : state) benchmark::DoNotOptimize(run_graph(g, in));
  state.counters["MAC/s"] = benchmark::Counter(static_cast<double>(c * c * 9 * h * h),
                                               benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_FloatConv3x3)->Args({64, 56})->Args({512, 7})->Unit(benchmark::kMillisecond);

// A resnet stem's host segment (ref/space_to_depth_segment.h), run with RunBuffers as a Session
// runs it for every image; the counters give each op's share (us per run, timed with
// after_node in a second pass, which keeps every value, so their sum exceeds the plain time).
void BM_SpaceToDepthSegment(benchmark::State& state) {
  const ir::Graph g = space_to_depth_segment();
  const ir::Tensor x = random_tensor<float>({1, 3, 224, 224});
  RunBuffers buffers;
  RunOptions options;
  options.buffers = &buffers;
  TensorMap outputs;
  for (auto _ : state) run_graph(g, TensorRefs{{"x", &x}}, options, outputs);
  // Each op's time: the gaps between after_node calls, over as many runs.
  std::map<std::string, double> seconds;
  RunBuffers timed_buffers;
  RunOptions timed;
  timed.buffers = &timed_buffers;
  auto t = std::chrono::steady_clock::now();
  timed.after_node = [&](const ir::Node& n, const TensorMap&) {
    const auto now = std::chrono::steady_clock::now();
    seconds[n.name] += std::chrono::duration<double>(now - t).count();
    t = now;
  };
  constexpr int kTimedRuns = 200;
  for (int i = 0; i < kTimedRuns; ++i) {
    t = std::chrono::steady_clock::now();
    run_graph(g, TensorRefs{{"x", &x}}, timed, outputs);
  }
  for (const auto& [name, s] : seconds) state.counters[name + "_us"] = 1e6 * s / kTimedRuns;
}
BENCHMARK(BM_SpaceToDepthSegment)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace npukit::ref
