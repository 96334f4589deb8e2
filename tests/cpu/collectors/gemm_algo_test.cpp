// cuBLASLt's chosen algorithm decoded into the Gemm record (collectors/gemm.cpp): every
// configuration attribute at its own width, read once per algorithm's bytes.
#include "tests/cpu/collectors/runtime_harness.h"

namespace lockstep::collectors {
namespace {

using F = trace::fields::Gemm;

// The attributes of a split-K algorithm that adds its partial sums in place (with atomics).
void split_k_in_place(FakeAttributes& algo) {
  algo.set<int32_t>(CUBLASLT_ALGO_CONFIG_ID, 21);
  algo.set<uint32_t>(CUBLASLT_ALGO_CONFIG_TILE_ID, 18);
  algo.set<int32_t>(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, 4);
  algo.set<uint32_t>(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, CUBLASLT_REDUCTION_SCHEME_INPLACE);
  algo.set<uint32_t>(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, 1);
  algo.set<uint32_t>(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, 3);
  algo.set<uint32_t>(CUBLASLT_ALGO_CONFIG_STAGES_ID, 8);
  algo.set<uint16_t>(CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, 5);
  algo.set<uint16_t>(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, 2);
}

TEST_F(RuntimeTest, ALtAlgorithmIsRecordedPartByPartAndReadOncePerItsBytes) {
  ChildResult child = run_child(env("broad"), [] {
    const CUdeviceptr base = 0x7f0000000000;
    on_alloc(base, 1 << 22);
    static FakeAttributes desc, a, b, d, algo_attrs;
    desc.set<int32_t>(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, CUBLAS_COMPUTE_32F);
    a = layout(CUDA_R_16BF, 64, 32, 64);
    b = layout(CUDA_R_16BF, 32, 16, 32);
    d = layout(CUDA_R_16BF, 64, 16, 64);
    split_k_in_place(algo_attrs);
    static const cublasLtMatmulAlgo_t algo = fake_algo(&algo_attrs);
    LtMatmul mm =
        fake_lt(&desc, base + 0x40000, &a, base + 0x80000, &b, 0, nullptr, base + 0x100000, &d);
    mm.algo = &algo;
    g_algo_reads = 0;
    for (int i = 0; i < 3; ++i) lt_matmul_end(lt_matmul_begin(mm), 0);
    if (g_algo_reads != 9) {  // nine attributes, once: the later GEMMs know them by the bytes
      std::fprintf(stderr, "algorithm reads: %d, expected 9\n", g_algo_reads);
      std::fflush(stderr);
      std::_Exit(9);
    }
  });
  ASSERT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.stderr_text;
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  int gemms = 0;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind != trace::RecordKind::Gemm) return true;
    ++gemms;
    EXPECT_EQ(r.fields[F::algo], 21u | 18u << 16 | uint64_t{8} << 32 | uint64_t{4} << 48);
    EXPECT_EQ(r.fields[F::reduction_scheme], uint64_t{CUBLASLT_REDUCTION_SCHEME_INPLACE});
    EXPECT_EQ(r.fields[F::cta_swizzling], 1u);
    EXPECT_EQ(r.fields[F::custom_option], 3u);
    EXPECT_EQ(r.fields[F::inner_shape], 5u);
    EXPECT_EQ(r.fields[F::cluster_shape], 2u);
    return true;
  });
  EXPECT_EQ(gemms, 3);
}

TEST_F(RuntimeTest, ALtCallWithoutAnAlgorithmIsTheHeuristicsWithNoParts) {
  ChildResult child = run_child(env("broad"), [] {
    const CUdeviceptr base = 0x7f0000000000;
    on_alloc(base, 1 << 22);
    static FakeAttributes desc, a, b, d;
    desc.set<int32_t>(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, CUBLAS_COMPUTE_32F);
    a = layout(CUDA_R_16BF, 64, 32, 64);
    b = layout(CUDA_R_16BF, 32, 16, 32);
    d = layout(CUDA_R_16BF, 64, 16, 64);
    lt_matmul_end(lt_matmul_begin(fake_lt(&desc, base + 0x40000, &a, base + 0x80000, &b, 0, nullptr,
                                          base + 0x100000, &d)),
                  0);
  });
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  int gemms = 0;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind != trace::RecordKind::Gemm) return true;
    ++gemms;
    EXPECT_EQ(r.fields[F::algo], UINT64_MAX);
    EXPECT_EQ(r.fields[F::reduction_scheme], 0u);
    return true;
  });
  EXPECT_EQ(gemms, 1);
}

}  // namespace
}  // namespace lockstep::collectors
