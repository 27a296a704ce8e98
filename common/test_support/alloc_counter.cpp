#include "common/test_support/alloc_counter.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace npukit::test_support {
namespace {
std::atomic<bool> g_counting{false};
std::atomic<std::size_t> g_big_from{16u << 10};
std::atomic<std::uint64_t> g_calls{0}, g_bytes{0}, g_big{0};
}  // namespace

void start_counting(std::size_t big_from) {
  g_calls = 0, g_bytes = 0, g_big = 0;
  g_big_from = big_from;
  g_counting.store(true, std::memory_order_release);
}

AllocationCount stop_counting() {
  g_counting.store(false, std::memory_order_release);
  return {g_calls.load(), g_bytes.load(), g_big.load()};
}

// The allocator behind every replaced form: std::malloc, counted while counting.
void* counted_malloc(std::size_t n) noexcept {
  if (g_counting.load(std::memory_order_relaxed)) {
    g_calls.fetch_add(1, std::memory_order_relaxed);
    g_bytes.fetch_add(n, std::memory_order_relaxed);
    if (n >= g_big_from.load(std::memory_order_relaxed))
      g_big.fetch_add(1, std::memory_order_relaxed);
  }
  return std::malloc(n ? n : 1);
}
}  // namespace npukit::test_support

using npukit::test_support::counted_malloc;

void* operator new(std::size_t n) {
  if (void* p = counted_malloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // operator new here is std::malloc
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
