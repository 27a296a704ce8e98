// Runs a compiled program (program/program.h: in memory, or a DIR from npukit compile) the way the
// board's host does (gati.md 9): META reset and dispatch target, the GML once, then per input the
// segments in order: a host segment on the reference executor; a device segment as its input
// tensors in the activation layout (DWP packets), when the program has several device segments
// the zeroth instruction pointed at the segment's instructions, the start packet, and its
// dispatch frames back with their layouts undone. Needs nothing from the compiler.
#pragma once

#include "ir/graph.h"
#include "isa/manifest.h"
#include "program/program.h"
#include "ref/executor.h"
#include "runtime/transport.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace npukit::runtime {

struct SessionOptions {
  std::string transport = "inproc";  // or tcp://HOST:PORT
  std::ostream* warnings = nullptr;  // device warnings (errata), when the device is in-process
};

struct LayerCycles {
  std::string name;  // manifest layer name when known, else the opcode
  std::string opcode;
  std::uint64_t cycles = 0;
  double model_seconds = 0;  // the in-process model's wall time for it (RunCycles), else 0
};

// What one segment did (summed over the images of a batch).
struct SegmentStats {
  std::size_t index = 0;  // in manifest.segments
  bool device = false;
  std::uint64_t cycles = 0;             // device segments, in-process device only
  double host_seconds = 0;              // host segments: wall time on the reference executor
  std::uint64_t bytes_to_device = 0;    // DWP stream bytes written (packets, zeroth, start)
  std::uint64_t bytes_from_device = 0;  // dispatch frame bytes read (headers and footers too)
};

struct RunResult {
  ref::TensorMap outputs;         // the model's outputs, by name
  ref::TensorMap device_outputs;  // what the device dispatched, unpacked (int8 NCHW / [N, K])
  // Cycles of each image's run as the device reports them (in-process or over TCP), summed.
  std::uint64_t device_cycles = 0;
  std::vector<LayerCycles> layers;  // of the last image, all device segments in order
  std::vector<SegmentStats> segments;
};

class Session {
 public:
  // Loads DIR/manifest.json, the GML and the host subgraphs, opens the transport and sends the
  // program (META reset, dispatch target, payload size, GML).
  explicit Session(const std::string& dir, SessionOptions options = {});
  // The same for a program held in memory (program::load, or a compile result's artifact()).
  explicit Session(program::Program program, SessionOptions options = {});
  ~Session();

  const isa::Manifest& manifest() const { return program_.manifest; }
  // Runs a batch: inputs by the model's input names. Each image goes through the whole pipeline
  // (host prefix, device, host suffix) on its own; outputs are stacked along axis 0.
  RunResult run(const ref::TensorMap& inputs);
  Transport& transport() { return *transport_; }

 private:
  void send_program();
  RunResult run_image(const ref::TensorMap& inputs);  // one image, batch 1
  ref::TensorMap run_device(const isa::ManifestSegment& segment,
                            const ref::TensorRefs& device_inputs, RunResult& result,
                            SegmentStats& stats);

  program::Program program_;
  isa::SaArch arch_;
  std::unique_ptr<Transport> transport_;
  // Kept from image to image so that the per-image work reuses its storage: each host
  // segment's executor buffers and outputs (by segment index), the DWP stream.
  std::vector<ref::RunBuffers> host_buffers_;
  std::vector<ref::TensorMap> host_outputs_;
  Bytes stream_;
};

// Image n of a batch tensor (axis 0), as a batch of one.
ir::Tensor image_of(const ir::Tensor& t, std::int64_t n);
// Appends `image` (a batch of one) to `batch` along axis 0; an empty `batch` becomes `image`.
void append_image(ir::Tensor& batch, const ir::Tensor& image);

// float -> int8 with the ONNX QuantizeLinear rule (round half to even, saturate), zero point 0.
ir::Tensor quantize_to_int8(const ir::Tensor& t, double scale, std::int64_t zero_point);

}  // namespace npukit::runtime
