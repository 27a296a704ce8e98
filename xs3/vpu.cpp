#include "xs3/vpu.h"

#include "common/error.h"

#include <algorithm>

namespace npukit::xs3 {

int element_bits(VpuMode mode) {
  switch (mode) {
    case VpuMode::k8:
      return 8;
    case VpuMode::k16:
      return 16;
    case VpuMode::k32:
      return 32;
  }
  return 32;
}

int accumulator_count(VpuMode mode) { return mode == VpuMode::k32 ? 8 : 16; }

int vlmaccr_elements(VpuMode mode) {
  switch (mode) {
    case VpuMode::k8:
      return 32;
    case VpuMode::k16:
      return 16;
    case VpuMode::k32:
      return 8;
  }
  return 8;
}

std::int64_t saturate(std::int64_t x, int bits) {
  const std::int64_t hi = symmetric_max(bits);
  return std::clamp(x, -hi, hi);
}

std::int64_t floor_shift(std::int64_t x, int shift) {
  if (shift < 0) fail("floor_shift: negative shift {}", shift);
  return x >> std::min(shift, 63);
}

std::int64_t rshr_round(std::int64_t x, int shift) {
  if (shift < 0) {
    fail(
        "negative shift {}: the XS3 sources leave it undefined, so npukit rejects it "
        "(DECISIONS.md 16); use a shift >= 0",
        shift);
  }
  if (shift == 0) return x;
  // ((x >> (s-1)) + 1) >> 1 == floor((x + 2^(s-1)) / 2^s) without the overflow of the sum.
  return (floor_shift(x, shift - 1) + 1) >> 1;
}

std::int32_t vlsat(std::int64_t accumulator, int shift, VpuMode mode) {
  return static_cast<std::int32_t>(saturate(rshr_round(accumulator, shift), element_bits(mode)));
}

std::int32_t vlashr(std::int32_t x, int shr, VpuMode mode) {
  const int bits = element_bits(mode);
  const std::int64_t v = saturate(x, bits);
  if (shr >= 0) return static_cast<std::int32_t>(floor_shift(v, shr));
  // Left shift: any shift that moves a non-zero value past the element width saturates, so cap it
  // where the 64-bit product is still exact.
  const int left = std::min(-shr, 40);
  return static_cast<std::int32_t>(saturate(v * (std::int64_t{1} << left), bits));
}

std::int32_t vlmul(std::int32_t x, std::int32_t y, VpuMode mode) {
  const int shift = mode == VpuMode::k8 ? 6 : mode == VpuMode::k16 ? 14 : 30;
  const int bits = element_bits(mode);
  const std::int64_t product = std::int64_t{x} * std::int64_t{y};
  return static_cast<std::int32_t>(saturate(rshr_round(product, shift), bits));
}

std::int8_t vdepth8_from16(std::int32_t x) { return sat8(rshr_round(x, 8)); }
std::int8_t vdepth8_from32(std::int64_t x) { return sat8(rshr_round(x, 24)); }
std::int16_t vdepth16_from32(std::int64_t x) { return sat16(rshr_round(x, 16)); }

std::int32_t vladd(std::int32_t vr, std::int32_t mem, VpuMode mode) {
  return static_cast<std::int32_t>(
      saturate(std::int64_t{vr} + std::int64_t{mem}, element_bits(mode)));
}

std::int32_t vlsub(std::int32_t vr, std::int32_t mem, VpuMode mode) {
  return static_cast<std::int32_t>(
      saturate(std::int64_t{mem} - std::int64_t{vr}, element_bits(mode)));
}

std::int32_t vpos(std::int32_t x) { return std::max(x, 0); }

VpuAccumulators::VpuAccumulators(VpuMode mode) : mode_(mode) {}

int VpuAccumulators::accumulator_bits() const { return mode_ == VpuMode::k32 ? 40 : 32; }

std::int64_t VpuAccumulators::get(int i) const {
  if (i < 0 || i >= accumulator_count(mode_)) fail("accumulator index {} out of range", i);
  return acc_[static_cast<std::size_t>(i)];
}

void VpuAccumulators::set(int i, std::int64_t value) {
  if (i < 0 || i >= accumulator_count(mode_)) fail("accumulator index {} out of range", i);
  acc_[static_cast<std::size_t>(i)] = saturate(value, accumulator_bits());
}

void VpuAccumulators::clear() { acc_.fill(0); }

namespace {
void check_operands(std::span<const std::int32_t> vc, std::span<const std::int32_t> mem,
                    std::size_t need, const char* instruction) {
  if (vc.size() != need || mem.size() != need) {
    fail("{}: needs {} elements in vC and memory, got {} and {}", instruction, need, vc.size(),
         mem.size());
  }
}

// One lane's product as the accumulator sees it: exact in 8/16-bit mode, rounded >> 30 in 32-bit.
std::int64_t lane_product(std::int32_t c, std::int32_t m, VpuMode mode) {
  const std::int64_t p = std::int64_t{c} * std::int64_t{m};
  return mode == VpuMode::k32 ? rshr_round(p, 30) : p;
}
}  // namespace

void VpuAccumulators::vlmacc(std::span<const std::int32_t> vc, std::span<const std::int32_t> mem) {
  const auto lanes = static_cast<std::size_t>(accumulator_count(mode_));
  check_operands(vc, mem, lanes, "VLMACC");
  for (std::size_t i = 0; i < lanes; ++i) {
    acc_[i] = saturate(acc_[i] + lane_product(vc[i], mem[i], mode_), accumulator_bits());
  }
}

void VpuAccumulators::vlmaccr(std::span<const std::int32_t> vc, std::span<const std::int32_t> mem) {
  const auto n = static_cast<std::size_t>(vlmaccr_elements(mode_));
  check_operands(vc, mem, n, "VLMACCR");
  const auto count = static_cast<std::size_t>(accumulator_count(mode_));
  std::int64_t sum = acc_[count - 1];
  for (std::size_t i = 0; i < n; ++i) sum += lane_product(vc[i], mem[i], mode_);
  for (std::size_t i = count - 1; i > 0; --i) acc_[i] = acc_[i - 1];
  acc_[0] = saturate(sum, accumulator_bits());
}

}  // namespace npukit::xs3
