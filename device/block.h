// How a megablock runs inside the device model, and the pieces every block shares:
//   * LayerContext: what the sequencer hands a megablock for one layer (its instruction, the
//     OutputBlock and TailBlock of the same group, DRAM, the array, diagnostics);
//   * BlockTiming: what a block reports (bytes moved, its own cycle estimate); a Device reports the
//     cycles of the timing model (device/timing.h) instead;
//   * ActivationLayout: the activation addressing of gati.md 6.1 (one source of truth);
//   * TailPipeline: accumulant add -> bias -> quantizer (+EltWise fp_cast) -> activation ->
//     global average pool (gati.md 7.2, DECISIONS.md 4);
//   * write_activation_output / write_flat_output: the OutputBlock write-back (zeros in every
//     padding byte, OpWidth 1 or 4, FlatController);
//   * Diagnostics: warnings for the v1.0.0 errata (gati.md 14.6, DECISIONS.md 18).
//
// A megablock is a function `BlockTiming run_xxx(LayerContext&)`. It reads its inputs from DRAM,
// computes bit-exactly, writes its output region through the helpers below and returns its
// timing. Malformed fields throw npukit::Error through ctx.fail_field(), which names the layer,
// the instruction index and the field. Blocks never print; warnings go to ctx.diag.
//
// Registry: find_block(opcode) returns the run function. The blocks owned by device-blocks are
// picked up when their header exists (device/eltwise.h, pool.h, reshape_transpose.h, concat.h,
// resize.h, nms.h) and defines the marker macro NPUKIT_DEVICE_RUN_<NAME> (ELTWISE, POOL,
// RESHAPE_TRANSPOSE for both run_reshape and run_transpose, CONCAT, RESIZE, NMS), which says that
// its .cpp defines the run_xxx function declared here. Without the marker the opcode is reported
// as "not built into this device model".
#pragma once

#include "common/bytes.h"
#include "common/cpu.h"
#include "common/error.h"
#include "device/dram.h"
#include "device/timing.h"
#include "isa/arch.h"
#include "isa/isa.h"

#include <cstdint>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace npukit::device {

namespace conv_kernels {
struct ImageWords;
}

// ---------------------------------------------------------------------------------------------
// Diagnostics (DECISIONS.md 18): the model computes the intended result and says which erratum
// the real v1.0.0 board would hit.

enum class Erratum {
  kTallImageHang,       // regular 3x3 stride-1 conv with IH >= 1.5 * IW never finishes
  kHang48x40,           // 48-high by 40-wide input hangs
  kPoolFirstNeedsTail,  // POOL as the first layer hangs without a TailBlock
  kConvPoolPool,        // conv -> pool -> pool: hangs on 9,4,4, corrupts bytes on 9,8,8
  kOddKernelItr9x4x4,   // 9,4,4: a conv after a conv with odd KernelItr gives wrong output
  kIncomplete16x1x16,   // 16,1,16: some chained and depthwise programs mismatch
  // The optional blocks (gati.md 14.15, DECISIONS.md 19):
  kConcatNoLayerDone,   // CONCAT never raises layer_done: nothing after it runs
  kConcatPixelPadding,  // CONCAT with H*W not a multiple of 32/N_SA drops data
  kPoolAverage,         // POOL megablock PoolType 1: 8-bit wrapping add, no scale
  kPoolGlobalAverage,   // POOL megablock PoolType 2: writes all zeros
  kGblPoolTail,         // TailBlock GblPoolEn: unsigned product, no clamp
  kResizePaddingPixel,  // RESIZE with output H*W not a multiple of 32/N_SA: padding pixel set
};

// "E1 tall-image conv hang" etc.: a stable id plus a short name, used in every warning.
std::string_view erratum_name(Erratum e);

struct Warning {
  int layer = 0;        // 1-based layer number, 0 = not inside a layer
  std::string erratum;  // erratum_name(), or empty for a plain warning
  std::string message;
  std::string text() const;  // "layer 3: v1.0.0 erratum E1 (...): message"
};

class Diagnostics {
 public:
  // Warnings are also printed to `sink` ("warning: " + text) as they happen, if non-null.
  void set_sink(std::ostream* sink) { sink_ = sink; }
  void erratum(int layer, Erratum e, std::string message);
  void warn(int layer, std::string message);
  const std::vector<Warning>& warnings() const { return warnings_; }
  bool has_erratum(Erratum e) const;
  void clear() { warnings_.clear(); }

 private:
  void add(Warning w);
  std::vector<Warning> warnings_;
  std::ostream* sink_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Timing. One cycle = one 81 MHz core clock; DRAM moves 32 bytes per beat.

inline constexpr std::uint64_t kDramBeatBytes = 32;
// A block's own cycle estimate (BlockTiming, checked by the block tests) uses these. The cycles a
// Device reports come from the timing model alone (device/timing.h, constants fitted to the RTL in
// timing_table.inc): Device::run_program replaces every BlockTiming field with it.
inline constexpr auto kDramReadLatencyCycles = static_cast<std::uint64_t>(timing::kReadLatency);
inline constexpr std::uint64_t kLayerStartCycles = 64;        // START broadcast, config, acks
inline constexpr std::uint64_t kConvFoldOverheadCycles = 60;  // per conv fold handshake

inline std::uint64_t dram_beats(std::uint64_t bytes) { return ceil_div(bytes, kDramBeatBytes); }

struct BlockTiming {
  std::uint64_t cycles = 0;          // the layer's total, from START to its last write
  std::uint64_t compute_cycles = 0;  // datapath busy (array fill/drain, folds, pipelines)
  std::uint64_t dram_cycles = 0;     // beats on the DRAM port (reads + writes) + latencies
  std::uint64_t dram_read_bytes = 0;
  std::uint64_t dram_write_bytes = 0;
  std::uint64_t macs = 0;  // useful multiply-accumulates (0 for non-MAC blocks)
};

// The common composition: the datapath and the DRAM port overlap (streaming blocks), plus one
// read latency and the fixed layer start cost. Blocks with a serial phase add it to compute.
BlockTiming streaming_timing(std::uint64_t compute_cycles, std::uint64_t read_bytes,
                             std::uint64_t write_bytes, std::uint64_t macs = 0);

// ---------------------------------------------------------------------------------------------
// Layer context.

// Unit chains (conv.cpp): a kernel split's pieces each add their sums to the previous piece's
// int32 partial sums in DRAM (resnet's space-to-depth stem: four pieces, two 3.2 MB regions). Run
// one piece after the other, each reads and writes them from memory; a chain instead holds back the
// work units of consecutive CONVs and runs them unit by unit, each unit of every piece before the
// next unit, so the partial sums a piece reads are still in the cache. The bytes are those of
// running the layers in order: a CONV joins only when nothing it or the pending pieces read or
// write could see the other order (conv.cpp, "Unit chains"), and the Device runs what is pending
// before any other layer, any dispatch, the end of the program, and when a layer throws.
class UnitChain;
struct UnitChainDeleter {
  void operator()(UnitChain* chain) const;
};
using UnitChainPtr = std::unique_ptr<UnitChain, UnitChainDeleter>;
UnitChainPtr make_unit_chain();
// A new program: the instruction region [begin, end) (and the zeroth instruction) are read while
// pieces wait, so no waiting piece may write them.
void begin_program(UnitChain& chain, std::uint64_t instructions_begin,
                   std::uint64_t instructions_end);
// Runs the waiting pieces' units, if any.
void run_unit_chain(UnitChain& chain);
// The wall seconds the units took since the last call, and the layer numbers of the first and
// the last piece that ran (0 if none), for the Device's per-layer account (LayerStats).
struct ChainTime {
  double seconds = 0;
  int first_layer_number = 0, layer_number = 0;
  // Bit i: layer first_layer_number + i carried the previous piece's sums (conv.cpp), left its
  // output unwritten (a later piece overwrote it unread).
  std::uint64_t carried = 0, unwritten = 0;
};
ChainTime take_chain_time(UnitChain& chain);

struct LayerContext {
  const isa::SaArch& arch;
  Dram& dram;
  const isa::Instruction& mega;    // the megablock instruction
  const isa::Instruction* output;  // the OutputBlock of the group (nullptr if none)
  const isa::Instruction* tail;    // the TailBlock of the group (nullptr if none)
  int layer_number;                // 1-based, as in START.LayerNumber
  Diagnostics& diag;
  int mega_index = -1;  // instruction indices in the instruction region
  int output_index = -1;
  int tail_index = -1;
  std::uint32_t accbuf_depth = 1024;  // on-chip accumulator depth in pixels (accbuf 4096 B)
  // Where a CONV may leave its work units to run with the next kernel-split pieces' (UnitChain,
  // below); null: every layer runs before it returns.
  UnitChain* chain = nullptr;

  // "layer 3 (instruction 7 CONV)"
  std::string where() const;
  // "layer 3, instruction 7 CONV.IW": the instruction holding `field` in this group.
  std::string field_name(isa::Field field) const;
  // Throws npukit::Error "<field_name>: <message>".
  template <typename... Args>
  [[noreturn]] void fail_field(isa::Field field, fmt::format_string<Args...> format,
                               Args&&... args) const {
    fail("{}: {}", field_name(field), fmt::format(format, std::forward<Args>(args)...));
  }
  // The OutputBlock; throws (naming the layer) when the group has none.
  const isa::Instruction& require_output() const;
  // Throws naming `field` when [addr, addr + bytes) is outside DRAM.
  void check_dram_range(isa::Field field, std::uint64_t addr, std::uint64_t bytes) const;
};

using BlockFn = BlockTiming (*)(LayerContext&);

// nullptr for opcodes that are not megablocks, or whose block is not built into this binary.
BlockFn find_block(isa::Opcode op);

// Megablocks. device-core: conv.cpp, fc.cpp. device-blocks: the others.
BlockTiming run_conv(LayerContext& ctx);
BlockTiming run_fc(LayerContext& ctx);
BlockTiming run_eltwise(LayerContext& ctx);
BlockTiming run_pool(LayerContext& ctx);
BlockTiming run_reshape(LayerContext& ctx);
BlockTiming run_transpose(LayerContext& ctx);
BlockTiming run_concat(LayerContext& ctx);
BlockTiming run_resize(LayerContext& ctx);
BlockTiming run_nms(LayerContext& ctx);

// ---------------------------------------------------------------------------------------------
// Activation layout (gati.md 6.1): element (c, p = h*W + w) at
//   (c / cd) * (cd * P') + (p / dk) * 32 + (c % cd) * dk + (p % dk)
// with cd = N_SA, dk = 32 / cd, P' = ceil_mod(P, dk), C' = ceil_mod(C, cd); padding is 0.
// With OpWidth 4 every element is a big-endian int32 at 4 * offset (our decision, docs/device.md).

struct ActivationLayout {
  std::uint64_t channels = 0;         // C (real)
  std::uint64_t pixels = 0;           // P = H * W
  std::uint64_t channel_group = 8;    // cd
  std::uint64_t pixels_per_word = 4;  // dk

  static ActivationLayout for_arch(const isa::SaArch& arch, std::uint64_t channels,
                                   std::uint64_t pixels);
  std::uint64_t padded_channels() const { return ceil_mod(channels, channel_group); }
  std::uint64_t padded_pixels() const { return ceil_mod(pixels, pixels_per_word); }
  std::uint64_t bytes() const { return padded_channels() * padded_pixels(); }  // C'·P'
  std::uint64_t offset(std::uint64_t c, std::uint64_t p) const {
    const std::uint64_t pp = padded_pixels();
    return (c / channel_group) * (channel_group * pp) + (p / pixels_per_word) * 32 +
           (c % channel_group) * pixels_per_word + (p % pixels_per_word);
  }
};

// Reads an int8 activation tensor (layout.bytes() bytes at addr) into planar [C][P] values.
std::vector<std::int8_t> read_activation(const LayerContext& ctx, isa::Field addr_field,
                                         std::uint64_t addr, const ActivationLayout& layout);
// The same into `planar` (resized to C * P, every element overwritten): blocks pass a buffer
// kept between layers and images so a run allocates nothing once the buffers have grown.
void read_activation(const LayerContext& ctx, isa::Field addr_field, std::uint64_t addr,
                     const ActivationLayout& layout, std::vector<std::int8_t>& planar);
// The same into planar[0, C * P), the caller's storage (a buffer that only grows: resizing a
// vector zero-fills what it adds).
void read_activation(const LayerContext& ctx, isa::Field addr_field, std::uint64_t addr,
                     const ActivationLayout& layout, std::int8_t* planar);

// The same into zero-padded planes, with no planar copy in between (the CONV block's input,
// issue 13): channel c's pixel (y, x) (p = y * width + x, P a multiple of width) lands at
// planes[c * plane_h * plane_w + (y + top) * plane_w + left + x] when 0 <= y + top < plane_h
// (top < 0 drops the first rows: row skips); every other byte of the C planes is set to 0.
void read_activation_planes(const LayerContext& ctx, isa::Field addr_field, std::uint64_t addr,
                            const ActivationLayout& layout, std::uint64_t width, std::int64_t top,
                            std::uint64_t left, std::uint64_t plane_h, std::uint64_t plane_w,
                            std::int8_t* planes);

// The same image read in place as conv_kernels::ImageWords, for the dense conv's packing from
// the words (issue 13): `pieces` (the caller's, kept) receives the DRAM page pointers; the range
// is checked like read_activation_planes'. False, with nothing read, when the layout is not the
// 9,8,8 one (8 channels x 4 pixels per word) or addr is not word-aligned: read the planes then.
bool read_activation_words(const LayerContext& ctx, isa::Field addr_field, std::uint64_t addr,
                           const ActivationLayout& layout, std::uint64_t width, std::int64_t top,
                           std::uint64_t left, std::vector<const std::uint8_t*>& pieces,
                           conv_kernels::ImageWords& words);

// Adds the big-endian int32 tensor in the 6.1 layout at addr (OpWidth 4: 4 * layout.bytes()
// bytes) to planar [C][P] values with the accumulant adder's 32-bit wrap (AccumulantReadFirst).
void add_activation_int32(const LayerContext& ctx, isa::Field addr_field, std::uint64_t addr,
                          const ActivationLayout& layout, std::span<std::int32_t> planar);

// ---------------------------------------------------------------------------------------------
// Tail pipeline (TailBlock), per output value of channel k:
//   acc (int32, accumulants already added by the megablock, wrapping 32-bit adds)
//   -> + bias[k] (BiasEn; BiasWidth 32: big-endian int32, 8: int8; 32-bit wrapping add)
//   -> quantizer (QuantEn): p = acc * (int16)QuantScale (64-bit), rounding shift QuantShift,
//      then for EltWise the fp_cast rounding shift (10 add/sub/mult, 16 sig/tanh),
//      clamp [-128, 127]; QuantEn = 0 passes the int32 through
//   -> activation (ActEn): ReLU, Clip (0..ActParam), LeakyReLU ((alpha * x) >> 8)
//   -> global average pool (GblPoolEn): (sum * GblPoolScale + 2^(shift-1)) >> shift over all P.

struct TailConfig {
  bool bias_en = false;
  int bias_width = 32;
  std::uint32_t bias_start = 0, bias_end = 0;
  bool quant_en = false;
  std::int32_t quant_scale = 0;  // sign-extended 16-bit
  int quant_shift = 0;
  bool act_en = false;
  int act_type = 0;
  std::int32_t act_param = 0;  // unsigned 8-bit
  std::int32_t neg_alpha = 0, pos_alpha = 0;
  bool gbl_pool_en = false;
  std::int64_t gbl_pool_scale = 0;
  int gbl_pool_shift = 0;

  static TailConfig from(const isa::Instruction* tail);  // nullptr: everything disabled
};

class TailPipeline;
namespace detail {
// TailPipeline::write_output's work on words [first, end) of the layout: `out` holds their bytes
// (32 * width per word), `accumulants` (or null) their 128 bytes each of big-endian int32.
struct TailWords {
  const TailPipeline* tail = nullptr;
  const std::int32_t* acc = nullptr;  // planar [channels][pixels]
  std::uint64_t channels = 0, pixels = 0, padded_pixels = 0, channel_group = 8, pixels_per_word = 4;
  int width = 1;  // OpWidth
  // The cases with a vector path (chosen from the configuration once per layer): kQuantize is
  // quantize_span's (QuantEn, ActEn off / ReLU / Clip, QuantShift + fp_cast <= 62), kBias the
  // int32 pass-through with the bias add alone; kOther runs apply() value by value.
  enum class Kind { kQuantize, kBias, kOther } kind = Kind::kOther;
  const std::int32_t* bias = nullptr;  // per channel, null without BiasEn
  // tail_rows_avx2's whole int32 words with non-temporal stores (nothing reads them soon).
  bool stream = false;
  // tail_rows_avx2 writes whole int8 words two groups at a time in AVX-512 (the level allows
  // it: tail_rows_int8_avx512).
  bool avx512 = false;
  std::int32_t scale = 0, clip = 0;
  int shift = 0, fp_cast_shift = 0, act = -1;
};
}  // namespace detail

class TailPipeline {
 public:
  // channels = real output channel count (bias entries read). fp_cast_shift: 0 for CONV/FC/...,
  // 10 for EltWise add/sub/mult, 16 for sigmoid/tanh. Validates the TailBlock fields (bias range
  // and size, ActType, QuantShift) and reads the bias, naming fields on error.
  // bias_layout kFc reads the FC bias order of gati.md 6.2 (int32 only).
  enum class BiasLayout { kConv, kFc };
  TailPipeline(const LayerContext& ctx, std::uint64_t channels, int fp_cast_shift = 0,
               BiasLayout bias_layout = BiasLayout::kConv);
  // The bias vector's storage goes back to per-thread spares, which the next pipelines on this
  // thread take (no allocation per layer once they have grown).
  ~TailPipeline();
  TailPipeline(const TailPipeline&) = delete;
  TailPipeline& operator=(const TailPipeline&) = delete;

  const TailConfig& config() const { return cfg_; }
  bool global_pool() const { return cfg_.gbl_pool_en; }
  // P values in, P values out (or 1 with global pool).
  std::uint64_t output_pixels(std::uint64_t pixels) const { return cfg_.gbl_pool_en ? 1 : pixels; }

  // Bias, quantizer and activation for one value of channel k.
  std::int32_t apply(std::int32_t acc, std::uint64_t channel) const;
  // A whole channel: acc has P values; out gets output_pixels(P) values. The configuration is
  // resolved once per call, not per value: ReLU / Clip / none after the quantizer run as
  // quantize_span, the int32 pass-through as bias_span, LeakyReLU and QuantEn = 0 with an
  // activation value by value.
  void run_channel(std::uint64_t channel, std::span<const std::int32_t> acc,
                   std::span<std::int32_t> out) const;

  // The tail and the OutputBlock write-back in one pass (issue 13), no global pool: every value
  // of `layout` is acc[c * P + p] (planar [C][P] int32), plus, when accumulant_addr is given, the
  // big-endian int32 at the same element of the OpWidth-4 layout there (AccumulantReadFirst,
  // 32-bit wrap), through apply(), written as write_activation_output writes it (same checks,
  // same bytes: zeros in every padding byte). The caller has checked the accumulant range and
  // that it does not overlap the output region. Returns the bytes written.
  std::uint64_t write_output(LayerContext& ctx, const ActivationLayout& layout,
                             const std::int32_t* acc, const std::uint64_t* accumulant_addr,
                             Isa isa = Isa::kAuto) const;

  // The same write for a producer that hands its sums over as pixel rows, in pieces, from
  // several threads: the CONV block's GEMM work units (conv_kernels::dense_conv_rows), whose rows
  // hold 8-channel blocks of one pixel, the lanes of the tail's per-channel parameters (issue 13:
  // no planar acc, no transpose). row_writer checks the OutputBlock as write_output does and
  // resolves the output (and accumulant) DRAM pages once, on the calling thread (stamping every
  // output page written, Dram::write_pages); ready() says whether the fused path covers the
  // layer: the AVX2 level, the 9,8,8 layout, a vector tail kind (write_output's kQuantize, or
  // kBias with OpWidth 4), and words that do not straddle pages (OutputAddr a multiple of 32 *
  // OpWidth, AccumulantAddr of 128). When it is false nothing has been touched: use
  // write_output. Its page tables: see RowWriterPages.
  class RowWriter {
   public:
    bool ready() const { return ready_; }
    // Writes every byte of the words of pixels [p0, p0 + n) and channels [k0, k0 + k_count):
    // y[i * stride + k - k0] is the sum for pixel p0 + i and channel k. p0 must be a multiple of
    // 4 and k0 of 8, and p0 + n and k0 + k_count multiples of 4 and 8 or the layout's ends, so
    // the pieces of concurrent calls share no word. Returns nothing; the bytes total is
    // bytes().
    void write(const std::int32_t* y, std::uint64_t stride, std::uint64_t p0, std::uint64_t n,
               std::uint64_t k0, std::uint64_t k_count) const;
    std::uint64_t bytes() const { return bytes_; }

    // For unit chains (device/conv.cpp). Whether the tail is the bias add alone (int32 partial
    // sums out: QuantEn 0, ActEn 0, OpWidth 4), so each output value is its sum plus its
    // channel's bias (32-bit wrap); that bias (null without BiasEn); whether accumulants are read.
    bool adds_bias_alone() const { return words_.kind == detail::TailWords::Kind::kBias; }
    const std::int32_t* bias() const { return words_.bias; }
    bool reads_accumulants() const { return accumulant_pages_ != nullptr; }
    // Takes the accumulants as already in the sums handed to write(): the previous piece's sums,
    // carried in the work unit's tile. `bias` (per channel, null for none) replaces the tail's:
    // the previous piece's bias plus this one's. No accumulant is read from then on.
    void carry_accumulants(const std::int32_t* bias) {
      accumulant_pages_ = nullptr;
      words_.bias = bias;
    }
    // Output bytes per word (32 * OpWidth).
    std::uint64_t word_bytes() const { return 32 * static_cast<std::uint64_t>(words_.width); }
    // Whether int32 words are written past the cache (a chain's partial sums that no piece of
    // it reads back: going through the cache would read each line in first, for nothing).
    void stream_output(bool stream) { words_.stream = stream; }
    // Leaves the output words in bytes [begin, end) of the region (multiples of word_bytes())
    // unwritten: a later piece of the chain overwrites them before anything reads them.
    void leave_unwritten(std::uint64_t begin, std::uint64_t end) {
      skip_begin_ = begin / word_bytes(), skip_end_ = end / word_bytes();
    }
    // The bytes left unwritten, [begin, end) of the region (begin == end: none).
    std::pair<std::uint64_t, std::uint64_t> unwritten() const {
      return {skip_begin_ * word_bytes(), skip_end_ * word_bytes()};
    }

   private:
    friend class TailPipeline;
    bool ready_ = false;
    std::uint64_t bytes_ = 0;
    detail::TailWords words_;
    std::uint8_t* const* out_pages_ = nullptr;
    const std::uint8_t* const* accumulant_pages_ = nullptr;
    std::uint64_t out_start_ = 0, accumulant_start_ = 0;  // the regions' offsets in their page 0
    std::uint64_t skip_begin_ = 0, skip_end_ = 0;         // words left unwritten
  };
  // A writer's page tables: per-thread storage by default, so one writer per thread at a time;
  // a writer used after the next one is made (a deferred conv's, conv.cpp) brings its own.
  struct RowWriterPages {
    std::vector<std::uint8_t*> out;
    std::vector<const std::uint8_t*> accumulant;
  };
  RowWriter row_writer(LayerContext& ctx, const ActivationLayout& layout,
                       const std::uint64_t* accumulant_addr, Isa isa = Isa::kAuto,
                       RowWriterPages* pages = nullptr) const;

 private:
  // Bias, quantizer and activation of a whole channel (no global pool): out.size() == acc.size().
  void values(std::uint64_t channel, std::span<const std::int32_t> acc,
              std::span<std::int32_t> out) const;
  static std::vector<std::vector<std::int32_t>>& spare_biases();
  // write_output's TailWords for a layout written with OpWidth `width` (kind, parameters).
  detail::TailWords words(const ActivationLayout& layout, int width) const;
  TailConfig cfg_;
  int fp_cast_shift_;
  std::vector<std::int32_t> bias_;
};

// The quantizer alone (DECISIONS.md 4), exposed for blocks and tests.
std::int32_t quantize(std::int32_t acc, std::int32_t scale, int shift, int fp_cast_shift);
// Rounding arithmetic right shift: shift ? (v + 2^(shift-1)) >> shift : v.
std::int64_t round_shift(std::int64_t v, int shift);

// The tail's common case on n values of one channel, apply()'s arithmetic exactly: v = acc +
// bias (32-bit wrap), quantize(v, scale, shift, fp_cast_shift), then act -1 none, 0 ReLU, 1 Clip
// to 0..clip (clip >= 0). Paths (common/cpu.h): scalar, and AVX2 for shift + fp_cast_shift <= 62
// (the two rounding shifts fold into one, see block_avx2.cpp).
void quantize_span(const std::int32_t* acc, std::int32_t* out, std::uint64_t n, std::int32_t bias,
                   std::int32_t scale, int shift, int fp_cast_shift, int act, std::int32_t clip,
                   Isa isa = Isa::kAuto);
// The tail with QuantEn = 0 and ActEn = 0 (int32 partial sums, OpWidth 4): out = acc + bias with
// the 32-bit wrap. out may equal acc. Paths: scalar, AVX2.
void bias_span(const std::int32_t* acc, std::int32_t* out, std::uint64_t n, std::int32_t bias,
               Isa isa = Isa::kAuto);
namespace detail {
void quantize_span_avx2(const std::int32_t* acc, std::int32_t* out, std::uint64_t n,
                        std::int32_t bias, std::int32_t scale, int shift, int fp_cast_shift,
                        int act, std::int32_t clip);
void bias_span_avx2(const std::int32_t* acc, std::int32_t* out, std::uint64_t n, std::int32_t bias);

// One word (channels [c0, c0 + cn), pixels [p0, p0 + n)); padding bytes are left alone.
void tail_word_scalar(const TailWords& t, std::uint64_t c0, std::uint64_t cn, std::uint64_t p0,
                      std::uint64_t n, std::uint8_t* out, const std::uint8_t* accumulants);
// Words [first, end) of the 9,8,8 layout (channel_group 8, pixels_per_word 4), kind kQuantize or
// kBias: whole words 8 values at a time, the others through tail_word_scalar.
void tail_words_avx2(const TailWords& t, std::uint64_t first, std::uint64_t end, std::uint8_t* out,
                     const std::uint8_t* accumulants);
// TailPipeline::RowWriter::write's work at the AVX2 level (its contract): y rows of 8-channel
// blocks to whole words, the word at byte offset o of the output region at out_pages[(out_start
// + o) / Dram::kPageBytes] + (out_start + o) % Dram::kPageBytes, its accumulants likewise (null
// accumulant_pages: none).
void tail_rows_avx2(const TailWords& t, const std::int32_t* y, std::uint64_t stride,
                    std::uint64_t p0, std::uint64_t n, std::uint64_t k0, std::uint64_t k_count,
                    std::uint8_t* const* out_pages, std::uint64_t out_start,
                    const std::uint8_t* const* accumulant_pages, std::uint64_t accumulant_start);
// The address of byte `offset` of a region that starts `start` bytes into pages[0] (one
// Dram::kPageBytes piece each, as the row writer's page tables hold them).
template <typename Byte>
Byte* region_byte(Byte* const* pages, std::uint64_t start, std::uint64_t offset) {
  const std::uint64_t a = start + offset;
  return pages[a / Dram::kPageBytes] + a % Dram::kPageBytes;
}
// The same for the `bytes` from `offset` when they lie on one page (one lookup for a run of
// words), else null.
template <typename Byte>
Byte* run_on_one_page(Byte* const* pages, std::uint64_t start, std::uint64_t offset,
                      std::uint64_t bytes) {
  const std::uint64_t first = start + offset;
  return bytes > 0 && first / Dram::kPageBytes == (first + bytes - 1) / Dram::kPageBytes
             ? pages[first / Dram::kPageBytes] + first % Dram::kPageBytes
             : nullptr;
}
// Its AVX-512 part: the int8 words (kQuantize, OpWidth 1, no accumulants, the quantizer's narrow
// form) of channels [k0, k0 + c) and pixels [p0, p0 + n / 4 * 4), c the largest multiple of 16
// inside both k_count and the output's channels. Returns c: 0 when it wrote nothing (not that
// case, or too few channels or pixels).
std::uint64_t tail_rows_int8_avx512(const TailWords& t, const std::int32_t* y, std::uint64_t stride,
                                    std::uint64_t p0, std::uint64_t n, std::uint64_t k0,
                                    std::uint64_t k_count, std::uint8_t* const* out_pages,
                                    std::uint64_t out_start);
}  // namespace detail

// ---------------------------------------------------------------------------------------------
// OutputBlock write-back.

struct OutputConfig {
  std::uint32_t output_addr = 0;
  std::uint32_t accumulant_addr = 0;
  bool accumulant_read_first = false;
  std::uint32_t channel_itr = 0, kernel_itr = 0;
  std::uint32_t image_dim_output = 0, image_dim_acc = 0;
  bool acc_en = false, on_chip_acc = false;
  bool dispatch_en = false;
  std::uint32_t dispatch_id = 0;
  std::uint32_t oh = 0, ow = 0;
  bool flat = false;
  int op_width = 1;

  static OutputConfig from(const isa::Instruction& output_block);
};

// The OutputBlock of an activation-layout write, checked as write_activation_output checks it
// (OpWidth, FlatController 0, ImageDimOutput == P', KernelItr * N_SA covering C', the region in
// DRAM), for a block that writes its output words itself.
OutputConfig checked_output(const LayerContext& ctx, const ActivationLayout& layout);
// Writes planar [C][P] values into the 6.1 layout at OutputAddr: OpWidth 1 writes the low byte
// (the quantizer has already clamped), OpWidth 4 a big-endian int32; every padding byte is 0.
// Checks that ImageDimOutput == P' and KernelItr * N_SA covers C' (naming the field).
// Returns the bytes written.
std::uint64_t write_activation_output(LayerContext& ctx, const ActivationLayout& layout,
                                      std::span<const std::int32_t> planar);
// FlatController = 1: writes `bytes` at OutputAddr, zero-padded to a multiple of 32; checks
// ImageDimOutput == that size. Returns the bytes written.
std::uint64_t write_flat_output(LayerContext& ctx, ByteSpan bytes);
// The dispatcher's payload size for this OutputBlock (gati.md 3.2): FlatController ?
// ImageDimOutput : ImageDimOutput * KernelItr * N_SA * OpWidth.
std::uint64_t dispatch_size(const isa::SaArch& arch, const OutputConfig& out);

}  // namespace npukit::device
