// Inputs written to break the CLI, each found by fuzzing it (a driver that mutated and resealed
// trace files, session 36): every one now gets one line and exit 2, or its verdict, never a
// crash or a hang. Traces are written with the real writer (trace/writer.h), a record at a time.
#include <sys/stat.h>

#include <string>

#include "cli_harness.h"
#include "tools/why/names.h"
#include "trace/writer.h"

namespace {

namespace trace = lockstep::trace;

// One rank's trace at `file` holding `kernels` Kernel records of step 0 named `name`, under
// `header` (rank 0 of 1 added).
void write_trace(const fs::path& file, nlohmann::json header, const std::string& name,
                 int kernels = 3, uint64_t last_grid = 3) {
  fs::create_directories(file.parent_path());
  header["rank"] = 0;
  header["world_size"] = 1;
  trace::WriterOptions options;
  options.path = file.string();
  std::string error;
  auto writer = trace::TraceWriter::open(options, header, &error);
  ASSERT_TRUE(writer) << error;
  for (int i = 0; i < kernels; ++i) {
    trace::Record r;
    r.kind = trace::RecordKind::Kernel;
    r.seq = static_cast<uint64_t>(i + 1);
    r.stream = 1;
    r.name = writer->intern(name);
    r.fields[trace::fields::Kernel::grid_x] =
        i + 1 == kernels ? last_grid : static_cast<uint64_t>(i + 1);
    ASSERT_TRUE(writer->append(r));
  }
  writer->end_step(0);
  writer->close();
}

// A header value nested 100 deep (the fuzzer's was 100,000: nlohmann's dump recursed through it
// in every reading command) is refused when the header is read, in one line.
TEST_F(Cli, AHeaderNestedDeeperThan64LevelsIsOneLineAndExitTwo) {
  nlohmann::json deep = nlohmann::json::array();
  for (int i = 0; i < 100; ++i) deep = nlohmann::json::array({deep});
  write_trace(path("deep") / "rank-00000.lstrace", {{"command_line", deep}}, "kernel");
  for (const std::string command : {"show", "verify", "stats"}) {
    Result r = lockstep(command + " " + path("deep").string());
    EXPECT_EQ(r.code, 2) << command << ": " << r.out << r.err;
    EXPECT_EQ(line_count(r.err), 1) << command << ": " << r.err;
    EXPECT_NE(r.err.find("rank-00000.lstrace: bad JSON header at offset 24: nested deeper than 64 "
                         "levels"),
              std::string::npos)
        << command << ": " << r.err;
  }
}

// A kernel's name is the job's bytes: one that is not UTF-8 is printed as JSON with U+FFFD in
// its place (it made `export` and `diff --json` fail with nlohmann's type_error 316).
TEST_F(Cli, ANameThatIsNotUtf8IsStillPrintedAsJson) {
  write_trace(path("a") / "rank-00000.lstrace", nlohmann::json::object(), "bad\xff name");
  Result r = lockstep("export " + path("a").string() + " -o " + path("a.json").string());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const nlohmann::json events = nlohmann::json::parse(slurp(path("a.json")));
  EXPECT_NE(events.dump().find("bad\xef\xbf\xbd name"), std::string::npos);
}

// A name of 40 KB: std::regex's recursion ran as deep as a repetition's match (`k+$` crashed
// show --grep); a name is matched on its first 8 KiB (tools/regex_text.h).
TEST_F(Cli, ALongNameIsSearchedWithoutCrashing) {
  write_trace(path("long") / "rank-00000.lstrace", nlohmann::json::object(),
              std::string(40000, 'k'));
  Result r = lockstep("show " + path("long").string() + " --grep 'k+$'");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(line_count(r.out), 3) << r.out.substr(0, 200);
  Result pattern = lockstep("show " + path("long").string() + " --grep '" +
                            std::string(2000, 'k') + "'");
  EXPECT_EQ(pattern.code, 2);
  EXPECT_EQ(line_count(pattern.err), 1) << pattern.err;
  EXPECT_NE(pattern.err.find("--grep: a pattern of 2000 characters; at most 1024"),
            std::string::npos)
      << pattern.err;
}

// Two runs whose kernels all carry a name of a MiB (as long as the writer keeps one) and differ
// in the last one's grid: the report names it in full where the full name is asked for (JSON's
// "name"), and by its bounded short name everywhere else (the text, each context line). Each
// context line had the full name: 63 MB of JSON and 330 MB of memory for two 1 MB traces.
TEST_F(Cli, ANameOfAMebibyteIsPrintedInFullOnlyWhereTheFullNameIsAskedFor) {
  const std::string name(1u << 20, 'k');
  write_trace(path("a") / "rank-00000.lstrace", nlohmann::json::object(), name, 3, 3);
  write_trace(path("b") / "rank-00000.lstrace", nlohmann::json::object(), name, 3, 4);
  Result text = lockstep("diff " + path("a").string() + " " + path("b").string());
  EXPECT_EQ(text.code, 1) << text.err;
  EXPECT_LT(text.out.size(), 16384u);
  EXPECT_NE(text.out.find("grid_x 3 vs 4"), std::string::npos) << text.out.substr(0, 2000);
  Result r = lockstep("diff --json " + path("a").string() + " " + path("b").string());
  ASSERT_EQ(r.code, 1) << r.err;
  const nlohmann::json j = r.parsed();
  EXPECT_EQ(j["first_divergence"]["name"], name);
  EXPECT_EQ(j["first_divergence"]["name_short"].get<std::string>().size(),
            lockstep::tools::kShortNameBytes + 3);
  const nlohmann::json& context = j["structural"][0]["context"];
  ASSERT_FALSE(context["a"].empty());
  for (const auto& side : {context["a"], context["b"]})
    for (const auto& line : side) EXPECT_LT(line["op"].get<std::string>().size(), 512u);
  // Four sections name the op in full (first divergence, culprit, its rank, the structural
  // list): about 4 MiB, not once per line that mentions it.
  EXPECT_LT(r.out.size(), 5u << 20);
}

// A manifest that is a FIFO blocked gather's read for ever (and one linked to /dev/zero read
// until memory ran out); `replay --from` a FIFO blocked too.
TEST_F(Cli, FifosInPlaceOfAManifestOrAReportAreRefusedWithoutBlocking) {
  std::string dir = write("run", small(1));
  const fs::path manifest = fs::path(dir) / trace::kManifestName;
  fs::remove(manifest);
  ASSERT_EQ(mkfifo(manifest.c_str(), 0600), 0);
  Result gather = lockstep("gather " + path("out").string() + " " + dir, "timeout 20");
  EXPECT_EQ(gather.code, 2) << gather.out << gather.err;
  EXPECT_EQ(line_count(gather.err), 1) << gather.err;
  EXPECT_NE(gather.err.find("manifest.json: not a readable manifest"), std::string::npos)
      << gather.err;

  const fs::path fifo = path("report.json");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  Result replay = lockstep("replay --from " + fifo.string() + " -o " + path("rp").string() +
                               " -- /bin/true",
                           "timeout 20");
  EXPECT_EQ(replay.code, 2) << replay.out << replay.err;
  EXPECT_EQ(line_count(replay.err), 1) << replay.err;
  EXPECT_NE(replay.err.find("report.json: not a regular file"), std::string::npos) << replay.err;
}

// A file named with a newline in it: the error that names it is still one line (the control
// character printed as \x0a).
TEST_F(Cli, AFileNamedWithANewlineIsNamedOnOneLine) {
  fs::create_directories(path("odd"));
  std::ofstream(path("odd") / "a b\nc.lstrace") << "not a trace";
  for (const std::string command : {"show", "verify"}) {
    Result r = lockstep(command + " " + path("odd").string());
    EXPECT_EQ(r.code, 2) << command << ": " << r.err;
    EXPECT_EQ(line_count(r.err), 1) << command << ": " << r.err;
    EXPECT_NE(r.err.find("a b\\x0ac.lstrace"), std::string::npos) << command << ": " << r.err;
  }
}

}  // namespace

// A count read into 64 bits is digits within 64 bits: CLI11's conversion took `--limit -1` and
// `--limit 18446744073709551616` without a word (both: no limit).
TEST_F(Cli, ACountOutside64BitsIsRefusedNotWrapped) {
  write_trace(path("a") / "rank-00000.lstrace", nlohmann::json::object(), "kernel");
  for (const std::string value : {"-1", "18446744073709551616", "1e3", "0x10"}) {
    Result r = lockstep("show --limit " + value + " " + path("a").string());
    EXPECT_EQ(r.code, 2) << value << ": " << r.out << r.err;
    EXPECT_EQ(line_count(r.err), 1) << value << ": " << r.err;
    EXPECT_NE(r.err.find("--limit: '" + value + "' is not a whole number"), std::string::npos)
        << r.err;
    r = lockstep("check --resume-at " + value + " -- true");
    EXPECT_EQ(r.code, 2) << value << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("--resume-at: '" + value + "' is not a whole number"), std::string::npos)
        << r.err;
  }
  Result r = lockstep("show --limit 2 " + path("a").string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(line_count(r.out), 2) << r.out;
}
