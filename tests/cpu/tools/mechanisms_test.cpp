// The table of known mechanisms (tools/why/mechanisms.def) against real kernel names: the sample
// traces' (only the planted atomic matches), PyTorch's, Triton's, XLA's; GEMM configurations and
// collectives; and the line under the culprit of the sample pair, through the built binary.
#include "tools/why/mechanisms.h"

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "trace/reader.h"
#include "trace/record.h"

namespace lockstep::tools {
namespace {

std::string matched(std::string_view kind, std::string_view name,
                    std::span<const uint64_t> fields = {}) {
  const auto m = match_mechanism(kind, name, fields);
  return m ? std::string(m->id) : "none";
}

TEST(Mechanisms, EveryRowHasItsOwnIdAndAPatternThatCompiles) {
  const auto ids = mechanism_ids();
  EXPECT_GE(ids.size(), 15u);
  EXPECT_EQ(std::set<std::string_view>(ids.begin(), ids.end()).size(), ids.size());
  EXPECT_NO_THROW(matched("kernel", "x"));  // compiles every row
}

// Of the sample traces' kernels (the cuda example on the H200) only the planted atomic reduction
// matches: the table names no deterministic kernel.
TEST(Mechanisms, InTheSampleTracesOnlyThePlantedAtomicMatches) {
  auto reader = trace::TraceReader::open(std::string(LOCKSTEP_EXAMPLES_DIR) +
                                         "/traces/cuda-atomic-full-1/host-vm-pid-779.lstrace");
  std::set<std::string> kernels;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind == trace::RecordKind::Kernel) kernels.insert(std::string(reader->string(r.name)));
    return true;
  });
  ASSERT_GE(kernels.size(), 10u);
  for (const std::string& k : kernels)
    EXPECT_EQ(matched("kernel", k), k.starts_with("planted_atomic") ? "NamedAtomic" : "none") << k;
}

TEST(Mechanisms, PyTorchsNondeterministicOpsAreKnownByTheirKernels) {
  EXPECT_EQ(matched("kernel",
                    "void at::native::_scatter_gather_elementwise_kernel<128, 8, "
                    "at::native::_cuda_scatter_gather_internal_kernel<true, float, long>::"
                    "operator()<at::native::ReduceAdd>(at::TensorIterator&, long, long, "
                    "at::native::ReduceAdd const&)::{lambda(int)#1}>(int, ...)"),
            "ScatterAdd");
  EXPECT_EQ(matched("kernel",
                    "void at::native::indexFuncLargeIndex<float, long, unsigned int, 2, 2, -2, "
                    "true, at::native::ReduceAdd>(at::cuda::detail::TensorInfo<float, unsigned "
                    "int>, ...)"),
            "IndexAdd");
  EXPECT_EQ(matched("kernel",
                    "void at::native::(anonymous namespace)::embedding_backward_feature_kernel"
                    "<float, float, long>(long const*, float const*, float*, int, long, int, int)"),
            "EmbeddingBackward");
  EXPECT_EQ(matched("kernel",
                    "void at::native::(anonymous namespace)::atomic_adaptive_average_gradinput"
                    "<float>(float*, float const*, int, int, int, int, long, long, long)"),
            "PoolingBackward");
  EXPECT_EQ(matched("kernel",
                    "void at::native::tensor_kernel_scan_innermost_dim<float, 16, 32>(float*, "
                    "float const*, unsigned int, unsigned int, float, ...)"),
            "Scan");
}

TEST(Mechanisms, DeterministicPyTorchKernelsMatchNothing) {
  for (const char* name :
       {"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
        "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
        "at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::"
        "operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4> >"
        "(...)",
        "void at::native::_scatter_gather_elementwise_kernel<128, 8, "
        "at::native::_cuda_scatter_gather_internal_kernel<false, float, long>::operator()"
        "<at::native::TensorAssign>(...)::{lambda(int)#1}>(int, ...)",
        "void at::native::(anonymous namespace)::adaptive_average_gradinput<float>(float*, "
        "float const*, int, int, int, int)",
        "loop_add_fusion"})
    EXPECT_EQ(matched("kernel", name), "none") << name;
}

TEST(Mechanisms, TritonKernelsSayWhatTheirNameTellsAndWhatItCannot) {
  EXPECT_EQ(matched("kernel", "triton_poi_fused_index_put_new_zeros_0"), "InductorAtomic");
  EXPECT_EQ(matched("kernel", "triton_poi_fused_embedding_dense_backward_3"), "InductorAtomic");
  const auto unknown = match_mechanism("kernel", "triton_red_fused__log_softmax_0", {});
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->id, "TritonUnknown");
  EXPECT_NE(unknown->what.find("cannot be known from its name"), std::string_view::npos);
}

TEST(Mechanisms, XlasScatterIsKnownAndItsFlagNamed) {
  const auto m = match_mechanism("kernel", "loop_scatter_fusion", {});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->id, "XlaScatter");
  EXPECT_NE(m->fix.find("--xla_gpu_deterministic_ops"), std::string_view::npos);
  EXPECT_EQ(matched("kernel", "input_scatter_fusion_2"), "XlaScatter");
  EXPECT_EQ(matched("kernel", "scatter.3"), "XlaScatter");
  // A job's own Triton kernel with "scatter" in its name is no XLA scatter: its atomics are.
  EXPECT_EQ(matched("kernel", "scatter_rows_atomic"), "NamedAtomic");
}

TEST(Mechanisms, ASplitKGemmWithAnInPlaceReductionIsTheAtomicSplitK) {
  std::vector<uint64_t> fields(trace::fields::Gemm::kCount, 0);
  fields[trace::fields::Gemm::algo] = 21 | uint64_t{4} << 48;  // split-K 4
  fields[trace::fields::Gemm::reduction_scheme] = 1;           // in place
  EXPECT_EQ(mechanism_subject("gemm", "cublasLtMatmul", fields),
            "cublasLtMatmul split-K 4 reduction in-place");
  EXPECT_EQ(matched("gemm", "cublasLtMatmul", fields), "LtSplitKInPlace");
  fields[trace::fields::Gemm::reduction_scheme] = 2;  // in a workspace: another row
  EXPECT_EQ(matched("gemm", "cublasLtMatmul", fields), "CublasStreams");
}

TEST(Mechanisms, AReducingCollectiveIsNcclsOrderAndAGatherIsNothing) {
  EXPECT_EQ(matched("collective", "ncclAllReduce"), "NcclReduction");
  EXPECT_EQ(matched("collective", "ncclAllGather"), "none");
  EXPECT_EQ(matched("memcpy", "cudaMemcpyAsync"), "none");
}

std::string run(const std::string& args) {
  const std::string out = ::testing::TempDir() + "mechanisms-cli.txt";
  const int status = std::system((std::string(LOCKSTEP_CLI) + " " + args + " > " + out).c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << args;
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The sample pair with the planted atomic: the mechanism line right under the culprit, and the
// culprit's "mechanism" member in JSON.
TEST(Mechanisms, TheDiffPrintsTheMechanismUnderTheCulprit) {
  const std::string traces = std::string(LOCKSTEP_EXAMPLES_DIR) + "/traces/";
  const std::string pair = traces + "cuda-atomic-full-1 " + traces + "cuda-atomic-full-2";
  const std::string text = run("diff " + pair);
  const size_t culprit = text.find("culprit  rank 0");
  ASSERT_NE(culprit, std::string::npos) << text;
  const size_t line = text.find("mechanism: the kernel's name says it uses atomics", culprit);
  EXPECT_NE(line, std::string::npos) << text;
  EXPECT_LT(line, text.find("first divergence per rank")) << text;
  EXPECT_NE(text.find("fix: reduce in a fixed order"), std::string::npos) << text;
  EXPECT_NE(text.find("kernel planted_atomic_sum_squares #1"), std::string::npos)
      << "the culprit by its short name:\n"
      << text;
  const std::string json = run("diff --json " + pair);
  EXPECT_NE(json.find("\"id\": \"NamedAtomic\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"name_short\": \"planted_atomic_sum_squares\""), std::string::npos);
}

}  // namespace
}  // namespace lockstep::tools
