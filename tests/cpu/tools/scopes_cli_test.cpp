// Scopes in the tools (issue #29): `show` ends a record made inside ranges with its scope, the
// diff's text and JSON (schema 5) name the scope of the culprit and, when the first divergence
// is a receiver, the first scope whose ops diverged; the export draws each thread's scopes as
// nested slices; a scope is never a difference. Synthetic runs with module scopes as
// `lockstep run`'s PyTorch hooks give them (synth::Spec::scopes).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tests/cpu/tools/cli_harness.h"

namespace {

synth::Spec scoped(const std::string& level = "full") {
  synth::Spec spec = small(2);
  spec.scopes = true;
  spec.level = level;
  return spec;
}

TEST_F(Cli, ShowEndsEachRecordMadeInsideRangesWithItsScope) {
  const std::string dir = write("a", scoped());
  Result r = lockstep("show " + dir + " --rank 0 --step 1");
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  int kernels = 0, all_reduces = 0, metrics = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("layer2_forward") != std::string::npos) {
      ++kernels;  // op 2: the second layer's forward; its first level is implied by the second
      EXPECT_TRUE(line.ends_with(" | scope Model (forward) / layers.1 (forward)")) << line;
    } else if (line.find("ncclAllReduce") != std::string::npos) {
      ++all_reduces;
      EXPECT_TRUE(line.ends_with(" | scope layers.0 (backward)")) << line;
    } else if (line.find(" metric ") != std::string::npos) {
      ++metrics;
      EXPECT_EQ(line.find("scope"), std::string::npos) << line;
    }
  }
  EXPECT_EQ(kernels, 1);
  EXPECT_EQ(all_reduces, 1);
  EXPECT_EQ(metrics, 1);
}

TEST_F(Cli, TheCulpritNamesTheModuleAndPhaseItRanIn) {
  synth::Spec spec = scoped();
  const std::string a = write("a", spec);
  spec.plants = {{synth::Plant::Output, 0, 2, 2}};  // rank 0, step 2, op 2: layers.1's forward
  const std::string b = write("b", spec);
  Result text = lockstep("diff " + pair(a, b));
  EXPECT_EQ(text.code, 1) << text.err;
  EXPECT_NE(text.out.find("in scope Model (forward) / layers.1 (forward)\n"), std::string::npos)
      << text.out;
  Result json_report = lockstep("diff --json " + pair(a, b));
  EXPECT_EQ(json_report.code, 1) << json_report.err;
  const json j = json_report.parsed();
  EXPECT_EQ(j["version"], 5);
  EXPECT_EQ(j["culprit"]["classification"], "origin");
  EXPECT_EQ(j["culprit"]["scope"], json({"Model (forward)", "layers.1 (forward)"}));
  EXPECT_TRUE(j["first_scope"].is_null());  // the first divergence is an origin
}

// At broad only collectives carry fingerprints: the first divergence is the gradient
// all-reduce, a receiver, and the report says in which module and phase it ran.
TEST_F(Cli, AtBroadAReceiverFirstNamesTheScopeWhoseOpsDivergedFirst) {
  synth::Spec spec = scoped("broad");
  spec.ops_per_step = 3;  // kernels only: nothing fingerprinted before the all-reduce
  const std::string a = write("a", spec);
  spec.plants = {{synth::Plant::Output, 0, 2, 1}};
  const std::string b = write("b", spec);
  Result text = lockstep("diff " + pair(a, b));
  EXPECT_EQ(text.code, 1) << text.err;
  EXPECT_NE(text.out.find("scope    rank 0, step 2: the first op to diverge, collective "
                          "ncclAllReduce comm 0 #2 stream 3, ran in layers.0 (backward)\n"),
            std::string::npos)
      << text.out;
  const json j = lockstep("diff --json " + pair(a, b)).parsed();
  EXPECT_EQ(j["first_divergence"]["classification"], "receiver");
  EXPECT_EQ(j["first_scope"]["scope"], json({"layers.0 (backward)"}));
  EXPECT_EQ(j["first_scope"]["text"], "layers.0 (backward)");
  EXPECT_EQ(j["first_scope"]["rank"], 0);
  EXPECT_EQ(j["first_scope"]["step"], 2);
}

// Scopes are where an op ran, not what it computed: a run without them is identical.
TEST_F(Cli, AScopeIsNeverADifference) {
  const std::string a = write("a", scoped());
  synth::Spec plain = scoped();
  plain.scopes = false;
  const std::string b = write("b", plain);
  Result r = lockstep("diff --exhaustive " + pair(a, b));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
}

TEST_F(Cli, TheExportDrawsEachThreadsScopesAsNestedSlices) {
  const std::string dir = write("a", scoped());
  const std::string out = path("a.json");
  Result r = lockstep("export " + dir + " -o " + out + " --rank 0 --steps 1");
  ASSERT_EQ(r.code, 0) << r.err;
  const json trace = json::parse(slurp(out));
  std::optional<uint64_t> scope_tid;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name" &&
        e["args"]["name"].get<std::string>().ends_with(" scopes"))
      scope_tid = e["tid"].get<uint64_t>();
  ASSERT_TRUE(scope_tid) << "no scope track";
  struct Slice {
    double begin, end;
  };
  std::map<std::string, std::vector<Slice>> slices;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "scope") {
      EXPECT_EQ(e["tid"].get<uint64_t>(), *scope_tid);
      const double ts = e["ts"].get<double>();
      slices[e["name"]].push_back({ts, ts + e["dur"].get<double>()});
    }
  // One step's forward: one model slice around four layer slices, each inside it.
  ASSERT_EQ(slices["Model (forward)"].size(), 1u);
  const Slice model = slices["Model (forward)"][0];
  for (int layer = 0; layer < 4; ++layer) {
    const auto& inner = slices[fmt::format("layers.{} (forward)", layer)];
    ASSERT_EQ(inner.size(), 1u) << layer;
    EXPECT_GT(inner[0].begin, model.begin - 1e-9) << layer;
    EXPECT_LT(inner[0].end, model.end + 1e-9) << layer;
    EXPECT_GT(inner[0].end - inner[0].begin, 1.0) << layer;  // two ops each
  }
  EXPECT_EQ(slices["layers.0 (backward)"].size(), 1u);
  EXPECT_EQ(slices["optimizer.step"].size(), 1u);
  // The protobuf export of the same records holds them too.
  Result proto = lockstep("export " + dir + " -o " + path("a.pftrace").string() + " --rank 0");
  EXPECT_EQ(proto.code, 0) << proto.err;
  EXPECT_NE(slurp(path("a.pftrace")).find("layers.1 (forward)"), std::string::npos);
}

// `lockstep hunt` turns the module scopes on in every run it makes (the fake job names its ops
// as the PyTorch hooks would when LOCKSTEP_SCOPES=1), so that its answer names the module and
// phase; a user's own LOCKSTEP_SCOPES wins.
TEST_F(Cli, HuntAnswersWithTheModuleAndPhaseUnlessTheUserTurnedScopesOff) {
  const std::string job = std::string("LOCKSTEP_LIB=") + DUMMY_SHIM +
                          " FAKE_JOB_TOGGLE=" + path("toggle").string() +
                          " FAKE_JOB_PLANT=output:1:3:1";
  Result r = lockstep("hunt -o " + path("hunt").string() + " -- " FAKE_JOB, job);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("in scope Model (forward) / layers.0 (forward)"), std::string::npos)
      << r.out;
  // The stage line that gives the answer names it too.
  EXPECT_NE(r.out.find("kernel layer1_forward #1 stream 2 in Model (forward) / layers.0 (forward)"),
            std::string::npos)
      << r.out;
  fs::remove(path("toggle"));
  Result off = lockstep("hunt -o " + path("hunt-off").string() + " -- " FAKE_JOB,
                        job + " LOCKSTEP_SCOPES=0");
  EXPECT_EQ(off.code, 1) << off.out << off.err;
  EXPECT_EQ(off.out.find("in scope"), std::string::npos) << off.out;
}

}  // namespace
