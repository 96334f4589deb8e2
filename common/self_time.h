// Self-time counters (LOCKSTEP_DEBUG only): where a launching thread's time goes inside the shim,
// per phase, printed at exit. LOCKSTEP_DEBUG=1 times the top-level phases (each traced call's
// begin and end, the real call, allocation hooks, frees, order points); =2 adds the parts nested
// in them. Off, a scope costs one relaxed load; on, two reads of the CPU's
// time-stamp counter (a few ns, where a clock_gettime in a VM may take 50 or more, which made
// the small levels look several times costlier than they are) and two plain adds to the
// calling thread's own counters (a locked add, two per scope and three scopes per traced call,
// drained the store buffer on a line the job's work had evicted, in the next scope's reading).
// Phases nest (a kernel's describe inside call begin); a scope subtracts the measured cost of
// the timing done by the scopes nested in it, and what an empty scope reads (the time-stamp
// reads' own latency, about 10-25 ns), so that the totals are the shim's work alone: a job
// traced without LOCKSTEP_DEBUG pays neither.
// Calls slower than kSlowNs (first launch of a kernel: name, layout, lazy module load; the hash
// engine's creation) are counted apart, so that the averages show the steady state.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <iterator>
#include <string>

#include "common/hot_flags.h"
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace lockstep::collectors::self_time {

enum class Phase : uint8_t {
  // Every traced call (kernel launch, GEMM, copy, collective): the shim's work before and
  // after the real call, which is not included. With Alloc, Free and OrderPoint: all of it.
  CallBegin,
  CallEnd,
  Alloc,       // allocation hooks
  Free,        // free hooks (with the deferred flush they may cause)
  OrderPoint,  // stream order points (with the deferred flush they may cause)
  Marker,      // step markers (NVTX ranges, lockstep_step): matching, step end, its flush
  State,       // state records (lockstep_fingerprint_many): records, their hash launch
  // Parts of the above (nested in CallBegin / CallEnd / Free / OrderPoint). A broad launch
  // (collectors/kernels.cpp, broad_launch_begin) has none: a scope that is off still costs a
  // load, a branch and a store, four of them were ~60 of its ~620 instructions and 10 of its
  // 65 code lines (bench/collectors/launch_lines.py); its whole is CallBegin and CallEnd.
  KernelBegin,   // kernel_launch_begin's general path: identity, decode, hold, input hash launch
  KernelEnd,     // kernel_launch_end's general path: defer the outputs, release
  GemmBegin,     // a cuBLAS / cuBLASLt call: descriptor reads, operands, input hash launch
  HashEnqueue,   // Tracer::enqueue_groups, all of it
  EngineLaunch,  // HashEngine::enqueue (the hash kernel's cuLaunchKernel)
  LockWait,      // waiting for pending_mutex_ in enqueue_groups
  Describe,      // kernel_info: the kernel's name and parameter layout (cached)
  Stamp,         // a (general path) kernel record's identity: seq, stream, step, capture state
  CaptureQuery,  // the driver's capture state of the launch's stream (part of Stamp)
  Decode,        // parameter bytes gathered and decoded, pointers looked up
  Plan,          // buffer entries and regions planned
  Hold,          // the record held for its digests
  Append,        // a finished record handed to the trace writer (hash, encode)
  StepEnd,       // a marker ending its step: handed to the collector, or ended here (the lock,
                 // the writer's wake)
  // Not the shim's: the job's own call, forwarded to the real library (outermost layer only;
  // a kernel launch below broad too, which is no event there, so that levels compare).
  RealCall,
  // Not the shim's either: the job's own allocations and frees (cudaMalloc*, cuMemAlloc*,
  // cudaFree*, cuMemFree*; outermost layer only), and the stream-ordered frees the shim held
  // back and makes later. Apart from RealCall because a full run puts PyTorch on its
  // cudaMallocAsync backend, whose thousands of driver calls a step the untraced job on the
  // caching allocator does not make: this is their time.
  AllocCall,
  kCount
};
inline constexpr Phase kLastOwnTopLevel = Phase::State;  // CallBegin..State: the total
inline constexpr bool is_detail(Phase phase) {
  return phase > kLastOwnTopLevel && phase < Phase::RealCall;
}
inline constexpr const char* kPhaseNames[] = {
    "call begin",    "call end",     "alloc",      "free",       "order point",
    "marker",        "state",        "kernel begin", "kernel end", "gemm begin", "hash enqueue",
    "engine launch", "lock wait",    "describe",   "stamp",      "capture query",
    "decode",        "plan",         "hold",       "append",     "step end",   "real call",
    "alloc call"};
static_assert(std::size(kPhaseNames) == size_t(Phase::kCount));
inline constexpr uint64_t kSlowNs = 100'000;

// One thread's counts of one phase: written by that thread alone (a load and a store, no
// locked add), read by the report from any thread.
struct Counter {
  std::atomic<uint64_t> ticks{0}, calls{0}, slow_ticks{0}, slow_calls{0};
};
// Top-level phases (LOCKSTEP_DEBUG=1 and 2) and the nested ones (=2): in the line of switches
// every traced call reads (common/hot_flags.h).
inline constexpr std::atomic<bool>& enabled = hot_flags.self_time;
inline constexpr std::atomic<bool>& detail = hot_flags.self_time_detail;

// Every thread's counters that timed a scope, in a list the report sums (never freed: a thread
// that ended still counts, and hooks run during exit).
struct ThreadCounters {
  Counter counters[size_t(Phase::kCount)];
  ThreadCounters* next = nullptr;
};
inline std::atomic<ThreadCounters*> all_threads{nullptr};
inline thread_local ThreadCounters* t_counters __attribute__((tls_model("initial-exec"))) = nullptr;
[[gnu::noinline, gnu::cold]] inline ThreadCounters* new_thread_counters() {
  auto* mine = new ThreadCounters;
  mine->next = all_threads.load(std::memory_order_relaxed);
  while (!all_threads.compare_exchange_weak(mine->next, mine, std::memory_order_release,
                                            std::memory_order_relaxed)) {
  }
  return t_counters = mine;
}
inline Counter& thread_counter(Phase phase) {
  ThreadCounters* mine = t_counters;
  if (mine == nullptr) [[unlikely]]
    mine = new_thread_counters();
  return mine->counters[size_t(phase)];
}
// A phase's counts over every thread.
struct Totals {
  uint64_t ticks = 0, calls = 0, slow_ticks = 0, slow_calls = 0;
};
inline Totals totals(Phase phase) {
  Totals sum;
  for (const ThreadCounters* t = all_threads.load(std::memory_order_acquire); t != nullptr;
       t = t->next) {
    const Counter& c = t->counters[size_t(phase)];
    sum.ticks += c.ticks.load(std::memory_order_relaxed);
    sum.calls += c.calls.load(std::memory_order_relaxed);
    sum.slow_ticks += c.slow_ticks.load(std::memory_order_relaxed);
    sum.slow_calls += c.slow_calls.load(std::memory_order_relaxed);
  }
  return sum;
}

inline uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}
// The time-stamp counter where there is one (invariant on the x86 CPUs CUDA hosts use), else ns.
inline uint64_t now_ticks() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return now_ns();
#endif
}

// Set by enable(): the tick/ns pair the final conversion starts from, the slow threshold in
// ticks, what one closed scope costs the scope around it (its two reads and adds), and what a
// scope with nothing inside reads.
struct Calibration {
  uint64_t start_ticks = 0, start_ns = 0;
  uint64_t slow_ticks = ~uint64_t{0};
  uint64_t nested_scope_ticks = 0;
  uint64_t empty_scope_ticks = 0;
};
inline Calibration calibration;

// A scope's own ticks: what it read, less the timing of the `nested` scopes closed inside it,
// the reading of an empty scope and the `untimed` ticks spent inside it (never below zero).
inline uint64_t own_ticks(uint64_t read, uint64_t nested, uint64_t untimed, const Calibration& c) {
  const uint64_t out = nested * c.nested_scope_ticks + c.empty_scope_ticks + untimed;
  return read > out ? read - out : 0;
}
// Scopes closed on this thread so far: a scope's children are the difference (initial-exec TLS:
// no __tls_get_addr on the hot path).
inline thread_local uint64_t t_scopes_closed __attribute__((tls_model("initial-exec"))) = 0;
// Ticks spent in Untimed sections on this thread so far (a scope leaves out the difference).
inline thread_local uint64_t t_untimed_ticks __attribute__((tls_model("initial-exec"))) = 0;

// `c` is the calling thread's own (thread_counter): its single writer.
inline void add_to(std::atomic<uint64_t>& counter, uint64_t value) {
  counter.store(counter.load(std::memory_order_relaxed) + value, std::memory_order_relaxed);
}
inline void add_ticks(Counter& c, uint64_t ticks) {
  if (ticks >= calibration.slow_ticks) {
    add_to(c.slow_ticks, ticks);
    add_to(c.slow_calls, 1);
    return;
  }
  add_to(c.ticks, ticks);
  add_to(c.calls, 1);
}

class Scope {
 public:
  explicit Scope(Phase phase) {
    if ((is_detail(phase) ? detail : enabled).load(std::memory_order_relaxed)) [[unlikely]]
      start(&thread_counter(phase));
  }
  // `counter`: one only this thread adds to.
  Scope(Counter* counter, bool on) {
    if (on) start(counter);
  }
  ~Scope() {
    if (start_ == 0) return;
    const uint64_t read = now_ticks() - start_;
    add_ticks(*counter_, own_ticks(read, t_scopes_closed - closed_before_,
                                   t_untimed_ticks - untimed_before_, calibration));
    ++t_scopes_closed;
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  void start(Counter* counter) {
    counter_ = counter;
    closed_before_ = t_scopes_closed, untimed_before_ = t_untimed_ticks;
    start_ = now_ticks();
  }
  // Only start_ is set when the counters are off (every traced call passes three to seven
  // scopes: the rest would be stores to the stack's cold lines for nothing); start() sets the
  // others before the destructor, which reads them only when start_ is not 0, can read them.
  uint64_t start_ = 0;
  Counter* counter_;
  uint64_t closed_before_;
  uint64_t untimed_before_;
};

// A section that is not the shim's work (LOCKSTEP_DEBUG's own lines to stderr): the scopes
// around it leave its time out.
class Untimed {
 public:
  Untimed() : start_(enabled.load(std::memory_order_relaxed) ? now_ticks() : 0) {}
  ~Untimed() {
    if (start_ != 0) t_untimed_ticks += now_ticks() - start_;
  }
  Untimed(const Untimed&) = delete;
  Untimed& operator=(const Untimed&) = delete;

 private:
  uint64_t start_;
};

// The median of five batches of `measure()` (ticks per scope in a batch of 2000).
template <typename Measure>
uint64_t median_of_batches(Measure&& measure) {
  uint64_t batches[5];
  for (uint64_t& batch : batches) batch = measure(2000);
  std::sort(std::begin(batches), std::end(batches));
  return batches[2];
}

// Turns the counters on (once, before the job's calls; with_detail: the nested phases too): the
// ticks/ns rate over a short spin for the slow threshold, then the cost of a nested scope and
// the reading of an empty one, each the median of a few batches.
inline void enable(bool with_detail) {
  const uint64_t t0 = now_ticks(), n0 = now_ns();
  uint64_t t1 = t0, n1 = n0;
  while (n1 - n0 < 200'000) t1 = now_ticks(), n1 = now_ns();  // 0.2 ms
  const double ticks_per_ns = n1 > n0 && t1 > t0 ? double(t1 - t0) / double(n1 - n0) : 1.0;
  calibration.slow_ticks = uint64_t(double(kSlowNs) * ticks_per_ns);
  Counter scratch;
  calibration.nested_scope_ticks = median_of_batches([&](int scopes) {
    const uint64_t start = now_ticks();
    for (int i = 0; i < scopes; ++i) Scope nested(&scratch, true);
    return (now_ticks() - start) / uint64_t(scopes);
  });
  // Measured with empty_scope_ticks at 0 (a forked child enables again): the raw reading.
  calibration.empty_scope_ticks = 0;
  const uint64_t empty_reading = median_of_batches([&](int scopes) {
    Counter empty;
    for (int i = 0; i < scopes; ++i) Scope nothing(&empty, true);
    const uint64_t kept = empty.calls.load();  // a preempted scope is slow: counted apart
    return kept > 0 ? empty.ticks.load() / kept : 0;
  });
  calibration.empty_scope_ticks = empty_reading;
  calibration.start_ticks = now_ticks();
  calibration.start_ns = now_ns();
  detail.store(with_detail, std::memory_order_relaxed);
  enabled.store(true, std::memory_order_relaxed);
}

// Ticks to ns at the rate measured since enable() (seconds of run: an accurate rate).
inline double ns_per_tick() {
  const uint64_t ticks = now_ticks() - calibration.start_ticks;
  const uint64_t ns = now_ns() - calibration.start_ns;
  return ticks > 0 && ns > 0 ? double(ns) / double(ticks) : 1.0;
}

// The shim's own time on the calling threads in ns: the top-level phases' `field` summed.
inline uint64_t own_total_ns(uint64_t Totals::*field) {
  uint64_t ticks = 0;
  for (size_t i = 0; i <= size_t(kLastOwnTopLevel); ++i) ticks += totals(Phase(i)).*field;
  return uint64_t(double(ticks) * ns_per_tick());
}
inline uint64_t steady_total_ns() { return own_total_ns(&Totals::ticks); }  // slow calls apart
inline uint64_t slow_total_ns() { return own_total_ns(&Totals::slow_ticks); }

// "call begin 19457 x 410 ns (+60 slow, 79.1 ms), ..." for the phases that ran, then the
// timing cost taken out of each scope per nested scope.
inline std::string report() {
  std::string out;
  const double rate = ns_per_tick();
  for (size_t i = 0; i < size_t(Phase::kCount); ++i) {
    const Totals c = totals(Phase(i));
    const uint64_t calls = c.calls, slow = c.slow_calls;
    if (calls == 0 && slow == 0) continue;
    const double ns = double(c.ticks) * rate;
    if (!out.empty()) out += ", ";
    out += std::string(kPhaseNames[i]) + " " + std::to_string(calls) + " x " +
           std::to_string(calls ? uint64_t(ns / double(calls)) : 0) + " ns";
    if (slow != 0) {
      char text[64];
      std::snprintf(text, sizeof text, " (+%llu slow, %.1f ms)", (unsigned long long)slow,
                    double(c.slow_ticks) * rate / 1e6);
      out += text;
    }
  }
  if (out.empty()) return "none";
  char text[128];
  std::snprintf(text, sizeof text,
                "; timing taken out: %.0f ns per nested phase, %.0f ns per phase (empty reading)",
                double(calibration.nested_scope_ticks) * rate,
                double(calibration.empty_scope_ticks) * rate);
  return out + text;
}

}  // namespace lockstep::collectors::self_time
