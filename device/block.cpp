#include "device/block.h"

#include "device/conv_kernels.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace npukit::device {

using isa::Field;

// ---------------------------------------------------------------------------------------------
// Diagnostics

std::string_view erratum_name(Erratum e) {
  switch (e) {
    case Erratum::kTallImageHang:
      return "E1 tall-image conv hang (regular 3x3 stride-1 conv with IH >= 1.5*IW never finishes)";
    case Erratum::kHang48x40:
      return "E2 48x40 conv hang (a 48-high, 40-wide input never finishes)";
    case Erratum::kPoolFirstNeedsTail:
      return "E3 first-layer POOL hang (a POOL first layer needs a TailBlock)";
    case Erratum::kConvPoolPool:
      return "E4 conv->pool->pool (hangs on 9,4,4, corrupts bytes on 9,8,8)";
    case Erratum::kOddKernelItr9x4x4:
      return "E5 9,4,4 conv after odd KernelItr (wrong output)";
    case Erratum::kIncomplete16x1x16:
      return "E6 incomplete 16,1,16 (chained and depthwise programs mismatch)";
    case Erratum::kConcatNoLayerDone:
      return "E7 CONCAT never completes (no layer_done: later layers and its dispatch never run)";
    case Erratum::kConcatPixelPadding:
      return "E8 CONCAT pixel padding (H*W not a multiple of 32/N_SA: inputs shift, data lost)";
    case Erratum::kPoolAverage:
      return "E9 POOL average (the mega pool adds with 8-bit wrap-around, no PoolScale)";
    case Erratum::kPoolGlobalAverage:
      return "E10 POOL global average (the POOL megablock writes all zeros)";
    case Erratum::kGblPoolTail:
      return "E11 TailBlock global pool (unsigned PoolScale product, no clamp to int8)";
    case Erratum::kResizePaddingPixel:
      return "E12 RESIZE padding pixel (output H*W not a multiple of 32/N_SA: the first padding "
             "pixel of each channel is written non-zero)";
  }
  return "unknown erratum";
}

std::string Warning::text() const {
  std::string s = layer > 0 ? fmt::format("layer {}: ", layer) : std::string();
  if (!erratum.empty())
    s += fmt::format(
        "v1.0.0 erratum {}: the real board would misbehave here; the model computes "
        "the intended result. ",
        erratum);
  return s + message;
}

void Diagnostics::add(Warning w) {
  if (sink_) *sink_ << "warning: " << w.text() << "\n";
  warnings_.push_back(std::move(w));
}

void Diagnostics::erratum(int layer, Erratum e, std::string message) {
  add({layer, std::string(erratum_name(e)), std::move(message)});
}

void Diagnostics::warn(int layer, std::string message) {
  add({layer, std::string(), std::move(message)});
}

bool Diagnostics::has_erratum(Erratum e) const {
  const std::string_view n = erratum_name(e);
  return std::any_of(warnings_.begin(), warnings_.end(),
                     [&](const Warning& w) { return w.erratum == n; });
}

// ---------------------------------------------------------------------------------------------
// Timing

BlockTiming streaming_timing(std::uint64_t compute_cycles, std::uint64_t read_bytes,
                             std::uint64_t write_bytes, std::uint64_t macs) {
  BlockTiming t;
  t.compute_cycles = compute_cycles;
  t.dram_read_bytes = read_bytes;
  t.dram_write_bytes = write_bytes;
  t.dram_cycles = dram_beats(read_bytes) + dram_beats(write_bytes) + kDramReadLatencyCycles;
  t.macs = macs;
  t.cycles = kLayerStartCycles + std::max(t.compute_cycles, t.dram_cycles);
  return t;
}

// ---------------------------------------------------------------------------------------------
// LayerContext

std::string LayerContext::where() const {
  return fmt::format("layer {} (instruction {} {})", layer_number, mega_index,
                     isa::name(mega.opcode()));
}

std::string LayerContext::field_name(Field field) const {
  const isa::Opcode op = isa::info(field).opcode;
  int index = mega_index;
  if (op == isa::Opcode::OutputBlock) index = output_index;
  if (op == isa::Opcode::TailBlock) index = tail_index;
  return fmt::format("layer {}, instruction {} {}", layer_number, index,
                     isa::qualified_name(field));
}

const isa::Instruction& LayerContext::require_output() const {
  if (!output)
    fail(
        "{}: the group has no OutputBlock before its START, so the megablock's output has "
        "nowhere to go (the board would never finish the layer); add an OutputBlock",
        where());
  return *output;
}

void LayerContext::check_dram_range(Field field, std::uint64_t addr, std::uint64_t bytes) const {
  if (addr > dram.size() || bytes > dram.size() - addr)
    fail_field(field, "DRAM range [0x{:x}, 0x{:x}) is outside the {} bytes of DRAM", addr,
               addr + bytes, dram.size());
}

// ---------------------------------------------------------------------------------------------
// Activation layout

ActivationLayout ActivationLayout::for_arch(const isa::SaArch& arch, std::uint64_t channels,
                                            std::uint64_t pixels) {
  ActivationLayout l;
  l.channels = channels;
  l.pixels = pixels;
  l.channel_group = static_cast<std::uint64_t>(arch.n_sa);
  l.pixels_per_word = static_cast<std::uint64_t>(arch.pixels_per_word());
  return l;
}

#if defined(__SSE2__)
// The byte order of each of four 32-bit lanes reversed (big-endian <-> host), SSE2 only: bytes
// swapped within 16-bit halves, then the halves swapped.
static __m128i bswap32x4(__m128i x) {
  x = _mm_or_si128(_mm_slli_epi16(x, 8), _mm_srli_epi16(x, 8));
  x = _mm_shufflelo_epi16(x, _MM_SHUFFLE(2, 3, 0, 1));
  return _mm_shufflehi_epi16(x, _MM_SHUFFLE(2, 3, 0, 1));
}
#endif

// Whether for_each_word's n is a whole word of 4 pixels (a compile-time 4).
template <typename T>
constexpr bool is_whole_word_of_4 = false;
template <>
constexpr bool is_whole_word_of_4<std::integral_constant<std::uint64_t, 4>> = true;

// Walks words [first, end) of the 6.1 layout (in address order: word w starts at element 32 * w)
// and calls f(c0, cn, p0, word, dk, n) for each, which holds pixels [p0, p0 + n) of channels [c0,
// c0 + cn): channel c0 + j's pixel p0 + i is element word + j * dk + i (n = dk but at the end of a
// channel group). For the pixel counts of the three arrays (dk 2, 4, 8) dk, and n in whole words,
// are compile-time constants, so the copy loops unroll. Callers keep their pointers in locals: a
// thread_local buffer used inside the loop has its address reloaded on every element.
template <typename F>
void for_each_word(std::uint64_t channels, std::uint64_t pixels, std::uint64_t cd, std::uint64_t dk,
                   std::uint64_t pp, std::uint64_t first, std::uint64_t end, F&& f) {
  auto run = [&](auto dk_const) {
    const std::uint64_t per_group = pp / dk_const;  // words per channel group
    std::uint64_t c0 = first / per_group * cd, w = first % per_group;
    for (std::uint64_t word = first; word < end; ++word) {
      const std::uint64_t cn = std::min(cd, channels - c0), p0 = w * dk_const;
      if (p0 + dk_const <= pixels)
        f(c0, cn, p0, word * 32, dk_const, dk_const);
      else
        f(c0, cn, p0, word * 32, dk_const, pixels - p0);
      if (++w == per_group) w = 0, c0 += cd;
    }
  };
  switch (dk) {
    case 2:
      return run(std::integral_constant<std::uint64_t, 2>{});
    case 4:
      return run(std::integral_constant<std::uint64_t, 4>{});
    case 8:
      return run(std::integral_constant<std::uint64_t, 8>{});
    default:
      return run(dk);
  }
}

// A layout of `bytes` bytes (whole words of word_bytes = 32 elements) at addr, read in place
// (Dram::read_pages: no staging copy) when its words do not straddle pages (addr a multiple of
// word_bytes; pages are 64 KiB), else through a per-thread staging buffer: f(first, end, data)
// for runs of words [first, end) whose bytes start at data.
template <typename F>
void read_words(const Dram& dram, std::uint64_t addr, std::uint64_t bytes, std::uint64_t word_bytes,
                std::string_view who, F&& f) {
  static constexpr std::array<std::uint8_t, Dram::kPageBytes> kZeros{};
  if (addr % word_bytes == 0 && Dram::kPageBytes % word_bytes == 0) {
    dram.read_pages(addr, bytes, who,
                    [&](std::uint64_t done, const std::uint8_t* data, std::uint64_t n) {
                      f(done / word_bytes, (done + n) / word_bytes, data ? data : kZeros.data());
                    });
    return;
  }
  thread_local Bytes raw;  // kept between layers and images: no per-call allocation
  raw.resize(bytes);
  dram.read(addr, raw, who);
  f(0, bytes / word_bytes, raw.data());
}

// The same for writing a layout: f must write every byte of its words (padding included).
template <typename F>
void write_words(Dram& dram, std::uint64_t addr, std::uint64_t bytes, std::uint64_t word_bytes,
                 std::string_view who, F&& f) {
  if (addr % word_bytes == 0 && Dram::kPageBytes % word_bytes == 0) {
    dram.write_pages(addr, bytes, who,
                     [&](std::uint64_t done, std::uint8_t* data, std::uint64_t n) {
                       f(done / word_bytes, (done + n) / word_bytes, data);
                     });
    return;
  }
  thread_local Bytes raw;
  raw.resize(bytes);
  f(0, bytes / word_bytes, raw.data());
  dram.write(addr, raw, who);
}

std::vector<std::int8_t> read_activation(const LayerContext& ctx, Field addr_field,
                                         std::uint64_t addr, const ActivationLayout& layout) {
  std::vector<std::int8_t> planar;
  read_activation(ctx, addr_field, addr, layout, planar);
  return planar;
}

void read_activation(const LayerContext& ctx, Field addr_field, std::uint64_t addr,
                     const ActivationLayout& layout, std::vector<std::int8_t>& planar) {
  ctx.check_dram_range(addr_field, addr, layout.bytes());  // before the resize
  planar.resize(layout.channels * layout.pixels);
  read_activation(ctx, addr_field, addr, layout, planar.data());
}

void read_activation(const LayerContext& ctx, Field addr_field, std::uint64_t addr,
                     const ActivationLayout& layout, std::int8_t* planar) {
  ctx.check_dram_range(addr_field, addr, layout.bytes());
  // Read in place from the DRAM pages (read_words), and the range was checked above with the
  // field's name, so no per-call allocation or message formatting (issue 13).
  const std::uint64_t cd = layout.channel_group, dk = layout.pixels_per_word;
  const std::uint64_t pp = layout.padded_pixels(), pixels = layout.pixels;
  std::int8_t* dst = planar;
  // Pixel p is byte p % dk of word p / dk: dk consecutive pixels per word.
  read_words(ctx.dram, addr, layout.bytes(), 32, "activation read",
             [&](std::uint64_t first, std::uint64_t end, const std::uint8_t* data) {
               const std::uint64_t base = first * 32;
               for_each_word(layout.channels, pixels, cd, dk, pp, first, end,
                             [=](std::uint64_t c0, std::uint64_t cn, std::uint64_t p0,
                                 std::uint64_t word, auto dkc, auto n) {
                               // Byte stores may alias the closure: work on locals, and
                               // move each channel's n bytes with one memcpy.
                               const std::uint8_t* w = data + (word - base);
                               std::int8_t* out = dst + c0 * pixels + p0;
                               const std::uint64_t stride = pixels;
                               for (std::uint64_t j = 0; j < cn; ++j)
                                 std::memcpy(out + j * stride, w + j * dkc, n);
                             });
             });
}

void read_activation_planes(const LayerContext& ctx, Field addr_field, std::uint64_t addr,
                            const ActivationLayout& layout, std::uint64_t width, std::int64_t top,
                            std::uint64_t left, std::uint64_t plane_h, std::uint64_t plane_w,
                            std::int8_t* planes) {
  ctx.check_dram_range(addr_field, addr, layout.bytes());
  const std::uint64_t pixels = layout.pixels;
  if (width == 0 || pixels % width || left + width > plane_w || pixels / width > (1ull << 32))
    fail("{}: internal error: {} pixels in rows of {} into {}-wide planes from column {}",
         ctx.where(), pixels, width, plane_w, left);
  const std::uint64_t height = pixels / width, plane = plane_h * plane_w;
  // Zeros where no pixel lands: the rows outside the image, and each image row's left and right
  // (none at all for a plane of image rows only, a global pool's pieces: 2048 channels of 7).
  const std::uint64_t right = plane_w - left - width;
  for (std::uint64_t r = 0; r < plane_h; ++r) {
    const std::int64_t y = static_cast<std::int64_t>(r) - top;
    const bool outside = y < 0 || y >= static_cast<std::int64_t>(height);
    if (!outside && left == 0 && right == 0) continue;
    for (std::uint64_t c = 0; c < layout.channels; ++c) {
      std::int8_t* row = planes + c * plane + r * plane_w;
      if (outside) {
        std::memset(row, 0, plane_w);
      } else {
        std::memset(row, 0, left);
        std::memset(row + left + width, 0, right);
      }
    }
  }
  const std::uint64_t cd = layout.channel_group, dk = layout.pixels_per_word;
  const std::uint64_t pp = layout.padded_pixels();
  const auto w32 = static_cast<std::uint32_t>(width);
  const std::int64_t rows = static_cast<std::int64_t>(plane_h);
  std::int8_t* const dst = planes + left;   // column 0 of the image in plane 0's row 0
  const std::uint64_t per_group = pp / dk;  // words per channel group
  // Copies words [first, end) (their bytes from data) into the planes.
  const auto copy_words = [&](std::uint64_t first, std::uint64_t end, const std::uint8_t* data) {
    const std::uint64_t base = first * 32;
    auto word_by_word = [&](std::uint64_t from, std::uint64_t to) {
      if (from < to)
        for_each_word(layout.channels, pixels, cd, dk, pp, from, to,
                      [=](std::uint64_t c0, std::uint64_t cn, std::uint64_t p0, std::uint64_t word,
                          auto dkc, auto n) {
                        // Byte stores may alias the closure: locals only (as read_activation).
                        const std::uint8_t* w = data + (word - base);
                        const auto p32 = static_cast<std::uint32_t>(p0);
                        std::uint64_t x = p32 % w32;
                        std::int64_t r = static_cast<std::int64_t>(p32 / w32) + top;
                        std::int8_t* out = dst + c0 * plane;
                        // A word wholly in rows the planes leave out (a split kernel's
                        // piece reads a band of rows): nothing to copy.
                        const std::int64_t r_last =
                            static_cast<std::int64_t>((p32 + n - 1) / w32) + top;
                        if (r_last < 0 || r >= rows) return;
                        if (x + n <= width) {  // the word's pixels in one image row
                          out += static_cast<std::uint64_t>(r) * plane_w + x;
                          for (std::uint64_t j = 0; j < cn; ++j)
                            std::memcpy(out + j * plane, w + j * dkc, n);
                          return;
                        }
                        for (std::uint64_t i = 0; i < n; ++i, ++x) {
                          if (x == width) x = 0, ++r;
                          if (r < 0 || r >= rows) continue;
                          std::int8_t* o = out + static_cast<std::uint64_t>(r) * plane_w + x;
                          for (std::uint64_t j = 0; j < cn; ++j)
                            o[j * plane] = static_cast<std::int8_t>(w[j * dkc + i]);
                        }
                      });
    };
#if defined(__SSE2__)
    // The 9,8,8 layout: 4 words of a channel group are 16 pixels of 8 channels, a 4 x 8
    // transpose of 32-bit elements (each a channel's 4 pixels) into 16 bytes per channel,
    // where the 16 pixels lie in one image row; other words go one by one.
    if (cd == 8 && dk == 4 && layout.channels % 8 == 0) {
      std::uint64_t from = first;
      for (std::uint64_t word = first; word + 4 <= end;) {
        const std::uint64_t pw = word % per_group, p0 = pw * 4;
        const auto p32 = static_cast<std::uint32_t>(p0);
        const std::uint64_t x = p32 % w32;
        if (pw + 4 > per_group || p0 + 16 > pixels || x + 16 > width) {
          ++word;
          continue;
        }
        word_by_word(from, word);
        const std::int64_t r = static_cast<std::int64_t>(p32 / w32) + top;
        if (r >= 0 && r < rows) {
          const auto* v = reinterpret_cast<const __m128i*>(data + (word - first) * 32);
          std::int8_t* out =
              dst + word / per_group * 8 * plane + static_cast<std::uint64_t>(r) * plane_w + x;
          for (int h = 0; h < 2; ++h) {  // channels 0-3, then 4-7
            const __m128i a = _mm_loadu_si128(v + h), b = _mm_loadu_si128(v + 2 + h);
            const __m128i c = _mm_loadu_si128(v + 4 + h), d = _mm_loadu_si128(v + 6 + h);
            const __m128i ab0 = _mm_unpacklo_epi32(a, b), ab1 = _mm_unpackhi_epi32(a, b);
            const __m128i cd0 = _mm_unpacklo_epi32(c, d), cd1 = _mm_unpackhi_epi32(c, d);
            std::int8_t* o = out + static_cast<std::uint64_t>(4 * h) * plane;
            _mm_storeu_si128(reinterpret_cast<__m128i*>(o), _mm_unpacklo_epi64(ab0, cd0));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(o + plane), _mm_unpackhi_epi64(ab0, cd0));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 2 * plane),
                             _mm_unpacklo_epi64(ab1, cd1));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 3 * plane),
                             _mm_unpackhi_epi64(ab1, cd1));
          }
        }
        word += 4;
        from = word;
      }
      return word_by_word(from, end);
    }
#endif
    word_by_word(first, end);
  };
  // Only the words of the image rows that land in the planes, group by group, when that is not
  // all of them (a split kernel's piece reads a band of rows; a global pool's 7x1 pieces one row
  // of 7, whose whole image read cost more than the piece's multiplies).
  const std::int64_t y_begin = std::max<std::int64_t>(0, -top);
  const std::int64_t y_end = std::min<std::int64_t>(static_cast<std::int64_t>(height), rows - top);
  if (y_begin >= y_end) return;  // no image row lands: the planes are all padding
  const std::uint64_t groups = layout.padded_channels() / cd;
  const std::uint64_t w_begin = static_cast<std::uint64_t>(y_begin) * width / dk;
  const std::uint64_t w_end = (static_cast<std::uint64_t>(y_end) * width + dk - 1) / dk;
  if (w_end - w_begin == per_group)
    return read_words(ctx.dram, addr, layout.bytes(), 32, "activation read", copy_words);
  for (std::uint64_t g = 0; g < groups; ++g) {
    const std::uint64_t base = g * per_group + w_begin;
    read_words(ctx.dram, addr + base * 32, (w_end - w_begin) * 32, 32, "activation read",
               [&](std::uint64_t first, std::uint64_t end, const std::uint8_t* data) {
                 copy_words(base + first, base + end, data);
               });
  }
}

bool read_activation_words(const LayerContext& ctx, Field addr_field, std::uint64_t addr,
                           const ActivationLayout& layout, std::uint64_t width, std::int64_t top,
                           std::uint64_t left, std::vector<const std::uint8_t*>& pieces,
                           conv_kernels::ImageWords& words) {
  if (layout.channel_group != 8 || layout.pixels_per_word != 4 || addr % 32) return false;
  ctx.check_dram_range(addr_field, addr, layout.bytes());
  const std::uint64_t pixels = layout.pixels;
  if (width == 0 || pixels % width || pixels / width > (1ull << 32))
    fail("{}: internal error: {} pixels in rows of {}", ctx.where(), pixels, width);
  // Words never straddle pages (addr and the page size are multiples of 32): piece i is the
  // i-th page the image touches, from its first byte, so word w lies at word (w + skew) of it.
  static constexpr std::array<std::uint8_t, Dram::kPageBytes> kZeros{};
  const std::uint64_t in_page = addr % Dram::kPageBytes;
  pieces.clear();
  ctx.dram.read_pages(addr, layout.bytes(), "activation read",
                      [&](std::uint64_t done, const std::uint8_t* data, std::uint64_t) {
                        if (!data)
                          pieces.push_back(kZeros.data());
                        else
                          pieces.push_back(data - (done == 0 ? in_page : 0));
                      });
  words.pieces = pieces.data();
  words.piece_shift = std::countr_zero(Dram::kPageBytes / 32);
  words.skew = in_page / 32;
  words.channels = layout.padded_channels();
  words.width = width;
  words.height = pixels / width;
  words.top = top;
  words.left = left;
  return true;
}

void add_activation_int32(const LayerContext& ctx, Field addr_field, std::uint64_t addr,
                          const ActivationLayout& layout, std::span<std::int32_t> planar) {
  ctx.check_dram_range(addr_field, addr, layout.bytes() * 4);
  if (planar.size() != layout.channels * layout.pixels)
    fail("{}: {} accumulants for a {}-channel {}-pixel tensor", ctx.where(), planar.size(),
         layout.channels, layout.pixels);
  // Walked in layout order, in place: the DRAM side streams, the planar side reads one row per
  // channel of the group.
  std::int32_t* dst = planar.data();
  const std::uint64_t pixels = layout.pixels;
  read_words(ctx.dram, addr, layout.bytes() * 4, 32 * 4, "accumulant read",
             [&](std::uint64_t first, std::uint64_t end, const std::uint8_t* data) {
               const std::uint64_t base = first * 32;
               for_each_word(
                   layout.channels, pixels, layout.channel_group, layout.pixels_per_word,
                   layout.padded_pixels(), first, end,
                   [=](std::uint64_t c0, std::uint64_t cn, std::uint64_t p0, std::uint64_t word,
                       auto dkc, auto n) {
#if defined(__SSE2__)
                     // dk = 4 whole words (the 9,8,8 array): a channel's 4 big-endian
                     // int32 are 16 contiguous bytes, added as one vector (the same
                     // 32-bit wrapping adds).
                     if constexpr (is_whole_word_of_4<decltype(n)>) {
                       for (std::uint64_t j = 0; j < cn; ++j) {
                         auto* d = reinterpret_cast<__m128i*>(dst + (c0 + j) * pixels + p0);
                         const __m128i v = bswap32x4(_mm_loadu_si128(
                             reinterpret_cast<const __m128i*>(data + (word - base + j * 4) * 4)));
                         _mm_storeu_si128(d, _mm_add_epi32(_mm_loadu_si128(d), v));
                       }
                       return;
                     }
#endif
                     for (std::uint64_t j = 0; j < cn; ++j) {
                       std::int32_t* d = dst + (c0 + j) * pixels + p0;
                       const std::uint8_t* b = data + (word - base + j * dkc) * 4;
                       for (std::uint64_t i = 0; i < n; ++i)
                         d[i] = static_cast<std::int32_t>(static_cast<std::uint32_t>(d[i]) +
                                                          load_be32(b + i * 4));
                     }
                   });
             });
}

// ---------------------------------------------------------------------------------------------
// Tail pipeline

// The per-value definitions, inlined into the scalar loops below (out of line, the call cost
// more than the arithmetic).
static inline std::int64_t round_shift_inline(std::int64_t v, int shift) {
  if (shift <= 0) return v;
  return (v + (std::int64_t{1} << (shift - 1))) >> shift;
}

static std::int32_t clamp_int8(std::int64_t v) {
  return static_cast<std::int32_t>(std::clamp<std::int64_t>(v, -128, 127));
}

static inline std::int32_t quantize_inline(std::int32_t acc, std::int32_t scale, int shift,
                                           int fp_cast_shift) {
  std::int64_t q = round_shift_inline(std::int64_t{acc} * scale, shift);
  q = round_shift_inline(q, fp_cast_shift);
  return clamp_int8(q);
}

std::int64_t round_shift(std::int64_t v, int shift) { return round_shift_inline(v, shift); }

std::int32_t quantize(std::int32_t acc, std::int32_t scale, int shift, int fp_cast_shift) {
  return quantize_inline(acc, scale, shift, fp_cast_shift);
}

// 32-bit wrapping add, as the RTL's 32-bit adders do.
static std::int32_t add_wrap(std::int32_t a, std::int32_t b) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) + static_cast<std::uint32_t>(b));
}

TailConfig TailConfig::from(const isa::Instruction* tail) {
  TailConfig c;
  if (!tail) return c;
  const isa::Instruction& t = *tail;
  c.bias_en = t.get(Field::TailBlock_BiasEn) != 0;
  c.bias_width = static_cast<int>(t.get(Field::TailBlock_BiasWidth));
  c.bias_start = static_cast<std::uint32_t>(t.get(Field::TailBlock_BiasStartAddress));
  c.bias_end = static_cast<std::uint32_t>(t.get(Field::TailBlock_BiasEndAddress));
  c.quant_en = t.get(Field::TailBlock_QuantEn) != 0;
  c.quant_scale = static_cast<std::int32_t>(t.get_signed(Field::TailBlock_QuantScale));
  c.quant_shift = static_cast<int>(t.get(Field::TailBlock_QuantShift));
  c.act_en = t.get(Field::TailBlock_ActEn) != 0;
  c.act_type = static_cast<int>(t.get(Field::TailBlock_ActType));
  c.act_param = static_cast<std::int32_t>(t.get(Field::TailBlock_ActParam));
  c.neg_alpha = static_cast<std::int32_t>(t.get(Field::TailBlock_NegAlpha));
  c.pos_alpha = static_cast<std::int32_t>(t.get(Field::TailBlock_PosAlpha));
  c.gbl_pool_en = t.get(Field::TailBlock_GblPoolEn) != 0;
  c.gbl_pool_scale = static_cast<std::int64_t>(t.get(Field::TailBlock_GblPoolScale));
  c.gbl_pool_shift = static_cast<int>(t.get(Field::TailBlock_GblPoolShift));
  return c;
}

TailPipeline::TailPipeline(const LayerContext& ctx, std::uint64_t channels, int fp_cast_shift,
                           BiasLayout bias_layout)
    : cfg_(TailConfig::from(ctx.tail)), fp_cast_shift_(fp_cast_shift) {
  if (cfg_.act_en && cfg_.act_type > 2)
    ctx.fail_field(Field::TailBlock_ActType,
                   "activation type {} is not defined (0 ReLU, 1 Clip, 2 LeakyReLU)",
                   cfg_.act_type);
  if (!cfg_.bias_en) return;
  const std::uint64_t n_sa = static_cast<std::uint64_t>(ctx.arch.n_sa);
  std::uint64_t expected = 0;
  if (bias_layout == BiasLayout::kFc) {
    if (cfg_.bias_width != 32)
      ctx.fail_field(Field::TailBlock_BiasWidth,
                     "FC biases are int32: BiasWidth must be 32, not {}", cfg_.bias_width);
    expected = ceil_mod(channels, 32) * 4;
  } else if (cfg_.bias_width == 32) {
    expected = ceil_mod(ceil_mod(channels, n_sa) * 4, 32);
  } else if (cfg_.bias_width == 8) {
    expected = ceil_mod(ceil_mod(channels, n_sa), 32);
  } else {
    ctx.fail_field(Field::TailBlock_BiasWidth, "bias width {} is not supported (8 or 32)",
                   cfg_.bias_width);
  }
  if (cfg_.bias_end < cfg_.bias_start || cfg_.bias_end - cfg_.bias_start != expected)
    ctx.fail_field(Field::TailBlock_BiasEndAddress,
                   "bias region [0x{:x}, 0x{:x}) holds {} bytes but {} output channels need {} "
                   "(end is exclusive: BiasEnd = BiasStart + {})",
                   cfg_.bias_start, cfg_.bias_end,
                   static_cast<std::int64_t>(cfg_.bias_end) - cfg_.bias_start, channels, expected,
                   expected);
  ctx.check_dram_range(Field::TailBlock_BiasStartAddress, cfg_.bias_start, expected);
  thread_local Bytes raw;  // staged like read_activation's bytes
  raw.resize(expected);
  ctx.dram.read(cfg_.bias_start, raw, "bias read");  // range checked above
  std::vector<std::vector<std::int32_t>>& spares = spare_biases();
  if (!spares.empty()) {
    bias_ = std::move(spares.back());
    spares.pop_back();
  }
  bias_.resize(channels);
  for (std::uint64_t k = 0; k < channels; ++k) {
    if (bias_layout == BiasLayout::kFc) {
      // gati.md 6.2: in each group of 32, position j*N_SA + s holds bias[i*32 + s*(32/N_SA) + j].
      const std::uint64_t group = k / 32, in_group = k % 32, dk = 32 / n_sa;
      const std::uint64_t s = in_group / dk, j = in_group % dk;
      bias_[k] = static_cast<std::int32_t>(load_be32(&raw[(group * 32 + j * n_sa + s) * 4]));
    } else if (cfg_.bias_width == 32) {
      bias_[k] = static_cast<std::int32_t>(load_be32(&raw[k * 4]));
    } else {
      bias_[k] = static_cast<std::int8_t>(raw[k]);
    }
  }
}

std::vector<std::vector<std::int32_t>>& TailPipeline::spare_biases() {
  thread_local std::vector<std::vector<std::int32_t>> spares;
  return spares;
}

TailPipeline::~TailPipeline() {
  // Several pipelines may be alive on a thread at once (a unit chain's pieces, conv.cpp): each
  // storage goes back, up to a few.
  constexpr std::size_t kMaxSpares = 8;
  std::vector<std::vector<std::int32_t>>& spares = spare_biases();
  if (bias_.capacity() > 0 && spares.size() < kMaxSpares) spares.push_back(std::move(bias_));
}

std::int32_t TailPipeline::apply(std::int32_t acc, std::uint64_t channel) const {
  std::int32_t v = acc;
  if (cfg_.bias_en) v = add_wrap(v, bias_[channel]);
  if (cfg_.quant_en) v = quantize_inline(v, cfg_.quant_scale, cfg_.quant_shift, fp_cast_shift_);
  if (cfg_.act_en) {
    switch (cfg_.act_type) {
      case 0:  // ReLU
        v = std::max(v, 0);
        break;
      case 1:  // Clip: 0 .. ActParam (unsigned compare against the 8-bit bound)
        v = std::clamp(v, 0, cfg_.act_param);
        break;
      default: {  // LeakyReLU: ((0 || alpha) * x) >>> 8, alpha by the sign of x
        // Slopes above 1.0 (alpha > 256) can leave int8; the int8 lane saturates.
        const std::int64_t alpha = v < 0 ? cfg_.neg_alpha : cfg_.pos_alpha;
        const std::int64_t y = (alpha * v) >> 8;
        v = cfg_.quant_en ? clamp_int8(y) : static_cast<std::int32_t>(y);
        break;
      }
    }
  }
  return v;
}

void quantize_span(const std::int32_t* acc, std::int32_t* out, std::uint64_t n, std::int32_t bias,
                   std::int32_t scale, int shift, int fp_cast_shift, int act, std::int32_t clip,
                   Isa isa) {
  if (shift >= 0 && fp_cast_shift >= 0 && shift + fp_cast_shift <= 62 &&
      cpu::path_allowed(cpu::resolve(isa, "quantize_span"), Isa::kAvx2))
    return detail::quantize_span_avx2(acc, out, n, bias, scale, shift, fp_cast_shift, act, clip);
  // One loop per activation, so the loop body has no branch on the configuration.
  auto run = [&](auto activate) {
    for (std::uint64_t i = 0; i < n; ++i)
      out[i] = activate(quantize_inline(add_wrap(acc[i], bias), scale, shift, fp_cast_shift));
  };
  if (act == 0)
    run([](std::int32_t v) { return std::max(v, 0); });
  else if (act == 1)
    run([clip](std::int32_t v) { return std::clamp(v, 0, clip); });
  else
    run([](std::int32_t v) { return v; });
}

void bias_span(const std::int32_t* acc, std::int32_t* out, std::uint64_t n, std::int32_t bias,
               Isa isa) {
  if (cpu::path_allowed(cpu::resolve(isa, "bias_span"), Isa::kAvx2))
    return detail::bias_span_avx2(acc, out, n, bias);
  for (std::uint64_t i = 0; i < n; ++i) out[i] = add_wrap(acc[i], bias);
}

void TailPipeline::values(std::uint64_t channel, std::span<const std::int32_t> acc,
                          std::span<std::int32_t> out) const {
  const int act = !cfg_.act_en ? -1 : cfg_.act_type;
  const std::int32_t bias = cfg_.bias_en ? bias_[channel] : 0;
  if (cfg_.quant_en && act <= 1 && cfg_.act_param >= 0)
    return quantize_span(acc.data(), out.data(), acc.size(), bias, cfg_.quant_scale,
                         cfg_.quant_shift, fp_cast_shift_, act, cfg_.act_param);
  if (act == -1)  // int32 pass-through (kernel-split partial sums, OpWidth 4): the bias add alone
    return bias_span(acc.data(), out.data(), acc.size(), bias);
  // LeakyReLU, or an activation on unquantized int32 values: apply() value by value.
  for (std::size_t p = 0; p < acc.size(); ++p) out[p] = apply(acc[p], channel);
}

void TailPipeline::run_channel(std::uint64_t channel, std::span<const std::int32_t> acc,
                               std::span<std::int32_t> out) const {
  if (!cfg_.gbl_pool_en) return values(channel, acc, out.first(acc.size()));
  thread_local std::vector<std::int32_t> scratch;  // kept between calls: no allocation per call
  scratch.resize(acc.size());
  values(channel, acc, scratch);
  std::int64_t sum = 0;  // <= 2^20 pixels of int32: no overflow
  for (std::int32_t v : scratch) sum += v;
  // sum * 16-bit scale can exceed 64 bits only for int32 (QuantEn = 0) inputs; saturate there.
  const __int128 product = static_cast<__int128>(sum) * cfg_.gbl_pool_scale;
  const __int128 limit = static_cast<__int128>(1) << 62;
  const std::int64_t clipped =
      static_cast<std::int64_t>(product > limit ? limit : (product < -limit ? -limit : product));
  std::int64_t avg = round_shift_inline(clipped, cfg_.gbl_pool_shift);
  out[0] = cfg_.quant_en ? clamp_int8(avg)
                         : static_cast<std::int32_t>(std::clamp<std::int64_t>(
                               avg, std::numeric_limits<std::int32_t>::min(),
                               std::numeric_limits<std::int32_t>::max()));
}

// ---------------------------------------------------------------------------------------------
// OutputBlock

OutputConfig OutputConfig::from(const isa::Instruction& o) {
  OutputConfig c;
  c.output_addr = static_cast<std::uint32_t>(o.get(Field::OutputBlock_OutputAddr));
  c.accumulant_addr = static_cast<std::uint32_t>(o.get(Field::OutputBlock_AccumulantAddr));
  c.accumulant_read_first = o.get(Field::OutputBlock_AccumulantReadFirst) != 0;
  c.channel_itr = static_cast<std::uint32_t>(o.get(Field::OutputBlock_ChannelItr));
  c.kernel_itr = static_cast<std::uint32_t>(o.get(Field::OutputBlock_KernelItr));
  c.image_dim_output = static_cast<std::uint32_t>(o.get(Field::OutputBlock_ImageDimOutput));
  c.image_dim_acc = static_cast<std::uint32_t>(o.get(Field::OutputBlock_ImageDimAcc));
  c.acc_en = o.get(Field::OutputBlock_AccEn) != 0;
  c.on_chip_acc = o.get(Field::OutputBlock_OnChipAcc) != 0;
  c.dispatch_en = o.get(Field::OutputBlock_DispatchEn) != 0;
  c.dispatch_id = static_cast<std::uint32_t>(o.get(Field::OutputBlock_DispatchID));
  c.oh = static_cast<std::uint32_t>(o.get(Field::OutputBlock_OH));
  c.ow = static_cast<std::uint32_t>(o.get(Field::OutputBlock_OW));
  c.flat = o.get(Field::OutputBlock_FlatController) != 0;
  c.op_width = static_cast<int>(o.get(Field::OutputBlock_OpWidth));
  return c;
}

std::uint64_t dispatch_size(const isa::SaArch& arch, const OutputConfig& out) {
  if (out.flat) return out.image_dim_output;
  return std::uint64_t{out.image_dim_output} * out.kernel_itr *
         static_cast<std::uint64_t>(arch.n_sa) * static_cast<std::uint64_t>(out.op_width);
}

static void check_op_width(const LayerContext& ctx, const OutputConfig& out) {
  if (out.op_width != 1 && out.op_width != 4)
    ctx.fail_field(Field::OutputBlock_OpWidth,
                   "output width {} bytes is not supported (1 for int8, 4 for int32)",
                   out.op_width);
}

// The OutputBlock of a write in the 6.1 layout, its fields checked against `layout` (naming the
// field), and the output region's range.
OutputConfig checked_output(const LayerContext& ctx, const ActivationLayout& layout) {
  const OutputConfig out = OutputConfig::from(ctx.require_output());
  check_op_width(ctx, out);
  if (out.flat)
    ctx.fail_field(Field::OutputBlock_FlatController,
                   "this megablock writes the activation layout; FlatController must be 0");
  if (out.image_dim_output != layout.padded_pixels())
    ctx.fail_field(Field::OutputBlock_ImageDimOutput,
                   "is {} but the output has {} pixels, which the layout pads to {} "
                   "(ceil_mod(P, {}))",
                   out.image_dim_output, layout.pixels, layout.padded_pixels(),
                   layout.pixels_per_word);
  if (std::uint64_t{out.kernel_itr} * static_cast<std::uint64_t>(ctx.arch.n_sa) !=
      layout.padded_channels())
    ctx.fail_field(Field::OutputBlock_KernelItr,
                   "is {} but {} output channels need ceil({}/{}) = {} groups of N_SA",
                   out.kernel_itr, layout.channels, layout.channels, ctx.arch.n_sa,
                   layout.padded_channels() / static_cast<std::uint64_t>(ctx.arch.n_sa));
  ctx.check_dram_range(Field::OutputBlock_OutputAddr, out.output_addr,
                       layout.bytes() * static_cast<std::uint64_t>(out.op_width));
  return out;
}

std::uint64_t write_activation_output(LayerContext& ctx, const ActivationLayout& layout,
                                      std::span<const std::int32_t> planar) {
  const OutputConfig out = checked_output(ctx, layout);
  const std::uint64_t width = static_cast<std::uint64_t>(out.op_width);
  const std::uint64_t total = layout.bytes() * width;
  // Written in place into the DRAM pages (write_words); the words are cleared first only when
  // the layout has padding bytes (every other byte is written below).
  const std::uint64_t cd = layout.channel_group, dk = layout.pixels_per_word;
  const std::uint64_t pp = layout.padded_pixels(), pixels = layout.pixels;
  const bool padded = layout.padded_channels() != layout.channels || pp != pixels;
  const std::int32_t* src = planar.data();
  // Pixel p is element p % dk of word p / dk: dk consecutive pixels per word.
  write_words(
      ctx.dram, out.output_addr, total, 32 * width, "output write",
      [&](std::uint64_t first, std::uint64_t end, std::uint8_t* data) {
        if (padded) std::fill(data, data + (end - first) * 32 * width, std::uint8_t{0});
        std::uint8_t* dst = data;
        const std::uint64_t base = first * 32;
        if (width == 1)
          for_each_word(
              layout.channels, pixels, cd, dk, pp, first, end,
              [=](std::uint64_t c0, std::uint64_t cn, std::uint64_t p0, std::uint64_t word,
                  auto dkc, auto n) {
                // Byte stores may alias the closure: work on locals.
                std::uint8_t* w = dst + (word - base);
                const std::int32_t* in = src + c0 * pixels + p0;
                const std::uint64_t stride = pixels;
                std::uint64_t j = 0;
#if defined(__SSE2__)
                // dk = 4 whole words (the 9,8,8 array): four channels' 4 int32 at a time,
                // truncated to bytes (mask, then packs that cannot saturate 0..255), which
                // lands them in the word's order, channel-major.
                if constexpr (is_whole_word_of_4<decltype(n)>) {
                  const __m128i low = _mm_set1_epi32(0xff);
                  auto row = [&](std::uint64_t r) {
                    return _mm_and_si128(
                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + r * stride)), low);
                  };
                  for (; j + 4 <= cn; j += 4) {
                    const __m128i a = _mm_packs_epi32(row(j), row(j + 1));
                    const __m128i b = _mm_packs_epi32(row(j + 2), row(j + 3));
                    _mm_storeu_si128(reinterpret_cast<__m128i*>(w + j * 4), _mm_packus_epi16(a, b));
                  }
                }
#endif
                for (; j < cn; ++j)
                  for (std::uint64_t i = 0; i < n; ++i)
                    w[j * dkc + i] = static_cast<std::uint8_t>(in[j * stride + i]);
              });
        else
          for_each_word(layout.channels, pixels, cd, dk, pp, first, end,
                        [=](std::uint64_t c0, std::uint64_t cn, std::uint64_t p0,
                            std::uint64_t word, auto dkc, auto n) {
                          std::uint8_t* w = dst + (word - base) * 4;  // locals, as above
                          const std::int32_t* in = src + c0 * pixels + p0;
                          const std::uint64_t stride = pixels;
#if defined(__SSE2__)
                          // dk = 4 whole words: a channel's 4 int32 to 16 contiguous bytes,
                          // big-endian.
                          if constexpr (is_whole_word_of_4<decltype(n)>) {
                            for (std::uint64_t j = 0; j < cn; ++j)
                              _mm_storeu_si128(
                                  reinterpret_cast<__m128i*>(w + j * 16),
                                  bswap32x4(_mm_loadu_si128(
                                      reinterpret_cast<const __m128i*>(in + j * stride))));
                            return;
                          }
#endif
                          for (std::uint64_t j = 0; j < cn; ++j)
                            for (std::uint64_t i = 0; i < n; ++i)
                              store_be32(w + (j * dkc + i) * 4,
                                         static_cast<std::uint32_t>(in[j * stride + i]));
                        });
      });
  return total;
}

namespace detail {
void tail_word_scalar(const TailWords& t, std::uint64_t c0, std::uint64_t cn, std::uint64_t p0,
                      std::uint64_t n, std::uint8_t* out, const std::uint8_t* accumulants) {
  const std::uint64_t dk = t.pixels_per_word;
  for (std::uint64_t j = 0; j < cn; ++j)
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t e = j * dk + i;  // the element in the word
      std::int32_t v = t.acc[(c0 + j) * t.pixels + p0 + i];
      if (accumulants) v = add_wrap(v, static_cast<std::int32_t>(load_be32(accumulants + e * 4)));
      v = t.tail->apply(v, c0 + j);
      if (t.width == 1)
        out[e] = static_cast<std::uint8_t>(v);
      else
        store_be32(out + e * 4, static_cast<std::uint32_t>(v));
    }
}
}  // namespace detail

detail::TailWords TailPipeline::words(const ActivationLayout& layout, int width) const {
  detail::TailWords t;
  t.tail = this;
  t.channels = layout.channels, t.pixels = layout.pixels, t.padded_pixels = layout.padded_pixels();
  t.channel_group = layout.channel_group, t.pixels_per_word = layout.pixels_per_word;
  t.width = width;
  t.bias = cfg_.bias_en ? bias_.data() : nullptr;
  const int act = !cfg_.act_en ? -1 : cfg_.act_type;
  if (cfg_.quant_en && act <= 1 && cfg_.act_param >= 0 && cfg_.quant_shift >= 0 &&
      fp_cast_shift_ >= 0 && cfg_.quant_shift + fp_cast_shift_ <= 62) {
    t.kind = detail::TailWords::Kind::kQuantize;
    t.scale = cfg_.quant_scale, t.shift = cfg_.quant_shift, t.fp_cast_shift = fp_cast_shift_;
    t.act = act, t.clip = cfg_.act_param;
  } else if (!cfg_.quant_en && act == -1 && width == 4) {
    t.kind = detail::TailWords::Kind::kBias;
  }
  return t;
}

std::uint64_t TailPipeline::write_output(LayerContext& ctx, const ActivationLayout& layout,
                                         const std::int32_t* acc,
                                         const std::uint64_t* accumulant_addr, Isa isa) const {
  if (cfg_.gbl_pool_en) fail("{}: internal error: write_output with a global pool", ctx.where());
  const OutputConfig out = checked_output(ctx, layout);
  const std::uint64_t width = static_cast<std::uint64_t>(out.op_width);
  const std::uint64_t total = layout.bytes() * width;
  detail::TailWords t = words(layout, out.op_width);
  t.acc = acc;
  // The vector path: the 9,8,8 layout (a word is 8 channels x 4 pixels) with a vector kind.
  const bool avx2 = t.kind != detail::TailWords::Kind::kOther && t.channel_group == 8 &&
                    t.pixels_per_word == 4 &&
                    cpu::path_allowed(cpu::resolve(isa, "tail write_output"), Isa::kAvx2);
  const bool padded = layout.padded_channels() != layout.channels || t.padded_pixels != t.pixels;
  auto run = [&](std::uint64_t first, std::uint64_t end, std::uint8_t* data,
                 const std::uint8_t* accumulants) {
    if (avx2) return detail::tail_words_avx2(t, first, end, data, accumulants);
    const std::uint64_t base = first * 32;
    for_each_word(
        t.channels, t.pixels, t.channel_group, t.pixels_per_word, t.padded_pixels, first, end,
        [&](std::uint64_t c0, std::uint64_t cn, std::uint64_t p0, std::uint64_t word, auto,
            auto n) {
          detail::tail_word_scalar(t, c0, cn, p0, n, data + (word - base) * width,
                                   accumulants ? accumulants + (word - base) * 4 : nullptr);
        });
  };
  write_words(ctx.dram, out.output_addr, total, 32 * width, "output write",
              [&](std::uint64_t first, std::uint64_t end, std::uint8_t* data) {
                if (padded) std::fill(data, data + (end - first) * 32 * width, std::uint8_t{0});
                if (!accumulant_addr) return run(first, end, data, nullptr);
                // The same words of the accumulant region (128 bytes each), page piece by piece.
                read_words(ctx.dram, *accumulant_addr + first * 128, (end - first) * 128, 128,
                           "accumulant read",
                           [&](std::uint64_t f, std::uint64_t e, const std::uint8_t* a) {
                             run(first + f, first + e, data + f * 32 * width, a);
                           });
              });
  return total;
}

TailPipeline::RowWriter TailPipeline::row_writer(LayerContext& ctx, const ActivationLayout& layout,
                                                 const std::uint64_t* accumulant_addr, Isa isa,
                                                 RowWriterPages* pages) const {
  RowWriter w;
  if (cfg_.gbl_pool_en) return w;
  const OutputConfig out = checked_output(ctx, layout);
  w.words_ = words(layout, out.op_width);
  w.bytes_ = layout.bytes() * static_cast<std::uint64_t>(out.op_width);
  const std::uint64_t word_bytes = 32 * static_cast<std::uint64_t>(out.op_width);
  if (w.words_.kind == detail::TailWords::Kind::kOther || layout.channel_group != 8 ||
      layout.pixels_per_word != 4 || out.output_addr % word_bytes != 0 ||
      (accumulant_addr && *accumulant_addr % 128 != 0))
    return w;
  const Isa level = cpu::resolve(isa, "tail row_writer");
  if (!cpu::path_allowed(level, Isa::kAvx2)) return w;
  w.words_.avx512 = cpu::path_allowed(level, Isa::kAvx512Vnni);
  // Page tables, one per region, kept per thread (no allocation per layer once grown).
  thread_local RowWriterPages own_pages;
  std::vector<std::uint8_t*>& out_pages = (pages ? *pages : own_pages).out;
  std::vector<const std::uint8_t*>& accumulant_pages = (pages ? *pages : own_pages).accumulant;
  static constexpr std::array<std::uint8_t, Dram::kPageBytes> kZeros{};
  // Each page's base: the first piece starts `start` bytes into its page, the others at 0.
  out_pages.clear();
  w.out_start_ = out.output_addr % Dram::kPageBytes;
  ctx.dram.write_pages(out.output_addr, w.bytes_, "output write",
                       [&](std::uint64_t, std::uint8_t* data, std::uint64_t) {
                         out_pages.push_back(out_pages.empty() ? data - w.out_start_ : data);
                       });
  w.out_pages_ = out_pages.data();
  if (accumulant_addr) {
    accumulant_pages.clear();
    w.accumulant_start_ = *accumulant_addr % Dram::kPageBytes;
    ctx.dram.read_pages(*accumulant_addr, layout.bytes() * 4, "accumulant read",
                        [&](std::uint64_t, const std::uint8_t* data, std::uint64_t) {
                          const bool first = accumulant_pages.empty();
                          // A page never written reads as zeros.
                          accumulant_pages.push_back(!data   ? kZeros.data()
                                                     : first ? data - w.accumulant_start_
                                                             : data);
                        });
    w.accumulant_pages_ = accumulant_pages.data();
  }
  w.ready_ = true;
  return w;
}

void TailPipeline::RowWriter::write(const std::int32_t* y, std::uint64_t stride, std::uint64_t p0,
                                    std::uint64_t n, std::uint64_t k0,
                                    std::uint64_t k_count) const {
  if (!ready_ || p0 % 4 || k0 % 8 || (n % 4 && p0 + n != words_.pixels) ||
      (k_count % 8 && k0 + k_count != words_.channels) || p0 + n > words_.pixels ||
      k0 + k_count > words_.channels)
    fail(
        "TailPipeline::RowWriter: pixels [{}, {}) channels [{}, {}) are not whole words of the "
        "{}-pixel {}-channel output",
        p0, p0 + n, k0, k0 + k_count, words_.pixels, words_.channels);
  if (skip_begin_ >= skip_end_)
    return detail::tail_rows_avx2(words_, y, stride, p0, n, k0, k_count, out_pages_, out_start_,
                                  accumulant_pages_, accumulant_start_);
  // Per 8-channel group, whose words are pixel p's at group * per_group + p / 4: the pixels
  // before the words left unwritten, and those after.
  const std::uint64_t per_group = words_.padded_pixels / 4, end = p0 + n;
  for (std::uint64_t c0 = k0; c0 < k0 + k_count; c0 += 8) {
    const std::uint64_t base = c0 / 8 * per_group;
    const auto pixel_of = [&](std::uint64_t word) {
      return std::clamp(word <= base ? 0 : (word - base) * 4, p0, end);
    };
    const std::uint64_t skip_from = pixel_of(skip_begin_), skip_to = pixel_of(skip_end_);
    const auto rows = [&](std::uint64_t from, std::uint64_t to) {
      if (from < to)
        detail::tail_rows_avx2(words_, y + (from - p0) * stride + (c0 - k0), stride, from,
                               to - from, c0, std::min<std::uint64_t>(8, k0 + k_count - c0),
                               out_pages_, out_start_, accumulant_pages_, accumulant_start_);
    };
    rows(p0, skip_from);
    rows(skip_to, end);
  }
}

std::uint64_t write_flat_output(LayerContext& ctx, ByteSpan data) {
  const OutputConfig out = OutputConfig::from(ctx.require_output());
  const std::uint64_t total = ceil_mod(data.size(), 32);
  if (out.image_dim_output != total)
    ctx.fail_field(Field::OutputBlock_ImageDimOutput,
                   "is {} but the flat output is {} bytes, padded to {}", out.image_dim_output,
                   data.size(), total);
  ctx.check_dram_range(Field::OutputBlock_OutputAddr, out.output_addr, total);
  Bytes bytes(data.begin(), data.end());
  bytes.resize(total, 0);
  ctx.dram.write(out.output_addr, bytes, ctx.field_name(Field::OutputBlock_OutputAddr));
  return total;
}

}  // namespace npukit::device
