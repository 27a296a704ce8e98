// libFuzzer target: arbitrary bytes as an ONNX model must give a model or npukit::Error, never a
// crash. Seeds: any .onnx file (fixtures/digits, fixtures/models).
#include "common/error.h"
#include "onnx/normalize.h"
#include "onnx/onnx_io.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    npukit::ir::Graph g = npukit::onnxio::load_onnx_bytes(npukit::ByteSpan(data, size), "fuzz");
    npukit::onnxio::normalize_quantization(g);
  } catch (const npukit::Error&) {
  }
  return 0;
}
