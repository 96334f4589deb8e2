// The built `lockstep` binary on synthetic trace directories written with TraceWriter:
// exit codes, the JSON schema, bad input, and the run/check/hunt mechanics with a fake job.
#include <nlohmann/json.hpp>

#include "cli_harness.h"
#include "trace/reader.h"

namespace {

TEST_F(Cli, IdenticalRunsExitZero) {
  std::string a = write("a", small()), b = write("b", small());
  Result text = lockstep("diff " + pair(a, b));
  EXPECT_EQ(text.code, 0) << text.out << text.err;
  EXPECT_NE(text.out.find("IDENTICAL"), std::string::npos);
  EXPECT_EQ(text.out.find("\033["), std::string::npos) << "no colour when not on a terminal";
  Result r = lockstep("diff --json " + pair(a, b));
  ASSERT_EQ(r.code, 0) << r.err;
  json j = r.parsed();
  EXPECT_EQ(j["schema"], "lockstep-diff");
  EXPECT_EQ(j["version"], 5);
  EXPECT_EQ(j["verdict"], "identical");
  EXPECT_EQ(j["alignment"]["mode"], "ordinal") << "runs without step numbers pair by position";
  EXPECT_EQ(j["alignment"]["reason"], "neither run has numbered steps");
  EXPECT_EQ(j["phases"], json::array());
  EXPECT_TRUE(j["culprit_rank"].is_null());
  EXPECT_TRUE(j["first_divergence"].is_null());
  EXPECT_EQ(j["stats"]["steps_skipped"], 12);  // 6 steps x 2 ranks, all through summaries
  EXPECT_EQ(j["stats"]["records_compared"], 0);
}

TEST_F(Cli, OutputOnlyDivergenceIsTheOrigin) {
  synth::Spec planted = small();
  planted.plants.push_back({synth::Plant::Output, 0, 2, 1});
  std::string a = write("a", small()), b = write("b", planted);
  Result r = lockstep("diff --json " + pair(a, b));
  ASSERT_EQ(r.code, 1) << r.err;
  json j = r.parsed();
  EXPECT_EQ(j["verdict"], "divergent");
  EXPECT_EQ(j["culprit_rank"], 0);
  const json& first = j["first_divergence"];
  EXPECT_EQ(first["rank"], 0);
  EXPECT_EQ(first["step"], 2);
  EXPECT_EQ(first["kind"], "kernel");
  EXPECT_EQ(first["classification"], "origin");
  EXPECT_EQ(first["name"], "void layer1_forward<__nv_bfloat16, 128>(Params)");
  EXPECT_EQ(first["occurrence"], 1);
  EXPECT_EQ(first["stream"], 2);
  EXPECT_TRUE(first["seq"]["a"].is_number());
  EXPECT_TRUE(first["seq"]["b"].is_number());
  const json& buffer = first["buffer"];
  EXPECT_EQ(buffer["role"], "out");
  EXPECT_EQ(buffer["label"], "arg1");
  EXPECT_EQ(buffer["dtype"], "bf16");
  EXPECT_EQ(buffer["bytes"], 1 << 21);
  EXPECT_NE(buffer["fingerprint_a"], buffer["fingerprint_b"]);
  EXPECT_EQ(buffer["fingerprint_a"].get<std::string>().size(), 18u);
  EXPECT_EQ(j["stats"]["steps_skipped"].get<int>(), 4);  // steps 0-1 of both ranks
  Result text = lockstep("diff " + pair(a, b));
  EXPECT_EQ(text.code, 1);
  EXPECT_NE(text.out.find("culprit  rank 0, step 2"), std::string::npos) << text.out;
}

TEST_F(Cli, AllReduceCarryingRank1sDifferenceBlamesRank1) {
  synth::Spec planted = small();
  planted.plants.push_back({synth::Plant::Output, 1, 3, 5});
  std::string a = write("a", small()), b = write("b", planted);
  Result r = lockstep("diff --json " + pair(a, b));
  ASSERT_EQ(r.code, 1) << r.err;
  json j = r.parsed();
  EXPECT_EQ(j["culprit_rank"], 1);
  EXPECT_EQ(j["culprit"]["classification"], "origin");
  EXPECT_EQ(j["culprit"]["step"], 3);
  ASSERT_EQ(j["per_rank"].size(), 2u);
  EXPECT_EQ(j["per_rank"][0]["rank"], 1);
  const json& rank0 = j["per_rank"][1];
  EXPECT_EQ(rank0["rank"], 0);
  EXPECT_EQ(rank0["kind"], "collective");
  EXPECT_EQ(rank0["classification"], "receiver");
  EXPECT_EQ(rank0["received_from"], 1);
  EXPECT_EQ(rank0["collective"]["comm_seq"], 3);
  EXPECT_EQ(rank0["buffer"]["label"], "recv");
}

TEST_F(Cli, StructuralInsertAndDelete) {
  synth::Spec planted = small();
  planted.plants.push_back({synth::Plant::Insert, 0, 1, 2});
  std::string a = write("a", small()), b = write("b", planted);
  Result r = lockstep("diff --json --context 2 " + pair(a, b));
  ASSERT_EQ(r.code, 1) << r.err;
  json j = r.parsed();
  EXPECT_EQ(j["first_divergence"]["classification"], "structural");
  EXPECT_EQ(j["first_divergence"]["structural_kind"], "inserted");
  EXPECT_EQ(j["first_divergence"]["name"], "planted_extra_kernel");
  EXPECT_TRUE(j["first_divergence"]["seq"]["a"].is_null());
  ASSERT_GE(j["structural"].size(), 1u);
  EXPECT_EQ(j["structural_total"], 1);
  const json& context = j["structural"][0]["context"];
  EXPECT_FALSE(context["a"].empty());
  EXPECT_FALSE(context["b"].empty());
  Result text = lockstep("diff " + pair(a, b));
  EXPECT_NE(text.out.find("inserted kernel planted_extra_kernel"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("| "), std::string::npos) << "side by side";

  Result reversed = lockstep("diff --json " + pair(b, a));
  ASSERT_EQ(reversed.code, 1);
  EXPECT_EQ(reversed.parsed()["first_divergence"]["structural_kind"], "deleted");

  synth::Spec deleted = small();
  deleted.plants.push_back({synth::Plant::Delete, 1, 4, 3});
  std::string c = write("c", deleted);
  Result gone = lockstep("diff --json " + pair(a, c));
  ASSERT_EQ(gone.code, 1);
  json g = gone.parsed();
  EXPECT_EQ(g["culprit_rank"], 1);
  EXPECT_EQ(g["culprit"]["structural_kind"], "deleted");
  EXPECT_EQ(g["culprit"]["kind"], "gemm");
}

TEST_F(Cli, MetricDivergenceIsDecoded) {
  synth::Spec planted = small();
  planted.plants.push_back({synth::Plant::Metric, 0, 4, 0});
  std::string a = write("a", small()), b = write("b", planted);
  Result r = lockstep("diff --json " + pair(a, b));
  ASSERT_EQ(r.code, 1) << r.err;
  json j = r.parsed();
  const json& m = j["metric_divergence"];
  ASSERT_FALSE(m.is_null());
  EXPECT_EQ(m["step"], 4);
  EXPECT_EQ(m["rank"], 0);
  EXPECT_EQ(m["a"]["decoded"].get<std::string>().rfind("f32 ", 0), 0u);
  EXPECT_NE(m["a"]["decoded"], m["b"]["decoded"]);
  EXPECT_EQ(m["a"]["bytes_hex"].get<std::string>().size(), 8u);
  EXPECT_TRUE(j["culprit_rank"].is_null()) << "a metric alone names no culprit";
  Result text = lockstep("diff " + pair(a, b));
  EXPECT_NE(text.out.find("first differs at step 4, rank 0"), std::string::npos) << text.out;
}

TEST_F(Cli, MissingRankFileIsInvalidInput) {
  std::string a = write("a", small(3)), b = write("b", small(3));
  fs::remove(fs::path(b) / "rank-00002.lstrace");
  Result r = lockstep("diff " + pair(a, b));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(line_count(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(b), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 2"), std::string::npos) << r.err;
  EXPECT_EQ(lockstep("diff --rank 0 " + pair(a, b)).code, 0) << "other ranks still compare";
  EXPECT_EQ(lockstep("verify " + b).code, 2);
}

TEST_F(Cli, CutOffFileIsIncompleteAndItsValidPrefixIsCompared) {
  synth::Spec planted = small();
  planted.plants.push_back({synth::Plant::Output, 0, 5, 0});  // in the part that gets cut off
  std::string a = write("a", small()), b = write("b", planted);
  fs::path victim = fs::path(b) / "rank-00000.lstrace";
  fs::resize_file(victim, inside_last_records_block(victim));
  Result r = lockstep("diff " + pair(a, b));
  EXPECT_EQ(r.code, 2) << "no divergence in the prefix, but not everything compared: " << r.out;
  EXPECT_NE(r.out.find("INCOMPLETE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cut off"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(victim.string()), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("cut off"), std::string::npos) << r.err;
  Result v = lockstep("verify " + b);
  EXPECT_EQ(v.code, 2);
  EXPECT_NE(v.err.find("cut off"), std::string::npos) << v.err;

  synth::Spec early = small();
  early.plants.push_back({synth::Plant::Output, 0, 1, 0});  // inside the valid prefix
  std::string c = write("c", early);
  fs::path cut = fs::path(c) / "rank-00000.lstrace";
  fs::resize_file(cut, inside_last_records_block(cut));
  EXPECT_EQ(lockstep("diff " + pair(a, c)).code, 1) << "a divergence found is real";
}

TEST_F(Cli, DifferentWorldSizesAreInvalidInput) {
  std::string a = write("a", small(2)), b = write("b", small(3));
  Result r = lockstep("diff " + pair(a, b));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(line_count(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("world size"), std::string::npos) << r.err;
}

TEST_F(Cli, HeaderWorldSizeDisagreeingWithFilesIsInvalid) {
  synth::Spec liar = small(2);
  liar.header_world_size = 4;
  std::string a = write("a", small(2)), b = write("b", liar);
  Result r = lockstep("diff " + pair(a, b));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(line_count(r.err), 1) << r.err;
}

TEST_F(Cli, NewerFormatVersionIsInvalidInput) {
  std::string a = write("a", small()), b = write("b", small());
  fs::path file = fs::path(b) / "rank-00001.lstrace";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    uint32_t version = 99;
    f.seekp(8);
    f.write(reinterpret_cast<const char*>(&version), 4);
  }
  Result r = lockstep("diff " + pair(a, b));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(line_count(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(file.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("newer"), std::string::npos) << r.err;
}

TEST_F(Cli, ForeignFilesAndBadOptionsAreOneLineErrors) {
  std::string a = write("a", small());
  fs::create_directories(path("junk"));
  std::ofstream(path("junk") / "rank-00000.lstrace") << "not a trace at all";
  for (const std::string& args :
       {"diff " + a + " " + path("junk").string(), "diff " + a + " " + path("nothing").string(),
        "diff " + a + " " + a + " --steps 9-3", "diff " + a + " " + a + " --rank 7", "diff " + a,
        "show " + a + " --grep '('", "stats " + path("junk").string(), std::string("frobnicate"),
        "diff --bogus-flag " + a + " " + a}) {
    Result r = lockstep(args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_EQ(line_count(r.err), 1) << args << ": " << r.err;
    EXPECT_EQ(r.err.rfind("lockstep: ", 0), 0u) << r.err;
  }
}

TEST_F(Cli, StatsShowVerify) {
  std::string a = write("a", small());
  Result stats = lockstep("stats " + a);
  ASSERT_EQ(stats.code, 0) << stats.err;
  EXPECT_NE(stats.out.find("ranks      2 ranks of world size 2"), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("steps      6 (0-5)"), std::string::npos) << stats.out;
  // 2 ranks x 6 steps x (8 ops + all-reduce + adam + metric)
  EXPECT_NE(stats.out.find("  collective               12"), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("dropped    nothing"), std::string::npos);
  EXPECT_NE(stats.out.find("cublasLtMatmul"), std::string::npos);

  Result show = lockstep("show " + a + " --rank 1 --step 2 --grep AllReduce");
  ASSERT_EQ(show.code, 0) << show.err;
  EXPECT_EQ(line_count(show.out), 1) << show.out;
  EXPECT_NE(show.out.find("r1 step 2"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("comm_seq=2"), std::string::npos) << show.out;

  Result verify = lockstep("verify " + a);
  EXPECT_EQ(verify.code, 0) << verify.out << verify.err;
  EXPECT_NE(verify.out.find("CERTIFIED COMPLETE"), std::string::npos);

  // A flipped byte in the middle of a file is corruption, found by verify.
  fs::path file = fs::path(a) / "rank-00000.lstrace";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(fs::file_size(file) / 2));
    char c;
    f.read(&c, 1);
    c ^= 0x40;
    f.seekp(static_cast<std::streamoff>(fs::file_size(file) / 2));
    f.write(&c, 1);
  }
  Result bad = lockstep("verify " + a);
  EXPECT_EQ(bad.code, 2) << bad.out;
}

// Level full's flagged inputs (learned read-only: no output entry; not written since its
// allocation: no value) are printed as such, and two runs with them diff clean.
TEST_F(Cli, ShowAndExportPrintFlaggedInputs) {
  synth::Spec spec = small(1);
  spec.flagged_inputs = true;
  const std::string a = write("a", spec), b = write("b", spec);
  Result show = lockstep("show " + a + " --limit 0");
  ASSERT_EQ(show.code, 0) << show.err;
  EXPECT_NE(show.out.find("| in arg1 bytes 4096B 0000000000005eed read-only"), std::string::npos)
      << show.out.substr(0, 2000);
  EXPECT_NE(show.out.find("| in arg2 bytes 4096B unwritten"), std::string::npos);
  Result exported = lockstep("export " + a + " --perfetto " + path("a.json").string());
  ASSERT_EQ(exported.code, 0) << exported.err;
  const std::string text = slurp(path("a.json"));
  EXPECT_NE(text.find("read-only (4096 B)"), std::string::npos) << text.substr(0, 2000);
  EXPECT_NE(text.find("unwritten (4096 B)"), std::string::npos);
  EXPECT_EQ(lockstep("diff " + pair(a, b)).code, 0);
}

TEST_F(Cli, ExportPerfettoMarksDivergentOps) {
  synth::Spec planted = small();
  planted.plants.push_back({synth::Plant::Output, 1, 2, 1});
  std::string a = write("a", small()), b = write("b", planted);
  Result r =
      lockstep("export " + a + " --perfetto " + path("out.json").string() + " --against " + b);
  ASSERT_EQ(r.code, 0) << r.err;
  json trace = json::parse(slurp(path("out.json")));
  int processes = 0, origins = 0, receivers = 0, ops = 0;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") ++processes;
    if (e["ph"] == "X") ++ops;
    if (!e.contains("cname")) continue;
    std::string name = e["name"];
    // Slices are named by the short kernel name (tools/why/names.h), the full one an argument.
    if (name == "[origin] layer1_forward" && e["pid"] == 1 &&
        e["args"]["full_name"] == "void layer1_forward<__nv_bfloat16, 128>(Params)")
      ++origins;
    if (name.rfind("[receiver] ncclAllReduce", 0) == 0 && e["pid"] == 0) ++receivers;
  }
  EXPECT_EQ(processes, 2);
  EXPECT_EQ(origins, 1);    // rank 1's kernel
  EXPECT_EQ(receivers, 1);  // rank 0's all-reduce
  EXPECT_EQ(ops, 2 * 6 * 11);
}

// ---- run / check / hunt with the fake job -------------------------------------------------

std::string job_env(const std::string& extra = "") {
  return std::string("LOCKSTEP_LIB=") + DUMMY_SHIM + " FAKE_JOB_EXPECT_PRELOAD=" + DUMMY_SHIM +
         " " + extra;
}

// `lockstep run DIR -- job` (the folder where an option goes): one line naming the word and
// what to write instead, for every command that runs a job; CLI11 alone named the job's words.
TEST_F(Cli, AWordBeforeTheDoubleDashIsNamedWithWhereItGoes) {
  for (const std::string command : {"run", "check", "hunt", "replay"}) {
    Result r = lockstep(command + " runs/a -- python3 train.py --steps 6");
    EXPECT_EQ(r.code, 2) << command;
    EXPECT_EQ(line_count(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("lockstep: " + command + ": 'runs/a' comes before '--', where only "
                         "options go; the command goes after it (for a folder to write into: "
                         "-o runs/a)"),
              std::string::npos)
        << r.err;
  }
  // An option's value is not such a word; an option the command does not have is named (CLI11
  // took it for the job's and said "true" was not expected).
  Result value = lockstep("run -o" + path("v").string() + " --level=broad --level broad x -- true");
  EXPECT_NE(value.err.find("run: 'x' comes before '--'"), std::string::npos) << value.err;
  Result unknown = lockstep("hunt --level broad x -- true");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("lockstep: hunt: '--level' is not an option of hunt (see --help)"),
            std::string::npos)
      << unknown.err;
}

TEST_F(Cli, RunSetsTheEnvironmentAndForwardsTheExitCode) {
  std::string dir = path("run").string();
  Result r = lockstep("run -o " + dir + " --level full -- " FAKE_JOB, job_env());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(fs::path(dir) / "rank-00000.lstrace"));
  EXPECT_TRUE(fs::exists(fs::path(dir) / "rank-00001.lstrace"));
  EXPECT_NE(r.err.find("trace in " + dir + ": 2/2 ranks, 132 records, steps 0-5, 0 dropped"),
            std::string::npos)
      << r.err;
  Result again = lockstep("run -o " + dir + " -- " FAKE_JOB, job_env());
  EXPECT_EQ(again.code, 2) << "a second run into the same directory is refused";
  EXPECT_EQ(lockstep("run -o " + dir + " --overwrite -- " FAKE_JOB, job_env()).code, 0);

  EXPECT_EQ(
      lockstep("run -o " + path("r7").string() + " -- " FAKE_JOB, job_env("FAKE_JOB_EXIT=7")).code,
      7);
  EXPECT_EQ(
      lockstep("run -o " + path("r15").string() + " -- " FAKE_JOB, job_env("FAKE_JOB_SIGNAL=15"))
          .code,
      128 + 15);
  Result missing = lockstep("run -o " + path("rx").string() + " -- /no/such/program", job_env());
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("/no/such/program"), std::string::npos);
  EXPECT_EQ(
      lockstep("run -o " + path("ry").string() + " --level loud -- " FAKE_JOB, job_env()).code, 2);
  Result noshim = lockstep("run -o " + path("rz").string() + " -- " FAKE_JOB,
                           "LOCKSTEP_LIB=/nonexistent/liblockstep.so");
  EXPECT_EQ(noshim.code, 2);
  EXPECT_NE(noshim.err.find("LOCKSTEP_LIB"), std::string::npos);
}

TEST_F(Cli, CheckIsTheCiGate) {
  Result same = lockstep("check -o " + path("same").string() + " -- " FAKE_JOB, job_env());
  EXPECT_EQ(same.code, 0) << same.out << same.err;
  EXPECT_NE(same.out.find("DETERMINISTIC"), std::string::npos);
  // Without --json the job's output reaches the terminal as before, and each run keeps it too.
  EXPECT_NE(same.out.find("{\"fake_job\": \"training\""), std::string::npos) << same.out;
  EXPECT_NE(same.err.find("fake_job: a warning on stderr"), std::string::npos) << same.err;
  EXPECT_NE(slurp(path("same") / "run-2" / "job.log").find("fake_job: a warning"),
            std::string::npos);
  std::string toggle = path("toggle").string();
  Result differ = lockstep("check --runs 3 -o " + path("differ").string() + " -- " FAKE_JOB,
                           job_env("FAKE_JOB_TOGGLE=" + toggle + " FAKE_JOB_PLANT=output:1:2:1"));
  EXPECT_EQ(differ.code, 1) << differ.out << differ.err;
  EXPECT_NE(differ.out.find("DIVERGENT"), std::string::npos);
  Result failing =
      lockstep("check -o " + path("fail").string() + " -- " FAKE_JOB, job_env("FAKE_JOB_EXIT=3"));
  EXPECT_EQ(failing.code, 2);
}

// check takes run's trace flags from the one table (common/settings.def): the same names and
// help, the same checks before the job starts; its -o names the directory of all its runs.
TEST_F(Cli, CheckTakesRunsTraceFlagsFromTheSettingsTable) {
  Result help = lockstep("check --help");
  EXPECT_EQ(help.code, 0) << help.err;
  for (const char* flag : {"--level", "--steps", "--kernels", "--stacks", "--state"})
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
  EXPECT_NE(help.out.find("Directory for the runs"), std::string::npos) << help.out;
  Result bad = lockstep("check --level loud -o " + path("bad").string() + " -- " FAKE_JOB,
                        job_env());
  EXPECT_EQ(bad.code, 2) << bad.out << bad.err;
  EXPECT_EQ(line_count(bad.err), 1) << bad.err;
  EXPECT_NE(bad.err.find("loud"), std::string::npos) << bad.err;
}

TEST_F(Cli, HuntNarrowsFromBroadToTheOriginOp) {
  std::string toggle = path("toggle").string();
  // Kernel outputs are fingerprinted only at --level full: stage 1 sees the step, stage 2 the op.
  Result r = lockstep("hunt -o " + path("hunt").string() + " -- " FAKE_JOB,
                      job_env("FAKE_JOB_TOGGLE=" + toggle + " FAKE_JOB_PLANT=output:1:3:1"));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("stage 1 (broad"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("earliest diverging step 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stage 2 (full, steps 3-3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("origin rank 1, step 3: kernel layer1_forward #1"), std::string::npos)
      << r.out;
  EXPECT_TRUE(fs::exists(path("hunt") / "full-2" / "rank-00001.lstrace"));
}

// ---- issue #35: the earliest bit, not the first visible loss; output tools can read --------
// The fake job's weights (synth::Spec::weights): rank 1's first kernel writes other weights at
// step 1 in every other run, and bf16 keeps them out of the GEMMs, collectives and loss until
// step 4.
std::string hidden_weights_env(const std::string& toggle, const std::string& extra = "") {
  return job_env("FAKE_JOB_TOGGLE=" + toggle +
                 " FAKE_JOB_PLANT=weights:1:1:0 FAKE_JOB_WEIGHTS_FEED_FROM=4 " + extra);
}

TEST_F(Cli, HuntMovesItsWindowEarlierUntilItHoldsTheWriterOfTheWeights) {
  Result r = lockstep("hunt -o " + path("hunt").string() + " -- " FAKE_JOB,
                      hidden_weights_env(path("toggle").string()));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("earliest diverging step 4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("window 4-4: first divergence is a receiver of a difference made before "
                       "step 4"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("; trying 2-4\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("window 2-4: first divergence is a receiver of a difference made before "
                       "step 2"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("; trying 1-4\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("origin rank 1, step 1: kernel layer0_forward #1 stream 1 (fingerprinted "
                       "steps 1-4; windows tried: 4-4, 2-4, 1-4)"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(fs::exists(path("hunt") / "full-window3-2" / "rank-00001.lstrace"));
  // Stage 3: one run recording the culprit's call stack, and the answer with the job's line.
  EXPECT_NE(r.out.find("stage 3 (broad, 1 run recording the culprit's call stack): "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("launched from (hunt's stack run): /job/model.py:"), std::string::npos)
      << r.out;
  EXPECT_TRUE(fs::exists(path("hunt") / "stacks" / "rank-00001.lstrace"));
}

TEST_F(Cli, HuntMovesItsWindowEarlierWhenTheJobNumbersItsSteps) {
  // The same job numbering its steps from 0 after a set-up step (as a PyTorch job calling
  // lockstep.step(n) does): the diffs pair the window's steps by number and list only those, yet
  // the steps before them are in the runs, so the window still moves.
  Result r = lockstep("hunt --no-stack -o " + path("hunt").string() + " -- " FAKE_JOB,
                      hidden_weights_env(path("toggle").string(), "FAKE_JOB_NUMBERED=1"));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  // Trace step 5 is the job's step 4: the window of trace steps is compared as the job's 4-4,
  // then 1-4 (it once compared the job's 5-5, the step after the one fingerprinted).
  EXPECT_NE(r.out.find("window 5-5: first divergence is a receiver of a difference made before "
                       "trace step 5 (rank 1, step 4 (trace step 5): kernel layer0_forward"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("origin rank 1, step 1 (trace step 2): kernel layer0_forward #1 stream 1 "
                       "(fingerprinted steps 2-5; windows tried: 5-5, 2-5)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("no op with matching inputs"), std::string::npos) << r.out;
}

TEST_F(Cli, HuntWithoutStackSkipsTheThirdStage) {
  Result r = lockstep("hunt --no-stack -o " + path("hunt").string() + " -- " FAKE_JOB,
                      hidden_weights_env(path("toggle").string()));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_EQ(r.out.find("stage 3"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(path("hunt") / "stacks"));
}

TEST_F(Cli, DiffNamesTheJobsLineThatLaunchedTheCulpritWhenARunRecordedStacks) {
  synth::Spec a = small(2), b = small(2);
  a.stacks = b.stacks = true;
  b.plants = {{synth::Plant::Output, 1, 2, 1}};
  const std::string da = write("a", a), db = write("b", b);
  Result r = lockstep("diff " + pair(da, db));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  // The job's frames, innermost first; the installed package's frame between them left out.
  const size_t at = r.out.find("launched from (run A): /job/model.py:");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("in Block.forward\n                                /job/train.py:88 in main\n",
                       at),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("module.py"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("native: at::native::launch_kernel+0x1c (libtorch_cuda.so)"),
            std::string::npos)
      << r.out;
  Result j = lockstep("diff --json " + pair(da, db));
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["culprit_stack"]["run"], "a");
  EXPECT_EQ(doc["culprit_stack"]["python"].size(), 3u);  // all of them in JSON
  // Without stacks in either run: none.
  Result plain = lockstep("diff --json " + pair(write("c", small(2)), write("d", [] {
                            synth::Spec s = small(2);
                            s.plants = {{synth::Plant::Output, 1, 2, 1}};
                            return s;
                          }())));
  EXPECT_TRUE(nlohmann::json::parse(plain.out)["culprit_stack"].is_null());
}

TEST_F(Cli, ShowPrintsAStacksFramesUnderIt) {
  synth::Spec a = small(1);
  a.stacks = true;
  Result r = lockstep("show " + write("a", a) + " --step 1 --grep 'model.py' --limit 1");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(" stack /job/model.py:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n    py /job/train.py:88 in main\n    native at::native::launch_kernel"),
            std::string::npos)
      << r.out;
}

TEST_F(Cli, HuntWithStateRecordsGoesStraightToTheStepWhoseStateDiffersFirst) {
  Result r = lockstep("hunt -o " + path("hunt").string() + " -- " FAKE_JOB,
                      hidden_weights_env(path("toggle").string(), "FAKE_JOB_STATE=1"));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("earliest diverging step 1 (state 'blocks.0.wte.weight' on rank 1); "
                       "steps 0-0 identical"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("(fingerprinted steps 1-1; windows tried: 1-1)"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("trying"), std::string::npos) << r.out;
}

TEST_F(Cli, HuntStopsAfterItsWindowsAndSaysTheDifferenceWasMadeEarlier) {
  Result r = lockstep("hunt --windows 2 -o " + path("hunt").string() + " -- " FAKE_JOB,
                      hidden_weights_env(path("toggle").string()));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("the difference was made before step 2, and 2 windows did not reach its "
                       "writer"),
            std::string::npos)
      << r.out;
}

TEST_F(Cli, HuntJsonPrintsOneDocumentWithItsWindowsAndKeepsTheJobsOutputInLogs) {
  Result r = lockstep("hunt --json -o " + path("hunt").string() + " -- " FAKE_JOB,
                      hidden_weights_env(path("toggle").string()));
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  json j = r.parsed();  // throws unless stdout is one JSON document
  EXPECT_EQ(j["schema"], "lockstep-diff");
  EXPECT_EQ(j["version"], 5);
  EXPECT_EQ(j["culprit"]["step"], 1);
  EXPECT_EQ(j["culprit"]["classification"], "origin");
  EXPECT_EQ(j["compared"]["window_first_step"], 1);
  const json& hunt = j["hunt"];
  EXPECT_EQ(hunt["broad"]["earliest_step"], 4);
  EXPECT_EQ(hunt["broad"]["identical_through"], 3);
  EXPECT_EQ(hunt["outcome"], "origin");
  EXPECT_EQ(hunt["fingerprinted_steps"], (json{{"first", 1}, {"last", 4}}));
  ASSERT_EQ(hunt["windows"].size(), 3u);
  EXPECT_EQ(hunt["windows"][0]["outcome"], "made-before");
  EXPECT_EQ(hunt["windows"][1]["first"], 2);
  EXPECT_EQ(hunt["windows"][2]["outcome"], "origin");
  // Progress on stderr; the job's own lines only in each run's job.log (stderr is no terminal).
  EXPECT_NE(r.err.find("window 4-4: first divergence is a receiver"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("fake_job"), std::string::npos) << r.err;
  for (const char* run : {"broad-1", "broad-2", "full-1", "full-window3-2"}) {
    std::string log = slurp(path("hunt") / run / "job.log");
    EXPECT_NE(log.find("{\"fake_job\": \"training\""), std::string::npos) << run;
    EXPECT_NE(log.find("fake_job: a warning on stderr"), std::string::npos) << run;
  }
}

TEST_F(Cli, HuntJsonOfIdenticalRunsIsStillOneDocument) {
  Result r = lockstep("hunt --json -o " + path("hunt").string() + " -- " FAKE_JOB, job_env());
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  json j = r.parsed();
  EXPECT_EQ(j["verdict"], "identical");
  EXPECT_EQ(j["hunt"]["outcome"], "identical");
  EXPECT_TRUE(j["hunt"]["windows"].empty());
}

TEST_F(Cli, CheckJsonPrintsOneDocumentAndKeepsTheJobsOutputInItsLog) {
  std::string toggle = path("toggle").string();
  Result r = lockstep("check --json --runs 3 -o " + path("gate").string() + " -- " FAKE_JOB,
                      job_env("FAKE_JOB_TOGGLE=" + toggle + " FAKE_JOB_PLANT=output:1:2:1"));
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  json j = r.parsed();  // throws unless stdout is one JSON document
  EXPECT_EQ(j["verdict"], "divergent");
  EXPECT_EQ(j["culprit_rank"], 1);
  EXPECT_EQ(j["check"]["verdict"], "divergent");
  EXPECT_EQ(j["check"]["runs"].size(), 3u);
  ASSERT_EQ(j["check"]["pairs"].size(), 2u);
  EXPECT_EQ(j["check"]["pairs"][0]["verdict"], "divergent");  // run 2 planted, run 3 not
  EXPECT_EQ(j["check"]["pairs"][1]["verdict"], "identical");
  EXPECT_NE(r.err.find("lockstep check: DIVERGENT"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("fake_job"), std::string::npos) << r.err;
  EXPECT_NE(slurp(path("gate") / "run-1" / "job.log").find("{\"fake_job\""), std::string::npos);

  Result same = lockstep("check --json -o " + path("same").string() + " -- " FAKE_JOB, job_env());
  ASSERT_EQ(same.code, 0) << same.out << same.err;
  EXPECT_EQ(same.parsed()["check"]["verdict"], "deterministic");
}

TEST_F(Cli, AFailingJobUnderCheckNamesItsLog) {
  Result r = lockstep("check --json -o " + path("fail").string() + " -- " FAKE_JOB,
                      job_env("FAKE_JOB_EXIT=3"));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("exited with code 3 in run 1 (its output: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("run-1/job.log"), std::string::npos) << r.err;
  EXPECT_EQ(line_count(r.err), 2) << r.err;  // the progress line and the error
}

}  // namespace
