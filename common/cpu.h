// The one CPU-feature resolver of the project: which SIMD path a kernel runs, chosen at run time
// (never at build time), so one binary runs on any x86-64 CPU and uses what the CPU has.
//
// Levels, in order: scalar (the reference every path is tested against), avx2, avxvnni (VEX
// vpdpbusd on 256-bit vectors, Alder Lake / Zen 5 and later) and avx512vnni (EVEX vpdpbusd on
// 512-bit vectors with AVX-512 F/BW/VL, Ice Lake / Zen 4 and later). The active level is, in
// order of precedence: the one a test or benchmark forced (ScopedIsa), the environment variable
// NPUKIT_ISA=scalar|avx2|avxvnni|avx512vnni, else the best the CPU (and OS) supports. Asking for
// a level the CPU lacks is an npukit::Error, not a crash on an illegal instruction.
//
// A kernel has paths for some levels; path_allowed(level, path) says which of them may run at
// a level: scalar always, avx2 at every level from avx2 up, avxvnni and avx512vnni only at their
// own level (a CPU with AVX-512 VNNI need not have AVX-VNNI, and the other way round).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace npukit {

enum class Isa { kAuto, kScalar, kAvx2, kAvxVnni, kAvx512Vnni };

namespace cpu {

// The concrete levels, in order.
inline constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512Vnni};

// "auto", "scalar", "avx2", "avxvnni", "avx512vnni".
std::string_view name(Isa isa);
// The inverse of name() (no "auto"); nullopt for anything else.
std::optional<Isa> parse(std::string_view text);

// Whether this CPU and OS can run the level (kScalar and kAuto: always).
bool supports(Isa isa);
// The best level the CPU supports.
Isa detected();
// The levels this CPU supports, as "scalar avx2 ...".
std::string supported_names();

// The level kernels use now: forced > NPUKIT_ISA > detected(). Throws npukit::Error when
// NPUKIT_ISA names no level or one the CPU lacks.
Isa active();

// What NPUKIT_ISA = `value` selects (null, empty or "auto": detected()); an Error for an unknown
// name or a level the CPU lacks.
Isa from_environment_value(const char* value);

// A concrete level for a kernel call: kAuto -> active(); a named level is checked against the
// CPU (an Error naming `what` when it lacks it).
Isa resolve(Isa requested, std::string_view what);

// Whether a kernel's `path` may run at `level` (see the top of this file).
constexpr bool path_allowed(Isa level, Isa path) {
  if (path == Isa::kScalar) return true;
  if (path == Isa::kAvx2)
    return level == Isa::kAvx2 || level == Isa::kAvxVnni || level == Isa::kAvx512Vnni;
  return path == level;
}

// Forces the active level for the lifetime of the object (tests and benchmarks; process-wide,
// so not for concurrent use with different levels). Throws when the CPU lacks `isa`; kAuto
// restores NPUKIT_ISA / detection.
class ScopedIsa {
 public:
  explicit ScopedIsa(Isa isa);
  ~ScopedIsa();
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;

 private:
  Isa previous_;
};

}  // namespace cpu
}  // namespace npukit
