// `lockstep gather OUT DIR...`: per-node directories of one multi-node run (each node wrote its
// ranks' files and a manifest into its own directory) become one run directory that verify and
// diff accept; directories of another run and a rank found twice are refused before anything
// is written.
#include <sys/stat.h>

#include "cli_harness.h"

namespace {

class Gather : public Cli {
 protected:
  // One node's directory: the files of `ranks` of a world-size-4 run whose id is `run_id`.
  std::string node(const std::string& name, std::vector<int> ranks,
                   const std::string& run_id = "job-7") {
    for (int rank : ranks) {
      synth::Spec spec = small(4);
      spec.only_rank = rank;
      EXPECT_EQ(synth::write_run(path(name), spec, run_id), "");
    }
    return path(name);
  }
  int trace_files(const fs::path& dir) {
    int n = 0;
    if (fs::exists(dir))
      for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ".lstrace";
    return n;
  }
};

TEST_F(Gather, PerNodeDirectoriesOfOneRunBecomeOneRunThatVerifiesAndDiffsIdentical) {
  std::string a = node("node-a", {0, 1}), b = node("node-b", {2, 3});
  std::string reference = write("reference", small(4));
  Result r = lockstep("gather " + path("run").string() + " " + a + " " + b);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("4 trace files of run job-7"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(trace_files(path("run")), 4);
  EXPECT_EQ(json::parse(slurp(path("run") / "manifest.json"))["run_id"], "job-7");
  Result verify = lockstep("verify " + path("run").string());
  EXPECT_EQ(verify.code, 0) << verify.out << verify.err;
  Result diff = lockstep("diff " + path("run").string() + " " + reference);
  EXPECT_EQ(diff.code, 0) << diff.out << diff.err;
}

TEST_F(Gather, DirectoriesOfDifferentRunsAreRefusedAndNothingIsWritten) {
  std::string a = node("node-a", {0, 1}), b = node("node-b", {2, 3}, "job-8");
  Result r = lockstep("gather " + path("run").string() + " " + a + " " + b);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(line_count(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("run id job-8"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not one run"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("run")));
}

TEST_F(Gather, ARankFoundInTwoDirectoriesIsRefusedNamingBothFiles) {
  std::string a = node("node-a", {0, 1}), b = node("node-b", {1, 2});
  Result r = lockstep("gather " + path("run").string() + " " + a + " " + b);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(line_count(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("rank 1 again"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("node-a"), std::string::npos) << r.err;
  EXPECT_EQ(trace_files(path("run")), 0);
}

TEST_F(Gather, AnOutputDirectoryOfAnotherRunIsRefused) {
  write("run", small(4));  // run id "run"
  std::string a = node("node-a", {0, 1});
  Result r = lockstep("gather " + path("run").string() + " " + a);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("not one run"), std::string::npos) << r.err;
}

TEST_F(Gather, FilesAlreadyInTheOutputDirectoryCountAndGatheringAgainChangesNothing) {
  // Node a wrote into the shared output directory itself; node b's directory comes in.
  std::string out = node("run", {0, 1}), b = node("node-b", {2, 3});
  Result first = lockstep("gather " + out + " " + b);
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.out.find("4 trace files"), std::string::npos) << first.out;
  Result again = lockstep("gather " + out + " " + b);
  EXPECT_EQ(again.code, 0) << again.err;  // the same files (links): nothing to bring
  EXPECT_NE(again.out.find("0 brought"), std::string::npos) << again.out;
  EXPECT_EQ(trace_files(out), 4);
}

TEST_F(Gather, CopyMakesFilesOfTheirOwnAndLinkingIsTheDefault) {
  std::string a = node("node-a", {0, 1, 2, 3});
  ASSERT_EQ(lockstep("gather " + path("linked").string() + " " + a).code, 0);
  ASSERT_EQ(lockstep("gather --copy " + path("copied").string() + " " + a).code, 0);
  const std::string name = "rank-00002.lstrace";
  EXPECT_TRUE(fs::equivalent(path("linked") / name, path("node-a") / name));
  EXPECT_FALSE(fs::equivalent(path("copied") / name, path("node-a") / name));
  EXPECT_EQ(slurp(path("copied") / name), slurp(path("node-a") / name));
}

TEST_F(Gather, RanksStillMissingAreNamedInAWarningAndVerifyRefusesTheRun) {
  std::string a = node("node-a", {0, 1});
  Result r = lockstep("gather " + path("run").string() + " " + a);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("2 of 4 ranks have no file yet (first: rank 2)"), std::string::npos)
      << r.err;
  EXPECT_EQ(lockstep("verify " + path("run").string()).code, 2);
}

TEST_F(Gather, DirectoriesThatLostTheirManifestsGetOneNamingTheRunTheirHeadersAgreeOn) {
  std::string a = node("node-a", {0, 1}), b = node("node-b", {2, 3});
  fs::remove(path("node-a") / "manifest.json");
  fs::remove(path("node-b") / "manifest.json");
  Result r = lockstep("gather " + path("run").string() + " " + a + " " + b);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(slurp(path("run") / "manifest.json"))["run_id"], "job-7");
  EXPECT_EQ(lockstep("verify " + path("run").string()).code, 0);
}

TEST_F(Gather, ADirectoryWithoutTracesOrAMissingOneIsBadInput) {
  fs::create_directories(path("empty"));
  Result empty = lockstep("gather " + path("run").string() + " " + path("empty").string());
  EXPECT_EQ(empty.code, 2);
  EXPECT_NE(empty.err.find("no trace files"), std::string::npos) << empty.err;
  Result missing = lockstep("gather " + path("run").string() + " " + path("nowhere").string());
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("nowhere: not a directory"), std::string::npos) << missing.err;
}

}  // namespace
