// The host side of the Gati's activation formats: how the host writes an input tensor into the
// bytes of its DWP packet and reads a dispatched output back (gati.md 6.1). Part of the portable
// program format, so the runtime needs nothing from the compiler to use a compiled program.
// (The device model keeps its own, independently written addressing for its tests.)
#pragma once

#include "common/bytes.h"
#include "isa/arch.h"

#include <cstdint>
#include <span>
#include <vector>

namespace npukit::isa {

// Byte offset of element (c, p = h*W + w) of one image in the activation layout of gati.md 6.1:
//   (c / cd) * (cd * P') + (p / dk) * 32 + (c % cd) * dk + (p % dk),  cd = N_SA, dk = 32 / N_SA,
//   P' = ceil_mod(pixels, dk).
std::uint64_t activation_offset(std::int64_t c, std::int64_t p, std::int64_t pixels,
                                const SaArch& arch);
// C' * P' bytes: ceil_mod(C, N_SA) * ceil_mod(H*W, 32/N_SA), always a multiple of 32.
std::uint64_t activation_bytes(std::int64_t c, std::int64_t h, std::int64_t w, const SaArch& arch);

// int8 [C][H*W] planar (one image, NCHW order) -> C' * P' bytes with zero padding.
Bytes pack_activation(std::span<const std::int8_t> chw, std::int64_t c, std::int64_t h,
                      std::int64_t w, const SaArch& arch);
// The same into `out` (activation_bytes long; every byte is written, padding as zeros).
void pack_activation(std::span<const std::int8_t> chw, std::int64_t c, std::int64_t h,
                     std::int64_t w, const SaArch& arch, std::span<std::uint8_t> out);
// The inverse. Throws npukit::Error when `bytes` is shorter than C' * P'.
std::vector<std::int8_t> unpack_activation(ByteSpan bytes, std::int64_t c, std::int64_t h,
                                           std::int64_t w, const SaArch& arch);
// OpWidth 4 (int32 outputs): every element a big-endian int32 at 4 * activation_offset.
Bytes pack_activation32(std::span<const std::int32_t> chw, std::int64_t c, std::int64_t h,
                        std::int64_t w, const SaArch& arch);
std::vector<std::int32_t> unpack_activation32(ByteSpan bytes, std::int64_t c, std::int64_t h,
                                              std::int64_t w, const SaArch& arch);

// FC vectors: n int8 values, linear, zero-padded to ceil_mod(n, 32) bytes.
std::uint64_t vector_bytes(std::int64_t n);
Bytes pack_vector(std::span<const std::int8_t> v);

}  // namespace npukit::isa
