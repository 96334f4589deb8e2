// Issue #30, NCCL's own choices: the Collective record's algorithm, protocol and channel count
// in words (tools/why/nccl_choice.h), then through the built binary on synthetic runs: `show`
// prints them, and a Ring vs Tree pair is reported as an environment difference first and an
// algorithm difference at the collective whose inputs matched and outputs differed.
#include "tools/why/nccl_choice.h"

#include <vector>

#include "cli_harness.h"
#include "trace/record.h"

namespace {

using lockstep::tools::nccl_choice_difference;
using lockstep::tools::nccl_choice_of;
using F = lockstep::trace::fields::Collective;

// Trace values of trace/enum_names.def (NcclAlgo, NcclProto).
constexpr uint64_t kTree = 1, kRing = 2, kLL = 1, kLL128 = 2, kSimple = 3;

std::vector<uint64_t> collective(uint64_t algo, uint64_t proto, uint64_t channels) {
  std::vector<uint64_t> fields(F::nccl_channels + 1, 0);
  fields[F::count] = 1 << 20;
  fields[F::nccl_algo] = algo;
  fields[F::nccl_proto] = proto;
  fields[F::nccl_channels] = channels;
  return fields;
}

TEST(NcclChoice, EveryDifferingPartIsNamedWithBothRunsValues) {
  EXPECT_EQ(nccl_choice_difference(collective(kRing, kLL128, 4), collective(kTree, kSimple, 2)),
            "NCCL algorithm Ring vs Tree, protocol LL128 vs Simple, channels 4 vs 2");
  EXPECT_EQ(nccl_choice_difference(collective(kRing, kLL, 4), collective(kRing, kSimple, 4)),
            "NCCL protocol LL vs Simple");
}

TEST(NcclChoice, EqualChoicesSayNothing) {
  EXPECT_EQ(nccl_choice_difference(collective(kRing, kLL, 4), collective(kRing, kLL, 4)), "");
}

TEST(NcclChoice, APartOneRunDidNotRecordIsNotCompared) {
  // An older trace (fields absent) or a job with its own profiler plugin: nothing to say.
  const std::vector<uint64_t> old(F::in_place + 1, 0);
  EXPECT_EQ(nccl_choice_difference(old, collective(kTree, kSimple, 2)), "");
  EXPECT_EQ(nccl_choice_difference(collective(kRing, 0, 0), collective(kTree, kSimple, 2)),
            "NCCL algorithm Ring vs Tree");
}

TEST(NcclChoice, ARecordWithoutChoicesHasNoneAndANameNcclAddedLaterReadsOther) {
  EXPECT_FALSE(nccl_choice_of(std::vector<uint64_t>(F::in_place + 1, 0)));
  const auto c = nccl_choice_of(collective(255, kSimple, 8));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->algo, "Other");
  EXPECT_EQ(c->proto, "Simple");
  EXPECT_EQ(c->channels, 8u);
}

synth::Spec with_choice(uint64_t algo, uint64_t proto, const char* env_algo) {
  synth::Spec spec = small();
  spec.level = "broad";
  spec.nccl_algo = algo;
  spec.nccl_proto = proto;
  spec.nccl_channels = 2;
  spec.header_extra = std::string(R"({"environment": {"NCCL_ALGO": ")") + env_algo + "\"}}";
  return spec;
}

TEST_F(Cli, ShowPrintsTheAlgorithmProtocolAndChannelsOfACollective) {
  const std::string a = write("a", with_choice(kRing, kLL128, "Ring"));
  Result show = lockstep("show " + a + " --rank 0 --step 1 --grep AllReduce");
  ASSERT_EQ(show.code, 0) << show.err;
  EXPECT_NE(show.out.find("nccl_algo=Ring"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("nccl_proto=LL128"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("nccl_channels=2"), std::string::npos) << show.out;
  // A trace without them (written before the fields, or a one-rank job) shows none.
  Result bare = lockstep("show " + write("b", small()) + " --rank 0 --step 1 --grep AllReduce");
  ASSERT_EQ(bare.code, 0) << bare.err;
  EXPECT_EQ(bare.out.find("nccl_algo"), std::string::npos) << bare.out;
}

TEST_F(Cli, AnotherAlgorithmAloneIsNoDivergenceButIsSaidAfterTheEnvironment) {
  // Ring and Tree may well give the same sums (two ranks): only the environment differs.
  const std::string a = write("a", with_choice(kRing, kSimple, "Ring"));
  const std::string b = write("b", with_choice(kTree, kSimple, "Tree"));
  Result r = lockstep("diff " + pair(a, b));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const size_t env = r.out.find("NCCL_ALGO  A Ring, B Tree");
  const size_t choices = r.out.find(
      "NCCL chose differently at 12 collectives (their results decide the verdict); first: rank "
      "0, step 0, ncclAllReduce comm 0 #0: algorithm Ring vs Tree");
  ASSERT_NE(env, std::string::npos) << r.out;
  ASSERT_NE(choices, std::string::npos) << r.out;
  EXPECT_LT(env, choices) << r.out;
  Result j = lockstep("diff --json " + pair(a, b));
  ASSERT_EQ(j.code, 0) << j.err;
  const json doc = j.parsed();
  EXPECT_EQ(doc["verdict"], "identical");
  EXPECT_EQ(doc["nccl_choices"]["total"], 12) << doc["nccl_choices"].dump(2);
  EXPECT_EQ(doc["nccl_choices"]["first"]["difference"], "NCCL algorithm Ring vs Tree");
  EXPECT_EQ(doc["nccl_choices"]["first"]["name"], "ncclAllReduce");
}

TEST_F(Cli, RunsWithTheSameChoicesSayNothingAboutThem) {
  const std::string a = write("a", with_choice(kRing, kSimple, "Ring"));
  const std::string b = write("b", with_choice(kRing, kSimple, "Ring"));
  Result r = lockstep("diff " + pair(a, b));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("NCCL chose"), std::string::npos) << r.out;
  Result j = lockstep("diff --json " + pair(a, b));
  EXPECT_EQ(j.parsed()["nccl_choices"]["total"], 0);
  EXPECT_EQ(j.parsed()["nccl_choices"]["first"], nullptr);
}

TEST_F(Cli, ARingVersusTreePairSaysTheEnvironmentFirstAndTheAlgorithmAtTheCollective) {
  const std::string a = write("a", with_choice(kRing, kLL128, "Ring"));
  synth::Spec tree = with_choice(kTree, kSimple, "Tree");
  tree.plants.push_back({synth::Plant::Received, 0, 2, 0});  // the all-reduce sums otherwise
  const std::string b = write("b", tree);
  Result r = lockstep("diff " + pair(a, b));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  const size_t env = r.out.find("NCCL_ALGO  A Ring, B Tree (every rank)");
  const size_t culprit = r.out.find("culprit");
  const size_t choice = r.out.find("NCCL algorithm Ring vs Tree, protocol LL128 vs Simple");
  ASSERT_NE(env, std::string::npos) << r.out;
  ASSERT_NE(culprit, std::string::npos) << r.out;
  ASSERT_NE(choice, std::string::npos) << r.out;
  EXPECT_LT(env, culprit) << r.out;
  EXPECT_LT(culprit, choice) << "the choices are named at the culprit collective:\n" << r.out;
  EXPECT_NE(r.out.find("ncclAllReduce"), std::string::npos) << r.out;

  Result j = lockstep("diff --json " + pair(a, b));
  ASSERT_EQ(j.code, 1) << j.err;
  const json doc = j.parsed();
  ASSERT_TRUE(doc.contains("culprit")) << doc.dump(2);
  const json& c = doc["culprit"];
  EXPECT_EQ(c["kind"], "collective") << c.dump(2);
  EXPECT_EQ(c["classification"], "origin") << c.dump(2);
  EXPECT_NE(c["detail"].get<std::string>().find("NCCL algorithm Ring vs Tree"), std::string::npos)
      << c.dump(2);
  EXPECT_EQ(c["nccl"]["a"]["algo"], "Ring") << c.dump(2);
  EXPECT_EQ(c["nccl"]["b"]["algo"], "Tree") << c.dump(2);
  EXPECT_EQ(c["nccl"]["a"]["proto"], "LL128") << c.dump(2);
  EXPECT_EQ(c["nccl"]["b"]["proto"], "Simple") << c.dump(2);
  EXPECT_EQ(c["nccl"]["b"]["channels"], 2) << c.dump(2);
}

TEST_F(Cli, ACollectiveThatOnlyReceivedADifferenceDoesNotBlameItsAlgorithm) {
  // Rank 0's step-2 kernel differs (an origin upstream): the all-reduce after it received the
  // difference, so the choices are not its explanation.
  const std::string a = write("a", with_choice(kRing, kSimple, "Ring"));
  synth::Spec tree = with_choice(kTree, kSimple, "Tree");
  tree.plants.push_back({synth::Plant::Output, 0, 2, 1});
  Result r = lockstep("diff " + pair(a, write("b", tree)));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_EQ(r.out.find("NCCL algorithm"), std::string::npos) << r.out;
}

}  // namespace
