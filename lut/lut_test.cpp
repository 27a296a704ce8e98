// Register-exact LUT model: hand-worked examples of nvdla-lut.md section 8, programming through
// ACCESS_CFG/ACCESS_DATA, field decoding, statistics rules, and every case file in fixtures/lut/
// (whose expected values come from fixtures/lut/gen_cases.py, an independent exact-arithmetic
// implementation).
#include "lut/lut.h"
#include "lut/case_file.h"
#include "lut/nvdla_fp.h"

#include "common/error.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

namespace npukit::lut {
namespace {

constexpr std::uint32_t kWriteLe = 1u << 17;
constexpr std::uint32_t kWriteLo = (1u << 17) | (1u << 16);
constexpr std::uint32_t kReadLe = 0;
constexpr std::uint32_t kReadLo = 1u << 16;

std::uint32_t info(int off, int le_sel, int lo_sel) {
  return (std::uint32_t(off) & 0xffu) | ((std::uint32_t(le_sel) & 0xffu) << 8) |
         ((std::uint32_t(lo_sel) & 0xffu) << 16);
}
std::uint32_t pair16(int lo, int hi) {
  return (std::uint32_t(lo) & 0xffffu) | ((std::uint32_t(hi) & 0xffffu) << 16);
}
std::uint32_t shifts(int uflow, int oflow) {
  return (std::uint32_t(uflow) & 0x1fu) | ((std::uint32_t(oflow) & 0x1fu) << 5);
}

template <typename FnLe, typename FnLo>
void program_tables(LutUnit& u, FnLe le, FnLo lo) {
  u.write("S_LUT_ACCESS_CFG", kWriteLe);
  for (int i = 0; i < kLeEntries; ++i) u.write("S_LUT_ACCESS_DATA", std::uint32_t(le(i)) & 0xffffu);
  u.write("S_LUT_ACCESS_CFG", kWriteLo);
  for (int i = 0; i < kLoEntries; ++i) u.write("S_LUT_ACCESS_DATA", std::uint32_t(lo(i)) & 0xffffu);
}

// nvdla-lut.md 8: SDP INT, linear LE (start -1000, sel 4, LE[i] = 100i) and linear LO (start 0,
// sel 2, LO[i] = -7i); LE oflow slope -5 with shift field 30 (= -2); uflow slope 3 >> 1.
LutUnit spec_linear_unit() {
  LutUnit u(Unit::kSdp, Precision::kInt);
  program_tables(
      u, [](int i) { return 100 * i; }, [](int i) { return -7 * i; });
  u.write("S_LUT_CFG", 1);  // LE linear, all priorities LE
  u.write("S_LUT_INFO", info(0, 4, 2));
  u.write("S_LUT_LE_START", std::uint32_t(-1000));
  u.write("S_LUT_LE_END", 24);
  u.write("S_LUT_LO_START", 0);
  u.write("S_LUT_LO_END", 1024);
  u.write("S_LUT_LE_SLOPE_SCALE", pair16(3, -5));
  u.write("S_LUT_LE_SLOPE_SHIFT", shifts(1, 30));
  return u;
}

TEST(SpecExamples, SdpIntLinear) {
  LutUnit u = spec_linear_unit();
  EXPECT_EQ(u.eval(-999).output, 6);   // 6.25
  EXPECT_EQ(u.eval(-993).output, 44);  // 43.75
  EXPECT_EQ(u.eval(0).output, 6250);
  EXPECT_EQ(u.eval(1).output, 6256);       // both hit, hybrid priority LE
  EXPECT_EQ(u.eval(1023).output, -1790);   // LE oflow, LO hit: -1790.25
  EXPECT_EQ(u.eval(1024).output, -13600);  // both oflow: 6400 + (1024 - 24) * -5 << 2
  EXPECT_EQ(u.eval(-2000).output, -1500);  // both uflow: (-1000 * 3) >> 1
}

TEST(SpecExamples, SdpIntLinearFlags) {
  LutUnit u = spec_linear_unit();
  const Element both = u.eval(1);
  EXPECT_TRUE(both.le_hit && both.lo_hit);
  EXPECT_EQ(both.selected, Table::kLe);
  const Element lo_only = u.eval(1023);
  EXPECT_TRUE(lo_only.le_oflow && lo_only.lo_hit);
  EXPECT_EQ(lo_only.selected, Table::kLo);
  const Element start = u.eval(-1000);  // x == START is underflow
  EXPECT_TRUE(start.le_uflow);
}

// nvdla-lut.md 8: SDP INT exponent mode, start 0, offset 2, uflow slope 3 >> 1; LO never hits.
LutUnit spec_exponent_unit(int offset) {
  LutUnit u(Unit::kSdp, Precision::kInt);
  program_tables(
      u, [](int i) { return 100 * i; }, [](int) { return 0; });
  u.write("S_LUT_CFG", 0);
  u.write("S_LUT_INFO", info(offset, 0, 0));
  u.write("S_LUT_LO_START", 1u << 30);
  u.write("S_LUT_LE_SLOPE_SCALE", pair16(3, 0));
  u.write("S_LUT_LE_SLOPE_SHIFT", shifts(1, 0));
  return u;
}

TEST(SpecExamples, SdpIntExponent) {
  LutUnit u = spec_exponent_unit(2);
  EXPECT_EQ(u.eval(0).output, -6);          // (0 - (0 + 4)) * 3 >> 1
  EXPECT_EQ(u.eval(5).output, 25);          // index 0, fraction 1/4
  EXPECT_EQ(u.eval(100).output, 456);       // index 4, fraction 36/64
  EXPECT_EQ(u.eval(1 << 20).output, 1800);  // index 18
}

TEST(SpecExamples, ExponentUnderflowBiasFollowsRtl) {
  // DECISIONS.md 13: bias = 1 << off for off >= 0, so off == 0 subtracts 1 (the cmod would not).
  LutUnit u = spec_exponent_unit(0);
  EXPECT_EQ(u.eval(0).output, -2);  // (0 - 1) * 3 = -3, >> 1 rounds half away from zero
  LutUnit negative = spec_exponent_unit(-3);
  EXPECT_EQ(negative.eval(-10).output, -15);  // off < 0: no bias, (-10 * 3) >> 1
}

TEST(SpecExamples, NegativeAndLargeSelects) {
  LutUnit u(Unit::kSdp, Precision::kInt);
  program_tables(
      u, [](int i) { return 10 * i; }, [](int i) { return 1000 + i; });
  u.write("S_LUT_CFG", 1 | (1u << 6));  // hybrid priority LO, so LO's fraction shows
  u.write("S_LUT_INFO", info(0, -2, 40));
  u.write("S_LUT_LE_START", 0);
  u.write("S_LUT_LO_START", 0);
  // LE sel -2: address d * 4, fraction 0; d * 4 >= 64 overflows.
  Element e = u.eval(3);
  EXPECT_TRUE(e.le_hit);
  u.write("S_LUT_CFG", 1);           // hybrid LE
  EXPECT_EQ(u.eval(3).output, 120);  // LE[12], no interpolation
  EXPECT_TRUE(u.eval(16).le_oflow);
  EXPECT_TRUE(u.eval(15).le_hit);
  // LO sel 40: index 0 and fraction d >> 5 over 2^35, i.e. d / 2^40.
  u.write("S_LUT_CFG", 1 | (1u << 6));
  u.write("S_LUT_LE_START", std::uint32_t(INT32_MAX));  // LE always underflows now
  LutConfig c = u.config();
  c.lo[0] = 0;
  c.lo[1] = 4000;
  EXPECT_EQ(evaluate(c, (1 << 30)).output, 4);  // 4000 * 2^30 / 2^40 = 3.90625 -> 4
}

std::uint32_t f32(float v) { return fp::fp32_bits(v); }

// nvdla-lut.md 8: the nvdla/sw FP16 sigmoid (LO only, start -16, select -3).
TEST(SpecExamples, SdpFp16Sigmoid) {
  LutUnit u(Unit::kSdp, Precision::kFp16);
  u.write("S_LUT_ACCESS_CFG", kWriteLo);
  for (int i = 0; i < kLoEntries; ++i) {
    std::uint32_t v = 0x3000;  // arbitrary filler; only the entries below are used
    if (i == 0) v = 0x0002;
    if (i == 128) v = 0x3800;
    if (i == 136) v = 0x39d9;  // fp16(sigmoid(1)) = 1497/2048
    if (i == 256) v = 0x3c00;
    u.write("S_LUT_ACCESS_DATA", v);
  }
  u.write("S_LUT_CFG", 1 | (1u << 4) | (1u << 5) | (1u << 6));
  u.write("S_LUT_INFO", info(0, -128, -3));
  u.write("S_LUT_LO_START", 0xC1800000u);
  EXPECT_EQ(u.eval(f32(0.0f)).output, 0x3f000000);
  EXPECT_EQ(u.eval(f32(1.0f)).output, 0x3f3b2000);
  EXPECT_EQ(u.eval(f32(-16.0f)).output, 0x34000000);  // x - start == 0 is underflow -> LO[0]
  EXPECT_EQ(u.eval(f32(16.0f)).output, 0x3f800000);   // overflow -> LO[256]
}

// ---- programming through ACCESS_CFG / ACCESS_DATA ----

TEST(Programming, AutoIncrementAndReadBack) {
  LutUnit u(Unit::kCdp, Precision::kInt16);
  u.write("S_LUT_ACCESS_CFG", kWriteLo | 250);
  for (int i = 0; i < 7; ++i) u.write("S_LUT_ACCESS_DATA", 0x1000u + i);
  EXPECT_TRUE(u.diagnostics().empty());
  u.write("S_LUT_ACCESS_CFG", kReadLo | 250);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(u.read("S_LUT_ACCESS_DATA"), 0x1000u + i);
  EXPECT_EQ(u.read("S_LUT_ACCESS_CFG"), kReadLo | 257);  // live address after 7 reads
  EXPECT_EQ(u.config().lo[256], 0x1006);
  u.write("S_LUT_ACCESS_CFG", kReadLe | 3);
  EXPECT_EQ(u.read("S_LUT_ACCESS_DATA"), 0u);
}

TEST(Programming, WritePastEndIsReportedAndDropped) {
  LutUnit u(Unit::kSdp, Precision::kInt);
  u.write("S_LUT_ACCESS_CFG", kWriteLe | 64);
  u.write("S_LUT_ACCESS_DATA", 7);   // entry 64: fine
  u.write("S_LUT_ACCESS_DATA", 99);  // entry 65 does not exist
  ASSERT_EQ(u.diagnostics().size(), 1u);
  EXPECT_TRUE(u.diagnostics()[0].is_error());
  EXPECT_EQ(u.diagnostics()[0].code, "write_past_end");
  EXPECT_EQ(u.config().le[64], 7);  // not overwritten (the cmod would saturate onto it)
}

TEST(Programming, ReadPastEndAndUnknownRegister) {
  LutUnit u(Unit::kSdp, Precision::kInt);
  u.write("S_LUT_ACCESS_CFG", kReadLo | 257);
  EXPECT_EQ(u.read("S_LUT_ACCESS_DATA"), 0u);
  ASSERT_FALSE(u.diagnostics().empty());
  EXPECT_EQ(u.diagnostics().back().code, "read_past_end");
  EXPECT_THROW(u.write("S_LUT_LE_START_LOW", 0), Error);  // that is a CDP name
  EXPECT_THROW(u.write("S_NOPE", 0), Error);
}

TEST(Programming, ReservedBitsAndReadOnly) {
  LutUnit u(Unit::kSdp, Precision::kInt);
  u.write("S_LUT_CFG", 0x80000001u);
  EXPECT_EQ(u.diagnostics().back().code, "reserved_bits");
  EXPECT_TRUE(u.config().le_linear);
  u.write("D_PERF_LUT_HYBRID", 5);
  EXPECT_EQ(u.diagnostics().back().code, "read_only_register");
}

// ---- field decoding ----

TEST(Fields, CdpStartIs38BitSigned) {
  LutUnit u(Unit::kCdp, Precision::kInt16);
  u.write("S_LUT_LE_START_LOW", 0x00000005u);
  u.write("S_LUT_LE_START_HIGH", 0x20u);  // bit 37: negative
  u.write("S_LUT_LO_END_LOW", 0xffffffffu);
  u.write("S_LUT_LO_END_HIGH", 0x1fu);
  const LutConfig c = u.config();
  EXPECT_EQ(c.le_start, -(std::int64_t(1) << 37) + 5);
  EXPECT_EQ(c.lo_end, (std::int64_t(1) << 37) - 1);
}

TEST(Fields, SelectSignExtensionPerPath) {
  for (auto [precision, field, expected] :
       {std::tuple{Precision::kInt8, 0x3eu, -2}, std::tuple{Precision::kInt8, 0xc2u, 2},
        std::tuple{Precision::kInt16, 0x7du, -3}, std::tuple{Precision::kInt16, 0x3fu, 63},
        std::tuple{Precision::kFp16, 0xfeu, -2}, std::tuple{Precision::kFp16, 0x7fu, 127}}) {
    LutUnit u(Unit::kCdp, precision);
    u.write("S_LUT_INFO", (field << 8) | (field << 16));
    EXPECT_EQ(u.config().le_index_select, expected) << field;
    EXPECT_EQ(u.config().lo_index_select, expected) << field;
  }
  LutUnit sdp(Unit::kSdp, Precision::kInt);
  sdp.write("S_LUT_INFO", 0x80c1ffu);
  EXPECT_EQ(sdp.config().le_index_offset, -1);
  EXPECT_EQ(sdp.config().le_index_select, -63);
  EXPECT_EQ(sdp.config().lo_index_select, -128);
}

TEST(Fields, SlopeShiftIsFiveBitSigned) {
  LutUnit u(Unit::kSdp, Precision::kInt);
  u.write("S_LUT_LO_SLOPE_SHIFT", shifts(16, 15));
  u.write("S_LUT_LO_SLOPE_SCALE", pair16(-32768, 32767));
  const LutConfig c = u.config();
  EXPECT_EQ(c.lo_uflow.shift, -16);
  EXPECT_EQ(c.lo_oflow.shift, 15);
  EXPECT_EQ(c.lo_uflow.scale, -32768);
  EXPECT_EQ(c.lo_oflow.scale, 32767);
}

TEST(Fields, RegisterWritesRoundTrip) {
  LutUnit u(Unit::kCdp, Precision::kInt16);
  program_tables(
      u, [](int i) { return i * 3 - 50; }, [](int i) { return 7 - i; });
  u.write("S_LUT_CFG", 0x51);
  u.write("S_LUT_INFO", info(-5, 12, -7));
  u.write("S_LUT_LE_START_LOW", 0x12345678u);
  u.write("S_LUT_LE_START_HIGH", 0x2au);
  u.write("S_LUT_LO_SLOPE_SHIFT", shifts(3, 29));
  const LutConfig c = u.config();
  LutUnit v(Unit::kCdp, Precision::kInt16);
  for (const auto& [reg, value] : register_writes(c)) v.write(reg, value);
  const LutConfig d = v.config();
  EXPECT_EQ(d.le, c.le);
  EXPECT_EQ(d.lo, c.lo);
  EXPECT_EQ(d.le_start, c.le_start);
  EXPECT_EQ(d.le_index_offset, c.le_index_offset);
  EXPECT_EQ(d.lo_index_select, c.lo_index_select);
  EXPECT_EQ(d.lo_oflow.shift, c.lo_oflow.shift);
  EXPECT_EQ(d.uflow_priority_lo, c.uflow_priority_lo);
  EXPECT_EQ(d.hybrid_priority_lo, c.hybrid_priority_lo);
}

// ---- constraint reporting ----

bool has(const std::vector<Diagnostic>& d, const std::string& code) {
  return std::any_of(d.begin(), d.end(), [&](const Diagnostic& x) { return x.code == code; });
}

TEST(Constraints, EndStartMustMatchSelect) {
  LutUnit u = spec_linear_unit();  // LE: -1000 + 2^10 = 24 ok; LO: 0 + 2^10 = 1024 ok
  EXPECT_TRUE(check_constraints(u.config()).empty());
  u.write("S_LUT_LO_END", 1000);
  EXPECT_TRUE(has(check_constraints(u.config()), "end_start_mismatch"));
  u.eval(0);
  EXPECT_TRUE(has(u.diagnostics(), "end_start_mismatch"));
  EXPECT_FALSE(u.diagnostics().back().is_error());
}

TEST(Constraints, SelectAndOffsetRanges) {
  LutConfig c;
  c.unit = Unit::kSdp;
  c.precision = Precision::kInt;
  c.le_linear = true;
  c.le_index_select = 26;  // SDP INT LE: [-6, 25]
  c.lo_index_select = 8;
  EXPECT_TRUE(has(check_constraints(c), "select_range"));
  c.le_index_select = 25;
  c.le_linear = false;
  c.le_index_offset = 32;  // SDP offset [-64, 31]
  EXPECT_TRUE(has(check_constraints(c), "offset_range"));
  c.unit = Unit::kCdp;
  c.precision = Precision::kInt8;
  c.le_index_offset = 20;
  c.lo_start = 1 << 21;  // not a 22-bit signed value
  EXPECT_TRUE(has(check_constraints(c), "int8_start_width"));
}

// ---- statistics ----

TEST(Stats, SdpCountsPerTableCdpExclusive) {
  Element both;  // hits both tables, hybrid selects LE
  both.le_hit = both.lo_hit = true;
  Stats s;
  count(Unit::kSdp, both, s);
  EXPECT_EQ(s, (Stats{1, 1, 0, 0, 1}));
  Stats c;
  count(Unit::kCdp, both, c);
  EXPECT_EQ(c, (Stats{0, 0, 0, 0, 1}));
  Element mixed;  // LE underflow, LO overflow, hybrid selects LO
  mixed.le_uflow = true;
  mixed.lo_oflow = true;
  mixed.oflow = true;
  mixed.selected = Table::kLo;
  Stats s2, c2;
  count(Unit::kSdp, mixed, s2);
  count(Unit::kCdp, mixed, c2);
  EXPECT_EQ(s2, (Stats{0, 0, 0, 1, 0}));  // the selected table's overflow
  EXPECT_EQ(c2, (Stats{0, 0, 0, 0, 1}));  // "priority" category
}

TEST(Stats, SaturateAtAllOnes) {
  Element hit;
  hit.le_hit = true;
  Stats s{0xffffffffu, 0, 0, 0, 0xfffffffeu};
  count(Unit::kSdp, hit, s);
  count(Unit::kSdp, hit, s);
  EXPECT_EQ(s.le_hit, 0xffffffffu);
  EXPECT_EQ(s.hybrid, 0xffffffffu);
}

TEST(Stats, PerfRegistersReadCounters) {
  LutUnit u = spec_linear_unit();
  for (int x : {-999, 1, 1023, 1024, -2000}) u.eval(x);
  EXPECT_EQ(u.read("D_PERF_LUT_LE_HIT"), 2u);  // -999 and 1
  EXPECT_EQ(u.read("D_PERF_LUT_LO_HIT"), 2u);  // 1 and 1023
  EXPECT_EQ(u.read("D_PERF_LUT_HYBRID"), 3u);  // -999, 1, 1023 select a hit
  EXPECT_EQ(u.read("D_PERF_LUT_OFLOW"), 1u);
  EXPECT_EQ(u.read("D_PERF_LUT_UFLOW"), 1u);
}

// ---- properties ----

// Random monotone (non-decreasing) tables with zero or positive slopes give non-decreasing outputs
// within rounding, in every pipeline; statistics sum as each unit's rules say.
TEST(Properties, MonotoneTablesGiveMonotoneOutputsAndStatsSum) {
  std::mt19937 rng(7);
  for (auto [unit, precision] :
       {std::pair{Unit::kSdp, Precision::kInt}, std::pair{Unit::kCdp, Precision::kInt8},
        std::pair{Unit::kCdp, Precision::kInt16}}) {
    for (int trial = 0; trial < 6; ++trial) {
      LutConfig c;
      c.unit = unit;
      c.precision = precision;
      // LO: a random non-decreasing raw table, step 16 from -300.
      int v = -20000;
      for (auto& e : c.lo) e = std::uint16_t(v += int(rng() % 150));
      c.lo_index_select = 4;
      c.lo_start = -300;
      c.lo_end = c.lo_start + (1 << 12);
      // LE: a density table (step 8 from -100) sampling the LO interpolant, rounded.
      for (int i = 0; i < kLeEntries; ++i) {
        const int j = 12 + i / 2;
        const int a = std::int16_t(c.lo[j]), b = std::int16_t(c.lo[j + 1]);
        c.le[i] = std::uint16_t(i % 2 == 0 ? (a + b + 1) / 2 : b);
      }
      c.le_linear = true;
      c.le_index_select = 3;
      c.le_start = -100;
      c.le_end = c.le_start + (1 << 9);
      c.hybrid_priority_lo = false;  // LE where it hits
      c.uflow_priority_lo = c.oflow_priority_lo = true;
      std::int64_t previous = INT32_MIN;
      Stats s;
      int n = 0;
      for (std::int64_t x = -400; x < 4000; ++x, ++n) {
        const Element e = evaluate(c, x);
        count(unit, e, s);
        EXPECT_GE(e.output, previous - 1) << "x=" << x;  // within one rounding step
        previous = e.output;
      }
      if (unit == Unit::kSdp) {
        EXPECT_EQ(std::uint64_t(s.uflow) + s.oflow + s.hybrid, std::uint64_t(n));
        EXPECT_LE(s.hybrid, std::uint64_t(s.le_hit) + s.lo_hit);
        EXPECT_EQ(s.le_hit, 511u);  // -100 < x < 412
      } else {
        EXPECT_EQ(std::uint64_t(s.uflow) + s.oflow + s.hybrid + s.le_hit + s.lo_hit,
                  std::uint64_t(n));
        EXPECT_EQ(s.hybrid, 511u);  // both tables hit exactly on LE's range
      }
    }
  }
}

TEST(Properties, MonotoneFp16TableGivesMonotoneOutputs) {
  for (Unit unit : {Unit::kSdp, Unit::kCdp}) {
    LutConfig c;
    c.unit = unit;
    c.precision = Precision::kFp16;
    for (int i = 0; i < kLoEntries; ++i) {
      c.lo[i] = std::uint16_t(fp::fp16_from_double(std::tanh((i - 128) / 32.0)));
    }
    c.le_linear = true;
    c.le_index_select = -128;
    c.lo_index_select = -5;
    c.lo_start = fp::fp32_bits(-4.0f);
    c.lo_end = fp::fp32_bits(4.0f);
    c.uflow_priority_lo = c.oflow_priority_lo = c.hybrid_priority_lo = true;
    // Each NVDLA FP17 operation rounds to 11 bits, so "within rounding" is two FP17 ulps.
    double previous = -2;
    for (float x = -5.0f; x < 5.0f; x += 1.0f / 1024) {
      const double y = fp::fp32_value(std::uint32_t(evaluate(c, fp::fp32_bits(x)).output));
      const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(y), 1e-6)) - 10);
      EXPECT_GE(y, previous - 2 * ulp) << "x=" << x;
      previous = y;
    }
  }
}

TEST(Inputs, OutOfRangeInputsAreRejected) {
  LutConfig c;
  c.unit = Unit::kCdp;
  c.precision = Precision::kInt8;
  EXPECT_THROW(evaluate(c, 1 << 21), Error);
  EXPECT_NO_THROW(evaluate(c, (1 << 21) - 1));
  c.precision = Precision::kFp16;
  EXPECT_THROW(evaluate(c, -1), Error);
}

// ---- case files ----

TEST(CaseFiles, EveryFixturePasses) {
  const std::filesystem::path dir = std::filesystem::path(NPUKIT_SOURCE_DIR) / "fixtures" / "lut";
  int count_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++count_files;
    const CaseFile c = load_case(entry.path().string());
    ASSERT_TRUE(c.expected_outputs.has_value()) << entry.path();
    const CaseResult r = run_case(c);
    const auto mismatches = compare_case(c, r);
    EXPECT_TRUE(mismatches.empty()) << entry.path() << ": " << mismatches.front();
  }
  EXPECT_GE(count_files, 40);
}

TEST(CaseFiles, MalformedFilesNameTheProblem) {
  auto message = [](const char* text) {
    try {
      parse_case(nlohmann::json::parse(text), "t.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(R"({"unit":"sdp","precision":"int","writes":[],"inputs":[1]})"), "no error");
  EXPECT_NE(
      message(R"({"unit":"npu","precision":"int","writes":[],"inputs":[]})").find("unknown unit"),
      std::string::npos);
  EXPECT_NE(message(R"({"unit":"sdp","precision":"int","writes":[["S_LUT_FOO",1]],"inputs":[]})")
                .find("writes[0]"),
            std::string::npos);
  EXPECT_NE(message(R"({"unit":"cdp","precision":"int8","writes":[],"inputs":[0,4194304]})")
                .find("inputs[1]"),
            std::string::npos);
  EXPECT_NE(message(R"({"unit":"sdp","precision":"int","writes":[],"inputs":[1],
                        "expected":{"outputs":[1,2]}})")
                .find("expected.outputs has 2"),
            std::string::npos);
}

}  // namespace
}  // namespace npukit::lut
