#include "device/tanh_engine.h"

namespace npukit::device {
namespace {

// Register widths of the v1.0.0 interpolator (interpolator_engine.v): the sample point is read
// into 21 bits, the tanh value into 17 bits and the slope into an unsigned 16-bit register. The
// first slope entry (0x10000, slope 1.0) does not fit and reads as 0, so the first half segment
// (|x| <= 896, below 0.0137) interpolates flat at tanh = 0. We reproduce that.
constexpr std::uint32_t kPointMask = (1u << 21) - 1;
constexpr std::uint32_t kTanhMask = (1u << 17) - 1;
constexpr std::uint32_t kSlopeMask = (1u << 16) - 1;

}  // namespace

unsigned tanh_segment_index(std::uint32_t magnitude) {
  // 33-bit datapath in the RTL; 64-bit here so nothing wraps. 36.5625 = 32 + 4 + 8/16 + 1/16,
  // with the two sixteenths taken from a truncated (seg >> 4).
  const std::uint64_t seg = std::uint64_t{magnitude} + kTanhIndexRound;
  const std::uint64_t scaled = (seg << 5) + (seg << 2) + ((seg >> 4) << 3) + (seg >> 4);
  return static_cast<unsigned>(scaled >> kTanhFracBits);
}

std::int32_t tanh_magnitude_q16(std::uint32_t magnitude) {
  const std::uint32_t x = magnitude > kTanhInputMax ? kTanhInputMax : magnitude;
  const unsigned idx = tanh_segment_index(x);
  const std::int64_t point = isa::tanh_tables().points[idx] & kPointMask;
  const std::int64_t value = isa::tanh_tables().tanh[idx] & kTanhMask;
  const std::int64_t slope = isa::tanh_tables().slope[idx] & kSlopeMask;
  // diff fits the RTL's signed 17-bit register (|diff| <= 896); the product is signed and the
  // shift arithmetic (floor), as `(diff * slope) >>> 16`.
  const std::int64_t diff = static_cast<std::int64_t>(x) - point;
  const std::int64_t scaled = (diff * slope) >> kTanhFracBits;
  return static_cast<std::int32_t>(value + scaled);
}

std::int32_t tanh_q16(std::int32_t x) {
  // The RTL takes ~x + 1 of a negative input and compares it unsigned; INT32_MIN stays 2^31,
  // which the clamp maps to 3.5 like any other large magnitude.
  const bool negative = x < 0;
  const std::uint32_t magnitude =
      negative ? ~static_cast<std::uint32_t>(x) + 1u : static_cast<std::uint32_t>(x);
  const std::int32_t t = tanh_magnitude_q16(magnitude);
  return negative ? -t : t;
}

std::int32_t sigmoid_q16(std::int32_t x) {
  const std::int32_t t = tanh_q16(x >> 1);  // arithmetic shift, as `>>> 1`
  return (t + kTanhOne) >> 1;
}

}  // namespace npukit::device
