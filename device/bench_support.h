// Shared by the device benchmarks (device/*_bench.cpp, one binary).
#pragma once

#include "common/cpu.h"

#include <benchmark/benchmark.h>

namespace npukit::device::bench {

// Marks the run skipped when this CPU lacks the level (the benchmarks run on any machine).
inline bool skipped_without(Isa level, benchmark::State& state) {
  if (cpu::supports(level)) return false;
  state.SkipWithError("this CPU lacks the level");
  return true;
}

}  // namespace npukit::device::bench
