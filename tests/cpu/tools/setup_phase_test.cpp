// The set-up phase and the autotuner's choices (tools/diff/setup_phase.h), on in-memory runs:
// a JAX-like job whose work before its first numbered step (compilation, autotuning) spans
// another number of trace steps in each run, and whose autotuner may pick another GEMM
// algorithm in each.
#include <gtest/gtest.h>

#include "tests/cpu/tools/synthetic.h"
#include "tools/diff/alignment.h"
#include "tools/diff/engine.h"
#include "tools/diff/memory_input.h"
#include "tools/report.h"

namespace lockstep::tools {
namespace {

using testing::SyntheticRank;

// Set-up work in trace steps first..last (a compiler's small copies ended steps in between),
// each step one of `kernels` on stream 3 (the autotuner's).
void setup_steps(SyntheticRank& r, uint32_t first, uint32_t last,
                 const std::vector<std::string>& kernels) {
  size_t k = 0;
  for (uint32_t s = first; s <= last; ++s, ++k)
    r.kernel(s, 3, kernels[k % kernels.size()], 10 + k, 20 + k);
}

// The job's step n in trace step `step`: its marker, a forward kernel, a GEMM with `algo`, an
// optimizer kernel, the loss.
void numbered_step(SyntheticRank& r, uint32_t step, uint64_t n, uint64_t algo = 21) {
  r.marker(step, n);
  r.kernel(step, 1, "forward", 100 * n + 1, 100 * n + 2);
  r.gemm(step, 1, algo, 100 * n + 2, 100 * n + 3);
  r.kernel(step, 1, "adam", 100 * n + 3, 100 * n + 4);
  r.metric(step, 2.5f - n * 0.1f);
}

// Text without colour: a style for a file that is no terminal.
Style plain() {
  static FILE* file = std::tmpfile();
  return Style(file);
}

DiffResult diff(const SyntheticRank& a, const SyntheticRank& b) {
  std::vector<RankPair> pairs = {
      {0,
       [&] { return std::unique_ptr<RankInput>(new MemoryRankInput(a.records, a.strings, a.steps())); },
       [&] { return std::unique_ptr<RankInput>(new MemoryRankInput(b.records, b.strings, b.steps())); }}};
  DiffOptions options;
  options.align = AlignMode::Auto;
  return diff_ranks(pairs, options);
}

TEST(SetupPhase, SetUpStepsOfDifferentCountsPairAsOnePhase) {
  auto steps = [](std::initializer_list<int64_t> numbers) {
    std::vector<StepInfo> out;
    uint32_t step = 0;
    for (int64_t n : numbers) {
      StepInfo info;
      info.step = step++;
      info.record_count = 10;
      info.has_summary = true;
      if (n >= 0) info.job_step = static_cast<uint64_t>(n);
      out.push_back(info);
    }
    return out;
  };
  const StepAlignment a = align_steps(steps({-1, -1, -1, 1, 2}), steps({-1, 1, 2}), AlignMode::Auto);
  ASSERT_TRUE(a.by_number());
  ASSERT_TRUE(a.setup);
  EXPECT_EQ(a.setup->a.first, 0u);
  EXPECT_EQ(a.setup->a.last, 2u);
  EXPECT_EQ(a.setup->a.records, 30u);
  EXPECT_EQ(a.setup->b.last, 0u);
  ASSERT_EQ(a.pairs.size(), 3u);  // the phase, then steps 1 and 2
  EXPECT_EQ(a.pairs[0].a, 0u);
  EXPECT_EQ(a.pairs[0].b, 0u);
  EXPECT_EQ(a.pairs[1].a, 3u);
  EXPECT_EQ(a.pairs[1].b, 1u);
  EXPECT_TRUE(a.unpaired.empty());
}

TEST(SetupPhase, TheSameSetUpSplitIntoOtherStepsIsEqualByItsSummaries) {
  SyntheticRank a, b;
  setup_steps(a, 0, 2, {"init", "compile_copy", "warmup"});
  for (const char* k : {"init", "compile_copy", "warmup"}) b.kernel(0, 3, k, 0, 0);
  // The same kernels with the same fingerprints, in one trace step instead of three.
  for (size_t i = 0; i < 3; ++i) b.records[i].buffers = a.records[i].buffers;
  for (uint64_t n = 1; n <= 3; ++n) numbered_step(a, 2 + n, n), numbered_step(b, n, n);
  const DiffResult r = diff(a, b);
  EXPECT_EQ(verdict_of(r), Verdict::Identical) << coverage_line(r);
  ASSERT_TRUE(r.setup);
  EXPECT_TRUE(r.setup->equal_by_summary);
  EXPECT_TRUE(r.choices.empty());
}

TEST(SetupPhase, ASetUpDifferenceIsReportedApartAndIsNotTheVerdicts) {
  SyntheticRank a, b;
  setup_steps(a, 0, 3, {"RedzoneAllocatorKernel", "gemm_candidate"});
  setup_steps(b, 0, 1, {"RedzoneAllocatorKernel"});
  for (uint64_t n = 1; n <= 3; ++n) numbered_step(a, 3 + n, n), numbered_step(b, 1 + n, n);
  const DiffResult r = diff(a, b);
  // The training steps are bit-identical: that is the verdict.
  EXPECT_EQ(verdict_of(r), Verdict::Identical) << coverage_line(r);
  EXPECT_TRUE(r.first_by_epoch.empty());
  ASSERT_TRUE(r.setup);
  EXPECT_FALSE(r.setup->identical());
  EXPECT_GT(r.setup->differences, 0u);
  ASSERT_TRUE(r.setup->first);
  EXPECT_EQ(r.setup->a.last, 3u);
  EXPECT_EQ(r.setup->b.last, 1u);
  const std::string text = diff_text(r, DiffContext{"a", "b", 1, {0}, 0}, plain());
  EXPECT_NE(text.find("set-up before the first step (trace steps 0-3 of A, 0-1 of B"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("not part of the verdict"), std::string::npos) << text;
  // The autotuner's benchmark kernels that only run A ran are named as a choice.
  ASSERT_FALSE(r.choices.empty());
  EXPECT_EQ(r.choices[0].what, "kernels only one run ran");
  EXPECT_NE(r.choices[0].a.find("gemm_candidate"), std::string::npos) << r.choices[0].a;
  EXPECT_EQ(r.choices[0].b, "none");
  const nlohmann::json j = diff_json(r, DiffContext{"a", "b", 1, {0}, 0});
  EXPECT_EQ(j["setup"]["phase"]["identical"], false);
  EXPECT_EQ(j["setup"]["phase"]["trace_steps_a"], (nlohmann::json{0, 3}));
  EXPECT_EQ(j["setup"]["autotune"].size(), 1u);
}

TEST(SetupPhase, ADifferentGemmAlgorithmOpensTheReportWithBothChoicesAndTheFix) {
  SyntheticRank a, b;
  setup_steps(a, 0, 0, {"input_concatenate_fusion"});
  setup_steps(b, 0, 0, {"input_concatenate_fusion"});
  for (uint64_t n = 1; n <= 3; ++n) numbered_step(a, n, n, 21), numbered_step(b, n, n, 7);
  const DiffResult r = diff(a, b);
  EXPECT_EQ(verdict_of(r), Verdict::Divergent);  // the GEMMs differ: a real difference
  ASSERT_EQ(r.choices.size(), 1u);
  EXPECT_EQ(r.choices[0].what, "gemm cublasLtMatmul m=64 n=64 k=64 batch=0");
  EXPECT_NE(r.choices[0].a, r.choices[0].b);
  const std::string text = diff_text(r, DiffContext{"a", "b", 1, {0}, 0}, plain());
  const size_t autotune = text.find("autotuning chose differently");
  ASSERT_NE(autotune, std::string::npos) << text;
  // First: before the coverage line and every divergence.
  EXPECT_LT(autotune, text.find("compared set-up and steps 1-3")) << text;
  EXPECT_LT(autotune, text.find("culprit")) << text;
  EXPECT_NE(text.find("A " + r.choices[0].a + ", B " + r.choices[0].b), std::string::npos) << text;
  EXPECT_NE(text.find("fix: XLA: XLA_FLAGS=\"--xla_gpu_autotune_level=0"), std::string::npos)
      << text;
}

TEST(SetupPhase, TheFixNamesInductorForTritonKernelsAndXlaForFusions) {
  EXPECT_EQ(autotune_fix({{"kernel triton_poi_fused_add_0", "grid 1x1x1", "grid 2x1x1"}})
                .rfind("torch.compile", 0),
            0u);
  EXPECT_EQ(autotune_fix({{"kernel loop_add_fusion", "grid 1x1x1", "grid 2x1x1"}}).rfind("XLA", 0),
            0u);
  const std::string both = autotune_fix({{"gemm cublasLtMatmul m=1", "algo 1", "algo 2"}});
  EXPECT_NE(both.find("XLA"), std::string::npos);
  EXPECT_NE(both.find("TORCHINDUCTOR_CACHE_DIR"), std::string::npos);
}

}  // namespace
}  // namespace lockstep::tools
