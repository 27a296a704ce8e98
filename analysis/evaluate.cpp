#include "analysis/evaluate.h"

#include "common/error.h"
#include "ir/tensor_util.h"
#include "ref/executor.h"
#include "ref/float_conv.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <limits>

#include <time.h>

namespace npukit::analysis {
namespace {

// CPU time of the calling thread, in seconds.
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Image n of x as float32, shaped like the model input, into `out`, whose storage is reused from
// image to image (a float32 data set is copied once, straight from x).
void image_as_input(const ir::Tensor& x, std::int64_t n, const ir::Shape& input_shape,
                    const std::string& name, const std::string& data_name, ir::Tensor& out) {
  ir::Shape shape = input_shape;
  if (!shape.empty()) shape[0] = 1;
  const std::int64_t count = ir::element_count(x.shape) / x.shape[0];
  if (ir::element_count(shape) != count)
    fail("{}: one image has {} values ({}), the model input '{}' takes {} ({})", data_name, count,
         ir::shape_string(x.shape), name, ir::element_count(shape), ir::shape_string(input_shape));
  out.name = name;
  out.dtype = ir::DType::kFloat32;
  out.shape = shape;
  const auto bytes = static_cast<std::size_t>(count) * sizeof(float);
  if (x.dtype == ir::DType::kFloat32) {
    const auto* first = x.data.data() + static_cast<std::size_t>(n) * bytes;
    out.data.assign(first, first + bytes);
  } else {
    // Only this image is converted: a shard (or thread) does not copy the whole data set.
    const std::vector<float> image = ir::to_float_vector(runtime::image_of(x, n));
    const auto* first = reinterpret_cast<const std::uint8_t*>(image.data());
    out.data.assign(first, first + bytes);
  }
}

std::int64_t argmax(const ir::Tensor& t) {
  const std::vector<float> v = ir::to_float_vector(t);
  if (v.empty()) fail("output '{}' is empty, no class to pick", t.name);
  return std::max_element(v.begin(), v.end()) - v.begin();
}

}  // namespace

std::vector<std::int64_t> labels_of(const ir::Tensor& y, const std::string& labels_name) {
  const std::vector<std::int64_t> labels = ir::to_int64_vector(y);
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (labels[i] < 0 || labels[i] > std::numeric_limits<std::int32_t>::max())
      fail("{}: label {} of image {} is not a class index (allowed 0..{})", labels_name, labels[i],
           i, std::numeric_limits<std::int32_t>::max());
  return labels;
}

void check_eval_data(const ir::Tensor& x, const std::vector<std::int64_t>& labels,
                     const std::string& data_name, const std::string& labels_name) {
  if (x.shape.empty() || x.shape[0] < 1) fail("{}: needs a batch axis 0", data_name);
  if (static_cast<std::int64_t>(labels.size()) != x.shape[0])
    fail("{} has {} labels, {} has {} images", labels_name, labels.size(), data_name, x.shape[0]);
}

void add_segment_stats(std::vector<runtime::SegmentStats>& total,
                       const std::vector<runtime::SegmentStats>& one) {
  if (total.empty()) {
    total = one;
    return;
  }
  for (std::size_t i = 0; i < one.size() && i < total.size(); ++i) {
    total[i].cycles += one[i].cycles;
    total[i].host_seconds += one[i].host_seconds;
    total[i].bytes_to_device += one[i].bytes_to_device;
    total[i].bytes_from_device += one[i].bytes_from_device;
  }
}

namespace {
// Each layer's model_seconds: its mean over the warm images.
void mean_layer_seconds(EvalResult& r) {
  if (r.warm_images == 0 || r.warm_layer_seconds.size() != r.layers.size()) return;
  for (std::size_t j = 0; j < r.layers.size(); ++j)
    r.layers[j].model_seconds = r.warm_layer_seconds[j] / static_cast<double>(r.warm_images);
}
}  // namespace

EvalResult evaluate(runtime::Session& session, const ir::Tensor& x,
                    const std::vector<std::int64_t>& labels, const EvalOptions& options,
                    const std::string& data_name, const std::string& labels_name) {
  // This taker's part in the queue's warm start, taken exactly once: after its first image, or
  // on the way out (an error, or no image) so the other takers do not wait for it.
  struct WarmStart {
    ImageQueue* queue;
    bool done = false;
    void warmed_up() {
      if (queue && !done) done = true, queue->warmed_up();
    }
    ~WarmStart() {
      if (queue && !done) queue->leave();
    }
  } warm_start{options.queue};
  check_eval_data(x, labels, data_name, labels_name);
  if (options.limit < 0) fail("limit {} is negative (0 evaluates every image)", options.limit);
  const auto& m = session.manifest();
  if (m.inputs.size() != 1 || m.outputs.empty())
    fail("evaluation needs a model with one input and a class-score output; '{}' has {} inputs",
         m.model, m.inputs.size());
  const auto& input = m.inputs[0];
  if (const std::int64_t classes = ir::element_count(m.outputs[0].shape); classes > 0)
    for (std::size_t i = 0; i < labels.size(); ++i)
      if (labels[i] >= classes)
        fail(
            "{}: label {} of image {} is out of range: output '{}' scores {} classes "
            "(labels 0..{})",
            labels_name, labels[i], i, m.outputs[0].name, classes, classes - 1);
  const ir::Graph* float_model = options.float_model;
  if (float_model && float_model->inputs.size() != 1)
    fail("the float model needs exactly one input, has {}", float_model->inputs.size());

  if (options.shard_count < 1 || options.shard_index < 0 ||
      options.shard_index >= options.shard_count)
    fail("shard {} of {} does not exist (shards are 0..count-1, count >= 1)", options.shard_index,
         options.shard_count);

  const std::int64_t all = options.limit > 0 ? std::min(x.shape[0], options.limit) : x.shape[0];
  // Plain variables, not a structured binding: take() below captures them (clang 14 cannot).
  const std::pair<std::int64_t, std::int64_t> range =
      shard_range(all, options.shard_index, options.shard_count);
  const std::int64_t begin = range.first, end = range.second;
  ImageQueue* queue = options.queue;
  if (queue && (queue->begin() < 0 || queue->end() > x.shape[0]))
    fail("{}: images {}..{} are queued but it holds {}", data_name, queue->begin(),
         queue->end() - 1, x.shape[0]);
  // The images in order: the shard's, or those the queue hands out.
  std::int64_t next = begin;
  auto take = [&] { return queue ? queue->take() : next < end ? next++ : std::int64_t{-1}; };
  const std::int64_t n = queue ? queue->end() - queue->begin() : end - begin;  // for progress
  EvalResult r;
  r.has_float = float_model != nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  ref::ConvWeightCache float_weights;  // the float model's conv weights, reordered once
  ref::RunOptions float_run;
  float_run.conv_weights = &float_weights;
  ref::TensorMap feeds, ff;
  auto warm_from = t0;
  double warm_cpu_from = 0;
  for (std::int64_t i = take(); i >= 0; i = take()) {
    if (r.images == 1) {
      warm_start.warmed_up();
      warm_from = std::chrono::steady_clock::now();
      warm_cpu_from = thread_cpu_seconds();
    }
    ++r.images;
    if (queue) r.image_indices.push_back(i);
    image_as_input(x, i, input.shape, input.name, data_name, feeds[input.name]);
    auto result = session.run(feeds);
    const std::int64_t p = argmax(result.outputs.at(m.outputs[0].name));
    r.predictions.push_back(p);
    r.int8_correct += p == labels[i];
    r.device_cycles += result.device_cycles;
    add_segment_stats(r.segments, result.segments);
    if (r.images > 1) {
      r.warm_layer_seconds.resize(result.layers.size(), 0.0);
      for (std::size_t j = 0; j < result.layers.size(); ++j)
        r.warm_layer_seconds[j] += result.layers[j].model_seconds;
    }
    r.layers = std::move(result.layers);  // the last image's (moved: no copy of the names)
    if (float_model) {
      const std::string& fin = float_model->inputs[0];
      image_as_input(x, i, float_model->tensor(fin).shape, fin, data_name, ff[fin]);
      const auto fo = ref::run_graph(*float_model, ff, float_run);
      const std::int64_t fp = argmax(fo.at(float_model->outputs[0]));
      r.float_correct += fp == labels[i];
      r.agree += fp == p;
    }
    if (options.progress) options.progress(r.images, n, r.int8_correct);
  }
  const auto t1 = std::chrono::steady_clock::now();
  r.seconds = std::chrono::duration<double>(t1 - t0).count();
  if (r.images > 1) {
    r.warm_images = r.images - 1;
    r.warm_seconds = std::chrono::duration<double>(t1 - warm_from).count();
    r.warm_cpu_seconds = thread_cpu_seconds() - warm_cpu_from;
  }
  mean_layer_seconds(r);
  return r;
}

std::pair<std::int64_t, std::int64_t> shard_range(std::int64_t images, int index, int count) {
  if (count < 1 || index < 0 || index >= count || images < 0)
    fail("shard {} of {} over {} images does not exist", index, count, images);
  return {images * index / count, images * (index + 1) / count};
}

EvalResult merge_shards(const std::vector<EvalResult>& shards) {
  EvalResult r;
  if (shards.empty()) return r;
  r.has_float = shards.front().has_float;
  for (const EvalResult& s : shards) {
    if (s.has_float != r.has_float)
      fail("cannot merge evaluation shards: some ran the float model and some did not");
    r.images += s.images;
    r.int8_correct += s.int8_correct;
    r.float_correct += s.float_correct;
    r.agree += s.agree;
    r.device_cycles += s.device_cycles;
    r.seconds = std::max(r.seconds, s.seconds);
    r.warm_images += s.warm_images;
    r.warm_seconds = std::max(r.warm_seconds, s.warm_seconds);
    r.warm_cpu_seconds += s.warm_cpu_seconds;
    r.predictions.insert(r.predictions.end(), s.predictions.begin(), s.predictions.end());
    add_segment_stats(r.segments, s.segments);
    if (s.images > 0 && s.image_indices.empty()) r.layers = s.layers;
    if (r.warm_layer_seconds.empty())
      r.warm_layer_seconds = s.warm_layer_seconds;
    else if (s.warm_layer_seconds.size() == r.warm_layer_seconds.size())
      for (std::size_t j = 0; j < s.warm_layer_seconds.size(); ++j)
        r.warm_layer_seconds[j] += s.warm_layer_seconds[j];
  }
  // The takers of a queue: predictions by image, the layers of whoever ran the last one.
  std::vector<std::pair<std::int64_t, std::int64_t>> by_image;
  std::int64_t last = -1;
  for (const EvalResult& s : shards) {
    if (s.image_indices.empty()) continue;
    if (s.image_indices.size() != s.predictions.size())
      fail("cannot merge evaluation shards: {} image indices for {} predictions",
           s.image_indices.size(), s.predictions.size());
    for (std::size_t i = 0; i < s.predictions.size(); ++i)
      by_image.emplace_back(s.image_indices[i], s.predictions[i]);
    if (s.image_indices.back() > last) last = s.image_indices.back(), r.layers = s.layers;
  }
  if (!by_image.empty()) {
    if (by_image.size() != r.predictions.size())
      fail("cannot merge evaluation shards: some took images from a queue and some did not");
    std::sort(by_image.begin(), by_image.end());
    for (std::size_t i = 0; i < by_image.size(); ++i) r.predictions[i] = by_image[i].second;
  }
  mean_layer_seconds(r);
  return r;
}

std::string encode_eval_result(const EvalResult& r) {
  nlohmann::json segments = nlohmann::json::array(), layers = nlohmann::json::array();
  for (const auto& s : r.segments)
    segments.push_back(
        {s.index, s.device, s.cycles, s.host_seconds, s.bytes_to_device, s.bytes_from_device});
  for (const auto& l : r.layers) layers.push_back({l.name, l.opcode, l.cycles});
  const nlohmann::json j{{"images", r.images},
                         {"int8_correct", r.int8_correct},
                         {"has_float", r.has_float},
                         {"float_correct", r.float_correct},
                         {"agree", r.agree},
                         {"device_cycles", r.device_cycles},
                         {"seconds", r.seconds},
                         {"warm_images", r.warm_images},
                         {"warm_seconds", r.warm_seconds},
                         {"warm_cpu_seconds", r.warm_cpu_seconds},
                         {"predictions", r.predictions},
                         {"segments", segments},
                         {"layers", layers},
                         {"warm_layer_seconds", r.warm_layer_seconds}};
  return j.dump();
}

EvalResult decode_eval_result(const std::string& bytes, const std::string& what) {
  try {
    const nlohmann::json j = nlohmann::json::parse(bytes);
    EvalResult r;
    r.images = j.at("images").get<std::int64_t>();
    r.int8_correct = j.at("int8_correct").get<std::int64_t>();
    r.has_float = j.at("has_float").get<bool>();
    r.float_correct = j.at("float_correct").get<std::int64_t>();
    r.agree = j.at("agree").get<std::int64_t>();
    r.device_cycles = j.at("device_cycles").get<std::uint64_t>();
    r.seconds = j.at("seconds").get<double>();
    r.warm_images = j.at("warm_images").get<std::int64_t>();
    r.warm_seconds = j.at("warm_seconds").get<double>();
    r.warm_cpu_seconds = j.at("warm_cpu_seconds").get<double>();
    r.predictions = j.at("predictions").get<std::vector<std::int64_t>>();
    for (const auto& s : j.at("segments"))
      r.segments.push_back({s.at(0).get<std::size_t>(), s.at(1).get<bool>(),
                            s.at(2).get<std::uint64_t>(), s.at(3).get<double>(),
                            s.at(4).get<std::uint64_t>(), s.at(5).get<std::uint64_t>()});
    for (const auto& l : j.at("layers"))
      r.layers.push_back(
          {l.at(0).get<std::string>(), l.at(1).get<std::string>(), l.at(2).get<std::uint64_t>()});
    r.warm_layer_seconds = j.at("warm_layer_seconds").get<std::vector<double>>();
    if (static_cast<std::int64_t>(r.predictions.size()) != r.images)
      fail("{} predictions for {} images", r.predictions.size(), r.images);
    return r;
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not an evaluation result ({})", what, e.what());
  } catch (const Error& e) {
    fail("{}: not an evaluation result ({})", what, e.what());
  }
}

}  // namespace npukit::analysis
