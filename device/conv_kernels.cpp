// Packing, the scalar reference tiles and the dispatcher of device/conv_kernels.h.
//
// Exactness: every product is int8 x int8, |product| <= 2^14, and dense_conv refuses more than
// 2^31 / 2^14 - 1 products per output, so no partial sum in any order can leave int32: the
// scalar path, the AVX2 path and conv.cpp's per-connection loop all produce the same integers.
// (The AVX2 path adds two products in _mm256_madd_epi16, whose int32 lane holds |sum| <= 2^15
// exactly; _mm256_maddubs_epi16 would saturate to int16 and is not used.) Virtual outputs that
// are thrown away sum the same number of int8 products, so they stay within the bound too.
#include "device/conv_kernels.h"
#include "common/cpu.h"

#include "common/error.h"

#include <algorithm>
#include <atomic>

namespace npukit::device::conv_kernels {

namespace {
std::atomic<Impl> g_impl{Impl::kAuto};
struct TileTag;

std::uint32_t pair_word(std::int8_t lo, std::int8_t hi) {
  return static_cast<std::uint32_t>(static_cast<std::uint16_t>(std::int16_t{lo})) |
         (static_cast<std::uint32_t>(static_cast<std::uint16_t>(std::int16_t{hi})) << 16);
}
std::int32_t low16(std::uint32_t v) { return static_cast<std::int16_t>(v & 0xFFFF); }
std::int32_t high16(std::uint32_t v) { return static_cast<std::int16_t>(v >> 16); }
}  // namespace

void set_impl(Impl impl) { g_impl.store(impl); }
Impl impl() { return g_impl.load(); }

namespace detail {

void pack(const DenseConv& c, Packed& p) {
  p.tap_offset.clear();
  const std::uint64_t s = c.stride;
  const std::uint64_t hq = (c.padded_h + s - 1) / s;
  p.wq = (c.padded_w + s - 1) / s;
  p.taps = c.kh * c.kw;
  p.pairs = c.channels.size() / 2;
  // Only the stride phases some tap reads are stored (a 1x1 stride-2 conv needs one of four).
  std::vector<std::int64_t> slot(s * s, -1);
  std::int64_t slots = 0;
  for (std::uint64_t i = 0; i < c.kh; ++i)
    for (std::uint64_t j = 0; j < c.kw; ++j)
      if (slot[(i % s) * s + j % s] < 0) slot[(i % s) * s + j % s] = slots++;
  const std::uint64_t phase_words = hq * p.wq;
  p.plane_words = static_cast<std::uint64_t>(slots) * phase_words;
  for (std::uint64_t i = 0; i < c.kh; ++i)
    for (std::uint64_t j = 0; j < c.kw; ++j)
      p.tap_offset.push_back(static_cast<std::int64_t>(
          static_cast<std::uint64_t>(slot[(i % s) * s + j % s]) * phase_words + (i / s) * p.wq +
          j / s));
  p.q_count = c.oh() * p.wq;
  p.q_padded = (p.q_count + kTileQ - 1) / kTileQ * kTileQ;
  // A tile reads up to q_padded - 1 words past a tap's offset, which is below plane_words: the
  // last pair's reads end before pairs * plane_words + q_padded.
  p.x.assign(p.pairs * p.plane_words + p.q_padded, 0);
  const std::uint64_t plane_size = c.padded_h * c.padded_w;
  auto plane = [&](std::int64_t ch) -> const std::int8_t* {
    if (ch < 0) return nullptr;
    if (static_cast<std::uint64_t>(ch) >= c.plane_count)
      fail("dense_conv: channel {} is not one of the {} planes", ch, c.plane_count);
    return c.planes + static_cast<std::uint64_t>(ch) * plane_size;
  };
  for (std::uint64_t pr = 0; pr < p.pairs; ++pr) {
    const std::int8_t* lo = plane(c.channels[2 * pr]);
    const std::int8_t* hi = plane(c.channels[2 * pr + 1]);
    for (std::uint64_t ry = 0; ry < s; ++ry)
      for (std::uint64_t rx = 0; rx < s; ++rx) {
        if (slot[ry * s + rx] < 0) continue;
        std::uint32_t* dst = p.x.data() + pr * p.plane_words +
                             static_cast<std::uint64_t>(slot[ry * s + rx]) * phase_words;
        for (std::uint64_t yq = 0; yq < hq; ++yq) {
          const std::uint64_t y = yq * s + ry;
          if (y >= c.padded_h) break;
          for (std::uint64_t xq = 0; xq < p.wq; ++xq) {
            const std::uint64_t x = xq * s + rx;
            if (x >= c.padded_w) break;
            const std::uint64_t at = y * c.padded_w + x;
            dst[yq * p.wq + xq] = pair_word(lo ? lo[at] : 0, hi ? hi[at] : 0);
          }
        }
      }
  }
  p.kn_padded = (c.kn + kTileK - 1) / kTileK * kTileK;
  p.w.assign(p.kn_padded * p.pairs * p.taps, 0);
  for (std::uint64_t k = 0; k < c.kn; ++k) {
    const std::uint64_t kb = k / kTileK, kk = k % kTileK;
    const std::int8_t* wk = c.weights + k * c.plane_count * p.taps;
    for (std::uint64_t pr = 0; pr < p.pairs; ++pr) {
      // plane() has checked the channels.
      const std::int64_t c_lo = c.channels[2 * pr], c_hi = c.channels[2 * pr + 1];
      const std::int8_t* lo = c_lo < 0 ? nullptr : wk + static_cast<std::uint64_t>(c_lo) * p.taps;
      const std::int8_t* hi = c_hi < 0 ? nullptr : wk + static_cast<std::uint64_t>(c_hi) * p.taps;
      for (std::uint64_t t = 0; t < p.taps; ++t)
        p.w[((kb * p.pairs + pr) * p.taps + t) * kTileK + kk] =
            pair_word(lo ? lo[t] : 0, hi ? hi[t] : 0);
    }
  }
}

void tiles_scalar(const Packed& p, std::uint64_t kb, std::uint64_t pair_begin,
                  std::uint64_t pair_end, bool accumulate, std::int32_t* y) {
  if (!accumulate) std::fill(y, y + kTileK * p.q_padded, 0);
  const std::uint32_t* w = p.w.data() + kb * p.pairs * p.taps * kTileK;
  for (std::uint64_t pr = pair_begin; pr < pair_end; ++pr)
    for (std::uint64_t t = 0; t < p.taps; ++t) {
      const std::uint32_t* x =
          p.x.data() + pr * p.plane_words + static_cast<std::uint64_t>(p.tap_offset[t]);
      for (std::uint64_t kk = 0; kk < kTileK; ++kk) {
        const std::uint32_t wp = w[(pr * p.taps + t) * kTileK + kk];
        if (wp == 0) continue;
        const std::int32_t w_lo = low16(wp), w_hi = high16(wp);
        std::int32_t* yk = y + kk * p.q_padded;
        for (std::uint64_t q = 0; q < p.q_padded; ++q)
          yk[q] += low16(x[q]) * w_lo + high16(x[q]) * w_hi;
      }
    }
}

}  // namespace detail

void dense_conv(const DenseConv& c, std::int32_t* acc, std::int32_t* snapshot, Impl impl) {
  using namespace detail;
  if (c.channels.size() % 2 || c.split % 2 || c.split > c.channels.size())
    fail("dense_conv: {} channels with the split at {}; both must be even", c.channels.size(),
         c.split);
  if (c.stride < 1 || c.kh < 1 || c.kw < 1 || c.padded_h < c.kh || c.padded_w < c.kw)
    fail("dense_conv: a {}x{} kernel with stride {} on a {}x{} plane", c.kh, c.kw, c.stride,
         c.padded_h, c.padded_w);
  // The int32 bound of the file comment: at most 2^17 - 1 products per output.
  if (c.channels.size() * c.kh * c.kw >= (std::uint64_t{1} << 17))
    fail("dense_conv: {} channels x {} taps could overflow int32", c.channels.size(), c.kh * c.kw);
  if (impl == Impl::kAuto) impl = conv_kernels::impl();
  bool avx2 = false;
  switch (impl) {
    case Impl::kScalar:
      break;
    case Impl::kAvx2:
      if (!cpu_has_avx2()) fail("dense_conv: AVX2 requested but this CPU does not support it");
      avx2 = true;
      break;
    case Impl::kAuto:
      avx2 = cpu_has_avx2();
      break;
  }
  thread_local Packed p;
  pack(c, p);
  auto run = [&](std::uint64_t kb, std::uint64_t begin, std::uint64_t end, bool accumulate,
                 std::int32_t* y) {
    if (avx2)
      tiles_avx2(p, kb, begin, end, accumulate, y);
    else
      tiles_scalar(p, kb, begin, end, accumulate, y);
  };
  const std::uint64_t oh = c.oh(), ow = c.ow(), pixels = oh * ow;
  // Virtual outputs back to pixels: row oh of the tile starts at oh * wq.
  auto extract = [&](const std::int32_t* y, std::int32_t* out) {
    for (std::uint64_t r = 0; r < oh; ++r) std::copy_n(y + r * p.wq, ow, out + r * ow);
  };
  std::vector<std::int32_t>& y = thread_buffer<std::int32_t, TileTag>();
  y.resize(kTileK * p.q_padded);  // every tile starts with accumulate = false
  const std::uint64_t split_pairs = c.split / 2;
  for (std::uint64_t kb = 0; kb < p.kn_padded / kTileK; ++kb) {
    const std::uint64_t k0 = kb * kTileK;
    if (snapshot && k0 + kTileK > c.snapshot_from) {
      run(kb, 0, split_pairs, false, y.data());
      for (std::uint64_t kk = 0; kk < kTileK; ++kk) {
        const std::uint64_t k = k0 + kk;
        if (k < c.kn && k >= c.snapshot_from)
          extract(y.data() + kk * p.q_padded, snapshot + (k - c.snapshot_from) * pixels);
      }
      run(kb, split_pairs, p.pairs, true, y.data());
    } else {
      run(kb, 0, p.pairs, false, y.data());
    }
    for (std::uint64_t kk = 0; kk < kTileK && k0 + kk < c.kn; ++kk)
      extract(y.data() + kk * p.q_padded, acc + (k0 + kk) * pixels);
  }
}

}  // namespace npukit::device::conv_kernels
