// Top-1 evaluation of a compiled program on the device model (what `npukit eval` and
// npukit.eval() report): every image through the whole pipeline (host prefix, device, host
// suffix) of a runtime::Session, optionally beside the float model on the reference executor.
#pragma once

#include "ir/graph.h"
#include "runtime/session.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace npukit::analysis {

// Hands out the images [begin, end) one at a time to the `takers` evaluations that share it
// (npukit eval's workers): each takes the next image when it is free, so a core slowed by other
// work takes fewer instead of finishing last. Their warm timing (EvalResult::warm_seconds) starts
// together: evaluate() waits after a taker's first image until every taker has done its first,
// so the warm figures count only time when all of them run (not a worker still starting while
// the others already time their images). Every taker must call evaluate() with the queue, or
// leave() when it fails before that.
class ImageQueue {
 public:
  ImageQueue(std::int64_t begin, std::int64_t end, std::ptrdiff_t takers)
      : begin_(begin), next_(begin), end_(end), warm_start_(std::max<std::ptrdiff_t>(takers, 1)) {}
  // The next image, or -1 when none is left.
  std::int64_t take() {
    const std::int64_t i = next_.fetch_add(1, std::memory_order_relaxed);
    return i < end_ ? i : -1;
  }
  std::int64_t begin() const { return begin_; }
  std::int64_t end() const { return end_; }
  // Once per taker: after its first image (waits for the others' first), or leave() when it
  // stops without one (no image, or an error).
  void warmed_up() { warm_start_.arrive_and_wait(); }
  void leave() { warm_start_.arrive_and_drop(); }

 private:
  std::int64_t begin_;
  std::atomic<std::int64_t> next_;
  std::int64_t end_;
  std::barrier<> warm_start_;
};

struct EvalOptions {
  std::int64_t limit = 0;                  // evaluate only the first N images (0 = all)
  const ir::Graph* float_model = nullptr;  // also run this float model (one input) for comparison
  // Scale-out (`mpirun -n N npukit eval`): this process evaluates only shard `shard_index` of
  // `shard_count` contiguous, nearly equal blocks of the images (after `limit`); merge_shards()
  // of every shard's result, in shard order, is the result of a single process.
  int shard_index = 0;
  int shard_count = 1;
  // Take the images from this queue instead (its range is checked against the data and labels;
  // limit and the shard are not used). merge_shards() of all its takers' results is the result of
  // one evaluation of the range, whichever images each took.
  ImageQueue* queue = nullptr;
  // Called after each image: (images done, total, int8 correct so far).
  std::function<void(std::int64_t, std::int64_t, std::int64_t)> progress;
};

struct EvalResult {
  std::int64_t images = 0;
  std::int64_t int8_correct = 0;
  bool has_float = false;
  std::int64_t float_correct = 0;
  std::int64_t agree = 0;           // images where int8 and float pick the same class
  std::uint64_t device_cycles = 0;  // summed over the images
  double seconds = 0;               // host wall time of the loop
  // The images after the first of each shard (whose time holds the one-time weight packing), as
  // onnxruntime's session.run timings leave out session creation and warm-up: their wall time
  // (shards run at once: the longest; a queue's takers start it together) and this thread's CPU
  // time (summed over shards). A shard's layers must run on its own thread for the CPU time to
  // hold all of it (npukit eval's workers do, one image per core).
  std::int64_t warm_images = 0;
  double warm_seconds = 0, warm_cpu_seconds = 0;
  std::vector<std::int64_t> predictions;  // the int8 top-1 class per image
  // With a queue: the image of each prediction, ascending (without one, the shard's images in
  // order, and this is empty).
  std::vector<std::int64_t> image_indices;
  std::vector<runtime::SegmentStats> segments;  // summed over the images
  // Of the last image, but each layer's model_seconds is its mean over the warm images (the
  // in-process device model's time for the layer; see warm_layer_seconds).
  std::vector<runtime::LayerCycles> layers;
  // Per device layer, the model's wall time summed over the warm images (merge_shards adds them;
  // encode_eval_result carries them to the rank that merges).
  std::vector<double> warm_layer_seconds;

  double int8_top1() const { return images ? double(int8_correct) / images : 0; }
  double float_top1() const { return images ? double(float_correct) / images : 0; }
  double agreement() const { return images ? double(agree) / images : 0; }
  double cycles_per_image() const { return images ? double(device_cycles) / images : 0; }
  double warm_seconds_per_image() const { return warm_images ? warm_seconds / warm_images : 0; }
  double warm_cpu_seconds_per_image() const {
    return warm_images ? warm_cpu_seconds / warm_images : 0;
  }
};

// Checks the data and labels against each other and the program (one input; labels are class
// indices within the first output's size), then runs image by image. `data` holds the images on
// axis 0 in any numeric type (converted to float32 and reshaped to the model input);
// `data_name` and `labels_name` name them in messages (file names, or "data"/"labels").
EvalResult evaluate(runtime::Session& session, const ir::Tensor& data,
                    const std::vector<std::int64_t>& labels, const EvalOptions& options = {},
                    const std::string& data_name = "data",
                    const std::string& labels_name = "labels");

// The images [begin, end) of shard `index` of `count` when `images` images are evaluated:
// contiguous blocks in order, sizes differing by at most one (some empty when count > images).
std::pair<std::int64_t, std::int64_t> shard_range(std::int64_t images, int index, int count);

// The result of one process over all images from the results of its shards, in shard order:
// counts, cycles, bytes and host times summed, predictions concatenated (or, from the takers of
// one ImageQueue, put in image order), the layers of the shard that ran the last image, wall time
// the longest shard's (they run side by side).
EvalResult merge_shards(const std::vector<EvalResult>& shards);

// An EvalResult as bytes and back (what the ranks of an MPI job send to rank 0); exact, doubles
// included. decode_eval_result throws an Error naming `what` for bytes that are not one.
std::string encode_eval_result(const EvalResult& r);
EvalResult decode_eval_result(const std::string& bytes, const std::string& what);

// The checks evaluate() makes before any work, for a caller that wants them before compiling:
// `data` has a batch axis 0 and one label per image.
void check_eval_data(const ir::Tensor& data, const std::vector<std::int64_t>& labels,
                     const std::string& data_name = "data",
                     const std::string& labels_name = "labels");

// Labels from a tensor (values converted to int64); an Error naming `labels_name` for a label
// that is not a class index (negative, or beyond int32).
std::vector<std::int64_t> labels_of(const ir::Tensor& labels, const std::string& labels_name);

// Sums one run's per-segment numbers into `total` (same segments).
void add_segment_stats(std::vector<runtime::SegmentStats>& total,
                       const std::vector<runtime::SegmentStats>& one);

}  // namespace npukit::analysis
