// The project's one thread pool: the device model and the executors split work over it.
//
// Work is split by index (output-channel tiles, output channels), every index computes the same
// integers whichever thread runs it, and no two indices write the same memory, so results are
// bit-identical for every thread count (tested). The pool is std::jthread workers started on
// first use; a parallel_for called from inside a worker, or while another thread's
// parallel_for is running, runs serially on the calling thread.
#pragma once

#include <cstdint>
#include <functional>

namespace npukit {

// Threads parallel_for uses (the caller included): n >= 1, or 0 for every core (the default,
// also NPUKIT_THREADS=N in the environment).
void set_thread_count(unsigned n);
unsigned thread_count();

// Calls fn(i) once for every i in [0, n) and returns when all have returned; the first
// exception thrown by any call is rethrown here (the remaining indices may still run). Every
// store the calls made, non-temporal ones included, is visible when it returns: each thread
// that ran calls fences its stores after its last one (on x86 streamed stores are weakly
// ordered, and only the storing thread's own fence orders them). So a call may stream its
// output without a fence of its own, which would wait for the stores to reach memory there and
// then (device/block_avx2.cpp's int32 words).
void parallel_for(std::uint64_t n, const std::function<void(std::uint64_t)>& fn);

}  // namespace npukit
