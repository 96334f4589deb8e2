// The Tracer's counters and their report at close (collectors/tracer_stats.h).
#include <sys/wait.h>
#include <unistd.h>

#include <regex>
#include <string>
#include <vector>

#include "collectors/tracer_stats.h"
#include "tests/cpu/collectors/runtime_harness.h"

namespace lockstep::collectors {
namespace {

// How many calls of `phase` LOCKSTEP_DEBUG's self-time line counts, slow ones (a preempted call on
// a loaded machine: "free 0 x 0 ns (+1 slow, 0.2 ms)") included; -1 when the phase has no entry.
int phase_calls(const std::string& err, const std::string& phase) {
  std::smatch m;
  const std::regex entry("(^|[:,] )" + phase + " (\\d+) x \\d+ ns( \\(\\+(\\d+) slow)?");
  if (!std::regex_search(err, m, entry)) return -1;
  return std::stoi(m[2].str()) + (m[4].matched ? std::stoi(m[4].str()) : 0);
}

// LOCKSTEP_DEBUG=1 accounts at exit for every hash launch, every deferred set that went out alone
// (by cause) and the shim's own time: what the overhead benchmark reads for the small levels.
// =2 times the parts of each call as well; =1 leaves them untimed (their timing would count).
TEST_F(MergeTest, DebugCountsLaunchesFlushCausesAndSelfTime) {
  for (const char* debug : {"1", "2"}) {
    SCOPED_TRACE(std::string("LOCKSTEP_DEBUG=") + debug);
    auto environment = env("full");
    environment["LOCKSTEP_DEBUG"] = debug;
    environment["LOCKSTEP_REUSE_DIGESTS"] = "0";
    ChildResult child = run_child(
        environment,
        [] {
          on_alloc(kMergeBase, 1 << 20);
          for (int i = 0; i < 3; ++i) launch_on(kStreamS, kMergeBase + 256);  // S1 S2 S2
          marker_step("step");                                                // S1: cause "step"
          launch_on(kStreamT, kMergeBase + 256);                              // T1
          on_free(kMergeBase + (1 << 30));                                    // T1: cause "free"
        },
        &fake_resolver_with_gpu);
    ASSERT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.stderr_text;
    const std::string& err = child.stderr_text;
    EXPECT_NE(err.find("hash launches: 6 (6 regions"), std::string::npos) << err;
    EXPECT_NE(err.find("; 2 regions hashed once for two records"), std::string::npos) << err;
    EXPECT_NE(err.find("2 carried two kernels' regions, 2 deferred sets enqueued on their own "
                       "(free 1, step 1)"),
              std::string::npos)
        << err;
    // Top level (these calls come straight to the collectors, not through a traced_call). A
    // call preempted on a loaded machine is counted apart, as slow: both count here.
    EXPECT_EQ(phase_calls(err, "free"), 1) << err;
    // The step marker (its flush of the deferred set, its step end) is the shim's time too.
    EXPECT_EQ(phase_calls(err, "marker"), 1) << err;
    // Parts of calls: kernel end ran 4 times, timed only at LOCKSTEP_DEBUG=2.
    const bool phases = std::string(debug) == "2";
    EXPECT_EQ(phase_calls(err, "kernel end"), phases ? 4 : -1) << err;
    EXPECT_NE(err.find("; timing taken out: "), std::string::npos) << err;
    EXPECT_NE(err.find(" ns per phase (empty reading)"), std::string::npos) << err;
    EXPECT_NE(err.find("shim self time per step: "), std::string::npos) << err;
  }
}

// Each count that means evidence is missing or suspect is one Warning record at close, in a fixed
// order; a zero count is none.
TEST(TracerStatsTest, AWarningForEachNonzeroCountAndNoneForZero) {
  TracerStats stats;
  EXPECT_TRUE(stats.warnings().empty());
  stats.fills_differed = 1;
  stats.capture_skipped = 3;
  const std::vector<TracerStats::Warning> warnings = stats.warnings();
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0].code, WarningCode::CaptureNotFingerprinted);
  EXPECT_EQ(warnings[0].count, 3u);
  EXPECT_EQ(warnings[1].code, WarningCode::FillDiffered);
  EXPECT_EQ(warnings[1].count, 1u);
}

// The debug lines name the deferred sets' flush causes and the chain refusals with their
// counts, and a part that was off (reused digests, learned roles, recalled fills) has no line.
TEST(TracerStatsTest, DebugLinesNameFlushCausesAndLeaveOutPartsThatWereOff) {
  TracerStats stats;
  stats.deferred_flushes[size_t(FlushCause::Free)] = 2;
  stats.deferred_flushes[size_t(FlushCause::Step)] = 1;
  stats.chain_refusals[size_t(ChainRefusal::WritesSet)] = 4;
  stats.chain_refusals[size_t(ChainRefusal::Full)] = 2;
  hashing::EngineStats engines;
  engines.launches = 5;
  const std::vector<std::string> off = stats.debug_lines(engines, {});
  const std::vector<std::string> on = stats.debug_lines(engines, {true, true, true});
  ASSERT_FALSE(off.empty());
  EXPECT_EQ(on.size(), off.size() + 3);
  EXPECT_NE(off[0].find("hash launches: 5 "), std::string::npos) << off[0];
  EXPECT_NE(off[0].find("3 deferred sets enqueued on their own (free 2, step 1)"),
            std::string::npos)
      << off[0];
  EXPECT_NE(off[1].find("launched instead of chaining: chain full 2, writes the set 4"),
            std::string::npos)
      << off[1];
  for (const std::string& line : off) {
    EXPECT_EQ(line.find("input digests reused"), std::string::npos) << line;
    EXPECT_EQ(line.find("learned read-only"), std::string::npos) << line;
    EXPECT_EQ(line.find("fill outputs recalled"), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace lockstep::collectors
