// Register-exact model of NVDLA's two-level hybrid lookup table (nvdla-lut.md, DECISIONS.md 13-14)
// in the SDP (INT and FP16 pipelines) and the CDP (INT8, INT16 and FP16).
//
// Two layers:
//  * LutConfig + evaluate(): what the registers mean, and the bit-exact output of one LUT input.
//  * LutUnit: the register file. Tables are programmed only through S_LUT_ACCESS_CFG /
//    S_LUT_ACCESS_DATA (auto-increment, read-back) as NVDLA's driver does; statistics follow each
//    unit's counting rules. Invalid programming is reported as a Diagnostic, never undefined.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace npukit::lut {

enum class Unit { kSdp, kCdp };
// kInt is the SDP's integer pipeline (INT8 and INT16 data give the same 32-bit LUT stage).
enum class Precision { kInt, kInt8, kInt16, kFp16 };
enum class Table { kLe = 0, kLo = 1 };

inline constexpr int kLeEntries = 65;
inline constexpr int kLoEntries = 257;

Unit parse_unit(std::string_view name);
// Accepts "int", "int8", "int16", "fp16"; the SDP maps int8/int16 to kInt, the CDP needs int8 or
// int16 (no plain "int").
Precision parse_precision(Unit unit, std::string_view name);
std::string_view unit_name(Unit unit);
std::string_view precision_name(Precision precision);
inline bool is_float(Precision p) { return p == Precision::kFp16; }

struct Diagnostic {
  enum class Severity { kWarning, kError };
  Severity severity;
  std::string code;  // stable identifier, e.g. "write_past_end", "end_start_mismatch"
  std::string message;
  bool is_error() const { return severity == Severity::kError; }
};

// D_PERF_LUT_* counters. SDP: per table, not exclusive; CDP: exclusive. Saturate at all-ones.
struct Stats {
  std::uint32_t le_hit = 0;
  std::uint32_t lo_hit = 0;
  std::uint32_t uflow = 0;
  std::uint32_t oflow = 0;
  std::uint32_t hybrid = 0;
  bool operator==(const Stats&) const = default;
};

struct Slope {
  std::int16_t scale = 0;  // INT: signed integer; FP16 pipelines: FP16 bit pattern
  int shift = 0;           // signed 5-bit, -16..15; negative shifts left; unused in FP16
};

// Decoded meaning of the LUT registers, already sign-extended for the unit and precision.
struct LutConfig {
  Unit unit = Unit::kSdp;
  Precision precision = Precision::kInt;
  std::array<std::uint16_t, kLeEntries> le{};
  std::array<std::uint16_t, kLoEntries> lo{};
  bool le_linear = false;  // S_LUT_CFG.LUT_LE_FUNCTION: 0 = exponent, 1 = linear
  bool uflow_priority_lo = false;
  bool oflow_priority_lo = false;
  bool hybrid_priority_lo = false;
  int le_index_offset = 0;
  int le_index_select = 0;
  int lo_index_select = 0;
  // INT: signed values (SDP 32-bit, CDP 38-bit). FP16 pipelines: FP32 bit patterns (low 32 bits).
  std::int64_t le_start = 0, le_end = 0, lo_start = 0, lo_end = 0;
  Slope le_uflow, le_oflow, lo_uflow, lo_oflow;
};

// Outcome of one LUT input.
struct Element {
  std::int64_t output = 0;  // SDP INT: int32; CDP INT: int16; FP16 pipelines: FP32 bits
  bool le_hit = false, lo_hit = false;
  bool le_uflow = false, le_oflow = false, lo_uflow = false, lo_oflow = false;
  Table selected = Table::kLe;
  int index = 0;                      // entry address in the selected table
  bool uflow = false, oflow = false;  // flags of the selected table
};

// Bit-exact output for one input. Inputs: SDP INT int32, CDP INT8 22-bit, CDP INT16 38-bit signed,
// FP16 pipelines FP32 bit patterns 0..2^32-1; anything else throws npukit::Error.
Element evaluate(const LutConfig& config, std::int64_t input);
// Adds one element to the counters with the unit's rules.
void count(Unit unit, const Element& element, Stats& stats);
// Documented programming constraints (nvdla-lut.md 3) that `config` violates, as warnings.
std::vector<Diagnostic> check_constraints(const LutConfig& config);
// The representable input range for `precision`, for validation and the designer.
std::int64_t input_min(Unit unit, Precision precision);
std::int64_t input_max(Unit unit, Precision precision);

// Documented ranges (nvdla-lut.md 3) of LE_INDEX_SELECT, LO_INDEX_SELECT and LE_INDEX_OFFSET.
struct FieldRange {
  int lo, hi;
};
FieldRange le_select_range(Unit unit, Precision precision);
FieldRange lo_select_range(Unit unit, Precision precision);
FieldRange offset_range(Unit unit, Precision precision);

// One register of a unit's LUT block.
struct RegisterInfo {
  std::string_view name;     // NVDLA name without the unit prefix, e.g. "S_LUT_LE_START"
  std::uint32_t offset;      // byte offset within the unit (SDP base 0xb000, CDP base 0xf000)
  std::uint32_t valid_bits;  // mask of defined bits
  bool read_only;
};
std::span<const RegisterInfo> registers(Unit unit);
const RegisterInfo& find_register(Unit unit, std::string_view name);  // throws naming the choices
std::uint32_t unit_base_address(Unit unit);

// The register file of one unit's LUT, reset to all zeros.
class LutUnit {
 public:
  LutUnit(Unit unit, Precision precision);

  Unit unit() const { return unit_; }
  Precision precision() const { return precision_; }

  void write(std::string_view reg, std::uint32_t value);
  // Reading S_LUT_ACCESS_DATA returns the addressed entry and post-increments the address;
  // D_PERF_LUT_* return the counters.
  std::uint32_t read(std::string_view reg);

  // The current programming, decoded.
  LutConfig config() const;
  // Evaluates one input and counts it in the statistics.
  Element eval(std::int64_t input);
  const Stats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

  // Everything reported so far: write/read errors as they happen, constraint warnings when the
  // first input is evaluated after a change of programming.
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  std::uint32_t& reg(std::uint32_t offset);
  std::uint32_t reg_value(std::uint32_t offset) const;
  void report(Diagnostic::Severity severity, std::string code, std::string message);
  void data_access(bool is_write, std::uint32_t value, std::uint32_t* read_value);

  Unit unit_;
  Precision precision_;
  std::array<std::uint32_t, 0x100 / 4> regs_{};
  std::array<std::uint16_t, kLeEntries> le_{};
  std::array<std::uint16_t, kLoEntries> lo_{};
  std::uint32_t access_addr_ = 0;  // 10-bit, increments on every data access (RTL)
  std::uint32_t access_table_ = 0;
  bool access_write_ = false;
  Stats stats_;
  std::vector<Diagnostic> diagnostics_;
  bool config_dirty_ = true;
  LutConfig cached_;
};

// Encodes `config` as the register writes NVDLA's driver would issue (tables first through
// ACCESS_CFG/ACCESS_DATA, then CFG, INFO, starts/ends and slopes).
std::vector<std::pair<std::string, std::uint32_t>> register_writes(const LutConfig& config);

}  // namespace npukit::lut
