// NVDLA's own floating-point arithmetic as the FP16 LUT pipelines use it (nvdla-lut.md 1.4, 1.7,
// 2). It is not IEEE 754: only an all-zero pattern is zero (denormal inputs get an implied 1),
// results below the normal range flush to zero, results above it saturate to the largest finite
// value instead of becoming Inf, the smaller addend loses the bits it shifts out (no sticky), and
// rounding is to nearest even. Values are carried as raw bit patterns: FP32 (1/8/23), FP17 (1/6/10,
// bias 31) and FP16 (1/5/10) in the low bits of a uint32_t.
#pragma once

#include <cstdint>

namespace npukit::lut::fp {

struct Format {
  int expo_bits;
  int mant_bits;
};
inline constexpr Format kFp32{8, 23};
inline constexpr Format kFp17{6, 10};
inline constexpr Format kFp16{5, 10};

// a + b and a * b in `format` (NVDLA FpAdd / FpMul).
std::uint32_t add(Format format, std::uint32_t a, std::uint32_t b);
std::uint32_t sub(Format format, std::uint32_t a, std::uint32_t b);
std::uint32_t mul(Format format, std::uint32_t a, std::uint32_t b);

inline std::uint32_t fp32_add(std::uint32_t a, std::uint32_t b) { return add(kFp32, a, b); }
inline std::uint32_t fp32_sub(std::uint32_t a, std::uint32_t b) { return sub(kFp32, a, b); }
inline std::uint32_t fp17_add(std::uint32_t a, std::uint32_t b) { return add(kFp17, a, b); }
inline std::uint32_t fp17_mul(std::uint32_t a, std::uint32_t b) { return mul(kFp17, a, b); }

// Format conversions with NVDLA's rules (nvdla_float.h Fp16ToFp17, Fp16ToFp32, Fp17ToFp32,
// Fp32ToFp17): widening keeps FP16 denormals exact, Inf becomes the largest finite value, and
// narrowing FP32 to FP17 rounds to nearest even and flushes results below 2^-30 to zero.
std::uint32_t fp16_to_fp17(std::uint32_t h);
std::uint32_t fp16_to_fp32(std::uint32_t h);
std::uint32_t fp17_to_fp32(std::uint32_t v);
std::uint32_t fp32_to_fp17(std::uint32_t f);

// fraction / 2^width as an FP17 (FpFractionToFloat<width,6,10>): RNE to 11 significant bits, zero
// below 2^-30. width is 16 (CDP) or 35 (SDP).
std::uint32_t fraction_to_fp17(std::uint64_t fraction, int width);

// Field helpers.
inline std::uint32_t expo_of(Format f, std::uint32_t bits) {
  return (bits >> f.mant_bits) & ((1u << f.expo_bits) - 1);
}
inline std::uint32_t mant_of(Format f, std::uint32_t bits) {
  return bits & ((1u << f.mant_bits) - 1);
}
inline std::uint32_t sign_of(Format f, std::uint32_t bits) {
  return (bits >> (f.mant_bits + f.expo_bits)) & 1u;
}
inline bool is_nan(Format f, std::uint32_t bits) {
  return expo_of(f, bits) == (1u << f.expo_bits) - 1 && mant_of(f, bits) != 0;
}

// Host conversions used by the designer and reports (IEEE, not NVDLA arithmetic).
float fp32_value(std::uint32_t bits);
std::uint32_t fp32_bits(float value);
double fp16_value(std::uint32_t h);
// Nearest FP16 (IEEE round to nearest even, with denormals; saturates to +-65504).
std::uint32_t fp16_from_double(double value);

}  // namespace npukit::lut::fp
