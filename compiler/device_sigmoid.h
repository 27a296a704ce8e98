// The Gati's sigmoid as the compiler programs it (lower_to_gati) and how far it is from the exact
// function at a layer's scales (assign_devices decides from that where a QLinearSigmoid runs;
// docs/compiler.md, "Sigmoid: device or host").
#pragma once

#include "compiler/context.h"

#include <array>
#include <cstdint>
#include <string>

namespace npukit::compiler {

// The EltWise "sigmoid" parameters for input scale sx and output scale sy (zero points 0): the
// engine's Q16 input is x * a_scale, a_scale = round(sx 2^16) (DECISIONS.md 6), and the tail
// requantizes by 1 / sy. Throws naming `what` when a scale does not fit its field.
struct SigmoidParams {
  std::int64_t a_scale = 0;
  ScaleShift tail;
};
SigmoidParams device_sigmoid_params(double sx, double sy, const std::string& what);

// The device's int8 output for every input code -128..127 (index code + 128), computed with the
// reference kernels' model of the tanh engine (ref/gati_tanh.h: its 129-entry tables, including
// the RTL's 0 for |x| <= 896/65536) and the EltWise tail.
std::array<std::int8_t, 256> device_sigmoid_table(const SigmoidParams& p);

// The largest distance, in output LSBs, between the device's output code and the exact
// sigmoid(code * sx) / sy (clamped to the int8 range) over all 256 input codes; a correctly
// rounded table is within 0.5.
struct SigmoidError {
  double lsb = 0;
  int code = 0;            // the input code where it is largest
  int device = 0;          // the device's output code there
  double exact = 0;        // sigmoid(code * sx) / sy there
  bool dead_zone = false;  // code != 0 falls in the tanh engine's segment 0, which reads slope 0
};
SigmoidError device_sigmoid_error(double sx, double sy, const std::string& what);

}  // namespace npukit::compiler
