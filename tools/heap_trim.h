// Hands the heap's free pages back to the kernel every `every` units of work (ranks of a diff).
//
// A diff of thousands of ranks builds and frees each rank's readers, windows and tables while
// the per-rank results it keeps stay scattered over the heap: glibc cannot shrink a heap past a
// live chunk, and free pages between live ones stay resident. At 2,432 ranks a diverging diff's
// live heap peaked at 46 MB (valgrind massif) while its resident memory read 195-332 MiB from one
// run to the next, over issue #34's 256 MiB. Each trim madvises free pages that later ranks
// fault in again (the reason main.cpp raised M_TRIM_THRESHOLD), so the period is a trade, on this
// 2-core machine, first-step divergence at 2,432 ranks, 3 runs each: every 64 ranks 67-75 MiB
// and 2.05-2.54 s, every 256 ranks 75-85 MiB and 1.53-2.04 s, every 1,024 ranks 123-151 MiB, never
// 137-207 MiB and 1.38-1.50 s. The diff trims every 256.
#pragma once

#include <malloc.h>

#include <atomic>
#include <cstddef>

namespace lockstep::tools {

class HeapTrimmer {
 public:
  using TrimFn = void (*)();
  // `trim` does the trimming (a test counts its calls instead).
  explicit HeapTrimmer(size_t every, TrimFn trim = &trim_heap) : every_(every), trim_(trim) {}
  // Counts one unit as done when it goes out of scope (however the unit's code returns).
  class Unit {
   public:
    explicit Unit(HeapTrimmer& trimmer) : trimmer_(trimmer) {}
    ~Unit() { trimmer_.one_done(); }
    Unit(const Unit&) = delete;
    Unit& operator=(const Unit&) = delete;

   private:
    HeapTrimmer& trimmer_;
  };
  // One unit done (any thread); every `every`-th trims the heap.
  void one_done() {
    if (every_ != 0 && (done_.fetch_add(1, std::memory_order_relaxed) + 1) % every_ == 0)
      trim_();
  }

 private:
  static void trim_heap() { ::malloc_trim(0); }

  const size_t every_;
  const TrimFn trim_;
  std::atomic<size_t> done_{0};
};

}  // namespace lockstep::tools
