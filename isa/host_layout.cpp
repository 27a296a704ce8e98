#include "isa/host_layout.h"

#include "common/error.h"

namespace npukit::isa {

std::uint64_t activation_offset(std::int64_t c, std::int64_t p, std::int64_t pixels,
                                const SaArch& arch) {
  const auto cd = static_cast<std::uint64_t>(arch.n_sa);
  const auto dk = static_cast<std::uint64_t>(arch.pixels_per_word());
  const std::uint64_t padded_pixels = ceil_mod(static_cast<std::uint64_t>(pixels), dk);
  const auto uc = static_cast<std::uint64_t>(c), up = static_cast<std::uint64_t>(p);
  return (uc / cd) * (cd * padded_pixels) + (up / dk) * 32 + (uc % cd) * dk + (up % dk);
}

std::uint64_t activation_bytes(std::int64_t c, std::int64_t h, std::int64_t w, const SaArch& arch) {
  return ceil_mod(static_cast<std::uint64_t>(c), static_cast<std::uint64_t>(arch.n_sa)) *
         ceil_mod(static_cast<std::uint64_t>(h * w),
                  static_cast<std::uint64_t>(arch.pixels_per_word()));
}

namespace {
void check_values(std::size_t have, std::int64_t c, std::int64_t h, std::int64_t w,
                  const char* what) {
  if (c <= 0 || h <= 0 || w <= 0 || have != static_cast<std::size_t>(c * h * w))
    fail("{}: {} values for a {}x{}x{} (CxHxW) tensor", what, have, c, h, w);
}
void check_bytes(std::size_t have, std::uint64_t need, std::int64_t c, std::int64_t h,
                 std::int64_t w, const char* what) {
  if (have < need)
    fail("{}: {} bytes, a {}x{}x{} (CxHxW) tensor needs {}", what, have, c, h, w, need);
}
}  // namespace

Bytes pack_activation(std::span<const std::int8_t> chw, std::int64_t c, std::int64_t h,
                      std::int64_t w, const SaArch& arch) {
  check_values(chw.size(), c, h, w, "pack_activation");
  const std::int64_t p = h * w;
  Bytes out(activation_bytes(c, h, w, arch), 0);
  for (std::int64_t ch = 0; ch < c; ++ch)
    for (std::int64_t px = 0; px < p; ++px)
      out[activation_offset(ch, px, p, arch)] = static_cast<std::uint8_t>(chw[ch * p + px]);
  return out;
}

std::vector<std::int8_t> unpack_activation(ByteSpan bytes, std::int64_t c, std::int64_t h,
                                           std::int64_t w, const SaArch& arch) {
  check_bytes(bytes.size(), activation_bytes(c, h, w, arch), c, h, w, "unpack_activation");
  const std::int64_t p = h * w;
  std::vector<std::int8_t> out(static_cast<std::size_t>(c * p));
  for (std::int64_t ch = 0; ch < c; ++ch)
    for (std::int64_t px = 0; px < p; ++px)
      out[ch * p + px] = static_cast<std::int8_t>(bytes[activation_offset(ch, px, p, arch)]);
  return out;
}

Bytes pack_activation32(std::span<const std::int32_t> chw, std::int64_t c, std::int64_t h,
                        std::int64_t w, const SaArch& arch) {
  check_values(chw.size(), c, h, w, "pack_activation32");
  const std::int64_t p = h * w;
  Bytes out(4 * activation_bytes(c, h, w, arch), 0);
  for (std::int64_t ch = 0; ch < c; ++ch)
    for (std::int64_t px = 0; px < p; ++px)
      store_be32(&out[4 * activation_offset(ch, px, p, arch)],
                 static_cast<std::uint32_t>(chw[ch * p + px]));
  return out;
}

std::vector<std::int32_t> unpack_activation32(ByteSpan bytes, std::int64_t c, std::int64_t h,
                                              std::int64_t w, const SaArch& arch) {
  check_bytes(bytes.size(), 4 * activation_bytes(c, h, w, arch), c, h, w, "unpack_activation32");
  const std::int64_t p = h * w;
  std::vector<std::int32_t> out(static_cast<std::size_t>(c * p));
  for (std::int64_t ch = 0; ch < c; ++ch)
    for (std::int64_t px = 0; px < p; ++px)
      out[ch * p + px] =
          static_cast<std::int32_t>(load_be32(&bytes[4 * activation_offset(ch, px, p, arch)]));
  return out;
}

std::uint64_t vector_bytes(std::int64_t n) { return ceil_mod(static_cast<std::uint64_t>(n), 32); }

Bytes pack_vector(std::span<const std::int8_t> v) {
  Bytes out(vector_bytes(static_cast<std::int64_t>(v.size())), 0);
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<std::uint8_t>(v[i]);
  return out;
}

}  // namespace npukit::isa
