#include "lut/nvdla_fp.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace npukit::lut::fp {
namespace {

struct Unpacked {
  std::uint32_t sign;
  std::uint32_t expo;
  std::uint32_t mant;
};

Unpacked unpack(Format f, std::uint32_t bits) {
  return {sign_of(f, bits), expo_of(f, bits), mant_of(f, bits)};
}

std::uint32_t pack(Format f, std::uint32_t sign, std::uint32_t expo, std::uint32_t mant) {
  return (sign << (f.expo_bits + f.mant_bits)) | (expo << f.mant_bits) | mant;
}

std::uint64_t low_mask(int bits) { return bits >= 64 ? ~0ull : (1ull << bits) - 1; }

int bit_length(std::uint64_t v) { return 64 - std::countl_zero(v); }

// Keep the top `keep` of `width` bits of `value`, rounding to nearest even. Returns the kept bits
// (wrapped to `keep` bits) and whether rounding carried out of them (FpMantRNE).
struct Rounded {
  std::uint64_t bits;
  bool overflow;
};
Rounded round_nearest_even(std::uint64_t value, int width, int keep) {
  const int drop = width - keep;
  const std::uint64_t top = value >> drop;
  const bool guard = (value >> (drop - 1)) & 1u;
  const bool sticky = (value & low_mask(drop - 1)) != 0;
  const bool carry = guard && (sticky || (top & 1u));
  const bool overflow = carry && top == low_mask(keep);
  return {(top + (carry ? 1u : 0u)) & low_mask(keep), overflow};
}

}  // namespace

std::uint32_t add(Format f, std::uint32_t a, std::uint32_t b) {
  const int M = f.mant_bits;
  const std::uint32_t expo_max = (1u << f.expo_bits) - 1;
  const int headroom = M + 2;          // zero bits appended below each mantissa
  const int width = headroom + M + 1;  // internal mantissa width (2M+3)
  const Unpacked x = unpack(f, a), y = unpack(f, b);
  // Only an exact zero lacks the implied 1; denormals are treated as 1.m * 2^(0-bias).
  const std::uint64_t xm = x.mant | ((x.expo == 0 && x.mant == 0) ? 0 : (1ull << M));
  const std::uint64_t ym = y.mant | ((y.expo == 0 && y.mant == 0) ? 0 : (1ull << M));
  const bool x_larger = x.expo > y.expo || (x.expo == y.expo && x.mant >= y.mant);
  std::uint32_t expo = x_larger ? x.expo : y.expo;
  const int diff = x_larger ? int(x.expo - y.expo) : int(y.expo - x.expo);
  const std::uint64_t larger = (x_larger ? xm : ym) << headroom;
  const std::uint64_t smaller_m = x_larger ? ym : xm;
  const int align = headroom - diff;  // bits shifted out of the smaller operand are lost
  const std::uint64_t smaller =
      align >= 0 ? smaller_m << align : (-align >= 64 ? 0 : smaller_m >> -align);
  const std::uint32_t sign = x_larger ? x.sign : y.sign;
  const std::uint64_t sum = x.sign == y.sign ? larger + smaller : larger - smaller;

  bool saturate = false;
  std::uint64_t mant = 0;
  if ((sum >> width) & 1u) {
    if (expo < expo_max - 1) {
      ++expo;
      mant = sum >> 1;
    } else {
      saturate = true;
    }
  } else {
    mant = sum;
    const int leading_zeros = width - bit_length(mant);
    if (mant == 0 || expo <= std::uint32_t(leading_zeros)) {
      expo = 0;  // flush to (signed) zero
      mant = 0;
    } else {
      expo -= leading_zeros;
      mant <<= leading_zeros;
    }
  }
  const Rounded r = round_nearest_even(mant, width, M + 1);
  if (r.overflow) {
    if (expo < expo_max - 1) {
      ++expo;
    } else {
      saturate = true;
    }
  }
  std::uint32_t out_mant = std::uint32_t(r.bits & low_mask(M));
  if (saturate) {
    expo = expo_max - 1;
    out_mant = std::uint32_t(low_mask(M));
  }
  if (is_nan(f, a)) return a;
  if (is_nan(f, b)) return b;
  return pack(f, sign, expo, out_mant);
}

std::uint32_t sub(Format f, std::uint32_t a, std::uint32_t b) {
  return add(f, a, b ^ (1u << (f.expo_bits + f.mant_bits)));
}

std::uint32_t mul(Format f, std::uint32_t a, std::uint32_t b) {
  const int M = f.mant_bits;
  const std::uint32_t expo_max = (1u << f.expo_bits) - 1;
  const std::uint32_t bias = (1u << (f.expo_bits - 1)) - 1;
  const Unpacked x = unpack(f, a), y = unpack(f, b);
  const bool x_zero = x.expo == 0 && x.mant == 0;
  const bool y_zero = y.expo == 0 && y.mant == 0;
  const std::uint64_t xm = x.mant | (x_zero ? 0 : (1ull << M));
  const std::uint64_t ym = y.mant | (y_zero ? 0 : (1ull << M));
  const std::uint64_t product = xm * ym;  // 2M+2 bits
  const int pm_bits = 2 * M + 1;          // product mantissa without its leading 1
  const std::uint32_t sign = x.sign ^ y.sign;
  bool zero = false, saturate = false;
  std::uint32_t expo = 0;
  std::uint64_t pmant = 0;
  if (x_zero || y_zero || x.expo + y.expo < bias) {
    zero = true;
  } else if (x.expo + y.expo >= expo_max + bias) {
    saturate = true;
  } else {
    expo = x.expo + y.expo - bias;
    if ((product >> pm_bits) & 1u) {
      if (expo < expo_max - 1) {
        ++expo;
        pmant = product & low_mask(pm_bits);
      } else {
        saturate = true;
      }
    } else {
      pmant = (product << 1) & low_mask(pm_bits);
    }
  }
  std::uint32_t out_mant = 0;
  if (!zero && !saturate) {
    const Rounded r = round_nearest_even(pmant | (1ull << pm_bits), pm_bits + 1, M + 1);
    out_mant = std::uint32_t(r.bits & low_mask(M));
    if (r.overflow) {
      ++expo;
      if (expo == expo_max) saturate = true;
    }
  }
  if (saturate) {
    expo = expo_max - 1;
    out_mant = std::uint32_t(low_mask(M));
  }
  if (zero || expo == 0) {
    expo = 0;
    out_mant = 0;
  }
  if (is_nan(f, a)) return a;
  if (is_nan(f, b)) return b;
  return pack(f, sign, expo, out_mant);
}

std::uint32_t fp16_to_fp17(std::uint32_t h) {
  const Unpacked x = unpack(kFp16, h & 0xffffu);
  if (x.expo == 31) {
    if (x.mant == 0) return pack(kFp17, x.sign, 62, 0x3ff);  // Inf -> largest finite
    return pack(kFp17, x.sign, 63, x.mant);
  }
  if (x.expo == 0) {
    if (x.mant == 0) return pack(kFp17, x.sign, 0, 0);
    const int zeros = 10 - bit_length(x.mant);  // leading zeros in 10 bits
    return pack(kFp17, x.sign, std::uint32_t(16 - zeros), (x.mant << (zeros + 1)) & 0x3ffu);
  }
  return pack(kFp17, x.sign, x.expo + 16, x.mant);
}

std::uint32_t fp16_to_fp32(std::uint32_t h) {
  const Unpacked x = unpack(kFp16, h & 0xffffu);
  if (x.expo == 31) {
    if (x.mant == 0) return pack(kFp32, x.sign, 254, 0x7fffffu);
    return pack(kFp32, x.sign, 255, x.mant);  // NaN keeps its unshifted payload
  }
  const std::uint32_t mant = x.mant << 13;
  if (x.expo == 0) {
    if (x.mant == 0) return pack(kFp32, x.sign, 0, 0);
    const int zeros = 23 - bit_length(mant);
    return pack(kFp32, x.sign, std::uint32_t(112 - zeros), (mant << (zeros + 1)) & 0x7fffffu);
  }
  return pack(kFp32, x.sign, x.expo + 112, mant);
}

std::uint32_t fp17_to_fp32(std::uint32_t v) {
  const Unpacked x = unpack(kFp17, v & 0x1ffffu);
  if (x.expo == 63) {
    if (x.mant == 0) return pack(kFp32, x.sign, 254, 0x7fffffu);
    return pack(kFp32, x.sign, 255, x.mant);
  }
  if (x.expo == 0 && x.mant == 0) return pack(kFp32, x.sign, 0, 0);
  // FP17 has no denormals: exponent field 0 still carries an implied 1.
  return pack(kFp32, x.sign, x.expo + 96, x.mant << 13);
}

std::uint32_t fp32_to_fp17(std::uint32_t f) {
  const Unpacked x = unpack(kFp32, f);
  if (is_nan(kFp32, f)) return pack(kFp17, x.sign, 63, x.mant & 0x3ffu);
  const std::uint32_t largest = pack(kFp17, x.sign, 62, 0x3ff);
  if (x.expo >= 63 + 96) return largest;
  if (x.expo < 96 - 10) return pack(kFp17, x.sign, 0, 0);
  const std::uint64_t m = x.mant | (1u << 23);
  if (x.expo <= 96) {
    // Below FP17's normal range: only a value that rounds up to 2^-30 survives.
    const int shift = int(96 - x.expo) + 1;
    const bool guard = (m >> (13 + shift - 1)) & 1u;
    const bool sticky = (m & low_mask(13 + shift - 1)) != 0;
    const bool least = (13 + shift) < 24 && ((m >> (13 + shift)) & 1u);
    const std::uint64_t kept = (m >> shift) >> 13;
    const std::uint64_t rounded = kept + ((guard && (sticky || least)) ? 1u : 0u);
    if (rounded >> 10) return pack(kFp17, x.sign, 1, std::uint32_t(rounded & 0x3ffu));
    return pack(kFp17, x.sign, 0, 0);
  }
  std::uint32_t expo = x.expo - 96;
  const Rounded r = round_nearest_even(m, 24, 11);
  if (r.overflow) {
    ++expo;
    if (expo == 63) return largest;
  }
  return pack(kFp17, x.sign, expo, std::uint32_t(r.bits & 0x3ffu));
}

std::uint32_t fraction_to_fp17(std::uint64_t fraction, int width) {
  fraction &= low_mask(width);
  if (fraction == 0) return 0;
  const int zeros = width - bit_length(fraction);
  const std::uint64_t normalized = (fraction << (zeros + 1)) & low_mask(width + 1);
  const Rounded r = round_nearest_even(normalized, width + 1, 11);
  if (r.overflow) return pack(kFp17, 0, std::uint32_t(31 - zeros), 0);
  if (31 <= zeros + 1) return 0;
  return pack(kFp17, 0, std::uint32_t(31 - zeros - 1), std::uint32_t(r.bits & 0x3ffu));
}

float fp32_value(std::uint32_t bits) { return std::bit_cast<float>(bits); }
std::uint32_t fp32_bits(float value) { return std::bit_cast<std::uint32_t>(value); }

double fp16_value(std::uint32_t h) {
  const Unpacked x = unpack(kFp16, h & 0xffffu);
  const double s = x.sign ? -1.0 : 1.0;
  if (x.expo == 31) return x.mant ? std::nan("") : s * INFINITY;
  if (x.expo == 0) return s * std::ldexp(double(x.mant), -24);
  return s * std::ldexp(double(x.mant | 0x400u), int(x.expo) - 25);
}

std::uint32_t fp16_from_double(double value) {
  if (std::isnan(value)) return 0x7e00u;
  const std::uint32_t sign = std::signbit(value) ? 0x8000u : 0u;
  double a = std::fabs(value);
  if (a >= 65520.0) return sign | 0x7bffu;  // saturate rather than produce Inf
  // Scale so one FP16 ulp is 1, then round to nearest even.
  int e = a == 0 ? -25 : std::ilogb(a);
  if (e < -14) e = -14;
  const double scaled = std::ldexp(a, 10 - e);
  double r = std::nearbyint(scaled);  // default rounding mode is nearest-even
  std::uint32_t mant = std::uint32_t(r);
  if (mant == 0) return sign;
  if (mant >= 2048) {  // rounded up to the next binade
    mant >>= 1;
    ++e;
  }
  if (mant < 1024) return sign | mant;  // denormal (e == -14)
  if (e > 15) return sign | 0x7bffu;
  return sign | (std::uint32_t(e + 15) << 10) | (mant & 0x3ffu);
}

}  // namespace npukit::lut::fp
