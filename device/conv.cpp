// CONV megablock (gati.md 3.2, 6, 8 "Systolic array", 14.1/14.8-14.12).
//
// The model follows the datapath, not a textbook convolution: it reads the weight blob exactly as
// the weight FIFOs receive it (one ROW x COLS x N_SA block per kernel iteration and channel
// iteration, rows in reverse order), maps every byte to the PE that holds it (engine, column,
// row) and from there to the (output channel, input channel, kernel tap) it multiplies, so a blob
// in the wrong layout gives the wrong answer here as it would on the board. The image is read from
// DRAM in the 6.1 layout, padding channels included, as the im2col engine reads it.
//
// Arithmetic widths: a PE column sums ROW int8 x int8 products; |sum| <= 16 * 128 * 128 = 2^18 fits
// the 20-bit W_PSUM bus, so the partial sum into the adder tree never wraps. The adder tree and
// the int32 accumulators add N_SA such sums per channel group; KC <= 4095 bounds the total by
// 4096 (padded channels) * 16 * 2^14 = 2^30 < 2^31, so accumulation never wraps either and its
// order does not matter. The 32-bit adds that can wrap (accumulant, bias) wrap in the tail, as in
// hardware.
//
// Once the bytes are mapped, the sums are computed in whatever order is fastest (exact, by the
// bound above): the regular, ChannelDuplicate and pointwise modes as one dense convolution in
// register tiles (device/conv_kernels.h, the CPU's best SIMD path), depthwise convs (one input
// channel per output channel) one connection at a time (conv_kernels::connection_conv).
#include "common/parallel.h"
#include "device/block.h"
#include "device/conv_kernels.h"
#include "device/depthwise.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

namespace npukit::device {

using isa::Field;

namespace {

// Per-thread buffers reused from layer to layer (conv_kernels::thread_buffer).
struct PlaneTag;
struct PieceTag;
struct AccTag;
struct PartialTag;
struct SnapshotTag;
struct ResultTag;
struct RawTag;
struct OwnTag;
struct BlobTag;
template <typename T, typename Tag>
std::vector<T>& reused() {
  return conv_kernels::thread_buffer<T, Tag>();
}
// Room for n elements in such a buffer, which only ever grows: std::vector::resize zero-fills
// every element it adds even within the capacity, so resizing per layer would clear, after each
// smaller layer, the memory a larger one is about to overwrite anyway. Users take data() and their
// own n, never size(), and write every element they read.
template <typename T, typename Tag>
T* reused_room(std::uint64_t n) {
  std::vector<T>& v = reused<T, Tag>();
  if (v.size() < n) v.resize(n);
  return v.data();
}

// About 15 minutes of simulation: a bound so a malformed program cannot keep the model busy for
// days (resnet50's largest layer is ~0.1e9).
constexpr std::uint64_t kMaxLayerMacs = 1ull << 40;

// How the weight blob's (kern, chan, row, a, b) maps onto channels for each array use.
enum class ConvMode {
  kRegular,           // 9,4,4 / 9,8,8: a = engine = input channel in group, b = column = kernel
  kDepthwise,         // 9,4,4 / 9,8,8: the same array; engine a reads channel kern*N_SA + a (14.1)
  kChannelDuplicate,  // 16,1,16 regular: every engine sees channel `chan`, engine b = kernel
  kDepthwise16,       // 16,1,16 depthwise: engine b = kernel kern*16 + b on channel kern*16 + b
  kPointwise16,       // 16,1,16 ConvType PW: row r = kernel, engine c = input channel (6.2)
};

struct ConvGeometry {
  std::uint64_t iw, ih, ic, kn, kc, kw, kh, stride;
  std::uint64_t pad_left, pad_right, pad_top, pad_bottom, skip_top, skip_bottom;
  std::uint64_t padded_w, padded_h;  // after padding and row skips
  std::uint64_t ow, oh;
};

struct Mapping {
  ConvMode mode;
  std::uint64_t kern_dim, chan_dim, kitr, citr;
};

// One (output channel, input channel) pair with its kernel taps, and the channel iteration it
// belongs to (for the DRAM partial sums).
struct Connection {
  std::uint32_t in_channel;
  std::uint32_t chan_iter;
  std::array<std::int8_t, 16> taps;  // by flattened tap r = kh * KW + kw
};

ConvGeometry read_geometry(const LayerContext& ctx) {
  const isa::Instruction& m = ctx.mega;
  ConvGeometry g{};
  g.iw = m.get(Field::CONV_IW);
  g.ih = m.get(Field::CONV_IH);
  g.ic = m.get(Field::CONV_IC);
  g.kn = m.get(Field::CONV_KN);
  g.kc = m.get(Field::CONV_KC);
  g.kw = m.get(Field::CONV_KW);
  g.kh = m.get(Field::CONV_KH);
  g.stride = m.get(Field::CONV_Stride);
  g.pad_left = m.get(Field::CONV_PadLeft);
  g.pad_right = m.get(Field::CONV_PadRight);
  g.pad_top = m.get(Field::CONV_PadTop);
  g.pad_bottom = m.get(Field::CONV_PadBottom);
  g.skip_top = m.get(Field::CONV_StartRowSkip);
  g.skip_bottom = m.get(Field::CONV_EndRowSkip);
  if (g.iw == 0) ctx.fail_field(Field::CONV_IW, "is 0");
  if (g.ih == 0) ctx.fail_field(Field::CONV_IH, "is 0");
  if (g.ic == 0) ctx.fail_field(Field::CONV_IC, "is 0");
  if (g.kn == 0) ctx.fail_field(Field::CONV_KN, "is 0");
  if (g.kw == 0) ctx.fail_field(Field::CONV_KW, "is 0");
  if (g.kh == 0) ctx.fail_field(Field::CONV_KH, "is 0");
  if (g.stride < 1 || g.stride > 4)
    ctx.fail_field(Field::CONV_Stride, "is {}; the array supports strides 1 to 4", g.stride);
  const std::uint64_t rows = static_cast<std::uint64_t>(ctx.arch.rows);
  if (g.kh * g.kw > rows)
    ctx.fail_field(Field::CONV_KH,
                   "a {}x{} kernel has {} taps but a PE column holds {} (ROW of {}); split larger "
                   "kernels into pieces",
                   g.kh, g.kw, g.kh * g.kw, rows, ctx.arch.str());
  const std::uint64_t full_h = g.ih + g.pad_top + g.pad_bottom;
  if (g.skip_top + g.skip_bottom >= full_h)
    ctx.fail_field(Field::CONV_StartRowSkip,
                   "StartRowSkip {} + EndRowSkip {} remove all {} rows of the padded image",
                   g.skip_top, g.skip_bottom, full_h);
  g.padded_h = full_h - g.skip_top - g.skip_bottom;
  g.padded_w = g.iw + g.pad_left + g.pad_right;
  if (g.padded_h < g.kh)
    ctx.fail_field(Field::CONV_KH, "{} is taller than the {} padded (and row-skipped) input rows",
                   g.kh, g.padded_h);
  if (g.padded_w < g.kw)
    ctx.fail_field(Field::CONV_KW, "{} is wider than the {} padded input columns", g.kw,
                   g.padded_w);
  g.oh = (g.padded_h - g.kh) / g.stride + 1;
  g.ow = (g.padded_w - g.kw) / g.stride + 1;
  return g;
}

Mapping choose_mapping(const LayerContext& ctx, const ConvGeometry& g) {
  const isa::Instruction& m = ctx.mega;
  const std::uint64_t conv_type = m.get(Field::CONV_ConvType);
  const bool duplicate = m.get(Field::CONV_ChannelDuplicate) != 0;
  const bool optimal = ctx.arch.regular_optimal();
  const std::uint64_t rows = static_cast<std::uint64_t>(ctx.arch.rows);
  const std::uint64_t cols = static_cast<std::uint64_t>(ctx.arch.cols);
  const std::uint64_t n_sa = static_cast<std::uint64_t>(ctx.arch.n_sa);
  Mapping map{};
  switch (conv_type) {
    case 0:  // regular
      if (g.kc != g.ic)
        ctx.fail_field(Field::CONV_KC, "is {} but a regular conv needs KC = IC = {}", g.kc, g.ic);
      if (optimal) {
        if (duplicate)
          ctx.fail_field(Field::CONV_ChannelDuplicate,
                         "is 1 on {}, where regular convs run natively; it is for 16,1,16 only",
                         ctx.arch.str());
        map = {ConvMode::kRegular, cols, n_sa, ceil_div(g.kn, cols), ceil_div(g.kc, n_sa)};
      } else {
        if (!duplicate)
          ctx.fail_field(Field::CONV_ChannelDuplicate,
                         "is 0, but a regular conv on {} needs ChannelDuplicate = 1",
                         ctx.arch.str());
        map = {ConvMode::kChannelDuplicate, n_sa, cols, ceil_div(g.kn, n_sa), g.kc};
      }
      break;
    case 1:  // depthwise
      if (g.kc != 1)
        ctx.fail_field(Field::CONV_KC, "is {} but a depthwise conv needs KC = 1", g.kc);
      if (g.kn != g.ic)
        ctx.fail_field(Field::CONV_KN, "is {} but a depthwise conv needs KN = IC = {}", g.kn, g.ic);
      if (duplicate) ctx.fail_field(Field::CONV_ChannelDuplicate, "must be 0 for a depthwise conv");
      if (optimal) {
        map = {ConvMode::kDepthwise, cols, n_sa, ceil_div(g.kn, n_sa), 1};
      } else {
        map = {ConvMode::kDepthwise16, n_sa, cols, ceil_div(g.kn, n_sa), 1};
        ctx.diag.erratum(ctx.layer_number, Erratum::kIncomplete16x1x16,
                         "depthwise conv on 16,1,16 (the weight layout used is documented in "
                         "docs/device.md)");
      }
      break;
    case 2:  // pointwise
      if (optimal)
        ctx.fail_field(Field::CONV_ConvType,
                       "is 2 (pointwise), which exists only on 16,1,16; on {} a 1x1 conv is a "
                       "regular conv (ConvType 0, gati.md 14.8)",
                       ctx.arch.str());
      if (g.kh != 1 || g.kw != 1)
        ctx.fail_field(Field::CONV_ConvType, "is 2 (pointwise) but the kernel is {}x{}, not 1x1",
                       g.kh, g.kw);
      if (g.kc != g.ic)
        ctx.fail_field(Field::CONV_KC, "is {} but a pointwise conv needs KC = IC = {}", g.kc, g.ic);
      if (duplicate) ctx.fail_field(Field::CONV_ChannelDuplicate, "must be 0 for a pointwise conv");
      map = {ConvMode::kPointwise16, n_sa, rows, ceil_div(g.kn, n_sa), ceil_div(g.kc, rows)};
      ctx.diag.erratum(ctx.layer_number, Erratum::kIncomplete16x1x16,
                       "ConvType PW on 16,1,16 was never run on the RTL");
      break;
    default:
      ctx.fail_field(Field::CONV_ConvType, "is {}; defined are 0 regular, 1 depthwise, 2 pointwise",
                     conv_type);
  }
  return map;
}

// A blob is kitr x citr fold blocks of ROW x COLS x N_SA bytes. In every mode but the pointwise
// one a block holds ROW PE rows of chan_dim x kern_dim bytes, bottom row first, and the rows
// beyond the kernel's taps come first: bytes [0, dead_bytes) of the block, which multiply
// nothing. The rest of the block, the live bytes, is what the weights are.
struct BlobLayout {
  std::uint64_t block = 0, dead_bytes = 0;
};

BlobLayout blob_layout(const LayerContext& ctx, const ConvGeometry& g, const Mapping& map) {
  const std::uint64_t rows = static_cast<std::uint64_t>(ctx.arch.rows), taps = g.kh * g.kw;
  BlobLayout l;
  l.block =
      rows * static_cast<std::uint64_t>(ctx.arch.cols) * static_cast<std::uint64_t>(ctx.arch.n_sa);
  if (map.mode != ConvMode::kPointwise16 && rows > taps)
    l.dead_bytes = (rows - taps) * map.chan_dim * map.kern_dim;
  return l;
}

// How many of kernel iteration `kern`'s kern_dim output channels are real (< KN), not padding.
std::uint64_t real_kernels(const ConvGeometry& g, const Mapping& map, std::uint64_t kern) {
  const std::uint64_t k0 = kern * map.kern_dim;
  return g.kn > k0 ? std::min<std::uint64_t>(map.kern_dim, g.kn - k0) : 0;
}

// Whether the dead bytes of the fold block at `base` (kernel iteration `kern`) hold a non-zero
// byte of a real output channel: the "ignored rows" warning (warn_ignored_rows).
bool dead_rows_nonzero(const std::uint8_t* base, const BlobLayout& l, const ConvGeometry& g,
                       const Mapping& map, std::uint64_t kern) {
  const std::uint64_t real_b = real_kernels(g, map, kern);
  if (real_b == 0 || l.dead_bytes == 0) return false;
  if (real_b == map.kern_dim) {  // every output channel of the fold is real: whole words
    std::uint64_t any = 0, i = 0;
    for (; i + 8 <= l.dead_bytes; i += 8) {
      std::uint64_t word;
      std::memcpy(&word, base + i, 8);
      any |= word;
    }
    for (; i < l.dead_bytes; ++i) any |= base[i];
    return any != 0;
  }
  for (std::uint64_t i = 0; i < l.dead_bytes; ++i)
    if (base[i] != 0 && i % map.kern_dim < real_b) return true;
  return false;
}

// Reads the weight blob as the weight FIFOs receive it and calls set(k, c, chan_iter, tap, w) for
// every non-zero byte that multiplies something: output channel k < KN, input channel c <
// in_channels, tap < KH*KW (a later byte for the same (k, c, tap) overwrites an earlier one).
// Returns whether non-zero bytes sit in PE rows beyond the kernel's taps (warn_ignored_rows).
template <typename Set>
bool map_weights(const LayerContext& ctx, const ConvGeometry& g, const Mapping& map, ByteSpan blob,
                 std::uint64_t in_channels, Set&& set) {
  const std::uint64_t rows = static_cast<std::uint64_t>(ctx.arch.rows);
  const std::uint64_t taps = g.kh * g.kw;
  bool ignored_rows = false;
  auto add = [&](std::uint64_t k, std::uint64_t c, std::uint64_t chan_iter, std::uint64_t tap,
                 std::int8_t w) {
    if (w == 0 || k >= g.kn) return;  // padded kernels: their outputs are written as 0 anyway
    if (c >= in_channels) return;     // beyond the channels the image region holds
    set(k, c, chan_iter, tap, w);
  };
  // One fold's ROW x COLS x N_SA bytes (ROW x chan_dim x kern_dim except in the pointwise mode,
  // whose ROW x N_SA block has chan_dim = ROW and kern_dim = N_SA).
  const BlobLayout layout = blob_layout(ctx, g, map);
  const std::uint64_t block = layout.block;
  for (std::uint64_t kern = 0; kern < map.kitr; ++kern) {
    for (std::uint64_t chan = 0; chan < map.citr; ++chan) {
      const std::uint8_t* base = blob.data() + (kern * map.citr + chan) * block;
      if (map.mode == ConvMode::kPointwise16) {
        // gati.md 6.2 sa_align_aux_pointwise: c = N_SA-1..0, r = 0..ROW-1 ->
        // W[k = kern*N_SA + r][ch = chan*ROW + c]; a 1x1 kernel has the single tap 0.
        for (std::uint64_t ci = 0; ci < map.kern_dim; ++ci)
          for (std::uint64_t r = 0; r < rows; ++r) {
            const std::uint64_t c = map.kern_dim - 1 - ci;
            add(kern * map.kern_dim + r, chan * rows + c, chan, 0,
                static_cast<std::int8_t>(base[ci * rows + r]));
          }
        continue;
      }
      // PE rows whose tap is beyond the kernel's (row < dead_rows: a 1x1 kernel leaves 8 of 9
      // rows, most of resnet50's blob bytes) are only looked at for the warning.
      const std::uint64_t dead_rows = rows > taps ? rows - taps : 0;
      const std::uint64_t k0 = kern * map.kern_dim, real_b = real_kernels(g, map, kern);
      if (!ignored_rows) ignored_rows = dead_rows_nonzero(base, layout, g, map, kern);
      // The PE (a, b) holds the same (output, input) channel pair in every row, so the pair is
      // worked out once (add's channel checks with it) and its rows, the taps, are read down the
      // block. This runs once per weight byte: the mode's input channel, c = c0 + a * da + b * db,
      // is set up once per fold.
      std::uint64_t c0 = 0, da = 0, db = 0;
      switch (map.mode) {
        case ConvMode::kRegular:  // engine a reads channel a of the channel group
          c0 = chan * map.chan_dim, da = 1;
          break;
        case ConvMode::kDepthwise:  // engine a reads channel kern * N_SA + a (14.1)
          c0 = kern * map.chan_dim, da = 1;
          break;
        case ConvMode::kChannelDuplicate:  // every engine sees channel `chan`
          c0 = chan;
          break;
        case ConvMode::kDepthwise16:  // column b reads channel kern * N_SA + b
          c0 = kern * map.kern_dim, db = 1;
          break;
        case ConvMode::kPointwise16:
          break;
      }
      for (std::uint64_t a = 0; a < map.chan_dim; ++a)
        for (std::uint64_t b = 0; b < real_b; ++b) {
          const std::uint64_t k = k0 + b, c = c0 + a * da + b * db;
          if (c >= in_channels) continue;
          for (std::uint64_t row = dead_rows; row < rows; ++row) {
            const std::uint64_t srow = rows - 1 - row;  // rows are stored bottom PE row first
            const auto w =
                static_cast<std::int8_t>(base[(row * map.chan_dim + a) * map.kern_dim + b]);
            if (w != 0) set(k, c, chan, srow, w);
          }
        }
    }
  }
  return ignored_rows;
}

void warn_ignored_rows(const LayerContext& ctx, const ConvGeometry& g) {
  ctx.diag.warn(ctx.layer_number,
                fmt::format("{}: the weight blob has non-zero bytes in PE rows beyond the "
                            "{}x{} kernel's {} taps; they multiply no image value and are "
                            "ignored",
                            ctx.where(), g.kh, g.kw, g.kh * g.kw));
}

// The weight blob mapped onto channels. Dense modes: w[(k * in_channels + c) * taps + tap] and
// the channel group (channel iteration) of every input channel with a non-zero weight (-1
// otherwise). Depthwise modes: per output channel k < KN, the (input channel, taps) pairs with at
// least one non-zero tap.
struct MappedWeights {
  std::vector<std::int8_t> w;
  std::vector<std::int64_t> group;
  std::vector<std::vector<Connection>> connections;
  // Depthwise modes where output channel k connects to input channel k alone (or to nothing):
  // the taps as [k][kh * kw], for conv_kernels::depthwise_lanes.
  bool diagonal = false;
  std::vector<std::int8_t> lane_taps;
  bool ignored_rows = false;
  // The dense modes' summation order (conv_dense): the channels of the groups before the last,
  // then of the last, each phase padded with a zero channel (-1) to an even length; `split` is
  // the first phase's length. A function of `group`, made once with it.
  std::vector<std::int64_t> dense_channels;
  std::uint64_t dense_split = 0;
  // The dense weights packed for the kernels' tiles, filled by the first dense_conv (the channel
  // lists are a function of `group`, so every run of the same mapping packs the same words).
  mutable conv_kernels::WeightPacks packs;
};

void map_connections(const LayerContext& ctx, const ConvGeometry& g, const Mapping& map,
                     ByteSpan blob, std::uint64_t in_channels, MappedWeights& out) {
  out.connections.assign(g.kn, {});
  // Dense (k, c) -> index into connections[k], built lazily; connections are unique per (k, c)
  // in every mode, but a dense index keeps this independent of that fact.
  std::vector<std::int32_t> index(g.kn * in_channels, -1);
  out.ignored_rows = map_weights(
      ctx, g, map, blob, in_channels,
      [&](std::uint64_t k, std::uint64_t c, std::uint64_t chan_iter, std::uint64_t tap,
          std::int8_t w) {
        std::vector<Connection>& list = out.connections[k];
        std::int32_t& idx = index[k * in_channels + c];
        if (idx < 0) {
          idx = static_cast<std::int32_t>(list.size());
          list.push_back(
              Connection{static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(chan_iter), {}});
        }
        list[static_cast<std::size_t>(idx)].taps[tap] = w;
      });
  const std::uint64_t taps = g.kh * g.kw;
  out.diagonal = g.kn <= in_channels;
  out.lane_taps.assign(out.diagonal ? g.kn * taps : 0, 0);
  for (std::uint64_t k = 0; k < g.kn && out.diagonal; ++k) {
    const std::vector<Connection>& list = out.connections[k];
    if (list.empty()) continue;
    if (list.size() > 1 || list[0].in_channel != k) {
      out.diagonal = false;
      break;
    }
    std::copy_n(list[0].taps.begin(), taps,
                out.lane_taps.begin() + static_cast<std::ptrdiff_t>(k * taps));
  }
}

void map_dense(const LayerContext& ctx, const ConvGeometry& g, const Mapping& map, ByteSpan blob,
               std::uint64_t in_channels, MappedWeights& out) {
  const std::uint64_t taps = g.kh * g.kw;
  out.w.assign(g.kn * in_channels * taps, 0);
  out.group.assign(in_channels, -1);
  bool mixed = false;
  out.ignored_rows = map_weights(ctx, g, map, blob, in_channels,
                                 [&](std::uint64_t k, std::uint64_t c, std::uint64_t chan_iter,
                                     std::uint64_t tap, std::int8_t w) {
                                   out.w[(k * in_channels + c) * taps + tap] = w;
                                   std::int64_t& grp = out.group[c];
                                   if (grp < 0) grp = static_cast<std::int64_t>(chan_iter);
                                   mixed |= grp != static_cast<std::int64_t>(chan_iter);
                                 });
  // In the regular, ChannelDuplicate and pointwise modes the channel fixes the group (c / N_SA,
  // c, c / ROW); the partial-sum snapshot relies on it.
  if (mixed) fail("{}: internal error: an input channel in two channel groups", ctx.where());
  const std::int64_t last_group = static_cast<std::int64_t>(map.citr) - 1;
  out.dense_channels.clear();
  for (int phase = 0; phase < 2; ++phase) {
    for (std::uint64_t c = 0; c < in_channels; ++c) {
      const std::int64_t grp = out.group[c];
      if (grp >= 0 && (grp < last_group) == (phase == 0))
        out.dense_channels.push_back(static_cast<std::int64_t>(c));
    }
    if (out.dense_channels.size() % 2) out.dense_channels.push_back(-1);
    if (phase == 0) out.dense_split = out.dense_channels.size();
  }
}

// Mapped weights are kept from run to run: a network run image after image maps the same blob
// every time, which costs as much as a small layer's sums. An entry is reused only when the blob
// in DRAM now maps to exactly what it holds, under the same mapping, so a program that rewrites
// its weights is mapped afresh; the device still reads every byte. Two checks establish that: no
// byte of the range was written since this thread last checked the entry on this Dram (its write
// tracking: a few page stamps), or else a compare with the blob (a blob rewritten with the same
// bytes, or another board): its live bytes equal, and its dead rows as zero or not for the
// warning (same_blob). The entries (a copy of the live bytes, the mapping, the packs) live in
// one store shared by every thread of the process, so parallel eval workers (each simulating its
// own board) hold and stream each weight once, not once per worker; each thread keeps only its
// own check records (which Dram, which stamp). Bounded in size.
struct WeightCacheKey {
  std::uint64_t start, in_channels, kn, kh, kw, kern_dim, chan_dim, kitr, citr;
  ConvMode mode;
  bool operator==(const WeightCacheKey&) const = default;
};

struct WeightCacheEntry {  // immutable once stored, except the packs (filled thread-safely)
  WeightCacheKey key;
  std::uint64_t blob_bytes = 0;
  // The live bytes of each fold block, block after block (BlobLayout): a 1x1 kernel's are 1 of
  // its 9 PE rows, so most of resnet50's 124 MB of weights is not copied here.
  Bytes live;
  MappedWeights mapped;
};

// The blob's live bytes, block after block.
Bytes live_bytes(ByteSpan blob, const BlobLayout& l) {
  Bytes live;
  live.reserve(blob.size() / l.block * (l.block - l.dead_bytes));
  for (std::uint64_t at = 0; at < blob.size(); at += l.block)
    live.insert(live.end(), blob.begin() + static_cast<std::ptrdiff_t>(at + l.dead_bytes),
                blob.begin() + static_cast<std::ptrdiff_t>(at + l.block));
  return live;
}

// Whether the blob at weight_start in DRAM maps to what `e` holds: the same live bytes, and
// non-zero bytes in the dead rows of real output channels exactly when e's had them.
bool same_blob(const Dram& dram, std::uint64_t weight_start, const WeightCacheEntry& e,
               const BlobLayout& l, const ConvGeometry& g, const Mapping& map) {
  // Read out whole (one DRAM walk, the buffer the mapping reads from), then compared block by
  // block.
  const std::span blob(reused_room<std::uint8_t, BlobTag>(e.blob_bytes), e.blob_bytes);
  dram.read(weight_start, blob, "weight read");
  const std::uint64_t live_per_block = l.block - l.dead_bytes;
  bool dead_nonzero = false;
  for (std::uint64_t i = 0; i * l.block < e.blob_bytes; ++i) {
    const std::uint8_t* block = blob.data() + i * l.block;
    if (std::memcmp(block + l.dead_bytes, e.live.data() + i * live_per_block, live_per_block) != 0)
      return false;
    if (!dead_nonzero) dead_nonzero = dead_rows_nonzero(block, l, g, map, i / map.citr);
    if (dead_nonzero && !e.mapped.ignored_rows) return false;
  }
  return dead_nonzero == e.mapped.ignored_rows;
}

// The entry's mapping, shared with the store: a conv whose units wait in a unit chain keeps it
// (its packed weights) alive while later layers may empty the store.
std::shared_ptr<const MappedWeights> mapped_weights(const LayerContext& ctx, const ConvGeometry& g,
                                                    const Mapping& map, std::uint64_t blob_bytes,
                                                    std::uint64_t in_channels,
                                                    std::uint64_t weight_start, bool dense) {
  struct Store {
    std::mutex mutex;
    std::deque<std::shared_ptr<const WeightCacheEntry>> entries;
    std::uint64_t bytes = 0;
    std::atomic<std::uint64_t> generation{0};  // bumped when the store is emptied
  };
  struct Record {  // this thread's: the entry equals DRAM on that Dram at that write stamp
    std::shared_ptr<const WeightCacheEntry> entry;
    std::uint64_t dram_id = 0, stamp = 0;
  };
  constexpr std::uint64_t kMaxCachedBlobBytes = 256ull << 20;
  static Store store;
  thread_local std::vector<Record> records;
  thread_local std::uint64_t records_generation = 0;
  const WeightCacheKey key{weight_start, in_channels,  g.kn,     g.kh,     g.kw,
                           map.kern_dim, map.chan_dim, map.kitr, map.citr, map.mode};
  // A store emptied since: drop this thread's records too, so the bound holds (an entry lives
  // while a record holds it; the reference returned last time is no longer in use here).
  if (const std::uint64_t gen = store.generation.load(std::memory_order_acquire);
      gen != records_generation) {
    records.clear();
    records_generation = gen;
  }
  // The blob is compared in DRAM (the range was checked by the caller), not copied out first.
  Dram& dram = ctx.dram;
  const BlobLayout layout = blob_layout(ctx, g, map);
  const auto matches = [&](const WeightCacheEntry& e) {
    return e.key == key && e.blob_bytes == blob_bytes;
  };
  for (Record& r : records) {
    if (!matches(*r.entry)) continue;
    if (r.dram_id == dram.id() && dram.unwritten_since(weight_start, blob_bytes, r.stamp))
      return {r.entry, &r.entry->mapped};
    if (same_blob(dram, weight_start, *r.entry, layout, g, map)) {
      r.dram_id = dram.id(), r.stamp = dram.write_stamp();
      return {r.entry, &r.entry->mapped};
    }
  }
  const std::uint64_t stamp = dram.write_stamp();
  const std::lock_guard lock(store.mutex);
  std::shared_ptr<const WeightCacheEntry> found;
  for (const auto& e : store.entries)
    if (matches(*e) && same_blob(dram, weight_start, *e, layout, g, map)) {
      found = e;
      break;
    }
  if (!found) {
    auto e = std::make_shared<WeightCacheEntry>();
    e->key = key;
    e->blob_bytes = blob_bytes;
    const std::span blob(reused_room<std::uint8_t, BlobTag>(blob_bytes), blob_bytes);
    dram.read(weight_start, blob, "weight read");  // every byte of it
    if (dense)
      map_dense(ctx, g, map, blob, in_channels, e->mapped);
    else
      map_connections(ctx, g, map, blob, in_channels, e->mapped);
    e->live = live_bytes(blob, layout);
    if (store.bytes + blob_bytes > kMaxCachedBlobBytes) {
      store.entries.clear();
      store.bytes = 0;
      store.generation.fetch_add(1, std::memory_order_release);
      records.clear();
      records_generation = store.generation.load(std::memory_order_relaxed);
    }
    store.bytes += blob_bytes;
    store.entries.push_back(e);
    found = std::move(e);
  }
  records.push_back(Record{found, dram.id(), stamp});
  return {found, &found->mapped};
}

// Runs a regular, ChannelDuplicate or pointwise conv as one dense int8 convolution over every
// channel with a non-zero weight (device/conv_kernels.h: each accumulator is summed in registers
// over all channels and taps). The products are those of the per-connection loop, so the int32
// sums are equal (no order can overflow, see the top of this file). With `snapshot_out`, it is
// pointed at the sums over channel groups 0..citr-2 of output channels last_kern_first + j,
// planar ([j * oh*ow + p], per-thread storage valid until the next conv on this thread).
// The input: the image's DRAM words when `words` is given and the kernels pack from them alone
// (conv_kernels::reads_words), else the planes read_planes() returns. With a `writer`, the sums
// go straight to it, tail and write-back included, when the kernels' level has that form
// (conv_kernels::dense_conv_rows): returns whether they did (acc is then untouched), or, with
// `later`, whether `later` holds the units that will (not yet run).
template <typename ReadPlanes>
bool conv_dense(const ConvGeometry& g, const Mapping& map, const MappedWeights& weights,
                const conv_kernels::ImageWords* words, ReadPlanes&& read_planes,
                std::uint64_t plane_count, std::int32_t* acc, const std::int32_t** snapshot_out,
                std::uint64_t last_kern_first, const TailPipeline::RowWriter* writer,
                conv_kernels::GemmUnits* later) {
  // Summation order: the groups before the last (the snapshot), then the last, each padded with
  // a zero channel to an even length for the kernel's channel pairs (map_dense made the list).
  thread_local conv_kernels::DenseConv reused_dc;  // keeps its channel list's storage
  conv_kernels::DenseConv& dc = reused_dc;
  if (weights.group.size() != plane_count)
    fail("conv: internal error: {} mapped channels for {} planes", weights.group.size(),
         plane_count);
  dc.channels.assign(weights.dense_channels.begin(), weights.dense_channels.end());
  dc.split = weights.dense_split;
  dc.plane_count = plane_count;
  dc.padded_h = g.padded_h, dc.padded_w = g.padded_w;
  dc.kh = g.kh, dc.kw = g.kw, dc.stride = g.stride;
  dc.kn = g.kn;
  dc.words = words;
  dc.planes = nullptr;
  if (!conv_kernels::reads_words(dc)) dc.planes = read_planes();
  dc.weights = weights.w.data();
  dc.packs = &weights.packs;
  dc.snapshot_from = snapshot_out ? last_kern_first : g.kn;
  const std::uint64_t pixels = g.oh * g.ow;
  std::int32_t* snapshot =
      snapshot_out ? reused_room<std::int32_t, SnapshotTag>((g.kn - last_kern_first) * pixels)
                   : nullptr;
  if (snapshot_out) *snapshot_out = snapshot;
  const conv_kernels::RowSink sink{
      [](const void* w, const std::int32_t* y, std::uint64_t stride, std::uint64_t p0,
         std::uint64_t n, std::uint64_t k0, std::uint64_t k_count) {
        static_cast<const TailPipeline::RowWriter*>(w)->write(y, stride, p0, n, k0, k_count);
      },
      writer};
  const bool written =
      writer && conv_kernels::dense_conv_rows(dc, snapshot, sink, Isa::kAuto, later);
  if (!written) conv_kernels::dense_conv(dc, acc, snapshot);
  return written;
}

void check_errata(const LayerContext& ctx, const ConvGeometry& g, const Mapping& map) {
  if (TailConfig::from(ctx.tail).gbl_pool_en)
    ctx.diag.erratum(ctx.layer_number, Erratum::kGblPoolTail,
                     fmt::format("{}: TailBlock GblPoolEn over {}x{} outputs; the board's sum "
                                 "is multiplied unsigned and not clamped",
                                 ctx.where(), g.oh, g.ow));
  if (map.mode != ConvMode::kRegular && map.mode != ConvMode::kChannelDuplicate) return;
  if (g.kh == 3 && g.kw == 3 && g.stride == 1 && 2 * g.ih >= 3 * g.iw)
    ctx.diag.erratum(
        ctx.layer_number, Erratum::kTallImageHang,
        fmt::format("input {}x{} (HxW) is at least 1.5x taller than wide", g.ih, g.iw));
  if (g.ih == 48 && g.iw == 40)
    ctx.diag.erratum(ctx.layer_number, Erratum::kHang48x40, "input 48x40 (HxW)");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Unit chains (block.h). A CONV whose sums go straight to its output words (the row writer of a
// dense conv without DRAM partial sums) may leave its work units waiting; the pieces of a kernel
// split then run unit by unit: unit u of every waiting piece, in layer order, before unit u + 1.
// That gives the bytes of running them layer after layer when no access can tell the orders
// apart. Units run in parallel, so two pieces may touch the same byte only within one unit:
//   - a piece's setup (its input, weights and bias, read before it waits) reads nothing a
//     waiting piece writes (else those run first);
//   - every waiting piece has the same work units (GemmUnitShape: output pixels and channels),
//     and any two of their unit-time regions (output written; accumulants read), unless both
//     are read, are apart or the same region in the int32 (OpWidth 4) layout, whose unit u is
//     the same bytes in either: a piece adds the previous piece's sums of its own unit;
//   - no waiting piece writes the instructions, which are read while it waits, or a dispatched
//     output (a dispatching conv runs at once).
// Everything else runs the pending units first.

namespace {
struct Region {  // [begin, end) in DRAM; empty when begin == end
  std::uint64_t begin = 0, end = 0;
  bool overlaps(const Region& o) const { return begin < o.end && o.begin < end; }
  Region operator&(const Region& o) const {
    return overlaps(o) ? Region{std::max(begin, o.begin), std::min(end, o.end)} : Region{};
  }
  bool operator==(const Region&) const = default;
};

// One region a waiting piece's units touch.
struct UnitRegion {
  Region bytes;
  bool wide = false;  // the OpWidth-4 layout of the chain's (pixels, channels)
  bool written = false;
};

// Whether two waiting pieces' unit-time regions can be run unit by unit.
bool unit_compatible(const UnitRegion& a, const UnitRegion& b) {
  if (!a.written && !b.written) return true;
  if (!a.bytes.overlaps(b.bytes)) return true;
  return a.bytes == b.bytes && a.wide && b.wide;
}
}  // namespace

struct ChainPiece {
  std::optional<TailPipeline> tail;
  TailPipeline::RowWriterPages pages;
  TailPipeline::RowWriter writer;
  conv_kernels::GemmUnits units;
  std::shared_ptr<const MappedWeights> weights;  // its packed weights, which the units read
  std::array<UnitRegion, 2> regions;             // output; accumulants (empty when none)
  int layer_number = 0;
  std::uint64_t channels = 0;  // output channels (the writer's bias entries)
  bool in_use = false;
  // Set when it joins: its accumulants are the previous piece's sums, carried in the unit's
  // tile (its writer then adds carried_bias, both pieces' bias).
  bool carries = false;
  std::vector<std::int32_t> carried_bias;
  // Set when the chain runs: no later access can tell whether its output was written.
  bool output_unread = false;

  void release() {
    tail.reset();  // its bias storage goes back to the thread's spare
    weights.reset();
    in_use = carries = output_unread = false;
  }
};

// Carried sums. When a waiting piece's tail only adds its bias to the int32 sums in its tile
// (OpWidth 4, no quantizer, no activation, and no accumulants read: none, or carried into the
// tile themselves) and the next piece's accumulants are exactly that output region,
// the next piece's accumulant words, for its unit u, are the previous piece's unit u sums plus
// that bias, written just before (same unit, same thread, nothing in between). So the next piece
// adds its own sums to the previous piece's tile instead and its tail adds both biases: the
// same 32-bit wrapping sum, without reading the words back (a stem's pieces read 3.2 MB each).
bool may_carry(const ChainPiece& prev, const ChainPiece& next) {
  return prev.writer.adds_bias_alone() && !prev.writer.reads_accumulants() &&
         next.writer.reads_accumulants() && prev.regions[0].wide &&
         next.regions[1].bytes == prev.regions[0].bytes &&
         prev.units.shape() == next.units.shape() && prev.channels == next.channels;
}
// Whether `next` carries `prev`'s sums; if so its writer is switched over.
bool carry(const ChainPiece& prev, ChainPiece& next) {
  if (!may_carry(prev, next)) return false;
  const std::int32_t* a = prev.writer.bias();
  const std::int32_t* b = next.writer.bias();
  if (!a && !b) {
    next.writer.carry_accumulants(nullptr);
    return true;
  }
  std::vector<std::int32_t>& sum = next.carried_bias;
  sum.resize(next.channels);
  for (std::uint64_t k = 0; k < next.channels; ++k)
    sum[k] = static_cast<std::int32_t>(static_cast<std::uint32_t>(a ? a[k] : 0) +
                                       static_cast<std::uint32_t>(b ? b[k] : 0));
  next.writer.carry_accumulants(sum.data());
  return true;
}

class UnitChain {
 public:
  // A piece to set up a conv in: reused, so its buffers are kept from image to image.
  ChainPiece& take() {
    for (auto& p : pool_)
      if (!p->in_use) {
        p->in_use = true;
        return *p;
      }
    pool_.push_back(std::make_unique<ChainPiece>());
    pool_.back()->in_use = true;
    return *pool_.back();
  }
  bool waiting() const { return !waiting_.empty(); }
  // Whether a waiting piece writes any of these regions (read by a piece's setup).
  bool writes_any(std::initializer_list<Region> reads) const {
    for (const ChainPiece* p : waiting_)
      for (const Region& r : reads)
        if (p->regions[0].bytes.overlaps(r)) return true;
    return false;
  }
  // Whether `piece`, set up with its units in piece.units, may wait behind the waiting pieces.
  // Carried accumulants are not read from DRAM, so they take no part. An output over part of a
  // waiting piece's output at other units' offsets may join when that piece can leave the part
  // unwritten (overwritten_part): nothing reads it in between, since any read of it would
  // overlap this output too and keep the piece out.
  bool may_join(const ChainPiece& piece) const {
    const Region written = piece.regions[0].bytes;
    if (written.overlaps({0, 32}) || written.overlaps(instructions_)) return false;
    const bool carries = !waiting_.empty() && may_carry(*waiting_.back(), piece);
    for (const ChainPiece* p : waiting_) {
      if (!(p->units.shape() == piece.units.shape())) return false;
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b) {
          if ((a == 1 && carries) || (b == 1 && p->carries)) continue;
          if (unit_compatible(piece.regions[a], p->regions[b])) continue;
          if (a == 0 && b == 0 && overwritten_part(*p, written)) continue;
          return false;
        }
    }
    return true;
  }
  void wait(ChainPiece& piece) {
    piece.carries = !waiting_.empty() && carry(*waiting_.back(), piece);
    const UnitRegion& out = piece.regions[0];
    for (ChainPiece* p : waiting_)
      if (!unit_compatible(out, p->regions[0])) {  // the part overwritten_part allowed
        const Region part = p->regions[0].bytes & out.bytes;
        p->writer.leave_unwritten(part.begin - p->regions[0].bytes.begin,
                                  part.end - p->regions[0].bytes.begin);
      }
    waiting_.push_back(&piece);
  }
  void run() {
    if (waiting_.empty()) return;
    const auto began = std::chrono::steady_clock::now();
    struct Release {  // also when a unit throws: the chain is then empty
      UnitChain& chain;
      ~Release() {
        for (ChainPiece* p : chain.waiting_) p->release();
        chain.waiting_.clear();
      }
    } release{*this};
    if (time_.first_layer_number == 0) time_.first_layer_number = waiting_.front()->layer_number;
    time_.layer_number = waiting_.back()->layer_number;
    mark_unread_outputs();
    for (const ChainPiece* p : waiting_) {
      const std::uint64_t bit =
          static_cast<std::uint64_t>(p->layer_number - time_.first_layer_number);
      if (bit >= 64) continue;
      if (p->carries) time_.carried |= std::uint64_t{1} << bit;
      if (p->output_unread) time_.unwritten |= std::uint64_t{1} << bit;
    }
    auto unit = [this](std::uint64_t u) {
      for (const ChainPiece* p : waiting_)
        p->units.run(u, {.onto_tile = p->carries, .hand_over = !p->output_unread});
    };
    parallel_for(waiting_.front()->units.count(), std::ref(unit));  // std::ref: no allocation
    time_.seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  }
  ChainTime take_time() { return std::exchange(time_, ChainTime{}); }
  void set_instructions(Region r) { instructions_ = r; }

 private:
  // The part of waiting piece p's output that a joining output `written` covers, when p can
  // leave it unwritten: whole words of p's layout, and no other part already left.
  static bool overwritten_part(const ChainPiece& p, const Region& written) {
    const Region out = p.regions[0].bytes, part = out & written;
    const std::uint64_t word = p.writer.word_bytes();
    const auto [left_begin, left_end] = p.writer.unwritten();
    return (left_begin == left_end ||
            (left_begin == part.begin - out.begin && left_end == part.end - out.begin)) &&
           (part.begin - out.begin) % word == 0 &&
           ((part.end - out.begin) % word == 0 || part.end == out.end);
  }
  // The int32 outputs no piece reads back are streamed past the cache, when too large for a
  // later layer to find them there (a stem's are 3.2 MB).
  static constexpr std::uint64_t kStreamedOutputBytes = 1 << 20;
  // A piece's output need not be written when a later piece writes the same region and every
  // piece up to that one reads it only as carried sums (the next one) or not at all: the later
  // piece's unit u overwrites the same bytes, unit by unit, and what read them before took the
  // sums from the tile. (A piece's setup reads nothing a waiting piece writes; a waiting piece's
  // output is not dispatched.) The stem: piece 1's sums go to piece 2 in the tile, piece 3
  // writes its region. Also marks which outputs are streamed (kStreamedOutputBytes).
  void mark_unread_outputs() {
    for (std::size_t i = 0; i < waiting_.size(); ++i) {
      ChainPiece& p = *waiting_[i];
      const Region out = p.regions[0].bytes;
      p.output_unread = false;
      bool read_back = false;
      for (std::size_t j = i + 1; j < waiting_.size(); ++j) {
        const ChainPiece& q = *waiting_[j];
        if (q.regions[1].bytes.overlaps(out) && !(j == i + 1 && q.carries)) {
          read_back = true;
          break;
        }
        if (q.regions[0].bytes.overlaps(out)) {
          p.output_unread = q.regions[0].bytes == out;
          break;
        }
      }
      p.writer.stream_output(!read_back && p.regions[0].wide &&
                             out.end - out.begin >= kStreamedOutputBytes);
    }
  }

  std::vector<std::unique_ptr<ChainPiece>> pool_;  // stable addresses: writers are pointed at
  std::vector<ChainPiece*> waiting_;
  Region instructions_;
  ChainTime time_;
};

void UnitChainDeleter::operator()(UnitChain* chain) const { delete chain; }
UnitChainPtr make_unit_chain() { return UnitChainPtr(new UnitChain); }
void begin_program(UnitChain& chain, std::uint64_t instructions_begin,
                   std::uint64_t instructions_end) {
  chain.run();
  chain.set_instructions({instructions_begin, instructions_end});
}
void run_unit_chain(UnitChain& chain) { chain.run(); }
ChainTime take_chain_time(UnitChain& chain) { return chain.take_time(); }

BlockTiming run_conv(LayerContext& ctx) {
  const ConvGeometry g = read_geometry(ctx);
  const Mapping map = choose_mapping(ctx, g);
  check_errata(ctx, g, map);
  const isa::Instruction& out_inst = ctx.require_output();
  const OutputConfig out = OutputConfig::from(out_inst);
  const isa::SaArch& arch = ctx.arch;
  const std::uint64_t n_sa = static_cast<std::uint64_t>(arch.n_sa);
  const std::uint64_t rows = static_cast<std::uint64_t>(arch.rows);
  const std::uint64_t cols = static_cast<std::uint64_t>(arch.cols);
  const std::uint64_t out_pixels = g.oh * g.ow;

  // OutputBlock fields the conv depends on.
  if (out.oh != g.oh || out.ow != g.ow)
    ctx.fail_field(out.oh != g.oh ? Field::OutputBlock_OH : Field::OutputBlock_OW,
                   "OutputBlock says {}x{} (OHxOW) but the conv produces {}x{} from a {}x{} input "
                   "(pads t{} b{} l{} r{}, row skips {}/{}, kernel {}x{}, stride {})",
                   out.oh, out.ow, g.oh, g.ow, g.ih, g.iw, g.pad_top, g.pad_bottom, g.pad_left,
                   g.pad_right, g.skip_top, g.skip_bottom, g.kh, g.kw, g.stride);
  if (out.kernel_itr != map.kitr)
    ctx.fail_field(Field::OutputBlock_KernelItr, "is {} but this conv needs {} kernel iterations",
                   out.kernel_itr, map.kitr);
  if (out.channel_itr != map.citr)
    ctx.fail_field(Field::OutputBlock_ChannelItr, "is {} but this conv needs {} channel iterations",
                   out.channel_itr, map.citr);
  const std::uint64_t dim_acc = ceil_mod(out_pixels, std::max<std::uint64_t>(1, (32 / n_sa) / 4));
  if (out.image_dim_acc != dim_acc)
    ctx.fail_field(Field::OutputBlock_ImageDimAcc, "is {} but OH*OW = {} needs {}",
                   out.image_dim_acc, out_pixels, dim_acc);
  if (!out.acc_en && map.citr > 1)
    ctx.fail_field(Field::OutputBlock_AccEn,
                   "is 0 but ChannelItr = {}: the channel groups would not be summed", map.citr);
  if (out.on_chip_acc && out.acc_en && out_pixels > ctx.accbuf_depth)
    ctx.fail_field(Field::OutputBlock_OnChipAcc,
                   "is 1 but the {} output pixels exceed the {}-pixel on-chip accumulator",
                   out_pixels, ctx.accbuf_depth);

  // Everything this layer writes must lie in DRAM before any work is done (this also bounds the
  // model's memory by the DRAM size), and the work itself is bounded.
  const ActivationLayout early_out = ActivationLayout::for_arch(
      arch, g.kn, TailConfig::from(ctx.tail).gbl_pool_en ? 1 : out_pixels);
  ctx.check_dram_range(Field::OutputBlock_OutputAddr, out.output_addr,
                       early_out.bytes() * static_cast<std::uint64_t>(std::max(out.op_width, 1)));
  const std::uint64_t planned_macs = g.kn * g.ic * g.kh * g.kw * out_pixels;
  if (planned_macs > kMaxLayerMacs)
    ctx.fail_field(Field::CONV_KN,
                   "this layer needs {} multiply-accumulates, more than the {} the model runs in "
                   "one layer; split it",
                   planned_macs, kMaxLayerMacs);

  // Image region.
  const std::uint64_t in_channels_padded = ceil_mod(g.ic, n_sa);
  const ActivationLayout in_layout =
      ActivationLayout::for_arch(arch, in_channels_padded, g.ih * g.iw);
  const std::uint64_t image_start = ctx.mega.get(Field::CONV_ImageStartAddress);
  const std::uint64_t image_end = ctx.mega.get(Field::CONV_ImageEndAddress);
  if (image_end < image_start || image_end - image_start != in_layout.bytes())
    ctx.fail_field(Field::CONV_ImageEndAddress,
                   "the image region [0x{:x}, 0x{:x}) is not the {} bytes a {}-channel {}x{} input "
                   "occupies (C' {} x P' {}; the end is exclusive)",
                   image_start, image_end, in_layout.bytes(), g.ic, g.ih, g.iw,
                   in_layout.padded_channels(), in_layout.padded_pixels());
  // Weight region.
  const std::uint64_t blob_bytes = map.kitr * map.citr * rows * cols * n_sa;
  const std::uint64_t weight_start = ctx.mega.get(Field::CONV_WeightStartAddress);
  const std::uint64_t weight_end = ctx.mega.get(Field::CONV_WeightEndAddress);
  if (weight_end < weight_start || weight_end - weight_start != ceil_mod(blob_bytes, 32))
    ctx.fail_field(Field::CONV_WeightEndAddress,
                   "the weight region [0x{:x}, 0x{:x}) is not the {} bytes of {} kernel x {} "
                   "channel iterations of {}x{}x{} (padded to 32)",
                   weight_start, weight_end, ceil_mod(blob_bytes, 32), map.kitr, map.citr, rows,
                   cols, n_sa);
  ctx.check_dram_range(Field::CONV_WeightStartAddress, weight_start, blob_bytes);
  // Padded planes, one per input channel, with the row skips applied, read straight from the
  // image's DRAM words (every byte is written: image pixels, or zeros for padding, so the reused
  // buffer needs no clearing first), when a path needs them: the dense conv at the AVX2 level
  // packs its operands from the words themselves (conv_kernels::reads_words).
  const std::int64_t top =
      static_cast<std::int64_t>(g.pad_top) - static_cast<std::int64_t>(g.skip_top);
  std::int8_t* planes = nullptr;
  auto read_planes = [&] {
    planes = reused_room<std::int8_t, PlaneTag>(in_channels_padded * g.padded_h * g.padded_w);
    read_activation_planes(ctx, Field::CONV_ImageStartAddress, image_start, in_layout, g.iw, top,
                           g.pad_left, g.padded_h, g.padded_w, planes);
    return planes;
  };
  // Unit chains: the waiting pieces first write what this layer's setup reads.
  UnitChain* const chain = ctx.chain;
  if (chain) {
    const TailConfig tail_fields = TailConfig::from(ctx.tail);
    if (chain->writes_any({{image_start, image_end},
                           {weight_start, weight_start + blob_bytes},
                           tail_fields.bias_en
                               ? Region{tail_fields.bias_start, tail_fields.bias_end}
                               : Region{}}))
      chain->run();
  }
  // Where this conv is set up when its units may wait in the chain (released at the end unless
  // they do).
  ChainPiece* const piece = chain ? &chain->take() : nullptr;
  struct ReleaseUnlessWaiting {
    ChainPiece* piece;
    bool waiting = false;
    ~ReleaseUnlessWaiting() {
      if (piece && !waiting) piece->release();
    }
  } hold{piece};

  conv_kernels::ImageWords words;
  const bool have_words =
      read_activation_words(ctx, Field::CONV_ImageStartAddress, image_start, in_layout, g.iw, top,
                            g.pad_left, reused<const std::uint8_t*, PieceTag>(), words);
  std::optional<TailPipeline> own_tail;
  const TailPipeline& tail = (piece ? piece->tail : own_tail).emplace(ctx, g.kn);

  // Depthwise convs connect each output channel to one input channel: the per-connection loop.
  // Every other mode runs as a dense convolution (either handles any blob; this only picks the
  // faster one).
  const bool dense = map.mode != ConvMode::kDepthwise && map.mode != ConvMode::kDepthwise16;
  const std::shared_ptr<const MappedWeights> weights_entry =
      mapped_weights(ctx, g, map, blob_bytes, in_channels_padded, weight_start, dense);
  const MappedWeights& weights = *weights_entry;
  if (!dense) read_planes();
  if (weights.ignored_rows) warn_ignored_rows(ctx, g);
  const std::vector<std::vector<Connection>>& connections = weights.connections;

  // dense_conv and depthwise write every sum; the per-connection loop adds into acc.
  // conv_kernels::depthwise runs the whole layer (device/depthwise.h) when every output
  // channel k reads input channel k alone (the usual depthwise blob): the same products, so the
  // same int32 sums (exact, see the top of this file); there are no partial sums to snapshot,
  // a depthwise conv having one channel iteration.
  const bool lanes_path = !dense && weights.diagonal && map.citr == 1;
  std::int32_t* const acc = reused_room<std::int32_t, AccTag>(g.kn * out_pixels);
  if (!dense && !lanes_path) std::fill_n(acc, g.kn * out_pixels, 0);
  std::uint64_t read_bytes = blob_bytes + in_layout.bytes() * map.kitr;
  std::uint64_t write_bytes = 0;
  // Initial accumulants (kernel split: AccumulantReadFirst), int32 in the OpWidth-4 layout,
  // added after the conv sums with the accumulant adder's 32-bit wrap (below; nothing writes
  // DRAM in between).
  const ActivationLayout acc_layout = ActivationLayout::for_arch(arch, g.kn, out_pixels);
  if (out.accumulant_read_first) {
    ctx.check_dram_range(Field::OutputBlock_AccumulantAddr, out.accumulant_addr,
                         acc_layout.bytes() * 4);
    read_bytes += acc_layout.bytes() * 4;
  }

  // The DRAM partial-sum region (14.11): only with OnChipAcc = 0 and AccEn = 1; it ends holding
  // the last kernel iteration's sum over channel groups 0..citr-2, lane j at 4*(p*lanes + j).
  const bool dram_partials = !out.on_chip_acc && out.acc_en;
  const std::uint64_t lanes = map.kern_dim;
  // The per-connection path sums them here ([p * lanes + j]); the dense one leaves them planar
  // in its snapshot (conv_dense).
  std::vector<std::int32_t>& partial = reused<std::int32_t, PartialTag>();
  partial.assign(dram_partials && !dense ? lanes * out_pixels : 0, 0);
  const std::int32_t* dense_snapshot = nullptr;
  const std::uint64_t last_kern_first = (map.kitr - 1) * map.kern_dim;
  const std::uint64_t partial_region = std::uint64_t{out.image_dim_acc} * lanes * 4;
  if (dram_partials)
    ctx.check_dram_range(Field::OutputBlock_AccumulantAddr, out.accumulant_addr, partial_region);

  // The tail and the write-back run in one pass from acc to the output bytes (issue 13), the
  // accumulants read word by word beside them, unless a global pool needs every value first, or
  // the accumulant region is written before the output (the DRAM partial sums) or overlaps it
  // (then the accumulants are added here, before anything is written, as the adder does).
  const TailConfig& tc = tail.config();
  const std::uint64_t out_bytes =
      acc_layout.bytes() * static_cast<std::uint64_t>(std::max(out.op_width, 1));
  // Whether the output region and an accumulant-address region of `bytes` share no byte.
  const auto apart_from_output = [&](std::uint64_t bytes) {
    return out.accumulant_addr >= out.output_addr + out_bytes ||
           out.output_addr >= out.accumulant_addr + bytes;
  };
  const bool accumulants_apart = !dram_partials && apart_from_output(acc_layout.bytes() * 4);
  const bool one_pass = !tc.gbl_pool_en && (!out.accumulant_read_first || accumulants_apart);
  // Dense modes with a one-pass tail: the conv's work units write the output words themselves,
  // tail included (TailPipeline::RowWriter), where the kernels and the tail have that form. The
  // output is then written before the partial sums (below), so their regions must not overlap.
  const std::uint64_t final_pixels = tail.output_pixels(out_pixels);
  const ActivationLayout out_layout = ActivationLayout::for_arch(arch, g.kn, final_pixels);
  const bool partials_apart = !dram_partials || apart_from_output(partial_region);
  TailPipeline::RowWriter own_writer;
  TailPipeline::RowWriter& writer = piece ? piece->writer : own_writer;
  writer = {};
  if (dense && one_pass && partials_apart && conv_kernels::has_dense_conv_rows()) {
    const std::uint64_t accumulant_addr = out.accumulant_addr;
    writer =
        tail.row_writer(ctx, out_layout, out.accumulant_read_first ? &accumulant_addr : nullptr,
                        Isa::kAuto, piece ? &piece->pages : nullptr);
  }

  std::uint64_t macs = 0;
  bool written = false;
  // Units that may wait in the chain: the row writer's, with no snapshot, not dispatched.
  const bool may_wait = piece && dense && writer.ready() && !dram_partials && !out.dispatch_en;
  // Any other conv reads and writes DRAM as it runs: the waiting pieces run first.
  if (chain && !may_wait) chain->run();
  if (dense)
    written =
        conv_dense(g, map, weights, have_words ? &words : nullptr, read_planes, in_channels_padded,
                   acc, dram_partials ? &dense_snapshot : nullptr, last_kern_first,
                   writer.ready() ? &writer : nullptr, may_wait ? &piece->units : nullptr);
  if (may_wait && !written) chain->run();  // its sums are in acc, the tail writes them below
  if (may_wait && written) {               // set up, not run
    piece->regions = {
        UnitRegion{{out.output_addr, out.output_addr + out_bytes}, out.op_width == 4, true},
        UnitRegion{out.accumulant_read_first
                       ? Region{out.accumulant_addr, out.accumulant_addr + acc_layout.bytes() * 4}
                       : Region{},
                   true, false}};
    piece->layer_number = ctx.layer_number;
    piece->channels = g.kn;
    piece->weights = weights_entry;
    if (chain->waiting() && !chain->may_join(*piece)) chain->run();
    // It waits to join a chain, or to start one when its output is int32 partial sums (which
    // the next piece may add to); else its units run now.
    if ((chain->waiting() || out.op_width == 4) && chain->may_join(*piece)) {
      chain->wait(*piece);
      hold.waiting = true;
    } else {
      piece->units.run_all();
    }
  }
  thread_local conv_kernels::PlaneSet reused_planes;  // reused, like the buffers above
  conv_kernels::PlaneSet& plane_set = reused_planes;  // what the parallel_for workers read
  if (lanes_path)
    conv_kernels::depthwise(
        {planes, g.kn, g.padded_h, g.padded_w, g.kh, g.kw, g.stride, weights.lane_taps.data()},
        acc);
  const bool per_connection = !dense && !lanes_path;
  if (per_connection)
    conv_kernels::pack_planes(planes, in_channels_padded, g.padded_h, g.padded_w, g.kh, g.kw,
                              g.stride, plane_set);
  // Output channels are independent (own acc row, own partial lane j): one per index.
  auto connect = [&](std::uint64_t k) {
    const std::vector<Connection>& list = connections[k];
    std::vector<std::int32_t>& own = reused<std::int32_t, OwnTag>();
    std::int32_t* a = acc + k * out_pixels;
    const bool snapshot = dram_partials && k >= last_kern_first;
    for (const Connection& conn : list) {
      const bool before_last_group = snapshot && conn.chan_iter + 1 < map.citr;
      std::int32_t* target = a;
      if (before_last_group) {
        own.assign(out_pixels, 0);
        target = own.data();
      }
      conv_kernels::connection_conv(plane_set, conn.in_channel, conn.taps.data(), target);
      if (before_last_group) {
        std::int32_t* part = partial.data();
        const std::uint64_t j = k - last_kern_first;
        for (std::uint64_t p = 0; p < out_pixels; ++p) {
          a[p] += own[p];
          part[p * lanes + j] += own[p];
        }
      }
    }
  };
  if (per_connection)
    parallel_for(connections.size(), std::ref(connect));  // std::ref: no allocation
  if (out.accumulant_read_first && !one_pass)
    add_activation_int32(ctx, Field::OutputBlock_AccumulantAddr, out.accumulant_addr, acc_layout,
                         std::span<std::int32_t>(acc, g.kn * out_pixels));
  // Useful MACs: every (output channel, tap, pixel) of the conv the instruction describes.
  macs = g.kn *
         (map.mode == ConvMode::kDepthwise || map.mode == ConvMode::kDepthwise16 ? 1 : g.ic) *
         g.kh * g.kw * out_pixels;

  if (dram_partials) {
    const std::uint64_t region = partial_region;  // range checked above
    std::uint8_t* bytes = reused_room<std::uint8_t, RawTag>(region);
    const std::uint64_t sums = out_pixels * lanes;  // then zeros up to ImageDimAcc pixels
    if (dense) {
      conv_kernels::planes_to_be32_rows(dense_snapshot, g.kn - last_kern_first, out_pixels, lanes,
                                        bytes);
    } else {
      for (std::uint64_t i = 0; i < sums; ++i)
        store_be32(bytes + i * 4, static_cast<std::uint32_t>(partial[i]));
    }
    std::fill(bytes + sums * 4, bytes + region, std::uint8_t{0});
    ctx.dram.write(out.accumulant_addr, ByteSpan(bytes, region), "partial-sum write");
    // Each channel iteration but the last writes the region; each but the first reads it back.
    const std::uint64_t trips = map.kitr * (map.citr > 0 ? map.citr - 1 : 0);
    write_bytes += region * std::max<std::uint64_t>(trips, 1);
    read_bytes += region * trips;
  }

  // Tail pipeline and write-back.
  if (written) {
    write_bytes += writer.bytes();
  } else if (one_pass) {
    const std::uint64_t accumulant_addr = out.accumulant_addr;
    write_bytes += tail.write_output(ctx, out_layout, acc,
                                     out.accumulant_read_first ? &accumulant_addr : nullptr);
  } else {
    std::int32_t* result = reused_room<std::int32_t, ResultTag>(g.kn * final_pixels);
    for (std::uint64_t k = 0; k < g.kn; ++k)
      tail.run_channel(k, std::span<const std::int32_t>(acc + k * out_pixels, out_pixels),
                       std::span<std::int32_t>(result + k * final_pixels, final_pixels));
    write_bytes += write_activation_output(ctx, out_layout, std::span(result, g.kn * final_pixels));
  }
  if (tail.config().bias_en) read_bytes += tail.config().bias_end - tail.config().bias_start;

  // Timing (docs/device.md): per fold (kernel iteration x channel iteration) the im2col engine
  // streams the padded image, one element per cycle, while the weights for the fold arrive
  // (ROW*COLS*N_SA bytes) after one read latency, and the array fills and drains (ROW rows of
  // delay, COLS columns, log2(N_SA) adder-tree levels) plus a fixed per-fold handshake.
  const std::uint64_t folds = map.kitr * map.citr;
  const std::uint64_t weight_beats = dram_beats(rows * cols * n_sa);
  const std::uint64_t fill_drain =
      rows + cols + static_cast<std::uint64_t>(std::bit_width(n_sa) - 1);
  const std::uint64_t stream = std::max(g.padded_h * g.padded_w, out_pixels);
  const std::uint64_t per_fold =
      stream + weight_beats + kDramReadLatencyCycles + fill_drain + kConvFoldOverheadCycles;
  return streaming_timing(folds * per_fold, read_bytes, write_bytes, macs);
}

}  // namespace npukit::device
