#include "runtime/session.h"

#include "common/error.h"
#include "ir/tensor_util.h"
#include "isa/dispatch.h"
#include "isa/dwp.h"
#include "isa/gml.h"
#include "isa/host_layout.h"
#include "isa/isa.h"
#include "isa/meta.h"

#include <fmt/core.h>

#include <chrono>
#include <cmath>
#include <map>

namespace npukit::runtime {
namespace {

bool is_activation(const isa::ManifestTensor& t) { return t.layout == "activation"; }

// Channels, height, width of one image of an activation tensor [N, C, H, W].
struct Chw {
  std::int64_t c, h, w;
};
Chw chw_of(const isa::ManifestTensor& t) {
  if (t.shape.size() != 4)
    fail("manifest tensor '{}': activation layout needs a 4-D NCHW shape, got {} dimensions",
         t.name, t.shape.size());
  return {t.shape[1], t.shape[2], t.shape[3]};
}

std::int64_t per_image_elements(const isa::ManifestTensor& t) {
  std::int64_t n = 1;
  for (std::size_t i = 1; i < t.shape.size(); ++i) n *= t.shape[i];
  return n;
}

// Bytes one image of `t` occupies in DRAM.
std::uint64_t device_bytes(const isa::ManifestTensor& t, const isa::SaArch& arch) {
  if (is_activation(t)) {
    auto [c, h, w] = chw_of(t);
    return isa::activation_bytes(c, h, w, arch);
  }
  return isa::vector_bytes(per_image_elements(t));
}

}  // namespace

ir::Tensor quantize_to_int8(const ir::Tensor& t, double scale, std::int64_t zero_point) {
  if (!(scale > 0)) fail("tensor '{}': cannot quantize with scale {}", t.name, scale);
  std::vector<float> values = ir::to_float_vector(t);
  std::vector<std::int8_t> q(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    double v = std::nearbyint(static_cast<double>(values[i]) / scale) + double(zero_point);
    q[i] = static_cast<std::int8_t>(std::clamp(v, -128.0, 127.0));
  }
  return ir::make_tensor(t.shape, q, t.name);
}

Session::Session(const std::string& dir, SessionOptions options)
    : Session(program::load(dir), std::move(options)) {}

Session::Session(program::Program program, SessionOptions options) : program_(std::move(program)) {
  arch_ = program_.manifest.arch();
  program::check_gml(program_, fmt::format("program '{}': GML", program_.manifest.model));
  for (std::size_t i = 0; i < program_.manifest.segments.size(); ++i)
    if (!program_.manifest.segments[i].is_device())
      program_.host_graph(i);  // each host segment has one
  if (program_.manifest.device_segment_count() == 0)
    fail("program '{}': the manifest lists no device segment (recompile the model)",
         program_.manifest.model);
  device::DeviceConfig config;
  config.arch = arch_;
  config.dram_bytes = program_.manifest.ramsize_mb << 20;
  config.warnings = options.warnings;
  transport_ = open_transport(options.transport, config);
  host_buffers_.resize(program_.manifest.segments.size());
  host_outputs_.resize(program_.manifest.segments.size());
  send_program();
}

Session::~Session() = default;

void Session::send_program() {
  Bytes meta;
  isa::append_meta_reset(meta);
  isa::append_meta_dispatch(meta, isa::DispatchTarget::kRah);
  isa::append_meta_payload_size(meta, static_cast<std::uint32_t>(program_.gml.size()));
  transport_->write(kAppMeta, meta);
  transport_->write(kAppDwp, program_.gml);
  // The program is sent once, here; its bytes now live in the device's DRAM (resnet50's GML is
  // 124 MB, kept twice per Session, and once more per eval worker, until this).
  program_.gml = {};
}

ref::TensorMap Session::run_device(const isa::ManifestSegment& segment,
                                   const ref::TensorRefs& device_inputs, RunResult& result,
                                   SegmentStats& seg_stats) {
  std::map<std::uint32_t, const isa::ManifestTensor*> by_id;
  for (const auto& out : segment.device_outputs) {
    if (!out.dispatch_id)
      fail("manifest: device output '{}' has no dispatch id, so the device never sends it back",
           out.name);
    by_id[*out.dispatch_id] = &out;
  }
  std::map<std::string, std::vector<std::int8_t>> gathered;  // output name -> values
  {
    Bytes& stream = stream_;
    stream.clear();
    // With several device segments in one GML, each is started by pointing the zeroth instruction
    // at its own instructions (docs/compiler.md, "Segments"). A single segment keeps the GML's.
    if (program_.manifest.device_segment_count() > 1) {
      isa::Zeroth z;
      z.start = segment.zeroth_start();
      z.end = segment.zeroth_end();
      const auto word = z.encode();
      isa::append_dwp_packet(stream, 0, ByteSpan(word.data(), word.size()));
    }
    for (const auto& in : segment.device_inputs) {
      const ir::Tensor& t = *device_inputs.at(in.name);
      const std::int64_t per_image = per_image_elements(in);
      std::span<const std::int8_t> image(t.as<std::int8_t>(), static_cast<std::size_t>(per_image));
      if (is_activation(in)) {
        // Packed in place, in the stream.
        auto [c, h, w] = chw_of(in);
        isa::pack_activation(
            image, c, h, w, arch_,
            isa::append_dwp_packet(stream, in.address, isa::activation_bytes(c, h, w, arch_)));
      } else {
        isa::append_dwp_packet(stream, in.address, isa::pack_vector(image));
      }
    }
    isa::append_dwp_start(stream);
    Bytes meta;
    isa::append_meta_payload_size(meta, static_cast<std::uint32_t>(stream.size()));
    transport_->write(kAppMeta, meta);
    transport_->write(kAppDwp, stream);
    seg_stats.bytes_to_device += stream.size();

    for (std::size_t k = 0; k < by_id.size(); ++k) {
      // The header says how much more to read; the whole frame is then parsed (footer too).
      Bytes frame = transport_->read(kAppDwp, isa::kDispatchHeaderBytes);
      const isa::DispatchHeader header = isa::parse_dispatch_header(frame);
      const std::uint64_t dram = program_.manifest.ramsize_mb << 20;
      if (header.size > dram)
        fail("the device dispatched a frame of {} bytes (id 0x{:X}), more than its {} MB of DRAM",
             header.size, header.id, program_.manifest.ramsize_mb);
      Bytes rest = transport_->read(kAppDwp, header.size + isa::kDispatchFooterBytes);
      frame.insert(frame.end(), rest.begin(), rest.end());
      seg_stats.bytes_from_device += frame.size();
      const auto frames = isa::parse_dispatch_frames(frame);
      const std::uint32_t id = frames.front().id;
      auto it = by_id.find(id);
      if (it == by_id.end())
        fail("the device dispatched id 0x{:X}, which the manifest does not list", id);
      const isa::ManifestTensor& out = *it->second;
      const ByteSpan payload = frames.front().payload;
      if (payload.size() < device_bytes(out, arch_))
        fail("dispatch for '{}' holds {} bytes, expected {}", out.name, payload.size(),
             device_bytes(out, arch_));
      std::vector<std::int8_t> values;
      if (is_activation(out)) {
        auto [c, h, w] = chw_of(out);
        values = isa::unpack_activation(payload, c, h, w, arch_);
      } else {
        const auto count = static_cast<std::size_t>(per_image_elements(out));
        values.assign(reinterpret_cast<const std::int8_t*>(payload.data()),
                      reinterpret_cast<const std::int8_t*>(payload.data()) + count);
      }
      auto& all = gathered[out.name];
      all.insert(all.end(), values.begin(), values.end());
    }
    {
      // The device's own account of the run, in-process or over the protocol (kAppRunCycles).
      const RunCycles rc = transport_->run_cycles();
      result.device_cycles += rc.total;
      seg_stats.cycles += rc.total;
      result.layers.reserve(result.layers.size() + rc.layers.size());
      for (std::size_t i = 0; i < rc.layers.size(); ++i) {
        LayerCycles lc;
        lc.opcode = std::string(isa::name(rc.layers[i].first));
        const std::size_t layer = static_cast<std::size_t>(segment.first_layer) + i;
        lc.name = layer < program_.manifest.layers.size() ? program_.manifest.layers[layer].name
                                                          : lc.opcode;
        lc.cycles = rc.layers[i].second;
        if (i < rc.model_seconds.size()) lc.model_seconds = rc.model_seconds[i];
        result.layers.push_back(std::move(lc));
      }
    }
  }

  ref::TensorMap outputs;
  for (const auto& out : segment.device_outputs) {
    ir::Shape shape = out.shape;
    if (!shape.empty()) shape[0] = 1;
    outputs[out.name] = ir::make_tensor(shape, gathered[out.name], out.name);
  }
  return outputs;
}

// Image n of a batch tensor (axis 0), as a batch of one.
ir::Tensor image_of(const ir::Tensor& t, std::int64_t n) {
  const std::int64_t batch = t.shape.empty() ? 1 : t.shape[0];
  const std::size_t image_bytes = t.data.size() / static_cast<std::size_t>(batch);
  ir::Tensor out;  // not `= t`: that would copy every image's bytes to keep one
  out.name = t.name;
  out.dtype = t.dtype;
  out.shape = t.shape;
  if (!out.shape.empty()) out.shape[0] = 1;
  out.data.assign(t.data.begin() + static_cast<std::ptrdiff_t>(n * image_bytes),
                  t.data.begin() + static_cast<std::ptrdiff_t>((n + 1) * image_bytes));
  return out;
}

// Appends `image` (a batch of one) to `batch` along axis 0.
void append_image(ir::Tensor& batch, const ir::Tensor& image) {
  if (batch.dtype == ir::DType::kUndefined) {
    batch = image;
    return;
  }
  batch.data.insert(batch.data.end(), image.data.begin(), image.data.end());
  if (!batch.shape.empty()) batch.shape[0] += image.shape.empty() ? 1 : image.shape[0];
}

RunResult Session::run(const ref::TensorMap& inputs) {
  std::int64_t batch = -1;
  for (const auto& in : program_.manifest.inputs) {
    auto it = inputs.find(in.name);
    if (it == inputs.end())
      fail("missing input '{}' (the model's inputs: see manifest.json)", in.name);
    const ir::Tensor& t = it->second;
    if (t.shape.size() != in.shape.size())
      fail("input '{}': shape {} has {} dimensions, the model expects {}", in.name,
           ir::shape_string(t.shape), t.shape.size(), ir::shape_string(in.shape));
    for (std::size_t d = 1; d < t.shape.size(); ++d)
      if (in.shape[d] > 0 && t.shape[d] != in.shape[d])
        fail("input '{}': shape {} does not match the model's {}", in.name,
             ir::shape_string(t.shape), ir::shape_string(in.shape));
    const std::int64_t b = t.shape.empty() ? 1 : t.shape[0];
    if (batch >= 0 && b != batch)
      fail("input '{}': batch {} differs from the other inputs' {}", in.name, b, batch);
    batch = b;
  }
  if (batch <= 0) fail("inputs have an empty batch");

  // The board runs one image at a time, and exported models usually fix batch 1: so does the
  // whole pipeline. A batch of one is that image as it is (no copy).
  if (batch == 1) return run_image(inputs);
  RunResult result;
  for (std::int64_t n = 0; n < batch; ++n) {
    ref::TensorMap image;
    for (const auto& in : program_.manifest.inputs)
      image[in.name] = image_of(inputs.at(in.name), n);
    RunResult one = run_image(image);
    for (auto& [name, t] : one.outputs) append_image(result.outputs[name], t);
    for (auto& [name, t] : one.device_outputs) append_image(result.device_outputs[name], t);
    result.device_cycles += one.device_cycles;
    result.layers = std::move(one.layers);
    if (result.segments.empty()) {
      result.segments = one.segments;
    } else {
      for (std::size_t i = 0; i < one.segments.size(); ++i) {
        auto& a = result.segments[i];
        const auto& b = one.segments[i];
        a.cycles += b.cycles;
        a.host_seconds += b.host_seconds;
        a.bytes_to_device += b.bytes_to_device;
        a.bytes_from_device += b.bytes_from_device;
      }
    }
  }
  return result;
}

RunResult Session::run_image(const ref::TensorMap& inputs) {
  RunResult result;
  // Every value by name, where it is: the inputs, then what each segment produced (a later
  // producer of a name wins). Nothing is copied from segment to segment.
  ref::TensorRefs values;
  for (const auto& [name, t] : inputs) values[name] = &t;
  std::map<std::string, ir::Tensor> quantized;  // float device inputs, as int8
  for (std::size_t i = 0; i < program_.manifest.segments.size(); ++i) {
    const auto& seg = program_.manifest.segments[i];
    SegmentStats stats;
    stats.index = i;
    stats.device = seg.is_device();
    if (!seg.is_device()) {
      const ir::Graph& g = program_.host_graph(i);
      ref::TensorRefs feeds;
      for (const auto& name : g.inputs) {
        auto it = values.find(name);
        if (it == values.end())
          fail("host segment {} ({}) needs '{}', which no earlier segment produced", i,
               seg.host->file, name);
        feeds[name] = it->second;
      }
      ref::RunOptions options;
      options.buffers = &host_buffers_[i];
      const auto t0 = std::chrono::steady_clock::now();
      ref::run_graph(g, feeds, options, host_outputs_[i]);
      stats.host_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      for (const auto& name : g.outputs) values[name] = &host_outputs_[i].at(name);
      result.segments.push_back(stats);
      continue;
    }
    ref::TensorRefs device_in;
    for (const auto& in : seg.device_inputs) {
      auto it = values.find(in.name);
      if (it == values.end()) fail("device input '{}' was not produced by the host", in.name);
      const ir::Tensor* t = it->second;
      if (t->dtype == ir::DType::kFloat32)
        t = &(quantized[in.name] = quantize_to_int8(*t, in.scale, in.zero_point));
      if (t->dtype != ir::DType::kInt8)
        fail("device input '{}' is {}, the device takes int8", in.name, ir::dtype_name(t->dtype));
      if (ir::element_count(t->shape) != per_image_elements(in))
        fail("device input '{}': {} elements, expected {}", in.name, ir::element_count(t->shape),
             per_image_elements(in));
      device_in[in.name] = t;
    }
    for (auto& [name, t] : run_device(seg, device_in, result, stats)) {
      ir::Tensor& kept = result.device_outputs[name] = std::move(t);
      values[name] = &kept;
    }
    result.segments.push_back(stats);
  }
  for (const auto& out : program_.manifest.outputs) {
    auto it = values.find(out.name);
    if (it == values.end()) fail("model output '{}' was not produced", out.name);
    result.outputs[out.name] = *it->second;
  }
  return result;
}

}  // namespace npukit::runtime
