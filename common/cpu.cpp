// CPU feature detection with cpuid and xgetbv (common/cpu.h). The instruction set bits alone are
// not enough: the OS must also save the wider registers on a context switch (XCR0), or the
// first AVX-512 instruction faults.
#include "common/cpu.h"

#include "common/error.h"

#include <atomic>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace npukit::cpu {

namespace {

struct Features {
  bool avx2 = false, avxvnni = false, avx512vnni = false;
};

Features probe() {
  Features f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1;
  if (!osxsave || !avx) return f;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool ymm_state = (xcr0_lo & 0x6) == 0x6;    // SSE and AVX state
  const bool zmm_state = (xcr0_lo & 0xE6) == 0xE6;  // + opmask, ZMM0-15 upper, ZMM16-31
  if (!ymm_state || __get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  const bool avx2 = (b >> 5) & 1;
  const bool avx512f = (b >> 16) & 1, avx512bw = (b >> 30) & 1, avx512vl = (b >> 31) & 1;
  const bool avx512_vnni = (c >> 11) & 1;
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  __cpuid_count(7, 1, a1, b1, c1, d1);
  const bool avx_vnni = (a1 >> 4) & 1;
  f.avx2 = avx2 && fma;
  f.avxvnni = f.avx2 && avx_vnni;
  f.avx512vnni = f.avx2 && zmm_state && avx512f && avx512bw && avx512vl && avx512_vnni;
#endif
  return f;
}

const Features& features() {
  static const Features f = probe();
  return f;
}

// The level forced by ScopedIsa (kAuto: none).
std::atomic<Isa> g_forced{Isa::kAuto};

}  // namespace

std::string_view name(Isa isa) {
  switch (isa) {
    case Isa::kAuto:
      return "auto";
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvxVnni:
      return "avxvnni";
    case Isa::kAvx512Vnni:
      return "avx512vnni";
  }
  return "?";
}

std::optional<Isa> parse(std::string_view text) {
  for (Isa isa : kAllIsas)
    if (name(isa) == text) return isa;
  return std::nullopt;
}

bool supports(Isa isa) {
  switch (isa) {
    case Isa::kAuto:
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return features().avx2;
    case Isa::kAvxVnni:
      return features().avxvnni;
    case Isa::kAvx512Vnni:
      return features().avx512vnni;
  }
  return false;
}

Isa detected() {
  if (supports(Isa::kAvx512Vnni)) return Isa::kAvx512Vnni;
  if (supports(Isa::kAvxVnni)) return Isa::kAvxVnni;
  if (supports(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kScalar;
}

std::string supported_names() {
  std::string out;
  for (Isa isa : kAllIsas)
    if (supports(isa)) {
      if (!out.empty()) out += ' ';
      out += name(isa);
    }
  return out;
}

Isa from_environment_value(const char* env) {
  if (env == nullptr || *env == 0 || std::string_view(env) == "auto") return detected();
  const std::optional<Isa> isa = parse(env);
  if (!isa)
    fail(
        "NPUKIT_ISA={} names no instruction set; use one of: auto scalar avx2 avxvnni "
        "avx512vnni",
        env);
  if (!supports(*isa))
    fail("NPUKIT_ISA={} but this CPU lacks it; it supports: {}", env, supported_names());
  return *isa;
}

Isa active() {
  const Isa forced = g_forced.load(std::memory_order_relaxed);
  if (forced != Isa::kAuto) return forced;
  static const Isa from_env =
      from_environment_value(std::getenv("NPUKIT_ISA"));  // an Error here is thrown again next call
  return from_env;
}

Isa resolve(Isa requested, std::string_view what) {
  if (requested == Isa::kAuto) return active();
  if (!supports(requested))
    fail("{}: the {} path was requested but this CPU lacks it; it supports: {}", what,
         name(requested), supported_names());
  return requested;
}

ScopedIsa::ScopedIsa(Isa isa) : previous_(g_forced.load()) {
  if (!supports(isa))
    fail("the {} path was requested but this CPU lacks it; it supports: {}", name(isa),
         supported_names());
  g_forced.store(isa);
}

ScopedIsa::~ScopedIsa() { g_forced.store(previous_); }

}  // namespace npukit::cpu
