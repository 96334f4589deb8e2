// The diff engine on in-memory records: alignment, classification, blame order, step skipping.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "tests/cpu/tools/synthetic.h"
#include "tools/diff/engine.h"
#include "tools/diff/memory_input.h"
#include "tools/metric_value.h"
#include "trace/record.h"

namespace lockstep::tools {
namespace {

using testing::SyntheticRank;

// A small training step: forward kernel, GEMM, all-reduce of the gradient, optimizer, loss.
void train_step(SyntheticRank& r, uint32_t step, uint64_t base, bool metric = true) {
  r.kernel(step, 1, "forward", base + 1, base + 2);
  r.gemm(step, 1, 3, base + 2, base + 3);
  r.all_reduce(step, 2, step, base + 3, base + 4);
  r.kernel(step, 1, "adam", base + 4, base + 5);
  if (metric) r.metric(step, 2.5f - step * 0.1f);
}

std::unique_ptr<MemoryRankInput> input(const SyntheticRank& r, bool summaries = true) {
  return std::make_unique<MemoryRankInput>(r.records, r.strings, r.steps(summaries));
}

RankResult diff_one(const SyntheticRank& a, const SyntheticRank& b, DiffOptions options = {}) {
  auto ia = input(a), ib = input(b);
  return diff_rank(0, *ia, *ib, options);
}

DiffResult diff_world(const std::vector<SyntheticRank>& a, const std::vector<SyntheticRank>& b) {
  std::vector<RankPair> pairs;
  for (size_t r = 0; r < a.size(); ++r)
    pairs.push_back({static_cast<int>(r),
                     [&, r] { return std::unique_ptr<RankInput>(input(a[r])); },
                     [&, r] { return std::unique_ptr<RankInput>(input(b[r])); }});
  return diff_ranks(pairs, DiffOptions{});
}

TEST(DiffEngine, IdenticalRunsSkipEveryStepThroughSummaries) {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 10; ++s) train_step(a, s, s * 100), train_step(b, s, s * 100);
  auto ia = input(a), ib = input(b);
  RankResult r = diff_rank(0, *ia, *ib, {});
  EXPECT_FALSE(r.first);
  EXPECT_EQ(r.steps_skipped, 10u);
  EXPECT_EQ(ia->loads, 0);
  EXPECT_EQ(ib->loads, 0);
}

TEST(DiffEngine, IdenticalWithoutSummariesComparesEverything) {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 4; ++s) train_step(a, s, s * 100), train_step(b, s, s * 100);
  auto ia = input(a, false), ib = input(b, false);
  RankResult r = diff_rank(0, *ia, *ib, {});
  EXPECT_FALSE(r.first);
  EXPECT_EQ(r.records_compared, a.records.size());
}

TEST(DiffEngine, OutputOnlyDifferenceIsAnOrigin) {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 6; ++s) {
    train_step(a, s, s * 100);
    // From step 3 on, run B's GEMM writes another D; everything after receives it.
    train_step(b, s, s * 100);
    if (s >= 3) {
      b.records[b.records.size() - 4].buffers[2].fingerprint ^= 0xdead;  // gemm D
      b.records[b.records.size() - 3].buffers[0].fingerprint ^= 0xdead;  // all-reduce send
    }
  }
  DiffOptions options;
  options.window_records = 5;  // one step per window
  RankResult r = diff_one(a, b, options);
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->classification, Classification::Origin);
  EXPECT_EQ(r.first->step, 3u);
  EXPECT_EQ(r.first->kind, "gemm");
  ASSERT_TRUE(r.first->buffer);
  EXPECT_EQ(r.first->buffer->label, "D");
  EXPECT_EQ(r.first->buffer->role, "out");
  EXPECT_EQ(r.first->buffer->fingerprint_b, r.first->buffer->fingerprint_a ^ 0xdead);
  EXPECT_EQ(r.steps_skipped, 3u);  // steps 0-2 skipped through their summaries
}

TEST(DiffEngine, InputDifferenceIsAReceiver) {
  SyntheticRank a, b;
  train_step(a, 0, 0);
  train_step(b, 0, 0);
  b.records[1].buffers[0].fingerprint = 999;  // the GEMM read another A
  b.records[1].buffers[2].fingerprint = 998;
  RankResult r = diff_one(a, b);
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->classification, Classification::Receiver);
  EXPECT_EQ(r.first->name, "cublasLtMatmul");
  EXPECT_EQ(r.first->buffer->role, "in");
  EXPECT_EQ(r.first->buffer->label, "A");
}

TEST(DiffEngine, CollectiveCarryingAnotherRanksDifferenceIsBlamedOnThatRank) {
  // Rank 1's GEMM makes a different D (origin); the all-reduce carries it to rank 0, where the
  // all-reduce's own input matched but its output differs: a receiver, not the culprit.
  std::vector<SyntheticRank> a(2), b(2);
  for (int rank = 0; rank < 2; ++rank)
    for (uint32_t s = 0; s < 3; ++s) {
      train_step(a[rank], s, s * 100 + rank * 10);
      train_step(b[rank], s, s * 100 + rank * 10);
    }
  for (int rank = 0; rank < 2; ++rank) {
    auto& recs = b[rank].records;
    size_t gemm = 5 * 2 + 1, reduce = 5 * 2 + 2;  // step 2
    if (rank == 1) {
      recs[gemm].buffers[2].fingerprint ^= 1;
      recs[reduce].buffers[0].fingerprint ^= 1;
    }
    recs[reduce].buffers[1].fingerprint ^= 2;
  }
  DiffResult result = diff_world(a, b);
  ASSERT_TRUE(result.divergent);
  ASSERT_EQ(result.first_by_epoch.size(), 2u);
  EXPECT_EQ(result.first_by_epoch[0].rank, 1);
  EXPECT_EQ(result.first_by_epoch[0].classification, Classification::Origin);
  EXPECT_EQ(result.first_by_epoch[1].rank, 0);
  EXPECT_EQ(result.first_by_epoch[1].classification, Classification::Receiver);
  EXPECT_EQ(result.first_by_epoch[1].kind, "collective");
  EXPECT_EQ(result.first_by_epoch[1].received_from, 1);
  ASSERT_TRUE(result.culprit);
  EXPECT_EQ(result.culprit->rank, 1);
  EXPECT_EQ(result.culprit->kind, "gemm");
}

TEST(DiffEngine, CollectiveWithMatchingInputsEverywhereIsItselfTheOrigin) {
  std::vector<SyntheticRank> a(2), b(2);
  for (int rank = 0; rank < 2; ++rank) {
    train_step(a[rank], 0, 0);
    train_step(b[rank], 0, 0);
    b[rank].records[2].buffers[1].fingerprint ^= 4;  // the reduction itself differs
  }
  DiffResult result = diff_world(a, b);
  ASSERT_TRUE(result.culprit);
  EXPECT_EQ(result.culprit->kind, "collective");
  EXPECT_EQ(result.culprit->classification, Classification::Origin);
  EXPECT_EQ(result.culprit->rank, 0);
}

TEST(DiffEngine, InsertedAndDeletedKernelsAreStructuralWithContext) {
  SyntheticRank a, b;
  a.kernel(0, 1, "k1", 1, 2), a.kernel(0, 1, "k2", 2, 3), a.kernel(0, 1, "k3", 3, 4);
  b.kernel(0, 1, "k1", 1, 2), b.kernel(0, 1, "extra", 2, 9), b.kernel(0, 1, "k2", 2, 3),
      b.kernel(0, 1, "k3", 3, 4);
  RankResult inserted = diff_one(a, b);
  ASSERT_TRUE(inserted.first);
  EXPECT_EQ(inserted.first->classification, Classification::Structural);
  EXPECT_EQ(inserted.first->structural, StructuralKind::Inserted);
  EXPECT_EQ(inserted.first->name, "extra");
  EXPECT_EQ(inserted.first->seq_a, 0u);
  EXPECT_EQ(inserted.structural_total, 1u);
  ASSERT_FALSE(inserted.first->context_b.empty());
  bool marked = false;
  for (const ContextLine& line : inserted.first->context_b)
    if (line.marked) marked = line.text.find("extra") != std::string::npos;
  EXPECT_TRUE(marked);

  RankResult deleted = diff_one(b, a);
  ASSERT_TRUE(deleted.first);
  EXPECT_EQ(deleted.first->structural, StructuralKind::Deleted);
  EXPECT_EQ(deleted.first->name, "extra");
  EXPECT_EQ(deleted.records_compared, 3u);  // k1, k2, k3 still paired by identity
}

TEST(DiffEngine, DifferentGemmAlgorithmIsStructural) {
  SyntheticRank a, b;
  a.gemm(0, 1, 3, 1, 2);
  b.gemm(0, 1, 5, 1, 9);
  RankResult r = diff_one(a, b);
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->structural, StructuralKind::Fields);
  EXPECT_NE(r.first->detail.find("algorithm 3 vs 5"), std::string::npos) << r.first->detail;
}

TEST(DiffEngine, ReorderedOpsOnAStreamAreStructural) {
  SyntheticRank a, b;
  a.kernel(0, 1, "x", 1, 2), a.kernel(0, 1, "y", 3, 4);
  b.kernel(0, 1, "y", 3, 4), b.kernel(0, 1, "x", 1, 2);
  // An order-independent step digest cannot see this; compare without summaries.
  auto ia = input(a, false), ib = input(b, false);
  RankResult r = diff_rank(0, *ia, *ib, {});
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->structural, StructuralKind::Reordered);
}

TEST(DiffEngine, ThreadInterleavingAcrossStreamsDoesNotMatter) {
  SyntheticRank a, b;
  a.kernel(0, 1, "s1", 1, 2), a.kernel(0, 2, "s2", 3, 4);
  b.kernel(0, 2, "s2", 3, 4), b.kernel(0, 1, "s1", 1, 2);  // other seq order across streams
  auto ia = input(a, false), ib = input(b, false);
  RankResult r = diff_rank(0, *ia, *ib, {});
  EXPECT_FALSE(r.first);
  EXPECT_EQ(r.records_compared, 2u);
}

TEST(DiffEngine, MetricDivergenceIsDecoded) {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 4; ++s) {
    train_step(a, s, s * 100);
    train_step(b, s, s * 100);
  }
  float other = 1.75f;
  std::memcpy(b.records.back().payload.data(), &other, 4);  // the loss of step 3
  RankResult r = diff_one(a, b);
  ASSERT_TRUE(r.metric);
  EXPECT_EQ(r.metric->step, 3u);
  EXPECT_EQ(format_metric_value(r.metric->b, r.metric->dtype_hint), "f32 1.75 (0x3fe00000)");
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->classification, Classification::Metric);
}

TEST(DiffEngine, MetricValuesDecodeByByteCountWithoutHint) {
  EXPECT_EQ(format_metric_value({0x80, 0x3f}, 0), "bf16 1 (0x3f80)");
  double d = -2.0;
  std::vector<uint8_t> bytes(8);
  std::memcpy(bytes.data(), &d, 8);
  EXPECT_EQ(format_metric_value(bytes, 0), "f64 -2 (0xc000000000000000)");
}

TEST(DiffEngine, StepRangeLimitsTheComparison) {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 5; ++s) train_step(a, s, s * 100), train_step(b, s, s * 100);
  b.records[1].buffers[2].fingerprint ^= 1;  // step 0 gemm
  DiffOptions options;
  options.first_step = 1;
  EXPECT_FALSE(diff_one(a, b, options).first);
  options.first_step = 0;
  EXPECT_TRUE(diff_one(a, b, options).first);
}

// A run whose file was not whole: complete up to `through`, for the reason given.
class UnfinishedInput : public MemoryRankInput {
 public:
  UnfinishedInput(const SyntheticRank& r, int64_t through)
      : MemoryRankInput(r.records, r.strings, r.steps(true)), through_(through) {}
  std::optional<int64_t> complete_through() override { return through_; }
  std::vector<std::string> incomplete() override {
    return {"b.lstrace: no end record (the writer did not finish): readable prefix up to step " +
            std::to_string(through_)};
  }

 private:
  int64_t through_;
};

DiffResult diff_unfinished(const SyntheticRank& a, const SyntheticRank& b, int64_t through,
                           DiffOptions options = {}) {
  std::vector<RankPair> pairs;
  pairs.push_back(
      {0, [&] { return std::unique_ptr<RankInput>(input(a)); },
       [&] { return std::unique_ptr<RankInput>(std::make_unique<UnfinishedInput>(b, through)); }});
  return diff_ranks(pairs, options);
}

TEST(DiffEngine, WholeIdenticalRunsAreIdenticalOverEveryStep) {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 5; ++s) train_step(a, s, s * 100), train_step(b, s, s * 100);
  DiffResult r = diff_world({a}, {b});
  EXPECT_EQ(verdict_of(r), Verdict::Identical);
  EXPECT_EQ(r.first_step, 0u);
  EXPECT_EQ(r.last_step, 4u);
  EXPECT_TRUE(r.not_compared.empty());
}

TEST(DiffEngine, AnUnfinishedRunWithoutDivergenceIsIncompleteAndSaysWhatWasCompared) {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 5; ++s) train_step(a, s, s * 100), train_step(b, s, s * 100);
  DiffResult r = diff_unfinished(a, b, 2);
  EXPECT_EQ(verdict_of(r), Verdict::Incomplete);
  EXPECT_EQ(r.last_step, 2u);
  EXPECT_EQ(r.trace_last_step, 4u);
  std::string line = coverage_line(r);
  EXPECT_NE(line.find("compared steps 0-2"), std::string::npos) << line;
  EXPECT_NE(line.find("steps 3-4 not compared"), std::string::npos) << line;
  EXPECT_NE(line.find("no end record"), std::string::npos) << line;
}

TEST(DiffEngine, ADivergenceInTheComparedPrefixIsDivergentWhateverElseIsMissing) {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 5; ++s) train_step(a, s, s * 100), train_step(b, s, s * 100);
  b.records[6].buffers[1].fingerprint ^= 1;  // step 1
  EXPECT_EQ(verdict_of(diff_unfinished(a, b, 2)), Verdict::Divergent);
}

TEST(DiffEngine, AStepRangeHoldingNoStepIsAnError) {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 3; ++s) train_step(a, s, s * 100), train_step(b, s, s * 100);
  DiffOptions options;
  options.first_step = 10;
  EXPECT_THROW(diff_unfinished(a, b, 2, options), StepRangeError);
}

}  // namespace
}  // namespace lockstep::tools

namespace lockstep::tools {
namespace {

// A kernel's args_digest covers by-value parameter structs with padding bytes, which differ
// between identical runs (seen on the H200 with PyTorch's LoadWithCast<1>): alone it is no
// divergence; with a differing output it is mentioned in the origin's detail.
TEST(DiffEngine, ArgsDigestAloneIsNoDivergence) {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 4; ++s) train_step(a, s, s * 100), train_step(b, s, s * 100);
  b.records[0].fields[trace::fields::Kernel::args_digest] ^= 0x5a5a;  // step 0 "forward"
  DiffOptions options;
  options.window_records = 5;
  RankResult r = diff_one(a, b, options);
  EXPECT_FALSE(r.first) << r.first->detail;
}

TEST(DiffEngine, ArgsDigestWithDifferingOutputIsNamedInTheOrigin) {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 4; ++s) train_step(a, s, s * 100), train_step(b, s, s * 100);
  b.records[5].fields[trace::fields::Kernel::args_digest] ^= 0x5a5a;  // step 1 "forward"
  b.records[5].buffers[1].fingerprint ^= 0xbeef;                      // its output
  DiffOptions options;
  options.window_records = 5;
  RankResult r = diff_one(a, b, options);
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->classification, Classification::Origin);
  EXPECT_EQ(r.first->step, 1u);
  EXPECT_NE(r.first->detail.find("scalar argument bytes differ too"), std::string::npos)
      << r.first->detail;
}

// A kernel's pointer region runs to the end of its allocation, so its size follows where the
// caching allocator put the tensor (seen on the H200: PyTorch jobs, identical losses). Regions
// of another size cannot be compared and are no divergence; regions of equal size still are.
TEST(DiffEngine, KernelRegionOfAnotherSizeIsNotCompared) {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 4; ++s) train_step(a, s, s * 100), train_step(b, s, s * 100);
  b.records[0].buffers[1].bytes += 512;         // step 0 "forward" output: another placement...
  b.records[0].buffers[1].fingerprint ^= 0x77;  // ...so another fingerprint
  DiffOptions options;
  options.window_records = 5;
  RankResult r = diff_one(a, b, options);
  EXPECT_FALSE(r.first) << r.first->detail;
  b.records[5].buffers[1].fingerprint ^= 0xbeef;  // step 1 "forward": same size, other value
  r = diff_one(a, b, options);
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->classification, Classification::Origin);
  EXPECT_EQ(r.first->step, 1u);
}

// An entry that took an enclosing region's digest (trace::kDigestOfEnclosing: a view inside a
// larger region hashed at the same point) in one run only describes other bytes than the
// other run's: not compared, even at the same size. Flagged in both, it compares as any.
TEST(DiffEngine, KernelRegionWithAnEnclosingDigestInOneRunIsNotCompared) {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 4; ++s) train_step(a, s, s * 100), train_step(b, s, s * 100);
  b.records[0].buffers[1].flags |= trace::kDigestOfEnclosing;  // step 0 "forward" output
  b.records[0].buffers[1].fingerprint ^= 0x77;
  DiffOptions options;
  options.window_records = 5;
  RankResult r = diff_one(a, b, options);
  EXPECT_FALSE(r.first) << r.first->detail;
  a.records[0].buffers[1].flags |= trace::kDigestOfEnclosing;  // both: compared, and differ
  r = diff_one(a, b, options);
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->classification, Classification::Origin);
  EXPECT_EQ(r.first->step, 0u);
}

TEST(DiffEngine, KernelRegionsPairByLabelWhenOneRunHasFewer) {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 3; ++s) train_step(a, s, s * 100), train_step(b, s, s * 100);
  // Run B passed the input pointer twice (one region): only the output is left to pair.
  b.records[0].buffers.erase(b.records[0].buffers.begin());
  DiffOptions options;
  RankResult r = diff_one(a, b, options);
  EXPECT_FALSE(r.first) << r.first->detail;
  b.records[0].buffers[0].fingerprint ^= 1;  // the output, now at index 0 in B
  r = diff_one(a, b, options);
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->classification, Classification::Origin);
  ASSERT_TRUE(r.first->buffer);
  EXPECT_EQ(r.first->buffer->label, "arg1");
}

// A kernel that writes a fresh tensor: its "input" fingerprint is whatever the allocator left
// there, which may differ between runs; its output matches. Not a divergence.
TEST(DiffEngine, KernelThatOverwroteADifferingRegionIsNoDivergence) {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 3; ++s) train_step(a, s, s * 100), train_step(b, s, s * 100);
  for (SyntheticRank* r : {&a, &b}) {
    r->records[0].buffers.push_back(r->buffer(trace::Role::In, "arg1", 0));  // arg1 before...
    std::swap(r->records[0].buffers[1], r->records[0].buffers[2]);           // ...in, in, out
  }
  b.records[0].buffers[1].fingerprint = 0xdead;  // arg1 before the kernel: other garbage
  RankResult r = diff_one(a, b, DiffOptions{});
  EXPECT_FALSE(r.first) << r.first->detail;
  EXPECT_EQ(r.unexplained, 0u);
  b.records[0].buffers[2].fingerprint ^= 1;  // and now its output differs too, but nothing
  r = diff_one(a, b, DiffOptions{});         // before it did: unexplained bytes
  EXPECT_FALSE(r.first);
  EXPECT_EQ(r.unexplained, 1u);
}

// A kernel whose input region differs although no traced op before it diverged read bytes
// that no traced op wrote (seen on the H200: reduce_kernel's scratch buffers on
// cudaMallocAsync memory). Not a divergence; shown only when the rank's metric differs too.
TEST(DiffEngine, KernelReceiverWithNothingBeforeItIsUnexplained) {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 4; ++s) train_step(a, s, s * 100), train_step(b, s, s * 100);
  b.records[5].buffers[0].fingerprint ^= 3;  // step 1 "forward": input differs...
  b.records[5].buffers[1].fingerprint ^= 3;  // ...and its region after the kernel too
  RankResult r = diff_one(a, b, DiffOptions{});
  EXPECT_FALSE(r.first) << r.first->detail;
  EXPECT_EQ(r.unexplained, 1u);
  ASSERT_TRUE(r.first_unexplained);
  EXPECT_EQ(r.first_unexplained->step, 1u);

  // Later, a real origin (step 2 "adam": inputs matched, output differs) is the first.
  b.records[13].buffers[1].fingerprint ^= 0x40;
  r = diff_one(a, b, DiffOptions{});
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->classification, Classification::Origin);
  EXPECT_EQ(r.first->step, 2u);

  // Only the metric differs (no origin): the unexplained kernel is shown as the rank's first.
  SyntheticRank c = a;
  c.records[5].buffers[0].fingerprint ^= 3;
  c.records[5].buffers[1].fingerprint ^= 3;
  float changed = 9.5f;
  std::memcpy(c.records[14].payload.data(), &changed, 4);  // step 2 metric
  DiffResult all = diff_world({a}, {c});
  ASSERT_EQ(all.first_by_epoch.size(), 1u);
  EXPECT_EQ(all.first_by_epoch[0].step, 1u);
  EXPECT_NE(all.first_by_epoch[0].detail.find("no traced op"), std::string::npos);
  EXPECT_TRUE(all.divergent);
  // Without the metric difference the runs are identical.
  SyntheticRank d = a;
  d.records[5].buffers[0].fingerprint ^= 3;
  d.records[5].buffers[1].fingerprint ^= 3;
  DiffResult quiet = diff_world({a}, {d});
  EXPECT_FALSE(quiet.divergent);
  EXPECT_EQ(quiet.unexplained, 1u);
}

// An op whose input differed only carried a difference, even when another of its regions
// matched before it and differs after it (issue #35: calling that an origin named the first
// fused kernel of a forward that read weights differing since step 0). With nothing traced
// before it and the trace's first step in the window, the differing bytes were written by no
// traced op: unexplained, never the culprit.
TEST(DiffEngine, AnOpWhoseInputDifferedIsNeverAnOriginEvenWhenAnotherRegionMatchedBefore) {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 3; ++s) train_step(a, s, s * 100), train_step(b, s, s * 100);
  for (SyntheticRank* r : {&a, &b}) {  // kernel 0: in arg1, in arg2, out arg1, out arg2
    auto& buffers = r->records[0].buffers;
    buffers = {r->buffer(trace::Role::In, "arg1", 1), r->buffer(trace::Role::In, "arg2", 2),
               r->buffer(trace::Role::Out, "arg1", 3), r->buffer(trace::Role::Out, "arg2", 4)};
  }
  b.records[0].buffers[0].fingerprint ^= 5;  // arg1: garbage before and after
  b.records[0].buffers[2].fingerprint ^= 5;
  b.records[0].buffers[3].fingerprint ^= 7;  // arg2 matched before, differs after
  RankResult r = diff_one(a, b, DiffOptions{});
  EXPECT_FALSE(r.first) << r.first->detail;
  EXPECT_EQ(r.unexplained, 1u);
  ASSERT_TRUE(r.first_unexplained);
  EXPECT_EQ(r.first_unexplained->classification, Classification::Receiver);
  EXPECT_NE(r.first_unexplained->detail.find("no traced op wrote"), std::string::npos)
      << r.first_unexplained->detail;
  DiffResult all = diff_world({a}, {b});
  EXPECT_FALSE(all.culprit);
}

// Level full does not hash an input inside an allocation nothing wrote since it was made (the
// output tensor a kernel is about to write): no value, flagged. Never compared, in either run.
TEST(DiffEngine, UnwrittenInputsAreNotComparedAndOutputsStillDecide) {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 3; ++s) train_step(a, s, s * 100), train_step(b, s, s * 100);
  for (SyntheticRank* r : {&a, &b}) {  // kernel 0: in arg0, in arg1 (unwritten), out both
    auto& buffers = r->records[0].buffers;
    trace::BufferFingerprint unwritten = r->buffer(trace::Role::In, "arg1", 0);
    unwritten.flags = trace::kNotWrittenSinceAlloc;
    buffers = {r->buffer(trace::Role::In, "arg0", 1), unwritten,
               r->buffer(trace::Role::Out, "arg0", 1), r->buffer(trace::Role::Out, "arg1", 4)};
  }
  b.records[0].buffers[1].flags = trace::kFingerprintValid;  // hashed in one run only: no matter
  b.records[0].buffers[1].fingerprint = 99;
  RankResult r = diff_one(a, b, DiffOptions{});
  EXPECT_FALSE(r.first) << r.first->detail;
  b.records[0].buffers[3].fingerprint ^= 7;  // what the kernel wrote differs: the origin
  r = diff_one(a, b, DiffOptions{});
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->classification, Classification::Origin);
  ASSERT_TRUE(r.first->buffer);
  EXPECT_EQ(r.first->buffer->label, "arg1");
  EXPECT_NE(r.first->detail.find("all 1 input matched"), std::string::npos) << r.first->detail;
}

// Level full learns which kernel pointers a kernel does not write and then takes no output entry
// for them (the input is flagged): a run that learned later or verified this launch has the
// output entry, the other not. Pairs by label: no structural difference, the rest decides.
TEST(DiffEngine, LearnedReadOnlyInputsWithoutOutputsStillCompare) {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 3; ++s) train_step(a, s, s * 100), train_step(b, s, s * 100);
  for (SyntheticRank* r : {&a, &b})
    r->records[0].buffers = {
        r->buffer(trace::Role::In, "arg0", 1), r->buffer(trace::Role::In, "arg1", 2),
        r->buffer(trace::Role::Out, "arg0", 3), r->buffer(trace::Role::Out, "arg1", 2)};
  a.records[0].buffers[1].flags |= trace::kLearnedReadOnly;  // A: no output entry for arg1
  a.records[0].buffers.pop_back();
  RankResult r = diff_one(a, b, DiffOptions{});
  EXPECT_FALSE(r.first) << r.first->detail;
  a.records[0].buffers[2].fingerprint ^= 7;  // what the kernel wrote differs: the origin
  r = diff_one(a, b, DiffOptions{});
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->classification, Classification::Origin);
  ASSERT_TRUE(r.first->buffer);
  EXPECT_EQ(r.first->buffer->label, "arg0");
}

// API extents (GEMM, collectives) are exact: another size is another op.
TEST(DiffEngine, GemmBufferOfAnotherSizeIsStructural) {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 3; ++s) train_step(a, s, s * 100), train_step(b, s, s * 100);
  b.records[1].buffers[0].bytes *= 2;  // step 0 gemm A
  RankResult r = diff_one(a, b, DiffOptions{});
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->classification, Classification::Structural);
  EXPECT_EQ(r.first->structural, StructuralKind::Buffers);
}

// ---- the record table drives the diff (trace/record_kinds.def) ------------------------------
// These tests read the table's diff columns and check the diff does what each row says, for
// every kind: a column changed in the table changes what they expect, a diff that stops reading
// a column fails them.

// A record of `kind` on stream 1 of step 0 whose fields are base, base + 1, ...
trace::Record& add_kind(SyntheticRank& r, trace::RecordKind kind, const std::string& name,
                        uint64_t base = 1) {
  trace::Record record;
  record.kind = kind;
  record.stream = 1, record.seq = ++r.seq, record.name = r.str(name);
  for (int i = 0; i < trace::field_count(kind); ++i) record.fields[i] = base + i;
  r.records.push_back(record);
  return r.records.back();
}

RankResult diff_records(const SyntheticRank& a, const SyntheticRank& b) {
  auto ia = input(a, false), ib = input(b, false);
  return diff_rank(0, *ia, *ib, DiffOptions{});
}

TEST(DiffEngineKindTable, KindsMarkedIgnoredAreSkippedAndEveryOtherKindIsCompared) {
  for (const trace::RecordKindInfo& info : trace::record_kinds()) {
    SyntheticRank a, b;
    a.kernel(0, 1, "k", 1, 2), b.kernel(0, 1, "k", 1, 2);
    add_kind(b, info.kind, "only-in-b");
    RankResult r = diff_records(a, b);
    if (info.diff.ignored()) {
      EXPECT_FALSE(r.first) << info.name << ": " << r.first->detail;
      EXPECT_EQ(r.records_compared, 1u) << info.name;
    } else {
      ASSERT_TRUE(r.first) << info.name;
      EXPECT_EQ(r.first->structural, StructuralKind::Inserted) << info.name;
      EXPECT_EQ(r.first->kind, info.name);
    }
  }
}

TEST(DiffEngineKindTable, AVolatileFieldAloneIsNoDivergenceAndAnyOtherFieldIs) {
  for (const trace::RecordKindInfo& info : trace::record_kinds()) {
    if (info.diff.ignored()) continue;
    for (size_t field = 0; field < info.field_names.size(); ++field) {
      SyntheticRank a, b;
      add_kind(a, info.kind, "op");
      add_kind(b, info.kind, "op").fields[field] += 1000;
      RankResult r = diff_records(a, b);
      const bool is_volatile = info.diff.is_volatile(static_cast<int>(field));
      EXPECT_EQ(r.first.has_value(), !is_volatile) << info.name << "." << info.field_names[field];
    }
  }
}

TEST(DiffEngineKindTable, GuessedRegionsOfAnotherSizeAreNotComparedExactExtentsAreStructural) {
  for (const trace::RecordKindInfo& info : trace::record_kinds()) {
    if (info.diff.ignored()) continue;
    SyntheticRank a, b;
    add_kind(a, info.kind, "op").buffers = {a.buffer(trace::Role::In, "x", 1),
                                            a.buffer(trace::Role::Out, "y", 2)};
    add_kind(b, info.kind, "op").buffers = {b.buffer(trace::Role::In, "x", 1),
                                            b.buffer(trace::Role::Out, "y", 3, 8192)};
    RankResult r = diff_records(a, b);
    if (info.diff.guessed_regions()) {
      EXPECT_FALSE(r.first) << info.name << ": " << r.first->detail;
    } else {
      ASSERT_TRUE(r.first) << info.name;
      EXPECT_EQ(r.first->structural, StructuralKind::Buffers) << info.name;
    }
  }
}

// A State record (the model's state after a step) dates a divergence and never names its origin:
// the op that wrote the tensor does. Every other compared kind whose inputs matched and whose
// output differs is an origin.
TEST(DiffEngineKindTable, AnOutputDifferenceIsAnOriginExceptInAStateRecordWhichOnlyDatesIt) {
  for (const trace::RecordKindInfo& info : trace::record_kinds()) {
    if (info.diff.ignored()) continue;
    std::vector<SyntheticRank> a(1), b(1);
    add_kind(a[0], info.kind, "op").buffers = {a[0].buffer(trace::Role::In, "x", 1),
                                               a[0].buffer(trace::Role::Out, "y", 2)};
    add_kind(b[0], info.kind, "op").buffers = {b[0].buffer(trace::Role::In, "x", 1),
                                               b[0].buffer(trace::Role::Out, "y", 3)};
    DiffResult r = diff_world(a, b);
    ASSERT_EQ(r.first_by_epoch.size(), 1u) << info.name;
    const bool state = info.kind == trace::RecordKind::State;
    EXPECT_EQ(r.first_by_epoch[0].classification,
              state ? Classification::State : Classification::Origin)
        << info.name;
    EXPECT_EQ(r.culprit.has_value(), !state) << info.name;
    EXPECT_EQ(r.state.has_value(), state) << info.name;
  }
}

// Two ops of one name in the other order: a kind with identity fields pairs them by those
// (each found at another place: reordered); a kind without pairs them by occurrence, so the
// first of A meets the first of B and their fields differ.
TEST(DiffEngineKindTable, IdentityFieldsPairOpsWhereverTheyStandElseOccurrencePairs) {
  for (const trace::RecordKindInfo& info : trace::record_kinds()) {
    if (info.diff.ignored()) continue;
    SyntheticRank a, b;
    add_kind(a, info.kind, "op", 1), add_kind(a, info.kind, "op", 100);
    add_kind(b, info.kind, "op", 100), add_kind(b, info.kind, "op", 1);
    RankResult r = diff_records(a, b);
    ASSERT_TRUE(r.first) << info.name;
    EXPECT_EQ(r.first->structural,
              info.diff.identity_count > 0 ? StructuralKind::Reordered : StructuralKind::Fields)
        << info.name;
  }
}

TEST(DiffEngineKindTable, ContextLinesCarryEachKindsShortText) {
  for (const trace::RecordKindInfo& info : trace::record_kinds()) {
    if (info.diff.ignored()) continue;
    SyntheticRank a, b;
    const trace::Record& before = add_kind(a, info.kind, "op", 5);
    add_kind(b, info.kind, "op", 5);
    b.kernel(0, 1, "extra", 1, 2);
    std::string expected = fmt::format("{} op", info.name);
    std::string text = trace::short_text(info.kind, before.fields);
    if (!text.empty()) expected += " " + text;
    RankResult r = diff_records(a, b);
    ASSERT_TRUE(r.first) << info.name;
    ASSERT_FALSE(r.first->context_b.empty()) << info.name;
    EXPECT_EQ(r.first->context_b.front().text, expected);
  }
  // What the table's rows give today.
  SyntheticRank a, b;
  a.all_reduce(0, 1, 7, 1, 2, 3), a.gemm(0, 1, 9, 1, 2);
  b.all_reduce(0, 1, 7, 1, 2, 3), b.gemm(0, 1, 9, 1, 2), b.kernel(0, 1, "extra", 1, 2);
  RankResult r = diff_records(a, b);
  ASSERT_TRUE(r.first);
  ASSERT_GE(r.first->context_b.size(), 2u);
  EXPECT_EQ(r.first->context_b[0].text, "collective ncclAllReduce comm 3 #7");
  EXPECT_EQ(r.first->context_b[1].text, "gemm cublasLtMatmul algo 9");
}

}  // namespace
}  // namespace lockstep::tools
