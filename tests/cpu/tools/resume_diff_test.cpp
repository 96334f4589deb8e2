// Issue #31, resume certification, through the built binary: a run resumed from a checkpoint
// compares with a run that went straight through by the job's step numbers; the steps only one
// of them ran and the resumed run's restore prologue are reported, not compared, and not
// divergences.
#include "cli_harness.h"

namespace {

// Two ranks, the job numbering its steps 0-7 (trace step 0: set-up).
synth::Spec numbered() {
  synth::Spec spec = small(2);
  spec.steps = 8;
  spec.numbered = true;
  return spec;
}

synth::Spec resumed_at(uint32_t k) {
  synth::Spec spec = numbered();
  spec.resume_at = k;
  return spec;
}

TEST_F(Cli, AResumedRunIsBitExactForTheStepsBothRan) {
  std::string a = write("continuous", numbered()), b = write("resumed", resumed_at(4));
  Result r = lockstep("diff " + pair(a, b));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("lockstep diff: IDENTICAL\n  resume bit-exact for steps 4-7\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("compared steps 4-7 by the job's numbers (trace steps 5-8 of A, 1-4 of B"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("steps 0-3 (trace steps 0-4) only in A (B started later)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("run B's restore prologue, trace step 0"), std::string::npos) << r.out;
}

TEST_F(Cli, TheSamePairByTraceStepIsDivergentAsBefore) {
  std::string a = write("continuous", numbered()), b = write("resumed", resumed_at(4));
  Result r = lockstep("diff --align ordinal " + pair(a, b));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_EQ(r.out.find("resume bit-exact"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("resume not bit-exact"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("by the job's numbers"), std::string::npos) << r.out;
}

TEST_F(Cli, TheJsonSaysHowStepsPairedAndWhatWasLeftOut) {
  std::string a = write("continuous", numbered()), b = write("resumed", resumed_at(4));
  Result r = lockstep("diff --json " + pair(a, b));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  json j = r.parsed();
  EXPECT_EQ(j["version"], 5);
  EXPECT_EQ(j["verdict"], "identical");
  EXPECT_EQ(j["alignment"]["mode"], "number");
  EXPECT_EQ(j["alignment"]["compared_job_steps"], (json{{"first", 4}, {"last", 7}, {"setup", false}}));
  EXPECT_EQ(j["alignment"]["resume"]["run"], "b");
  EXPECT_EQ(j["alignment"]["resume"]["at_step"], 4);
  EXPECT_EQ(j["alignment"]["resume"]["bit_exact"], true);
  ASSERT_EQ(j["phases"].size(), 2u) << j["phases"].dump();
  EXPECT_EQ(j["phases"][0]["run"], "a");
  EXPECT_EQ(j["phases"][0]["phase"], "before");
  EXPECT_EQ(j["phases"][0]["job_steps"], (json{0, 3}));
  EXPECT_EQ(j["phases"][1]["run"], "b");
  EXPECT_EQ(j["phases"][1]["phase"], "restore");
  EXPECT_EQ(j["phases"][1]["trace_steps"], (json{0, 0}));
  EXPECT_EQ(j["phases"][1]["compared"], false);
}

TEST_F(Cli, ARestoreThatLoadsAnotherStateNamesTheFirstDivergenceAfterIt) {
  synth::Spec bad = resumed_at(4);
  bad.restore_differs = true;
  std::string a = write("continuous", numbered()), b = write("resumed", bad);
  Result r = lockstep("diff " + pair(a, b));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("resume not bit-exact: run B's first divergence after its restore is at "
                       "step 4 (trace steps 5/1)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("culprit  none in the steps compared: their first step already read "
                       "differing state, which run B's restore prologue (not compared) loaded"),
            std::string::npos)
      << r.out;
}

TEST_F(Cli, ADivergenceAfterTheResumeIsDatedByTheJobsNumber) {
  synth::Spec planted = resumed_at(4);
  planted.plants.push_back({synth::Plant::Output, 1, 6, 2});
  std::string a = write("continuous", numbered()), b = write("resumed", planted);
  Result r = lockstep("diff --json " + pair(a, b));
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  json j = r.parsed();
  EXPECT_EQ(j["culprit"]["rank"], 1);
  EXPECT_EQ(j["culprit"]["job_step"], 6);
  EXPECT_EQ(j["culprit"]["step"], 7) << "run A's trace step";
  EXPECT_EQ(j["culprit"]["step_b"], 3) << "run B's trace step";
  EXPECT_EQ(j["culprit"]["classification"], "origin");
  EXPECT_EQ(j["alignment"]["resume"]["bit_exact"], false);
}

TEST_F(Cli, AStepMissingInTheMiddleMakesTheVerdictIncomplete) {
  synth::Spec skipping = numbered();
  skipping.skip_steps = {5};
  std::string a = write("a", numbered()), b = write("b", skipping);
  Result r = lockstep("diff " + pair(a, b));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("INCOMPLETE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step 5 (trace step 6) only in A (missing from B's numbering)"),
            std::string::npos)
      << r.out;
}

TEST_F(Cli, AShorterRunIsComparedOverTheStepsItRan) {
  synth::Spec shorter = numbered();
  shorter.steps = 5;
  std::string a = write("a", numbered()), b = write("b", shorter);
  Result r = lockstep("diff " + pair(a, b));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("compared set-up and steps 0-4 by the job's numbers"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("steps 5-7 (trace steps 6-8) only in A (B stopped earlier)"),
            std::string::npos)
      << r.out;
}

TEST_F(Cli, StepsSelectTheJobsNumbersWhenAlignedByThem) {
  std::string a = write("continuous", numbered()), b = write("resumed", resumed_at(4));
  Result r = lockstep("diff --steps 5-6 " + pair(a, b));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("resume bit-exact for steps 5-6"), std::string::npos) << r.out;
  Result none = lockstep("diff --steps 1-2 " + pair(a, b));
  EXPECT_EQ(none.code, 2) << none.out;
  EXPECT_EQ(line_count(none.err), 1) << none.err;
  EXPECT_NE(none.err.find("--steps 1-2: steps 1-2 hold no numbered step that both runs have"),
            std::string::npos)
      << none.err;
}

TEST_F(Cli, AligningUnnumberedRunsByNumberIsOneLineAndExitTwo) {
  std::string a = write("a", small(1)), b = write("b", small(1));
  Result r = lockstep("diff --align number " + pair(a, b));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(line_count(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("--align number: neither run has numbered steps"), std::string::npos)
      << r.err;
  Result bad = lockstep("diff --align sideways " + pair(a, b));
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--align: 'sideways' is not auto, number or ordinal"), std::string::npos)
      << bad.err;
  EXPECT_EQ(lockstep("diff " + pair(a, b)).code, 0) << "auto: by position, as before";
}

}  // namespace

// ---- check --resume-at with the fake job (tests/cpu/tools/fake_job.cpp) --------------------
namespace {

std::string resume_env(const std::string& extra = "") {
  return std::string("LOCKSTEP_LIB=") + DUMMY_SHIM + " FAKE_JOB_NUMBERED=1 FAKE_JOB_STEPS=6 " +
         extra;
}

TEST_F(Cli, CheckResumeAtCertifiesABitExactResume) {
  const std::string dir = path("check").string();
  Result r = lockstep("check --resume-at 3 -o " + dir + " -- " FAKE_JOB, resume_env());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("resume bit-exact for steps 3-5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lockstep check: RESUME BIT-EXACT (resume bit-exact for steps 3-5; runs "
                       "in " + dir + ")"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(fs::exists(path("check") / "straight" / "rank-00000.lstrace"));
  EXPECT_TRUE(fs::exists(path("check") / "resumed" / "rank-00001.lstrace"));
  EXPECT_TRUE(fs::exists(path("check") / "checkpoint"));
  EXPECT_TRUE(fs::exists(path("check") / "resumed" / "job.log")) << "the job's output, as check's";
  EXPECT_EQ(r.err.find("lockstep: warning"), std::string::npos) << r.err;
}

TEST_F(Cli, CheckResumeAtNamesARestoreThatLoadsAnotherState) {
  Result r = lockstep("check --resume-at 3 -o " + path("bad").string() + " -- " FAKE_JOB,
                      resume_env("FAKE_JOB_RESTORE_DIFFERS=1"));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("lockstep check: RESUME DIVERGENT (resume not bit-exact: run B's first "
                       "divergence after its restore is at step 3"),
            std::string::npos)
      << r.out;
}

TEST_F(Cli, CheckResumeAtRefusesAJobThatSavesNoCheckpoint) {
  Result r = lockstep("check --resume-at 3 -o " + path("none").string() + " -- " FAKE_JOB,
                      resume_env("FAKE_JOB_NO_CHECKPOINT=1"));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("the straight run wrote no checkpoint to " +
                       fs::absolute(path("none") / "checkpoint").string() +
                       " (LOCKSTEP_CHECKPOINT) before step 3"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(path("none") / "resumed")) << "no resumed run without a checkpoint";
}

TEST_F(Cli, CheckResumeAtRefusesAnEarlierChecksCheckpointUnlessOverwriting) {
  const std::string dir = path("again").string();
  ASSERT_EQ(lockstep("check --resume-at 3 -o " + dir + " -- " FAKE_JOB, resume_env()).code, 0);
  Result again = lockstep("check --resume-at 3 -o " + dir + " -- " FAKE_JOB, resume_env());
  EXPECT_EQ(again.code, 2);
  EXPECT_EQ(line_count(again.err), 1) << again.err;
  EXPECT_NE(again.err.find("a checkpoint of an earlier check is there (--overwrite removes it)"),
            std::string::npos)
      << again.err;
  Result overwritten =
      lockstep("check --resume-at 3 --overwrite -o " + dir + " -- " FAKE_JOB, resume_env());
  EXPECT_EQ(overwritten.code, 0) << overwritten.out << overwritten.err;
}

}  // namespace
