// evaluate() and compare() on the bundled digits model. The expected classes come from
// onnxruntime's int8 logits committed with the fixture (an independent implementation); the
// comparison's reference is the reference executor, a second implementation of every layer.
#include "analysis/compare.h"
#include "analysis/evaluate.h"
#include "common/error.h"
#include "compiler/compiler.h"
#include "ir/tensor_util.h"
#include "onnx/onnx_io.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace npukit::analysis {
namespace {

const std::string kDigits = std::string(NPUKIT_SOURCE_DIR) + "/fixtures/digits/";

ir::Graph int8_model() { return onnxio::load_onnx(kDigits + "lenet_digits.int8.onnx"); }

// The digits model compiled and in a session, with its test images and labels.
struct Digits {
  compiler::CompileResult compiled = compiler::compile(int8_model(), {});
  runtime::Session session{compiled.artifact()};
  ir::Tensor x = onnxio::load_tensor_file(kDigits + "X_test.npy");
  std::vector<std::int64_t> labels =
      labels_of(onnxio::load_tensor_file(kDigits + "y_test.npy"), "y_test");
};

// The first n images of X_test as one batch tensor.
ir::Tensor first_images(std::int64_t n) {
  ir::Tensor x = onnxio::load_tensor_file(kDigits + "X_test.npy");
  ir::Tensor out;
  for (std::int64_t i = 0; i < n; ++i) runtime::append_image(out, runtime::image_of(x, i));
  return out;
}

TEST(Evaluate, PredictionsAreOnnxruntimesClasses) {
  const auto compiled = compiler::compile(int8_model(), {});
  runtime::Session session(compiled.artifact());
  const ir::Tensor x = onnxio::load_tensor_file(kDigits + "X_test.npy");
  const auto labels = labels_of(onnxio::load_tensor_file(kDigits + "y_test.npy"), "y_test");
  const std::vector<float> ort =
      ir::to_float_vector(onnxio::load_tensor_file(kDigits + "ort_int8_logits.npy"));  // [540, 10]
  EvalOptions o;
  o.limit = 40;
  std::int64_t calls = 0;
  o.progress = [&](std::int64_t done, std::int64_t total, std::int64_t) {
    ++calls;
    EXPECT_EQ(total, 40);
    EXPECT_EQ(done, calls);
  };
  const EvalResult r = evaluate(session, x, labels, o);
  EXPECT_EQ(r.images, 40);
  EXPECT_EQ(calls, 40);
  ASSERT_EQ(r.predictions.size(), 40u);
  std::int64_t correct = 0;
  for (std::size_t i = 0; i < 40; ++i) {
    const auto row = ort.begin() + static_cast<std::ptrdiff_t>(10 * i);
    EXPECT_EQ(r.predictions[i], std::max_element(row, row + 10) - row) << "image " << i;
    correct += r.predictions[i] == labels[i];
  }
  EXPECT_EQ(r.int8_correct, correct);
  EXPECT_GT(r.device_cycles, 0u);
  EXPECT_FALSE(r.has_float);
  ASSERT_FALSE(r.segments.empty());
}

TEST(Evaluate, FloatModelBeside) {
  const auto compiled = compiler::compile(int8_model(), {});
  runtime::Session session(compiled.artifact());
  const ir::Graph float_model = onnxio::load_onnx(kDigits + "lenet_digits.onnx");
  const auto labels = labels_of(onnxio::load_tensor_file(kDigits + "y_test.npy"), "y_test");
  EvalOptions o;
  o.limit = 10;
  o.float_model = &float_model;
  const EvalResult r =
      evaluate(session, onnxio::load_tensor_file(kDigits + "X_test.npy"), labels, o);
  EXPECT_TRUE(r.has_float);
  EXPECT_EQ(r.images, 10);
  EXPECT_GE(r.float_correct, 8);
  EXPECT_GE(r.agree, 8);
}

TEST(Evaluate, BadLabelsNameTheProblem) {
  const auto compiled = compiler::compile(int8_model(), {});
  runtime::Session session(compiled.artifact());
  const ir::Tensor x = first_images(3);
  try {
    evaluate(session, x, {1, 2}, {}, "X.npy", "Y.npy");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Y.npy has 2 labels, X.npy has 3 images"),
              std::string::npos)
        << e.what();
  }
  try {
    evaluate(session, x, {1, 2, 10}, {}, "X.npy", "Y.npy");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 10 of image 2 is out of range"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(labels_of(ir::make_tensor(ir::Shape{2}, std::vector<std::int64_t>{0, -1}, "y"), "y"),
               Error);
}

TEST(Evaluate, ShardRangesCoverEveryImageOnce) {
  for (std::int64_t images : {0, 1, 5, 540})
    for (int count : {1, 2, 3, 7}) {
      std::int64_t next = 0;
      for (int i = 0; i < count; ++i) {
        const auto [begin, end] = shard_range(images, i, count);
        EXPECT_EQ(begin, next) << images << " " << i << "/" << count;
        EXPECT_LE(end - begin, images / count + 1);
        EXPECT_GE(end - begin, images / count);
        next = end;
      }
      EXPECT_EQ(next, images);
    }
  EXPECT_THROW(shard_range(5, 2, 2), Error);
  EXPECT_THROW(shard_range(5, 0, 0), Error);
}

// What `mpirun -n N npukit eval` does without MPI: every shard evaluated on its own (one with no
// image at all), sent through encode/decode, merged; the result is the single run's, and the
// predictions are onnxruntime's classes.
TEST(Evaluate, MergedShardsAreTheSingleRun) {
  const auto compiled = compiler::compile(int8_model(), {});
  runtime::Session session(compiled.artifact());
  const ir::Graph float_model = onnxio::load_onnx(kDigits + "lenet_digits.onnx");
  const ir::Tensor x = onnxio::load_tensor_file(kDigits + "X_test.npy");
  const auto labels = labels_of(onnxio::load_tensor_file(kDigits + "y_test.npy"), "y_test");
  const std::vector<float> ort =
      ir::to_float_vector(onnxio::load_tensor_file(kDigits + "ort_int8_logits.npy"));
  EvalOptions o;
  o.limit = 3;
  o.float_model = &float_model;
  const EvalResult one = evaluate(session, x, labels, o);
  std::vector<EvalResult> shards;
  for (int i = 0; i < 4; ++i) {  // 3 images over 4 shards: shard 0 gets none
    o.shard_index = i;
    o.shard_count = 4;
    shards.push_back(decode_eval_result(encode_eval_result(evaluate(session, x, labels, o)),
                                        "shard " + std::to_string(i)));
  }
  EXPECT_EQ(shards[0].images, 0);
  const EvalResult all = merge_shards(shards);
  EXPECT_EQ(all.images, 3);
  EXPECT_EQ(all.predictions, one.predictions);
  for (std::size_t i = 0; i < 3; ++i) {
    const auto row = ort.begin() + static_cast<std::ptrdiff_t>(10 * i);
    EXPECT_EQ(all.predictions[i], std::max_element(row, row + 10) - row) << "image " << i;
  }
  EXPECT_EQ(all.int8_correct, one.int8_correct);
  EXPECT_EQ(all.float_correct, one.float_correct);
  EXPECT_EQ(all.agree, one.agree);
  EXPECT_TRUE(all.has_float);
  EXPECT_EQ(all.device_cycles, one.device_cycles);
  ASSERT_EQ(all.segments.size(), one.segments.size());
  for (std::size_t i = 0; i < one.segments.size(); ++i) {
    EXPECT_EQ(all.segments[i].cycles, one.segments[i].cycles);
    EXPECT_EQ(all.segments[i].bytes_to_device, one.segments[i].bytes_to_device);
    EXPECT_EQ(all.segments[i].bytes_from_device, one.segments[i].bytes_from_device);
  }
  ASSERT_EQ(all.layers.size(), one.layers.size());
  for (std::size_t i = 0; i < one.layers.size(); ++i) {
    EXPECT_EQ(all.layers[i].name, one.layers[i].name);
    EXPECT_EQ(all.layers[i].cycles, one.layers[i].cycles);
  }
  o.shard_index = 4;
  EXPECT_THROW(evaluate(session, x, labels, o), Error);
  EXPECT_THROW(decode_eval_result("{\"images\": 1}", "rank 1"), Error);
}

// `takers` threads, each with its own Session, evaluating from `queue` (npukit eval's workers):
// run(w, session, options) with options.queue set; returns each one's result.
template <typename Run>
std::vector<EvalResult> queue_takers(Digits& d, ImageQueue& queue, int takers, Run&& run) {
  std::vector<EvalResult> parts(static_cast<std::size_t>(takers));
  {
    std::vector<std::jthread> workers;
    for (int w = 0; w < takers; ++w)
      workers.emplace_back([&, w] {
        runtime::Session s(d.compiled.artifact());
        EvalOptions q;
        q.queue = &queue;
        parts[static_cast<std::size_t>(w)] = run(w, s, q);
      });
  }
  return parts;
}

// Workers taking images from one queue (npukit eval's threads): whichever images each takes,
// the merge is the single run's result, predictions in image order; a queue past the data fails.
TEST(Evaluate, QueueTakersMergeToTheSingleRun) {
  Digits d;
  const ir::Tensor& x = d.x;
  const std::vector<std::int64_t>& labels = d.labels;
  EvalOptions o;
  o.limit = 9;
  const EvalResult one = evaluate(d.session, x, labels, o);
  ImageQueue queue(0, 9, 3);
  const std::vector<EvalResult> parts = queue_takers(
      d, queue, 3,
      [&](int, runtime::Session& s, const EvalOptions& q) { return evaluate(s, x, labels, q); });
  std::int64_t taken = 0;
  for (const EvalResult& p : parts) {
    taken += p.images;
    EXPECT_TRUE(std::is_sorted(p.image_indices.begin(), p.image_indices.end()));
  }
  EXPECT_EQ(taken, 9);
  const EvalResult all = merge_shards(parts);
  EXPECT_EQ(all.images, 9);
  EXPECT_EQ(all.predictions, one.predictions);
  EXPECT_EQ(all.int8_correct, one.int8_correct);
  EXPECT_EQ(all.device_cycles, one.device_cycles);
  ASSERT_EQ(all.layers.size(), one.layers.size());
  for (std::size_t i = 0; i < one.layers.size(); ++i)
    EXPECT_EQ(all.layers[i].cycles, one.layers[i].cycles);
  // Each layer's model time: the takers' warm images' sum over their count.
  ASSERT_EQ(all.warm_layer_seconds.size(), one.layers.size());
  for (std::size_t i = 0; i < one.layers.size(); ++i) {
    double sum = 0;
    for (const EvalResult& p : parts)
      if (!p.warm_layer_seconds.empty()) sum += p.warm_layer_seconds[i];
    EXPECT_DOUBLE_EQ(all.warm_layer_seconds[i], sum) << i;
    EXPECT_GT(all.layers[i].model_seconds, 0.0) << i;
    EXPECT_DOUBLE_EQ(all.layers[i].model_seconds, sum / static_cast<double>(all.warm_images)) << i;
  }
  // The same through the bytes MPI ranks send each other.
  std::vector<EvalResult> sent;
  for (const EvalResult& p : parts)
    sent.push_back(decode_eval_result(encode_eval_result(p), "taker"));
  const EvalResult received = merge_shards(sent);
  EXPECT_EQ(received.warm_layer_seconds, all.warm_layer_seconds);
  for (std::size_t i = 0; i < one.layers.size(); ++i)
    EXPECT_EQ(received.layers[i].model_seconds, all.layers[i].model_seconds) << i;
  // Interleaved takers, as two cores would leave them: predictions back in image order, the
  // layers of the one that ran the last image.
  EvalResult a, b;
  a.images = 3, a.image_indices = {0, 2, 5}, a.predictions = {10, 12, 15};
  b.images = 3, b.image_indices = {1, 3, 4}, b.predictions = {11, 13, 14};
  a.layers = {{"a", "CONV", 1}}, b.layers = {{"b", "CONV", 2}};
  const EvalResult ab = merge_shards({b, a});
  EXPECT_EQ(ab.predictions, (std::vector<std::int64_t>{10, 11, 12, 13, 14, 15}));
  ASSERT_EQ(ab.layers.size(), 1u);
  EXPECT_EQ(ab.layers[0].name, "a");
  ImageQueue past(0, x.shape[0] + 1, 1);
  EvalOptions q;
  q.queue = &past;
  EXPECT_THROW(evaluate(d.session, x, labels, q), Error);
}

// The takers of one queue start their warm timing together: one that is slow to finish its first
// image (here its progress call sleeps 100 ms) holds the others after their first, so no taker
// times images while another is still starting (without the wait the other would have done all
// the rest by then). A taker that fails before its first image (labels of another length) leaves
// the start, so the others do not wait for it.
TEST(Evaluate, QueueTakersStartTheirWarmTimingTogether) {
  Digits d;
  const ir::Tensor& x = d.x;
  const std::vector<std::int64_t>& labels = d.labels;
  ImageQueue queue(0, 10, 2);
  std::atomic<std::int64_t> done_by_first{0}, seen_when_second_started{-1};
  const std::vector<EvalResult> parts =
      queue_takers(d, queue, 2, [&](int w, runtime::Session& s, EvalOptions q) {
        if (w == 0)
          q.progress = [&](std::int64_t done, std::int64_t, std::int64_t) { done_by_first = done; };
        else
          q.progress = [&](std::int64_t done, std::int64_t, std::int64_t) {
            if (done != 1) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            seen_when_second_started = done_by_first.load();
          };
        return evaluate(s, x, labels, q);
      });
  EXPECT_EQ(parts[0].images + parts[1].images, 10);
  EXPECT_EQ(seen_when_second_started.load(), 1);
  EXPECT_EQ(parts[0].warm_images + parts[1].warm_images, 8);
  ImageQueue failing(0, 10, 2);
  const std::vector<std::int64_t> wrong(labels.begin(), labels.begin() + 3);
  const std::vector<EvalResult> left =
      queue_takers(d, failing, 2, [&](int w, runtime::Session& s, const EvalOptions& q) {
        if (w == 1) {
          EXPECT_THROW(evaluate(s, x, wrong, q), Error);
          return EvalResult{};
        }
        return evaluate(s, x, labels, q);
      });
  EXPECT_EQ(left[0].images, 10);
}

// The warm timing leaves out each shard's first image: 5 images in shards of 2 and 3 have 1 + 2
// warm ones, timed within the loop, and the figures survive the MPI encoding.
TEST(Evaluate, WarmTimingLeavesOutEachShardsFirstImage) {
  Digits d;
  auto eval = [&](const EvalOptions& o) { return evaluate(d.session, d.x, d.labels, o); };
  EvalOptions o;
  o.limit = 1;
  EXPECT_EQ(eval(o).warm_images, 0);
  EXPECT_EQ(eval(o).warm_seconds_per_image(), 0);
  o.limit = 5;
  o.shard_count = 2;
  std::vector<EvalResult> shards;
  for (int i = 0; i < 2; ++i) {
    o.shard_index = i;
    const EvalResult one = eval(o);
    EXPECT_EQ(one.warm_images, one.images - 1);
    EXPECT_GT(one.warm_seconds, 0);
    EXPECT_LT(one.warm_seconds, one.seconds);
    EXPECT_GT(one.warm_cpu_seconds, 0);
    shards.push_back(decode_eval_result(encode_eval_result(one), "shard"));
    EXPECT_EQ(shards.back().warm_seconds, one.warm_seconds);
    EXPECT_EQ(shards.back().warm_cpu_seconds, one.warm_cpu_seconds);
  }
  const EvalResult all = merge_shards(shards);
  EXPECT_EQ(all.warm_images, 3);
  EXPECT_EQ(all.warm_seconds, std::max(shards[0].warm_seconds, shards[1].warm_seconds));
  EXPECT_EQ(all.warm_cpu_seconds, shards[0].warm_cpu_seconds + shards[1].warm_cpu_seconds);
}

TEST(Compare, EveryDigitsLayerBitExact) {
  const ir::Graph model = int8_model();
  const auto options = dispatch_every_layer(model, {});
  EXPECT_FALSE(options.dispatch.empty());
  const auto compiled = compiler::compile(model, options);
  runtime::Session session(compiled.artifact());
  ref::TensorMap feeds;
  feeds[session.manifest().inputs[0].name] = first_images(2);
  const CompareResult r = compare(model, options, session, feeds);
  EXPECT_EQ(r.batch, 2);
  EXPECT_EQ(r.sa_arch, "9,8,8");
  ASSERT_FALSE(r.layers.empty());
  EXPECT_EQ(r.alone.size(), r.layers.size());
  EXPECT_EQ(r.layers_compared(), static_cast<std::int64_t>(r.layers.size()));
  EXPECT_GT(r.layers_compared_alone(), 0);
  for (const auto& d : r.layers) {
    EXPECT_TRUE(d.compared) << d.layer << ": " << d.note;
    EXPECT_EQ(d.differ, 0) << d.layer;
    EXPECT_EQ(d.shape.empty() ? 0 : d.shape[0], 2) << d.layer;
  }
  EXPECT_TRUE(r.pass());
  EXPECT_EQ(r.first_failing(), nullptr);
  const auto j = r.to_json("digits");
  EXPECT_EQ(j["pass"], true);
  EXPECT_EQ(j["layers"].size(), r.layers.size());
  EXPECT_TRUE(j["first_failing_layer"].is_null());
}

TEST(Compare, ACompiledProgramsOwnOptions) {
  // A program compiled elsewhere (npukit compare DIR --onnx MODEL) is compared with the options
  // its manifest implies: the same array and the outputs it dispatches.
  const ir::Graph model = int8_model();
  const auto compiled = compiler::compile(model, dispatch_every_layer(model, {}));
  const auto options = options_of(compiled.manifest);
  EXPECT_EQ(options.arch.str(), "9,8,8");
  EXPECT_EQ(options.dispatch.size(), compiled.manifest.device_outputs().size());
  runtime::Session session(compiled.artifact());
  ref::TensorMap feeds;
  feeds[session.manifest().inputs[0].name] = first_images(1);
  const CompareResult r = compare(model, options, session, feeds);
  EXPECT_TRUE(r.pass());
  EXPECT_EQ(r.layers_compared(), static_cast<std::int64_t>(r.layers.size()));
}

TEST(Compare, ACompiledProgramsWeightScalesComeFromItsManifest) {
  // perchannel_net16's convs run per channel under the default --weight-scales auto; compiled
  // per tensor, the directory's manifest says so, and the reference lowers the model the same
  // way: every dispatched layer equal. With auto, the per-channel reference would differ.
  const ir::Graph model =
      onnxio::load_onnx(std::string(NPUKIT_SOURCE_DIR) + "/fixtures/qop/perchannel_net16.onnx");
  compiler::CompileOptions per_tensor;
  per_tensor.weight_scales = compiler::WeightScales::kPerTensor;
  // As `npukit compile` writes it: only the model's output dispatched (a dispatched conv output
  // would stay per tensor under auto too).
  const auto compiled = compiler::compile(model, per_tensor);
  EXPECT_EQ(compiled.manifest.weight_scales, "per-tensor");
  const auto options = options_of(compiled.manifest);
  EXPECT_EQ(options.weight_scales, compiler::WeightScales::kPerTensor);
  runtime::Session session(compiled.artifact());
  ref::TensorMap feeds;
  feeds["x"] = onnxio::tensor_from_npy(
      read_npy(std::string(NPUKIT_SOURCE_DIR) + "/fixtures/qop/perchannel_net16.input_0.npy"), "x");
  const CompareResult r = compare(model, options, session, feeds);
  EXPECT_TRUE(r.pass());
  EXPECT_FALSE(r.outputs.empty());
  // The reference under auto lowers differently (one conv per channel group): not this program
  // (a mismatch, or a dispatched name its lowering does not have).
  compiler::CompileOptions wrong = options;
  wrong.weight_scales = compiler::WeightScales::kAuto;
  bool wrong_passes = false;
  try {
    wrong_passes = compare(model, wrong, session, feeds).pass();
  } catch (const Error&) {
  }
  EXPECT_FALSE(wrong_passes);
}

}  // namespace
}  // namespace npukit::analysis
