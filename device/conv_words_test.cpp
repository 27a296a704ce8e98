// The dense conv's operands packed straight from the image's DRAM words (conv_kernels.h
// ImageWords, issue 13) against the same operands packed from planes, the planes built here by a
// plain loop over the 6.1 addressing (not by device::read_activation_planes): random images with
// every placement (pads, row skips that drop rows holding negative values, widths that are not a
// multiple of 4 so a DRAM word spans rows, 1- to 3-pixel rows), strides 1 to 4 (the stride
// phases), channel counts, lists with zero
// channels and a phase split, garbage in the layout's padding bytes, and pages cut anywhere; the
// row packers of every level this CPU has; whole convs against the plain loop with no planes at
// all. (Whole layers through the device, all three arrays and every level: conv_kernels_test.)
#include "common/cpu.h"
#include "device/conv_kernels.h"
#include "device/conv_kernels_test_support.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace npukit::device {
namespace {

namespace ck = conv_kernels;

// An image in DRAM words cut into pages of 2^shift words (the first one `skew` words short), and
// the planes it stands for.
struct WordImage {
  std::vector<std::vector<std::uint8_t>> pages;
  std::vector<const std::uint8_t*> pieces;
  ck::ImageWords words;
  std::vector<std::int8_t> planes;
};

struct Placement {
  std::uint64_t channels, width, height, pad_top, pad_bottom, skip_top, skip_bottom, left, right;
  std::uint64_t plane_h() const { return pad_top + height + pad_bottom - skip_top - skip_bottom; }
  std::uint64_t plane_w() const { return left + width + right; }
  std::int64_t top() const {
    return static_cast<std::int64_t>(pad_top) - static_cast<std::int64_t>(skip_top);
  }
};

// value(c, p) gives the value of channel c's pixel p (called once each); the layout's padding
// bytes (pixels from P to the word's end) are random, and must be read by nobody.
template <typename Value>
WordImage make_image(const Placement& at, std::mt19937& rng, Value&& value) {
  WordImage im;
  const std::uint64_t P = at.width * at.height, pp = (P + 3) / 4 * 4;
  std::vector<std::int8_t> values(at.channels * P);
  for (std::uint64_t c = 0; c < at.channels; ++c)
    for (std::uint64_t p = 0; p < P; ++p) values[c * P + p] = static_cast<std::int8_t>(value(c, p));
  auto byte = [&](std::uint64_t c, std::uint64_t p) { return values[c * P + p]; };
  const std::uint64_t words = at.channels / 8 * pp / 4;
  std::vector<std::uint8_t> flat(words * 32);
  for (auto& b : flat) b = static_cast<std::uint8_t>(rng());
  for (std::uint64_t c = 0; c < at.channels; ++c)
    for (std::uint64_t p = 0; p < P; ++p)
      flat[(c / 8) * (8 * pp) + (p / 4) * 32 + (c % 8) * 4 + p % 4] =
          static_cast<std::uint8_t>(byte(c, p));
  const std::uint64_t shift = rng() % 4, page = std::uint64_t{1} << shift;
  const std::uint64_t skew = rng() % page;
  for (std::uint64_t w = 0, first = 0; w < words; w = first) {
    first = (w + skew) / page * page + page - skew;  // the next page's first word
    std::vector<std::uint8_t> bytes(page * 32, 0xEE);
    const std::uint64_t offset = w == 0 ? skew : 0;
    for (std::uint64_t i = w; i < std::min(first, words); ++i)
      std::copy_n(flat.begin() + static_cast<std::ptrdiff_t>(i * 32), 32,
                  bytes.begin() + static_cast<std::ptrdiff_t>((offset + i - w) * 32));
    im.pages.push_back(std::move(bytes));
  }
  for (const auto& p : im.pages) im.pieces.push_back(p.data());
  im.words = {im.pieces.data(), shift, skew, at.channels, at.width, at.height, at.top(), at.left};
  // The planes: image row y at plane row y + top (dropped outside), column x at left + x.
  const std::uint64_t H = at.plane_h(), W = at.plane_w();
  im.planes.assign(at.channels * H * W, 0);
  for (std::uint64_t c = 0; c < at.channels; ++c)
    for (std::uint64_t y = 0; y < at.height; ++y) {
      const std::int64_t r = static_cast<std::int64_t>(y) + at.top();
      if (r < 0 || r >= static_cast<std::int64_t>(H)) continue;
      for (std::uint64_t x = 0; x < at.width; ++x)
        im.planes[(c * H + static_cast<std::uint64_t>(r)) * W + at.left + x] =
            static_cast<std::int8_t>(byte(c, y * at.width + x));
    }
  return im;
}

Placement random_placement(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) {
    return static_cast<std::uint64_t>(std::uniform_int_distribution<int>(lo, hi)(rng));
  };
  Placement at{};
  at.channels = 8 * pick(1, 5);
  const std::uint64_t widths[] = {1, 2, 3, 4, 5, 7, 14, 16, 28};
  at.width = pick(0, 2) ? widths[pick(0, 8)] : pick(1, 20);
  at.height = pick(1, 9);
  at.pad_top = pick(0, 2), at.pad_bottom = pick(0, 2), at.left = pick(0, 3), at.right = pick(0, 3);
  if (pick(0, 1)) at.left = at.right = 0;  // no padding columns (a 1x1 conv's plane)
  const std::uint64_t full = at.pad_top + at.height + at.pad_bottom;
  if (pick(0, 2) == 0 && full > 2) {  // row skips (kernel-split pieces), some into the image
    at.skip_top = pick(0, static_cast<int>(std::min<std::uint64_t>(full - 2, 3)));
    at.skip_bottom = pick(0, static_cast<int>(std::min<std::uint64_t>(full - 1 - at.skip_top, 3)));
  }
  return at;
}

// All channels in order, some replaced by zero channels (-1), the list cut short or padded to
// an even length, the split at a random even point: entries stay in their words' places.
void in_place_channels(ck::DenseConv& c, std::mt19937& rng) {
  c.channels.clear();
  const std::uint64_t n = rng() % 3 ? c.plane_count : rng() % (c.plane_count + 1);
  for (std::uint64_t i = 0; i < n; ++i)
    c.channels.push_back(rng() % 6 == 0 ? -1 : static_cast<std::int64_t>(i));
  if (c.channels.size() % 2) c.channels.push_back(-1);
  // A split at a multiple of 4 (a dense layer's is at a channel group): at 4i + 2 the quads'
  // padding would move the channels after it out of their places.
  c.split = std::min<std::uint64_t>(c.channels.size(), 4 * (rng() % (c.channels.size() / 4 + 2)));
}

ck::DenseConv conv_on(const Placement& at, const WordImage& im, std::uint64_t k,
                      std::uint64_t stride = 1) {
  ck::DenseConv c;
  c.stride = stride;
  c.plane_count = at.channels;
  c.padded_h = at.plane_h(), c.padded_w = at.plane_w();
  c.kh = c.kw = std::min({k, c.padded_h, c.padded_w});
  c.planes = im.planes.data();
  c.words = &im.words;
  return c;
}

std::vector<ck::detail::WordRows> word_rows() {
  std::vector<ck::detail::WordRows> rows = {{}};
  if (cpu::supports(Isa::kAvx2))
    rows.push_back({ck::detail::quad_row_avx2, ck::detail::pair_row_avx2});
  return rows;
}

TEST(ConvWords, PackedWordsEqualThoseFromPlanes) {
  namespace d = ck::detail;
  std::mt19937 rng(613);
  int quads_checked = 0, negatives_found = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const Placement at = random_placement(rng);
    // Trials without negatives in the image, with one somewhere (maybe in a dropped row, or in
    // a channel the list leaves out), and with many.
    const int kind = trial % 3;
    const std::uint64_t P = at.width * at.height;
    const std::uint64_t neg_c = rng() % at.channels, neg_p = rng() % P;
    std::uniform_int_distribution<int> any(-128, 127), relu(0, 127);
    const WordImage im = make_image(at, rng, [&](std::uint64_t c, std::uint64_t p) {
      if (kind == 2) return any(rng);
      if (kind == 1 && c == neg_c && p == neg_p) return -1 - relu(rng);
      return relu(rng);
    });
    ck::DenseConv c = conv_on(at, im, 1 + rng() % 3, trial % 4 ? 1 + trial % 4 / 2 : 1 + rng() % 4);
    in_place_channels(c, rng);
    SCOPED_TRACE(::testing::Message()
                 << "trial " << trial << ": " << at.channels << " channels " << at.height << "x"
                 << at.width << " kernel " << c.kh << " stride " << c.stride << " pads t"
                 << at.pad_top << " b" << at.pad_bottom << " l" << at.left << " r" << at.right
                 << " skips " << at.skip_top << "/" << at.skip_bottom << ", " << c.channels.size()
                 << " listed, split " << c.split);
    ASSERT_TRUE(d::words_in_place(c));
    // Quads: the words' check must find a negative value exactly when one is packed (a byte
    // 0x80 or more in the quads packed from the planes), which it must when the planes' whole
    // check does at stride 1 (at larger strides, some values are read by no tap).
    d::PackedQuads want;
    d::pack_quads(c, want, 0);
    bool want_ok = true;
    for (const std::uint32_t w : want.x) want_ok &= (w & 0x80808080u) == 0;
    if (c.stride == 1) {
      EXPECT_EQ(want_ok, d::inputs_nonnegative(c));
    } else if (d::inputs_nonnegative(c)) {
      EXPECT_TRUE(want_ok);
    }
    negatives_found += !want_ok;
    for (const d::WordRows& rows : word_rows()) {
      d::PackedQuads got;
      got.x.assign(7, 0xDEADBEEF);  // a reused buffer's leftovers
      ASSERT_EQ(d::pack_quads(c, got, 0, nullptr, rows.quads), want_ok);
      if (want_ok) {
        EXPECT_EQ(got.x, want.x);
        EXPECT_EQ(got.q_padded, want.q_padded);
        ++quads_checked;
      }
      d::Packed pairs_want, pairs_got;
      pairs_got.x.assign(5, 0xDEADBEEF);
      d::pack(c, pairs_want, d::kGemmBlock);
      d::pack(c, pairs_got, d::kGemmBlock, rows.pairs);
      EXPECT_EQ(pairs_got.x, pairs_want.x);
    }
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(quads_checked, 300);
  EXPECT_GT(negatives_found, 200);
}

// Lists whose entries are not in their words' places: the words cannot give the operands.
TEST(ConvWords, ChannelsOutOfPlaceNeedThePlanes) {
  std::mt19937 rng(5);
  const Placement at{16, 7, 3, 1, 1, 0, 0, 1, 1};
  const WordImage im = make_image(at, rng, [](std::uint64_t, std::uint64_t) { return 1; });
  ck::DenseConv c = conv_on(at, im, 3);
  auto reads = [&](std::vector<std::int64_t> channels, std::uint64_t split) {
    c.channels = std::move(channels);
    c.split = split;
    return ck::detail::words_in_place(c);
  };
  EXPECT_TRUE(reads({0, 1, 2, 3, 4, 5, 6, 7}, 8));
  EXPECT_TRUE(reads({-1, 1, 2, -1, 4, 5}, 4));
  EXPECT_FALSE(reads({-1, 1, 2, -1, 4, 5}, 2));  // the quads' padding at the split moves 2
  EXPECT_FALSE(reads({1, 0}, 2));                // swapped
  EXPECT_FALSE(reads({0, 1, 3, -1}, 4));         // 3 in 2's place
  EXPECT_FALSE(reads({0, 2}, 2));                // a channel left out: 2 in 1's place
  EXPECT_FALSE(reads({0, 1, 2, 3, 4, 5}, 2));    // the split's zero channels move 2 into 0's place
  std::vector<std::int64_t> past(18);
  std::iota(past.begin(), past.end(), 0);
  EXPECT_FALSE(reads(past, 16));  // in order, but 16 and 17 are past the words' 16 channels
  c.channels = {0, 1}, c.split = 2;
  c.words = nullptr;
  EXPECT_FALSE(ck::detail::words_in_place(c));
}

// Whole convs from the words alone (no planes) against the plain loop over the planes: every
// GEMM tile set with every row packer, and dense_conv at each level this CPU has.
TEST(ConvWords, ConvsFromWordsAloneEqualThePlainLoop) {
  namespace d = ck::detail;
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> any(-128, 127), relu(0, 127);
  for (int trial = 0; trial < 120; ++trial) {
    const Placement at = random_placement(rng);
    const bool signed_values = trial % 2;
    const WordImage im = make_image(at, rng, [&](std::uint64_t, std::uint64_t) {
      return signed_values ? any(rng) : relu(rng);
    });
    ck::DenseConv c = conv_on(at, im, 1 + rng() % 3, 1 + rng() % 3);
    in_place_channels(c, rng);
    c.kn = 1 + rng() % 80;
    c.snapshot_from = rng() % 2 ? c.kn : rng() % c.kn;
    std::vector<std::int8_t> weights(c.kn * c.plane_count * c.kh * c.kw);
    for (auto& w : weights) w = static_cast<std::int8_t>(any(rng));
    c.weights = weights.data();
    std::vector<std::int64_t> acc64, snapshot64;
    conv_test::plain_conv(c, acc64, snapshot64);
    const std::vector<std::int32_t> acc = conv_test::narrow(acc64);
    const std::vector<std::int32_t> snapshot = conv_test::narrow(snapshot64);
    c.planes = nullptr;
    SCOPED_TRACE(::testing::Message()
                 << "trial " << trial << ": " << at.channels << " channels " << at.height << "x"
                 << at.width << " kernel " << c.kh << " stride " << c.stride);
    auto check = [&](const char* what, auto&& run) {
      std::vector<std::int32_t> a(acc.size(), 0x5A5A5A5A), s(snapshot.size(), 0x5A5A5A5A);
      run(a.data(), c.snapshot_from < c.kn ? s.data() : nullptr);
      EXPECT_EQ(a, acc) << what;
      if (c.snapshot_from < c.kn) {
        EXPECT_EQ(s, snapshot) << what;
      }
    };
    for (const d::WordRows& rows : word_rows()) {
      const bool avx2 = rows.quads == d::quad_row_avx2;
      check("scalar tiles", [&](std::int32_t* a, std::int32_t* s) {
        d::dense_conv_gemm(c, a, s, d::gemm_quads_scalar, d::gemm_pairs_scalar, d::lanes_out_scalar,
                           d::interleave_quads_scalar, rows);
      });
      check("scalar pair tiles", [&](std::int32_t* a, std::int32_t* s) {
        d::dense_conv_gemm(c, a, s, nullptr, d::gemm_pairs_scalar, d::lanes_out_scalar,
                           d::interleave_quads_scalar, rows);
      });
      if (avx2)
        check("avx2 tiles", [&](std::int32_t* a, std::int32_t* s) {
          d::dense_conv_gemm(c, a, s, d::gemm_quads_avx2, d::gemm_pairs_avx2, d::lanes_out_avx2,
                             d::interleave_quads_avx2, rows);
        });
    }
    for (const Isa isa : cpu::kAllIsas) {
      if (!cpu::supports(isa)) continue;
      if (!ck::reads_words(c, isa)) continue;  // the levels that need the planes
      check(std::string(cpu::name(isa)).c_str(),
            [&](std::int32_t* a, std::int32_t* s) { ck::dense_conv(c, a, s, isa); });
    }
    if (::testing::Test::HasFailure()) break;
  }
}

}  // namespace
}  // namespace npukit::device
