// What the host CPU can run: kernels with an AVX2 path (xs3/, device/) pick it at run time, so one
// binary also runs on CPUs without AVX2.
#pragma once

namespace npukit {

inline bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

}  // namespace npukit
