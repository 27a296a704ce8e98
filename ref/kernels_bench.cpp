// Speed of the reference kernels on resnet18-sized layers (plain loops: these numbers say how long
// `npukit compare` and calibration spend in ref/, not how fast a good CPU kernel could be).
#include <benchmark/benchmark.h>

#include <random>

#include "ir/tensor_util.h"
#include "ref/executor.h"
#include "ref/gati_kernels.h"

namespace npukit::ref {
namespace {

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

// 3x3 conv, C -> C channels on an HxH image, stride 1, pad 1 (resnet18 layer1..layer4 shapes).
void BM_GatiConv3x3(benchmark::State& state) {
  const std::int64_t c = state.range(0), h = state.range(1);
  auto x = random_tensor<std::int8_t>({1, c, h, h});
  auto w = random_tensor<std::int8_t>({c, c, 3, 3});
  gati::ConvParams p;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
  p.tail.quant_scale = 3;
  p.tail.quant_shift = 12;
  p.tail.act = gati::Act::kRelu;
  for (auto _ : state) benchmark::DoNotOptimize(gati::conv(x, w, nullptr, nullptr, p));
  state.counters["MAC/s"] = benchmark::Counter(static_cast<double>(c * c * 9 * h * h),
                                               benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GatiConv3x3)
    ->Args({64, 56})
    ->Args({128, 28})
    ->Args({256, 14})
    ->Args({512, 7})
    ->Unit(benchmark::kMillisecond);

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

}  // namespace
}  // namespace npukit::ref
