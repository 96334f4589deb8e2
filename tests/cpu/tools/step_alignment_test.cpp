// Which steps of two runs the diff pairs (tools/diff/alignment.h), on step lists alone: by the
// job's numbers when both runs have them; what one run holds before, after or in the middle of
// the other's steps; a resumed run's restore prologue.
#include <gtest/gtest.h>

#include "tools/diff/alignment.h"
#include "tools/diff/engine.h"

namespace lockstep::tools {
namespace {

// A run's steps: one entry per trace step 0, 1, ...; a number is the job's, -1 unnumbered.
std::vector<StepInfo> run(std::initializer_list<int64_t> numbers) {
  std::vector<StepInfo> steps;
  uint32_t step = 0;
  for (int64_t n : numbers) {
    StepInfo info;
    info.step = step++;
    info.record_count = 10;
    info.has_summary = true;
    if (n >= 0) info.job_step = static_cast<uint64_t>(n);
    steps.push_back(info);
  }
  return steps;
}

// "a:b" for every pair, in order.
std::string pairs(const StepAlignment& alignment) {
  std::string out;
  for (const StepPairing& p : alignment.pairs)
    out += (out.empty() ? "" : " ") + std::to_string(p.a) + ":" + std::to_string(p.b);
  return out;
}

std::string unpaired(const StepAlignment& alignment) {
  std::string out;
  for (const UnpairedSteps& u : alignment.unpaired)
    out += (out.empty() ? "" : " | ") + unpaired_text(u);
  return out;
}

TEST(StepAlignment, TwoRunsFromStepZeroPairTheirSetUpAndEveryStep) {
  const StepAlignment a = align_steps(run({-1, 0, 1, 2}), run({-1, 0, 1, 2}), AlignMode::Auto);
  EXPECT_TRUE(a.by_number());
  EXPECT_EQ(a.resumed, 0);
  EXPECT_EQ(pairs(a), "0:0 1:1 2:2 3:3");
  EXPECT_EQ(unpaired(a), "");
}

TEST(StepAlignment, AResumedRunPairsByNumberAndItsPrologueIsARestorePhase) {
  // A went straight through steps 0-7; B loaded a checkpoint taken before step 4.
  const StepAlignment a = align_steps(run({-1, 0, 1, 2, 3, 4, 5, 6, 7}), run({-1, 4, 5, 6, 7}),
                                      AlignMode::Auto);
  ASSERT_TRUE(a.by_number());
  EXPECT_EQ(a.resumed, 'b');
  EXPECT_EQ(pairs(a), "5:1 6:2 7:3 8:4");
  EXPECT_EQ(a.job_step(5), std::optional<uint64_t>(4));
  EXPECT_EQ(a.b_step(8), 4u);
  EXPECT_EQ(unpaired(a),
            "steps 0-3 (trace steps 0-4) only in A (B started later) | run B's restore "
            "prologue, trace step 0 (10 records): not compared");
  EXPECT_FALSE(a.has_gap());
}

TEST(StepAlignment, RunsThatStartAtDifferentStepsPairOnlyTheNumbersBothHave) {
  const StepAlignment a =
      align_steps(run({-1, 5, 6, 7, 8}), run({-1, 2, 3, 4, 5, 6}), AlignMode::Number);
  EXPECT_EQ(a.resumed, 'a');
  EXPECT_EQ(pairs(a), "1:4 2:5");
  EXPECT_EQ(unpaired(a),
            "run A's restore prologue, trace step 0 (10 records): not compared | steps 7-8 "
            "(trace steps 3-4) only in A (B stopped earlier) | steps 2-4 (trace steps 0-3) only "
            "in B (A started later)");
}

TEST(StepAlignment, AStepMissingBetweenTheStepsBothHaveIsAGap) {
  const StepAlignment a = align_steps(run({-1, 0, 1, 2, 3}), run({-1, 0, 2, 3}), AlignMode::Auto);
  EXPECT_EQ(pairs(a), "0:0 1:1 3:2 4:3");
  EXPECT_TRUE(a.has_gap());
  EXPECT_EQ(unpaired(a), "step 1 (trace step 2) only in A (missing from B's numbering)");
}

TEST(StepAlignment, UnnumberedStepsPairByTheNumberedStepBeforeThem) {
  // An unnumbered marker after each numbered one (an evaluation step, say).
  const StepAlignment a =
      align_steps(run({-1, 3, -1, 4, -1}), run({-1, 0, 1, 2, 3, -1, 4, -1}), AlignMode::Auto);
  EXPECT_EQ(a.resumed, 'a');
  EXPECT_EQ(pairs(a), "1:4 2:5 3:6 4:7");
  EXPECT_EQ(a.job_step(2), std::nullopt) << "an unnumbered step has no number of its own";
  EXPECT_EQ(a.pairs[1].within, std::optional<uint64_t>(3));
}

TEST(StepAlignment, AutoAlignsByPositionWhenARunHasNoNumbers) {
  const StepAlignment a = align_steps(run({-1, 0, 1}), run({-1, -1, -1}), AlignMode::Auto);
  EXPECT_FALSE(a.by_number());
  EXPECT_EQ(a.reason, "run B has no numbered steps");
  EXPECT_THROW(align_steps(run({-1, 0, 1}), run({-1, -1, -1}), AlignMode::Number),
               AlignmentError);
  EXPECT_FALSE(align_steps(run({-1, 0}), run({-1, 0}), AlignMode::Ordinal).by_number());
}

TEST(StepAlignment, NumbersThatGoBackAreNotAlignedByNumber) {
  EXPECT_THROW(align_steps(run({-1, 0, 1, 1}), run({-1, 0, 1}), AlignMode::Number),
               AlignmentError);
  const StepAlignment a = align_steps(run({-1, 0, 2, 1}), run({-1, 0, 1}), AlignMode::Auto);
  EXPECT_FALSE(a.by_number());
  EXPECT_NE(a.reason.find("run A: the job's step numbers do not increase (step 1 at trace step "
                          "3 after step 2 at trace step 2)"),
            std::string::npos)
      << a.reason;
}

TEST(StepAlignment, ARangeOfTheJobsStepsKeepsThoseStepsAndTheRestorePhase) {
  StepAlignment a = align_steps(run({-1, 0, 1, 2, 3, 4, 5, 6, 7}), run({-1, 4, 5, 6, 7}),
                                AlignMode::Auto);
  restrict_alignment(a, 5, 6);
  EXPECT_EQ(pairs(a), "6:2 7:3");
  EXPECT_EQ(unpaired(a), "run B's restore prologue, trace step 0 (10 records): not compared");
}

}  // namespace
}  // namespace lockstep::tools
