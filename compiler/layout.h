// Layout conversion (pass 9's arithmetic): logical weights and biases -> the byte images the Gati
// reads from DRAM (gati.md 6.2, 14.1). Pure functions. The device model has its own, independently
// written, reading of the same layouts for its tests.
#pragma once

#include "common/bytes.h"
#include "compiler/geometry.h"
#include "isa/arch.h"
#include "isa/host_layout.h"

#include <cstdint>
#include <span>
#include <vector>

namespace npukit::compiler {

// Activations (gati.md 6.1) are packed and unpacked with isa/host_layout.h, shared with the
// runtime; this file holds the weight and bias layouts only the compiler writes.

// CONV weights [KN][KC][KH][KW] int8 (OIHW) -> the weight blob (gati.md 6.2):
//   regular, 1x1 and ChannelDuplicate: for kern < kitr, chan < citr, srow = ROW-1 .. 0,
//   schan < chan_dim, skern < kern_dim: W[kern*kern_dim + skern][chan*chan_dim + schan][srow]
//   (srow = kh*KW + kw), 0 out of range (and for the padding kernels kn_weights <= k < kn);
//   depthwise (14.1, diagonal): byte (kern, srow, j, j) = W[kern*N_SA + j][0][srow], 0 elsewhere;
//   depthwise on 16,1,16 (not RTL-verified): byte (kern, srow, 0, j) = W[kern*N_SA + j][0][srow];
//   pointwise (16,1,16, gati.md 6.2): for ki, ci, c = N_SA-1 .. 0, r < ROW: W[ki*N_SA + r][ci*ROW +
//   c].
// Padded with zeros to ceil_mod(kitr * citr * ROW * COLS * N_SA, 32) bytes.
Bytes pack_conv_weights(std::span<const std::int8_t> oihw, const ConvGeometry& geo,
                        const isa::SaArch& arch);
// CONV bias: KN big-endian int32, zero-padded to ceil_mod(ceil_mod(KN, N_SA) * 4, 32) bytes.
Bytes pack_conv_bias(std::span<const std::int32_t> bias, std::int64_t kn, const isa::SaArch& arch);

// FC weights [M][K] (rows = outputs): for each block i of 32 outputs, for each input j <
// ceil_mod(K, 32): 32 bytes W[i*32 + k][j], k < 32. ceil_mod(K, 32) * ceil_mod(M, 32) bytes.
Bytes pack_fc_weights(std::span<const std::int8_t> mk, std::int64_t m, std::int64_t k);
// FC bias: within each group i of 32 outputs, int32 position j*N_SA + s holds
// bias[i*32 + s*(32/N_SA) + j] (gati.md 6.2), big-endian; ceil_mod(M, 32) * 4 bytes.
Bytes pack_fc_bias(std::span<const std::int32_t> bias, std::int64_t m, const isa::SaArch& arch);

}  // namespace npukit::compiler
