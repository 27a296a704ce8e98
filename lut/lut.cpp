#include "lut/lut.h"

#include "common/error.h"
#include "lut/nvdla_fp.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace npukit::lut {
namespace {

using i128 = __int128;

constexpr std::uint64_t kFrac35One = 1ull << 35;

// Register offsets shared by both units.
constexpr std::uint32_t kAccessCfg = 0x08;
constexpr std::uint32_t kAccessData = 0x0c;
constexpr std::uint32_t kLutCfg = 0x10;
constexpr std::uint32_t kLutInfo = 0x14;

struct Layout {  // offsets that differ between the SDP and the CDP
  std::uint32_t le_start, le_end, lo_start, lo_end;  // CDP: the _LOW halves; _HIGH is +4
  std::uint32_t le_scale, le_shift, lo_scale, lo_shift;
  std::uint32_t perf_uflow, perf_oflow, perf_hybrid, perf_le_hit, perf_lo_hit;
};
constexpr Layout kSdpLayout{0x18, 0x1c, 0x20, 0x24, 0x28, 0x2c, 0x30,
                            0x34, 0xe4, 0xe8, 0xf0, 0xf4, 0xf8};
constexpr Layout kCdpLayout{0x18, 0x20, 0x28, 0x30, 0x38, 0x3c, 0x40,
                            0x44, 0xa4, 0xa8, 0xac, 0xb0, 0xb4};
const Layout& layout(Unit unit) { return unit == Unit::kSdp ? kSdpLayout : kCdpLayout; }

constexpr RegisterInfo kSdpRegisters[] = {
    {"S_LUT_ACCESS_CFG", 0x08, 0x303ff, false}, {"S_LUT_ACCESS_DATA", 0x0c, 0xffff, false},
    {"S_LUT_CFG", 0x10, 0x71, false},           {"S_LUT_INFO", 0x14, 0xffffff, false},
    {"S_LUT_LE_START", 0x18, ~0u, false},       {"S_LUT_LE_END", 0x1c, ~0u, false},
    {"S_LUT_LO_START", 0x20, ~0u, false},       {"S_LUT_LO_END", 0x24, ~0u, false},
    {"S_LUT_LE_SLOPE_SCALE", 0x28, ~0u, false}, {"S_LUT_LE_SLOPE_SHIFT", 0x2c, 0x3ff, false},
    {"S_LUT_LO_SLOPE_SCALE", 0x30, ~0u, false}, {"S_LUT_LO_SLOPE_SHIFT", 0x34, 0x3ff, false},
    {"D_PERF_LUT_UFLOW", 0xe4, ~0u, true},      {"D_PERF_LUT_OFLOW", 0xe8, ~0u, true},
    {"D_PERF_LUT_HYBRID", 0xf0, ~0u, true},     {"D_PERF_LUT_LE_HIT", 0xf4, ~0u, true},
    {"D_PERF_LUT_LO_HIT", 0xf8, ~0u, true},
};
constexpr RegisterInfo kCdpRegisters[] = {
    {"S_LUT_ACCESS_CFG", 0x08, 0x303ff, false}, {"S_LUT_ACCESS_DATA", 0x0c, 0xffff, false},
    {"S_LUT_CFG", 0x10, 0x71, false},           {"S_LUT_INFO", 0x14, 0xffffff, false},
    {"S_LUT_LE_START_LOW", 0x18, ~0u, false},   {"S_LUT_LE_START_HIGH", 0x1c, 0x3f, false},
    {"S_LUT_LE_END_LOW", 0x20, ~0u, false},     {"S_LUT_LE_END_HIGH", 0x24, 0x3f, false},
    {"S_LUT_LO_START_LOW", 0x28, ~0u, false},   {"S_LUT_LO_START_HIGH", 0x2c, 0x3f, false},
    {"S_LUT_LO_END_LOW", 0x30, ~0u, false},     {"S_LUT_LO_END_HIGH", 0x34, 0x3f, false},
    {"S_LUT_LE_SLOPE_SCALE", 0x38, ~0u, false}, {"S_LUT_LE_SLOPE_SHIFT", 0x3c, 0x3ff, false},
    {"S_LUT_LO_SLOPE_SCALE", 0x40, ~0u, false}, {"S_LUT_LO_SLOPE_SHIFT", 0x44, 0x3ff, false},
    {"D_PERF_LUT_UFLOW", 0xa4, ~0u, true},      {"D_PERF_LUT_OFLOW", 0xa8, ~0u, true},
    {"D_PERF_LUT_HYBRID", 0xac, ~0u, true},     {"D_PERF_LUT_LE_HIT", 0xb0, ~0u, true},
    {"D_PERF_LUT_LO_HIT", 0xb4, ~0u, true},
};

std::int64_t sign_extend(std::uint64_t value, int bits) {
  const std::uint64_t m = 1ull << (bits - 1);
  value &= (bits == 64) ? ~0ull : ((1ull << bits) - 1);
  return std::int64_t((value ^ m) - m);
}

int floor_log2(std::uint64_t v) { return 63 - std::countl_zero(v); }

// round-half-away-from-zero of v / 2^shift; a negative shift multiplies (exact in 128 bits for
// the operand widths used here).
i128 round_shift(i128 v, int shift) {
  if (shift <= 0) return v * (i128(1) << -shift);
  const i128 half = i128(1) << (shift - 1);
  const i128 mag = v < 0 ? -v : v;
  const i128 q = (mag + half) >> shift;
  return v < 0 ? -q : q;
}

i128 clamp_bits(i128 v, int bits) {
  const i128 hi = (i128(1) << (bits - 1)) - 1, lo = -(i128(1) << (bits - 1));
  return std::clamp(v, lo, hi);
}

struct TableIndex {
  bool uflow = false, oflow = false;
  int index = 0;
  std::uint64_t frac = 0;  // SDP: 35-bit; CDP: 16-bit
  bool hit() const { return !uflow && !oflow; }
};

TableIndex make_oflow(int entries) { return {false, true, entries, 0}; }
TableIndex make_uflow() { return {true, false, 0, 0}; }

// ---- SDP index generation (sdp_y_idx.cpp) ----

TableIndex sdp_int_linear(std::int64_t x, std::int64_t start, int sel, int entries) {
  if (x <= start) return make_uflow();
  const std::uint64_t d = std::uint64_t(x - start);  // < 2^32
  std::uint64_t idx;
  if (sel >= 0) {
    idx = sel >= 40 ? 0 : d >> sel;
  } else {
    idx = (-sel >= 10) ? 511 : std::min<std::uint64_t>(d << -sel, 511);
  }
  idx = std::min<std::uint64_t>(idx, 511);
  if (idx >= std::uint64_t(entries)) return make_oflow(entries);
  std::uint64_t frac = 0;
  if (sel > 0) {
    const std::uint64_t low = sel >= 32 ? d : (d & ((1ull << sel) - 1));
    frac = sel <= 35 ? (low << (35 - sel)) : (sel - 35 >= 64 ? 0 : low >> (sel - 35));
  }
  return {false, false, int(idx), frac};
}

TableIndex sdp_int_exponent(std::int64_t x, std::int64_t start, int offset) {
  if (x <= start) return make_uflow();
  const std::uint64_t d = std::uint64_t(x - start);
  const int log = floor_log2(d);
  if (log < offset) return make_uflow();
  const int k = log - offset;
  if (k >= kLeEntries - 1) return make_oflow(kLeEntries - 1);
  const std::uint64_t mantissa = d - (1ull << log);
  return {false, false, k, mantissa << (35 - log)};
}

// x - start in NVDLA FP32; underflow when negative, zero (also after flush) or NaN.
bool fp_difference(std::uint32_t x, std::uint32_t start, std::uint32_t& v) {
  v = fp::fp32_sub(x, start);
  return !(fp::sign_of(fp::kFp32, v) || v == 0 || fp::is_nan(fp::kFp32, v));
}

TableIndex sdp_fp_linear(std::uint32_t x, std::uint32_t start, int sel, int entries) {
  std::uint32_t v;
  if (!fp_difference(x, start, v)) return make_uflow();
  // FpFloatToIntFrac<8,23,8,9,35>: the unbiased exponent lives in 8 signed bits.
  const int abs_expo = int(std::int8_t(std::uint8_t(fp::expo_of(fp::kFp32, v) - 127)));
  const std::uint64_t m = fp::mant_of(fp::kFp32, v) | (1u << 23);
  const int lshift = abs_expo - sel - 23;
  std::uint64_t idx;
  std::uint64_t frac = 0;
  if (lshift >= 0) {
    idx = 511;  // m >= 2^23
  } else {
    idx = -lshift >= 24 ? 0 : std::min<std::uint64_t>(m >> -lshift, 511);
    const int t = 35 + lshift;
    frac = t >= 0 ? ((m << t) & (kFrac35One - 1)) : (-t >= 64 ? 0 : m >> -t);
  }
  if (idx >= std::uint64_t(entries)) return make_oflow(entries);
  return {false, false, int(idx), frac};
}

TableIndex sdp_fp_exponent(std::uint32_t x, std::uint32_t start, int offset) {
  std::uint32_t v;
  if (!fp_difference(x, start, v)) return make_uflow();
  const int e = int(fp::expo_of(fp::kFp32, v)) - 127;
  if (e < offset) return make_uflow();
  const int k = e - offset;
  if (k >= kLeEntries - 1) return make_oflow(kLeEntries - 1);
  return {false, false, k, std::uint64_t(fp::mant_of(fp::kFp32, v)) << 12};
}

// ---- CDP index generation (NV_NVDLA_cdp.cpp lookup_lut*, cdp_hls_wrapper.cpp) ----

std::uint64_t cdp_fraction16(std::uint64_t low_bits, int bits) {
  return bits > 16 ? (low_bits >> (bits - 16)) : (low_bits << (16 - bits));
}

TableIndex cdp_int_linear(std::int64_t x, std::int64_t start, int sel, int entries) {
  const std::int64_t d = x - start;
  if (d <= 0) return make_uflow();
  if (sel < 0) {
    if (-sel >= 9 || (d << -sel) >= entries) return make_oflow(entries);
    return {false, false, int(d << -sel), 0};
  }
  const std::int64_t idx = sel >= 63 ? 0 : d >> sel;
  if (idx >= entries) return make_oflow(entries);
  const std::uint64_t low = sel >= 63 ? std::uint64_t(d) : (std::uint64_t(d) & ((1ull << sel) - 1));
  return {false, false, int(idx), sel == 0 ? 0 : cdp_fraction16(low, sel)};
}

TableIndex cdp_int_exponent(std::int64_t x, std::int64_t start, int offset) {
  const std::int64_t d = x - start;
  if (d <= 0) return make_uflow();
  const int log = floor_log2(std::uint64_t(d));
  const int k = log - offset;
  if (k < 0) return make_uflow();
  if (k >= kLeEntries - 1) return make_oflow(kLeEntries - 1);
  const std::uint64_t mantissa = std::uint64_t(d) - (1ull << log);
  return {false, false, k, log == 0 ? 0 : cdp_fraction16(mantissa, log)};
}

TableIndex cdp_fp_linear(std::uint32_t x, std::uint32_t start, int sel, int entries) {
  std::uint32_t v;
  if (!fp_difference(x, start, v)) return make_uflow();
  const std::uint32_t expo = fp::expo_of(fp::kFp32, v);
  if (expo == 255) return make_oflow(entries);  // +Inf pattern: the host float is infinite
  // The cmod scales with host float arithmetic, which is exact here: s = v * 2^-sel.
  const std::uint64_t m = fp::mant_of(fp::kFp32, v) | (1u << 23);
  const int sh = int(expo) - 150 - sel;  // s = m * 2^sh
  if (sh >= 0) {
    if (sh >= 9) return make_oflow(entries);
    const std::uint64_t idx = m << sh;
    if (idx >= std::uint64_t(entries)) return make_oflow(entries);
    return {false, false, int(idx), 0};
  }
  const int r = -sh;
  const std::uint64_t idx = r >= 64 ? 0 : m >> r;
  if (idx >= std::uint64_t(entries)) return make_oflow(entries);
  const std::uint64_t rem = r >= 64 ? m : m & ((1ull << r) - 1);
  std::uint64_t f16;
  if (r <= 16) {
    f16 = rem << (16 - r);
  } else {
    f16 = (r - 16) >= 64 ? 0 : rem >> (r - 16);
  }
  return {false, false, int(idx), f16 & 0xffff};
}

TableIndex cdp_fp_exponent(std::uint32_t x, std::uint32_t start, int offset) {
  std::uint32_t v;
  if (!fp_difference(x, start, v)) return make_uflow();
  const int k = int(fp::expo_of(fp::kFp32, v)) - 127 - offset;
  if (k < 0) return make_uflow();
  if (k >= kLeEntries - 1) return make_oflow(kLeEntries - 1);
  return {false, false, k, (v >> 7) & 0xffffu};
}

TableIndex index_of(const LutConfig& c, Table table, std::int64_t x) {
  const bool le = table == Table::kLe;
  const int entries = le ? kLeEntries - 1 : kLoEntries - 1;
  const std::int64_t start = le ? c.le_start : c.lo_start;
  const int sel = le ? c.le_index_select : c.lo_index_select;
  const bool exponent = le && !c.le_linear;
  const auto xs = std::uint32_t(x), ss = std::uint32_t(start);
  if (c.unit == Unit::kSdp) {
    if (is_float(c.precision)) {
      return exponent ? sdp_fp_exponent(xs, ss, c.le_index_offset)
                      : sdp_fp_linear(xs, ss, sel, entries);
    }
    return exponent ? sdp_int_exponent(x, start, c.le_index_offset)
                    : sdp_int_linear(x, start, sel, entries);
  }
  if (is_float(c.precision)) {
    return exponent ? cdp_fp_exponent(xs, ss, c.le_index_offset)
                    : cdp_fp_linear(xs, ss, sel, entries);
  }
  return exponent ? cdp_int_exponent(x, start, c.le_index_offset)
                  : cdp_int_linear(x, start, sel, entries);
}

// ---- interpolation and extrapolation ----

std::int64_t sat32(i128 v) { return std::int64_t(clamp_bits(v, 32)); }
std::int64_t sat16(i128 v) { return std::int64_t(clamp_bits(v, 16)); }

struct FlowOperands {
  std::uint16_t y0;
  Slope slope;
  std::int64_t offset;  // START (underflow) or END (overflow)
  bool exponent_bias;   // LE underflow in exponent mode: subtract 2^offset as well
};

FlowOperands flow_operands(const LutConfig& c, Table table, const TableIndex& ti) {
  const bool le = table == Table::kLe;
  const int last = le ? kLeEntries - 1 : kLoEntries - 1;
  if (ti.uflow) {
    return {le ? c.le[0] : c.lo[0], le ? c.le_uflow : c.lo_uflow, le ? c.le_start : c.lo_start,
            le && !c.le_linear};
  }
  return {le ? c.le[last] : c.lo[last], le ? c.le_oflow : c.lo_oflow, le ? c.le_end : c.lo_end,
          false};
}

std::int64_t sdp_int_result(const LutConfig& c, Table table, const TableIndex& ti, std::int64_t x) {
  const auto& t = table == Table::kLe ? std::span<const std::uint16_t>(c.le)
                                      : std::span<const std::uint16_t>(c.lo);
  if (ti.hit()) {
    const i128 y0 = std::int16_t(t[ti.index]), y1 = std::int16_t(t[ti.index + 1]);
    const i128 o = y0 * i128(kFrac35One - ti.frac) + y1 * i128(ti.frac);
    return sat32(round_shift(o, 35));
  }
  const FlowOperands f = flow_operands(c, table, ti);
  // RTL: bias = off[7] ? 0 : 1 << off in 32 bits (DECISIONS.md 13).
  const int off = c.le_index_offset;
  const i128 bias = (f.exponent_bias && off >= 0 && off < 32) ? (i128(1) << off) : 0;
  const i128 a = i128(x) - (bias + f.offset);
  const i128 b = a * f.slope.scale;
  const i128 shifted = sat32(round_shift(b, f.slope.shift));
  return sat32(i128(std::int16_t(f.y0)) + shifted);
}

std::int64_t cdp_int_result(const LutConfig& c, Table table, const TableIndex& ti, std::int64_t x) {
  const auto& t = table == Table::kLe ? std::span<const std::uint16_t>(c.le)
                                      : std::span<const std::uint16_t>(c.lo);
  if (ti.hit()) {
    const i128 y0 = std::int16_t(t[ti.index]), y1 = std::int16_t(t[ti.index + 1]);
    return sat16(y0 + round_shift((y1 - y0) * i128(ti.frac), 16));
  }
  const FlowOperands f = flow_operands(c, table, ti);
  // The cmod's double-precision convert() is exact here: any product beyond 2^53 saturates the
  // 16-bit result whatever its rounding. 2^off beyond 2^62 saturates the same way.
  const int off = std::min(c.le_index_offset, 62);
  const i128 bias = (f.exponent_bias && off >= 0) ? (i128(1) << off) : 0;
  const i128 a = i128(x) - f.offset - bias;
  const i128 converted = clamp_bits(round_shift(a * f.slope.scale, f.slope.shift), 56);
  return sat16(i128(std::int16_t(f.y0)) + converted);
}

std::uint32_t sdp_fp_result(const LutConfig& c, Table table, const TableIndex& ti,
                            std::uint32_t x) {
  const auto& t = table == Table::kLe ? std::span<const std::uint16_t>(c.le)
                                      : std::span<const std::uint16_t>(c.lo);
  if (ti.hit()) {
    const std::uint32_t a0 =
        ti.frac == 0 ? 0x7c00u : fp::fraction_to_fp17(kFrac35One - ti.frac, 35);
    const std::uint32_t a1 = fp::fraction_to_fp17(ti.frac, 35);
    const std::uint32_t b0 = fp::fp17_mul(a0, fp::fp16_to_fp17(t[ti.index]));
    const std::uint32_t b1 = fp::fp17_mul(a1, fp::fp16_to_fp17(t[ti.index + 1]));
    return fp::fp17_to_fp32(fp::fp17_add(b0, b1));
  }
  const FlowOperands f = flow_operands(c, table, ti);
  // RTL builds the bias directly as FP32 {0, off + 127, 0} (8-bit exponent field).
  const std::uint32_t bias =
      f.exponent_bias ? (std::uint32_t(c.le_index_offset + 127) & 0xffu) << 23 : 0u;
  const std::uint32_t ob = fp::fp32_add(std::uint32_t(f.offset), bias);
  const std::uint32_t a = fp::fp32_to_fp17(fp::fp32_sub(x, ob));
  const std::uint32_t b = fp::fp17_mul(a, fp::fp16_to_fp17(std::uint16_t(f.slope.scale)));
  return fp::fp17_to_fp32(fp::fp17_add(fp::fp16_to_fp17(f.y0), b));
}

std::uint32_t cdp_fp_result(const LutConfig& c, Table table, const TableIndex& ti,
                            std::uint32_t x) {
  const auto& t = table == Table::kLe ? std::span<const std::uint16_t>(c.le)
                                      : std::span<const std::uint16_t>(c.lo);
  if (ti.hit()) {
    const std::uint32_t l0 = t[ti.index], l1 = t[ti.index + 1];
    const std::uint32_t diff =
        fp::fp32_to_fp17(fp::fp32_sub(fp::fp16_to_fp32(l1), fp::fp16_to_fp32(l0)));
    const std::uint32_t product = fp::fp17_mul(diff, fp::fraction_to_fp17(ti.frac, 16));
    return fp::fp17_to_fp32(fp::fp17_add(product, fp::fp16_to_fp17(l0)));
  }
  const FlowOperands f = flow_operands(c, table, ti);
  std::uint32_t reference = std::uint32_t(f.offset);
  if (f.exponent_bias) {
    // The cmod adds pow(2, off) as a float, or nothing for off <= -127.
    const int off = c.le_index_offset;
    const std::uint32_t bias = off <= -127 ? 0u : std::uint32_t(off + 127) << 23;
    reference = fp::fp32_add(reference, bias);
  }
  const std::uint32_t diff = fp::fp32_to_fp17(fp::fp32_sub(x, reference));
  const std::uint32_t product = fp::fp17_mul(diff, fp::fp16_to_fp17(std::uint16_t(f.slope.scale)));
  return fp::fp17_to_fp32(fp::fp17_add(product, fp::fp16_to_fp17(f.y0)));
}

void increment(std::uint32_t& counter) {
  if (counter != 0xffffffffu) ++counter;
}

}  // namespace

Unit parse_unit(std::string_view name) {
  if (name == "sdp") return Unit::kSdp;
  if (name == "cdp") return Unit::kCdp;
  fail("unknown unit '{}': expected \"sdp\" or \"cdp\"", name);
}

Precision parse_precision(Unit unit, std::string_view name) {
  if (name == "fp16") return Precision::kFp16;
  if (unit == Unit::kSdp) {
    if (name == "int" || name == "int8" || name == "int16") return Precision::kInt;
    fail("unknown SDP precision '{}': expected \"int\" (or int8/int16) or \"fp16\"", name);
  }
  if (name == "int8") return Precision::kInt8;
  if (name == "int16") return Precision::kInt16;
  fail("unknown CDP precision '{}': expected \"int8\", \"int16\" or \"fp16\"", name);
}

std::string_view unit_name(Unit unit) { return unit == Unit::kSdp ? "sdp" : "cdp"; }

std::string_view precision_name(Precision precision) {
  switch (precision) {
    case Precision::kInt:
      return "int";
    case Precision::kInt8:
      return "int8";
    case Precision::kInt16:
      return "int16";
    case Precision::kFp16:
      return "fp16";
  }
  return "?";
}

std::int64_t input_min(Unit unit, Precision precision) {
  if (is_float(precision)) return 0;
  if (unit == Unit::kSdp) return std::numeric_limits<std::int32_t>::min();
  return precision == Precision::kInt8 ? -(std::int64_t(1) << 21) : -(std::int64_t(1) << 37);
}

std::int64_t input_max(Unit unit, Precision precision) {
  if (is_float(precision)) return 0xffffffffll;
  if (unit == Unit::kSdp) return std::numeric_limits<std::int32_t>::max();
  return precision == Precision::kInt8 ? (std::int64_t(1) << 21) - 1 : (std::int64_t(1) << 37) - 1;
}

Element evaluate(const LutConfig& c, std::int64_t x) {
  if (x < input_min(c.unit, c.precision) || x > input_max(c.unit, c.precision)) {
    fail("LUT input {} is outside the {} {} range [{}, {}]", x, unit_name(c.unit),
         precision_name(c.precision), input_min(c.unit, c.precision),
         input_max(c.unit, c.precision));
  }
  const TableIndex le = index_of(c, Table::kLe, x);
  const TableIndex lo = index_of(c, Table::kLo, x);
  Element e;
  e.le_hit = le.hit();
  e.lo_hit = lo.hit();
  e.le_uflow = le.uflow;
  e.le_oflow = le.oflow;
  e.lo_uflow = lo.uflow;
  e.lo_oflow = lo.oflow;
  bool pick_lo;
  if (le.uflow && lo.uflow) {
    pick_lo = c.uflow_priority_lo;
  } else if (le.oflow && lo.oflow) {
    pick_lo = c.oflow_priority_lo;
  } else if (e.le_hit == e.lo_hit) {  // both hit, or one underflows and the other overflows
    pick_lo = c.hybrid_priority_lo;
  } else {
    pick_lo = e.lo_hit;
  }
  e.selected = pick_lo ? Table::kLo : Table::kLe;
  const TableIndex& ti = pick_lo ? lo : le;
  e.index = ti.index;
  e.uflow = ti.uflow;
  e.oflow = ti.oflow;
  if (c.unit == Unit::kSdp) {
    e.output = is_float(c.precision) ? sdp_fp_result(c, e.selected, ti, std::uint32_t(x))
                                     : sdp_int_result(c, e.selected, ti, x);
  } else {
    e.output = is_float(c.precision) ? cdp_fp_result(c, e.selected, ti, std::uint32_t(x))
                                     : cdp_int_result(c, e.selected, ti, x);
  }
  return e;
}

void count(Unit unit, const Element& e, Stats& s) {
  if (unit == Unit::kSdp) {
    // Per table, whatever was selected, plus the selected outcome (nvdla-lut.md 1.8).
    if (e.le_hit) increment(s.le_hit);
    if (e.lo_hit) increment(s.lo_hit);
    if (e.uflow) increment(s.uflow);
    if (e.oflow) increment(s.oflow);
    if (!e.uflow && !e.oflow) increment(s.hybrid);
    return;
  }
  // CDP: one exclusive category per element (nvdla-lut.md 2).
  if (e.le_uflow && e.lo_uflow) {
    increment(s.uflow);
  } else if (e.le_oflow && e.lo_oflow) {
    increment(s.oflow);
  } else if (e.le_hit != e.lo_hit) {
    increment(e.le_hit ? s.le_hit : s.lo_hit);
  } else {
    increment(s.hybrid);
  }
}

FieldRange le_select_range(Unit unit, Precision precision) {
  if (is_float(precision)) return {-128, 121};
  if (unit == Unit::kSdp) return {-6, 25};
  return precision == Precision::kInt8 ? FieldRange{-6, 15} : FieldRange{-6, 31};
}
FieldRange lo_select_range(Unit unit, Precision precision) {
  if (is_float(precision)) return {-128, 119};
  if (unit == Unit::kSdp) return {-8, 23};
  return precision == Precision::kInt8 ? FieldRange{-8, 13} : FieldRange{-8, 29};
}
FieldRange offset_range(Unit unit, Precision precision) {
  if (is_float(precision)) return {-126, 127};
  if (unit == Unit::kSdp) return {-64, 31};
  return precision == Precision::kInt8 ? FieldRange{-64, 20} : FieldRange{-64, 36};
}

namespace {

// END - START as a real number, for the constraint check.
long double span_of(const LutConfig& c, std::int64_t start, std::int64_t end) {
  if (is_float(c.precision)) {
    return (long double)fp::fp32_value(std::uint32_t(end)) -
           (long double)fp::fp32_value(std::uint32_t(start));
  }
  return (long double)(end - start);
}

std::string register_value_text(const LutConfig& c, std::int64_t v) {
  if (is_float(c.precision)) {
    return fmt::format("{} (0x{:08x})", fp::fp32_value(std::uint32_t(v)), std::uint32_t(v));
  }
  return fmt::format("{}", v);
}

}  // namespace

std::vector<Diagnostic> check_constraints(const LutConfig& c) {
  std::vector<Diagnostic> out;
  auto warn = [&](std::string code, std::string message) {
    out.push_back({Diagnostic::Severity::kWarning, std::move(code), std::move(message)});
  };
  const std::string where = fmt::format("{} {}", unit_name(c.unit), precision_name(c.precision));
  const FieldRange le_sel = le_select_range(c.unit, c.precision),
                   lo_sel = lo_select_range(c.unit, c.precision),
                   off = offset_range(c.unit, c.precision);
  if (c.le_linear && (c.le_index_select < le_sel.lo || c.le_index_select > le_sel.hi)) {
    warn("select_range", fmt::format("LE_INDEX_SELECT {} is outside [{}, {}] documented for {}",
                                     c.le_index_select, le_sel.lo, le_sel.hi, where));
  }
  if (c.lo_index_select < lo_sel.lo || c.lo_index_select > lo_sel.hi) {
    warn("select_range", fmt::format("LO_INDEX_SELECT {} is outside [{}, {}] documented for {}",
                                     c.lo_index_select, lo_sel.lo, lo_sel.hi, where));
  }
  if (!c.le_linear && (c.le_index_offset < off.lo || c.le_index_offset > off.hi)) {
    warn("offset_range", fmt::format("LE_INDEX_OFFSET {} is outside [{}, {}] documented for {}",
                                     c.le_index_offset, off.lo, off.hi, where));
  }
  // END - START must equal the span the index select (or offset) implies (programming guide).
  const long double max_span =
      is_float(c.precision)  ? (long double)std::numeric_limits<float>::max()
      : c.unit == Unit::kSdp ? (long double)std::numeric_limits<std::int32_t>::max()
                             : (long double)((std::int64_t(1) << 37) - 1);
  // Exponent mode: END = START + 2^(OFFSET + 64), clamped to the largest START/END value.
  auto check_span = [&](std::string_view table, std::int64_t start, std::int64_t end, int log2,
                        std::string_view rule, bool clamp) {
    long double want = std::ldexp((long double)1, log2);
    if (clamp) {
      const long double start_value = is_float(c.precision)
                                          ? (long double)fp::fp32_value(std::uint32_t(start))
                                          : (long double)start;
      want = std::min(want, max_span - start_value);
    }
    const long double got = span_of(c, start, end);
    if (got != want) {
      warn("end_start_mismatch",
           fmt::format("{} END - START is {} but {} requires {} (START {}, END {}); overflow "
                       "extrapolation starts at END",
                       table, double(got), rule, double(want), register_value_text(c, start),
                       register_value_text(c, end)));
    }
  };
  if (c.le_linear) {
    check_span("LE", c.le_start, c.le_end, c.le_index_select + 6, "2^(LE_INDEX_SELECT + 6)", false);
  } else {
    check_span("LE", c.le_start, c.le_end, c.le_index_offset + 64,
               "2^(LE_INDEX_OFFSET + 64) (END clamped to the largest value)", true);
  }
  check_span("LO", c.lo_start, c.lo_end, c.lo_index_select + 8, "2^(LO_INDEX_SELECT + 8)", false);
  if (c.unit == Unit::kCdp && c.precision == Precision::kInt8) {
    for (auto [name, v] : {std::pair{"LE_START", c.le_start}, std::pair{"LE_END", c.le_end},
                           std::pair{"LO_START", c.lo_start}, std::pair{"LO_END", c.lo_end}}) {
      if (v < -(std::int64_t(1) << 21) || v >= (std::int64_t(1) << 21)) {
        warn("int8_start_width",
             fmt::format("CDP INT8 {} = {} is not a 22-bit signed value", name, v));
      }
    }
  }
  if (is_float(c.precision)) {
    for (auto [name, v] : {std::pair{"LE_START", c.le_start}, std::pair{"LE_END", c.le_end},
                           std::pair{"LO_START", c.lo_start}, std::pair{"LO_END", c.lo_end}}) {
      if (fp::is_nan(fp::kFp32, std::uint32_t(v))) {
        warn("nan_register", fmt::format("{} is a NaN (0x{:08x})", name, std::uint32_t(v)));
      }
    }
  }
  return out;
}

std::span<const RegisterInfo> registers(Unit unit) {
  if (unit == Unit::kSdp) return kSdpRegisters;
  return kCdpRegisters;
}

const RegisterInfo& find_register(Unit unit, std::string_view name) {
  for (const auto& r : registers(unit)) {
    if (r.name == name) return r;
  }
  std::string names;
  for (const auto& r : registers(unit))
    names += fmt::format("{}{}", names.empty() ? "" : ", ", r.name);
  fail("unknown {} LUT register '{}' (use NVDLA names without the unit prefix: {})",
       unit_name(unit), name, names);
}

std::uint32_t unit_base_address(Unit unit) { return unit == Unit::kSdp ? 0xb000u : 0xf000u; }

LutUnit::LutUnit(Unit unit, Precision precision) : unit_(unit), precision_(precision) {
  if (unit == Unit::kSdp && (precision == Precision::kInt8 || precision == Precision::kInt16)) {
    precision_ = Precision::kInt;
  }
  if (unit == Unit::kCdp && precision == Precision::kInt) {
    fail("the CDP has no plain \"int\" precision: use int8 or int16");
  }
}

std::uint32_t& LutUnit::reg(std::uint32_t offset) { return regs_[offset / 4]; }
std::uint32_t LutUnit::reg_value(std::uint32_t offset) const { return regs_[offset / 4]; }

void LutUnit::report(Diagnostic::Severity severity, std::string code, std::string message) {
  diagnostics_.push_back({severity, std::move(code), std::move(message)});
}

void LutUnit::data_access(bool is_write, std::uint32_t value, std::uint32_t* read_value) {
  const bool le = access_table_ == 0;
  const std::uint32_t entries = le ? kLeEntries : kLoEntries;
  const char* table = le ? "LE" : "LO";
  if (is_write) {
    if (!access_write_) {
      report(Diagnostic::Severity::kWarning, "data_write_in_read_mode",
             fmt::format("S_LUT_ACCESS_DATA written while S_LUT_ACCESS_CFG selects READ: "
                         "{} entry {} not changed",
                         table, access_addr_));
    } else if (access_addr_ >= entries) {
      report(Diagnostic::Severity::kError, "write_past_end",
             fmt::format("write of 0x{:04x} to {} table entry {} is past its last entry {} "
                         "(undefined on the hardware; the write is dropped)",
                         value & 0xffffu, table, access_addr_, entries - 1));
    } else if (le) {
      le_[access_addr_] = std::uint16_t(value);
    } else {
      lo_[access_addr_] = std::uint16_t(value);
    }
    config_dirty_ = true;
  } else {
    std::uint32_t v = 0;
    if (access_write_) {
      report(Diagnostic::Severity::kWarning, "data_read_in_write_mode",
             fmt::format("S_LUT_ACCESS_DATA read while S_LUT_ACCESS_CFG selects WRITE: returns 0"));
    } else if (access_addr_ >= entries) {
      report(Diagnostic::Severity::kError, "read_past_end",
             fmt::format("read of {} table entry {} is past its last entry {} (returns 0)", table,
                         access_addr_, entries - 1));
    } else {
      v = le ? le_[access_addr_] : lo_[access_addr_];
    }
    *read_value = v;
  }
  access_addr_ = (access_addr_ + 1) & 0x3ffu;  // RTL: 10-bit, increments on every access
}

void LutUnit::write(std::string_view name, std::uint32_t value) {
  const RegisterInfo& info = find_register(unit_, name);
  if (info.read_only) {
    report(Diagnostic::Severity::kError, "read_only_register",
           fmt::format("{} is a read-only status register; the write is ignored", name));
    return;
  }
  if (value & ~info.valid_bits) {
    report(Diagnostic::Severity::kWarning, "reserved_bits",
           fmt::format("{} write 0x{:08x} sets undefined bits 0x{:08x}; they are ignored", name,
                       value, value & ~info.valid_bits));
    value &= info.valid_bits;
  }
  if (info.offset == kAccessData) {
    data_access(true, value, nullptr);
    return;
  }
  if (info.offset == kAccessCfg) {
    access_addr_ = value & 0x3ffu;
    access_table_ = (value >> 16) & 1u;
    access_write_ = (value >> 17) & 1u;
    const std::uint32_t entries = access_table_ == 0 ? kLeEntries : kLoEntries;
    if (access_addr_ >= entries) {
      report(Diagnostic::Severity::kWarning, "address_past_end",
             fmt::format("S_LUT_ACCESS_CFG address {} is past the {} table's last entry {}",
                         access_addr_, access_table_ == 0 ? "LE" : "LO", entries - 1));
    }
  }
  reg(info.offset) = value;
  config_dirty_ = true;
}

std::uint32_t LutUnit::read(std::string_view name) {
  const RegisterInfo& info = find_register(unit_, name);
  if (info.offset == kAccessData) {
    std::uint32_t v = 0;
    data_access(false, 0, &v);
    return v;
  }
  if (info.offset == kAccessCfg) {
    // The RTL returns the live (auto-incremented) address with the latched table and type.
    return access_addr_ | (access_table_ << 16) | (std::uint32_t(access_write_) << 17);
  }
  const Layout& l = layout(unit_);
  if (info.offset == l.perf_uflow) return stats_.uflow;
  if (info.offset == l.perf_oflow) return stats_.oflow;
  if (info.offset == l.perf_hybrid) return stats_.hybrid;
  if (info.offset == l.perf_le_hit) return stats_.le_hit;
  if (info.offset == l.perf_lo_hit) return stats_.lo_hit;
  return reg_value(info.offset);
}

LutConfig LutUnit::config() const {
  LutConfig c;
  c.unit = unit_;
  c.precision = precision_;
  c.le = le_;
  c.lo = lo_;
  const std::uint32_t cfg = reg_value(kLutCfg);
  c.le_linear = cfg & 1u;
  c.uflow_priority_lo = (cfg >> 4) & 1u;
  c.oflow_priority_lo = (cfg >> 5) & 1u;
  c.hybrid_priority_lo = (cfg >> 6) & 1u;
  const std::uint32_t info = reg_value(kLutInfo);
  c.le_index_offset = std::int8_t(info & 0xffu);
  // The CDP integer paths sign-extend the selects from 6 (INT8) or 7 (INT16) bits.
  const int select_bits = unit_ == Unit::kCdp && precision_ == Precision::kInt8    ? 6
                          : unit_ == Unit::kCdp && precision_ == Precision::kInt16 ? 7
                                                                                   : 8;
  c.le_index_select = int(sign_extend((info >> 8) & 0xffu, select_bits));
  c.lo_index_select = int(sign_extend((info >> 16) & 0xffu, select_bits));
  const Layout& l = layout(unit_);
  auto start_end = [&](std::uint32_t offset) -> std::int64_t {
    if (unit_ == Unit::kSdp) {
      return is_float(precision_) ? std::int64_t(reg_value(offset))
                                  : std::int64_t(std::int32_t(reg_value(offset)));
    }
    if (is_float(precision_)) return std::int64_t(reg_value(offset));  // low 32 bits as FP32
    const std::uint64_t wide =
        (std::uint64_t(reg_value(offset + 4) & 0x3fu) << 32) | reg_value(offset);
    return sign_extend(wide, 38);
  };
  c.le_start = start_end(l.le_start);
  c.le_end = start_end(l.le_end);
  c.lo_start = start_end(l.lo_start);
  c.lo_end = start_end(l.lo_end);
  auto slopes = [&](std::uint32_t scale_reg, std::uint32_t shift_reg, Slope& uflow, Slope& oflow) {
    const std::uint32_t scale = reg_value(scale_reg), shift = reg_value(shift_reg);
    uflow.scale = std::int16_t(scale & 0xffffu);
    oflow.scale = std::int16_t(scale >> 16);
    uflow.shift = int(sign_extend(shift & 0x1fu, 5));
    oflow.shift = int(sign_extend((shift >> 5) & 0x1fu, 5));
  };
  slopes(l.le_scale, l.le_shift, c.le_uflow, c.le_oflow);
  slopes(l.lo_scale, l.lo_shift, c.lo_uflow, c.lo_oflow);
  return c;
}

Element LutUnit::eval(std::int64_t input) {
  if (config_dirty_) {
    cached_ = config();
    for (auto& d : check_constraints(cached_)) {
      const bool seen = std::any_of(diagnostics_.begin(), diagnostics_.end(), [&](const auto& o) {
        return o.code == d.code && o.message == d.message;
      });
      if (!seen) diagnostics_.push_back(std::move(d));
    }
    config_dirty_ = false;
  }
  const Element e = evaluate(cached_, input);
  count(unit_, e, stats_);
  return e;
}

std::vector<std::pair<std::string, std::uint32_t>> register_writes(const LutConfig& c) {
  std::vector<std::pair<std::string, std::uint32_t>> w;
  w.emplace_back("S_LUT_ACCESS_CFG", (1u << 17) | (0u << 16));
  for (auto v : c.le) w.emplace_back("S_LUT_ACCESS_DATA", v);
  w.emplace_back("S_LUT_ACCESS_CFG", (1u << 17) | (1u << 16));
  for (auto v : c.lo) w.emplace_back("S_LUT_ACCESS_DATA", v);
  w.emplace_back("S_LUT_CFG", (c.le_linear ? 1u : 0u) | (c.uflow_priority_lo ? 1u << 4 : 0u) |
                                  (c.oflow_priority_lo ? 1u << 5 : 0u) |
                                  (c.hybrid_priority_lo ? 1u << 6 : 0u));
  w.emplace_back("S_LUT_INFO", (std::uint32_t(c.le_index_offset) & 0xffu) |
                                   ((std::uint32_t(c.le_index_select) & 0xffu) << 8) |
                                   ((std::uint32_t(c.lo_index_select) & 0xffu) << 16));
  auto start_end = [&](const char* name, std::int64_t v) {
    if (c.unit == Unit::kSdp || is_float(c.precision)) {
      w.emplace_back(fmt::format("S_LUT_{}{}", name, c.unit == Unit::kCdp ? "_LOW" : ""),
                     std::uint32_t(v));
      if (c.unit == Unit::kCdp) w.emplace_back(fmt::format("S_LUT_{}_HIGH", name), 0u);
      return;
    }
    w.emplace_back(fmt::format("S_LUT_{}_LOW", name), std::uint32_t(std::uint64_t(v)));
    w.emplace_back(fmt::format("S_LUT_{}_HIGH", name),
                   std::uint32_t(std::uint64_t(v) >> 32) & 0x3fu);
  };
  start_end("LE_START", c.le_start);
  start_end("LE_END", c.le_end);
  start_end("LO_START", c.lo_start);
  start_end("LO_END", c.lo_end);
  auto slope = [&](const char* table, const Slope& u, const Slope& o) {
    w.emplace_back(
        fmt::format("S_LUT_{}_SLOPE_SCALE", table),
        std::uint32_t(std::uint16_t(u.scale)) | (std::uint32_t(std::uint16_t(o.scale)) << 16));
    w.emplace_back(fmt::format("S_LUT_{}_SLOPE_SHIFT", table),
                   (std::uint32_t(u.shift) & 0x1fu) | ((std::uint32_t(o.shift) & 0x1fu) << 5));
  };
  slope("LE", c.le_uflow, c.le_oflow);
  slope("LO", c.lo_uflow, c.lo_oflow);
  return w;
}

}  // namespace npukit::lut
