// The arithmetic of the CONV megablock once the weight blob has been mapped onto (output channel,
// input channel, tap): a dense int8 convolution summed exactly in int32 (device/conv.cpp decides
// which channels take part and which weight multiplies what; this file only adds products).
//
// Two implementations of the same packed algorithm: a plain scalar one (the reference) and an
// AVX2 one (_mm256_madd_epi16), chosen at run time; tests compare them with each other and with a
// plain nested loop.
#pragma once

#include <cstdint>
#include <vector>

namespace npukit::device::conv_kernels {

// Which implementation runs: kAuto picks AVX2 when the CPU has it, kScalar is the reference,
// kAvx2 throws on a CPU without AVX2.
enum class Impl { kAuto, kScalar, kAvx2 };

// The implementation the CONV megablock uses (process-wide; tests and benchmarks switch it).
void set_impl(Impl impl);
Impl impl();

struct DenseConv {
  // The padded, row-skipped input planes: plane c at planes + c * padded_h * padded_w.
  const std::int8_t* planes = nullptr;
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

  std::uint64_t oh() const { return (padded_h - kh) / stride + 1; }
  std::uint64_t ow() const { return (padded_w - kw) / stride + 1; }
};

// acc[k * oh*ow + p] = sum over channels and taps of weight * input, exact in int32 (the caller
// guarantees the bound: channels.size() * kh*kw * 2^14 < 2^31). snapshot[(k - snapshot_from) *
// oh*ow + p] = the same sum over channels [0, split) (may be null when snapshot_from = kn).
void dense_conv(const DenseConv& conv, std::int32_t* acc, std::int32_t* snapshot,
                Impl impl = Impl::kAuto);

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
  std::uint64_t wq = 0;                  // words per phase row
  std::uint64_t plane_words = 0;         // words per channel pair
  std::uint64_t q_count = 0;             // virtual outputs oh * wq
  std::uint64_t q_padded = 0;            // q_count rounded up to whole tiles
  std::uint64_t kn_padded = 0;           // output channels rounded up to whole tiles
  std::vector<std::int64_t> tap_offset;  // per tap, in words
  std::vector<std::uint32_t> x;          // pairs * plane_words + q_padded words
  std::vector<std::uint32_t> w;          // [kn_padded / kTileK][pairs][taps][kTileK] weight pairs
};

constexpr std::uint64_t kTileK = 4;   // output channels per tile
constexpr std::uint64_t kTileQ = 24;  // virtual outputs per tile (3 AVX2 vectors)

// Fills `p` (reusing its buffers).
void pack(const DenseConv& conv, Packed& p);

// y[kk * q_padded + q] (+)= sum over pairs [pair_begin, pair_end) and taps, for the kTileK
// output channels of tile `kb`; accumulate = false starts from 0.
void tiles_scalar(const Packed& p, std::uint64_t kb, std::uint64_t pair_begin,
                  std::uint64_t pair_end, bool accumulate, std::int32_t* y);
void tiles_avx2(const Packed& p, std::uint64_t kb, std::uint64_t pair_begin, std::uint64_t pair_end,
                bool accumulate, std::int32_t* y);

}  // namespace detail

}  // namespace npukit::device::conv_kernels
