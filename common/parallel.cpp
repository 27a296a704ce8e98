// common/parallel.h: a fixed pool of std::jthread workers fed one parallel_for at a time. The
// indices are handed out through an atomic counter, so a slow thread (the machine is shared)
// takes fewer of them; which thread computes an index never changes what it computes.
#include "common/parallel.h"

#include "common/error.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npukit {

namespace {

unsigned default_threads() {
  if (const char* env = std::getenv("NPUKIT_THREADS"); env && *env) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (*end != 0 || n < 0 || n > 4096)
      fail("NPUKIT_THREADS={} is not a thread count (0 for every core, else 1 to 4096)", env);
    if (n > 0) return static_cast<unsigned>(n);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// Orders this thread's stores, the streamed ones included, before its later ones (parallel.h).
void fence_stores() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_sfence();
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

std::atomic<unsigned> g_threads{0};  // 0: not set yet
thread_local bool t_in_worker = false;

class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    workers_.clear();  // joins
  }

  // Runs fn over [0, n) with `threads` threads (the caller included). Returns false when the
  // pool is busy with another caller's loop (the caller then runs serially).
  bool run(std::uint64_t n, unsigned threads, const std::function<void(std::uint64_t)>& fn) {
    std::unique_lock call(call_mutex_, std::try_to_lock);
    if (!call.owns_lock()) return false;
    const unsigned helpers = threads - 1;
    {
      std::lock_guard lock(mutex_);
      while (workers_.size() < helpers) workers_.emplace_back([this](std::stop_token) { work(); });
      job_ = &fn;
      total_ = n;
      next_.store(0);
      error_ = nullptr;
      wanted_ = helpers;
      active_ = helpers;
      ++generation_;
    }
    wake_.notify_all();
    drain();
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return active_ == 0; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  void drain() {
    for (std::uint64_t i = next_.fetch_add(1); i < total_; i = next_.fetch_add(1)) {
      try {
        (*job_)(i);
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
    fence_stores();
  }

  void work() {
    t_in_worker = true;
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || (generation_ != seen && wanted_ > 0); });
        if (stop_) return;
        seen = generation_;
        --wanted_;  // only `helpers` workers join a loop
      }
      drain();
      {
        std::lock_guard lock(mutex_);
        --active_;
      }
      done_.notify_all();
    }
  }

  std::mutex call_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::jthread> workers_;
  const std::function<void(std::uint64_t)>* job_ = nullptr;
  std::uint64_t total_ = 0;
  std::atomic<std::uint64_t> next_{0};
  std::exception_ptr error_;
  unsigned wanted_ = 0, active_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

void set_thread_count(unsigned n) { g_threads.store(n == 0 ? default_threads() : n); }

unsigned thread_count() {
  unsigned n = g_threads.load();
  if (n == 0) {
    n = default_threads();
    g_threads.store(n);
  }
  return n;
}

void parallel_for(std::uint64_t n, const std::function<void(std::uint64_t)>& fn) {
  const unsigned threads = static_cast<unsigned>(std::min<std::uint64_t>(thread_count(), n));
  if (threads > 1 && !t_in_worker && pool().run(n, threads, fn)) return;
  for (std::uint64_t i = 0; i < n; ++i) fn(i);
  fence_stores();
}

}  // namespace npukit
