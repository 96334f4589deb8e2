// The self-time counters' arithmetic (common/self_time.h): what a scope keeps of what it
// read once the timing it cannot help doing is taken out.
#include "common/self_time.h"

#include <gtest/gtest.h>

namespace lockstep::collectors::self_time {
namespace {

TEST(SelfTime, AScopeKeepsItsReadingLessNestedTimingAndTheEmptyReading) {
  Calibration c;
  c.nested_scope_ticks = 40;
  c.empty_scope_ticks = 25;
  EXPECT_EQ(own_ticks(1000, 0, 0, c), 975u);    // the time-stamp reads' own latency out
  EXPECT_EQ(own_ticks(1000, 3, 0, c), 855u);    // and three nested scopes' timing
  EXPECT_EQ(own_ticks(1000, 3, 500, c), 355u);  // and an untimed section (a debug line)
  // A scope that did (next to) nothing keeps nothing, never a wrapped-around count.
  EXPECT_EQ(own_ticks(25, 0, 0, c), 0u);
  EXPECT_EQ(own_ticks(20, 0, 0, c), 0u);
  EXPECT_EQ(own_ticks(100, 2, 0, c), 0u);
  EXPECT_EQ(own_ticks(400, 0, 500, c), 0u);
}

TEST(SelfTime, NotCalibratedAScopeKeepsAllItRead) {
  EXPECT_EQ(own_ticks(1000, 3, 0, Calibration{}), 1000u);
}

// An untimed section inside a scope is left out of it: a scope around a long untimed sleep
// keeps far less than the sleep (the calibration is whatever this machine measures).
TEST(SelfTime, AnUntimedSectionIsLeftOutOfTheScopeAroundIt) {
  enable(false);
  Counter counter;
  const auto spin = [] {
    const uint64_t until = now_ns() + 2'000'000;  // 2 ms: over kSlowNs, a slow call if kept
    while (now_ns() < until) {}
  };
  {
    Scope outer(&counter, true);
    Untimed quiet;
    spin();
  }
  {
    Scope outer(&counter, true);
    spin();
  }
  // The first scope kept next to nothing; the second, 2 ms: a slow call, counted apart.
  EXPECT_EQ(counter.slow_calls.load(), 1u);
  EXPECT_EQ(counter.calls.load(), 1u);
  EXPECT_LT(double(counter.ticks.load()) * ns_per_tick(), 50'000.0);
}

}  // namespace
}  // namespace lockstep::collectors::self_time
