// The process-wide switches that every traced call reads, in one cache line. Between two
// launches the job's own work evicts the shim's data, and each switch on a line of its own is a
// miss of its own: a broad launch read seven lines of .bss for its flags (the built shim's nm,
// session 28), where its record and its thread's state take three or four.
//
// Add a switch here only if every traced call reads it. Each is set once (at load, when
// LOCKSTEP_DEBUG turns timing on, when a capture first begins, or when the configuration is
// first read) and read relaxed unless its comment says otherwise.
#pragma once

#include <atomic>
#include <cstdint>

namespace lockstep {

struct alignas(64) HotFlags {
  std::atomic<bool> self_time{false};         // common/self_time.h: top-level phases timed
  std::atomic<bool> self_time_detail{false};  // common/self_time.h: nested phases timed too
  std::atomic<bool> validation{false};        // interpose/cupti_validation.h: LOCKSTEP_VALIDATE
  std::atomic<bool> capture_begun{false};     // collectors/events.cpp (acquire / release)
  // collectors/events.cpp, what the configuration allows: kConfigured once read, with
  // kPossible (a tracer may be made) and kLaunchesTraced (level broad or full).
  std::atomic<uint8_t> configured{0};
  static constexpr uint8_t kConfigured = 1, kPossible = 2, kLaunchesTraced = 4;
};
static_assert(sizeof(HotFlags) == 64);

inline HotFlags hot_flags;

}  // namespace lockstep
