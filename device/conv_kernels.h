// The arithmetic of the CONV megablock once the weight blob has been mapped onto (output channel,
// input channel, tap): a dense int8 convolution summed exactly in int32 (device/conv.cpp decides
// which channels take part and which weight multiplies what; this file only adds products).
//
// Paths, chosen at run time by the project's one resolver (common/cpu.h, NPUKIT_ISA): a plain
// scalar one (the reference), and from AVX2 up the GEMM form below (output channels in the lanes:
// int16 channel pairs, or, when every input of the call is 0..127, u8 channel quads), whose tiles
// are AVX2 (_mm256_madd_epi16 on the pairs, _mm256_maddubs_epi16 on the quads) or, at the AVX-512
// VNNI level, vpdpbusd on u8 quads only (of x + 128 when an input is negative). Tests compare
// every path the CPU has with the scalar one and with a plain nested loop.
#pragma once

#include "common/cpu.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

namespace npukit::device::conv_kernels {

// The u8 quads' (group, tap) steps that pair_steps leaves single, per group of 2 weight blocks:
// group g's are singles[begin[g]] .. singles[begin[g + 1] - 1], ascending.
struct StepPairs {
  std::vector<std::uint32_t> singles, begin;
};

// Weight operands packed for the tiles (detail::Packed / PackedQuads below), one slot per packing.
// A caller that runs the same weights again (conv.cpp keeps one with each mapped weight blob, so
// a network evaluated image after image) passes it in DenseConv::packs and the weights are packed
// once instead of once per call. Valid only while the weights, channels, split, kn and kernel
// size stay those of the call that filled it. Shared by threads (conv.cpp's store serves every
// eval worker of the process): fill_once runs the first caller's fill under a mutex while the
// others wait, and publishes it (release) to every later ready() (acquire); after that w and the
// offsets are only read.
struct PackedWeights {
  std::vector<std::uint32_t> w, offset_first, offset_all;
  // The GEMM form's live steps (live_steps below), and w with only those steps when some are not.
  std::vector<std::uint32_t> live_steps, live_w;
  StepPairs step_pairs;  // of the u8 quads' live steps (bias 0)
  bool ready() const { return filled_.load(std::memory_order_acquire); }
  template <typename Fill>
  void fill_once(Fill&& fill) {
    if (ready()) return;
    const std::lock_guard lock(mutex_);
    if (filled_.load(std::memory_order_relaxed)) return;
    fill();  // may throw: then not ready, the next caller fills afresh
    filled_.store(true, std::memory_order_release);
  }

 private:
  std::atomic<bool> filled_{false};
  std::mutex mutex_;
};
struct WeightPacks {
  PackedWeights pairs, pairs8, quads128, quads0;
  // quads128's and quads0's live weights joined for the AVX-512 VNNI zmm tiles, in w
  // (join_block_pairs).
  PackedWeights joined128, joined0;
  PackedWeights winograd;  // U = G' g G'^T in w (device/conv_winograd.h)
};

// An input image as the device holds it in DRAM, for the path that packs its operands straight
// from it (DenseConv::words) instead of from planes: gati.md 6.1 on the 9,8,8 array, 32-byte
// words of 8 channels x 4 pixels (byte (c % 8) * 4 + p % 4), ceil(P / 4) words per group of 8
// channels, the groups in order. Channel c's pixel (y, x) (p = y * width + x) is the value of
// plane c at row y + top, column left + x when that row is in the plane; every other value of
// the padded planes is 0 (device::read_activation_planes' placement). The words lie in pieces
// (DRAM pages, read in place): word w at pieces[(w + skew) >> piece_shift], word (w + skew) %
// 2^piece_shift of it.
struct ImageWords {
  const std::uint8_t* const* pieces = nullptr;
  std::uint64_t piece_shift = 0, skew = 0;
  std::uint64_t channels = 0;  // a multiple of 8
  std::uint64_t width = 0, height = 0;
  std::int64_t top = 0;
  std::uint64_t left = 0;
  std::uint64_t group_words() const { return (width * height + 3) / 4; }
  const std::uint8_t* word(std::uint64_t w) const {
    const std::uint64_t at = w + skew;
    return pieces[at >> piece_shift] + (at & ((std::uint64_t{1} << piece_shift) - 1)) * 32;
  }
};

struct DenseConv {
  // The padded, row-skipped input planes: plane c at planes + c * padded_h * padded_w. May be
  // null when reads_words(*this) says the call packs from `words` instead.
  const std::int8_t* planes = nullptr;
  // The same input as DRAM words (optional; plane_count = words->channels).
  const ImageWords* words = nullptr;
  std::uint64_t plane_count = 0;
  std::uint64_t padded_h = 0, padded_w = 0;
  std::uint64_t kh = 1, kw = 1, stride = 1;  // stride 1..4 (any >= 1 works)
  // The channels that take part, in summation order: channels[i] is a plane index, or -1 for a
  // zero channel (used to pad each summation phase to an even length).
  std::vector<std::int64_t> channels;
  // Output channels and their weights, [kn][plane_count][kh * kw] (indexed by plane, like the
  // planes; channels not listed are not read).
  std::uint64_t kn = 0;
  const std::int8_t* weights = nullptr;
  // Channels [0, split) form the first phase: `snapshot` receives, for every output channel
  // k >= snapshot_from, the sum over that phase alone (the 14.11 DRAM partial sums). split must be
  // even; split = channels.size() with snapshot_from = kn when no snapshot is wanted.
  std::uint64_t split = 0;
  std::uint64_t snapshot_from = 0;
  // Optional: where packed weights are kept between calls (see PackedWeights); null packs them
  // into the per-thread operands on every call.
  WeightPacks* packs = nullptr;

  std::uint64_t oh() const { return (padded_h - kh) / stride + 1; }
  std::uint64_t ow() const { return (padded_w - kw) / stride + 1; }
};

// acc[k * oh*ow + p] = sum over channels and taps of weight * input, exact in int32 (the caller
// guarantees the bound: channels.size() * kh*kw * 2^14 < 2^31). snapshot[(k - snapshot_from) *
// oh*ow + p] = the same sum over channels [0, split) (may be null when snapshot_from = kn).
// isa: kAuto follows cpu::active(); a named level the CPU lacks throws.
void dense_conv(const DenseConv& conv, std::int32_t* acc, std::int32_t* snapshot,
                Isa isa = Isa::kAuto);
// Whether dense_conv(conv, ..., isa) packs its input from conv.words alone (then conv.planes
// may be null): the AVX2 level (any stride), when every listed channel sits in its own place of
// the words' channel quads and pairs (channel list entry i of a quad or pair is channel c0 + i
// or -1: a list of all channels in order, as a dense layer's usually is).
bool reads_words(const DenseConv& conv, Isa isa = Isa::kAuto);

// dense_conv's sums handed over as they are made instead of written to acc (issue 13: the
// caller's tail writes them straight to the output words, device/block.h TailPipeline::
// RowWriter): fn(ctx, y, p0, n, k0, k_count) for pieces of pixels [p0, p0 + n) and output
// channels [k0, k0 + k_count), y[i * stride + k - k0] the sum of pixel p0 + i (row-major oh *
// ow) and channel k; p0 is a multiple of 4 and k0 of 8, and each piece ends on a multiple of 4
// pixels and 8 channels or at the last one. Calls come from parallel_for's workers, for
// disjoint pieces. snapshot as dense_conv's. Returns false, having done nothing, at a level
// without this form (the scalar one): then call dense_conv.
struct GemmUnits;
struct RowSink {
  void (*fn)(const void* ctx, const std::int32_t* y, std::uint64_t stride, std::uint64_t p0,
             std::uint64_t n, std::uint64_t k0, std::uint64_t k_count) = nullptr;
  const void* ctx = nullptr;
};
// With `later`, the work units are set up (operands packed) but not run: `later` receives them
// (GemmUnits, below), and the sink is called only when they run.
bool dense_conv_rows(const DenseConv& conv, std::int32_t* snapshot, const RowSink& sink,
                     Isa isa = Isa::kAuto, GemmUnits* later = nullptr);
// Whether dense_conv_rows runs at this level (without running anything).
bool has_dense_conv_rows(Isa isa = Isa::kAuto);

// The snapshot (dense_conv's planar [j * pixels + p], `count` planes) as the DRAM partial-sum
// region's rows (gati.md 14.11): out[4 * (p * lanes + j)] = planes[j * pixels + p] big-endian,
// 0 for lanes j >= count (count <= lanes). AVX2 transposes 8 pixels at a time when lanes is 8.
void planes_to_be32_rows(const std::int32_t* planes, std::uint64_t count, std::uint64_t pixels,
                         std::uint64_t lanes, std::uint8_t* out, Isa isa = Isa::kAuto);
namespace detail {
// Pixels [first, pixels) of planes_to_be32_rows.
void planes_to_be32_rows_scalar(const std::int32_t* planes, std::uint64_t count,
                                std::uint64_t pixels, std::uint64_t lanes, std::uint8_t* out,
                                std::uint64_t first = 0);
void planes_to_be32_rows_avx2(const std::int32_t* planes, std::uint64_t count, std::uint64_t pixels,
                              std::uint8_t* out);  // lanes 8
}  // namespace detail

// One output channel's connection to one input plane (the depthwise modes): acc[p] += sum over
// taps of taps[t] * input, for every output pixel p of the plane (oh * ow, row-major). Planes
// are given as int16 phase planes built once per layer by pack_planes.
struct PlaneSet {
  std::uint64_t padded_h = 0, padded_w = 0, kh = 1, kw = 1, stride = 1;
  std::uint64_t wq = 0, plane_words = 0, oh = 0, ow = 0;
  std::vector<std::int64_t> tap_offset;  // per tap, in int16 elements from a plane's start
  std::vector<std::int16_t> x;           // plane_count * plane_words + slack
};
// Fills `set` from plane_count int8 planes of padded_h x padded_w (reusing its buffers).
void pack_planes(const std::int8_t* planes, std::uint64_t plane_count, std::uint64_t padded_h,
                 std::uint64_t padded_w, std::uint64_t kh, std::uint64_t kw, std::uint64_t stride,
                 PlaneSet& set);
// acc (oh * ow int32) += the convolution of plane `plane` with kh*kw `taps`.
void connection_conv(const PlaneSet& set, std::uint64_t plane, const std::int8_t* taps,
                     std::int32_t* acc, Isa isa = Isa::kAuto);

// A depthwise layer whole, channels across the SIMD lanes (issue 13): output channel k reads
// input plane k through its own kh*kw taps; the lanes hold 8 channels and the loop walks the
// output pixels, so rows of 7 or 14 outputs waste no lane (connection_conv puts 16 pixels of one
// row in a vector).
struct DepthwiseLanes {
  const std::int8_t* planes = nullptr;  // plane c at planes + c * padded_h * padded_w
  std::uint64_t channels = 0;           // output channel k < channels reads plane k
  std::uint64_t padded_h = 0, padded_w = 0;
  std::uint64_t kh = 1, kw = 1, stride = 1;  // kh * kw <= 16 (a PE column's rows)
  const std::int8_t* taps = nullptr;         // [channels][kh * kw]
  std::uint64_t oh() const { return (padded_h - kh) / stride + 1; }
  std::uint64_t ow() const { return (padded_w - kw) / stride + 1; }
};
// acc[k * oh*ow + p] = the sum over taps of taps[k][t] * input (overwritten; exact in int32).
void depthwise_lanes(const DepthwiseLanes& conv, std::int32_t* acc, Isa isa = Isa::kAuto);

// A buffer kept per thread from call to call, told apart by Tag (use a type local to the file).
// The layers of a network allocate the same large buffers again and again, and on the build
// machine paging freshly allocated memory in cost more than the arithmetic of a 64-channel 56x56
// layer; this keeps the largest layer's buffers instead, until the thread ends. The contents are
// whatever the previous user left: assign before reading.
template <typename T, typename Tag>
std::vector<T>& thread_buffer() {
  thread_local std::vector<T> buffer;
  return buffer;
}

namespace detail {

// Packs pixels p, p + step, ..., p + (n - 1) step of the channels c0 + b (b < 4 with bit b of
// `lanes` set; others 0) of an ImageWords into n words at dst, straight from its DRAM words: u8
// quads (byte b = channel c0 + b, c0 a multiple of 4), returning whether every value was 0..127,
// or int16 pairs (bits 0-1, c0 even). The AVX2 ones shuffle a DRAM word's 16-byte half (4
// channels x 4 pixels) into 4 quad words, or 8 of its bytes into 4 pair words, per step of 1;
// at step 2 two words' halves into 4 words.
using QuadRow = bool (*)(const ImageWords& im, std::uint64_t c0, unsigned lanes, std::uint64_t p,
                         std::uint64_t n, std::uint64_t step, std::uint32_t* dst);
using PairRow = void (*)(const ImageWords& im, std::uint64_t c0, unsigned lanes, std::uint64_t p,
                         std::uint64_t n, std::uint64_t step, std::uint32_t* dst);
bool quad_row_scalar(const ImageWords& im, std::uint64_t c0, unsigned lanes, std::uint64_t p,
                     std::uint64_t n, std::uint64_t step, std::uint32_t* dst);
bool quad_row_avx2(const ImageWords& im, std::uint64_t c0, unsigned lanes, std::uint64_t p,
                   std::uint64_t n, std::uint64_t step, std::uint32_t* dst);
void pair_row_scalar(const ImageWords& im, std::uint64_t c0, unsigned lanes, std::uint64_t p,
                     std::uint64_t n, std::uint64_t step, std::uint32_t* dst);
void pair_row_avx2(const ImageWords& im, std::uint64_t c0, unsigned lanes, std::uint64_t p,
                   std::uint64_t n, std::uint64_t step, std::uint32_t* dst);
struct WordRows {
  QuadRow quads = quad_row_scalar;
  PairRow pairs = pair_row_scalar;
};

// Whether conv.words can give every packed word (see reads_words; any level).
bool words_in_place(const DenseConv& conv);

// The packed operands shared by both implementations.
//
// Input: channel pairs (2i, 2i+1) interleaved as int16 pairs in one 32-bit word per pixel, so one
// _mm256_madd_epi16 multiplies 8 pixels x 2 channels by a broadcast weight pair and adds each
// pixel's two products into an int32 lane. Each pair's plane is split into stride phases (rows
// and columns by y % s and x % s) so that for every tap the inputs of consecutive outputs are
// consecutive words. Output q = oh * wq + ow is a "virtual" pixel: columns ow >= OW and rows
// >= OH are computed on whatever lies there and thrown away.
struct Packed {
  std::uint64_t pairs = 0, taps = 0;
  std::uint64_t wq = 0;                   // words per phase row
  std::uint64_t plane_words = 0;          // words per channel pair
  std::uint64_t q_count = 0;              // virtual outputs oh * wq
  std::uint64_t q_padded = 0;             // q_count rounded up to whole tiles
  std::uint64_t kn_padded = 0;            // output channels rounded up to whole tiles
  std::vector<std::int64_t> tap_offset;   // per tap, in words
  std::vector<std::uint32_t> x;           // pairs * plane_words + q_padded words (as PackedQuads')
  std::vector<std::uint32_t> w;           // [kn_padded / kTileK][pairs][taps][kTileK] weight pairs
  const std::uint32_t* w_data = nullptr;  // w.data(), or the DenseConv::packs copy
  // live_steps of w and w with those steps only (w_data when every step is live): its own, or
  // the packs copy's.
  std::vector<std::uint32_t> live_steps, live_w;
  std::span<const std::uint32_t> live;
  const std::uint32_t* live_w_data = nullptr;
};

// The (group, tap) steps, g * taps + t in ascending order, at which some output channel's weight
// word is not zero, of weights packed [blocks][groups][taps][block]: the GEMM form skips the
// others, whose products are all zero (a space-to-depth stem's taps past the 7x7 kernel: 9 of
// the 16 steps of its last piece). The packings compute them once with the weights, and when
// some step is dead, live_w = the weights of the live steps alone, [blocks][steps][block] (empty
// otherwise).
void live_steps(const std::vector<std::uint32_t>& w, std::uint64_t groups, std::uint64_t taps,
                std::uint64_t block, std::vector<std::uint32_t>& steps,
                std::vector<std::uint32_t>& live_w);

// Which of the u8 quads' steps the AVX2 tiles take two at a time. _mm256_maddubs_epi16 leaves an
// output channel's two products (inputs 2h and 2h + 1 of the quad) of a step in one int16 lane;
// adding two steps' lanes with _mm256_add_epi16 before the widening _mm256_madd_epi16 saves a
// quarter of the multiplies, and is exact when no lane can leave int16: with inputs 0..127, 127
// times the sum of the lane's 4 positive weights <= 32767, and 127 times that of its negative
// weights' magnitudes <= 32768. w holds [blocks][steps][8] words of 4 s8 (each block's steps in
// order); a group is 2 blocks (the tile's 16 channels). Per group and phase ([0, split) and
// [split, steps)) the steps pair greedily in order, s with s + 1 when they fit, else s is single:
// so from a phase's start and after each single, the steps up to the next single (or the phase's
// end) are whole pairs.
void pair_steps(const std::vector<std::uint32_t>& w, std::uint64_t steps, std::uint64_t split,
                StepPairs& pairs);

constexpr std::uint64_t kTileK = 4;   // output channels per tile
constexpr std::uint64_t kTileQ = 24;  // virtual outputs per tile (3 AVX2 vectors)

// Fills `p` (reusing its buffers); the weights in blocks of tile_k output channels (kTileK for
// the tiles below, kGemmBlock for the channels-in-lanes form).
// With `from_words` (words_in_place must hold) the input words come straight from conv.words.
void pack(const DenseConv& conv, Packed& p, std::uint64_t tile_k = kTileK,
          PairRow from_words = nullptr);

// y[kk * q_padded + q] (+)= sum over pairs [pair_begin, pair_end) and taps, for the kTileK
// output channels of tile `kb`; accumulate = false starts from 0 (the scalar level).
void tiles_scalar(const Packed& p, std::uint64_t kb, std::uint64_t pair_begin,
                  std::uint64_t pair_end, bool accumulate, std::int32_t* y);

// Output channels per weight block of the packed operands, and per vector of the GEMM form's
// tiles (below).
constexpr std::uint64_t kGemmBlock = 8;

// The GEMM form's u8 quad operands: channels in quads (each phase padded to a multiple of 4 with
// zero channels), one 32-bit word per pixel holding the 4 channels as u8 = x + bias, weights as
// 4 s8 per word, and per output channel bias * the sum of its weights over the first phase and
// over all channels (wrapping), subtracted from the u8 x s8 sums. bias is 0 when every input is
// 0..127 (after a ReLU): then the AVX2 level's _mm256_maddubs_epi16 is exact too (a pair of
// products is at most 2 * 127 * 128 = 32512 in magnitude, inside int16); or 128, any int8
// input, for vpdpbusd (whose four products go straight to int32).
struct PackedQuads {
  std::uint32_t bias = 128;
  std::uint64_t quads = 0, split_quads = 0, taps = 0;
  std::uint64_t wq = 0, plane_words = 0, q_count = 0, q_padded = 0, kn_padded = 0;
  std::vector<std::int64_t> tap_offset;
  // quads * plane_words + q_padded words; where the packing writes every word (fused: from the
  // image's words, or interleaved at stride 1) a reused buffer keeps its largest size
  // (grow_words), and the words past those are left over from earlier layers.
  std::vector<std::uint32_t> x;
  std::vector<std::uint32_t> w;  // [kn_padded / kGemmBlock][quads][taps][kGemmBlock]
  std::vector<std::uint32_t> offset_first, offset_all;  // per output channel, 0 past kn
  // w, offset_first and offset_all's data, or those of the DenseConv::packs copy.
  const std::uint32_t *w_data = nullptr, *offset_first_data = nullptr, *offset_all_data = nullptr;
  // As Packed's.
  std::vector<std::uint32_t> live_steps, live_w;
  std::span<const std::uint32_t> live;
  const std::uint32_t* live_w_data = nullptr;
  // At bias 0, pair_steps of the live steps (else empty): its own or the packs copy's.
  StepPairs own_pairs;
  const StepPairs* step_pairs = nullptr;
  // join_block_pairs' result when there is no packs copy to keep it in.
  std::vector<std::uint32_t> own_joined;
};

// The live weights (live_w_data) with blocks 2j and 2j + 1 of each step side by side in one
// 64-byte-aligned row of 16 words, [kn_padded / 16 rounded up][steps][16] (an odd last block
// beside zeros): one aligned zmm load per step where the blocks' own rows take two masked
// broadcasts, each also a port-5 uop beside vpdpbusd's (BM_DenseConv, AVX-512 Xeon: 3x3 and
// 1x1 shapes 10-20 % faster). Kept in conv.packs when it has them, once; `bias` as pack_quads'.
const std::uint32_t* join_block_pairs(const DenseConv& conv, PackedQuads& p, std::uint32_t bias);

// Interleaves 4 int8 planes of n values into n words (byte b of dst[i] = src[b][i], 0 for a
// null src[b]) and says whether every value read was >= 0 (the AVX2 one is vector work).
using QuadInterleave = bool (*)(const std::int8_t* const* src, std::uint64_t n, std::uint32_t* dst);
bool interleave_quads_scalar(const std::int8_t* const* src, std::uint64_t n, std::uint32_t* dst);
bool interleave_quads_avx2(const std::int8_t* const* src, std::uint64_t n, std::uint32_t* dst);

// bias: 128 or 0 (then every input must be 0..127, see inputs_nonnegative: the AVX2 level's
// GEMM form).
// With bias 0, stride 1 and an `interleave`, the inputs are checked while they are packed (one
// pass over them instead of two): false as soon as one is negative, and `p` is then unusable.
// The same with bias 0 and `from_words` (words_in_place must hold; any stride): packed and
// checked straight from conv.words (planes unused; only the values packed are checked: those
// some tap reads). With bias 128 the same fused packings run without the check, and the words
// are offset after them (the VNNI level's GEMM form on signed inputs). Otherwise true.
// `prefetch` (with from_words): bytes brought into L2 as the quads are packed, a few lines per
// row packed, from the start (as far as the rows go).
bool pack_quads(const DenseConv& conv, PackedQuads& p, std::uint32_t bias = 128,
                QuadInterleave interleave = nullptr, QuadRow from_words = nullptr,
                std::span<const std::uint8_t> prefetch = {});

// Whether every input value of the channels `conv` sums over is >= 0 (the data, not a promise:
// dense_conv checks it for each call before taking the AVX2 u8 path).
bool inputs_nonnegative(const DenseConv& conv);

// The channels-in-lanes ("GEMM") form for small planes, where the virtual outputs above waste
// lanes (7x7: 7 x 9 = 63 virtual outputs padded to 64 or 72 for 49 pixels): a vector holds 8
// output channels of one pixel, each (channel pair or quad, tap) broadcasts the pixel's input
// word and multiplies it by the weight words of 8 output channels, so every lane is a real
// output. Operands are those of pack (tile_k = kGemmBlock) or pack_quads (whose weight blocks
// are kGemmBlock channels): words of 2 int16 (pairs) or 4 u8 (quads) channels, weights
// [kn_padded / 8][groups][taps][8].
constexpr std::uint64_t kGemmK = 64;       // output channels per work unit (y row)
constexpr std::uint64_t kGemmPixels = 64;  // output pixels per work unit, at most
// The u8 quad tiles of a work unit with at least twice this many steps sum them in chunks of
// about this many (GemmPlan::chunk_steps): every channel group's tiles over the first chunk, then
// over the next, so a chunk's inputs (64 pixels x 128 words, 32 KB) stay in the cache for all its
// groups instead of each group streaming the unit's whole inputs (resnet50's 1x1 convs over
// 2048 channels at 7x7 held 100 KB of inputs and 128 KB of weights a unit).
constexpr std::uint64_t kGemmChunkSteps = 128;
struct GemmOperands {
  const std::uint32_t* x = nullptr;  // the packed words (Packed::x or PackedQuads::x)
  // The steps a tile takes, the live (group, tap)s (live_steps): step s multiplies the input
  // words at x[offset[s] + q] (output q) by its weight words; offset[s] = g * plane_words +
  // tap_offset[t].
  const std::int64_t* offset = nullptr;
  std::uint64_t steps = 0;
  const std::uint32_t* w = nullptr;  // [kn_padded / 8][steps][8]
  // w as join_block_pairs gives it, [kn_padded / 16][steps][16]: set when the tiles take 4 or
  // more blocks a call (kGemmVnniBlocks), which the AVX-512 VNNI zmm tiles read.
  const std::uint32_t* w_joined = nullptr;
  // The u8 quads' pairs (pair_steps, set_step_pairs), or single_begin null (every step single:
  // the int16 pairs, and quads without live steps). Group g = kb / 2 leaves single the steps
  // singles[single_begin[g]] .. singles[single_begin[g + 1] - 1] and takes the others two at a
  // time; so the tiles take blocks from an even kb, and s_begin and s_end must cut no pair
  // (pair_boundary: 0, split, steps, or a chunk's cut). singles is null when no step is single.
  const std::uint32_t* singles = nullptr;
  const std::uint32_t* single_begin = nullptr;
  std::uint64_t split = 0;
  // The u8 quads as x + 128 (signed inputs, the VNNI tiles): PackedQuads' offset_first and
  // offset_all, by how much output channel k's sums over steps [0, split) and over every step
  // come out too high (128 times the sum of its weights in them); null with the plain quads and
  // the pairs.
  const std::uint32_t* offset_first = nullptr;
  const std::uint32_t* offset_all = nullptr;
  // Whether the sums of steps [s_begin, s_end) start anywhere but 0 (s_begin and s_end are 0,
  // split or steps: whole phases), and where output channel k's do: minus the offset of those
  // steps, which is the offset up to s_end less the offset up to s_begin (wrapping, like the sums).
  bool starts(std::uint64_t s_begin, std::uint64_t s_end) const {
    return offset_first && (s_begin < split || s_end > split);
  }
  // out[j], j < count, is where output channel k0 + j's sums start; the phase choices are made
  // once per call, outside the loops (the tiles ask for 64 lanes at every call: as 64 calls
  // choosing again, in branches the compiler kept scalar, the stem's many short calls spent a
  // tenth of a unit's time here).
  void starts_of(std::uint64_t k0, std::uint64_t count, std::uint64_t s_begin, std::uint64_t s_end,
                 std::int32_t* out) const {
    if (!offset_first) {
      std::fill_n(out, count, 0);
      return;
    }
    const std::uint32_t* upto = (s_end > split ? offset_all : offset_first) + k0;
    if (s_begin < split) {
      for (std::uint64_t j = 0; j < count; ++j) out[j] = static_cast<std::int32_t>(0u - upto[j]);
      return;
    }
    const std::uint32_t* before = offset_first + k0;
    for (std::uint64_t j = 0; j < count; ++j)
      out[j] = static_cast<std::int32_t>(before[j] - upto[j]);
  }
  // The same for one output channel k.
  std::int32_t start(std::uint64_t k, std::uint64_t s_begin, std::uint64_t s_end) const {
    std::int32_t out;
    starts_of(k, 1, s_begin, s_end, &out);
    return out;
  }
  // Optional: bytes the tiles bring into L2 as they go (prefetcht1, a line every few steps),
  // split among a call's tiles. run_gemm_unit points it at the next work unit's weights, which
  // its first tile would otherwise wait for from L3: a unit's weights are read once per image,
  // and resnet50's 7x7 layers ran at 65 % of the rate they reach when warm. The AVX2 tiles
  // ignore it.
  const std::uint8_t* prefetch = nullptr;
  std::uint64_t prefetch_bytes = 0;
  // The weights `blocks` blocks from kb (even) read, as the tiles read them: w_joined's rows when
  // it is set, else w's.
  std::span<const std::uint8_t> block_weights(std::uint64_t kb, std::uint64_t blocks) const {
    const std::uint32_t* rows =
        w_joined ? w_joined + kb / 2 * steps * 2 * kGemmBlock : w + kb * steps * kGemmBlock;
    const std::uint64_t words = (w_joined ? (blocks + 1) / 2 * 2 : blocks) * steps * kGemmBlock;
    return {reinterpret_cast<const std::uint8_t*>(rows), words * sizeof(std::uint32_t)};
  }
};
// op's pairs from the packing's (none when pair_steps did not run). Whether a group takes pairs
// rests on single_begin alone: when every step pairs, singles is empty (and may be null).
void set_step_pairs(const StepPairs& pairs, GemmOperands& op);
// Whether the AVX2 tiles take group kb / 2's steps two at a time (in 4-pixel tiles): it has pairs
// and at most half of its steps are single.
bool takes_pairs(const GemmOperands& op, std::uint64_t kb);
// The first step at or after s (at most op.steps) where group kb / 2's pairs may be cut: no pair
// of it straddles the step before (from the first step and after each single the steps go two
// by two). A tile call of the u8 quads starts and ends there.
std::uint64_t pair_boundary(const GemmOperands& op, std::uint64_t kb, std::uint64_t s);
// y[i * kGemmK + b * 8 + j] (+)= the sum over steps [s_begin, s_end) for virtual output q[i]
// (i < n) and output channel (kb + b) * 8 + j, b < blocks; accumulate = false starts at 0.
// blocks is at most 2, or kGemmVnniBlocks (a work unit's 64 channels) for the AVX-512 VNNI
// tiles (and the plain C++ ones, which take any count).
using GemmTilesFn = void(const GemmOperands& op, std::uint64_t kb, std::uint64_t blocks,
                         const std::uint64_t* q, std::uint64_t n, std::uint64_t s_begin,
                         std::uint64_t s_end, bool accumulate, std::int32_t* y);
using GemmTiles = GemmTilesFn*;
constexpr std::uint64_t kGemmVnniBlocks = 8;
static_assert(kGemmVnniBlocks * kGemmBlock == kGemmK);
// Plain C++ (int16 pair products, or u8 x s8 quad products), and AVX2 (_mm256_madd_epi16, or
// _mm256_maddubs_epi16 then _mm256_madd_epi16 by ones: exact for inputs 0..127, see PackedQuads),
// and AVX-512 VNNI (vpdpbusd, quads only: the plain ones, or those of x + 128 with their starts).
GemmTilesFn gemm_pairs_scalar, gemm_quads_scalar, gemm_pairs_avx2, gemm_quads_avx2,
    gemm_quads_avx512vnni;
// AVX-VNNI (VEX vpdpbusd on ymm vectors, quads only, at most 2 blocks a call, as quad_tiles
// with offset_quads: x or x + 128 with the starts).
GemmTilesFn gemm_quads_avxvnni;
// The y rows of one work unit to output planes: out[k * out_stride + i] = y[i * kGemmK + k] for
// k < k_count, i < n.
using LanesOutFn = void(const std::int32_t* y, std::uint64_t n, std::uint64_t k_count,
                        std::int32_t* out, std::uint64_t out_stride);
using LanesOut = LanesOutFn*;
LanesOutFn lanes_out_scalar, lanes_out_avx2;
// dense_conv in the GEMM form: on u8 quads with quad_tiles when it is given and every input is
// 0..127 (checked by `interleave` while packing at stride 1, by inputs_nonnegative before it
// otherwise), else, with offset_quads, on u8 quads of x + 128 with quad_tiles (which must honour
// GemmOperands::offset_first / offset_all), else on int16 pairs with pair_tiles; out
// transposes the results. When words_in_place holds, the operands are packed (and checked) from
// conv.words by `rows`. With a `sink`, the y rows go to it instead of acc (dense_conv_rows; acc
// unused). quad_tiles are called with up to quad_blocks blocks at a time (pair_tiles with 2).
void dense_conv_gemm(const DenseConv& conv, std::int32_t* acc, std::int32_t* snapshot,
                     GemmTiles quad_tiles, GemmTiles pair_tiles, LanesOut out,
                     QuadInterleave interleave = interleave_quads_scalar, WordRows rows = {},
                     const RowSink* sink = nullptr, bool offset_quads = false,
                     std::uint64_t quad_blocks = 2, GemmUnits* later = nullptr,
                     std::uint64_t chunk_steps = 0);

// Which output pixels and channels a dense_conv_gemm's work unit u covers: pixels [p0, p0 + n)
// with p0 = u / k_units * unit_pixels, channels [k0, min(kn, k0 + kGemmK)) with k0 = u % k_units
// * kGemmK. Two convs' units cover the same sums exactly when their shapes are equal.
struct GemmUnitShape {
  std::uint64_t pixels = 0, unit_pixels = 0, k_units = 0, kn = 0;
  bool operator==(const GemmUnitShape&) const = default;
};
// What every work unit of one dense_conv_gemm reads (the operands point into packed buffers).
struct GemmPlan {
  GemmOperands op;
  GemmTiles tiles = nullptr;
  LanesOut out = nullptr;
  RowSink sink;  // fn null: the y rows go to acc through `out`
  std::int32_t* acc = nullptr;
  std::int32_t* snapshot = nullptr;
  GemmUnitShape shape;
  std::uint64_t p_units = 0, ow = 0, wq = 0, kn_padded = 0;
  std::uint64_t snapshot_from = 0, split_steps = 0, per_call = 0;
  // Sum the steps in chunks of this many (cut at pair_boundary), each over every channel group
  // of the unit before the next, when the unit has at least twice as many and no snapshot; 0: in
  // one pass per group.
  std::uint64_t chunk_steps = 0;
};
// How a work unit starts and ends (GemmUnits::run).
struct UnitRun {
  bool onto_tile = false;  // add the sums to the tile the thread's last unit left
  bool hand_over = true;   // false: no sink call (and no acc rows)
};
// Work unit u: its sums, then its sink call (or its acc rows).
void run_gemm_unit(const GemmPlan& plan, std::uint64_t u, UnitRun how = {});
// Every work unit, spread over parallel_for's workers.
void run_gemm_units(const GemmPlan& plan);

// connection_conv's paths.
void connection_scalar(const PlaneSet& set, std::uint64_t plane, const std::int8_t* taps,
                       std::int32_t* acc);
void connection_avx2(const PlaneSet& set, std::uint64_t plane, const std::int8_t* taps,
                     std::int32_t* acc);

// depthwise_lanes' paths for the channels [k0, k0 + 8) (those < conv.channels).
void depthwise_lanes_scalar(const DepthwiseLanes& conv, std::uint64_t k0, std::int32_t* acc);
void depthwise_lanes_avx2(const DepthwiseLanes& conv, std::uint64_t k0, std::int32_t* acc);

}  // namespace detail

// A dense conv's GEMM work units, set up but not yet run (dense_conv_rows with `later`): the
// CONV block runs a chain of kernel-split pieces unit by unit, so that each unit's int32
// partial sums are still in the cache when the next piece adds them (device/conv.cpp, "Unit
// chains"). It owns the packed operands the units read, taken over from the calling thread's
// buffers, which get this object's earlier ones back (no allocation once both have grown). The
// sink's target and DenseConv::packs must outlive run().
struct GemmUnits {
  detail::GemmPlan plan;
  detail::PackedQuads quads;
  detail::Packed pairs;
  std::vector<std::int64_t> offset;

  const detail::GemmUnitShape& shape() const { return plan.shape; }
  std::uint64_t count() const { return plan.p_units * plan.shape.k_units; }
  // Unit u. A chain may carry sums from piece to piece: `how.onto_tile` adds this piece's to
  // those the thread's previous unit left in its tile (the same unit of the previous piece, of
  // the same shape(); never with a snapshot); `how.hand_over` false leaves them there unwritten.
  void run(std::uint64_t u, detail::UnitRun how = {}) const { detail::run_gemm_unit(plan, u, how); }
  void run_all() const { detail::run_gemm_units(plan); }
};

}  // namespace npukit::device::conv_kernels
