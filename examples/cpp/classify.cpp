// npukit as a C++ library: compile an int8 ONNX model for a 9,8,8 Gati, run the first image of a
// .npy batch on the device model and print the top class and the device cycles.
#include "compiler/compiler.h"
#include "onnx/onnx_io.h"
#include "runtime/session.h"

#include <algorithm>
#include <iostream>

int main(int argc, char** argv) try {
  if (argc != 3) return std::cerr << "usage: classify MODEL.onnx IMAGES.npy\n", 2;
  const auto compiled = npukit::compiler::compile(npukit::onnxio::load_onnx(argv[1]), {});
  npukit::runtime::Session session(compiled.artifact());
  const auto image = npukit::runtime::image_of(npukit::onnxio::load_tensor_file(argv[2]), 0);
  const auto result = session.run({{session.manifest().inputs[0].name, image}});
  const auto& logits = result.outputs.at(session.manifest().outputs[0].name);
  const float* v = logits.as<float>();
  const auto n = static_cast<std::ptrdiff_t>(logits.data.size() / sizeof(float));
  std::cout << "class " << std::max_element(v, v + n) - v << ", " << result.device_cycles
            << " device cycles\n";
} catch (const std::exception& e) {
  std::cerr << "classify: " << e.what() << "\n";
  return 1;
}
