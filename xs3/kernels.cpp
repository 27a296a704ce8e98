#include "xs3/kernels.h"
#include "common/cpu.h"

#include "common/bytes.h"
#include "common/error.h"
#include "xs3/vpu.h"

#include <algorithm>
#include <limits>

namespace npukit::xs3 {

namespace {

constexpr int kChunk = 32;  // products per 8-bit VLMACCR
// Element-count cap: keeps every index and every exact int32 chunk sum far from overflow.
constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 30;

void check_positive(int v, const char* what, const char* op) {
  if (v <= 0) fail("{}: {} must be positive, got {}", op, what, v);
}

void check_shape(const ImageShape& s, const char* which, const char* op) {
  if (s.height <= 0 || s.width <= 0 || s.channels <= 0) {
    fail("{}: {} shape [{}, {}, {}] must have positive height, width and channels", op, which,
         s.height, s.width, s.channels);
  }
  if (std::uint64_t(s.height) * std::uint64_t(s.width) * std::uint64_t(s.channels) > kMaxElements) {
    fail("{}: {} shape [{}, {}, {}] is too large (more than 2^30 elements)", op, which, s.height,
         s.width, s.channels);
  }
}

void check_size(std::size_t got, std::uint64_t need, const char* what, const char* op) {
  if (got != need) fail("{}: {} has {} elements, expected {}", op, what, got, need);
}

void check_window(const Window& w, const char* op) {
  check_positive(w.height, "window height", op);
  check_positive(w.width, "window width", op);
  check_positive(w.stride_v, "vertical stride", op);
  check_positive(w.stride_h, "horizontal stride", op);
  constexpr int kLimit = 1 << 20;
  if (w.height > 4096 || w.width > 4096 || w.start_row < -kLimit || w.start_row > kLimit ||
      w.start_col < -kLimit || w.start_col > kLimit || w.stride_v > kLimit || w.stride_h > kLimit) {
    fail("{}: window shape (at most 4096), start or stride (at most 2^20) out of range", op);
  }
}

// Refuses cases whose multiply-accumulate count would run for minutes (a small JSON y_shape
// can ask for that).
constexpr std::uint64_t kMaxWork = std::uint64_t{1} << 34;
void check_work(const ImageShape& y, std::uint64_t per_output, const char* op) {
  const std::uint64_t outputs =
      std::uint64_t(y.height) * std::uint64_t(y.width) * std::uint64_t(y.channels);
  if (outputs > (std::uint64_t{1} << 28) || outputs * per_output > kMaxWork) {
    fail("{}: {} outputs of {} products each is more work than npukit runs (limit 2^34 products)",
         op, outputs, per_output);
  }
}

// Pooling has no padding: every output's window must lie inside the image.
void check_window_inside(const Window& w, const ImageShape& x, const ImageShape& y,
                         const char* op) {
  const std::int64_t last_row = w.start_row + std::int64_t{y.height - 1} * w.stride_v + w.height;
  const std::int64_t last_col = w.start_col + std::int64_t{y.width - 1} * w.stride_h + w.width;
  if (w.start_row < 0 || w.start_col < 0 || last_row > x.height || last_col > x.width) {
    fail(
        "{}: the window for output [{}, {}] (start ({}, {}), stride ({}, {}), shape {}x{}) leaves "
        "the {}x{} image; pooling has no padding, so shrink the output or move the window",
        op, y.height, y.width, w.start_row, w.start_col, w.stride_v, w.stride_h, w.height, w.width,
        x.height, x.width);
  }
}

std::size_t pixel_offset(const ImageShape& s, int row, int col) {
  return (std::size_t(row) * std::size_t(s.width) + std::size_t(col)) * std::size_t(s.channels);
}

bool inside(const ImageShape& s, std::int64_t row, std::int64_t col) {
  return row >= 0 && col >= 0 && row < s.height && col < s.width;
}

void check_conv(const ConvParams& p, const char* op) {
  check_shape(p.x, "input", op);
  check_shape(p.y, "output", op);
  check_window(p.window, op);
  check_work(
      p.y,
      std::uint64_t(p.window.height) * std::uint64_t(p.window.width) * std::uint64_t(p.x.channels),
      op);
}

void check_shift_param(int shift, const char* what, const char* op) {
  if (shift < 0) {
    fail(
        "{}: {} is {} (negative); npukit rejects negative shifts (DECISIONS.md 16); use a shift "
        "in [0, {}]",
        op, what, shift, kMaxBsoShift);
  }
  if (shift > kMaxBsoShift) {
    fail("{}: {} is {}; shifts above {} are undefined in lib_nn's reference", op, what, shift,
         kMaxBsoShift);
  }
}

// Each output row: runs the conv inner loop per output channel with the per-tap input pointer
// (a real pixel or the zero_point pixel).
template <typename PerOutput>
void for_each_output(const ConvParams& p, PerOutput&& per_output) {
  for (int r = 0; r < p.y.height; ++r) {
    for (int c = 0; c < p.y.width; ++c) {
      const std::int64_t row0 = p.window.start_row + std::int64_t{r} * p.window.stride_v;
      const std::int64_t col0 = p.window.start_col + std::int64_t{c} * p.window.stride_h;
      per_output(r, c, row0, col0);
    }
  }
}

}  // namespace

std::size_t ImageShape::elements() const {
  return std::size_t(height) * std::size_t(width) * std::size_t(channels);
}

namespace detail {

std::int32_t accumulate_chunked(std::int32_t acc, const std::int8_t* a, const std::int8_t* b,
                                int n) {
  for (int start = 0; start < n; start += kChunk) {
    const int end = std::min(n, start + kChunk);
    std::int32_t chunk = 0;  // |chunk| <= 32 * 2^14: exact in int32
    for (int i = start; i < end; ++i) chunk += std::int32_t{a[i]} * std::int32_t{b[i]};
    acc = sat32(std::int64_t{acc} + chunk);
  }
  return acc;
}

void conv2d_deep_scalar(std::int8_t* y, const std::int8_t* x, const std::int8_t* k,
                        std::span<const BsoChannel> bso, const ConvParams& p) {
  const int c_in = p.x.channels;
  const int c_out = p.y.channels;
  const int kh = p.window.height;
  const int kw = p.window.width;
  const std::vector<std::int8_t> padding(std::size_t(c_in), p.zero_point);
  std::vector<const std::int8_t*> taps(std::size_t(kh) * std::size_t(kw));
  for_each_output(p, [&](int r, int c, std::int64_t row0, std::int64_t col0) {
    for (int i = 0; i < kh; ++i) {
      for (int j = 0; j < kw; ++j) {
        const bool in = inside(p.x, row0 + i, col0 + j);
        taps[std::size_t(i * kw + j)] =
            in ? x + pixel_offset(p.x, int(row0 + i), int(col0 + j)) : padding.data();
      }
    }
    std::int8_t* out = y + pixel_offset(p.y, r, c);
    for (int co = 0; co < c_out; ++co) {
      std::int32_t acc = bso[std::size_t(co)].bias;
      const std::int8_t* kc = k + std::size_t(co) * taps.size() * std::size_t(c_in);
      for (std::size_t t = 0; t < taps.size(); ++t) {
        acc = accumulate_chunked(acc, taps[t], kc + t * std::size_t(c_in), c_in);
      }
      out[co] = bso_output8(acc, bso[std::size_t(co)], p.output);
    }
  });
}

void fully_connected_8_scalar(std::int8_t* y, const std::int8_t* x, const std::int8_t* w, int c_in,
                              std::span<const BsoChannel> bso, OutputOptions output) {
  for (std::size_t co = 0; co < bso.size(); ++co) {
    const std::int32_t acc = accumulate_chunked(bso[co].bias, x, w + co * std::size_t(c_in), c_in);
    y[co] = bso_output8(acc, bso[co], output);
  }
}

}  // namespace detail

namespace {
bool use_avx2(Isa impl, const char* op) {
  return cpu::path_allowed(cpu::resolve(impl, op), Isa::kAvx2);
}
}  // namespace

std::vector<std::int8_t> conv2d_deep(std::span<const std::int8_t> x, std::span<const std::int8_t> k,
                                     std::span<const std::uint16_t> bso, const ConvParams& p,
                                     Isa impl) {
  const char* op = "conv2d_deep";
  check_conv(p, op);
  check_size(x.size(), p.x.elements(), "x", op);
  const std::uint64_t k_need = std::uint64_t(p.y.channels) * std::uint64_t(p.window.height) *
                               std::uint64_t(p.window.width) * std::uint64_t(p.x.channels);
  if (k_need > kMaxElements) fail("{}: kernel too large", op);
  check_size(k.size(), k_need, "k [C_out, K_h, K_w, C_in]", op);
  const auto channels = unpack_bso(bso, p.y.channels);
  std::vector<std::int8_t> y(p.y.elements());
  if (use_avx2(impl, op)) {
    detail::conv2d_deep_avx2(y.data(), x.data(), k.data(), channels, p);
  } else {
    detail::conv2d_deep_scalar(y.data(), x.data(), k.data(), channels, p);
  }
  return y;
}

std::vector<std::int8_t> conv2d_shallowin(std::span<const std::int8_t> x,
                                          std::span<const std::int8_t> k,
                                          std::span<const std::uint16_t> bso, const ConvParams& p) {
  const char* op = "conv2d_shallowin";
  check_conv(p, op);
  const int c_in = p.x.channels;
  if (c_in != 4 && c_in != 8 && c_in != 16 && c_in != 32) {
    fail(
        "{}: C_in must be 4, 8, 16 or 32 (one kernel row fills one 32-byte VLMACCR), got {}; use "
        "conv2d_deep",
        op, c_in);
  }
  const int k_cols = kChunk / c_in;  // augmented kernel width
  const int kh = p.window.height;
  const int kw = p.window.width;
  if (kw > k_cols) {
    fail("{}: window width {} exceeds 32/C_in = {} columns of the augmented kernel", op, kw,
         k_cols);
  }
  check_size(x.size(), p.x.elements(), "x", op);
  check_size(k.size(), std::uint64_t(p.y.channels) * std::uint64_t(kh) * kChunk,
             "k [C_out, K_h, 32/C_in, C_in]", op);
  for (std::size_t i = 0; i < k.size(); ++i) {
    const int col = int((i / std::size_t(c_in)) % std::size_t(k_cols));
    if (col >= kw && k[i] != 0) {
      const std::size_t row = i / kChunk;
      fail(
          "{}: k[{}][{}][{}][{}] = {} but columns at or beyond K_w = {} must be zero (the "
          "VLMACCR multiplies pixels beyond the window by them)",
          op, row / std::size_t(kh), row % std::size_t(kh), col, i % std::size_t(c_in), k[i], kw);
    }
  }
  const auto channels = unpack_bso(bso, p.y.channels);
  std::vector<std::int8_t> y(p.y.elements());
  // One VLMACCR per kernel row: the row's K_w * C_in real products form one saturation chunk;
  // the zero columns contribute nothing whatever they multiply.
  std::vector<std::int8_t> row_x(kChunk, 0);
  for_each_output(p, [&](int r, int c, std::int64_t row0, std::int64_t col0) {
    std::int8_t* out = y.data() + pixel_offset(p.y, r, c);
    for (int co = 0; co < p.y.channels; ++co) {
      std::int32_t acc = channels[std::size_t(co)].bias;
      for (int i = 0; i < kh; ++i) {
        for (int j = 0; j < kw; ++j) {
          const bool in = inside(p.x, row0 + i, col0 + j);
          for (int ci = 0; ci < c_in; ++ci) {
            row_x[std::size_t(j * c_in + ci)] =
                in ? x[pixel_offset(p.x, int(row0 + i), int(col0 + j)) + std::size_t(ci)]
                   : p.zero_point;
          }
        }
        const std::int8_t* k_row =
            k.data() + (std::size_t(co) * std::size_t(kh) + std::size_t(i)) * kChunk;
        std::int32_t chunk = 0;
        for (int e = 0; e < kw * c_in; ++e) chunk += std::int32_t{row_x[std::size_t(e)]} * k_row[e];
        acc = sat32(std::int64_t{acc} + chunk);
      }
      out[co] = bso_output8(acc, channels[std::size_t(co)], p.output);
    }
  });
  return y;
}

std::vector<std::int8_t> conv2d_1x1(std::span<const std::int8_t> x, ImageShape x_shape,
                                    std::span<const std::int8_t> k, int c_out,
                                    std::span<const std::uint16_t> bso, OutputOptions output,
                                    Isa impl) {
  const char* op = "conv2d_1x1";
  check_shape(x_shape, "input", op);
  check_positive(c_out, "C_out", op);
  check_work({x_shape.height, x_shape.width, c_out}, std::uint64_t(x_shape.channels), op);
  check_size(x.size(), x_shape.elements(), "x", op);
  check_size(k.size(), std::uint64_t(c_out) * std::uint64_t(x_shape.channels), "k [C_out, C_in]",
             op);
  const auto channels = unpack_bso(bso, c_out);
  const std::size_t pixels = std::size_t(x_shape.height) * std::size_t(x_shape.width);
  std::vector<std::int8_t> y(pixels * std::size_t(c_out));
  // Each pixel is a fully connected layer over its channels.
  const bool avx2 = use_avx2(impl, op);
  for (std::size_t px = 0; px < pixels; ++px) {
    auto* out = y.data() + px * std::size_t(c_out);
    const auto* in = x.data() + px * std::size_t(x_shape.channels);
    if (avx2) {
      detail::fully_connected_8_avx2(out, in, k.data(), x_shape.channels, channels, output);
    } else {
      detail::fully_connected_8_scalar(out, in, k.data(), x_shape.channels, channels, output);
    }
  }
  return y;
}

namespace detail {
void conv2d_depthwise_scalar(std::int8_t* y, const std::int8_t* x, const std::int8_t* k,
                             std::span<const BsoChannel> channels, const ConvParams& p) {
  const int ch = p.x.channels;
  std::vector<std::int32_t> acc(static_cast<std::size_t>(ch));
  for_each_output(p, [&](int r, int c, std::int64_t row0, std::int64_t col0) {
    for (int ci = 0; ci < ch; ++ci) acc[std::size_t(ci)] = channels[std::size_t(ci)].bias;
    // VLMACC: one product per channel lane per tap, saturated each time.
    for (int i = 0; i < p.window.height; ++i) {
      for (int j = 0; j < p.window.width; ++j) {
        const bool in = inside(p.x, row0 + i, col0 + j);
        const std::int8_t* k_tap =
            k + (std::size_t(i) * std::size_t(p.window.width) + std::size_t(j)) * std::size_t(ch);
        for (int ci = 0; ci < ch; ++ci) {
          const std::int32_t xv =
              in ? x[pixel_offset(p.x, int(row0 + i), int(col0 + j)) + std::size_t(ci)]
                 : p.zero_point;
          acc[std::size_t(ci)] = sat32(std::int64_t{acc[std::size_t(ci)]} + xv * k_tap[ci]);
        }
      }
    }
    std::int8_t* out = y + pixel_offset(p.y, r, c);
    for (int ci = 0; ci < ch; ++ci) {
      out[ci] = bso_output8(acc[std::size_t(ci)], channels[std::size_t(ci)], p.output);
    }
  });
}
}  // namespace detail

std::vector<std::int8_t> conv2d_depthwise(std::span<const std::int8_t> x,
                                          std::span<const std::int8_t> k,
                                          std::span<const std::uint16_t> bso, const ConvParams& p,
                                          Isa impl) {
  const char* op = "conv2d_depthwise";
  check_conv(p, op);
  const int ch = p.x.channels;
  if (p.y.channels != ch) {
    fail("{}: output channels {} must equal input channels {}", op, p.y.channels, ch);
  }
  check_size(x.size(), p.x.elements(), "x", op);
  check_size(k.size(), std::uint64_t(p.window.height) * std::uint64_t(p.window.width) * ch,
             "k [K_h, K_w, C]", op);
  const auto channels = unpack_bso(bso, ch);
  std::vector<std::int8_t> y(p.y.elements());
  if (use_avx2(impl, op)) {
    detail::conv2d_depthwise_avx2(y.data(), x.data(), k.data(), channels, p);
  } else {
    detail::conv2d_depthwise_scalar(y.data(), x.data(), k.data(), channels, p);
  }
  return y;
}

namespace {
void check_fc(std::span<const std::int8_t> x, std::span<const std::int8_t> w, int c_out,
              const char* op) {
  check_positive(c_out, "C_out", op);
  if (x.empty()) fail("{}: x (C_in elements) is empty", op);
  if (x.size() > kMaxElements) fail("{}: x too large", op);
  check_size(w.size(), std::uint64_t(c_out) * x.size(), "w [C_out, C_in]", op);
}
}  // namespace

std::vector<std::int8_t> fully_connected_8(std::span<const std::int8_t> x,
                                           std::span<const std::int8_t> w, int c_out,
                                           std::span<const std::uint16_t> bso, OutputOptions output,
                                           Isa impl) {
  const char* op = "fully_connected_8";
  check_fc(x, w, c_out, op);
  const auto channels = unpack_bso(bso, c_out);
  std::vector<std::int8_t> y(static_cast<std::size_t>(c_out));
  const int c_in = int(x.size());
  if (use_avx2(impl, op)) {
    detail::fully_connected_8_avx2(y.data(), x.data(), w.data(), c_in, channels, output);
  } else {
    detail::fully_connected_8_scalar(y.data(), x.data(), w.data(), c_in, channels, output);
  }
  return y;
}

std::vector<std::int16_t> fully_connected_16(std::span<const std::int8_t> x,
                                             std::span<const std::int8_t> w, int c_out,
                                             std::span<const std::uint16_t> bso) {
  const char* op = "fully_connected_16";
  check_fc(x, w, c_out, op);
  const auto channels = unpack_bso(bso, c_out);
  std::vector<std::int16_t> y(static_cast<std::size_t>(c_out));
  for (std::size_t co = 0; co < channels.size(); ++co) {
    const std::int32_t acc = detail::accumulate_chunked(channels[co].bias, x.data(),
                                                        w.data() + co * x.size(), int(x.size()));
    y[co] = bso_output16(acc, channels[co]);
  }
  return y;
}

namespace {
void check_pool(std::span<const std::int8_t> x, const PoolParams& p, const char* op) {
  check_shape(p.x, "input", op);
  check_shape(p.y, "output", op);
  check_window(p.window, op);
  check_work(p.y, std::uint64_t(p.window.height) * std::uint64_t(p.window.width), op);
  if (p.y.channels != p.x.channels) {
    fail("{}: output channels {} must equal input channels {}", op, p.y.channels, p.x.channels);
  }
  check_size(x.size(), p.x.elements(), "x", op);
  check_window_inside(p.window, p.x, p.y, op);
}

// Calls reduce(channel, value) for every window element of output (r, c) then finish(out).
template <typename Start, typename Add, typename Finish>
void pool(std::span<const std::int8_t> x, const PoolParams& p, std::vector<std::int8_t>& y,
          Start&& start, Add&& add, Finish&& finish) {
  for (int r = 0; r < p.y.height; ++r) {
    for (int c = 0; c < p.y.width; ++c) {
      start();
      const int row0 = p.window.start_row + r * p.window.stride_v;
      const int col0 = p.window.start_col + c * p.window.stride_h;
      for (int i = 0; i < p.window.height; ++i) {
        for (int j = 0; j < p.window.width; ++j) {
          const std::int8_t* px = x.data() + pixel_offset(p.x, row0 + i, col0 + j);
          for (int ch = 0; ch < p.x.channels; ++ch) add(ch, px[ch]);
        }
      }
      finish(y.data() + pixel_offset(p.y, r, c));
    }
  }
}
}  // namespace

std::vector<std::int8_t> maxpool2d(std::span<const std::int8_t> x, const PoolParams& p) {
  check_pool(x, p, "maxpool2d");
  std::vector<std::int8_t> y(p.y.elements());
  std::vector<std::int8_t> best(std::size_t(p.x.channels));
  pool(
      x, p, y, [&] { std::fill(best.begin(), best.end(), std::int8_t{-128}); },
      [&](int ch, std::int8_t v) { best[std::size_t(ch)] = std::max(best[std::size_t(ch)], v); },
      [&](std::int8_t* out) { std::copy(best.begin(), best.end(), out); });
  return y;
}

AvgPoolScale avgpool2d_scale_shift(int window_pixels) {
  if (window_pixels <= 0 || window_pixels > (1 << 24)) {
    fail("avgpool2d: window pixel count {} out of range [1, 2^24]", window_pixels);
  }
  int c = 0;
  while ((1 << c) < window_pixels) ++c;  // ceil(log2 n)
  if ((1 << c) == window_pixels) return {1, c};
  const unsigned q = unsigned(31 - c - 6);
  const std::uint32_t g = 0x80000000u / unsigned(window_pixels);  // 2^31 div n
  const std::uint32_t h = std::uint32_t(rshr_round(g, int(q)));
  if (h > 127) {
    // lib_nn stores the scale as int8: 128 would become -128 and negate every average.
    fail(
        "avgpool2d: a {}-pixel window rounds lib_nn's scale to {}, which does not fit its int8 "
        "scale (lib_nn asserts scale < 128); use a window with a different pixel count",
        window_pixels, h);
  }
  return {int(h), c + 6};
}

std::vector<std::int8_t> avgpool2d(std::span<const std::int8_t> x, const PoolParams& p) {
  check_pool(x, p, "avgpool2d");
  const AvgPoolScale s = avgpool2d_scale_shift(p.window.height * p.window.width);
  std::vector<std::int8_t> y(p.y.elements());
  std::vector<std::int32_t> acc(std::size_t(p.x.channels));
  pool(
      x, p, y, [&] { std::fill(acc.begin(), acc.end(), 0); },
      [&](int ch, std::int8_t v) {
        acc[std::size_t(ch)] =
            sat32(std::int64_t{acc[std::size_t(ch)]} + std::int32_t{v} * s.scale);
      },
      [&](std::int8_t* out) {
        for (std::size_t ch = 0; ch < acc.size(); ++ch) {
          out[ch] = static_cast<std::int8_t>(
              std::clamp<std::int64_t>(rshr_round(acc[ch], s.shift), p.output.lower_bound(), 127));
        }
      });
  return y;
}

std::vector<std::int8_t> avgpool2d_global(std::span<const std::int8_t> x, ImageShape x_shape,
                                          std::int32_t bias, int scale, int shift,
                                          OutputOptions output) {
  const char* op = "avgpool2d_global";
  check_shape(x_shape, "input", op);
  check_size(x.size(), x_shape.elements(), "x", op);
  if (scale < -128 || scale > 127) fail("{}: scale {} is not an int8", op, scale);
  check_shift_param(shift, "shift", op);
  const std::size_t pixels = std::size_t(x_shape.height) * std::size_t(x_shape.width);
  const std::size_t ch = std::size_t(x_shape.channels);
  std::vector<std::int8_t> y(ch);
  for (std::size_t c = 0; c < ch; ++c) {
    std::int32_t acc = bias;
    for (std::size_t px = 0; px < pixels; ++px) {
      acc = sat32(std::int64_t{acc} + std::int32_t{x[px * ch + c]} * scale);
    }
    y[c] = static_cast<std::int8_t>(
        std::clamp<std::int64_t>(rshr_round(acc, shift), output.lower_bound(), 127));
  }
  return y;
}

std::vector<std::int8_t> requantize_16_to_8(std::span<const std::int16_t> x, OutputOptions output) {
  std::vector<std::int8_t> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    y[i] = static_cast<std::int8_t>(
        std::clamp<std::int64_t>(rshr_round(x[i], 8), output.lower_bound(), 127));
  }
  return y;
}

namespace {
std::vector<std::int16_t> legacy_fc16(std::span<const std::int8_t> x,
                                      std::span<const std::int8_t> w, int c_out,
                                      const LegacyFcParams& p, const char* op) {
  check_fc(x, w, c_out, op);
  if (c_out > 16) fail("{}: C_out is {}, the legacy kernel handles at most 16", op, c_out);
  if (x.size() % kChunk != 0) {
    fail("{}: C_in is {}, the legacy kernel needs a multiple of 32", op, x.size());
  }
  if (p.bias.size() != std::size_t(c_out) || p.shifts.size() != std::size_t(c_out) ||
      p.scales.size() != std::size_t(c_out)) {
    fail("{}: bias, shifts and scales need {} entries each, got {}, {} and {}", op, c_out,
         p.bias.size(), p.shifts.size(), p.scales.size());
  }
  std::vector<std::int16_t> y(static_cast<std::size_t>(c_out));
  for (std::size_t co = 0; co < y.size(); ++co) {
    check_shift_param(p.shifts[co], "shift", op);
    const std::int32_t acc =
        detail::accumulate_chunked(p.bias[co], x.data(), w.data() + co * x.size(), int(x.size()));
    const std::int32_t y16 = vlsat(acc, p.shifts[co], VpuMode::k16);
    y[co] = static_cast<std::int16_t>(vlmul(y16, p.scales[co], VpuMode::k16));
  }
  return y;
}
}  // namespace

std::vector<std::int16_t> fc_deepin_shallowout_16(std::span<const std::int8_t> x,
                                                  std::span<const std::int8_t> w, int c_out,
                                                  const LegacyFcParams& p) {
  return legacy_fc16(x, w, c_out, p, "fc_deepin_shallowout_16");
}

std::vector<std::int8_t> fc_deepin_shallowout_8(std::span<const std::int8_t> x,
                                                std::span<const std::int8_t> w, int c_out,
                                                const LegacyFcParams& p) {
  const auto y16 = legacy_fc16(x, w, c_out, p, "fc_deepin_shallowout_8");
  std::vector<std::int8_t> y(y16.size());
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = vdepth8_from16(y16[i]);  // the final ">> 8"
  return y;
}

}  // namespace npukit::xs3
