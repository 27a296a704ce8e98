// FC megablock (gati.md 3.2 "FC", 6.2 FC layouts, 8 "Flattening"): the 1x32 output-stationary
// FC engine. For every block i of 32 output neurons it streams the input vector one element per
// cycle against 32 weight bytes (one DRAM beat) and accumulates int32 per neuron; results go
// through the tail (FC bias order of 6.2) and are written as a linear vector
// (ceil_mod(WeightCols, 32) bytes, OpWidth 1, or 4x that as big-endian int32).
//
// Input: Flatten = 0 reads InputRows int8 bytes at ImageStartAddress (region ceil_mod(rows, 32)).
// Flatten = 1 reads a conv output in the 6.1 layout with C = InputRows / ImageDim channels of
// ImageDim pixels and flattens it channel-major (x[c * ImageDim + p]), as the flattening block's
// per-channel banks read serially do; the region is C'·P' bytes and Vec2MatCols = C'·P' / 32.
#include "device/fc.h"

#include "common/cpu.h"
#include "device/block.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npukit::device {

using isa::Field;

namespace {
constexpr std::uint64_t kFcBufferBytes = 32768;  // gaticc --fcbuf-size: the FC input RAM
constexpr std::uint64_t kVaSize = 32;            // FC engine width (COL_FC)

// a[k] += x * w[k] for one 32-byte weight row, as the scalar loop does it.
void add_row_scalar(std::int32_t* a, const std::uint8_t* w, std::uint64_t len, std::int32_t x) {
  for (std::uint64_t k = 0; k < len; ++k) a[k] += x * static_cast<std::int8_t>(w[k]);
}
}  // namespace

namespace detail {
void fc_rows_scalar(std::int32_t* a, const std::uint8_t* w, const std::int8_t* x,
                    std::uint64_t count) {
  for (std::uint64_t r = 0; r < count; ++r) add_row_scalar(a, w + r * kVaSize, kVaSize, x[r]);
}

#if defined(__x86_64__) || defined(__i386__)
// a[k] += sum over r < count of x[r] * w[32 r + k], for one block's `count` whole rows at the
// AVX2 level, the 32 sums in registers. Rows go in pairs: both rows' weights widened to int16
// and interleaved (unpacklo/hi, per 128-bit lane), so one _mm256_madd_epi16 with the broadcast
// pair (x[r], x[r + 1]) adds both products per neuron (|sum| <= 2^15, exact); an odd last row
// pairs with zero. s[0] holds neurons 0-3 and 8-11, s[1] 4-7 and 12-15, s[2] and s[3] the same
// 16 on; the permutes put them back in order.
__attribute__((target("avx2"))) void fc_rows_avx2(std::int32_t* a, const std::uint8_t* w,
                                                  const std::int8_t* x, std::uint64_t count) {
  __m256i s[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                  _mm256_setzero_si256()};
  const auto add_pair = [&](__m256i wa, __m256i wb, std::int8_t xa, std::int8_t xb)
      __attribute__((target("avx2"), always_inline)) {
    const __m256i xx = _mm256_set1_epi32(static_cast<std::int32_t>(
        static_cast<std::uint16_t>(xa) | static_cast<std::uint32_t>(static_cast<std::uint16_t>(xb))
                                             << 16));
    const __m128i halves[2][2] = {{_mm256_castsi256_si128(wa), _mm256_extracti128_si256(wa, 1)},
                                  {_mm256_castsi256_si128(wb), _mm256_extracti128_si256(wb, 1)}};
    for (int h = 0; h < 2; ++h) {
      const __m256i ra = _mm256_cvtepi8_epi16(halves[0][h]),
                    rb = _mm256_cvtepi8_epi16(halves[1][h]);
      s[2 * h] = _mm256_add_epi32(s[2 * h], _mm256_madd_epi16(_mm256_unpacklo_epi16(ra, rb), xx));
      s[2 * h + 1] =
          _mm256_add_epi32(s[2 * h + 1], _mm256_madd_epi16(_mm256_unpackhi_epi16(ra, rb), xx));
    }
  };
  std::uint64_t r = 0;
  for (; r + 2 <= count; r += 2)
    add_pair(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + r * kVaSize)),
             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + (r + 1) * kVaSize)), x[r],
             x[r + 1]);
  if (r < count)
    add_pair(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + r * kVaSize)),
             _mm256_setzero_si256(), x[r], 0);
  const __m256i ordered[4] = {
      _mm256_permute2x128_si256(s[0], s[1], 0x20), _mm256_permute2x128_si256(s[0], s[1], 0x31),
      _mm256_permute2x128_si256(s[2], s[3], 0x20), _mm256_permute2x128_si256(s[2], s[3], 0x31)};
  for (int q = 0; q < 4; ++q) {
    auto* p = reinterpret_cast<__m256i*>(a + 8 * q);
    _mm256_storeu_si256(p, _mm256_add_epi32(_mm256_loadu_si256(p), ordered[q]));
  }
}

// The same at the VNNI levels, 4 rows a step: vpdpbusd multiplies 4 unsigned bytes by 4 signed
// ones and adds the 4 products into an int32 lane, so a lane must hold one neuron's weights of 4
// consecutive rows. The rows' bytes are interleaved (unpack 8 then 16 bits, per 128-bit lane:
// vector v holds neurons 4v..4v+3 and 16+4v..16+4v+3), made unsigned as w + 128 (xor 0x80) and
// multiplied by the broadcast signed inputs x[r..r+3]: each lane gains its products plus 128
// times the 4 inputs' sum, which is taken off once at the end. Exact: the sums stay within
// int32 (|sum| <= 2^29 plus the offset's 128 * 128 * count, removed modulo 2^32). Dot::ymm is
// the level's ymm vpdpbusd; the last count % 4 rows go to fc_rows_avx2.
// Written once for both levels' target attributes and dot instructions (a template would need
// both targets in one, and the AVX-VNNI copy must hold no EVEX instruction).
#define NPUKIT_FC_ADD_ROWS_VNNI(NAME, TARGET, DOT)                                                 \
  __attribute__((target(TARGET))) void NAME(std::int32_t* a, const std::uint8_t* w,                \
                                            const std::int8_t* x, std::uint64_t count) {           \
    __m256i s[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),        \
                    _mm256_setzero_si256()};                                                       \
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));                                \
    std::int32_t x_sum = 0;                                                                        \
    std::uint64_t r = 0;                                                                           \
    for (; r + 4 <= count; r += 4) {                                                               \
      __m256i row[4];                                                                              \
      for (int i = 0; i < 4; ++i)                                                                  \
        row[i] = _mm256_xor_si256(                                                                 \
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + (r + i) * kVaSize)), flip);    \
      const __m256i lo01 = _mm256_unpacklo_epi8(row[0], row[1]);                                   \
      const __m256i hi01 = _mm256_unpackhi_epi8(row[0], row[1]);                                   \
      const __m256i lo23 = _mm256_unpacklo_epi8(row[2], row[3]);                                   \
      const __m256i hi23 = _mm256_unpackhi_epi8(row[2], row[3]);                                   \
      std::int32_t quad;                                                                           \
      std::memcpy(&quad, x + r, 4);                                                                \
      const __m256i xx = _mm256_set1_epi32(quad);                                                  \
      s[0] = DOT(s[0], _mm256_unpacklo_epi16(lo01, lo23), xx);                                     \
      s[1] = DOT(s[1], _mm256_unpackhi_epi16(lo01, lo23), xx);                                     \
      s[2] = DOT(s[2], _mm256_unpacklo_epi16(hi01, hi23), xx);                                     \
      s[3] = DOT(s[3], _mm256_unpackhi_epi16(hi01, hi23), xx);                                     \
      x_sum += x[r] + x[r + 1] + x[r + 2] + x[r + 3];                                              \
    }                                                                                              \
    const __m256i offset = _mm256_set1_epi32(x_sum * 128);                                         \
    const __m256i ordered[4] = {                                                                   \
        _mm256_permute2x128_si256(s[0], s[1], 0x20), _mm256_permute2x128_si256(s[2], s[3], 0x20),  \
        _mm256_permute2x128_si256(s[0], s[1], 0x31), _mm256_permute2x128_si256(s[2], s[3], 0x31)}; \
    for (int q = 0; q < 4; ++q) {                                                                  \
      auto* p = reinterpret_cast<__m256i*>(a + 8 * q);                                             \
      _mm256_storeu_si256(                                                                         \
          p, _mm256_add_epi32(_mm256_loadu_si256(p), _mm256_sub_epi32(ordered[q], offset)));       \
    }                                                                                              \
    if (r < count) fc_rows_avx2(a, w + r * kVaSize, x + r, count - r);                             \
  }
NPUKIT_FC_ADD_ROWS_VNNI(fc_rows_avx512vnni, "avx2,avx512f,avx512vl,avx512vnni", _mm256_dpbusd_epi32)
NPUKIT_FC_ADD_ROWS_VNNI(fc_rows_avxvnni, "avx2,avxvnni", _mm256_dpbusd_avx_epi32)
#undef NPUKIT_FC_ADD_ROWS_VNNI
#else
void fc_rows_avx2(std::int32_t*, const std::uint8_t*, const std::int8_t*, std::uint64_t) {
  fail("fc: AVX2 on a CPU that is not x86");
}
void fc_rows_avx512vnni(std::int32_t*, const std::uint8_t*, const std::int8_t*, std::uint64_t) {
  fail("fc: AVX-512 VNNI on a CPU that is not x86");
}
void fc_rows_avxvnni(std::int32_t*, const std::uint8_t*, const std::int8_t*, std::uint64_t) {
  fail("fc: AVX-VNNI on a CPU that is not x86");
}
#endif

FcRows fc_rows_for(Isa level) {
  return cpu::path_allowed(level, Isa::kAvx512Vnni) ? fc_rows_avx512vnni
         : cpu::path_allowed(level, Isa::kAvxVnni)  ? fc_rows_avxvnni
         : cpu::path_allowed(level, Isa::kAvx2)     ? fc_rows_avx2
                                                    : fc_rows_scalar;
}
}  // namespace detail

BlockTiming run_fc(LayerContext& ctx) {
  const isa::Instruction& m = ctx.mega;
  const OutputConfig out = OutputConfig::from(ctx.require_output());
  const std::uint64_t rows = m.get(Field::FC_WeightRows);  // K: input length
  const std::uint64_t cols = m.get(Field::FC_WeightCols);  // M: output neurons
  const std::uint64_t input_rows = m.get(Field::FC_InputRows);
  const bool flatten = m.get(Field::FC_Flatten) != 0;
  const std::uint64_t image_dim = m.get(Field::FC_ImageDim);
  const std::uint64_t vec2mat = m.get(Field::FC_Vec2MatCols);
  const std::uint64_t image_start = m.get(Field::FC_ImageStartAddress);
  const std::uint64_t image_end = m.get(Field::FC_ImageEndAddr);
  const std::uint64_t weight_start = m.get(Field::FC_WeightStartAddress);
  const std::uint64_t weight_end = m.get(Field::FC_WeightEndAddress);
  const std::uint64_t n_sa = static_cast<std::uint64_t>(ctx.arch.n_sa);

  if (rows == 0) ctx.fail_field(Field::FC_WeightRows, "is 0");
  if (cols == 0) ctx.fail_field(Field::FC_WeightCols, "is 0");
  if (input_rows != rows)
    ctx.fail_field(Field::FC_InputRows, "is {} but the weights expect {} inputs (WeightRows)",
                   input_rows, rows);
  if (input_rows > kFcBufferBytes)
    ctx.fail_field(Field::FC_InputRows, "{} inputs exceed the {}-byte FC input buffer", input_rows,
                   kFcBufferBytes);

  // Input vector.
  std::vector<std::int8_t> x(rows);
  std::uint64_t input_region = 0;
  if (flatten) {
    if (image_dim == 0 || rows % image_dim != 0)
      ctx.fail_field(Field::FC_ImageDim,
                     "is {} but InputRows {} must be channels x ImageDim (H*W of the conv output)",
                     image_dim, rows);
    const ActivationLayout layout =
        ActivationLayout::for_arch(ctx.arch, rows / image_dim, image_dim);
    input_region = layout.bytes();
    const std::vector<std::int8_t> planar =
        read_activation(ctx, Field::FC_ImageStartAddress, image_start, layout);
    std::copy(planar.begin(), planar.end(), x.begin());  // planar [C][P] is channel-major already
  } else {
    input_region = ceil_mod(rows, kVaSize);
    ctx.check_dram_range(Field::FC_ImageStartAddress, image_start, rows);
    const Bytes raw = ctx.dram.read(image_start, rows, ctx.field_name(Field::FC_ImageStartAddress));
    for (std::uint64_t j = 0; j < rows; ++j) x[j] = static_cast<std::int8_t>(raw[j]);
  }
  if (image_end < image_start || image_end - image_start != input_region)
    ctx.fail_field(Field::FC_ImageEndAddr,
                   "the input region [0x{:x}, 0x{:x}) is not the {} bytes the {} input occupies",
                   image_start, image_end, input_region,
                   flatten ? "flattened conv output" : "input vector");
  if (vec2mat != input_region / kVaSize)
    ctx.fail_field(Field::FC_Vec2MatCols, "is {} but the {}-byte input region is {} words of 32",
                   vec2mat, input_region, input_region / kVaSize);

  // Weights: per block i of 32 neurons, per input j (padded to 32): 32 bytes W[i*32 + k][j].
  const std::uint64_t rows_padded = ceil_mod(rows, kVaSize);
  const std::uint64_t cols_padded = ceil_mod(cols, kVaSize);
  const std::uint64_t blob_bytes = rows_padded * cols_padded;
  if (weight_end < weight_start || weight_end - weight_start != blob_bytes)
    ctx.fail_field(Field::FC_WeightEndAddress,
                   "the weight region [0x{:x}, 0x{:x}) is not the {} bytes of a {}x{} FC "
                   "(ceil_mod(rows, 32) x ceil_mod(cols, 32))",
                   weight_start, weight_end, blob_bytes, rows, cols);
  ctx.check_dram_range(Field::FC_WeightStartAddress, weight_start, blob_bytes);

  const std::uint64_t kitr = cols_padded / kVaSize;
  if (out.kernel_itr != kitr)
    ctx.fail_field(Field::OutputBlock_KernelItr, "is {} but {} outputs need {} blocks of 32",
                   out.kernel_itr, cols, kitr);
  if (out.channel_itr != 1)
    ctx.fail_field(Field::OutputBlock_ChannelItr, "is {}; an FC uses 1", out.channel_itr);
  if (out.image_dim_output != kVaSize / n_sa)
    ctx.fail_field(Field::OutputBlock_ImageDimOutput, "is {}; an FC uses vasize / N_SA = {}",
                   out.image_dim_output, kVaSize / n_sa);
  if (out.flat) ctx.fail_field(Field::OutputBlock_FlatController, "must be 0 for an FC");
  if (out.op_width != 1 && out.op_width != 4)
    ctx.fail_field(Field::OutputBlock_OpWidth, "output width {} bytes is not supported (1 or 4)",
                   out.op_width);

  const TailPipeline tail(ctx, cols, 0, TailPipeline::BiasLayout::kFc);
  if (tail.global_pool())
    ctx.fail_field(Field::TailBlock_GblPoolEn, "is 1, but an FC output has no image to pool");

  // int32 accumulation: |sum| <= 32768 * 2^14 = 2^29, no wrap. The weights are read where they
  // lie in DRAM, page piece by page piece (resnet50's 2 MiB blob was copied out every image);
  // a 32-byte row may straddle two pieces when the blob does not start on a row boundary of a
  // page, so rows are walked by byte position.
  std::vector<std::int32_t> acc(cols_padded, 0);
  const Isa level = cpu::resolve(Isa::kAuto, "fc");
  const bool vector = cpu::path_allowed(level, Isa::kAvx2);
  const detail::FcRows add_rows = detail::fc_rows_for(level);
  ctx.dram.read_pages(weight_start, blob_bytes, ctx.field_name(Field::FC_WeightStartAddress),
                      [&](std::uint64_t done, const std::uint8_t* data, std::uint64_t n) {
                        if (data == nullptr)
                          return;  // a page never written: zero weights add nothing
                        // Row `row` of the blob is input j of neuron block `block`; both step with
                        // the rows (one division per piece, not per row).
                        std::uint64_t row = done / kVaSize, first = done % kVaSize;
                        std::uint64_t j = row % rows_padded, block = row / rows_padded;
                        for (std::uint64_t off = 0; off < n;) {
                          // The whole rows of this block in this piece at once (rows past
                          // WeightRows are padding, their x 0).
                          const std::uint64_t whole =
                              first == 0 ? std::min((n - off) / kVaSize, rows_padded - j) : 0;
                          if (vector && whole > 0) {
                            if (j < rows)
                              add_rows(acc.data() + block * kVaSize, data + off, x.data() + j,
                                       std::min(whole, rows - j));
                            off += whole * kVaSize;
                            if ((j += whole) == rows_padded) j = 0, ++block;
                            continue;
                          }
                          const std::uint64_t len = std::min(kVaSize - first, n - off);
                          const std::int32_t xv = j < rows ? x[j] : 0;
                          if (xv != 0) {
                            // Padded neurons (>= cols) sum into acc's padding, which nothing reads.
                            std::int32_t* a = acc.data() + block * kVaSize + first;
                            const std::uint8_t* w = data + off;
                            add_row_scalar(a, w, len, xv);
                          }
                          off += len;
                          if (first + len == kVaSize) {
                            first = 0;
                            if (++j == rows_padded) j = 0, ++block;
                          } else {
                            first += len;
                          }
                        }
                      });

  const std::uint64_t width = static_cast<std::uint64_t>(out.op_width);
  Bytes bytes(cols_padded * width, 0);
  for (std::uint64_t k = 0; k < cols; ++k) {
    const std::int32_t v = tail.apply(acc[k], k);
    if (width == 1)
      bytes[k] = static_cast<std::uint8_t>(v);
    else
      store_be32(&bytes[k * 4], static_cast<std::uint32_t>(v));
  }
  ctx.check_dram_range(Field::OutputBlock_OutputAddr, out.output_addr, bytes.size());
  ctx.dram.write(out.output_addr, bytes, ctx.field_name(Field::OutputBlock_OutputAddr));

  // Timing: one input element per cycle per block of 32 neurons, each needing one weight beat;
  // flattening first reads the conv output into the banks (one beat per cycle).
  const std::uint64_t compute =
      kitr * rows_padded + (flatten ? dram_beats(input_region) : 0) + kDramReadLatencyCycles;
  std::uint64_t read_bytes = blob_bytes + input_region;
  if (tail.config().bias_en) read_bytes += tail.config().bias_end - tail.config().bias_start;
  return streaming_timing(compute, read_bytes, bytes.size(), rows * cols);
}

}  // namespace npukit::device
