// libFuzzer target: arbitrary bytes as an ONNX model must give a model or npukit::Error, never a
// crash. Seeds: any .onnx file (fixtures/digits, fixtures/models). compiler/compile_fuzz.cpp
// carries the imported graph on through the compiler's front end.
#include "common/error.h"
#include "onnx/onnx_io.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    npukit::onnxio::load_onnx_bytes(npukit::ByteSpan(data, size), "fuzz");
  } catch (const npukit::Error&) {
  }
  return 0;
}
