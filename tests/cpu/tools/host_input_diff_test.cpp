// Host inputs in the diff (issue #31): a first divergence at a copy from host memory whose host
// source (fingerprinted on the CPU, trace::kHostSourceLabel) differs is classified host input,
// in text and JSON, never origin: the difference entered from the host.
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/cpu/tools/synthetic.h"
#include "tools/diff/engine.h"
#include "tools/diff/memory_input.h"
#include "tools/report.h"

namespace lockstep::tools {
namespace {

using testing::SyntheticRank;

// A step that copies a host-side value (an FP8 scale) to the device and computes with it.
void step_with_copy(SyntheticRank& r, uint32_t step, uint64_t host_fp, uint64_t dst_fp) {
  r.host_copy(step, 1, host_fp, dst_fp);
  r.kernel(step, 1, "scale_kernel", dst_fp, dst_fp + 1);
  r.gemm(step, 1, 3, dst_fp + 1, dst_fp + 2);
}

DiffResult diff(const SyntheticRank& a, const SyntheticRank& b, AlignMode align) {
  std::vector<RankPair> pairs = {
      {0,
       [&] { return std::unique_ptr<RankInput>(std::make_unique<MemoryRankInput>(
                 a.records, a.strings, a.steps())); },
       [&] { return std::unique_ptr<RankInput>(std::make_unique<MemoryRankInput>(
                 b.records, b.strings, b.steps())); }}};
  DiffOptions options;
  options.align = align;
  return diff_ranks(pairs, options);
}

const DiffContext kContext{"a", "b", 1, {0}, 0.0};

// Four steps; from step 2 on, run B's host side holds another value (a scale changed on the
// CPU), so its copy's host source and everything computed from it differ.
DiffResult host_value_changed_from_step_2() {
  SyntheticRank a, b;
  for (uint32_t s = 0; s < 4; ++s) {
    step_with_copy(a, s, 100 + s, 200 + s * 10);
    step_with_copy(b, s, s >= 2 ? 900 + s : 100 + s, s >= 2 ? 700 + s * 10 : 200 + s * 10);
  }
  return diff(a, b, AlignMode::Ordinal);
}

TEST(HostInputDiff, ACopyWhoseHostBytesDifferIsAHostInputNotAnOrigin) {
  const DiffResult r = host_value_changed_from_step_2();
  ASSERT_TRUE(r.culprit);
  EXPECT_EQ(r.culprit->classification, Classification::HostInput);
  EXPECT_EQ(r.culprit->step, 2u);
  EXPECT_EQ(r.culprit->detail,
            "the bytes copied from host memory differ (step 2, cudaMemcpyAsync, 4 bytes): the "
            "difference entered from the host");
  ASSERT_TRUE(r.culprit->buffer);
  EXPECT_EQ(r.culprit->buffer->label, trace::kHostSourceLabel);
  EXPECT_EQ(r.culprit->buffer->role, "in");
  FILE* not_a_terminal = std::fopen("/dev/null", "w");  // no colour codes in the text
  const std::string text = diff_text(r, kContext, Style(not_a_terminal));
  std::fclose(not_a_terminal);
  EXPECT_NE(text.find("host input: the bytes copied from host memory differ (step 2"),
            std::string::npos)
      << text;
  const nlohmann::json j = diff_json(r, kContext);
  EXPECT_EQ(j["culprit"]["classification"], "host_input");
  EXPECT_EQ(j["per_rank"][0]["classification"], "host_input");
}

TEST(HostInputDiff, TheOpsThatReadTheHostInputAreListedAsItsReceivers) {
  const DiffResult r = host_value_changed_from_step_2();
  ASSERT_TRUE(r.culprit);
  ASSERT_EQ(r.culprit->classification, Classification::HostInput);
  // Step 2's kernel read the copy's destination, and the GEMM the kernel's output; step 3's
  // copy is a host input of its own, not a receiver.
  ASSERT_EQ(r.culprit_receivers.size(), 3u);
  EXPECT_EQ(r.culprit_receivers[0].name, "scale_kernel");
  EXPECT_EQ(r.culprit_receivers[0].step, 2u);
  EXPECT_EQ(r.culprit_receivers[1].kind, "gemm");
  EXPECT_EQ(r.culprit_receivers[1].classification, Classification::Receiver);
  EXPECT_EQ(r.culprit_receivers[2].step, 3u);
  EXPECT_EQ(r.culprit_receivers[2].name, "scale_kernel");
  FILE* not_a_terminal = std::fopen("/dev/null", "w");
  const std::string text = diff_text(r, kContext, Style(not_a_terminal));
  std::fclose(not_a_terminal);
  EXPECT_NE(text.find("then step 2: gemm cublasLtMatmul #1 stream 1, input 'A' differs (receiver)"),
            std::string::npos)
      << text;
  const nlohmann::json j = diff_json(r, kContext);
  ASSERT_EQ(j["culprit_receivers"].size(), 3u);
  EXPECT_EQ(j["culprit_receivers"][1]["classification"], "receiver");
}

TEST(HostInputDiff, AnIdenticalPairHasNoReceivers) {
  SyntheticRank a, b;
  step_with_copy(a, 0, 100, 200);
  step_with_copy(b, 0, 100, 200);
  const DiffResult r = diff(a, b, AlignMode::Ordinal);
  EXPECT_FALSE(r.culprit);
  EXPECT_TRUE(r.culprit_receivers.empty());
  EXPECT_TRUE(diff_json(r, kContext)["culprit_receivers"].empty());
}

TEST(HostInputDiff, ACopyWhoseHostBytesMatchedButWhoseDestinationDiffersStaysAnOrigin) {
  SyntheticRank a, b;
  step_with_copy(a, 0, 100, 200);
  step_with_copy(b, 0, 100, 201);  // the same host bytes arrived differently
  const DiffResult r = diff(a, b, AlignMode::Ordinal);
  ASSERT_TRUE(r.culprit);
  EXPECT_EQ(r.culprit->classification, Classification::Origin);
  EXPECT_EQ(r.culprit->buffer->label, "dst");
}

TEST(HostInputDiff, UnderNumberAlignmentTheDetailNamesTheJobsStep) {
  // A went straight through steps 0-3; B resumed at step 2 (its trace step 1).
  SyntheticRank a, b;
  a.kernel(0, 1, "setup", 1, 2);
  b.kernel(0, 1, "restore", 1, 3);
  for (uint32_t job = 0; job < 4; ++job) {
    a.marker(job + 1, job);
    step_with_copy(a, job + 1, 100 + job, 200 + job * 10);
    if (job < 2) continue;
    b.marker(job - 1, job);
    step_with_copy(b, job - 1, job == 3 ? 999 : 100 + job, job == 3 ? 777 : 200 + job * 10);
  }
  const DiffResult r = diff(a, b, AlignMode::Auto);
  ASSERT_TRUE(r.alignment.by_number());
  ASSERT_TRUE(r.culprit);
  EXPECT_EQ(r.culprit->classification, Classification::HostInput);
  EXPECT_EQ(r.culprit->job_step, std::optional<uint64_t>(3));
  EXPECT_EQ(r.culprit->step, 4u);
  EXPECT_EQ(r.culprit->step_b, 2u);
  EXPECT_EQ(r.culprit->detail,
            "the bytes copied from host memory differ (step 3, cudaMemcpyAsync, 4 bytes): the "
            "difference entered from the host");
  EXPECT_EQ(resume_verdict(r).rfind("resume not bit-exact: run B's first divergence after its "
                                    "restore is at step 3 (trace steps 4/2), rank 0: memcpy "
                                    "cudaMemcpyAsync #1 stream 1 (host input: ",
                                    0),
            0u)
      << resume_verdict(r);
}

// A step whose three input copies (x, y, an index table) two or three host threads put on one
// stream, as JAX's transfer threads do, in the order `order` names (indices into the three),
// then a kernel reading x whose output run B's nondeterminism changes (`planted`).
SyntheticRank copies_then_kernel(const std::vector<int>& order, std::vector<uint32_t> threads,
                                 bool planted, uint64_t y_host = 102) {
  SyntheticRank r;
  const uint64_t host[] = {101, y_host, 103}, dst[] = {101, y_host, 103},
                 bytes[] = {2 << 20, 2 << 20, 8 << 20};
  for (uint32_t step = 0; step < 2; ++step) {
    for (size_t k = 0; k < order.size(); ++k) {
      const int i = order[k];
      r.host_copy(step, 3, host[i], dst[i], bytes[i]).thread = threads[k];
    }
    r.kernel(step, 4, "gemm_fusion", 101, planted && step == 1 ? 999 : 500);
  }
  return r;
}

TEST(HostInputDiff, CopiesThatHostThreadsRaceToOneStreamPairByContentNotPosition) {
  // Run B's threads got there in another order: the same three copies, no host input differs;
  // the first divergence is the kernel B's nondeterminism changed.
  const DiffResult r = diff(copies_then_kernel({0, 1, 2}, {5, 2, 4}, false),
                            copies_then_kernel({1, 0, 2}, {2, 5, 4}, true), AlignMode::Ordinal);
  ASSERT_TRUE(r.culprit);
  EXPECT_EQ(r.culprit->classification, Classification::Origin) << r.culprit->detail;
  EXPECT_EQ(r.culprit->name, "gemm_fusion");
  EXPECT_EQ(r.culprit->step, 1u);
}

TEST(HostInputDiff, RacedCopiesPairByContentWhereTheStreamAlsoGainedAnOp) {
  // Run B's stream also holds a fourth copy in step 1 (the ops pair through their longest common
  // run, not position by position): the raced three still pair by content, and what differs is
  // the copy only B made, not a host input.
  SyntheticRank b = copies_then_kernel({1, 0, 2}, {2, 5, 4}, false);
  b.host_copy(1, 3, 555, 555, 64).thread = 2;
  const DiffResult r = diff(copies_then_kernel({0, 1, 2}, {5, 2, 4}, false), b,
                            AlignMode::Ordinal);
  ASSERT_TRUE(r.divergent);
  ASSERT_TRUE(r.culprit);
  EXPECT_EQ(r.culprit->classification, Classification::Structural) << r.culprit->detail;
  EXPECT_EQ(r.culprit->step, 1u);
}

TEST(HostInputDiff, CopiesOneThreadMadeInAnotherOrderStillPairByPosition) {
  // One thread's order is the program's: a swapped pair is two differing host inputs (at step
  // 1, the first whose records are compared: step 0's summaries match, order aside).
  const DiffResult r = diff(copies_then_kernel({0, 1, 2}, {1, 1, 1}, false),
                            copies_then_kernel({1, 0, 2}, {1, 1, 1}, true), AlignMode::Ordinal);
  ASSERT_TRUE(r.culprit);
  EXPECT_EQ(r.culprit->classification, Classification::HostInput);
  EXPECT_EQ(r.culprit->step, 1u);
}

TEST(HostInputDiff, ARacedCopyWhoseHostBytesDifferIsStillAHostInput) {
  // The threads' order differs and so do y's host bytes: not the same copies in another order,
  // so they pair by position and the host input is reported.
  const DiffResult r = diff(copies_then_kernel({0, 1, 2}, {5, 2, 4}, false),
                            copies_then_kernel({1, 0, 2}, {2, 5, 4}, false, 777),
                            AlignMode::Ordinal);
  ASSERT_TRUE(r.culprit);
  EXPECT_EQ(r.culprit->classification, Classification::HostInput);
  EXPECT_EQ(r.culprit->step, 0u);
}

}  // namespace
}  // namespace lockstep::tools
