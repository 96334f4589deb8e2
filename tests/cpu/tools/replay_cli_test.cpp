// Issue #30's replay verdict through the CLI: hunt's stage 4 and `lockstep replay`, with the fake
// job standing in for the shim (tests/cpu/tools/fake_job.cpp: it answers LOCKSTEP_REPLAY with a
// Replay record, FAKE_JOB_REPLAY_DIFFERING of its relaunches differing).
#include <functional>

#include "cli_harness.h"

namespace {

std::string job_env(const std::string& extra = "") {
  return std::string("LOCKSTEP_LIB=") + DUMMY_SHIM + " FAKE_JOB_EXPECT_PRELOAD=" + DUMMY_SHIM +
         " " + extra;
}

// Rank 1's step-3 kernel #1 gives other bits in every other run (the toggle file flips).
std::string planted_env(const std::string& toggle, const std::string& extra = "") {
  return job_env("FAKE_JOB_TOGGLE=" + toggle + " FAKE_JOB_PLANT=output:1:3:1 " + extra);
}

TEST_F(Cli, HuntsFourthStageCountsTheReplaysOfTheCulpritThatDiffer) {
  Result r = lockstep("hunt -o " + path("hunt").string() + " -- " FAKE_JOB,
                      planted_env(path("toggle").string(), "FAKE_JOB_REPLAY_DIFFERING=11"));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("stage 4 (full, step 3, 1 run replaying the culprit 16 times): "),
            std::string::npos)
      << r.out;
  const std::string verdict =
      "nondeterministic on identical inputs: 11 of 16 replays differ (in arg1; 12 distinct "
      "outputs)";
  // On the stage's line and under the culprit in the report.
  EXPECT_NE(r.out.find("s: " + verdict + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("         replay: " + verdict + "\n"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(path("hunt") / "replay" / "rank-00001.lstrace"));
}

TEST_F(Cli, HuntSaysDeterministicWhenNoReplayOfTheCulpritDiffers) {
  Result r = lockstep("hunt --replays 5 -o " + path("hunt").string() + " -- " FAKE_JOB,
                      planted_env(path("toggle").string()));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("replay: deterministic on identical inputs in 5 replays: the difference "
                       "needs another cause (an input no traced op wrote, concurrency with "
                       "another stream, the environment)"),
            std::string::npos)
      << r.out;
}

TEST_F(Cli, HuntWithoutReplaySkipsTheFourthStage) {
  Result r = lockstep("hunt --no-replay -o " + path("hunt").string() + " -- " FAKE_JOB,
                      planted_env(path("toggle").string(), "FAKE_JOB_REPLAY_DIFFERING=3"));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_EQ(r.out.find("stage 4"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("replay:"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(path("hunt") / "replay"));
}

TEST_F(Cli, HuntJsonCarriesTheReplayVerdictOfTheCulprit) {
  Result r = lockstep("hunt --json --replays 8 -o " + path("hunt").string() + " -- " FAKE_JOB,
                      planted_env(path("toggle").string(), "FAKE_JOB_REPLAY_DIFFERING=2"));
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  const json j = r.parsed();
  const json& replay = j["culprit_replay"];
  EXPECT_EQ(replay["verdict"], "nondeterministic");
  EXPECT_EQ(replay["replays"], 8);
  EXPECT_EQ(replay["compared"], 8);
  EXPECT_EQ(replay["differing"], 2);
  EXPECT_EQ(replay["regions"], 2);
  EXPECT_EQ(replay["run"], (path("hunt") / "replay").string());
  EXPECT_EQ(j["culprit"]["name_short"], "layer1_forward");
}

TEST_F(Cli, HuntSaysWhyTheShimRefusedToReplayTheCulprit) {
  Result r = lockstep("hunt -o " + path("hunt").string() + " -- " FAKE_JOB,
                      planted_env(path("toggle").string(),
                                  "FAKE_JOB_REPLAY_REFUSED='needs 9.00 GiB, 1.00 GiB free'"));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("replay: not replayed: needs 9.00 GiB, 1.00 GiB free\n"), std::string::npos)
      << r.out;
}

// Two runs whose step-3 kernel #1 of rank 1 differs: their diff's JSON, also in diff.json.
json planted_diff(Cli* test, const std::function<Result(const std::string&)>& cli,
                  const fs::path& dir) {
  synth::Spec sa = small(2), sb = small(2);
  sb.plants.push_back({synth::Plant::Output, 1, 3, 1});
  EXPECT_EQ(synth::write_run((dir / "a").string(), sa, "a"), "");
  EXPECT_EQ(synth::write_run((dir / "b").string(), sb, "b"), "");
  Result d = cli("diff --json " + (dir / "a").string() + " " + (dir / "b").string());
  EXPECT_EQ(d.code, 1) << d.err;
  std::ofstream(dir / "diff.json") << d.out;
  (void)test;
  return json::parse(d.out);
}

std::string op_of(const json& c) {
  return std::to_string(c["step"].get<int>()) + ":" + std::to_string(c["stream"].get<int>()) + ":" +
         c["kind"].get<std::string>() + ":" + c["name"].get<std::string>() + ":" +
         std::to_string(c["occurrence"].get<int>());
}

TEST_F(Cli, ReplayTakesTheCulpritOfADiffsJsonAndAnswersWithItsVerdict) {
  const json diff = planted_diff(
      this, [&](const std::string& args) { return lockstep(args); }, tmp_);
  const json& c = diff["culprit"];
  ASSERT_EQ(c["name_short"], "layer1_forward");
  Result r = lockstep("replay --from " + path("diff.json").string() + " -o " +
                          path("replay").string() + " -- " FAKE_JOB,
                      job_env("FAKE_JOB_REPLAY_DIFFERING=16"));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("replay (rank 1, step 3, stream " + std::to_string(c["stream"].get<int>()) +
                       ", layer1_forward #1): nondeterministic on identical inputs: 16 of 16 "
                       "replays differ"),
            std::string::npos)
      << r.out;
}

TEST_F(Cli, ReplayOfAnOpGivenOnTheCommandLinePrintsJson) {
  const json diff = planted_diff(
      this, [&](const std::string& args) { return lockstep(args); }, tmp_);
  Result r = lockstep("replay --json --rank 1 --replays 4 --op '" + op_of(diff["culprit"]) +
                          "' -o " + path("replay").string() + " -- " FAKE_JOB,
                      job_env());
  ASSERT_EQ(r.code, 0) << r.out << r.err;  // deterministic
  const json j = r.parsed();
  EXPECT_EQ(j["verdict"], "deterministic");
  EXPECT_EQ(j["compared"], 4);
  EXPECT_EQ(j["op"]["name"], "void layer1_forward<__nv_bfloat16, 128>(Params)");
  EXPECT_EQ(j["op"]["rank"], 1);
}

TEST_F(Cli, ReplayOfALaunchTheRunNeverMadeSaysSoAndExitsTwo) {
  Result r = lockstep(
      "replay --op '3:1:kernel:no_such_kernel:1' -o " + path("replay").string() + " -- " FAKE_JOB,
      job_env());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("not replayed: the replay run recorded no replay in step 3"),
            std::string::npos)
      << r.out;
}

TEST_F(Cli, ReplayRefusesABadOpWithOneLine) {
  for (const char* op : {"3:1:kernel", "x:1:kernel:k:1", "3:1:kernel:k:0"}) {
    Result r = lockstep(std::string("replay --op '") + op + "' -- " FAKE_JOB, job_env());
    EXPECT_EQ(r.code, 2) << op;
    EXPECT_EQ(line_count(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("--op: '" + std::string(op) + "' is not STEP:STREAM:KIND:NAME:OCCURRENCE"),
              std::string::npos)
        << r.err;
  }
}

TEST_F(Cli, ReplayRefusesOpsItCannotReplayBeforeRunningAnything) {
  Result gemm =
      lockstep("replay --op '3:1:gemm:cublasLtMatmul:1' -o " + path("g").string() + " -- " FAKE_JOB,
               job_env());
  EXPECT_EQ(gemm.code, 2);
  EXPECT_NE(gemm.err.find("not replayed: a GEMM's kernels run inside cuBLAS"), std::string::npos)
      << gemm.err;
  Result nccl = lockstep("replay --op '3:3:collective:ncclAllReduce:1' -- " FAKE_JOB, job_env());
  EXPECT_EQ(nccl.code, 2);
  EXPECT_NE(nccl.err.find("NCCL kernels are not replayed"), std::string::npos) << nccl.err;
  EXPECT_FALSE(fs::exists(path("g")));
  Result both = lockstep("replay -- " FAKE_JOB, job_env());
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.err.find("exactly one of --op or --from"), std::string::npos) << both.err;
  std::ofstream(path("bad.json")) << "{\"culprit\": null}";
  Result none = lockstep("replay --from " + path("bad.json").string() + " -- " FAKE_JOB, job_env());
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("bad.json: names no culprit"), std::string::npos) << none.err;
}

}  // namespace
