// The settings table (common/settings.def) and the parsers that every part shares.
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/env.h"
#include "common/settings.h"

namespace lockstep::settings {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Settings, EveryVariableHasOneRowAndEnvNamesComeFromIt) {
  std::set<std::string> names;
  for (const Setting& setting : all()) {
    EXPECT_TRUE(std::string(setting.name).starts_with("LOCKSTEP_")) << setting.name;
    EXPECT_TRUE(names.insert(setting.name).second) << setting.name << " twice";
    EXPECT_EQ(&get(setting.id), &setting) << setting.name;
    EXPECT_EQ(find(setting.name), &setting) << setting.name;
    EXPECT_NE(*setting.help, '\0') << setting.name;
  }
  EXPECT_EQ(find("LOCKSTEP_NOTHING"), nullptr);
  EXPECT_STREQ(env::kDir, "LOCKSTEP_DIR");
  EXPECT_STREQ(env::kFailHard, get(Id::FailHard).name);
}

TEST(Settings, TheFailHardHelpNamesItsExitCode) {
  EXPECT_TRUE(contains(get(Id::FailHard).help, "exit code " + std::to_string(kFailHardExitCode)))
      << get(Id::FailHard).help;
}

TEST(Settings, LevelNamesParseInAnyCaseAndTheDefaultIsBroad) {
  EXPECT_EQ(parse_level("off"), 0u);
  EXPECT_EQ(parse_level("FULL"), 3u);
  EXPECT_FALSE(parse_level("fast").has_value());
  EXPECT_EQ(kLevelNames[kDefaultLevel], "broad");
  EXPECT_STREQ(get(Id::Level).default_text, "broad");
  EXPECT_EQ(problem(get(Id::Level), "fast"), "is not one of off|metrics|broad|full");
}

TEST(Settings, StepWindowsHaveOneSetOfLimits) {
  auto window = parse_step_window("3-7");
  ASSERT_TRUE(window);
  EXPECT_EQ(window->first, 3u);
  EXPECT_EQ(window->last, 7u);
  window = parse_step_window("5-");
  ASSERT_TRUE(window);
  EXPECT_EQ(window->last, UINT32_MAX);
  window = parse_step_window("4294967295");
  ASSERT_TRUE(window);
  EXPECT_EQ(window->first, UINT32_MAX);
  for (const char* bad : {"7-3", "a-b", "-3", "1-2-3", "", "3 - 4", "4294967296", "+3"})
    EXPECT_FALSE(parse_step_window(bad).has_value()) << bad;
}

TEST(Settings, ASwitchMessageListsEveryWordTheParserAccepts) {
  const std::string why = *problem(get(Id::FailHard), "maybe");
  for (const char* word : {"1", "true", "yes", "on", "0", "false", "no", "off"}) {
    EXPECT_TRUE(parse_switch(word).has_value()) << word;
    EXPECT_TRUE(contains(why, word)) << why;
  }
  EXPECT_TRUE(parse_switch("YES").value());
  EXPECT_FALSE(parse_switch("").value());
  EXPECT_TRUE(contains(why, "any case") && contains(why, "empty is 0")) << why;
  EXPECT_FALSE(parse_switch("2").has_value());
}

TEST(Settings, TheDebugMessageNamesLevelTwo) {
  EXPECT_FALSE(problem(get(Id::Debug), "2").has_value());
  EXPECT_FALSE(problem(get(Id::Debug), "yes").has_value());
  const std::string why = *problem(get(Id::Debug), "3");
  EXPECT_TRUE(why.starts_with("is not 0, 1 or 2")) << why;
}

TEST(Settings, AByteSizeMessageNamesItsLimitsAsTheUserWritesThem) {
  EXPECT_EQ(parse_byte_size("2GiB"), 2ull << 30);
  EXPECT_EQ(parse_byte_size("1t"), 1ull << 40);
  const std::string why = *problem(get(Id::Memory), "12Q");
  EXPECT_TRUE(contains(why, "between 1M and 1T")) << why;
  EXPECT_TRUE(contains(why, "K, M, G or T")) << why;
  EXPECT_TRUE(problem(get(Id::Memory), "512K").has_value());
  EXPECT_FALSE(problem(get(Id::Memory), "1MiB").has_value());
}

TEST(Settings, RegexesAreCheckedWithTheShimsGrammar) {
  EXPECT_FALSE(problem(get(Id::Kernels), "gemm|reduce").has_value());
  EXPECT_TRUE(problem(get(Id::Kernels), "(")->starts_with("is not a valid regular expression"));
  EXPECT_FALSE(problem(get(Id::StepOn), "auto:^iter").has_value());
  EXPECT_FALSE(problem(get(Id::StepOn), "optimizer").has_value());
  EXPECT_TRUE(problem(get(Id::StepOn), "auto:[x").has_value());
}

TEST(Settings, UnknownVariablesGetOneWarningEachNamingTheNearestSetting) {
  const char* envp[] = {"PATH=/bin",       "LOCKSTEP_LEVL=full", "LOCKSTEP_DIR=x",
                        "LOCKSTEP_STEP=3", "NOT_LOCKSTEP_X=1",   nullptr};
  std::vector<std::string> warnings = unknown_variable_warnings(envp);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0],
            "lockstep: warning: LOCKSTEP_LEVL is not a lockstep setting, ignored (nearest: "
            "LOCKSTEP_LEVEL)");
  EXPECT_TRUE(contains(warnings[1], "(nearest: LOCKSTEP_STEPS)")) << warnings[1];
  EXPECT_TRUE(unknown_variable_warnings(nullptr).empty());
}

TEST(Settings, EditDistanceCountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("LOCKSTEP_LEVL", "LOCKSTEP_LEVEL"), 1u);
  EXPECT_EQ(nearest_setting("LOCKSTEP_KERNEL"), "LOCKSTEP_KERNELS");
}

TEST(Settings, MessagesForCliUsersNameTheFlags) {
  EXPECT_EQ(cli_wording("LOCKSTEP_DIR /x holds a trace of another run (run id r); use a new "
                        "directory or LOCKSTEP_OVERWRITE=1"),
            "--output /x holds a trace of another run (run id r); use a new directory or "
            "--overwrite");
  EXPECT_EQ(cli_wording("LOCKSTEP_FAIL_HARD=1"), "LOCKSTEP_FAIL_HARD=1");  // no flag
  EXPECT_EQ(given_as(get(Id::Steps), "7-3", true), "--steps 7-3");
  EXPECT_EQ(given_as(get(Id::Steps), "7-3", false), "LOCKSTEP_STEPS=7-3");
  EXPECT_EQ(given_as(get(Id::Overwrite), "1", true), "--overwrite");
  EXPECT_EQ(long_flag(get(Id::Dir)), "--output");
  EXPECT_EQ(cli_help(get(Id::Overwrite)).substr(0, 6), "write ");
}

TEST(Settings, TheMarkdownTableHasARowForEverySettingWithItsFlag) {
  const std::string table = markdown_table();
  for (const Setting& setting : all())
    EXPECT_TRUE(contains(table, "| `" + std::string(setting.name) + "` |")) << setting.name;
  EXPECT_TRUE(contains(table, "| `LOCKSTEP_KERNELS` | `--kernels` | every kernel |"));
  EXPECT_TRUE(contains(table, "| `LOCKSTEP_MAX_REGION` |  | 256M |"));
}

}  // namespace
}  // namespace lockstep::settings
