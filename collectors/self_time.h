// Self-time counters (LOCKSTEP_DEBUG only): where a launching thread's time goes inside the shim,
// per phase, printed at exit. Off, a scope costs one relaxed load; on, two clock reads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace lockstep::collectors::self_time {

enum class Phase : uint8_t {
  KernelBegin,   // kernel_launch_begin: identity, decode, hold, input (+ merged) hash launch
  KernelEnd,     // kernel_launch_end: defer the outputs, release
  HashEnqueue,   // Tracer::enqueue_groups, all of it
  EngineLaunch,  // HashEngine::enqueue (the hash kernel's cuLaunchKernel)
  LockWait,      // waiting for pending_mutex_ in enqueue_groups
  Alloc,         // allocation hooks
  Free,          // free hooks (with the deferred flush they may cause)
  JobLaunch,     // the job's own launch, forwarded to the real runtime or driver
  Describe,      // kernel_info: the kernel's name and parameter layout (cached)
  Stamp,         // a kernel record's identity: seq, stream, step, capture state
  Decode,        // parameter bytes gathered and decoded, pointers looked up
  Plan,          // buffer entries and regions planned
  Hold,          // the record held for its digests
  kCount
};
inline constexpr const char* kPhaseNames[] = {"kernel begin", "kernel end",  "hash enqueue",
                                              "engine launch", "lock wait", "alloc", "free",
                                              "job launch", "describe", "stamp", "decode",
                                              "plan", "hold"};
static_assert(std::size(kPhaseNames) == size_t(Phase::kCount));

struct Counter {
  std::atomic<uint64_t> ns{0}, calls{0};
};
inline std::atomic<bool> enabled{false};
inline Counter counters[size_t(Phase::kCount)];

inline uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

inline void add(Phase phase, uint64_t ns) {
  counters[size_t(phase)].ns.fetch_add(ns, std::memory_order_relaxed);
  counters[size_t(phase)].calls.fetch_add(1, std::memory_order_relaxed);
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

// "kernel begin 19457 x 4.1 us, ..." for the phases that ran.
inline std::string report() {
  std::string out;
  for (size_t i = 0; i < size_t(Phase::kCount); ++i) {
    const uint64_t calls = counters[i].calls.load(), ns = counters[i].ns.load();
    if (calls == 0) continue;
    if (!out.empty()) out += ", ";
    out += std::string(kPhaseNames[i]) + " " + std::to_string(calls) + " x " +
           std::to_string(ns / calls) + " ns";
  }
  return out.empty() ? "none" : out;
}

}  // namespace lockstep::collectors::self_time
