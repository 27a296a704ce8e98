#include "ref/executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/test_support/alloc_counter.h"
#include "ir/tensor_util.h"
#include "ref/float_conv.h"
#include "ref/space_to_depth_segment.h"

#include <cmath>
#include <cstdlib>

namespace npukit::ref {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ir::Node node(std::string name, std::string op, std::vector<std::string> in,
              std::vector<std::string> out, std::string domain = "") {
  ir::Node n;
  n.name = std::move(name);
  n.op_type = std::move(op);
  n.domain = std::move(domain);
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  return n;
}

// x [1,1,2,2] -> Conv(1x1, w = 2, b = 1) -> Relu -> Flatten -> y
ir::Graph small_float_graph() {
  ir::Graph g;
  g.name = "small";
  g.inputs = {"x"};
  g.outputs = {"y"};
  g.tensors["x"] = ir::Tensor{"x", ir::DType::kFloat32, {1, 1, 2, 2}, {}};
  g.tensors["w"] = ir::make_tensor<float>({1, 1, 1, 1}, {2.f}, "w");
  g.tensors["b"] = ir::make_tensor<float>({1}, {1.f}, "b");
  g.nodes.push_back(node("conv", "Conv", {"x", "w", "b"}, {"c"}));
  g.nodes.push_back(node("relu", "Relu", {"c"}, {"r"}));
  g.nodes.push_back(node("flat", "Flatten", {"r"}, {"y"}));
  return g;
}

TEST(Executor, RunsNodesInOrderAndReportsEachNode) {
  ir::Graph g = small_float_graph();
  std::vector<std::string> seen;
  RunOptions options;
  options.after_node = [&](const ir::Node& n, const TensorMap& values) {
    seen.push_back(n.name);
    EXPECT_TRUE(values.count(n.outputs[0]));
  };
  auto out =
      run_graph(g, {{"x", ir::make_tensor<float>({1, 1, 2, 2}, {-3, -0.5f, 0, 4})}}, options);
  ASSERT_TRUE(out.count("y"));
  EXPECT_EQ(out["y"].shape, (ir::Shape{1, 4}));
  // 2x + 1, then ReLU: -5 -> 0, 0 -> 0, 1, 9
  EXPECT_THAT(ir::to_vector<float>(out["y"]), ElementsAre(0.f, 0.f, 1.f, 9.f));
  EXPECT_THAT(seen, ElementsAre("conv", "relu", "flat"));
}

// release_dead_values: the same outputs, bit for bit, as the run that keeps every value, on a
// graph whose Relu and Adds may write over dead inputs: x -> conv -> c -> Relu -> r;
// c2 = conv(r); s = r + c2; t = s + x; u = t - 1.5 (a broadcast: never over an input);
// y = u * r. r, read later, is never written over; y, the graph output, is kept.
TEST(Executor, ReleasingDeadValuesGivesTheSameResultsAndReusesStorage) {
  ir::Graph g = small_float_graph();
  g.outputs = {"y"};
  g.tensors["one"] = ir::make_tensor<float>({1, 1, 1, 1}, {1.5f}, "one");
  g.nodes.pop_back();  // Flatten
  g.nodes.push_back(node("conv2", "Conv", {"r", "w", "b"}, {"c2"}));
  g.nodes.push_back(node("add", "Add", {"r", "c2"}, {"s"}));
  g.nodes.push_back(node("add2", "Add", {"s", "x"}, {"t"}));
  g.nodes.push_back(node("sub", "Sub", {"t", "one"}, {"u"}));
  g.nodes.push_back(node("mul", "Mul", {"u", "r"}, {"y"}));
  const TensorMap in{{"x", ir::make_tensor<float>({1, 1, 2, 2}, {-3, -0.5f, 0, 4})}};
  // c = 2x+1 = -5 0 1 9; r = 0 0 1 9; c2 = 1 1 3 19; s = 1 1 4 28; t = -2 .5 4 32;
  // u = -3.5 -1 2.5 30.5; y = u * r = -0 -0 2.5 274.5
  const TensorMap plain = run_graph(g, in);
  EXPECT_THAT(ir::to_vector<float>(plain.at("y")), ElementsAre(-0.f, -0.f, 2.5f, 274.5f));
  std::map<std::string, const std::uint8_t*> storage;
  RunOptions options;
  options.release_dead_values = true;
  std::set<std::string> at_sub;
  options.after_node = [&](const ir::Node& n, const TensorMap& values) {
    storage[n.outputs[0]] = values.at(n.outputs[0]).data.data();
    if (n.name == "sub")
      for (const auto& [name, t] : values) at_sub.insert(name);
  };
  const TensorMap released = run_graph(g, in, options);
  EXPECT_EQ(released.at("y").data, plain.at("y").data);
  EXPECT_EQ(storage.at("r"), storage.at("c"));   // Relu over its dead input
  EXPECT_EQ(storage.at("s"), storage.at("c2"));  // Add over c2, not over r (read later)
  EXPECT_NE(storage.at("u"), storage.at("t"));   // broadcast
  EXPECT_EQ(storage.at("y"), storage.at("u"));   // both Mul inputs are dead: over the first
  // Seen right after sub: c, c2, s and x are gone after their last readers (t, sub's input,
  // goes after this call).
  EXPECT_EQ(at_sub, (std::set<std::string>{"r", "t", "u"}));
}

// A conv weight cache keeps only the graph's constant weights: weights fed as a graph input,
// changed in place between runs (same address), must be read afresh every run.
TEST(Executor, ConvWeightCacheKeepsOnlyConstantWeights) {
  ir::Graph g;
  g.name = "conv_w_input";
  g.inputs = {"x", "w"};
  g.outputs = {"y", "z"};
  g.tensors["x"] = ir::Tensor{"x", ir::DType::kFloat32, {1, 8, 6, 6}, {}};
  g.tensors["w"] = ir::Tensor{"w", ir::DType::kFloat32, {16, 8, 3, 3}, {}};
  std::vector<float> fixed(16 * 8 * 9);
  for (std::size_t i = 0; i < fixed.size(); ++i) fixed[i] = static_cast<float>(i % 7) - 3.f;
  g.tensors["k"] = ir::make_tensor<float>({16, 8, 3, 3}, fixed, "k");
  g.nodes.push_back(node("conv_input_w", "Conv", {"x", "w"}, {"y"}));
  g.nodes.push_back(node("conv_constant_w", "Conv", {"x", "k"}, {"z"}));
  std::vector<float> x(8 * 36), w(16 * 8 * 9);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 5) - 2.f;
  TensorMap feeds{{"x", ir::make_tensor<float>({1, 8, 6, 6}, x, "x")},
                  {"w", ir::make_tensor<float>({16, 8, 3, 3}, w, "w")}};
  ConvWeightCache cache;
  RunOptions cached;
  cached.conv_weights = &cache;
  for (int round = 0; round < 3; ++round) {
    float* wp = feeds.at("w").as_mutable<float>();
    for (std::size_t i = 0; i < w.size(); ++i) wp[i] = static_cast<float>((i + round) % 3) - 1.f;
    const TensorMap plain = run_graph(g, feeds);
    const TensorMap with_cache = run_graph(g, feeds, cached);
    EXPECT_EQ(ir::to_vector<float>(with_cache.at("y")), ir::to_vector<float>(plain.at("y")))
        << "round " << round;
    EXPECT_EQ(ir::to_vector<float>(with_cache.at("z")), ir::to_vector<float>(plain.at("z")))
        << "round " << round;
  }
}

TEST(Executor, UnsupportedOpNamesNodeAndOp) {
  ir::Graph g = small_float_graph();
  g.nodes[1].op_type = "LSTM";
  try {
    run_graph(g, {{"x", ir::make_tensor<float>({1, 1, 2, 2}, {1, 2, 3, 4})}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("node 'relu' (LSTM)"));
    EXPECT_THAT(e.what(), HasSubstr("not supported"));
  }
}

TEST(Executor, BadAttributeNamesNode) {
  ir::Graph g = small_float_graph();
  g.nodes[0].attributes["auto_pad"] = std::string("SAME_WEIRD");
  try {
    run_graph(g, {{"x", ir::make_tensor<float>({1, 1, 2, 2}, {1, 2, 3, 4})}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("node 'conv' (Conv)"));
    EXPECT_THAT(e.what(), HasSubstr("SAME_WEIRD"));
  }
}

TEST(Executor, MissingAndMisshapenInputsAreErrors) {
  ir::Graph g = small_float_graph();
  EXPECT_THROW(run_graph(g, {}), Error);
  try {
    run_graph(g, {{"x", ir::make_tensor<float>({1, 1, 3, 2}, {1, 2, 3, 4, 5, 6})}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("input 'x' has shape [1, 1, 3, 2]"));
  }
  try {
    run_graph(g, {{"x", ir::make_tensor<std::int8_t>({1, 1, 2, 2}, {1, 2, 3, 4})}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("must be float32"));
  }
}

TEST(Executor, UnknownValueIsAnError) {
  ir::Graph g = small_float_graph();
  g.nodes[1].inputs = {"nowhere"};
  EXPECT_THAT(
      [&] {
        run_graph(g, {{"x", ir::make_tensor<float>({1, 1, 2, 2}, {1, 2, 3, 4})}});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("input 'nowhere' has no value")));
}

TEST(Executor, RunsGatiOps) {
  // GatiConv 1x1 with quantizer (x*3*w, scale 1 shift 1) then GatiPool max 2x2.
  ir::Graph g;
  g.inputs = {"x"};
  g.outputs = {"y"};
  g.tensors["x"] = ir::Tensor{"x", ir::DType::kInt8, {1, 1, 2, 2}, {}};
  g.tensors["w"] = ir::make_tensor<std::int8_t>({1, 1, 1, 1}, {3}, "w");
  ir::Node conv = node("c", "GatiConv", {"x", "w"}, {"t"}, "npukit.gati");
  conv.attributes["quant_scale"] = std::int64_t{1};
  conv.attributes["quant_shift"] = std::int64_t{1};
  ir::Node pool = node("p", "GatiPool", {"t"}, {"y"}, "npukit.gati");
  pool.attributes["mode"] = std::string("max");
  pool.attributes["kernel_shape"] = std::vector<std::int64_t>{2, 2};
  g.nodes = {conv, pool};
  auto out = run_graph(g, {{"x", ir::make_tensor<std::int8_t>({1, 1, 2, 2}, {-5, 1, 3, -100})}});
  // 3x: -15, 3, 9, -300; (v + 1) >> 1: -7, 2, 5, -150 -> clamp -128; max = 5
  EXPECT_THAT(ir::to_vector<std::int8_t>(out["y"]), ElementsAre(5));
  EXPECT_EQ(out["y"].shape, (ir::Shape{1, 1, 1, 1}));
}

TEST(Executor, SupportedOpQuery) {
  EXPECT_TRUE(is_supported("", "Conv"));
  EXPECT_TRUE(is_supported("ai.onnx", "QLinearConv"));
  EXPECT_TRUE(is_supported("com.microsoft", "QGemm"));
  EXPECT_TRUE(is_supported("npukit.gati", "GatiEltwise"));
  EXPECT_FALSE(is_supported("", "LSTM"));
}

// The host segments of a split program: x -> QuantizeLinear -> q -> DequantizeLinear -> y.
ir::Graph quantize_dequantize_graph(std::int64_t n) {
  ir::Graph g;
  g.name = "qdq";
  g.inputs = {"x"};
  g.outputs = {"y"};
  g.tensors["x"] = ir::Tensor{"x", ir::DType::kFloat32, {1, n}, {}};
  g.tensors["s"] = ir::make_scalar<float>(0.05f, "s");
  g.tensors["z"] = ir::make_scalar<std::int8_t>(3, "z");
  g.nodes.push_back(node("quant", "QuantizeLinear", {"x", "s", "z"}, {"q"}));
  g.nodes.push_back(node("dequant", "DequantizeLinear", {"q", "s", "z"}, {"y"}));
  return g;
}

// A reshape between them (the shape of a host segment's space-to-depth) is made in kept
// storage too: no run after the first allocates tensor storage, and the values pass unchanged.
TEST(Executor, RunBuffersKeepAReshapesStorage) {
  constexpr std::int64_t n = 1 << 15;
  ir::Graph g = quantize_dequantize_graph(n);
  g.tensors["shape"] = ir::make_tensor<std::int64_t>({2}, {n / 64, 64}, "shape");
  g.nodes.insert(g.nodes.begin() + 1, node("reshape", "Reshape", {"q", "shape"}, {"q2"}));
  g.nodes.back().inputs[0] = "q2";
  RunBuffers buffers;
  RunOptions options;
  options.buffers = &buffers;
  TensorMap outputs;
  std::vector<float> xs(n);
  for (std::int64_t i = 0; i < n; ++i) xs[i] = std::cos(0.11f * i) * 7.f;
  const ir::Tensor x = ir::make_tensor<float>({1, n}, xs, "x");
  for (int run = 0; run < 3; ++run) {
    const test_support::AllocationCount count = test_support::count_allocations(
        [&] {
          run_graph(g, TensorRefs{{"x", &x}}, options, outputs);
        },
        16u << 10);
    if (run > 0) EXPECT_EQ(count.big, 0u) << "run " << run;
    const ir::Tensor& y = outputs.at("y");
    EXPECT_EQ(y.shape, (ir::Shape{n / 64, 64}));
    for (std::int64_t i = 0; i < n; i += 331) {
      const float q = std::clamp(std::nearbyint(xs[i] / 0.05f) + 3.f, -128.f, 127.f);
      EXPECT_EQ(ir::to_vector<float>(y)[i], (q - 3.f) * 0.05f) << i;
    }
  }
}

// A resnet stem's host segment with kept buffers: its Transpose, Slices, Reshapes and
// QuantizeLinear write their outputs over the previous image's bytes (not zeroed first), and
// each image equals a run in fresh storage; no run after the first allocates tensor storage.
// (With one shape, a byte a kernel never writes stays 0 in both; the next test changes shapes.)
TEST(Executor, KeptStorageWrittenOverEqualsFreshStorage) {
  const ir::Graph g = space_to_depth_segment(0.02f);
  RunBuffers buffers;
  RunOptions options;
  options.buffers = &buffers;
  TensorMap outputs;
  for (int run = 0; run < 4; ++run) {
    std::vector<float> xs(3 * 224 * 224);
    for (std::size_t i = 0; i < xs.size(); ++i)
      xs[i] = run % 2 ? -1.f - static_cast<float>(i % 97) * 0.01f
                      : std::sin(0.013f * static_cast<float>(i) + static_cast<float>(run)) * 2.f;
    const ir::Tensor x = ir::make_tensor<float>({1, 3, 224, 224}, xs, "x");
    const test_support::AllocationCount count = test_support::count_allocations(
        [&] {
          run_graph(g, TensorRefs{{"x", &x}}, options, outputs);
        },
        16u << 10);
    if (run > 0) EXPECT_EQ(count.big, 0u) << "run " << run;
    const TensorMap fresh = run_graph(g, {{"x", x}});
    for (const char* name : {"in0", "in8"}) {
      EXPECT_EQ(outputs.at(name).shape, fresh.at(name).shape) << name;
      EXPECT_EQ(outputs.at(name).data, fresh.at(name).data) << name << " run " << run;
    }
  }
}

// Kept storage across runs whose shapes change: a Transpose (space to depth) and a channel
// Slice of its result, on inputs of 4 sizes in turn, equal fresh runs. Kept bytes are not
// zeroed, so an element a kernel left unwritten would show the previous run's values there.
TEST(Executor, KeptStorageOfAnotherShapeIsAllWrittenOver) {
  ir::Graph g;
  g.inputs = {"x"};
  g.outputs = {"y"};
  g.tensors["x"] = ir::Tensor{"x", ir::DType::kInt8, {}, {}};
  g.tensors["starts"] = ir::make_tensor<std::int64_t>({1}, {1}, "starts");
  g.tensors["ends"] = ir::make_tensor<std::int64_t>({1}, {3}, "ends");
  g.tensors["axes"] = ir::make_tensor<std::int64_t>({1}, {3}, "axes");
  g.nodes.push_back(node("s2d", "Transpose", {"x"}, {"t"}));
  g.nodes.back().attributes["perm"] = std::vector<std::int64_t>{0, 3, 5, 1, 2, 4};
  g.nodes.push_back(node("slice", "Slice", {"t", "starts", "ends", "axes"}, {"y"}));
  RunBuffers buffers;
  RunOptions options;
  options.buffers = &buffers;
  TensorMap outputs;
  for (const auto& [h, w] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{7, 21}, {3, 17}, {9, 33}, {2, 5}}) {
    const ir::Shape shape = {1, 3, h, 2, w, 2};
    std::vector<std::int8_t> xs(static_cast<std::size_t>(ir::element_count(shape)));
    for (std::size_t i = 0; i < xs.size(); ++i)
      xs[i] = static_cast<std::int8_t>((i * 29 + static_cast<std::size_t>(h)) % 255 - 127);
    const ir::Tensor x = ir::make_tensor<std::int8_t>(shape, xs, "x");
    run_graph(g, TensorRefs{{"x", &x}}, options, outputs);
    const TensorMap fresh = run_graph(g, {{"x", x}});
    EXPECT_EQ(outputs.at("y").shape, (ir::Shape{1, 2, 2, 2, h, w})) << "h " << h;
    EXPECT_EQ(outputs.at("y").data, fresh.at("y").data) << "h " << h;
  }
}

// RunBuffers: after the first run, repeated runs of one graph allocate no tensor storage, and
// compute what a run without them does (and what the ONNX formulas say, worked here).
TEST(Executor, RunBuffersAllocateNoTensorStorageAfterTheFirstRun) {
  constexpr std::int64_t n = 1 << 15;  // 128 KiB of float input, 32 KiB of int8
  const ir::Graph g = quantize_dequantize_graph(n);
  RunBuffers buffers;
  RunOptions options;
  options.buffers = &buffers;
  TensorMap outputs;
  const std::uint8_t* first_storage = nullptr;
  for (int run = 0; run < 5; ++run) {
    std::vector<float> xs(n);
    for (std::int64_t i = 0; i < n; ++i) xs[i] = std::sin(0.37f * i + run) * 9.f;
    const ir::Tensor x = ir::make_tensor<float>({1, n}, xs, "x");
    const TensorMap plain = run_graph(g, {{"x", x}});
    // Allocations of at least 16 KiB: tensor storage (the executor's bookkeeping, names and
    // maps, is far smaller).
    const test_support::AllocationCount count = test_support::count_allocations(
        [&] {
          run_graph(g, TensorRefs{{"x", &x}}, options, outputs);
        },
        16u << 10);
    if (run == 0) {
      EXPECT_GE(count.big, 2u);  // q and y, the first time
      first_storage = outputs.at("y").data.data();
    } else {
      EXPECT_EQ(count.big, 0u) << "run " << run;
      EXPECT_EQ(outputs.at("y").data.data(), first_storage);
    }
    const ir::Tensor& y = outputs.at("y");
    EXPECT_EQ(y.shape, (ir::Shape{1, n}));
    EXPECT_EQ(y.data, plain.at("y").data);
    for (std::int64_t i = 0; i < n; i += 997) {
      const float q = std::clamp(std::nearbyint(xs[i] / 0.05f) + 3.f, -128.f, 127.f);
      EXPECT_EQ(ir::to_vector<float>(y)[i], (q - 3.f) * 0.05f) << i;
    }
  }
  EXPECT_GE(buffers.kept_bytes(), static_cast<std::size_t>(n));  // q's storage
  // One RunBuffers serves one graph.
  const ir::Graph other = quantize_dequantize_graph(4);
  const ir::Tensor x4 = ir::make_tensor<float>({1, 4}, {1, 2, 3, 4}, "x");
  EXPECT_THAT(
      [&] {
        run_graph(other, TensorRefs{{"x", &x4}}, options, outputs);
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("use one per graph")));
}

}  // namespace
}  // namespace npukit::ref
