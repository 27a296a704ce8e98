#include "xs3/bso.h"

#include "common/bytes.h"
#include "common/error.h"
#include "xs3/vpu.h"

#include <algorithm>

namespace npukit::xs3 {

std::size_t bso_size(int c_out) {
  if (c_out <= 0) fail("BSO: output channel count must be positive, got {}", c_out);
  return ceil_div(static_cast<std::uint64_t>(c_out), kChannelsPerGroup) * kBsoBlockElements;
}

namespace {
void check_shift(int shift, const char* name, std::size_t channel) {
  if (shift < 0) {
    fail(
        "BSO channel {}: {} is {} (negative); npukit rejects negative shifts (DECISIONS.md 16) "
        "because lib_nn leaves them undefined; use a shift in [0, {}]",
        channel, name, shift, kMaxBsoShift);
  }
  if (shift > kMaxBsoShift) {
    fail(
        "BSO channel {}: {} is {}; shifts above {} are undefined in lib_nn's reference; use a "
        "shift in [0, {}]",
        channel, name, shift, kMaxBsoShift, kMaxBsoShift);
  }
}
}  // namespace

std::vector<std::uint16_t> pack_bso(std::span<const BsoChannel> channels) {
  const int c_out = static_cast<int>(channels.size());
  std::vector<std::uint16_t> bso(bso_size(c_out), 0);
  for (std::size_t k = 0; k < channels.size(); ++k) {
    const BsoChannel& ch = channels[k];
    check_shift(ch.shift1, "shift1", k);
    check_shift(ch.shift2, "shift2", k);
    const std::size_t base = (k / kChannelsPerGroup) * kBsoBlockElements + k % kChannelsPerGroup;
    auto at = [&](int row) -> std::uint16_t& { return bso[base + row * kChannelsPerGroup]; };
    const auto bias_bits = static_cast<std::uint32_t>(ch.bias);
    at(kBsoBiasHi) = static_cast<std::uint16_t>(bias_bits >> 16);
    at(kBsoBiasLo) = static_cast<std::uint16_t>(bias_bits & 0xFFFF);
    at(kBsoShift1) = static_cast<std::uint16_t>(ch.shift1);
    at(kBsoScale) = static_cast<std::uint16_t>(ch.scale);
    at(kBsoOffsetScale) = static_cast<std::uint16_t>(ch.offset_scale);
    at(kBsoOffset) = static_cast<std::uint16_t>(ch.offset);
    at(kBsoShift2) = static_cast<std::uint16_t>(ch.shift2);
  }
  return bso;
}

std::vector<BsoChannel> unpack_bso(std::span<const std::uint16_t> bso, int c_out) {
  const std::size_t need = bso_size(c_out);
  if (bso.size() != need) {
    fail(
        "BSO has {} elements but {} output channels need ceil({}/16)*7*16 = {} (tail lanes "
        "padded)",
        bso.size(), c_out, c_out, need);
  }
  std::vector<BsoChannel> channels(static_cast<std::size_t>(c_out));
  for (std::size_t k = 0; k < channels.size(); ++k) {
    const std::size_t base = (k / kChannelsPerGroup) * kBsoBlockElements + k % kChannelsPerGroup;
    auto at = [&](int row) { return bso[base + row * kChannelsPerGroup]; };
    BsoChannel& ch = channels[k];
    // The full bias is (int16)hi * 2^16 + (uint16)lo, i.e. the bit pattern hi:lo.
    ch.bias = static_cast<std::int32_t>((std::uint32_t{at(kBsoBiasHi)} << 16) | at(kBsoBiasLo));
    ch.shift1 = static_cast<std::int16_t>(at(kBsoShift1));
    ch.scale = static_cast<std::int16_t>(at(kBsoScale));
    ch.offset_scale = static_cast<std::int16_t>(at(kBsoOffsetScale));
    ch.offset = static_cast<std::int16_t>(at(kBsoOffset));
    ch.shift2 = static_cast<std::int16_t>(at(kBsoShift2));
    check_shift(ch.shift1, "shift1", k);
    check_shift(ch.shift2, "shift2", k);
  }
  return channels;
}

std::int16_t bso_stage1(std::int32_t accumulator, const BsoChannel& channel) {
  return static_cast<std::int16_t>(vlsat(accumulator, channel.shift1, VpuMode::k16));
}

std::int32_t bso_stage2(std::int16_t y16, const BsoChannel& channel) {
  // Each product fits in 31 bits, so saturating once equals saturating after each VLMACC.
  return sat32(std::int64_t{y16} * channel.scale +
               std::int64_t{channel.offset_scale} * channel.offset);
}

std::int8_t bso_output8(std::int32_t accumulator, const BsoChannel& channel,
                        OutputOptions options) {
  const std::int32_t t = bso_stage2(bso_stage1(accumulator, channel), channel);
  const std::int64_t shifted = rshr_round(t, channel.shift2);
  return static_cast<std::int8_t>(
      std::clamp<std::int64_t>(shifted, options.lower_bound(), symmetric_max(8)));
}

std::int16_t bso_output16(std::int32_t accumulator, const BsoChannel& channel) {
  const std::int32_t t = bso_stage2(bso_stage1(accumulator, channel), channel);
  return sat16(rshr_round(t, channel.shift2));
}

}  // namespace npukit::xs3
