// Systolic-array configurations of Gati v16 and the clock/bus constants every layer shares
// (DECISIONS.md 12, gati.md 2).
#pragma once

#include <string>
#include <string_view>

namespace npukit::isa {

inline constexpr long kClockHz = 81'000'000;  // Gati core clock, 81 MHz
inline constexpr int kDramWordBytes = 32;     // AXI 256 bits: one DRAM word = one beat
inline constexpr int kFcEngineCols = 32;      // FC engine 1x32

// "sa_arch" = ROW,COLS,N_SA. Only the three configurations the RTL supports exist; construct
// them with parse() or the named constants so an unsupported array can never be built.
struct SaArch {
  int rows = 9;
  int cols = 8;
  int n_sa = 8;

  // Accepts exactly "9,4,4", "9,8,8" or "16,1,16" (spaces around the commas allowed); anything
  // else throws npukit::Error listing the supported ones.
  static SaArch parse(std::string_view text);
  static SaArch default_arch() { return {9, 8, 8}; }

  std::string str() const;  // "9,8,8"
  // dk of the activation layout (gati.md 6.1): pixels of one channel per 32-byte DRAM word.
  int pixels_per_word() const { return kDramWordBytes / n_sa; }
  // COLS == N_SA: regular convs run natively (9,4,4 and 9,8,8); 16,1,16 is pointwise-optimal.
  bool regular_optimal() const { return cols == n_sa; }

  bool operator==(const SaArch&) const = default;
};

inline constexpr SaArch kArch9x4x4{9, 4, 4};
inline constexpr SaArch kArch9x8x8{9, 8, 8};
inline constexpr SaArch kArch16x1x16{16, 1, 16};
inline constexpr SaArch kSupportedArchs[] = {kArch9x4x4, kArch9x8x8, kArch16x1x16};

}  // namespace npukit::isa
