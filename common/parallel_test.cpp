// The thread pool (common/parallel.h): every index exactly once for every thread count, errors
// come back to the caller, nested loops run serially instead of deadlocking.
#include "common/parallel.h"

#include "common/error.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace npukit {
namespace {

struct ThreadCount {
  explicit ThreadCount(unsigned n) : before(thread_count()) { set_thread_count(n); }
  ~ThreadCount() { set_thread_count(before); }
  unsigned before;
};

TEST(Parallel, EveryIndexOnceForEveryThreadCount) {
  for (unsigned threads : {1u, 2u, 3u, 8u}) {
    const ThreadCount guard(threads);
    EXPECT_EQ(thread_count(), threads);
    for (std::uint64_t n : {0u, 1u, 2u, 7u, 100u, 1000u}) {
      std::vector<std::atomic<int>> hits(n);
      parallel_for(n, [&](std::uint64_t i) { hits[i].fetch_add(1); });
      for (std::uint64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " " << i;
    }
  }
}

TEST(Parallel, ErrorsReachTheCallerAndThePoolStaysUsable) {
  const ThreadCount guard(3);
  EXPECT_THROW(parallel_for(50,
                            [](std::uint64_t i) {
                              if (i == 17) fail("index {} is bad", i);
                            }),
               Error);
  std::atomic<std::uint64_t> sum{0};
  parallel_for(10, [&](std::uint64_t i) { sum += i; });
  EXPECT_EQ(sum.load(), 45u);
}

TEST(Parallel, NestedLoopsRunSerially) {
  const ThreadCount guard(4);
  std::atomic<int> total{0};
  parallel_for(6, [&](std::uint64_t) { parallel_for(5, [&](std::uint64_t) { ++total; }); });
  EXPECT_EQ(total.load(), 30);
}

}  // namespace
}  // namespace npukit
