#include "compiler/layout.h"

#include "common/error.h"

namespace npukit::compiler {

Bytes pack_conv_weights(std::span<const std::int8_t> oihw, const ConvGeometry& geo,
                        const isa::SaArch& arch) {
  const std::int64_t rows = arch.rows, cols = arch.cols, nsa = arch.n_sa;
  const std::int64_t kk = geo.kh * geo.kw;
  if (static_cast<std::int64_t>(oihw.size()) != geo.kn_weights * geo.kc * kk)
    fail("pack_conv_weights: {} weights for [{}, {}, {}, {}]", oihw.size(), geo.kn_weights, geo.kc,
         geo.kh, geo.kw);
  if (kk > rows)
    fail("pack_conv_weights: a {}x{} kernel does not fit {} array rows", geo.kh, geo.kw, rows);
  const std::uint64_t raw = static_cast<std::uint64_t>(geo.kitr * geo.citr * rows * cols * nsa);
  Bytes out(ceil_mod(raw, 32), 0);
  auto weight = [&](std::int64_t k, std::int64_t c, std::int64_t srow) -> std::uint8_t {
    if (k >= geo.kn_weights || c >= geo.kc || srow >= kk) return 0;  // padding kernels are 0
    return static_cast<std::uint8_t>(oihw[(k * geo.kc + c) * kk + srow]);
  };
  std::size_t pos = 0;
  if (geo.type == isa::ConvType::kPointwise) {
    for (std::int64_t ki = 0; ki < geo.kitr; ++ki)
      for (std::int64_t ci = 0; ci < geo.citr; ++ci)
        for (std::int64_t c = nsa - 1; c >= 0; --c)
          for (std::int64_t r = 0; r < rows; ++r) {
            // A block is ROW x N_SA; on 16,1,16 that is COLS*N_SA*ROW bytes.
            out[pos++] = weight(ki * nsa + r, ci * rows + c, 0);
          }
    return out;
  }
  // Every (kern, chan, srow) block is chan_dim x kern_dim bytes, zero unless a weight lands in it;
  // the loops skip the zero parts instead of testing every byte.
  const std::int64_t block = geo.chan_dim * geo.kern_dim;
  for (std::int64_t kern = 0; kern < geo.kitr; ++kern)
    for (std::int64_t chan = 0; chan < geo.citr; ++chan)
      for (std::int64_t srow = rows - 1; srow >= 0;
           --srow, pos += static_cast<std::size_t>(block)) {
        if (srow >= kk) continue;
        std::uint8_t* dst = &out[pos];
        if (geo.depthwise && arch.regular_optimal()) {
          // Diagonal: channel kern*N_SA + j sits at engine j, column j (gati.md 14.1).
          for (std::int64_t j = 0; j < geo.chan_dim && j < geo.kern_dim; ++j)
            dst[j * geo.kern_dim + j] = weight(kern * nsa + j, 0, srow);
        } else if (geo.depthwise) {
          // 16,1,16 (unverified on the RTL, refused unless --allow-errata): one column per
          // engine, so channel kern*N_SA + skern sits at engine skern.
          for (std::int64_t schan = 0; schan < geo.chan_dim; ++schan)
            for (std::int64_t skern = 0; skern < geo.kern_dim; ++skern)
              dst[schan * geo.kern_dim + skern] = weight(kern * nsa + skern, 0, srow);
        } else {
          // W[k][c][srow] for k = kern * kern_dim + skern: one stride of KC * KK bytes per kernel.
          const std::int64_t kern_end =
              std::min(geo.kern_dim, geo.kn_weights - kern * geo.kern_dim);
          if (kern_end <= 0) continue;  // all padding kernels (pad_kernel_iterations)
          const std::int64_t stride = geo.kc * kk;
          for (std::int64_t schan = 0; schan < geo.chan_dim; ++schan) {
            const std::int64_t c = chan * geo.chan_dim + schan;
            if (c >= geo.kc) break;
            const std::int8_t* src = &oihw[(kern * geo.kern_dim * geo.kc + c) * kk + srow];
            std::uint8_t* row = dst + schan * geo.kern_dim;
            for (std::int64_t skern = 0; skern < kern_end; ++skern)
              row[skern] = static_cast<std::uint8_t>(src[skern * stride]);
          }
        }
      }
  return out;
}

Bytes pack_conv_bias(std::span<const std::int32_t> bias, std::int64_t kn, const isa::SaArch& arch) {
  const std::uint64_t size = ceil_mod(ceil_mod(static_cast<std::uint64_t>(kn), arch.n_sa) * 4, 32);
  Bytes out(size, 0);
  for (std::int64_t k = 0; k < kn && k < static_cast<std::int64_t>(bias.size()); ++k)
    store_be32(&out[4 * k], static_cast<std::uint32_t>(bias[k]));
  return out;
}

Bytes pack_fc_weights(std::span<const std::int8_t> mk, std::int64_t m, std::int64_t k) {
  if (static_cast<std::int64_t>(mk.size()) != m * k)
    fail("pack_fc_weights: {} weights for [{}, {}]", mk.size(), m, k);
  const auto kp = static_cast<std::int64_t>(ceil_mod(k, 32));
  const auto blocks = static_cast<std::int64_t>(ceil_div(m, 32));
  Bytes out(static_cast<std::size_t>(blocks * 32 * kp), 0);
  std::size_t pos = 0;
  for (std::int64_t i = 0; i < blocks; ++i)
    for (std::int64_t j = 0; j < kp; ++j)
      for (std::int64_t o = 0; o < 32; ++o) {
        const std::int64_t row = i * 32 + o;
        out[pos++] = (row < m && j < k) ? static_cast<std::uint8_t>(mk[row * k + j]) : 0;
      }
  return out;
}

Bytes pack_fc_bias(std::span<const std::int32_t> bias, std::int64_t m, const isa::SaArch& arch) {
  const auto mp = static_cast<std::int64_t>(ceil_mod(m, 32));
  const std::int64_t nsa = arch.n_sa, per = 32 / arch.n_sa;
  Bytes out(static_cast<std::size_t>(mp * 4), 0);
  for (std::int64_t i = 0; i < mp / 32; ++i)
    for (std::int64_t j = 0; j < per; ++j)
      for (std::int64_t s = 0; s < nsa; ++s) {
        const std::int64_t src = i * 32 + s * per + j;
        const std::int32_t v =
            src < m && src < static_cast<std::int64_t>(bias.size()) ? bias[src] : 0;
        store_be32(&out[4 * (i * 32 + j * nsa + s)], static_cast<std::uint32_t>(v));
      }
  return out;
}

}  // namespace npukit::compiler
