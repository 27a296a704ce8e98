// Runs a compiled model (DIR with manifest.json, the GML and host subgraphs) the way the board's
// host does (gati.md 9): META reset and dispatch target, the GML once, then per input the host
// prefix on the reference executor, the input tensor and start packet, the dispatch frames back,
// their layouts undone, and the host suffix. Needs nothing from the compiler.
#pragma once

#include "ir/graph.h"
#include "isa/manifest.h"
#include "ref/executor.h"
#include "runtime/transport.h"

#include <cstdint>
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
};

struct RunResult {
  ref::TensorMap outputs;         // the model's outputs, by name
  ref::TensorMap device_outputs;  // what the device dispatched, unpacked (int8 NCHW / [N, K])
  // In-process device only: cycles of each image's run, summed over the batch.
  std::uint64_t device_cycles = 0;
  std::vector<LayerCycles> layers;  // of the last image
};

class Session {
 public:
  // Loads DIR/manifest.json, the GML and the host subgraphs, opens the transport and sends the
  // program (META reset, dispatch target, payload size, GML).
  explicit Session(const std::string& dir, SessionOptions options = {});
  ~Session();

  const isa::Manifest& manifest() const { return manifest_; }
  // Runs a batch: inputs by the model's input names. Each image goes through the whole pipeline
  // (host prefix, device, host suffix) on its own; outputs are stacked along axis 0.
  RunResult run(const ref::TensorMap& inputs);
  Transport& transport() { return *transport_; }

 private:
  void send_program();
  RunResult run_image(const ref::TensorMap& inputs);  // one image, batch 1
  ref::TensorMap run_device(const ref::TensorMap& device_inputs, RunResult& result);

  std::string dir_;
  isa::Manifest manifest_;
  isa::SaArch arch_;
  Bytes gml_;
  std::optional<ir::Graph> host_before_, host_after_;
  std::unique_ptr<Transport> transport_;
};

// Image n of a batch tensor (axis 0), as a batch of one.
ir::Tensor image_of(const ir::Tensor& t, std::int64_t n);
// Appends `image` (a batch of one) to `batch` along axis 0; an empty `batch` becomes `image`.
void append_image(ir::Tensor& batch, const ir::Tensor& image);

// float -> int8 with the ONNX QuantizeLinear rule (round half to even, saturate), zero point 0.
ir::Tensor quantize_to_int8(const ir::Tensor& t, double scale, std::int64_t zero_point);

}  // namespace npukit::runtime
