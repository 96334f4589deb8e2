#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "collectors/config.h"
#include "common/env.h"
#include "common/settings.h"

namespace lockstep::collectors {
namespace {

ConfigResult parse(const std::map<std::string, std::string>& vars) {
  return parse_config([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(Config, DefaultsWhenNothingIsSet) {
  ConfigResult r = parse({});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.config.level, Level::Broad);
  EXPECT_EQ(r.config.metric_bytes, 64u);
  EXPECT_EQ(r.config.step_source, StepSource::Auto);
  EXPECT_EQ(r.config.step_pattern, kDefaultStepPattern);
  EXPECT_TRUE(r.config.in_window(0));
  EXPECT_TRUE(r.config.in_window(UINT32_MAX));
}

TEST(Config, BadLevelGivesTheOneLineMessage) {
  ConfigResult r = parse({{env::kLevel, "fast"}});
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0],
            "lockstep: LOCKSTEP_LEVEL=fast is not one of off|metrics|broad|full; running untraced");
}

TEST(Config, EveryLevelParses) {
  EXPECT_EQ(parse({{env::kLevel, "off"}}).config.level, Level::Off);
  EXPECT_EQ(parse({{env::kLevel, "metrics"}}).config.level, Level::Metrics);
  EXPECT_EQ(parse({{env::kLevel, "BROAD"}}).config.level, Level::Broad);
  EXPECT_EQ(parse({{env::kLevel, "full"}}).config.level, Level::Full);
}

TEST(Config, StepWindows) {
  ConfigResult r = parse({{env::kSteps, "3-7"}});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.config.in_window(2));
  EXPECT_TRUE(r.config.in_window(3));
  EXPECT_TRUE(r.config.in_window(7));
  EXPECT_FALSE(r.config.in_window(8));
  r = parse({{env::kSteps, "5-"}});
  EXPECT_TRUE(r.ok() && r.config.first_step == 5 && r.config.last_step == UINT32_MAX);
  r = parse({{env::kSteps, "4"}});
  EXPECT_TRUE(r.ok() && r.config.first_step == 4 && r.config.last_step == 4);
  for (const char* bad : {"7-3", "a-b", "-3", "1-2-3", "", "3 - 4", "99999999999"})
    EXPECT_FALSE(parse({{env::kSteps, bad}}).ok()) << bad;
}

TEST(Config, ByteSizes) {
  using settings::parse_byte_size;
  EXPECT_EQ(parse_byte_size("123"), 123u);
  EXPECT_EQ(parse_byte_size("4K"), 4096u);
  EXPECT_EQ(parse_byte_size("16m"), 16u << 20);
  EXPECT_EQ(parse_byte_size("2GiB"), 2ull << 30);
  EXPECT_EQ(parse_byte_size("3MB"), 3u << 20);
  for (const char* bad : {"", "K", "1.5M", "-1", "12Q", "99999999999999999999G"})
    EXPECT_FALSE(parse_byte_size(bad).has_value()) << bad;
  EXPECT_EQ(parse({{env::kMaxRegion, "1G"}}).config.max_region, 1ull << 30);
  EXPECT_FALSE(parse({{env::kMaxRegion, "0"}}).ok());
  EXPECT_EQ(parse({{env::kMetricBytes, "0"}}).config.metric_bytes, 0u);
  EXPECT_FALSE(parse({{env::kMetricBytes, "2M"}}).ok());
  EXPECT_EQ(parse({}).config.host_hash_bytes, 64ull << 20);
  EXPECT_EQ(parse({{env::kHostHashBytes, "1K"}}).config.host_hash_bytes, 1024u);
  EXPECT_EQ(parse({{env::kHostHashBytes, "0"}}).config.host_hash_bytes, 0u) << "0: off";
  EXPECT_FALSE(parse({{env::kHostHashBytes, "lots"}}).ok());
}

// `lockstep check --resume-at` sets these for the job: the shim takes any value, and uses none.
TEST(Config, TheResumeContractsVariablesAreKnownButNotTheShims) {
  const ConfigResult r = parse({{env::kResumeAt, "4"}, {env::kCheckpoint, "/tmp/x/checkpoint"}});
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.config, parse({}).config);
}

TEST(Config, RegexesAreValidated) {
  EXPECT_TRUE(parse({{env::kKernels, "gemm|reduce"}}).ok());
  ConfigResult r = parse({{env::kKernels, "gemm("}});
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("LOCKSTEP_KERNELS=gemm( is not a valid regular expression"),
            std::string::npos);
  EXPECT_FALSE(parse({{env::kStepOn, "[x"}}).ok());
}

TEST(Config, StepSources) {
  EXPECT_EQ(parse({{env::kStepOn, "metric"}}).config.step_source, StepSource::Metric);
  EXPECT_EQ(parse({{env::kStepOn, "api"}}).config.step_source, StepSource::Api);
  // The PyTorch hooks call lockstep_step() after each optimizer step: to the shim, the API.
  EXPECT_EQ(parse({{env::kStepOn, "optimizer"}}).config.step_source, StepSource::Api);
  ConfigResult r = parse({{env::kStepOn, "iteration"}});
  EXPECT_EQ(r.config.step_source, StepSource::Markers);
  EXPECT_EQ(r.config.step_pattern, "iteration");
  r = parse({{env::kStepOn, "auto:^iter"}});
  EXPECT_EQ(r.config.step_source, StepSource::Auto);
  EXPECT_EQ(r.config.step_pattern, "^iter");
}

TEST(Config, BooleansAndRunId) {
  ConfigResult r = parse({{env::kDebug, "1"},
                          {env::kFailHard, "yes"},
                          {env::kOverwrite, "0"},
                          {env::kRunId, "run-1.a_b"}});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.config.debug);
  EXPECT_TRUE(r.config.fail_hard);
  EXPECT_FALSE(r.config.overwrite);
  EXPECT_EQ(r.config.run_id, "run-1.a_b");
  EXPECT_FALSE(r.config.debug_phases);
  r = parse({{env::kDebug, "2"}});  // 2: phase times as well
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.config.debug);
  EXPECT_TRUE(r.config.debug_phases);
  EXPECT_FALSE(parse({{env::kDebug, "3"}}).ok());
  EXPECT_FALSE(parse({{env::kRunId, "a/b"}}).ok());
  EXPECT_FALSE(parse({{env::kDir, ""}}).ok());
}

TEST(Config, AllProblemsAreReported) {
  ConfigResult r = parse({{env::kLevel, "x"}, {env::kSteps, "x"}, {env::kDebug, "x"}});
  EXPECT_EQ(r.errors.size(), 3u);
}

TEST(Config, MergeHashesIsOnByDefaultAndCanBeTurnedOff) {
  EXPECT_TRUE(parse({}).config.merge_hashes);
  auto r = parse({{env::kMergeHashes, "0"}});
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(r.config.merge_hashes);
  EXPECT_FALSE(r.config.chain_hashes);
  r = parse({{env::kMergeHashes, "sometimes"}});
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.errors[0].find("is not 1, adjacent or 0"), std::string::npos) << r.errors[0];
}

// Chained sets by default; "adjacent" keeps merging to the next call's launch only.
TEST(Config, MergeHashesChainsByDefaultAdjacentOnlyOnRequest) {
  EXPECT_TRUE(parse({}).config.chain_hashes);
  auto r = parse({{env::kMergeHashes, "Adjacent"}});
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.config.merge_hashes);
  EXPECT_FALSE(r.config.chain_hashes);
}

TEST(Config, SkipUnwrittenIsOffByDefault) {
  EXPECT_FALSE(parse({}).config.skip_unwritten);
  auto r = parse({{env::kSkipUnwritten, "1"}});
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.config.skip_unwritten);
}

// Switches on by default: "0" turns each off, a word that is not a boolean is an error.
TEST(Config, SwitchesOnByDefault) {
  const std::pair<const char*, bool Config::*> switches[] = {
      {env::kReuseDigests, &Config::reuse_digests},
      {env::kLearnReadOnly, &Config::learn_read_only},
      {env::kRecallFills, &Config::recall_fills},
      {env::kHoldAcrossSync, &Config::hold_across_sync},
  };
  for (const auto& [name, member] : switches) {
    EXPECT_TRUE(parse({}).config.*member) << name;
    auto r = parse({{name, "0"}});
    EXPECT_TRUE(r.ok()) << name;
    EXPECT_FALSE(r.config.*member) << name;
    EXPECT_FALSE(parse({{name, "often"}}).ok()) << name;
  }
}

TEST(Config, TableCoversEveryVariableOnce) {
  const char* names[] = {env::kDir,          env::kLevel,         env::kSteps,
                         env::kKernels,      env::kMaxRegion,     env::kMetricBytes,
                         env::kStepOn,       env::kDebug,         env::kRunId,
                         env::kOverwrite,    env::kFailHard,      env::kMemory,
                         env::kHashMemory,   env::kValidate,      env::kMergeHashes,
                         env::kReuseDigests, env::kSkipUnwritten, env::kCarryFreed,
                         env::kSideHashes,   env::kHoldAcrossSync,
                         env::kLearnReadOnly,
                         env::kRecallFills,  env::kState,         env::kFromCli,
                         env::kLib,          env::kCommit,        env::kHostHashBytes,
                         env::kResumeAt,
                         env::kCheckpoint,   env::kStacks,        env::kScopes,
                         env::kRecordEnv,    env::kReplay,        env::kReplays,
                         env::kNcclProfiler};
  for (const char* name : names) {
    int seen = 0;
    for (const settings::Setting& row : settings::all()) seen += std::string(row.name) == name;
    EXPECT_EQ(seen, 1) << name;
  }
  EXPECT_EQ(settings::all().size(), std::size(names));
}

// collectors/README.md carries every setting; README.md the ones with a `lockstep run` flag.
TEST(Config, ReadmesCarryTheGeneratedTables) {
  const std::pair<const char*, settings::TableRows> readmes[] = {
      {LOCKSTEP_COLLECTORS_README, settings::TableRows::All},
      {LOCKSTEP_MAIN_README, settings::TableRows::WithFlag}};
  for (const auto& [path, rows] : readmes) {
    std::ifstream readme(path);
    ASSERT_TRUE(readme) << path;
    std::stringstream text;
    text << readme.rdbuf();
    const std::string table = settings::markdown_table(rows);
    EXPECT_NE(text.str().find(table), std::string::npos) << path << " must contain exactly:\n"
                                                          << table;
  }
}

TEST(Config, TheShortTableHoldsOnlySettingsWithAFlag) {
  const std::string table = settings::markdown_table(settings::TableRows::WithFlag);
  EXPECT_NE(table.find("`LOCKSTEP_LEVEL` | `--level`"), std::string::npos) << table;
  EXPECT_EQ(table.find("LOCKSTEP_MEMORY"), std::string::npos) << table;
  EXPECT_LT(table.size(), settings::markdown_table().size());
}

// The table's defaults are what README promises: each one that is a value gives the Config
// that nothing set gives (the others describe, as "all steps").
TEST(Config, TheTablesDefaultsAreTheConfigsDefaults) {
  const Config unset = parse({}).config;
  for (const settings::Setting& row : settings::all()) {
    const settings::Kind kind = row.kind.kind;
    if (kind == settings::Kind::Regex || kind == settings::Kind::Steps || kind == settings::Kind::Op ||
        kind == settings::Kind::RunId || row.id == settings::Id::Lib)
      continue;
    ConfigResult r = parse({{row.name, row.default_text}});
    ASSERT_TRUE(r.ok()) << row.name;
    EXPECT_TRUE(r.config == unset) << row.name << "=" << row.default_text;
  }
  EXPECT_EQ(level_name(unset.level), settings::kLevelNames[settings::kDefaultLevel]);
}

TEST(Config, LevelNamesAreTheCommonOnes) {
  for (size_t i = 0; i < std::size(settings::kLevelNames); ++i)
    EXPECT_EQ(level_name(static_cast<Level>(i)), settings::kLevelNames[i]);
}

TEST(Config, WithFailHardTheMessageSaysTheJobStopsAndNotThatItRunsUntraced) {
  ConfigResult r = parse({{env::kLevel, "fast"}, {env::kFailHard, "1"}});
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0],
            "lockstep: LOCKSTEP_LEVEL=fast is not one of off|metrics|broad|full; stopping the job "
            "(LOCKSTEP_FAIL_HARD=1, exit code 78)");
  // A bad FAIL_HARD itself is no request to stop.
  r = parse({{env::kFailHard, "maybe"}});
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_TRUE(r.errors[0].ends_with("; running untraced")) << r.errors[0];
}

// The trace that cannot be opened at the first CUDA call says the same as a bad setting.
TEST(Config, AFailureLineSaysWhetherTheJobStopsAndNamesFlagsThroughTheCli) {
  Config config;
  const std::string what =
      "cannot write a trace in /x: LOCKSTEP_DIR /x holds a trace of another "
      "run (run id r); use a new directory or LOCKSTEP_OVERWRITE=1";
  EXPECT_EQ(failure_line(config, "x"), "lockstep: x; running untraced");
  config.fail_hard = true;
  EXPECT_EQ(failure_line(config, "x"),
            "lockstep: x; stopping the job (LOCKSTEP_FAIL_HARD=1, exit code 78)");
  config.from_cli = true;
  const std::string line = failure_line(config, what);
  EXPECT_NE(line.find("use a new directory or --overwrite; stopping the job"), std::string::npos)
      << line;
  EXPECT_EQ(line.find("LOCKSTEP_OVERWRITE"), std::string::npos) << line;
}

TEST(Config, ABadSwitchNamesEveryValueTheParserAccepts) {
  ConfigResult r = parse({{env::kFailHard, "maybe"}});
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("LOCKSTEP_FAIL_HARD=maybe is not 1, true, yes, on or 0, false, no, "
                             "off"),
            std::string::npos)
      << r.errors[0];
  r = parse({{env::kDebug, "3"}});
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("LOCKSTEP_DEBUG=3 is not 0, 1 or 2"), std::string::npos)
      << r.errors[0];
}

TEST(Config, ThroughLockstepRunMessagesNameTheFlags) {
  ConfigResult r = parse({{env::kFromCli, "1"}, {env::kSteps, "7-3"}});
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_TRUE(r.errors[0].starts_with("lockstep: --steps=7-3 is not a step window")) << r.errors[0];
  EXPECT_TRUE(r.config.from_cli);
}

TEST(Config, LoadWarnsOfUnknownVariablesWithoutFailing) {
  const char* envp[] = {"LOCKSTEP_LEVL=full", "LOCKSTEP_LEVEL=off", nullptr};
  ConfigResult r = load_config(
      [](const char* name) -> const char* {
        return std::string(name) == "LOCKSTEP_LEVEL" ? "off" : nullptr;
      },
      envp);
  EXPECT_TRUE(r.ok());
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("(nearest: LOCKSTEP_LEVEL)"), std::string::npos) << r.warnings[0];
}

TEST(Config, LoadChecksTheTraceDirectoryWhenTracingIsOn) {
  auto with_dir = [](const char* dir, const char* level) {
    return load_config(
        [=](const char* name) -> const char* {
          if (std::string(name) == env::kDir) return dir;
          if (std::string(name) == env::kLevel) return level;
          return nullptr;
        },
        nullptr);
  };
  ConfigResult r = with_dir("/proc/forbidden", "broad");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_TRUE(r.errors[0].starts_with("lockstep: LOCKSTEP_DIR /proc/forbidden cannot be created"))
      << r.errors[0];
  EXPECT_TRUE(with_dir("/proc/forbidden", "off").ok());
  const std::string file = ::testing::TempDir() + "config-test-a-file";
  std::ofstream(file) << "x";
  const std::string under_file = file + "/x";
  r = with_dir(under_file.c_str(), "broad");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find(file + " is not a directory"), std::string::npos) << r.errors[0];
  std::filesystem::remove(file);
  EXPECT_TRUE(with_dir(::testing::TempDir().c_str(), "full").ok());
}

TEST(Config, TheTraceDirectoryCheckLeavesNothingBehind) {
  const std::string parent = ::testing::TempDir() + "config-test-dir-check";
  std::filesystem::remove_all(parent);
  EXPECT_FALSE(trace_dir_problem(parent + "/a/b").has_value());
  EXPECT_FALSE(std::filesystem::exists(parent));
  std::filesystem::create_directories(parent);
  EXPECT_FALSE(trace_dir_problem(parent).has_value());
  EXPECT_TRUE(std::filesystem::is_empty(parent));
  std::filesystem::remove_all(parent);
}

}  // namespace
}  // namespace lockstep::collectors
