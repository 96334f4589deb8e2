// The replay verdict from a Replay record (tools/replay_verdict.h): counts and wording.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>

#include "tools/replay_verdict.h"
#include "tools/synth/synthetic_trace.h"

namespace lockstep::tools {
namespace {

using F = trace::fields::Replay;
using Outcome = ReplayVerdict::Outcome;

// A Replay record over `regions` regions: the job's digests (i + 1), then per replay the same,
// except where `differs(pass, region)` says (digest + 100 * pass). dropped: a pass whose first
// region's digest did not arrive.
trace::Record record(uint32_t replays, uint32_t regions,
                     const std::function<bool(uint32_t, uint32_t)>& differs, uint32_t dropped = 0) {
  trace::Record r;
  r.kind = trace::RecordKind::Replay;
  r.fields[F::replays] = replays;
  r.fields[F::regions] = regions;
  r.fields[F::region_bytes] = regions << 20;
  for (uint32_t pass = 0; pass <= replays; ++pass)
    for (uint32_t i = 0; i < regions; ++i) {
      trace::BufferFingerprint b;
      b.role = trace::Role::Out;
      b.label = i + 1;
      b.fingerprint = i + 1 + (pass > 0 && differs(pass, i) ? 100 * pass : 0);
      b.flags = trace::kFingerprintValid;
      if (dropped != 0 && pass == dropped && i == 0) b.flags = trace::kFingerprintDropped;
      r.buffers.push_back(b);
    }
  return r;
}

std::string label(trace::StringId id) { return "arg" + std::to_string(id - 1); }

TEST(ReplayVerdict, CountsTheReplaysWhoseOutputDiffersFromTheJobsLaunch) {
  // Replays 1..11 differ in region 1 (the atomics' output); region 0 is only read.
  const ReplayVerdict v = replay_verdict(
      record(16, 2, [](uint32_t pass, uint32_t i) { return i == 1 && pass <= 11; }), label);
  EXPECT_EQ(v.outcome, Outcome::Nondeterministic);
  EXPECT_EQ(v.compared, 16u);
  EXPECT_EQ(v.differing, 11u);
  EXPECT_EQ(v.distinct, 12u);
  EXPECT_EQ(v.differing_regions, std::vector<std::string>{"arg1"});
  EXPECT_EQ(replay_verdict_text(v),
            "nondeterministic on identical inputs: 11 of 16 replays differ (in arg1; 12 distinct "
            "outputs)");
}

TEST(ReplayVerdict, NoReplayDifferingIsDeterministicAndNamesTheOtherCauses) {
  const ReplayVerdict v =
      replay_verdict(record(16, 3, [](uint32_t, uint32_t) { return false; }), label);
  EXPECT_EQ(v.outcome, Outcome::Deterministic);
  EXPECT_EQ(v.differing, 0u);
  EXPECT_EQ(v.distinct, 1u);
  EXPECT_EQ(replay_verdict_text(v),
            "deterministic on identical inputs in 16 replays: the difference needs another cause "
            "(an input no traced op wrote, concurrency with another stream, the environment)");
}

TEST(ReplayVerdict, AReplayWithADroppedDigestIsNotCompared) {
  const ReplayVerdict none =
      replay_verdict(record(
                         4, 2, [](uint32_t, uint32_t) { return false; }, /*dropped=*/2),
                     label);
  EXPECT_EQ(none.outcome, Outcome::Incomplete);  // 3 of 4 compared: not "deterministic"
  EXPECT_EQ(none.compared, 3u);
  EXPECT_NE(replay_verdict_text(none).find("no difference in the 3 of 4 replays"),
            std::string::npos);
  const ReplayVerdict some =
      replay_verdict(record(
                         4, 2, [](uint32_t pass, uint32_t) { return pass == 2 || pass == 3; }, 2),
                     label);
  EXPECT_EQ(some.outcome, Outcome::Nondeterministic);
  EXPECT_EQ(some.differing, 1u);  // pass 2 dropped, pass 3 differs
  EXPECT_NE(replay_verdict_text(some).find("1 of 3 replays differ (3 of 4 replays could be "
                                           "compared)"),
            std::string::npos);
}

TEST(ReplayVerdict, ARefusedReplaySaysWhy) {
  trace::Record r;
  r.kind = trace::RecordKind::Replay;
  r.fields[F::replays] = 16;
  r.fields[F::outcome] = 1;
  const std::string why = "needs 4.00 GiB (twice its 3 regions' 2.00 GiB), 1.00 GiB free";
  r.payload.assign(why.begin(), why.end());
  const ReplayVerdict v = replay_verdict(r, label);
  EXPECT_EQ(v.outcome, Outcome::Refused);
  EXPECT_EQ(replay_verdict_text(v), "not replayed: " + why);
  const nlohmann::json j = replay_verdict_json(v);
  EXPECT_EQ(j["verdict"], "refused");
  EXPECT_EQ(j["reason"], why);
}

TEST(ReplayVerdict, TheJsonCarriesTheCounts) {
  ReplayVerdict v =
      replay_verdict(record(8, 1, [](uint32_t pass, uint32_t) { return pass % 2 == 0; }), label);
  v.run = "/runs/replay";
  const nlohmann::json j = replay_verdict_json(v);
  EXPECT_EQ(j["verdict"], "nondeterministic");
  EXPECT_EQ(j["replays"], 8);
  EXPECT_EQ(j["compared"], 8);
  EXPECT_EQ(j["differing"], 4);
  EXPECT_EQ(j["differing_regions"], nlohmann::json({"arg0"}));
  EXPECT_EQ(j["run"], "/runs/replay");
  EXPECT_TRUE(j["reason"].is_null());
  EXPECT_EQ(j["text"], replay_verdict_text(v));
}

TEST(ReplayVerdict, OnlyKernelOpsAreReplayed) {
  EXPECT_FALSE(replay_refusal({1, 1, "kernel", "k", 1}));
  EXPECT_NE(replay_refusal({1, 1, "gemm", "cublasLtMatmul", 1})->find("cuBLAS"), std::string::npos);
  EXPECT_NE(replay_refusal({1, 3, "collective", "ncclAllReduce", 1})->find("NCCL"),
            std::string::npos);
  EXPECT_NE(replay_refusal({1, 1, "graph", "graph", 1})->find("graph"), std::string::npos);
}

// The record as a run holds it: written through TraceWriter, found in its step by the reader.
TEST(ReplayVerdict, IsReadFromTheReplayRecordOfARunsStep) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("lockstep-replay-" + std::to_string(getpid())))
          .string();
  synth::Spec spec;
  spec.world_size = 2;
  spec.steps = 5;
  spec.replay =
      settings::OpSpec{3, 1, "kernel", "void layer2_forward<__nv_bfloat16, 128>(Params)", 1};
  spec.replays = 6;
  spec.replay_differing = 4;
  ASSERT_EQ(synth::write_run(dir, spec, "replay"), "");
  const ReplayVerdict v = read_replay_verdict(dir, 1, 3);
  EXPECT_EQ(v.outcome, Outcome::Nondeterministic) << v.reason;
  EXPECT_EQ(v.replays, 6u);
  EXPECT_EQ(v.differing, 4u);
  EXPECT_EQ(v.differing_regions, std::vector<std::string>{"arg1"});
  EXPECT_EQ(v.run, dir);
  const ReplayVerdict other_step = read_replay_verdict(dir, 1, 2);
  EXPECT_EQ(other_step.outcome, Outcome::NotFound);
  EXPECT_NE(other_step.reason.find("no replay in step 2"), std::string::npos) << other_step.reason;
  EXPECT_EQ(read_replay_verdict(dir, 7, 3).reason, "the replay run holds no rank 7");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lockstep::tools
