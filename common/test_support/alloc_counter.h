// Test support: counts heap allocations made through operator new while a test asks for it (the
// "no per-image allocation" checks of issue 13). Linking the npukit_alloc_counter object library
// into a test binary replaces the global operator new and delete in it, every form (plain, array,
// sized, nothrow), so that no allocation made by the C++ runtime pairs one allocator's new with
// the other's delete (AddressSanitizer reports that as a mismatch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace npukit::test_support {

struct AllocationCount {
  std::uint64_t calls = 0;  // allocations
  std::uint64_t bytes = 0;  // bytes asked for
  std::uint64_t big = 0;    // allocations of at least `big_from` bytes
};

// Counts every thread's allocations from start_counting to stop_counting (not nested).
void start_counting(std::size_t big_from = 16u << 10);
AllocationCount stop_counting();

// The allocations made while f() runs.
template <class F>
AllocationCount count_allocations(F&& f, std::size_t big_from = 16u << 10) {
  start_counting(big_from);
  try {
    std::forward<F>(f)();
  } catch (...) {
    stop_counting();
    throw;
  }
  return stop_counting();
}

}  // namespace npukit::test_support
