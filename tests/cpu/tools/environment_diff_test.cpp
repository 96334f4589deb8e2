// The diff compares the two runs' headers first (tools/why/environment.h): header drift on
// synthetic headers, then through the built binary on synthetic runs.
#include "tools/why/environment.h"

#include "cli_harness.h"

namespace {

using lockstep::tools::compare_environments;
using lockstep::tools::EnvironmentComparison;

json header(const json& extra) {
  json h = {{"rank", 0},
            {"host", "node-a"},
            {"gpu", {{"name", "NVIDIA H200"}}},
            {"driver_version", 13000},
            {"runtime_version", 13000},
            {"cublas_version", 130100},
            {"nccl_version", 22803},
            {"command_line", {"python", "train.py"}},
            {"environment", json::object()},
            {"python_packages", {{"torch", "2.11.0"}}}};
  if (extra.is_object()) h.update(extra);
  return h;
}

EnvironmentComparison compare(const json& a, const json& b) {
  return compare_environments({&a}, {&b});
}

TEST(EnvironmentDiff, IdenticalHeadersHaveNoDifferenceAndNoLines) {
  const json h = header({});
  const EnvironmentComparison c = compare(h, h);
  EXPECT_TRUE(c.compared);
  EXPECT_TRUE(c.differences.empty());
  EXPECT_TRUE(lockstep::tools::environment_lines(c).empty());
}

TEST(EnvironmentDiff, AVariableSetInOneRunOnlyReadsUnsetInTheOther) {
  const json a = header({}), b = header({{"environment", {{"NVIDIA_TF32_OVERRIDE", "0"}}}});
  const EnvironmentComparison c = compare(a, b);
  ASSERT_EQ(c.differences.size(), 1u);
  EXPECT_EQ(c.differences[0].key, "environment.NVIDIA_TF32_OVERRIDE");
  EXPECT_EQ(c.differences[0].a, std::nullopt);
  EXPECT_EQ(c.differences[0].b, "0");
  const auto lines = lockstep::tools::environment_lines(c);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], "  NVIDIA_TF32_OVERRIDE  A (unset), B 0");
}

TEST(EnvironmentDiff, LibraryVersionsReadAsTheLibrariesPrintThem) {
  const json a = header({}), b = header({{"cublas_version", 130002},
                                         {"nccl_version", 22805},
                                         {"runtime_version", 12080},
                                         {"python_packages", {{"torch", "2.10.0"}}}});
  const EnvironmentComparison c = compare(a, b);
  std::map<std::string, std::pair<std::string, std::string>> seen;
  for (const auto& d : c.differences) seen[d.what] = {d.a.value_or("-"), d.b.value_or("-")};
  EXPECT_EQ(seen["cuBLAS"], std::make_pair(std::string("13.1.0"), std::string("13.0.2")));
  EXPECT_EQ(seen["NCCL"], std::make_pair(std::string("2.28.3"), std::string("2.28.5")));
  EXPECT_EQ(seen["CUDA runtime"], std::make_pair(std::string("13.0"), std::string("12.8")));
  EXPECT_EQ(seen["PyTorch"], std::make_pair(std::string("2.11.0"), std::string("2.10.0")));
  EXPECT_EQ(c.differences.size(), 4u);
}

TEST(EnvironmentDiff, FactsThatAnOlderTraceDoesNotRecordAreNotCompared) {
  json old = header({});
  old.erase("environment");
  old.erase("python_packages");
  old.erase("cublas_version");
  const json b = header({{"environment", {{"NCCL_ALGO", "Tree"}}}, {"cublas_version", 1}});
  EXPECT_TRUE(compare(old, b).differences.empty());
}

TEST(EnvironmentDiff, ADifferenceOnOneRankOfManyNamesThatRank) {
  const json a = header({}), other = header({{"gpu", {{"name", "NVIDIA H100"}}}});
  const EnvironmentComparison c = compare_environments({&a, &a}, {&a, &other});
  ASSERT_EQ(c.differences.size(), 1u);
  EXPECT_EQ(c.differences[0].ranks, std::vector<int>{1});
  EXPECT_EQ(lockstep::tools::environment_lines(c)[1],
            "  GPU model  A NVIDIA H200, B NVIDIA H100 (rank 1)");
}

TEST(EnvironmentDiff, AnotherNodeCountIsADifferenceOfTheRunAsAWhole) {
  const json a0 = header({}), a1 = header({}), b1 = header({{"host", "node-b"}});
  const EnvironmentComparison c = compare_environments({&a0, &a1}, {&a0, &b1});
  ASSERT_EQ(c.differences.size(), 1u);
  EXPECT_EQ(c.differences[0].what, "nodes");
  EXPECT_TRUE(c.differences[0].ranks.empty());
}

// Through the binary: the environment is printed before the ops, and alone never makes the runs
// divergent; JSON carries it under "environment" (schema 5).
TEST_F(Cli, AnEnvironmentDifferenceAloneIsShownFirstAndTheVerdictStaysIdentical) {
  synth::Spec a = small(), b = small();
  b.header_extra = R"({"environment": {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}})";
  a.header_extra = R"({"environment": {}})";
  const std::string ra = write("a", a), rb = write("b", b);
  Result r = lockstep("diff " + pair(ra, rb));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const size_t env = r.out.find("CUBLAS_WORKSPACE_CONFIG  A (unset), B :4096:8 (every rank)");
  ASSERT_NE(env, std::string::npos) << r.out;
  EXPECT_LT(env, r.out.find("ranks compared")) << "the environment comes before the ops:\n"
                                               << r.out;
  Result j = lockstep("diff --json " + pair(ra, rb));
  ASSERT_EQ(j.code, 0) << j.err;
  const json doc = j.parsed();
  EXPECT_EQ(doc["version"], 5);
  EXPECT_EQ(doc["verdict"], "identical");
  ASSERT_EQ(doc["environment"]["differences"].size(), 1u) << doc["environment"].dump();
  EXPECT_EQ(doc["environment"]["differences"][0]["key"], "environment.CUBLAS_WORKSPACE_CONFIG");
  EXPECT_EQ(doc["environment"]["differences"][0]["a"], nullptr);
  EXPECT_EQ(doc["environment"]["differences"][0]["b"], ":4096:8");
}

TEST_F(Cli, ADivergentPairWithAnotherEnvironmentSaysBoth) {
  synth::Spec a = small(), b = small();
  a.header_extra = R"({"nccl_version": 22803})";
  b.header_extra = R"({"nccl_version": 22703})";
  b.plants.push_back({synth::Plant::Output, 0, 2, 1});
  Result r = lockstep("diff " + pair(write("a", a), write("b", b)));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("NCCL  A 2.28.3, B 2.27.3 (every rank)"), std::string::npos) << r.out;
  EXPECT_LT(r.out.find("NCCL  A"), r.out.find("culprit")) << r.out;
}

}  // namespace
