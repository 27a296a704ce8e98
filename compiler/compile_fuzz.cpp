// libFuzzer target: arbitrary bytes as an ONNX model through import and the whole compiler
// (quantization normalization, lowering, limits, back end) must give a program or npukit::Error,
// never a crash or hang. Seeds: fixtures/fuzz/compile_fuzz (quantized models).
#include "common/error.h"
#include "compiler/compiler.h"
#include "onnx/onnx_io.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const npukit::ir::Graph g =
        npukit::onnxio::load_onnx_bytes(npukit::ByteSpan(data, size), "fuzz");
    npukit::compiler::compile(g, {});
  } catch (const npukit::Error&) {
  }
  return 0;
}
