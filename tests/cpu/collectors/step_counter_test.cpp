#include <gtest/gtest.h>

#include "collectors/step_counter.h"

namespace lockstep::collectors {
namespace {

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

}  // namespace
}  // namespace lockstep::collectors
