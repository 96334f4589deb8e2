#include <gtest/gtest.h>

#include <atomic>

#include "collectors/step_counter.h"

namespace lockstep::collectors {
namespace {

// The process's counter keeps its count in the line every traced call reads (common/hot_flags.h),
// where a record's stamp reads it without the counter object: both must see the same count.
TEST(StepCounter, ACounterGivenItsStorageCountsThereAndReadsItBack) {
  std::atomic<uint32_t> storage{0};
  StepCounter steps(StepSource::Auto, "", &storage);
  EXPECT_EQ(steps.on_explicit(), 0u);
  uint32_t finished = 0;
  EXPECT_TRUE(steps.on_marker("step", &finished));
  EXPECT_EQ(finished, 1u);
  EXPECT_EQ(storage.load(), 2u);
  storage.store(7);
  EXPECT_EQ(steps.current(), 7u) << "the count is the storage's, not a copy";
  StepCounter own(StepSource::Auto, "");
  own.on_explicit();
  EXPECT_EQ(storage.load(), 7u) << "a counter of its own leaves it alone";
}

TEST(StepCounter, DefaultPatternMatchesStepMarkersOnly) {
  StepCounter steps(StepSource::Markers, kDefaultStepPattern);
  for (const char* yes : {"step", "Step 3", "train_step", "TRAIN STEP", "step#12", "train-step"})
    EXPECT_TRUE(steps.matches(yes)) << yes;
  for (const char* no : {"optimizer_step", "stepper", "forward", "aten::add", "", "my step"})
    EXPECT_FALSE(steps.matches(no)) << no;
}

TEST(StepCounter, AutoCountsMetricsUntilTheFirstMarker) {
  StepCounter steps(StepSource::Auto, "");
  uint32_t finished = 99;
  EXPECT_TRUE(steps.on_metric(&finished));
  EXPECT_EQ(finished, 0u);
  EXPECT_TRUE(steps.on_metric(&finished));
  EXPECT_EQ(finished, 1u);
  EXPECT_EQ(steps.current(), 2u);
  EXPECT_FALSE(steps.on_marker("forward", &finished));
  EXPECT_TRUE(steps.on_marker("step", &finished));
  EXPECT_EQ(finished, 2u);
  EXPECT_FALSE(steps.on_metric(&finished)) << "markers seen: metrics no longer end steps";
  EXPECT_EQ(steps.current(), 3u);
}

TEST(StepCounter, ExplicitApiAlwaysAdvancesAndStopsMetricSteps) {
  StepCounter steps(StepSource::Auto, "");
  EXPECT_EQ(steps.on_explicit(), 0u);
  uint32_t finished = 0;
  EXPECT_FALSE(steps.on_metric(&finished));
  StepCounter api_only(StepSource::Api, "");
  EXPECT_FALSE(api_only.on_marker("step", &finished));
  EXPECT_FALSE(api_only.on_metric(&finished));
  EXPECT_EQ(api_only.on_explicit(), 0u);
  EXPECT_EQ(api_only.current(), 1u);
}

TEST(StepCounter, MetricSourceIgnoresMarkers) {
  StepCounter steps(StepSource::Metric, "");
  uint32_t finished = 0;
  EXPECT_FALSE(steps.on_marker("step", &finished));
  EXPECT_TRUE(steps.on_metric(&finished));
  EXPECT_TRUE(steps.on_metric(&finished));
  EXPECT_EQ(finished, 1u);
}

TEST(StepCounter, CustomPatternIsCaseInsensitive) {
  StepCounter steps(StepSource::Markers, "^iteration");
  uint32_t finished = 0;
  EXPECT_TRUE(steps.on_marker("Iteration 5", &finished));
  EXPECT_FALSE(steps.on_marker("step", &finished));
  EXPECT_FALSE(steps.on_metric(&finished));
}

TEST(MarkerStepNumber, ReadsTheJobsNumberAfterStepIterationOrIter) {
  const std::pair<const char*, uint64_t> cases[] = {
      {"step 12", 12},        {"Step=12", 12},       {"train_step 7", 7},  {"iteration 12", 12},
      {"iter 3", 3},          {"ITER:4", 4},         {"step: 12/100", 12}, {"step#0", 0},
      {"train#step_num=9#", 9}, {"forward step 5", 5}, {"step12", 12},
      {"step 18446744073709551615", UINT64_MAX}};
  for (const auto& [text, number] : cases)
    EXPECT_EQ(marker_step_number(text), std::optional<uint64_t>(number)) << text;
}

TEST(MarkerStepNumber, FindsNoneWithoutDigitsRightAfterTheWord) {
  for (const char* text : {"step", "steps 3", "substep 4", "iterator 2", "optimizer_step", "",
                           "step x 3", "step    4", "step 18446744073709551616", "epoch 3"})
    EXPECT_EQ(marker_step_number(text), std::nullopt) << text;
}

}  // namespace
}  // namespace lockstep::collectors
