#include "analysis/evaluate.h"

#include "common/error.h"
#include "ir/tensor_util.h"
#include "ref/executor.h"

#include <algorithm>
#include <chrono>
#include <limits>

namespace npukit::analysis {
namespace {

// Image n of `all` (the data's values, images on axis 0) shaped like the model input (batch 1).
ir::Tensor image_of(const ir::Tensor& x, const std::vector<float>& all, std::int64_t n,
                    const ir::Shape& input_shape, const std::string& name,
                    const std::string& data_name) {
  const std::int64_t count = ir::element_count(x.shape) / x.shape[0];
  std::vector<float> v(all.begin() + n * count, all.begin() + (n + 1) * count);
  ir::Shape shape = input_shape;
  if (!shape.empty()) shape[0] = 1;
  if (ir::element_count(shape) != count)
    fail("{}: one image has {} values ({}), the model input '{}' takes {} ({})", data_name, count,
         ir::shape_string(x.shape), name, ir::element_count(shape), ir::shape_string(input_shape));
  return ir::make_tensor(shape, v, name);
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

EvalResult evaluate(runtime::Session& session, const ir::Tensor& x,
                    const std::vector<std::int64_t>& labels, const EvalOptions& options,
                    const std::string& data_name, const std::string& labels_name) {
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

  const std::int64_t n = options.limit > 0 ? std::min(x.shape[0], options.limit) : x.shape[0];
  const std::vector<float> xs = ir::to_float_vector(x);
  EvalResult r;
  r.images = n;
  r.has_float = float_model != nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < n; ++i) {
    ref::TensorMap feeds;
    feeds[input.name] = image_of(x, xs, i, input.shape, input.name, data_name);
    const auto result = session.run(feeds);
    const std::int64_t p = argmax(result.outputs.at(m.outputs[0].name));
    r.predictions.push_back(p);
    r.int8_correct += p == labels[i];
    r.device_cycles += result.device_cycles;
    add_segment_stats(r.segments, result.segments);
    r.layers = result.layers;
    if (float_model) {
      const std::string& fin = float_model->inputs[0];
      ref::TensorMap ff;
      ff[fin] = image_of(x, xs, i, float_model->tensor(fin).shape, fin, data_name);
      const auto fo = ref::run_graph(*float_model, ff);
      const std::int64_t fp = argmax(fo.at(float_model->outputs[0]));
      r.float_correct += fp == labels[i];
      r.agree += fp == p;
    }
    if (options.progress) options.progress(i + 1, n, r.int8_correct);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace npukit::analysis
