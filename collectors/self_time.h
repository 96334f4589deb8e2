// Self-time counters (LOCKSTEP_DEBUG only): where a launching thread's time goes inside the shim,
// per phase, printed at exit. Off, a scope costs one relaxed load; on, two clock reads.
// Calls slower than kSlowNs (first launch of a kernel: name, layout, lazy module load; the hash
// engine's creation) are counted apart, so that the averages show the steady state.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace lockstep::collectors::self_time {

enum class Phase : uint8_t {
  // Every traced call (kernel launch, GEMM, copy, collective): the shim's work before and
  // after the real call, which is not included. With Alloc, Free and OrderPoint: all of it.
  CallBegin,
  CallEnd,
  Alloc,       // allocation hooks
  Free,        // free hooks (with the deferred flush they may cause)
  OrderPoint,  // stream order points (with the deferred flush they may cause)
  // Parts of the above (nested in CallBegin / CallEnd / Free / OrderPoint):
  KernelBegin,   // kernel_launch_begin: identity, decode, hold, input (+ merged) hash launch
  KernelEnd,     // kernel_launch_end: defer the outputs, release
  HashEnqueue,   // Tracer::enqueue_groups, all of it
  EngineLaunch,  // HashEngine::enqueue (the hash kernel's cuLaunchKernel)
  LockWait,      // waiting for pending_mutex_ in enqueue_groups
  Describe,      // kernel_info: the kernel's name and parameter layout (cached)
  Stamp,         // a kernel record's identity: seq, stream, step, capture state
  Decode,        // parameter bytes gathered and decoded, pointers looked up
  Plan,          // buffer entries and regions planned
  Hold,          // the record held for its digests
  // Not the shim's: the job's own call, forwarded to the real library (outermost layer only).
  RealCall,
  kCount
};
inline constexpr Phase kLastOwnTopLevel = Phase::OrderPoint;  // CallBegin..OrderPoint: the total
inline constexpr const char* kPhaseNames[] = {
    "call begin", "call end", "alloc",  "free",   "order point", "kernel begin",
    "kernel end", "hash enqueue", "engine launch", "lock wait", "describe", "stamp",
    "decode", "plan", "hold", "real call"};
static_assert(std::size(kPhaseNames) == size_t(Phase::kCount));
inline constexpr uint64_t kSlowNs = 100'000;

struct Counter {
  std::atomic<uint64_t> ns{0}, calls{0}, slow_ns{0}, slow_calls{0};
};
inline std::atomic<bool> enabled{false};
inline Counter counters[size_t(Phase::kCount)];

inline uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

inline void add(Phase phase, uint64_t ns) {
  Counter& c = counters[size_t(phase)];
  if (ns >= kSlowNs) {
    c.slow_ns.fetch_add(ns, std::memory_order_relaxed);
    c.slow_calls.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  c.ns.fetch_add(ns, std::memory_order_relaxed);
  c.calls.fetch_add(1, std::memory_order_relaxed);
}

class Scope {
 public:
  explicit Scope(Phase phase)
      : phase_(phase), start_(enabled.load(std::memory_order_relaxed) ? now_ns() : 0) {}
  ~Scope() {
    if (start_ != 0) add(phase_, now_ns() - start_);
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Phase phase_;
  uint64_t start_;
};

// The shim's own time on the calling threads, steady state (slow calls apart), in ns.
inline uint64_t steady_total_ns() {
  uint64_t total = 0;
  for (size_t i = 0; i <= size_t(kLastOwnTopLevel); ++i) total += counters[i].ns.load();
  return total;
}
inline uint64_t slow_total_ns() {
  uint64_t total = 0;
  for (size_t i = 0; i <= size_t(kLastOwnTopLevel); ++i) total += counters[i].slow_ns.load();
  return total;
}

// "call begin 19457 x 4100 ns (+60 slow, 79.1 ms), ..." for the phases that ran.
inline std::string report() {
  std::string out;
  for (size_t i = 0; i < size_t(Phase::kCount); ++i) {
    const Counter& c = counters[i];
    const uint64_t calls = c.calls.load(), ns = c.ns.load(), slow = c.slow_calls.load();
    if (calls == 0 && slow == 0) continue;
    if (!out.empty()) out += ", ";
    out += std::string(kPhaseNames[i]) + " " + std::to_string(calls) + " x " +
           std::to_string(calls ? ns / calls : 0) + " ns";
    if (slow != 0) {
      char text[64];
      std::snprintf(text, sizeof text, " (+%llu slow, %.1f ms)", (unsigned long long)slow,
                    c.slow_ns.load() / 1e6);
      out += text;
    }
  }
  return out.empty() ? "none" : out;
}

}  // namespace lockstep::collectors::self_time
