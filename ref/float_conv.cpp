#include "ref/float_conv.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "common/parallel.h"

#ifdef NPUKIT_HAVE_ONEDNN
#include <dnnl.hpp>
extern "C" void omp_set_num_threads(int);  // oneDNN's threads (Debian builds it on OpenMP)
#endif

namespace npukit::ref {

void conv2d_float_direct(const float* x, const float* w, const float* bias, float* y,
                         std::int64_t batch, std::int64_t channels, std::int64_t kernels,
                         std::int64_t group, const WindowGeometry& g) {
  const std::int64_t area = g.out_h * g.out_w;
  for (std::int64_t i = 0; i < batch * kernels; ++i)
    std::fill_n(y + i * area, area, bias ? bias[i % kernels] : 0.f);
  convolve<float, float, float>(x, w, y, batch, channels, kernels, group, g, 0.f, {0.f});
}

#ifdef NPUKIT_HAVE_ONEDNN

namespace {

using dnnl::memory;
using Dims = memory::dims;

// One compiled convolution per geometry: oneDNN generates its kernel when the primitive is made,
// which costs far more than running it once, and a network runs the same geometries per image.
// The thread count is part of the key: oneDNN splits the work for the OpenMP thread count in
// force when the primitive is made and runs that many threads whatever is set later (a primitive
// made for 2 threads kept `--threads 1` spinning 2 OpenMP threads: 24 ms per digits image
// instead of 0.6 on a loaded machine).
struct Key {
  int threads;
  std::int64_t batch, channels, in_h, in_w, kernels, group, kernel_h, kernel_w, stride_h, stride_w,
      dilation_h, dilation_w, pad_top, pad_left, pad_bottom, pad_right;
  bool bias;
  auto tie() const {
    return std::tie(threads, batch, channels, in_h, in_w, kernels, group, kernel_h, kernel_w,
                    stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left, pad_bottom,
                    pad_right, bias);
  }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

struct Compiled {
  dnnl::convolution_forward conv;
  memory::desc src, weights, dst;                 // the layouts oneDNN chose
  memory::desc user_src, user_weights, user_dst;  // NCHW / (G)OIHW
  memory::desc scratchpad;                        // given per call: see conv2d_float
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

const Compiled& compiled(const Key& k, const WindowGeometry& g) {
  static std::mutex mutex;
  static std::map<Key, Compiled> cache;
  std::lock_guard lock(mutex);
  if (auto it = cache.find(k); it != cache.end()) return it->second;
  using tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  const Dims src{k.batch, k.channels, g.in_h, g.in_w}, dst{k.batch, k.kernels, g.out_h, g.out_w};
  const Dims weights = k.group == 1 ? Dims{k.kernels, k.channels, k.kernel_h, k.kernel_w}
                                    : Dims{k.group, k.kernels / k.group, k.channels / k.group,
                                           k.kernel_h, k.kernel_w};
  Compiled c;
  c.user_src = memory::desc(src, f32, tag::nchw);
  c.user_dst = memory::desc(dst, f32, tag::nchw);
  c.user_weights = memory::desc(weights, f32, k.group == 1 ? tag::oihw : tag::goihw);
  const memory::desc bias_md = k.bias ? memory::desc({k.kernels}, f32, tag::x) : memory::desc();
  dnnl::convolution_forward::desc d(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
      memory::desc(src, f32, tag::any), memory::desc(weights, f32, tag::any), bias_md,
      memory::desc(dst, f32, tag::any), {k.stride_h, k.stride_w},
      {k.dilation_h - 1, k.dilation_w - 1}, {k.pad_top, k.pad_left}, {k.pad_bottom, k.pad_right});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::convolution_forward::primitive_desc pd(d, attr, engine());
  c.src = pd.src_desc();
  c.weights = pd.weights_desc();
  c.dst = pd.dst_desc();
  c.scratchpad = pd.scratchpad_desc();
  c.conv = dnnl::convolution_forward(pd);
  return cache.emplace(k, std::move(c)).first->second;
}

// A tensor in the layout oneDNN wants: the user's memory itself when the layouts agree.
memory in_layout(const memory::desc& want, const memory::desc& have, void* data, dnnl::stream& s) {
  memory user(have, engine(), data);
  if (want == have) return user;
  memory m(want, engine());
  dnnl::reorder(user, m).execute(s, user, m);
  return m;
}

}  // namespace

struct ConvWeightCache::Entries {
  std::mutex mutex;
  // (weights address, the compiled convolution that wants them) -> the reordered copy, never
  // changed once made (so readers need the lock only for the lookup, and to make it).
  std::map<std::pair<const float*, const Compiled*>, dnnl::memory> reordered;
};
ConvWeightCache::ConvWeightCache() : entries(std::make_unique<Entries>()) {}
ConvWeightCache::~ConvWeightCache() = default;

void conv2d_float(const float* x, const float* w, const float* bias, float* y, std::int64_t batch,
                  std::int64_t channels, std::int64_t kernels, std::int64_t group,
                  const WindowGeometry& g, ConvWeightCache* weights_cache) {
  // A small convolution runs on one thread: waking OpenMP workers costs more than it saves, and
  // on a loaded machine their spin-waiting costs far more (LeNet's convolutions took 70x longer).
  const std::int64_t macs =
      batch * kernels * g.out_h * g.out_w * (channels / group) * g.kernel_h * g.kernel_w;
  const int threads = macs < (std::int64_t{1} << 22) ? 1 : static_cast<int>(thread_count());
  omp_set_num_threads(threads);
  const Key key{threads,      batch,      channels,   g.in_h,       g.in_w,      kernels,
                group,        g.kernel_h, g.kernel_w, g.stride_h,   g.stride_w,  g.dilation_h,
                g.dilation_w, g.pad_top,  g.pad_left, g.pad_bottom, g.pad_right, bias != nullptr};
  const Compiled* c = nullptr;
  try {
    c = &compiled(key, g);
  } catch (const dnnl::error&) {  // a geometry oneDNN does not implement: the direct loop
    conv2d_float_direct(x, w, bias, y, batch, channels, kernels, group, g);
    return;
  }
  dnnl::stream s(engine());
  memory src = in_layout(c->src, c->user_src, const_cast<float*>(x), s);
  memory weights;
  if (weights_cache && c->weights != c->user_weights) {
    // Reordered under the lock: calibration's threads all start with the first layer, and each
    // reordered every weight of the network for itself when the slower one did not wait (resnet50:
    // ~60 ms per thread of reorders done twice).
    auto& e = *weights_cache->entries;
    const std::lock_guard lock(e.mutex);
    auto it = e.reordered.find(std::make_pair(w, c));
    if (it == e.reordered.end()) {
      memory made = in_layout(c->weights, c->user_weights, const_cast<float*>(w), s);
      s.wait();
      it = e.reordered.emplace(std::make_pair(w, c), made).first;
    }
    weights = it->second;
  } else {
    weights = in_layout(c->weights, c->user_weights, const_cast<float*>(w), s);
  }
  memory user_dst(c->user_dst, engine(), y);
  memory dst = c->dst == c->user_dst ? user_dst : memory(c->dst, engine());
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
  // The primitive's scratch memory is this thread's: calibration runs images on several threads
  // at once through the same cached primitives, and the library's shared scratchpad is safe
  // for that only in oneDNN builds made with concurrent execution enabled.
  thread_local std::vector<unsigned char> scratch;
  if (scratch.size() < c->scratchpad.get_size()) scratch.resize(c->scratchpad.get_size());
  args.emplace(DNNL_ARG_SCRATCHPAD, memory(c->scratchpad, engine(), scratch.data()));
  if (bias)
    args.emplace(DNNL_ARG_BIAS,
                 memory(memory::desc({kernels}, memory::data_type::f32, memory::format_tag::x),
                        engine(), const_cast<float*>(bias)));
  c->conv.execute(s, args);
  if (c->dst != c->user_dst) dnnl::reorder(dst, user_dst).execute(s, dst, user_dst);
  s.wait();
}

bool float_conv_uses_onednn() { return true; }

#else

struct ConvWeightCache::Entries {};
ConvWeightCache::ConvWeightCache() : entries(std::make_unique<Entries>()) {}
ConvWeightCache::~ConvWeightCache() = default;

void conv2d_float(const float* x, const float* w, const float* bias, float* y, std::int64_t batch,
                  std::int64_t channels, std::int64_t kernels, std::int64_t group,
                  const WindowGeometry& g, ConvWeightCache*) {
  conv2d_float_direct(x, w, bias, y, batch, channels, kernels, group, g);
}

bool float_conv_uses_onednn() { return false; }

#endif

}  // namespace npukit::ref
