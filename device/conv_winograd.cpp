// The Winograd path of device/conv_winograd.h: the weight transform, the plain C++ transforms
// and the driver (work units of a band of tile rows, each transforming its own inputs and
// writing its own acc / snapshot entries: any thread count gives the same integers).
#include "device/conv_winograd.h"

#include "common/error.h"
#include "common/parallel.h"

#include <algorithm>
#include <functional>

namespace npukit::device::conv_kernels {

namespace {
struct WinogradXTag;
struct WinogradVTag;
struct WinogradUTag;
struct WinogradYTag;

std::uint32_t pair_word(std::int32_t lo, std::int32_t hi) {
  return static_cast<std::uint32_t>(static_cast<std::uint16_t>(lo)) |
         (static_cast<std::uint32_t>(static_cast<std::uint16_t>(hi)) << 16);
}
std::int32_t half(std::uint32_t word, int h) {
  return static_cast<std::int16_t>(static_cast<std::uint16_t>(word >> (16 * h)));
}
}  // namespace

bool winograd_applies(const DenseConv& c) {
  return c.kh == 3 && c.kw == 3 && c.stride == 1 &&
         c.channels.size() <= detail::kWinogradMaxChannels;
}

bool winograd_pays(const DenseConv& c) {
  return ((c.oh() + 1) / 2) * ((c.ow() + 1) / 2) >= detail::kWinogradMinTiles;
}

namespace detail {

void winograd_pack_scalar(const std::int8_t* lo, const std::int8_t* hi, std::uint64_t ph,
                          std::uint64_t pw, std::uint64_t xh, std::uint64_t xw, std::uint32_t* x) {
  for (std::uint64_t y = 0; y < xh; ++y)
    for (std::uint64_t i = 0; i < xw; ++i) {
      const bool in = y < ph && i < pw;
      x[y * xw + i] = in ? pair_word(lo ? lo[y * pw + i] : 0, hi ? hi[y * pw + i] : 0) : 0;
    }
  std::fill(x + xh * xw, x + xh * xw + kWinogradSlack, 0u);
}

void winograd_input_scalar(const std::uint32_t* x, std::uint64_t xw, std::uint64_t tiles_h,
                           std::uint64_t tiles_w, std::uint32_t* v, std::uint64_t xi_stride) {
  for (std::uint64_t ty = 0; ty < tiles_h; ++ty)
    for (std::uint64_t tx = 0; tx < tiles_w; ++tx)
      for (int h = 0; h < 2; ++h) {
        std::int32_t d[4][4], t[4][4];
        for (std::uint64_t r = 0; r < 4; ++r)
          for (std::uint64_t col = 0; col < 4; ++col)
            d[r][col] = half(x[(2 * ty + r) * xw + 2 * tx + col], h);
        for (int col = 0; col < 4; ++col) {  // B^T d
          t[0][col] = d[0][col] - d[2][col];
          t[1][col] = d[1][col] + d[2][col];
          t[2][col] = d[2][col] - d[1][col];
          t[3][col] = d[1][col] - d[3][col];
        }
        for (std::uint64_t r = 0; r < 4; ++r) {  // (B^T d) B
          const std::int32_t row[4] = {t[r][0] - t[r][2], t[r][1] + t[r][2], t[r][2] - t[r][1],
                                       t[r][1] - t[r][3]};
          for (std::uint64_t col = 0; col < 4; ++col) {
            std::uint32_t& word = v[(4 * r + col) * xi_stride + ty * tiles_w + tx];
            const std::uint32_t bits = static_cast<std::uint16_t>(row[col]);
            word = h == 0 ? bits : (word & 0xFFFFu) | (bits << 16);
          }
        }
      }
}

void winograd_gemm_scalar(const std::uint32_t* v, std::uint64_t tile_stride, std::uint64_t n,
                          const std::uint32_t* u, std::uint64_t pairs, std::uint64_t blocks,
                          std::uint64_t g_begin, std::uint64_t g_end, bool accumulate,
                          std::int32_t* y) {
  for (std::uint64_t t = 0; t < n; ++t)
    for (std::uint64_t k = 0; k < blocks * kGemmBlock; ++k) {
      // Wrapping int32 arithmetic, in unsigned (see the header); each pair's sum is exact.
      std::uint32_t sum = accumulate ? static_cast<std::uint32_t>(y[t * kGemmK + k]) : 0;
      for (std::uint64_t g = g_begin; g < g_end; ++g) {
        const std::uint32_t x = v[g * tile_stride + t];
        const std::uint32_t w = u[((k / kGemmBlock) * pairs + g) * kGemmBlock + k % kGemmBlock];
        sum += static_cast<std::uint32_t>(half(x, 0) * half(w, 0) + half(x, 1) * half(w, 1));
      }
      y[t * kGemmK + k] = static_cast<std::int32_t>(sum);
    }
}

void winograd_output_scalar(const std::int32_t* y, std::uint64_t xi_stride, std::uint64_t rows,
                            std::uint64_t tiles_w, std::uint64_t out_rows, std::uint64_t ow,
                            std::uint64_t k_first, std::uint64_t k_count, std::int32_t* out,
                            std::uint64_t out_stride) {
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint64_t tx = 0; tx < tiles_w; ++tx)
      for (std::uint64_t k = k_first; k < k_first + k_count; ++k) {
        // Wrapping int32 arithmetic, in unsigned (see the header).
        std::uint32_t m[16];
        for (std::uint64_t xi = 0; xi < 16; ++xi)
          m[xi] = static_cast<std::uint32_t>(y[xi * xi_stride + (r * tiles_w + tx) * kGemmK + k]);
        std::uint32_t t[2][4];
        for (int col = 0; col < 4; ++col) {  // A^T M
          t[0][col] = m[col] + m[4 + col] + m[8 + col];
          t[1][col] = m[4 + col] - m[8 + col] - m[12 + col];
        }
        for (std::uint64_t a = 0; a < 2; ++a) {  // (A^T M) A, then / 4
          const std::uint32_t yy[2] = {t[a][0] + t[a][1] + t[a][2], t[a][1] - t[a][2] - t[a][3]};
          for (std::uint64_t b = 0; b < 2; ++b) {
            const std::uint64_t oy = 2 * r + a, ox = 2 * tx + b;
            if (oy < out_rows && ox < ow)
              out[(k - k_first) * out_stride + oy * ow + ox] =
                  static_cast<std::int32_t>(yy[b]) >> 2;
          }
        }
      }
}

WinogradKernels winograd_kernels_scalar() {
  return {winograd_pack_scalar, winograd_input_scalar, winograd_gemm_scalar,
          winograd_output_scalar};
}

WinogradKernels winograd_kernels_avx2() {
  return {winograd_pack_avx2, winograd_input_avx2, winograd_gemm_avx2, winograd_output_avx2};
}

void winograd_weights(const DenseConv& c, std::vector<std::uint32_t>& u) {
  const std::uint64_t pairs = c.channels.size() / 2;
  const std::uint64_t kn_padded = (c.kn + kGemmBlock - 1) / kGemmBlock * kGemmBlock;
  const std::uint64_t xi_words = kn_padded * pairs;
  u.assign(16 * xi_words + kGemmBlock, 0);  // never empty (no channels: 0 pairs)
  for (std::uint64_t k = 0; k < c.kn; ++k)
    for (std::uint64_t i = 0; i < c.channels.size(); ++i) {
      const std::int64_t ch = c.channels[i];
      if (ch < 0) continue;
      const std::int8_t* g = c.weights + (k * c.plane_count + static_cast<std::uint64_t>(ch)) * 9;
      // G' g, then (G' g) G'^T; G' = [[2,0,0],[1,1,1],[1,-1,1],[0,0,2]].
      std::int32_t gg[4][3], uu[4][4];
      for (int col = 0; col < 3; ++col) {
        const std::int32_t g0 = g[col], g1 = g[3 + col], g2 = g[6 + col];
        gg[0][col] = 2 * g0;
        gg[1][col] = g0 + g1 + g2;
        gg[2][col] = g0 - g1 + g2;
        gg[3][col] = 2 * g2;
      }
      for (int r = 0; r < 4; ++r) {
        uu[r][0] = 2 * gg[r][0];
        uu[r][1] = gg[r][0] + gg[r][1] + gg[r][2];
        uu[r][2] = gg[r][0] - gg[r][1] + gg[r][2];
        uu[r][3] = 2 * gg[r][2];
      }
      const std::uint64_t word = (k / kGemmBlock * pairs + i / 2) * kGemmBlock + k % kGemmBlock;
      for (std::uint64_t xi = 0; xi < 16; ++xi) {
        const std::uint32_t bits = static_cast<std::uint16_t>(uu[xi / 4][xi % 4]);
        u[xi * xi_words + word] |= bits << (16 * (i % 2));
      }
    }
}

void dense_conv_winograd(const DenseConv& c, std::int32_t* acc, std::int32_t* snapshot,
                         const WinogradKernels& kern) {
  if (!winograd_applies(c))
    fail(
        "dense_conv: the Winograd path takes 3x3 stride-1 convs of at most {} channels, not a "
        "{}x{} stride-{} one of {}",
        kWinogradMaxChannels, c.kh, c.kw, c.stride, c.channels.size());
  if (!c.planes)
    fail(
        "dense_conv: the Winograd path reads the input planes, and this call has none (its input "
        "is DRAM words only: build the planes, or run dense_conv)");
  if (c.channels.size() % 2 || c.split % 2 || c.split > c.channels.size())
    fail("dense_conv: {} channels with the split at {}; both must be even", c.channels.size(),
         c.split);
  if (c.padded_h < 3 || c.padded_w < 3)
    fail("dense_conv: a 3x3 kernel on a {}x{} plane", c.padded_h, c.padded_w);
  for (const std::int64_t ch : c.channels)
    if (ch >= 0 && static_cast<std::uint64_t>(ch) >= c.plane_count)
      fail("dense_conv: channel {} is not one of the {} planes", ch, c.plane_count);
  if (c.snapshot_from < c.kn && !snapshot)
    fail("dense_conv: a snapshot from output channel {} but nowhere to write it", c.snapshot_from);

  const std::uint64_t oh = c.oh(), ow = c.ow(), pixels = oh * ow;
  const std::uint64_t tiles_h = (oh + 1) / 2, tiles_w = (ow + 1) / 2, xw = 2 * tiles_w + 2;
  const std::uint64_t pairs = c.channels.size() / 2, split_pairs = c.split / 2;
  const std::uint64_t kn_padded = (c.kn + kGemmBlock - 1) / kGemmBlock * kGemmBlock;

  // U, kept with the weights when the caller keeps packs.
  PackedWeights* kept = c.packs ? &c.packs->winograd : nullptr;
  std::vector<std::uint32_t>& u = kept ? kept->w : thread_buffer<std::uint32_t, WinogradUTag>();
  if (kept)
    kept->fill_once([&] { winograd_weights(c, u); });
  else
    winograd_weights(c, u);

  // Work units: bands of tile rows, each transforming its own inputs (so V stays in the cache:
  // the whole plane's V of a 64-channel 56x56 layer is 1.6 MB) and summing every output channel
  // in units of 64.
  const std::uint64_t band_rows = std::max<std::uint64_t>(1, kWinogradBandTiles / tiles_w);
  const std::uint64_t bands = (tiles_h + band_rows - 1) / band_rows;
  const std::uint64_t y_stride = band_rows * tiles_w * kGemmK;
  const std::uint64_t plane = c.padded_h * c.padded_w;
  auto band = [&](std::uint64_t index) {
    const std::uint64_t ty0 = index * band_rows, rows = std::min(band_rows, tiles_h - ty0);
    const std::uint64_t n = rows * tiles_w, out_rows = std::min(2 * rows, oh - 2 * ty0);
    // V of the band for every pair: [xi][pair][tile_stride] (the input transform's spill).
    const std::uint64_t tile_stride = n + 8, xh = 2 * rows + 2, y0 = 2 * ty0;
    std::vector<std::uint32_t>& v = thread_buffer<std::uint32_t, WinogradVTag>();
    v.resize(16 * pairs * tile_stride + kWinogradSlack);  // never empty
    std::vector<std::uint32_t>& x = thread_buffer<std::uint32_t, WinogradXTag>();
    x.resize(xh * xw + kWinogradSlack);
    for (std::uint64_t g = 0; g < pairs; ++g) {
      const std::int64_t lo = c.channels[2 * g], hi = c.channels[2 * g + 1];
      // Rows y0 .. y0 + xh of the planes (y0 < padded_h; rows past the plane are zeros).
      kern.pack(
          lo < 0 ? nullptr : c.planes + static_cast<std::uint64_t>(lo) * plane + y0 * c.padded_w,
          hi < 0 ? nullptr : c.planes + static_cast<std::uint64_t>(hi) * plane + y0 * c.padded_w,
          c.padded_h - y0, c.padded_w, xh, xw, x.data());
      kern.input(x.data(), xw, rows, tiles_w, v.data() + g * tile_stride, pairs * tile_stride);
    }
    std::vector<std::int32_t>& y = thread_buffer<std::int32_t, WinogradYTag>();
    y.resize(16 * y_stride + 3 * kGemmK);  // the output transform reads 3 tiles past the band
    for (std::uint64_t k0 = 0; k0 < kn_padded; k0 += kGemmK) {
      const std::uint64_t blocks = std::min(kGemmK, kn_padded - k0) / kGemmBlock;
      const std::uint64_t k_end = std::min(c.kn, k0 + blocks * kGemmBlock);
      auto run = [&](std::uint64_t begin, std::uint64_t end, bool accumulate) {
        for (std::uint64_t xi = 0; xi < 16; ++xi)
          kern.tiles(v.data() + xi * pairs * tile_stride, tile_stride, n,
                     u.data() + xi * kn_padded * pairs + k0 * pairs, pairs, blocks, begin, end,
                     accumulate, y.data() + xi * y_stride);
      };
      // Output channels [from, k_end) to the planes of channel `from` at `dst`.
      auto write = [&](std::uint64_t from, std::int32_t* dst) {
        kern.output(y.data(), y_stride, rows, tiles_w, out_rows, ow, from - k0, k_end - from,
                    dst + 2 * ty0 * ow, pixels);
      };
      if (snapshot && k_end > c.snapshot_from) {
        run(0, split_pairs, false);
        const std::uint64_t from = std::max(c.snapshot_from, k0);
        write(from, snapshot + (from - c.snapshot_from) * pixels);
        run(split_pairs, pairs, true);
      } else {
        run(0, pairs, false);
      }
      write(k0, acc + k0 * pixels);
    }
  };
  parallel_for(bands, std::ref(band));
}

}  // namespace detail
}  // namespace npukit::device::conv_kernels
