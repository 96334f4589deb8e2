// PointerRoles: when a kernel's parameter word is learned read-only, and when it is unlearned.
#include "collectors/pointer_roles.h"

#include <gtest/gtest.h>

namespace lockstep::collectors {
namespace {

using Change = PointerRoles::Change;
const std::string kName = "kernel";

// Unchanged with evidence n times: launches 0..n-1, the last `in_step_1` of them in step 1.
Change unchanged_launches(PointerRoles& roles, uint32_t offset, int n, int in_step_1) {
  Change last = Change::None;
  for (int i = 0; i < n; ++i)
    last = roles.observe(offset, i >= n - in_step_1 ? 1 : 0, /*changed=*/false, /*evidence=*/true);
  return last;
}

TEST(PointerRoles, EightUnchangedLaunchesOverTwoStepsLearn) {
  PointerRoles roles(&kName);
  EXPECT_EQ(unchanged_launches(roles, 8, 7, 0), Change::None);
  EXPECT_FALSE(roles.read_only(8));
  EXPECT_EQ(roles.observe(8, 1, false, true), Change::Learned);
  EXPECT_TRUE(roles.read_only(8));
  EXPECT_FALSE(roles.read_only(0));  // another word
  EXPECT_FALSE(roles.read_only(15 * 8 + 4096));
  EXPECT_EQ(roles.observe(8, 2, false, true), Change::None);  // learned once
}

TEST(PointerRoles, OneStepIsNotEnough) {
  PointerRoles roles(&kName);
  EXPECT_EQ(unchanged_launches(roles, 16, 50, 0), Change::None);
  EXPECT_FALSE(roles.read_only(16));
}

TEST(PointerRoles, UnchangedWithoutEvidenceDoesNotCount) {
  PointerRoles roles(&kName);
  for (uint32_t step = 0; step < 20; ++step)
    EXPECT_EQ(roles.observe(0, step, false, /*evidence=*/false), Change::None);
  EXPECT_FALSE(roles.read_only(0));
  // With evidence from then on: eight more launches over two steps.
  EXPECT_EQ(unchanged_launches(roles, 0, 8, 1), Change::Learned);
}

TEST(PointerRoles, AChangedWordIsNeverLearned) {
  PointerRoles roles(&kName);
  EXPECT_EQ(roles.observe(24, 0, /*changed=*/true, false), Change::None);
  EXPECT_EQ(unchanged_launches(roles, 24, 40, 20), Change::None);
  EXPECT_FALSE(roles.read_only(24));
}

TEST(PointerRoles, AChangeAfterLearningIsAContradictionOnce) {
  PointerRoles roles(&kName);
  ASSERT_EQ(unchanged_launches(roles, 8, 8, 1), Change::Learned);
  EXPECT_EQ(roles.observe(8, 3, /*changed=*/true, true), Change::Contradicted);
  EXPECT_FALSE(roles.read_only(8));
  EXPECT_EQ(roles.observe(8, 3, true, true), Change::None);
  EXPECT_EQ(unchanged_launches(roles, 8, 20, 10), Change::None);  // unlearned for good
  EXPECT_FALSE(roles.read_only(8));
}

TEST(PointerRoles, WordsPastTheTableAreIgnored) {
  PointerRoles roles(&kName);
  const uint32_t past = PointerRoles::kMaxWords * 8;
  EXPECT_EQ(unchanged_launches(roles, past, 20, 10), Change::None);
  EXPECT_FALSE(roles.read_only(past));
  unchanged_launches(roles, past - 8, 20, 10);
  EXPECT_TRUE(roles.read_only(past - 8));
}

TEST(PointerRoles, EverySixteenthLaunchVerifies) {
  PointerRoles roles(&kName);
  std::string pattern;
  for (int i = 0; i < 32; ++i) pattern += roles.next_launch_verifies() ? 'v' : '.';
  EXPECT_EQ(pattern, std::string(15, '.') + "v" + std::string(15, '.') + "v");
}

}  // namespace
}  // namespace lockstep::collectors
