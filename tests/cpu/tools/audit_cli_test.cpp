// `lockstep audit` and `lockstep run --audit` through the built binary, on synthetic runs
// (tools/synth): a clean run audits clean; one rank's all-reduce result or optimizer update
// flipped names that rank with its GPU.
#include "cli_harness.h"

namespace {

synth::Spec four_ranks(const std::string& level = "full") {
  synth::Spec spec = small(4);
  spec.level = level;
  spec.replica_update = true;
  return spec;
}

TEST_F(Cli, AuditOfACleanRunIsCleanAtEveryLevel) {
  for (const std::string level : {"broad", "full"}) {
    Result r = lockstep("audit " + write("clean-" + level, four_ranks(level)));
    EXPECT_EQ(r.code, 0) << level << ": " << r.out << r.err;
    EXPECT_NE(r.out.find("lockstep audit: CLEAN"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("checked 6 collective operations across ranks"), std::string::npos)
        << r.out;
  }
  Result full = lockstep("audit " + path("clean-full").string());
  EXPECT_NE(full.out.find("6 ops across replicas"), std::string::npos) << full.out;
}

TEST_F(Cli, OneRanksReducedOutputFlippedNamesThatRankAndItsGpu) {
  synth::Spec faulty = four_ranks("broad");
  faulty.plants.push_back({synth::Plant::Received, 2, 3, 0});
  Result r = lockstep("audit " + write("faulty", faulty));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("lockstep audit: SUSPECT"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step 3, collective ncclAllReduce comm 0 #3: rank 2 received other bytes "
                       "in 'recv' (2097152 bytes) than ranks 0, 1, 3 from the same collective: a "
                       "suspected hardware fault or silent data corruption"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("GPU-5e7e0000-0000-0000-0000-000000000002 (Synthetic GPU, PCI "
                       "0000:1a:00.0, device 2) on host "),
            std::string::npos)
      << r.out;
}

TEST_F(Cli, AReplicaThatComputesOtherBytesFromTheSameInputsIsSuspectAtFull) {
  synth::Spec faulty = four_ranks("full");
  faulty.plants.push_back({synth::Plant::Replica, 1, 2, 0});
  Result r = lockstep("audit --json " + write("replica", faulty));
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  json j = r.parsed();
  EXPECT_EQ(j["schema"], "lockstep-audit");
  EXPECT_EQ(j["verdict"], "suspect");
  ASSERT_GE(j["findings"].size(), 1u) << j.dump(2);
  const json& f = j["findings"][0];
  EXPECT_EQ(f["rule"], "replica");
  EXPECT_EQ(f["step"], 2);
  EXPECT_EQ(f["op"], "kernel void adam_update<float>(AdamParams) #1 stream 1");
  EXPECT_EQ(f["agreeing_ranks"], (json{0, 2, 3}));
  ASSERT_EQ(f["suspects"].size(), 1u);
  EXPECT_EQ(f["suspects"][0]["rank"], 1);
  EXPECT_EQ(f["suspects"][0]["gpu"]["pci_bus_id"], "0000:19:00.0");
}

// A rank cut off (or without its end record) was not read whole: no finding in the rest is no
// verdict on the run, so INCOMPLETE with exit 2, naming the file, never CLEAN.
TEST_F(Cli, AuditOfARunWithACutOffRankIsIncompleteNotClean) {
  std::string dir = write("cut", four_ranks("broad"));
  fs::path victim = fs::path(dir) / "rank-00002.lstrace";
  fs::resize_file(victim, inside_last_records_block(victim));
  Result r = lockstep("audit " + dir);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("lockstep audit: INCOMPLETE"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("CLEAN"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(victim.string() + ": cut off at offset"), std::string::npos) << r.out;
  Result j = lockstep("audit --json " + dir);
  EXPECT_EQ(j.code, 2);
  EXPECT_EQ(j.parsed()["verdict"], "incomplete");
  ASSERT_EQ(j.parsed()["not_read"].size(), 1u) << j.out;

  // A fault found in what was read stands: SUSPECT, the cut named beside it.
  synth::Spec faulty = four_ranks("broad");
  faulty.plants.push_back({synth::Plant::Received, 2, 3, 0});
  std::string bad = write("cut-faulty", faulty);
  fs::path cut = fs::path(bad) / "rank-00001.lstrace";
  fs::resize_file(cut, inside_last_records_block(cut));
  Result s = lockstep("audit " + bad);
  EXPECT_EQ(s.code, 1) << s.out << s.err;
  EXPECT_NE(s.out.find("lockstep audit: SUSPECT"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find(cut.string() + ": cut off"), std::string::npos) << s.out;
}

TEST_F(Cli, AuditOfSomethingThatIsNotARunIsOneLineAndExitTwo) {
  fs::create_directories(path("empty"));
  Result r = lockstep("audit " + path("empty").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(line_count(r.err), 1) << r.err;
}

std::string job_env(const std::string& extra = "") {
  return std::string("LOCKSTEP_LIB=") + DUMMY_SHIM + " FAKE_JOB_WORLD=3 LOCKSTEP_LEVEL=broad " +
         extra;
}

TEST_F(Cli, RunWithAuditAuditsTheTraceWhenTheJobSucceeds) {
  Result clean = lockstep("run --audit -o " + path("ok").string() + " -- " FAKE_JOB, job_env());
  EXPECT_EQ(clean.code, 0) << clean.out << clean.err;
  EXPECT_NE(clean.out.find("lockstep audit: CLEAN"), std::string::npos) << clean.out;
  Result faulty = lockstep("run --audit -o " + path("bad").string() + " -- " FAKE_JOB,
                           job_env("FAKE_JOB_PLANT=received:1:2:0"));
  EXPECT_EQ(faulty.code, 1) << faulty.out << faulty.err;
  EXPECT_NE(faulty.out.find("rank 1 received other bytes"), std::string::npos) << faulty.out;
  Result failed = lockstep("run --audit -o " + path("exit").string() + " -- " FAKE_JOB,
                           job_env("FAKE_JOB_EXIT=7 FAKE_JOB_PLANT=received:1:2:0"));
  EXPECT_EQ(failed.code, 7) << "the job's own failure comes first";
  EXPECT_EQ(failed.out.find("lockstep audit"), std::string::npos) << failed.out;
}

}  // namespace
