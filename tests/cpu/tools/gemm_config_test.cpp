// A structural GEMM difference says what differs in the algorithm cuBLASLt chose
// (tools/why/gemm_config.h), through the diff engine on synthetic records.
#include "tools/why/gemm_config.h"

#include <gtest/gtest.h>

#include "tests/cpu/tools/synthetic.h"
#include "tools/diff/memory_input.h"

namespace lockstep::tools {
namespace {

using testing::SyntheticRank;
using F = trace::fields::Gemm;

constexpr uint64_t packed(uint64_t id, uint64_t tile, uint64_t stages, uint64_t split_k) {
  return id | tile << 16 | stages << 32 | split_k << 48;
}

RankResult diff_one(const SyntheticRank& a, const SyntheticRank& b) {
  MemoryRankInput ia(a.records, a.strings, a.steps(true)), ib(b.records, b.strings, b.steps(true));
  return diff_rank(0, ia, ib, {});
}

TEST(GemmConfig, ASplitKChangeSaysTheSplitAndTheReductionInWords) {
  SyntheticRank a, b;
  a.gemm(0, 1, packed(21, 18, 8, 1), 1, 2);
  b.gemm(0, 1, packed(21, 18, 8, 4), 1, 9).fields[F::reduction_scheme] = 1;
  const RankResult r = diff_one(a, b);
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->structural, StructuralKind::Fields);
  EXPECT_EQ(r.first->detail, "split-K 1 vs 4, reduction none vs in-place");
}

TEST(GemmConfig, OnlyThePartsThatDifferAreNamed) {
  const std::vector<uint64_t> a(21, 0);
  std::vector<uint64_t> b = a;
  b[F::algo] = packed(0, 20, 0, 0);
  b[F::cta_swizzling] = 1;
  EXPECT_EQ(gemm_fields_difference("cublasLtMatmul", a, b), "tile 0 vs 20, cta_swizzling 0 vs 1");
  EXPECT_EQ(gemm_fields_difference("cublasLtMatmul", a, a), "");
}

TEST(GemmConfig, AHeuristicChoiceAgainstAGivenAlgorithmShowsBoth) {
  std::vector<uint64_t> a(21, 0), b(21, 0);
  a[F::algo] = UINT64_MAX;
  b[F::algo] = packed(6, 18, 8, 1);
  EXPECT_EQ(gemm_fields_difference("cublasLtMatmul", a, b),
            "algorithm heuristic vs id6/tile18/stages8/splitk1");
}

TEST(GemmConfig, ClassicCublasKeepsItsAlgorithmEnumAsIs) {
  std::vector<uint64_t> a(21, 0), b(21, 0);
  a[F::algo] = UINT64_MAX;  // CUBLAS_GEMM_DEFAULT, sign-extended
  b[F::algo] = 99;          // CUBLAS_GEMM_DEFAULT_TENSOR_OP
  a[F::m] = 64, b[F::m] = 128;
  EXPECT_EQ(gemm_fields_difference("cublasGemmEx", a, b),
            "m 64 vs 128, algo CUBLAS_GEMM_DEFAULT vs CUBLAS_GEMM_DEFAULT_TENSOR_OP");
}

}  // namespace
}  // namespace lockstep::tools
