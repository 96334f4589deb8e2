#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "collectors/config.h"
#include "common/env.h"

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
  ConfigResult r = parse({{env::kStepOn, "iteration"}});
  EXPECT_EQ(r.config.step_source, StepSource::Markers);
  EXPECT_EQ(r.config.step_pattern, "iteration");
  r = parse({{env::kStepOn, "auto:^iter"}});
  EXPECT_EQ(r.config.step_source, StepSource::Auto);
  EXPECT_EQ(r.config.step_pattern, "^iter");
}

TEST(Config, BooleansAndRunId) {
  ConfigResult r = parse({{env::kDebug, "1"}, {env::kFailHard, "yes"}, {env::kOverwrite, "0"},
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
  const char* names[] = {env::kDir, env::kLevel, env::kSteps, env::kKernels, env::kMaxRegion,
                         env::kMetricBytes, env::kStepOn, env::kDebug, env::kRunId,
                         env::kOverwrite, env::kFailHard, env::kMemory, env::kHashMemory,
                         env::kValidate, env::kMergeHashes, env::kReuseDigests,
                         env::kSkipUnwritten, env::kLearnReadOnly, env::kRecallFills};
  for (const char* name : names) {
    int seen = 0;
    for (const EnvVarDoc& row : env_var_table()) seen += std::string(row.name) == name;
    EXPECT_EQ(seen, 1) << name;
  }
  EXPECT_EQ(env_var_table().size(), std::size(names));
}

TEST(Config, ReadmeCarriesTheSameTable) {
  std::ifstream readme(LOCKSTEP_COLLECTORS_README);
  ASSERT_TRUE(readme) << LOCKSTEP_COLLECTORS_README;
  std::stringstream text;
  text << readme.rdbuf();
  EXPECT_NE(text.str().find(env_var_table_markdown()), std::string::npos)
      << "collectors/README.md must contain exactly:\n" << env_var_table_markdown();
}

}  // namespace
}  // namespace lockstep::collectors
