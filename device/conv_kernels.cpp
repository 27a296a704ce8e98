// Packing, the scalar reference tiles and the dispatcher of device/conv_kernels.h.
//
// Exactness: every product is int8 x int8, |product| <= 2^14, and dense_conv refuses more than
// 2^31 / 2^14 - 1 products per output, so no partial sum in any order can leave int32: the
// scalar path, the AVX2 path and conv.cpp's per-connection loop all produce the same integers.
// (The AVX2 path adds two products in _mm256_madd_epi16, whose int32 lane holds |sum| <= 2^15
// exactly; _mm256_maddubs_epi16 would saturate to int16 and is used only when every input is
// 0..127, where a pair of products cannot leave int16.) Virtual outputs that
// are thrown away sum the same number of int8 products, so they stay within the bound too.
#include "device/conv_kernels.h"

#include "common/bytes.h"
#include "common/error.h"
#include "common/parallel.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstring>
#include <functional>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace npukit::device::conv_kernels {

namespace {
struct TileTag;
struct QuadChannelTag;
struct WordsChannelTag;  // words_in_place's own: pack_quads calls it holding QuadChannelTag's
struct GemmOffsetTag;
struct StridedRunTag;  // phases_from_words' packed image rows
// Image rows this short (or strided ones) are packed as runs and copied into the phases.
constexpr std::uint64_t kShortRow = 16;

std::uint32_t pair_word(std::int8_t lo, std::int8_t hi) {
  return static_cast<std::uint32_t>(static_cast<std::uint16_t>(std::int16_t{lo})) |
         (static_cast<std::uint32_t>(static_cast<std::uint16_t>(std::int16_t{hi})) << 16);
}
std::int32_t low16(std::uint32_t v) { return static_cast<std::int16_t>(v & 0xFFFF); }
std::int32_t high16(std::uint32_t v) { return static_cast<std::int16_t>(v >> 16); }

// The stride-phase layout both packings share: a channel group's padded plane is stored as the
// stride phases some tap reads (a 1x1 stride-2 conv needs one of four), so every tap of a
// strided conv reads consecutive words; phase rows are wq words wide.
struct Phases {
  std::uint64_t hq = 0, wq = 0, phase_words = 0, plane_words = 0;
  std::array<std::int64_t, 16> slot;  // per (ry, rx): its stored phase, -1 if no tap reads it
};

Phases phases(const DenseConv& c, std::vector<std::int64_t>& tap_offset) {
  const std::uint64_t s = c.stride;
  Phases ph;
  ph.hq = (c.padded_h + s - 1) / s;
  ph.wq = (c.padded_w + s - 1) / s;
  if (s < 1 || s > 4) fail("dense_conv: stride {} (the array's are 1 to 4)", s);
  ph.slot.fill(-1);
  std::int64_t slots = 0;
  for (std::uint64_t i = 0; i < c.kh; ++i)
    for (std::uint64_t j = 0; j < c.kw; ++j)
      if (ph.slot[(i % s) * s + j % s] < 0) ph.slot[(i % s) * s + j % s] = slots++;
  ph.phase_words = ph.hq * ph.wq;
  ph.plane_words = static_cast<std::uint64_t>(slots) * ph.phase_words;
  tap_offset.clear();
  for (std::uint64_t i = 0; i < c.kh; ++i)
    for (std::uint64_t j = 0; j < c.kw; ++j)
      tap_offset.push_back(static_cast<std::int64_t>(
          static_cast<std::uint64_t>(ph.slot[(i % s) * s + j % s]) * ph.phase_words +
          (i / s) * ph.wq + j / s));
  return ph;
}

// Stores word(at) for every position `at` of the padded plane into one group's phases at dst.
template <typename Word>
void scatter_phases(const DenseConv& c, const Phases& ph, std::uint32_t* dst, Word&& word) {
  const std::uint64_t s = c.stride;
  for (std::uint64_t ry = 0; ry < s; ++ry)
    for (std::uint64_t rx = 0; rx < s; ++rx) {
      if (ph.slot[ry * s + rx] < 0) continue;
      std::uint32_t* phase =
          dst + static_cast<std::uint64_t>(ph.slot[ry * s + rx]) * ph.phase_words;
      for (std::uint64_t yq = 0; yq < ph.hq && yq * s + ry < c.padded_h; ++yq)
        for (std::uint64_t xq = 0; xq < ph.wq && xq * s + rx < c.padded_w; ++xq)
          phase[yq * ph.wq + xq] = word((yq * s + ry) * c.padded_w + xq * s + rx);
    }
}

// Sizes a reused packing buffer for `written` words that the packing writes, then `slack` zero
// words (tiles read past the last plane): it only ever grows, since std::vector zeroes whatever
// a resize adds, and the layers of a network alternate between small and large inputs.
void grow_words(std::vector<std::uint32_t>& x, std::uint64_t written, std::uint64_t slack) {
  if (x.size() < written + slack) x.resize(written + slack);
  std::fill_n(x.begin() + static_cast<std::ptrdiff_t>(written), slack, 0u);
}

// Channel ch's padded plane, or null for a padding channel (-1).
const std::int8_t* plane_of(const DenseConv& c, std::int64_t ch) {
  if (ch < 0) return nullptr;
  if (static_cast<std::uint64_t>(ch) >= c.plane_count)
    fail("dense_conv: channel {} is not one of the {} planes", ch, c.plane_count);
  if (!c.planes) fail("dense_conv: internal error: this path needs the planes, none were given");
  return c.planes + static_cast<std::uint64_t>(ch) * c.padded_h * c.padded_w;
}

// The quad packing's channel list: the first phase padded to a multiple of 4, then the second.
void quad_channels(const DenseConv& c, std::vector<std::int64_t>& chans) {
  chans.clear();
  for (std::uint64_t i = 0; i < c.channels.size(); ++i) {
    if (i == c.split)
      while (chans.size() % 4) chans.push_back(-1);
    chans.push_back(c.channels[i]);
  }
  while (chans.size() % 4) chans.push_back(-1);
}

// Whether the n list entries at ch are the channels c0 + b of one aligned group of n in the
// words (or -1): then c0 and the lanes (bit b: entry b is a channel) are set.
bool in_place(const DenseConv& c, const std::int64_t* ch, unsigned n, std::uint64_t& c0,
              unsigned& lanes) {
  c0 = 0, lanes = 0;
  bool first = true;
  for (unsigned b = 0; b < n; ++b) {
    if (ch[b] < 0) continue;
    const auto at = static_cast<std::uint64_t>(ch[b]);
    if (first) c0 = at - at % n, first = false;
    if (at != c0 + b || at >= c.words->channels) return false;
    lanes |= 1u << b;
  }
  return true;
}

// out[k] = from[k * s] for k < n. At stride 2 four words a time, which may read from[2 * n - 1],
// one word past the last used.
void gather_strided(const std::uint32_t* from, std::uint64_t s, std::uint64_t n,
                    std::uint32_t* out) {
  std::uint64_t k = 0;
  if (s == 1) return static_cast<void>(std::copy_n(from, n, out));
#if defined(__SSE2__)
  if (s == 2)  // the even words of 8 (shufps only moves the bits)
    for (; k + 4 <= n; k += 4) {
      const __m128 a = _mm_loadu_ps(reinterpret_cast<const float*>(from + 2 * k));
      const __m128 b = _mm_loadu_ps(reinterpret_cast<const float*>(from + 2 * k + 4));
      _mm_storeu_ps(reinterpret_cast<float*>(out + k),
                    _mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
    }
#endif
  for (; k < n; ++k) out[k] = from[k * s];
}

// Fills one channel group's stored phases (phases(): slot by slot, hq x wq words each, at dst)
// from c.words: row(p, n, step, out) packs image pixels p, p + step, ..., p + (n - 1) step to
// out; every other word is 0 (padding, and phase positions past the plane). At stride 1 with no
// padding columns (a 1x1 conv's plane) the rows go as one run. Returns false as soon as row does.
template <typename Row>
bool phases_from_words(const DenseConv& c, const Phases& ph, std::uint32_t* dst, Row&& row) {
  const ImageWords& im = *c.words;
  const std::uint64_t s = c.stride, wq = ph.wq;
  const auto top = im.top, height = static_cast<std::int64_t>(im.height);
  if (s == 1 && c.padded_w == im.width) {
    const auto clamp_row = [&](std::int64_t r) {
      return static_cast<std::uint64_t>(
          std::clamp<std::int64_t>(r, 0, static_cast<std::int64_t>(c.padded_h)));
    };
    // Plane rows [r0, r1) hold image rows r - top.
    const std::uint64_t r0 = clamp_row(top), r1 = clamp_row(top + height);
    std::fill(dst, dst + r0 * wq, 0u);
    std::fill(dst + r1 * wq, dst + ph.phase_words, 0u);
    return r0 == r1 ||
           row(static_cast<std::uint64_t>(static_cast<std::int64_t>(r0) - top) * im.width,
               (r1 - r0) * wq, 1, dst + r0 * wq);
  }
  // Strided, or short rows: the image rows that land in the plane packed as one run (one shuffle
  // per word; a 1x1 stride-2 conv's unread odd rows too), then each phase row gathered from it.
  // A row call per phase row cost more than the packing: 160-180 us of a 3x3 stride-2 layer's
  // setup in resnet50, where its 400 KB of input pack in about 50 (issue 13).
  const bool from_run = s > 1 || im.width <= kShortRow;
  const std::int64_t y0 = std::max<std::int64_t>(0, -top);
  const std::int64_t y1 = std::min(height, static_cast<std::int64_t>(c.padded_h) - top);
  const std::uint64_t rows = y0 < y1 ? static_cast<std::uint64_t>(y1 - y0) : 0;
  std::vector<std::uint32_t>& run = thread_buffer<std::uint32_t, StridedRunTag>();
  bool run_ok = true;  // a negative byte in the run fails the packing only where a phase reads it
  if (from_run) {
    // Slack past the run: gather_strided may read a word past the last it uses.
    if (run.size() < rows * im.width + 2) run.resize(rows * im.width + 2);
    run_ok =
        !rows || row(static_cast<std::uint64_t>(y0) * im.width, rows * im.width, 1, run.data());
  }
  for (std::uint64_t ry = 0; ry < s; ++ry)
    for (std::uint64_t rx = 0; rx < s; ++rx) {
      if (ph.slot[ry * s + rx] < 0) continue;
      std::uint32_t* phase =
          dst + static_cast<std::uint64_t>(ph.slot[ry * s + rx]) * ph.phase_words;
      // Phase columns [x0, x1) hold image columns xq * s + rx - left.
      const auto first_at = [&](std::uint64_t col) {  // the first xq with xq * s + rx >= col
        return std::min(wq, col > rx ? (col - rx + s - 1) / s : 0);
      };
      const std::uint64_t x0 = first_at(im.left), x1 = first_at(im.left + im.width);
      for (std::uint64_t yq = 0; yq < ph.hq; ++yq) {
        std::uint32_t* out = phase + yq * wq;
        const std::int64_t y = static_cast<std::int64_t>(yq * s + ry) - top;
        if (y < y0 || y >= y1 || x0 >= x1) {  // a row of padding, or past the plane
          std::fill(out, out + wq, 0u);
          continue;
        }
        std::fill(out, out + x0, 0u);
        std::fill(out + x1, out + wq, 0u);
        const std::uint64_t at = static_cast<std::uint64_t>(y) * im.width + x0 * s + rx - im.left;
        if (!from_run) {
          if (!row(at, x1 - x0, s, out + x0)) return false;
          continue;
        }
        gather_strided(run.data() + at - static_cast<std::uint64_t>(y0) * im.width, s, x1 - x0,
                       out + x0);
        if (!run_ok &&
            std::any_of(out + x0, out + x1, [](std::uint32_t w) { return (w & 0x80808080u) != 0; }))
          return false;
      }
    }
  return true;
}
}  // namespace

namespace detail {

bool words_in_place(const DenseConv& c) {
  if (!c.words || c.stride < 1 || c.stride > 4) return false;
  const ImageWords& im = *c.words;
  if (im.channels % 8 || im.channels != c.plane_count || im.width == 0 ||
      im.left + im.width > c.padded_w)
    return false;
  // The usual list: every channel in order, the phases split on a whole quad. Each pair and quad
  // is then in its place (the checks below would say so, at several times the cost: a conv asks
  // up to three times, and resnet50's layers have up to 2048 channels).
  const std::uint64_t n = c.channels.size();
  if (n <= im.channels && c.split % 4 == 0) {
    std::uint64_t out_of_order = 0;
    for (std::uint64_t i = 0; i < n; ++i)
      out_of_order |= static_cast<std::uint64_t>(c.channels[i]) ^ i;
    if (out_of_order == 0) return true;
  }
  std::uint64_t c0 = 0;
  unsigned lanes = 0;
  for (std::uint64_t i = 0; i + 1 < n; i += 2)
    if (!in_place(c, c.channels.data() + i, 2, c0, lanes)) return false;
  std::vector<std::int64_t>& chans = thread_buffer<std::int64_t, WordsChannelTag>();
  quad_channels(c, chans);
  for (std::uint64_t i = 0; i < chans.size(); i += 4)
    if (!in_place(c, chans.data() + i, 4, c0, lanes)) return false;
  return true;
}

bool quad_row_scalar(const ImageWords& im, std::uint64_t c0, unsigned lanes, std::uint64_t p,
                     std::uint64_t n, std::uint64_t step, std::uint32_t* dst) {
  const std::uint64_t base = c0 / 8 * im.group_words(), at = (c0 % 8) * 4;
  std::uint32_t any = 0;
  for (std::uint64_t i = 0; i < n; ++i, p += step) {
    const std::uint8_t* w = im.word(base + p / 4) + at + p % 4;
    std::uint32_t word = 0;
    for (unsigned b = 0; b < 4; ++b)
      if (lanes >> b & 1) word |= std::uint32_t{w[4 * b]} << (8 * b);
    any |= word;
    dst[i] = word;
  }
  return (any & 0x80808080u) == 0;
}

void pair_row_scalar(const ImageWords& im, std::uint64_t c0, unsigned lanes, std::uint64_t p,
                     std::uint64_t n, std::uint64_t step, std::uint32_t* dst) {
  const std::uint64_t base = c0 / 8 * im.group_words(), at = (c0 % 8) * 4;
  for (std::uint64_t i = 0; i < n; ++i, p += step) {
    const std::uint8_t* w = im.word(base + p / 4) + at + p % 4;
    dst[i] = pair_word(lanes & 1 ? static_cast<std::int8_t>(w[0]) : 0,
                       lanes & 2 ? static_cast<std::int8_t>(w[4]) : 0);
  }
}

void pack(const DenseConv& c, Packed& p, std::uint64_t tile_k, PairRow from_words) {
  if (tile_k != kTileK && tile_k != kGemmBlock) fail("pack: blocks of {} output channels", tile_k);
  const Phases ph = phases(c, p.tap_offset);
  p.wq = ph.wq;
  p.plane_words = ph.plane_words;
  p.taps = c.kh * c.kw;
  p.pairs = c.channels.size() / 2;
  p.q_count = c.oh() * p.wq;
  p.q_padded = (p.q_count + kTileQ - 1) / kTileQ * kTileQ;
  // A tile reads up to q_padded - 1 words past a tap's offset, which is below plane_words: the
  // last pair's reads end before pairs * plane_words + q_padded.
  if (from_words) {  // every word of the phases written
    if (!words_in_place(c)) fail("pack: internal error: the words do not hold the channels");
    grow_words(p.x, p.pairs * p.plane_words, p.q_padded);
    for (std::uint64_t pr = 0; pr < p.pairs; ++pr) {
      std::uint64_t c0 = 0;
      unsigned lanes = 0;
      in_place(c, c.channels.data() + 2 * pr, 2, c0, lanes);
      phases_from_words(
          c, ph, p.x.data() + pr * p.plane_words,
          [&](std::uint64_t at, std::uint64_t n, std::uint64_t step, std::uint32_t* out) {
            from_words(*c.words, c0, lanes, at, n, step, out);
            return true;
          });
    }
  } else {
    p.x.assign(p.pairs * p.plane_words + p.q_padded, 0);
  }
  for (std::uint64_t pr = 0; pr < p.pairs && !from_words; ++pr) {
    const std::int8_t* lo = plane_of(c, c.channels[2 * pr]);
    const std::int8_t* hi = plane_of(c, c.channels[2 * pr + 1]);
    scatter_phases(c, ph, p.x.data() + pr * p.plane_words,
                   [&](std::uint64_t at) { return pair_word(lo ? lo[at] : 0, hi ? hi[at] : 0); });
  }
  p.kn_padded = (c.kn + tile_k - 1) / tile_k * tile_k;
  PackedWeights* kept = c.packs ? (tile_k == kTileK ? &c.packs->pairs : &c.packs->pairs8) : nullptr;
  std::vector<std::uint32_t>& w = kept ? kept->w : p.w;
  std::vector<std::uint32_t>& live = kept ? kept->live_steps : p.live_steps;
  std::vector<std::uint32_t>& live_w = kept ? kept->live_w : p.live_w;
  const auto fill = [&] {
    w.assign(p.kn_padded * p.pairs * p.taps, 0);
    for (std::uint64_t k = 0; k < c.kn; ++k) {
      const std::uint64_t kb = k / tile_k, kk = k % tile_k;
      const std::int8_t* wk = c.weights + k * c.plane_count * p.taps;
      for (std::uint64_t pr = 0; pr < p.pairs; ++pr) {
        // plane() has checked the channels.
        const std::int64_t c_lo = c.channels[2 * pr], c_hi = c.channels[2 * pr + 1];
        const std::int8_t* lo = c_lo < 0 ? nullptr : wk + static_cast<std::uint64_t>(c_lo) * p.taps;
        const std::int8_t* hi = c_hi < 0 ? nullptr : wk + static_cast<std::uint64_t>(c_hi) * p.taps;
        for (std::uint64_t t = 0; t < p.taps; ++t)
          w[((kb * p.pairs + pr) * p.taps + t) * tile_k + kk] =
              pair_word(lo ? lo[t] : 0, hi ? hi[t] : 0);
      }
    }
    live_steps(w, p.pairs, p.taps, tile_k, live, live_w);
  };
  if (kept)
    kept->fill_once(fill);
  else
    fill();
  p.w_data = w.data();
  p.live = live;
  p.live_w_data = live.size() < p.pairs * p.taps ? live_w.data() : p.w_data;
}

void live_steps(const std::vector<std::uint32_t>& w, std::uint64_t groups, std::uint64_t taps,
                std::uint64_t block, std::vector<std::uint32_t>& steps,
                std::vector<std::uint32_t>& live_w) {
  steps.clear();
  live_w.clear();
  const std::uint64_t per_block = groups * taps;
  if (per_block == 0 || block == 0) return;
  const std::uint64_t blocks = w.size() / (per_block * block);
  std::vector<std::uint8_t> live(per_block, 0);
  for (std::uint64_t b = 0; b < blocks; ++b)
    for (std::uint64_t s = 0; s < per_block; ++s) {
      const std::uint32_t* words = w.data() + (b * per_block + s) * block;
      live[s] |= std::any_of(words, words + block, [](std::uint32_t v) { return v != 0; });
    }
  for (std::uint64_t s = 0; s < per_block; ++s)
    if (live[s]) steps.push_back(static_cast<std::uint32_t>(s));
  if (steps.size() == per_block) return;
  live_w.reserve(blocks * steps.size() * block);
  for (std::uint64_t b = 0; b < blocks; ++b)
    for (const std::uint32_t s : steps) {
      const std::uint32_t* words = w.data() + (b * per_block + s) * block;
      live_w.insert(live_w.end(), words, words + block);
    }
}

// How many of the live steps (g * taps + t, ascending) belong to the first `groups` groups: the
// index of the second phase's first step.
static std::uint64_t live_steps_before(std::span<const std::uint32_t> live, std::uint64_t groups,
                                       std::uint64_t taps) {
  return static_cast<std::uint64_t>(std::lower_bound(live.begin(), live.end(), groups * taps) -
                                    live.begin());
}

void set_step_pairs(const StepPairs& pairs, GemmOperands& op) {
  op.single_begin = pairs.begin.empty() ? nullptr : pairs.begin.data();
  op.singles = pairs.singles.empty() ? nullptr : pairs.singles.data();
}

bool takes_pairs(const GemmOperands& op, std::uint64_t kb) {
  return op.single_begin && 2 * (op.single_begin[kb / 2 + 1] - op.single_begin[kb / 2]) <= op.steps;
}

std::uint64_t pair_boundary(const GemmOperands& op, std::uint64_t kb, std::uint64_t s) {
  if (s >= op.steps) return op.steps;
  if (!op.single_begin) return s;  // every step single
  std::uint64_t run_start = 0;     // of the pairs s is in; with no single, the first step
  if (op.singles) {
    const std::uint32_t* first = op.singles + op.single_begin[kb / 2];
    const std::uint32_t* end = std::lower_bound(first, op.singles + op.single_begin[kb / 2 + 1], s);
    if (end != first) run_start = std::uint64_t{end[-1]} + 1;
  }
  return (s - run_start) % 2 == 0 ? s : s + 1;
}

void pair_steps(const std::vector<std::uint32_t>& w, std::uint64_t steps, std::uint64_t split,
                StepPairs& pairs) {
  pairs.singles.clear();
  pairs.begin.clear();
  if (steps == 0 || split > steps) return;
  const std::uint64_t blocks = w.size() / (steps * kGemmBlock), groups = (blocks + 1) / 2;
  // Per lane (2 blocks x 8 words x 2 halves) of a step: the sums of its positive weights and of
  // its negative weights' magnitudes. 127 * sum <= 32767 (or 32768) is sum <= 258 for both.
  constexpr int kLanes = 2 * kGemmBlock * 2, kBound = 258;
  static_assert(std::endian::native == std::endian::little, "weight words are read as bytes");
  struct Sums {
    std::array<std::uint16_t, kLanes> positive{}, negative{};
  };
  auto sums = [&](std::uint64_t g, std::uint64_t s, Sums& out) {
    out = {};
    for (std::uint64_t b = 2 * g; b < std::min(2 * g + 2, blocks); ++b) {
      // The words' bytes in memory order (byte k of the block is weight k % 4 of word k / 4);
      // branch-free and in fixed-length loops, so the compiler vectorizes them.
      const auto* v = reinterpret_cast<const std::int8_t*>(w.data() + (b * steps + s) * kGemmBlock);
      std::uint16_t* positive = out.positive.data() + (b - 2 * g) * kGemmBlock * 2;
      std::uint16_t* negative = out.negative.data() + (b - 2 * g) * kGemmBlock * 2;
      for (std::uint64_t l = 0; l < kGemmBlock * 2; ++l) {
        const int a = v[2 * l], c = v[2 * l + 1];
        positive[l] = static_cast<std::uint16_t>(std::max(a, 0) + std::max(c, 0));
        negative[l] = static_cast<std::uint16_t>(std::max(-a, 0) + std::max(-c, 0));
      }
    }
  };
  auto fits = [](const Sums& a, const Sums& b) {
    bool over = false;
    for (int l = 0; l < kLanes; ++l)
      over |= (a.positive[l] + b.positive[l] > kBound) | (a.negative[l] + b.negative[l] > kBound);
    return !over;
  };
  // In order, each step's sums once: step s pairs with the one before it when that one is still
  // unpaired, in the same phase, and they fit.
  Sums previous, current;
  for (std::uint64_t g = 0; g < groups; ++g) {
    pairs.begin.push_back(static_cast<std::uint32_t>(pairs.singles.size()));
    bool pending = false;
    for (std::uint64_t s = 0; s < steps; ++s) {
      sums(g, s, current);
      if (pending && s != split && fits(previous, current)) {
        pending = false;
        continue;
      }
      if (pending) pairs.singles.push_back(static_cast<std::uint32_t>(s - 1));
      std::swap(previous, current);
      pending = true;
    }
    if (pending) pairs.singles.push_back(static_cast<std::uint32_t>(steps - 1));
  }
  pairs.begin.push_back(static_cast<std::uint32_t>(pairs.singles.size()));
}

void tiles_scalar(const Packed& p, std::uint64_t kb, std::uint64_t pair_begin,
                  std::uint64_t pair_end, bool accumulate, std::int32_t* y) {
  if (!accumulate) std::fill(y, y + kTileK * p.q_padded, 0);
  const std::uint32_t* w = p.w_data + kb * p.pairs * p.taps * kTileK;
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

bool inputs_nonnegative(const DenseConv& c) {
  const std::uint64_t n = c.padded_h * c.padded_w;
  for (const std::int64_t ch : c.channels) {
    const std::int8_t* plane = plane_of(c, ch);
    if (!plane) continue;
    // OR of the bytes, 8 at a time: a sign bit survives if any is negative.
    std::uint64_t any = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
      std::uint64_t v;
      std::memcpy(&v, plane + i, 8);
      any |= v;
    }
    for (; i < n; ++i) any |= static_cast<std::uint8_t>(plane[i]);
    if (any & 0x8080808080808080u) return false;
  }
  return true;
}

bool interleave_quads_scalar(const std::int8_t* const* src, std::uint64_t n, std::uint32_t* dst) {
  std::uint8_t any = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    std::uint32_t word = 0;
    for (int b = 0; b < 4; ++b) {
      const std::uint8_t v = src[b] ? static_cast<std::uint8_t>(src[b][i]) : 0;
      any |= v;
      word |= static_cast<std::uint32_t>(v) << (8 * b);
    }
    dst[i] = word;
  }
  return (any & 0x80) == 0;
}

bool pack_quads(const DenseConv& c, PackedQuads& p, std::uint32_t bias, QuadInterleave interleave,
                QuadRow from_words, std::span<const std::uint8_t> prefetch) {
  if (bias != 128 && bias != 0) fail("pack_quads: bias {} (128 or 0)", bias);
  p.bias = bias;
  const Phases ph = phases(c, p.tap_offset);
  p.wq = ph.wq;
  p.plane_words = ph.plane_words;
  p.taps = c.kh * c.kw;
  // Channels in quads: the first phase padded to a multiple of 4, then the second.
  std::vector<std::int64_t>& chans = thread_buffer<std::int64_t, QuadChannelTag>();
  quad_channels(c, chans);
  p.quads = chans.size() / 4;
  p.split_quads = c.split == c.channels.size() ? p.quads : (c.split + 3) / 4;
  p.q_count = c.oh() * p.wq;
  p.q_padded = (p.q_count + 15) / 16 * 16;
  // Fused (packed by `interleave` or `from_words`, which write the plain bytes, checking them):
  // at stride 1 the one phase is the plane, every word of it written by interleave; from the
  // words every word of every phase is written. With bias 128 the check is ignored and the
  // bytes are offset afterwards (x ^ 0x80 = x + 128 as u8, padding 0 included).
  if (from_words && !words_in_place(c))
    fail("pack_quads: internal error: the words do not hold the channels");
  const bool fused = from_words || (interleave && c.stride == 1);
  // Every byte x = 0 (the value of padding and of the zero channels): 0x80808080 with bias 128.
  if (fused) {
    grow_words(p.x, p.quads * p.plane_words, p.q_padded);
  } else {
    p.x.assign(p.quads * p.plane_words + p.q_padded, bias * 0x01010101u);
  }
  // A few lines per row packed (a quad's plane at once is one row): in bursts the prefetches
  // hold the fill buffers the packing's own loads need.
  std::uint64_t prefetched = 0;
  const auto prefetch_some = [&] {
    for (int i = 0; i < 4 && prefetched < prefetch.size(); ++i, prefetched += 64)
      __builtin_prefetch(prefetch.data() + prefetched, 0, 2);  // into L2
  };
  for (std::uint64_t qd = 0; qd < p.quads && from_words; ++qd) {
    std::uint64_t c0 = 0;
    unsigned lanes = 0;
    in_place(c, chans.data() + 4 * qd, 4, c0, lanes);
    if (!phases_from_words(
            c, ph, p.x.data() + qd * p.plane_words,
            [&](std::uint64_t at, std::uint64_t n, std::uint64_t step, std::uint32_t* out) {
              prefetch_some();
              return from_words(*c.words, c0, lanes, at, n, step, out) || bias != 0;
            }))
      return false;
  }
  for (std::uint64_t qd = 0; qd < p.quads && !from_words; ++qd) {
    const std::int8_t* src[4];
    for (int b = 0; b < 4; ++b) src[b] = plane_of(c, chans[4 * qd + static_cast<std::uint64_t>(b)]);
    if (fused) {
      if (!interleave(src, p.plane_words, p.x.data() + qd * p.plane_words) && bias == 0)
        return false;
      continue;
    }
    scatter_phases(c, ph, p.x.data() + qd * p.plane_words, [&](std::uint64_t at) {
      std::uint32_t word = 0;
      for (int b = 0; b < 4; ++b) {
        const std::int8_t v = src[b] ? src[b][at] : 0;
        word |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(v + static_cast<int>(bias)))
                << (8 * b);
      }
      return word;
    });
  }
  if (fused && bias != 0) {
    std::uint32_t* x = p.x.data();
    for (std::uint64_t i = 0, n = p.quads * p.plane_words; i < n; ++i) x[i] ^= 0x80808080u;
  }
  p.kn_padded = (c.kn + kGemmBlock - 1) / kGemmBlock * kGemmBlock;
  PackedWeights* kept = c.packs ? (bias ? &c.packs->quads128 : &c.packs->quads0) : nullptr;
  std::vector<std::uint32_t>& w = kept ? kept->w : p.w;
  std::vector<std::uint32_t>& offset_first = kept ? kept->offset_first : p.offset_first;
  std::vector<std::uint32_t>& offset_all = kept ? kept->offset_all : p.offset_all;
  std::vector<std::uint32_t>& live = kept ? kept->live_steps : p.live_steps;
  std::vector<std::uint32_t>& live_w = kept ? kept->live_w : p.live_w;
  StepPairs& step_pairs = kept ? kept->step_pairs : p.own_pairs;
  const auto fill = [&] {
    w.assign(p.kn_padded * p.quads * p.taps, 0);
    offset_first.assign(p.kn_padded, 0);  // the tiles read a whole block's
    offset_all.assign(p.kn_padded, 0);
    for (std::uint64_t k = 0; k < c.kn; ++k) {
      const std::uint64_t kb = k / kGemmBlock, kk = k % kGemmBlock;
      const std::int8_t* wk = c.weights + k * c.plane_count * p.taps;
      std::uint32_t sum_first = 0, sum_all = 0;
      for (std::uint64_t qd = 0; qd < p.quads; ++qd)
        for (std::uint64_t t = 0; t < p.taps; ++t) {
          std::uint32_t word = 0;
          for (int b = 0; b < 4; ++b) {
            const std::int64_t ch = chans[4 * qd + static_cast<std::uint64_t>(b)];
            // plane() has checked the channels.
            const std::int8_t v = ch < 0 ? 0 : wk[static_cast<std::uint64_t>(ch) * p.taps + t];
            word |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(v)) << (8 * b);
            sum_all += static_cast<std::uint32_t>(std::int32_t{v});
            if (qd < p.split_quads) sum_first += static_cast<std::uint32_t>(std::int32_t{v});
          }
          w[((kb * p.quads + qd) * p.taps + t) * kGemmBlock + kk] = word;
        }
      offset_first[k] = bias * sum_first;
      offset_all[k] = bias * sum_all;
    }
    live_steps(w, p.quads, p.taps, kGemmBlock, live, live_w);
    step_pairs = {};
    // The AVX2 GEMM form's operands (_mm256_maddubs_epi16 on inputs 0..127).
    if (bias == 0)
      pair_steps(live.size() < p.quads * p.taps ? live_w : w, live.size(),
                 live_steps_before(live, p.split_quads, p.taps), step_pairs);
  };
  if (kept)
    kept->fill_once(fill);
  else
    fill();
  p.w_data = w.data();
  p.live = live;
  p.live_w_data = live.size() < p.quads * p.taps ? live_w.data() : p.w_data;
  p.step_pairs = &step_pairs;
  p.offset_first_data = offset_first.data();
  p.offset_all_data = offset_all.data();
  return true;
}

namespace {
constexpr std::uint64_t kJoinedRow = 2 * kGemmBlock;  // 16 words, 64 bytes
// The first 64-byte-aligned word of join_block_pairs' storage: the rows start there.
const std::uint32_t* joined_rows(const std::vector<std::uint32_t>& joined) {
  const auto at = reinterpret_cast<std::uintptr_t>(joined.data());
  return joined.data() + (64 - at % 64) % 64 / sizeof(std::uint32_t);
}
}  // namespace

const std::uint32_t* join_block_pairs(const DenseConv& c, PackedQuads& p, std::uint32_t bias) {
  PackedWeights* kept = c.packs ? (bias ? &c.packs->joined128 : &c.packs->joined0) : nullptr;
  std::vector<std::uint32_t>& joined = kept ? kept->w : p.own_joined;
  constexpr std::uint64_t kRow = kJoinedRow;
  const auto aligned = [&] { return const_cast<std::uint32_t*>(joined_rows(joined)); };
  const auto fill = [&] {
    const std::uint64_t steps = p.live.size(), blocks = p.kn_padded / kGemmBlock;
    joined.assign((blocks + 1) / 2 * steps * kRow + kRow, 0);  // a row more to align
    std::uint32_t* out = aligned();
    for (std::uint64_t b = 0; b < blocks; ++b)
      for (std::uint64_t s = 0; s < steps; ++s)
        std::copy_n(p.live_w_data + (b * steps + s) * kGemmBlock, kGemmBlock,
                    out + (b / 2 * steps + s) * kRow + b % 2 * kGemmBlock);
  };
  if (kept)
    kept->fill_once(fill);
  else
    fill();
  return aligned();
}

namespace {
// The GEMM form's plain C++ tiles; product(x, w) is one word's products summed.
template <typename Product>
void gemm_scalar(const GemmOperands& op, std::uint64_t kb, std::uint64_t blocks,
                 const std::uint64_t* q, std::uint64_t n, std::uint64_t s_begin,
                 std::uint64_t s_end, bool accumulate, std::int32_t* y, Product&& product) {
  for (std::uint64_t i = 0; i < n; ++i)
    for (std::uint64_t b = 0; b < blocks; ++b) {
      const std::uint32_t* w = op.w + (kb + b) * op.steps * kGemmBlock;
      for (std::uint64_t j = 0; j < kGemmBlock; ++j) {
        std::int32_t& out = y[i * kGemmK + b * kGemmBlock + j];
        std::uint32_t sum = accumulate ? static_cast<std::uint32_t>(out) : 0;
        sum += static_cast<std::uint32_t>(op.start((kb + b) * kGemmBlock + j, s_begin, s_end));
        for (std::uint64_t s = s_begin; s < s_end; ++s)
          sum += static_cast<std::uint32_t>(product(
              op.x[static_cast<std::uint64_t>(op.offset[s]) + q[i]], w[s * kGemmBlock + j]));
        out = static_cast<std::int32_t>(sum);
      }
    }
}
}  // namespace

void gemm_pairs_scalar(const GemmOperands& op, std::uint64_t kb, std::uint64_t blocks,
                       const std::uint64_t* q, std::uint64_t n, std::uint64_t s_begin,
                       std::uint64_t s_end, bool accumulate, std::int32_t* y) {
  gemm_scalar(
      op, kb, blocks, q, n, s_begin, s_end, accumulate, y,
      [](std::uint32_t x, std::uint32_t w) { return low16(x) * low16(w) + high16(x) * high16(w); });
}

void gemm_quads_scalar(const GemmOperands& op, std::uint64_t kb, std::uint64_t blocks,
                       const std::uint64_t* q, std::uint64_t n, std::uint64_t s_begin,
                       std::uint64_t s_end, bool accumulate, std::int32_t* y) {
  gemm_scalar(op, kb, blocks, q, n, s_begin, s_end, accumulate, y,
              [](std::uint32_t x, std::uint32_t w) {
                std::int32_t sum = 0;
                for (int b = 0; b < 4; ++b)
                  sum += static_cast<std::int32_t>((x >> (8 * b)) & 0xFF) *
                         static_cast<std::int8_t>(w >> (8 * b));
                return sum;
              });
}

void lanes_out_scalar(const std::int32_t* y, std::uint64_t n, std::uint64_t k_count,
                      std::int32_t* out, std::uint64_t out_stride) {
  for (std::uint64_t k = 0; k < k_count; ++k)
    for (std::uint64_t i = 0; i < n; ++i) out[k * out_stride + i] = y[i * kGemmK + k];
}

}  // namespace detail

namespace {
void check(const DenseConv& c) {
  if (c.channels.size() % 2 || c.split % 2 || c.split > c.channels.size())
    fail("dense_conv: {} channels with the split at {}; both must be even", c.channels.size(),
         c.split);
  if (c.stride < 1 || c.kh < 1 || c.kw < 1 || c.padded_h < c.kh || c.padded_w < c.kw)
    fail("dense_conv: a {}x{} kernel with stride {} on a {}x{} plane", c.kh, c.kw, c.stride,
         c.padded_h, c.padded_w);
  // The int32 bound of the file comment: at most 2^17 - 1 products per output.
  if (c.channels.size() * c.kh * c.kw >= (std::uint64_t{1} << 17))
    fail("dense_conv: {} channels x {} taps could overflow int32", c.channels.size(), c.kh * c.kw);
}

// Runs `run(kb, begin, end, accumulate, y)` over the output-channel tiles and copies the tile
// rows out: snapshot rows after the first phase, acc rows at the end (the scalar level).
template <typename Run>
void drive(const DenseConv& c, std::uint64_t tile_k, std::uint64_t kn_padded,
           std::uint64_t q_padded, std::uint64_t wq, std::uint64_t split, std::uint64_t total,
           std::int32_t* acc, std::int32_t* snapshot, Run&& run) {
  const std::uint64_t oh = c.oh(), ow = c.ow(), pixels = oh * ow;
  // Virtual outputs back to pixels: row oh of the tile starts at oh * wq.
  auto extract = [&](const std::int32_t* y, std::int32_t* out) {
    for (std::uint64_t r = 0; r < oh; ++r) std::copy_n(y + r * wq, ow, out + r * ow);
  };
  // Output-channel tiles are independent (each writes its own acc / snapshot rows): one tile
  // per parallel_for index, each thread with its own tile buffer. (Passed by std::ref: a
  // std::function holds a reference without allocating, the lambda itself would not fit.)
  auto tile = [&](std::uint64_t kb) {
    std::vector<std::int32_t>& y = thread_buffer<std::int32_t, TileTag>();
    y.resize(tile_k * q_padded);  // every tile starts with accumulate = false
    const std::uint64_t k0 = kb * tile_k;
    if (snapshot && k0 + tile_k > c.snapshot_from) {
      run(kb, 0, split, false, y.data());
      for (std::uint64_t kk = 0; kk < tile_k; ++kk) {
        const std::uint64_t k = k0 + kk;
        if (k < c.kn && k >= c.snapshot_from)
          extract(y.data() + kk * q_padded, snapshot + (k - c.snapshot_from) * pixels);
      }
      run(kb, split, total, true, y.data());
    } else {
      run(kb, 0, total, false, y.data());
    }
    for (std::uint64_t kk = 0; kk < tile_k && k0 + kk < c.kn; ++kk)
      extract(y.data() + kk * q_padded, acc + (k0 + kk) * pixels);
  };
  parallel_for(kn_padded / tile_k, std::ref(tile));
}
}  // namespace

namespace detail {
// Work units of up to kGemmPixels output pixels x kGemmK output channels, each summed into its own
// y rows (every index writes its own acc / snapshot entries: any thread count gives the same
// integers); pixel units outer, so a unit's inputs stay in the cache for its channel blocks.
void dense_conv_gemm(const DenseConv& c, std::int32_t* acc, std::int32_t* snapshot,
                     GemmTiles quad_tiles, GemmTiles pair_tiles, LanesOut out,
                     QuadInterleave interleave, WordRows rows, const RowSink* sink,
                     bool offset_quads, std::uint64_t quad_blocks, GemmUnits* later,
                     std::uint64_t chunk_steps) {
  check(c);
  const bool from_words = words_in_place(c);
  thread_local Packed packed_pairs;
  thread_local PackedQuads packed_quads;
  GemmOperands op;
  std::uint64_t wq = 0, kn_padded = 0, split = 0, plane_words = 0, taps = 0;
  const std::int64_t* tap_offset = nullptr;
  std::span<const std::uint32_t> live;
  bool quads = false, shifted = false;  // shifted: u8 = x + 128
  // The first unit's weights, when kept from an earlier call (image after image), come into L2
  // while the input is packed; each unit brings in the next one's (GemmOperands::prefetch).
  std::span<const std::uint8_t> first_unit;
  if (quad_tiles && quad_blocks >= 4 && c.packs && c.packs->joined0.ready()) {
    const std::vector<std::uint32_t>& joined = c.packs->joined0.w;
    const std::uint64_t blocks = (c.kn + kGemmBlock - 1) / kGemmBlock;
    GemmOperands kept;  // join_block_pairs' rows (a row more to align), as the tiles will read them
    kept.w_joined = joined_rows(joined);
    kept.steps = (joined.size() - kJoinedRow) / ((blocks + 1) / 2 * kJoinedRow);
    first_unit = kept.block_weights(0, std::min(blocks, kGemmVnniBlocks));
  }
  if (quad_tiles && from_words)
    quads = pack_quads(c, packed_quads, 0, nullptr, rows.quads, first_unit);
  else if (quad_tiles)
    quads = c.stride == 1 && interleave ? pack_quads(c, packed_quads, 0, interleave)
                                        : inputs_nonnegative(c) && pack_quads(c, packed_quads, 0);
  if (quad_tiles && !quads && offset_quads)
    quads = shifted = pack_quads(c, packed_quads, 128, c.stride == 1 ? interleave : nullptr,
                                 from_words ? rows.quads : nullptr);
  if (quads) {
    PackedQuads& p = packed_quads;
    op.x = p.x.data(), op.w = p.live_w_data, taps = p.taps, live = p.live;
    wq = p.wq, kn_padded = p.kn_padded, split = p.split_quads, plane_words = p.plane_words;
    tap_offset = p.tap_offset.data();
    if (!shifted) {
      set_step_pairs(*p.step_pairs, op);
    } else {  // each phase's sums start at -128 * the sum of its weights
      op.offset_first = p.offset_first_data, op.offset_all = p.offset_all_data;
    }
  } else {
    Packed& p = packed_pairs;
    pack(c, p, kGemmBlock, from_words ? rows.pairs : nullptr);
    op.x = p.x.data(), op.w = p.live_w_data, taps = p.taps, live = p.live;
    wq = p.wq, kn_padded = p.kn_padded, split = c.split / 2, plane_words = p.plane_words;
    tap_offset = p.tap_offset.data();
  }
  if (quads && quad_blocks >= 4)  // the zmm tiles
    op.w_joined = join_block_pairs(c, packed_quads, shifted ? 128 : 0);
  // The live steps only (live_steps): an all-zero (group, tap) adds nothing to any sum.
  op.steps = live.size();
  std::vector<std::int64_t>& offset = thread_buffer<std::int64_t, GemmOffsetTag>();
  offset.resize(live.size());
  for (std::uint64_t i = 0; i < live.size(); ++i)
    offset[i] =
        static_cast<std::int64_t>(live[i] / taps * plane_words) + tap_offset[live[i] % taps];
  op.offset = offset.data();
  // The steps of the first phase's groups (the snapshot), and all of them.
  const std::uint64_t split_steps = live_steps_before(live, split, taps);
  op.split = split_steps;
  const std::uint64_t ow = c.ow(), pixels = c.oh() * ow;
  // Pixel units of as equal a size as whole words allow (14x14: 4 x 49 -> 52, 52, 52, 40, not
  // 64, 64, 64, 4, whose last unit streams every weight for 4 pixels).
  // (A multiple of 4: the row sink takes whole words.)
  const std::uint64_t fewest_units =
      std::max<std::uint64_t>(1, (pixels + kGemmPixels - 1) / kGemmPixels);
  GemmPlan plan;
  plan.op = op;
  plan.tiles = quads ? quad_tiles : pair_tiles;
  plan.out = out;
  if (sink) plan.sink = *sink;
  plan.acc = acc;
  plan.snapshot = snapshot;
  plan.shape.pixels = pixels;
  plan.shape.unit_pixels =
      std::min(kGemmPixels, ((pixels + fewest_units - 1) / fewest_units + 3) / 4 * 4);
  plan.shape.k_units = (kn_padded + kGemmK - 1) / kGemmK;
  plan.shape.kn = c.kn;
  plan.p_units = (pixels + plan.shape.unit_pixels - 1) / plan.shape.unit_pixels;
  plan.ow = ow, plan.wq = wq, plan.kn_padded = kn_padded;
  plan.snapshot_from = c.snapshot_from, plan.split_steps = split_steps;
  plan.per_call = quads ? quad_blocks : 2;
  // Not on the offset quads: their sums' starts are per phase (GemmOperands::start), and a
  // chunk's cut falls inside one.
  plan.chunk_steps = quads && !shifted ? chunk_steps : 0;
  if (later) {
    // The units run later, from `later`: it takes over the buffers their operands point into
    // (a vector's swap keeps its storage where it is) and leaves this thread its earlier ones.
    later->plan = plan;
    std::swap(later->quads, packed_quads);
    std::swap(later->pairs, packed_pairs);
    std::swap(later->offset, offset);
    return;
  }
  run_gemm_units(plan);
}

void run_gemm_units(const GemmPlan& plan) {
  auto unit = [&](std::uint64_t u) { run_gemm_unit(plan, u); };
  parallel_for(plan.p_units * plan.shape.k_units, std::ref(unit));
}

// A work unit's y rows to its sink, or to acc.
static void hand_over_unit(const GemmPlan& plan, const std::int32_t* y, std::uint64_t p0,
                           std::uint64_t n, std::uint64_t k0, std::uint64_t k_end) {
  if (plan.sink.fn)
    plan.sink.fn(plan.sink.ctx, y, kGemmK, p0, n, k0, k_end - k0);
  else
    plan.out(y, n, k_end - k0, plan.acc + k0 * plan.shape.pixels + p0, plan.shape.pixels);
}

// The weights of work unit u's channels (GemmOperands::block_weights).
static std::span<const std::uint8_t> unit_weights(const GemmPlan& plan, std::uint64_t u) {
  const std::uint64_t k0 = u % plan.shape.k_units * kGemmK;
  return plan.op.block_weights(k0 / kGemmBlock, std::min(kGemmK, plan.kn_padded - k0) / kGemmBlock);
}

void run_gemm_unit(const GemmPlan& plan, std::uint64_t u, UnitRun how) {
  if (how.onto_tile && plan.snapshot)
    fail("dense_conv: a work unit with a snapshot cannot add its sums to another unit's");
  const std::uint64_t k_units = plan.shape.k_units, unit_pixels = plan.shape.unit_pixels;
  const std::uint64_t pixels = plan.shape.pixels, ow = plan.ow, kn_padded = plan.kn_padded;
  const std::uint64_t p0 = u / k_units * unit_pixels, k0 = u % k_units * kGemmK;
  const std::uint64_t n = std::min(unit_pixels, pixels - p0);
  const std::uint64_t blocks = std::min(kGemmK, kn_padded - k0) / kGemmBlock;
  // While this unit runs, the first tile call of each pass over steps [s0, s1) brings their
  // share of the next unit's weights into L2 (`share`; the other calls take plan.op, which has
  // none). On one thread, and in eval, whose images each run on one thread, that unit runs next
  // on this core. A unit's weights are cold only on a layer's first pass over its pixels, but
  // with few pixels (7x7: one pass) that is every unit.
  const GemmOperands& op = plan.op;
  GemmOperands prefetching = plan.op;
  std::span<const std::uint8_t> next;
  if (k_units > 1 && u + 1 < plan.p_units * k_units && op.steps > 0)
    next = unit_weights(plan, u + 1);
  const auto share = [&](std::uint64_t s0, std::uint64_t s1) -> const GemmOperands& {
    if (next.empty()) return op;
    const std::uint64_t from = next.size() * s0 / op.steps, to = next.size() * s1 / op.steps;
    prefetching.prefetch = next.data() + from, prefetching.prefetch_bytes = to - from;
    return prefetching;
  };
  // Pixel p0 + i at (row, column) of the output is word row * wq + column: one division per
  // unit, and from pixel to pixel the next word, or at a row's end the next row's first. The
  // units of one pixel range follow each other on a thread (u % k_units is the channel range),
  // so the list is kept until the range changes: the stem's units of 4-16 steps spent a tenth of
  // their time making it.
  thread_local struct PixelWords {
    std::uint64_t p0 = 0, n = 0, ow = 0, wq = 0;
    std::uint64_t q[kGemmPixels];
  } words;
  const std::uint64_t* const q = words.q;
  if (words.p0 != p0 || words.n != n || words.ow != ow || words.wq != plan.wq) {
    words.p0 = p0, words.n = n, words.ow = ow, words.wq = plan.wq;
    for (std::uint64_t i = 0, column = p0 % ow, at = p0 / ow * plan.wq + column; i < n; ++i) {
      words.q[i] = at++;
      if (++column == ow) column = 0, at += plan.wq - ow;
    }
  }
  std::vector<std::int32_t>& y = thread_buffer<std::int32_t, TileTag>();
  y.resize(kGemmPixels * kGemmK + 8);  // lanes_out_avx2 reads up to 7 lanes past the last row
  const std::uint64_t k_end = std::min(plan.shape.kn, k0 + blocks * kGemmBlock);
  if (plan.chunk_steps && !plan.snapshot && op.steps >= 2 * plan.chunk_steps) {
    // Chunk by chunk, each over every group; a group's chunk ends where its pairs allow.
    std::uint64_t begin[kGemmK / kGemmBlock] = {};
    for (std::uint64_t cut = plan.chunk_steps;; cut += plan.chunk_steps) {
      for (std::uint64_t b = 0, i = 0; b < blocks; b += plan.per_call, ++i) {
        const std::uint64_t kb = k0 / kGemmBlock + b;
        const std::uint64_t end = pair_boundary(op, kb, cut);
        if (end > begin[i])
          plan.tiles(b == 0 ? share(begin[i], end) : op, kb, std::min(plan.per_call, blocks - b), q,
                     n, begin[i], end, begin[i] > 0 || how.onto_tile, y.data() + b * kGemmBlock);
        begin[i] = end;
      }
      if (cut >= op.steps) break;
    }
    if (how.hand_over) hand_over_unit(plan, y.data(), p0, n, k0, k_end);
    return;
  }
  // Per tile's channels (16, or 8 * quad_blocks on quads): one pass over every step, or, when
  // some of its channels are in the snapshot, the first phase, the snapshot rows, then the
  // second phase (a snapshot is usually the last kernel iteration's few channels, so most
  // tiles take one pass).
  for (std::uint64_t b = 0; b < blocks; b += plan.per_call) {
    const std::uint64_t count = std::min(plan.per_call, blocks - b);
    const std::uint64_t t0 = k0 + b * kGemmBlock, t_end = std::min(k_end, t0 + count * kGemmBlock);
    std::int32_t* const yt = y.data() + b * kGemmBlock;
    const auto run = [&](std::uint64_t begin, std::uint64_t end, bool accumulate) {
      plan.tiles(b == 0 ? share(begin, end) : op, t0 / kGemmBlock, count, q, n, begin, end,
                 accumulate, yt);
    };
    if (plan.snapshot && t_end > plan.snapshot_from) {
      run(0, plan.split_steps, false);
      const std::uint64_t from = std::max(plan.snapshot_from, t0);
      plan.out(y.data() + (from - k0), n, t_end - from,
               plan.snapshot + (from - plan.snapshot_from) * pixels + p0, pixels);
      run(plan.split_steps, op.steps, true);
    } else {
      run(0, op.steps, how.onto_tile);
    }
  }
  if (how.hand_over) hand_over_unit(plan, y.data(), p0, n, k0, k_end);
}
}  // namespace detail

namespace {
// Whether dense_conv at this level takes the GEMM form: every level but the scalar one (which
// runs its own tiles).
bool gemm_level(Isa level) { return cpu::path_allowed(level, Isa::kAvx2); }

// The GEMM form with the level's pieces (dense_conv, and dense_conv_rows): at the AVX-512 VNNI
// and AVX-VNNI levels their vpdpbusd tiles, on u8 quads always (x + 128 when an input is
// negative: 4 products per vpdpbusd where the int16 pairs would give 2 per vpdpwssd); else the
// AVX2 ones. The tiles of 2 blocks a call (AVX2, AVX-VNNI) sum long step lists in chunks
// (kGemmChunkSteps; measured on a Zen 3 with the AVX2 tiles); the zmm ones take a unit's 64
// channels in one call and gained nothing from chunks (docs/performance.md, stop 49).
void dense_conv_gemm_at(Isa level, const DenseConv& c, std::int32_t* acc, std::int32_t* snapshot,
                        const RowSink* sink, GemmUnits* later = nullptr) {
  using namespace detail;
  const bool vnni = cpu::path_allowed(level, Isa::kAvx512Vnni);
  const bool avx_vnni = cpu::path_allowed(level, Isa::kAvxVnni);
  dense_conv_gemm(c, acc, snapshot,
                  vnni       ? gemm_quads_avx512vnni
                  : avx_vnni ? gemm_quads_avxvnni
                             : gemm_quads_avx2,
                  gemm_pairs_avx2, lanes_out_avx2, interleave_quads_avx2,
                  {quad_row_avx2, pair_row_avx2}, sink, vnni || avx_vnni,
                  vnni ? kGemmVnniBlocks : 2, later, vnni ? 0 : kGemmChunkSteps);
}
}  // namespace

bool reads_words(const DenseConv& c, Isa isa) {
  return gemm_level(cpu::resolve(isa, "dense_conv")) && detail::words_in_place(c);
}

void dense_conv(const DenseConv& c, std::int32_t* acc, std::int32_t* snapshot, Isa isa) {
  using namespace detail;
  const Isa level = cpu::resolve(isa, "dense_conv");
  // The channels-in-lanes form (every lane a real output), on u8 quads when every input is
  // 0..127 (after a ReLU: conv_kernels.h PackedQuads), else on int16 pairs. At AVX2 it beat the
  // virtual-output tiles this file had on every resnet18/50 shape in conv_kernels_bench (Zen 3,
  // one thread: 3x3 512 on 7x7 22 -> 77 GMAC/s relu, 20 -> 52 signed; 64 on 56x56 43 -> 62
  // relu, 30 -> 49 signed); the AVX-512 VNNI level runs the same form with vpdpbusd.
  // Exact integer Winograd F(2x2, 3x3) for 3x3 stride 1 (device/conv_winograd.h) is not
  // dispatched here: it beats this form in BM_DenseConv (one layer, weights hot), but timed per
  // layer inside `npukit eval` no shape gained on both resnets (e.g. 256 on 14x14: 0.95x and
  // 0.88x the CPU time in resnet50 at 1 and 2 threads, 0.99x and 1.09x in resnet18; 7x7 1.3-1.6x
  // everywhere); the table is in docs/device.md.
  if (gemm_level(level)) return dense_conv_gemm_at(level, c, acc, snapshot, nullptr);
  check(c);
  thread_local Packed packed;
  Packed& p = packed;  // the workers of parallel_for read this thread's copy
  pack(c, p);
  drive(c, kTileK, p.kn_padded, p.q_padded, p.wq, c.split / 2, p.pairs, acc, snapshot,
        [&](std::uint64_t kb, std::uint64_t begin, std::uint64_t end, bool accumulate,
            std::int32_t* y) { tiles_scalar(p, kb, begin, end, accumulate, y); });
}

bool has_dense_conv_rows(Isa isa) { return gemm_level(cpu::resolve(isa, "dense_conv")); }

bool dense_conv_rows(const DenseConv& c, std::int32_t* snapshot, const RowSink& sink, Isa isa,
                     GemmUnits* later) {
  const Isa level = cpu::resolve(isa, "dense_conv");
  if (!gemm_level(level)) return false;
  // The GEMM form's work units: up to kGemmPixels pixels, a multiple of 4 from a multiple of it,
  // and kGemmK (a multiple of 8) channels, which end at the last pixel or channel.
  static_assert(detail::kGemmPixels % 4 == 0 && detail::kGemmK % 8 == 0);
  dense_conv_gemm_at(level, c, nullptr, snapshot, &sink, later);
  return true;
}

void pack_planes(const std::int8_t* planes, std::uint64_t plane_count, std::uint64_t padded_h,
                 std::uint64_t padded_w, std::uint64_t kh, std::uint64_t kw, std::uint64_t s,
                 PlaneSet& set) {
  if (s < 1 || kh < 1 || kw < 1 || padded_h < kh || padded_w < kw)
    fail("pack_planes: a {}x{} kernel with stride {} on a {}x{} plane", kh, kw, s, padded_h,
         padded_w);
  set.padded_h = padded_h, set.padded_w = padded_w, set.kh = kh, set.kw = kw, set.stride = s;
  set.oh = (padded_h - kh) / s + 1;
  set.ow = (padded_w - kw) / s + 1;
  const std::uint64_t hq = (padded_h + s - 1) / s;
  set.wq = (padded_w + s - 1) / s;
  std::vector<std::int64_t> slot(s * s, -1);
  std::int64_t slots = 0;
  for (std::uint64_t i = 0; i < kh; ++i)
    for (std::uint64_t j = 0; j < kw; ++j)
      if (slot[(i % s) * s + j % s] < 0) slot[(i % s) * s + j % s] = slots++;
  const std::uint64_t phase = hq * set.wq;
  set.plane_words = static_cast<std::uint64_t>(slots) * phase;
  set.tap_offset.clear();
  for (std::uint64_t i = 0; i < kh; ++i)
    for (std::uint64_t j = 0; j < kw; ++j)
      set.tap_offset.push_back(
          static_cast<std::int64_t>(static_cast<std::uint64_t>(slot[(i % s) * s + j % s]) * phase +
                                    (i / s) * set.wq + j / s));
  // Slack: a 16-output vector starting at the last output reads 15 elements past it.
  if (s == 1) {  // one phase, the plane itself: every element is written
    set.x.resize(plane_count * set.plane_words + 32);
    const std::uint64_t n = plane_count * padded_h * padded_w;
    std::int16_t* dst = set.x.data();
    for (std::uint64_t i = 0; i < n; ++i) dst[i] = planes[i];
    std::fill(set.x.begin() + static_cast<std::ptrdiff_t>(n), set.x.end(), std::int16_t{0});
    return;
  }
  set.x.assign(plane_count * set.plane_words + 32, 0);
  // The stride as a compile-time constant, and each phase row's length worked out first, so the
  // strided copy is a plain loop the compiler vectorizes (it was half of a stride-2 depthwise
  // layer's time as a bounds-checked scalar loop).
  auto split = [&](auto stride) {
    constexpr std::uint64_t S = decltype(stride)::value;
    for (std::uint64_t c = 0; c < plane_count; ++c) {
      const std::int8_t* src = planes + c * padded_h * padded_w;
      for (std::uint64_t ry = 0; ry < S; ++ry)
        for (std::uint64_t rx = 0; rx < S && rx < padded_w; ++rx) {
          if (slot[ry * S + rx] < 0) continue;
          std::int16_t* dst = set.x.data() + c * set.plane_words +
                              static_cast<std::uint64_t>(slot[ry * S + rx]) * phase;
          const std::uint64_t n = (padded_w - rx + S - 1) / S;  // xq * S + rx < padded_w
          for (std::uint64_t yq = 0; yq < hq && yq * S + ry < padded_h; ++yq) {
            const std::int8_t* row = src + (yq * S + ry) * padded_w + rx;
            std::int16_t* out = dst + yq * set.wq;
            for (std::uint64_t xq = 0; xq < n; ++xq) out[xq] = row[xq * S];
          }
        }
    }
  };
  switch (s) {
    case 2:
      return split(std::integral_constant<std::uint64_t, 2>{});
    case 3:
      return split(std::integral_constant<std::uint64_t, 3>{});
    case 4:
      return split(std::integral_constant<std::uint64_t, 4>{});
    default:
      fail("pack_planes: stride {} (the array's are 1 to 4)", s);
  }
}

void planes_to_be32_rows(const std::int32_t* planes, std::uint64_t count, std::uint64_t pixels,
                         std::uint64_t lanes, std::uint8_t* out, Isa isa) {
  if (count > lanes) fail("planes_to_be32_rows: {} planes for {} lanes", count, lanes);
  if (lanes == 8 && cpu::path_allowed(cpu::resolve(isa, "planes_to_be32_rows"), Isa::kAvx2))
    detail::planes_to_be32_rows_avx2(planes, count, pixels, out);
  else
    detail::planes_to_be32_rows_scalar(planes, count, pixels, lanes, out);
}

void connection_conv(const PlaneSet& set, std::uint64_t plane, const std::int8_t* taps,
                     std::int32_t* acc, Isa isa) {
  if ((plane + 1) * set.plane_words + 32 > set.x.size())
    fail("connection_conv: plane {} is not in the packed set", plane);
  if (cpu::path_allowed(cpu::resolve(isa, "connection_conv"), Isa::kAvx2))
    detail::connection_avx2(set, plane, taps, acc);
  else
    detail::connection_scalar(set, plane, taps, acc);
}

void depthwise_lanes(const DepthwiseLanes& c, std::int32_t* acc, Isa isa) {
  if (c.stride < 1 || c.kh < 1 || c.kw < 1 || c.kh * c.kw > 16 || c.padded_h < c.kh ||
      c.padded_w < c.kw)
    fail("depthwise_lanes: a {}x{} kernel with stride {} on a {}x{} plane", c.kh, c.kw, c.stride,
         c.padded_h, c.padded_w);
  const bool avx2 = cpu::path_allowed(cpu::resolve(isa, "depthwise_lanes"), Isa::kAvx2);
  // Groups of 8 channels are independent (own planes, own acc rows).
  parallel_for((c.channels + 7) / 8, [&](std::uint64_t g) {
    if (avx2)
      detail::depthwise_lanes_avx2(c, g * 8, acc);
    else
      detail::depthwise_lanes_scalar(c, g * 8, acc);
  });
}

namespace detail {
void depthwise_lanes_scalar(const DepthwiseLanes& c, std::uint64_t k0, std::int32_t* acc) {
  const std::uint64_t oh = c.oh(), ow = c.ow(), taps = c.kh * c.kw;
  for (std::uint64_t k = k0; k < std::min(k0 + 8, c.channels); ++k) {
    const std::int8_t* plane = c.planes + k * c.padded_h * c.padded_w;
    const std::int8_t* w = c.taps + k * taps;
    for (std::uint64_t y = 0; y < oh; ++y)
      for (std::uint64_t x = 0; x < ow; ++x) {
        std::int32_t sum = 0;
        for (std::uint64_t i = 0; i < c.kh; ++i)
          for (std::uint64_t j = 0; j < c.kw; ++j)
            sum += std::int32_t{w[i * c.kw + j]} *
                   plane[(y * c.stride + i) * c.padded_w + x * c.stride + j];
        acc[k * oh * ow + y * ow + x] = sum;
      }
  }
}

void planes_to_be32_rows_scalar(const std::int32_t* planes, std::uint64_t count,
                                std::uint64_t pixels, std::uint64_t lanes, std::uint8_t* out,
                                std::uint64_t first) {
  for (std::uint64_t p = first; p < pixels; ++p)
    for (std::uint64_t j = 0; j < lanes; ++j)
      store_be32(out + (p * lanes + j) * 4,
                 j < count ? static_cast<std::uint32_t>(planes[j * pixels + p]) : 0u);
}

void connection_scalar(const PlaneSet& set, std::uint64_t plane, const std::int8_t* taps,
                       std::int32_t* acc) {
  const std::int16_t* base = set.x.data() + plane * set.plane_words;
  const std::uint64_t n_taps = set.kh * set.kw;
  for (std::uint64_t r = 0; r < set.oh; ++r) {
    std::int32_t* a = acc + r * set.ow;
    for (std::uint64_t t = 0; t < n_taps; ++t) {
      const std::int32_t w = taps[t];
      if (w == 0) continue;
      const std::int16_t* x = base + set.tap_offset[t] + r * set.wq;
      for (std::uint64_t i = 0; i < set.ow; ++i) a[i] += w * x[i];
    }
  }
}
}  // namespace detail

}  // namespace npukit::device::conv_kernels
