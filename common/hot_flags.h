// The process-wide switches and values that every traced call reads, in one cache line. Between
// two launches the job's own work evicts the shim's data, and each on a line of its own is a miss
// of its own: a broad launch read seven lines of .bss for its flags (the built shim's nm,
// session 28), then (session 29) still four more for the tracer's pointer, its disabled flag,
// the step counter and the stream-step rule's switch (each a function's static or a heap object).
//
// Add a field here only if every traced call reads it. Each is written rarely (at load, when
// LOCKSTEP_DEBUG turns timing on, when a capture first begins, when the configuration is first
// read, when the tracer is made or given up, once per step) and read relaxed unless its comment
// says otherwise: a write invalidates the line in every core's cache, so nothing written per
// call belongs here.
#pragma once

#include <atomic>
#include <cstdint>

namespace lockstep {

namespace collectors {
class Tracer;
}

struct alignas(64) HotFlags {
  std::atomic<bool> self_time{false};         // common/self_time.h: top-level phases timed
  std::atomic<bool> self_time_detail{false};  // common/self_time.h: nested phases timed too
  std::atomic<bool> validation{false};        // interpose/cupti_validation.h: LOCKSTEP_VALIDATE
  std::atomic<bool> capture_begun{false};     // collectors/events.h (acquire / release)
  // collectors/events.cpp, what the configuration allows: kConfigured once read, with
  // kPossible (a tracer may be made) and kLaunchesTraced (level broad or full).
  std::atomic<uint8_t> configured{0};
  static constexpr uint8_t kConfigured = 1, kPossible = 2, kLaunchesTraced = 4;
  std::atomic<bool> tracing_disabled{false};  // collectors/tracer_lifecycle.cpp: given up for good
  std::atomic<bool> stream_steps{false};      // collectors/stream_steps.h: the process's rule on
                                              // (acquire / release)
  std::atomic<uint32_t> step{0};  // collectors/step_counter.h: the process's step counter itself
  // collectors/kernel_info.cpp: unloads that dropped a kernel description (acquire / release),
  // read by every launch that looks its kernel up (kernel_brief: level full, an unstaged broad
  // launch); in a word the line had free, where its own .bss line cost such a launch a miss.
  std::atomic<uint32_t> code_epoch{0};
  std::atomic<collectors::Tracer*> tracer{nullptr};  // collectors/tracer_lifecycle.cpp (acq/rel)
};
static_assert(sizeof(HotFlags) == 64);

inline HotFlags hot_flags;

}  // namespace lockstep
