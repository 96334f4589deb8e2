// The CLI's one worker pool: fn(i) for every index of a rank list on a few threads. The diff
// (one rank's file pair per index), the run's integrity check and the facts scan use it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace lockstep::tools {

// What the pool does once some fn(i) threw: FailFast takes no new index (the result is an
// error anyway); Continue runs every index (each one's own outcome is kept by fn's caller).
enum class OnFailure { FailFast, Continue };

// Runs fn(i) for every i in [0, count) on `threads` workers, the calling thread among them
// (clamped to 1..count), indexes taken in order. After every worker returned, rethrows the failure of the lowest failing index, so that the error a
// user sees does not depend on the threads' timing.
template <class Fn>
void parallel_for(size_t count, int threads, Fn&& fn, OnFailure on_failure = OnFailure::FailFast) {
  if (count == 0) return;
  std::vector<std::exception_ptr> errors(count);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto worker = [&] {
    for (size_t i = next++; i < count; i = next++) {
      if (on_failure == OnFailure::FailFast && failed) break;
      try {
        fn(i);
      } catch (...) {
        errors[i] = std::current_exception();
        failed = true;
      }
    }
  };
  threads = std::clamp(threads, 1, static_cast<int>(std::min<size_t>(count, 1 << 16)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace lockstep::tools
