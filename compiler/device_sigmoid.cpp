#include "compiler/device_sigmoid.h"

#include "common/error.h"
#include "ref/gati_kernels.h"
#include "ref/gati_tanh.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace npukit::compiler {

SigmoidParams device_sigmoid_params(double sx, double sy, const std::string& what) {
  SigmoidParams p;
  const double a = std::nearbyint(sx * 65536.0);
  if (!(a >= -131072 && a <= 131071))
    fail("{}: EltWise scale {} does not fit the signed 18-bit field", what, sx * 65536.0);
  p.a_scale = static_cast<std::int64_t>(a);
  p.tail = choose_scale_shift(1.0 / sy, what);
  return p;
}

std::array<std::int8_t, 256> device_sigmoid_table(const SigmoidParams& p) {
  ref::gati::EltwiseParams e;
  e.op = ref::gati::EltOp::kSigmoid;
  e.a_scale = static_cast<std::int32_t>(p.a_scale);
  e.tail.quant_scale = static_cast<std::int32_t>(p.tail.scale);
  e.tail.quant_shift = static_cast<int>(p.tail.shift);
  std::array<std::int8_t, 256> out{};
  for (int x = -128; x < 128; ++x) {
    const std::int64_t v = ref::gati::eltwise_value(static_cast<std::int8_t>(x), 0, e);
    out[static_cast<std::size_t>(x + 128)] = ref::gati::activate(
        ref::gati::quantize(v, e.tail.quant_scale, e.tail.quant_shift, 16), e.tail);
  }
  return out;
}

SigmoidError device_sigmoid_error(double sx, double sy, const std::string& what) {
  const SigmoidParams p = device_sigmoid_params(sx, sy, what);
  const auto table = device_sigmoid_table(p);
  SigmoidError worst;
  worst.lsb = -1;
  for (int x = -128; x < 128; ++x) {
    const double exact = std::clamp(1.0 / (1.0 + std::exp(-x * sx)) / sy, -128.0, 127.0);
    const int device = table[static_cast<std::size_t>(x + 128)];
    const double lsb = std::fabs(device - exact);
    if (lsb > worst.lsb) {
      // sigmoid(x) = (tanh(x / 2) + 1) / 2: the engine's segment 0 reads slope 0 (DECISIONS.md 7)
      const std::int64_t half = std::min<std::int64_t>(
          std::llabs((std::int64_t{x} * p.a_scale) >> 1), ref::gati::kTanhInputMax);
      worst = {lsb, x, device, exact, x != 0 && ref::gati::tanh_segment(half) == 0};
    }
  }
  return worst;
}

}  // namespace npukit::compiler
