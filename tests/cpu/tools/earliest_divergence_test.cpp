// Issue #35's cases: the earliest diverging bit, not the first visible loss. Synthetic runs
// modelled on the issue: an embedding kernel writes differing weights at step 1 (atomics), bf16
// rounding keeps every GEMM, collective and loss equal until the weights feed them at step 4.
// State records date the divergence; a window that starts after the writer sees only receivers
// of a difference made before it; hunt's plan moves the window until it holds the writer.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "tests/cpu/tools/synthetic.h"
#include "tools/diff/engine.h"
#include "tools/diff/memory_input.h"
#include "tools/hunt_plan.h"
#include "tools/report.h"

namespace lockstep::tools {
namespace {

using testing::SyntheticRank;

constexpr uint32_t kSteps = 6;
constexpr uint32_t kWriterStep = 1;   // the embedding's backward writes other weights
constexpr uint32_t kVisibleStep = 4;  // the weights reach the GEMMs and the loss

struct Shape {
  bool full = true;           // kernels fingerprinted (level full), else broad
  uint32_t window_first = 0;  // LOCKSTEP_STEPS=window_first-
  bool state = true;          // State records
  bool numbered = false;      // step markers with the job's numbers (step 0 the set-up)
};

// Plain text whatever the test's own stdout is: a Style over a file that is no terminal.
Style plain() {
  static FILE* file = std::fopen("/dev/null", "w");
  return Style(file);
}

// One rank of one run. Every record outside the window, and every kernel at broad, carries no
// fingerprint, as the shim records them.
SyntheticRank run(bool planted, const Shape& shape) {
  SyntheticRank r;
  uint64_t chain = 11, weights = 22;
  for (uint32_t s = 0; s < kSteps; ++s) {
    const size_t first = r.records.size();
    if (shape.numbered) r.marker(s, s > 0 ? std::optional<uint64_t>(s) : std::nullopt);
    uint64_t weights_after = weights * 31 + s;
    if (planted && s == kWriterStep) weights_after ^= 1;
    uint64_t activations = chain * 7 + s + (s >= kVisibleStep ? weights : 0);
    trace::Record& embedding = r.kernel(s, 1, "embedding_dense_backward", chain, activations);
    embedding.buffers.insert(embedding.buffers.begin() + 1,
                             r.buffer(trace::Role::In, "arg2", weights));
    embedding.buffers.push_back(r.buffer(trace::Role::Out, "arg2", weights_after));
    weights = weights_after;
    r.gemm(s, 1, 3, activations, activations + 1);
    r.all_reduce(s, 2, s, activations + 1, activations + 2);
    chain = activations + 3;
    r.kernel(s, 1, "adam", activations + 2, chain);
    if (shape.state) r.state(s, "blocks.0.wte.weight", weights);
    r.metric(s, 2.5f - 0.1f * s + (planted && s >= kVisibleStep ? 0.01f : 0.0f));
    for (size_t i = first; i < r.records.size(); ++i) {
      trace::Record& record = r.records[i];
      const bool kernel = record.kind == trace::RecordKind::Kernel;
      if (s < shape.window_first || (kernel && !shape.full))
        for (trace::BufferFingerprint& b : record.buffers) b.flags = 0, b.fingerprint = 0;
    }
  }
  return r;
}

// The diff of a planted run against an unplanted one; `window_first` as the headers say it.
DiffResult diff_runs(const Shape& shape, DiffOptions options = {}) {
  SyntheticRank a = run(false, shape), b = run(true, shape);
  auto open = [&](const SyntheticRank& r) {
    auto input = std::make_unique<MemoryRankInput>(r.records, r.strings, r.steps());
    if (shape.window_first > 0) input->fingerprint_first = shape.window_first;
    return std::unique_ptr<RankInput>(std::move(input));
  };
  std::vector<RankPair> pairs = {{0, [&] { return open(a); }, [&] { return open(b); }}};
  return diff_ranks(pairs, options);
}

TEST(EarliestDivergence, BroadWithStateRecordsDatesTheDivergenceToTheStepTheWeightsChanged) {
  DiffResult broad = diff_runs({.full = false, .window_first = 0, .state = true});
  ASSERT_TRUE(broad.divergent);
  ASSERT_TRUE(broad.state);
  EXPECT_EQ(broad.state->step, kWriterStep);
  EXPECT_EQ(broad.state->name, "blocks.0.wte.weight");
  ASSERT_TRUE(broad.metric);
  EXPECT_EQ(broad.metric->step, kVisibleStep);
  EXPECT_EQ(earliest_diverging_step(broad), kWriterStep);
  ASSERT_EQ(broad.first_by_epoch.size(), 1u);
  EXPECT_EQ(broad.first_by_epoch[0].classification, Classification::State);
  EXPECT_EQ(broad.first_by_epoch[0].detail, "state 'blocks.0.wte.weight' differs after step 1");
  EXPECT_FALSE(broad.culprit) << "a state difference dates the divergence, it names no op";

  std::optional<BroadFinding> finding = broad_finding(broad);
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->diverging_step, kWriterStep);
  EXPECT_EQ(finding->state_step, kWriterStep);
  EXPECT_EQ(finding->identical_through, 0u);
  EXPECT_EQ(first_window(*finding, 0), (StepWindow{kWriterStep, kWriterStep}));
}

TEST(EarliestDivergence, BroadWithoutStateRecordsSeesOnlyTheLossStep) {
  DiffResult broad = diff_runs({.full = false, .window_first = 0, .state = false});
  EXPECT_FALSE(broad.state);
  EXPECT_EQ(earliest_diverging_step(broad), kVisibleStep);
}

TEST(EarliestDivergence, StateAndMetricAreReportedInTheJsonAndTheText) {
  DiffResult broad = diff_runs({.full = false, .window_first = 0, .state = true});
  DiffContext context{"a", "b", 1, {0}, 0};
  nlohmann::json j = diff_json(broad, context);
  EXPECT_EQ(j["version"], 5);
  EXPECT_EQ(j["state_divergence"]["step"], kWriterStep);
  EXPECT_EQ(j["state_divergence"]["state_kind"], "parameter");
  EXPECT_EQ(j["first_divergence"]["classification"], "state");
  EXPECT_EQ(j["metric_divergence"]["step"], kVisibleStep);
  std::string text = diff_text(broad, context, plain());
  EXPECT_NE(text.find("'blocks.0.wte.weight' (parameter) first differs after step 1"),
            std::string::npos)
      << text;
}

TEST(EarliestDivergence, AWindowAfterTheWriterFindsAReceiverOfADifferenceMadeBeforeIt) {
  DiffResult full = diff_runs({.full = true, .window_first = kVisibleStep, .state = false});
  ASSERT_TRUE(full.divergent);
  EXPECT_EQ(full.window_first_step, kVisibleStep);
  const Divergence* before = first_made_before_window(full);
  ASSERT_NE(before, nullptr);
  EXPECT_EQ(before->classification, Classification::Receiver);
  EXPECT_EQ(before->name, "embedding_dense_backward");
  EXPECT_EQ(before->step, kVisibleStep);
  EXPECT_EQ(before->made_before_step, kVisibleStep);
  ASSERT_TRUE(before->buffer);
  EXPECT_EQ(before->buffer->label, "arg2");
  EXPECT_NE(before->detail.find("receiver of a difference made before step 4"), std::string::npos)
      << before->detail;
  EXPECT_NE(before->detail.find("start the window earlier"), std::string::npos);
  EXPECT_FALSE(full.culprit) << full.culprit->detail;
  std::string text = diff_text(full, DiffContext{"a", "b", 1, {0}, 0}, plain());
  EXPECT_NE(text.find("received a difference made before step 4"), std::string::npos) << text;
}

TEST(EarliestDivergence, AWindowOfTheJobsStepsPairedByNumberFindsTheReceiverToo) {
  // As `lockstep hunt` diffs a window of a job whose steps are numbered (JAX's step
  // annotations): both runs fingerprint job step 4 on, and the diff pairs steps 4-5 by number,
  // listing only those. The steps before them are still in the runs, so a differing input there
  // was made before the window (it once read as bytes no traced op wrote, and hunt stopped).
  DiffOptions options;
  options.align = AlignMode::Number;
  options.first_step = kVisibleStep;
  DiffResult full = diff_runs(
      {.full = true, .window_first = kVisibleStep, .state = false, .numbered = true}, options);
  ASSERT_TRUE(full.divergent);
  EXPECT_EQ(full.window_first_step, kVisibleStep);
  const Divergence* before = first_made_before_window(full);
  ASSERT_NE(before, nullptr);
  EXPECT_EQ(before->name, "embedding_dense_backward");
  EXPECT_EQ(before->made_before_step, kVisibleStep);
  EXPECT_FALSE(full.culprit) << full.culprit->detail;
  std::string text = diff_text(full, DiffContext{"a", "b", 1, {0}, 0}, plain());
  EXPECT_NE(text.find("fingerprinted and compared from step 4 on (the runs' earlier steps left "
                      "out)"),
            std::string::npos)
      << text;
}

TEST(EarliestDivergence, AllOfANumberedRunPairedByNumberHasNoWindow) {
  // The same runs compared whole: nothing before the compared steps, no window.
  DiffOptions options;
  options.align = AlignMode::Number;
  DiffResult full = diff_runs({.full = true, .state = false, .numbered = true}, options);
  ASSERT_TRUE(full.divergent);
  EXPECT_FALSE(full.window_first_step);
  ASSERT_TRUE(full.culprit);
  EXPECT_EQ(full.culprit->name, "embedding_dense_backward");
  EXPECT_EQ(full.culprit->step, kWriterStep);
}

TEST(EarliestDivergence, AnExactExtentReceiverBeforeTheWindowIsNamedSoToo) {
  // Without the embedding's fingerprints only the GEMM shows the difference in the window.
  Shape shape{.full = false, .window_first = kVisibleStep, .state = false};
  DiffResult full = diff_runs(shape);
  const Divergence* before = first_made_before_window(full);
  ASSERT_NE(before, nullptr);
  EXPECT_EQ(before->kind, "gemm");
  EXPECT_EQ(before->made_before_step, kVisibleStep);
}

TEST(EarliestDivergence, AWindowThatStartsAtTheTracesFirstStepKeepsTheUnexplainedReading) {
  // The same differing input at step 0, fingerprinted from the trace's first step: nothing
  // earlier could have written it, so it is bytes no traced op wrote.
  SyntheticRank a, b;
  for (SyntheticRank* r : {&a, &b}) {
    r->kernel(0, 1, "reduce_kernel", r == &a ? 1 : 2, r == &a ? 5 : 6);
    r->gemm(0, 1, 3, r == &a ? 8 : 9, 10);
  }
  std::vector<RankPair> pairs = {
      {0,
       [&] {
         return std::unique_ptr<RankInput>(
             std::make_unique<MemoryRankInput>(a.records, a.strings, a.steps()));
       },
       [&] {
         return std::unique_ptr<RankInput>(
             std::make_unique<MemoryRankInput>(b.records, b.strings, b.steps()));
       }}};
  DiffResult r = diff_ranks(pairs, DiffOptions{});
  EXPECT_FALSE(r.window_first_step);
  EXPECT_EQ(first_made_before_window(r), nullptr);
  ASSERT_EQ(r.first_by_epoch.size(), 1u);
  EXPECT_EQ(r.first_by_epoch[0].kind, "gemm");
  EXPECT_EQ(r.first_by_epoch[0].detail, "input 'A' already differed");
  EXPECT_EQ(r.unexplained, 1u);
}

TEST(EarliestDivergence, AWindowHoldingTheWriterNamesItAsTheOrigin) {
  DiffResult full = diff_runs({.full = true, .window_first = kWriterStep, .state = false});
  EXPECT_EQ(first_made_before_window(full), nullptr);
  ASSERT_TRUE(full.culprit);
  EXPECT_EQ(full.culprit->classification, Classification::Origin);
  EXPECT_EQ(full.culprit->name, "embedding_dense_backward");
  EXPECT_EQ(full.culprit->step, kWriterStep);
  EXPECT_EQ(full.culprit->buffer->label, "arg2");
}

// ---- hunt's plan (tools/hunt_plan.h) ---------------------------------------------------------

TEST(HuntPlan, TheFirstWindowIsTheDivergingStepWithItsMarginNeverBeforeTheTrace) {
  BroadFinding finding;
  finding.trace_first_step = 2;
  finding.diverging_step = 6;
  EXPECT_EQ(first_window(finding, 0), (StepWindow{6, 6}));
  EXPECT_EQ(first_window(finding, 3), (StepWindow{3, 6}));
  EXPECT_EQ(first_window(finding, 10), (StepWindow{2, 6}));
}

TEST(HuntPlan, AWindowOfTraceStepsIsDiffedAsTheJobsNumbersOrByTraceStep) {
  // A job numbering its steps from 0 after a set-up step (trace step 0): trace step t is the
  // job's t - 1.
  StepAlignment numbered;
  numbered.mode = AlignMode::Number;
  numbered.pairs.push_back({0, 0, std::nullopt, std::nullopt});
  for (uint32_t t = 1; t <= 5; ++t) numbered.pairs.push_back({t, t, t - 1, t - 1});
  EXPECT_EQ(window_diff(numbered, {4, 5}).steps, "3-4");
  EXPECT_EQ(window_diff(numbered, {4, 5}).align, "number");
  // From the set-up step on, there is no number to start at: by trace step.
  EXPECT_EQ(window_diff(numbered, {0, 5}).steps, "0-5");
  EXPECT_EQ(window_diff(numbered, {0, 5}).align, "ordinal");
  EXPECT_EQ(window_diff(StepAlignment{}, {2, 4}).steps, "2-4");
  EXPECT_EQ(window_diff(StepAlignment{}, {2, 4}).align, "ordinal");
}

TEST(HuntPlan, AnEarlierWindowStartsHalfwayToTheTracesFirstStep) {
  EXPECT_EQ(earlier_window({4, 4}, 0), (StepWindow{2, 4}));
  EXPECT_EQ(earlier_window({2, 4}, 0), (StepWindow{1, 4}));
  EXPECT_EQ(earlier_window({1, 4}, 0), (StepWindow{0, 4}));
  EXPECT_EQ(earlier_window({0, 4}, 0), (StepWindow{0, 4}));
  EXPECT_EQ(earlier_window({100, 100}, 10), (StepWindow{55, 100}));
  EXPECT_EQ(StepWindow({2, 4}).text(), "2-4");
}

TEST(HuntPlan, AnIdenticalWindowIsRetriedNotMoved) {
  DiffResult identical;
  WindowVerdict v = judge_window(identical, {4, 4}, 0);
  EXPECT_EQ(v.outcome, WindowOutcome::Identical);
  EXPECT_FALSE(v.next);
}

TEST(HuntPlan, OnlyADifferingMetricInTheWindowIsNoCulprit) {
  DiffResult metric_only;
  metric_only.divergent = true;
  metric_only.metric = MetricDivergence{};
  WindowVerdict v = judge_window(metric_only, {0, 4}, 0);
  EXPECT_EQ(v.outcome, WindowOutcome::NoCulprit);
  EXPECT_FALSE(v.next);
}

// The hunt, its diffs computed from the synthetic runs: stage 1 at broad without state
// records sees step 4 only; each window after the writer finds a receiver of a difference made
// before it and moves earlier; the window that holds step 1 names the embedding's backward.
TEST(HuntPlan, TheWindowMovesEarlierUntilItHoldsTheWriterAndStopsAtTheOrigin) {
  DiffResult broad = diff_runs({.full = false, .window_first = 0, .state = false});
  std::optional<BroadFinding> finding = broad_finding(broad);
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->diverging_step, kVisibleStep);
  StepWindow window = first_window(*finding, 0);
  std::vector<std::string> tried;
  WindowVerdict verdict;
  for (int w = 0; w < 4; ++w) {
    DiffResult full = diff_runs({.full = true, .window_first = window.first, .state = false});
    verdict = judge_window(full, window, finding->trace_first_step);
    tried.push_back(fmt::format("{}: {}", window.text(), window_outcome_name(verdict.outcome)));
    if (!verdict.next) break;
    EXPECT_NE(
        verdict.why.find(fmt::format("receiver of a difference made before step {}", window.first)),
        std::string::npos)
        << verdict.why;
    window = *verdict.next;
  }
  EXPECT_EQ(tried,
            (std::vector<std::string>{"4-4: made-before", "2-4: made-before", "1-4: origin"}));
  EXPECT_EQ(verdict.outcome, WindowOutcome::Origin);
  EXPECT_NE(verdict.why.find("origin rank 0, step 1: kernel embedding_dense_backward"),
            std::string::npos)
      << verdict.why;
}

// An origin later in the window does not stop the hunt when a receiver of an earlier
// difference comes first: the op after the first place the runs parted is not that place.
TEST(HuntPlan, AnOriginAfterAReceiverOfAnEarlierDifferenceDoesNotEndTheHunt) {
  DiffResult full = diff_runs({.full = true, .window_first = 2, .state = false});
  Divergence origin;
  origin.step = 5;
  origin.classification = Classification::Origin;
  full.culprit = origin;
  WindowVerdict v = judge_window(full, {2, 5}, 0);
  EXPECT_EQ(v.outcome, WindowOutcome::MadeBefore);
  EXPECT_EQ(v.next, (StepWindow{1, 5}));
}

}  // namespace
}  // namespace lockstep::tools
