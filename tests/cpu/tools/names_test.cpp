// Readable names (tools/why/names.h): real demangled kernel names, from the sample traces and
// from the H200 runs of the PyTorch examples, shortened; buffer labels in words.
#include "tools/why/names.h"

#include <set>

#include <gtest/gtest.h>

#include "trace/reader.h"

namespace lockstep::tools {
namespace {

struct Case {
  const char* full;
  const char* short_name;
};

// PyTorch 2.11 / CUDA 13 kernels as the shim recorded them on the H200 (the scatter_add_,
// the GPT example's index_add_, its elementwise, reduction and optimizer kernels), Triton,
// CUTLASS and cuBLAS kernels.
const Case kCases[] = {
    {"void at::native::_scatter_gather_elementwise_kernel<128, 8, "
     "at::native::_cuda_scatter_gather_internal_kernel<true, float, long>::operator()"
     "<at::native::ReduceAdd>(at::TensorIterator&, long, long, at::native::ReduceAdd const&)::"
     "{lambda(int)#1}>(int, at::native::_cuda_scatter_gather_internal_kernel<true, float, long>::"
     "operator()<at::native::ReduceAdd>(at::TensorIterator&, long, long, at::native::ReduceAdd "
     "const&)::{lambda(int)#1})",
     "_scatter_gather_elementwise_kernel<ReduceAdd>"},
    {"void at::native::indexFuncLargeIndex<float, long, unsigned int, 2, 2, -2, true, "
     "at::native::ReduceAdd>(at::cuda::detail::TensorInfo<float, unsigned int>, "
     "at::cuda::detail::TensorInfo<float const, unsigned int>, at::cuda::detail::TensorInfo<long "
     "const, unsigned int>, int, int, unsigned int, unsigned int, long, long, long, "
     "at::native::ReduceAdd const&, float)",
     "indexFuncLargeIndex<ReduceAdd>"},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
     "vectorized_elementwise_kernel<CUDAFunctor_add>"},
    {"void at::native::vectorized_elementwise_kernel<8, at::native::FillFunctor<c10::BFloat16>, "
     "std::array<char*, 1ul> >(int, at::native::FillFunctor<c10::BFloat16>, std::array<char*, "
     "1ul>)",
     "vectorized_elementwise_kernel<FillFunctor>"},
    {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
     "at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()"
     "(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4> >"
     "(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor"
     "<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
     "unsigned int, float, 4, 4>)",
     "reduce_kernel<sum_functor>"},
    {"void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast"
     "<at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor"
     "<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, "
     "at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1}>(int, "
     "at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, "
     "at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, "
     "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor"
     "<float> > const&)::{lambda(int)#1})",
     "elementwise_kernel<MulFunctor>"},
    {"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
     "namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor"
     "<float, 4, (at::native::ADAM_MODE)1, false>, float*, float, float, float, float, float, "
     "float, bool, float*, float*>(at::native::(anonymous namespace)::TensorListMetadata<4>, "
     "at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, "
     "false>, float*, float, float, float, float, float, float, bool, float*, float*)",
     "multi_tensor_apply_kernel<FusedAdamMathFunctor>"},
    {"void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>"
     "(cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4::Params)",
     "Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>"},
    {"triton_poi_fused_index_put_new_zeros_0", "triton_poi_fused_index_put_new_zeros_0"},
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
     "segment_k_off_kernel__5x_cublas",
     "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
     "segment_k_off_kernel__5x_cublas"},
};

TEST(Names, RealKernelNamesAreShortenedToTheFunctionAndItsOperator) {
  for (const Case& c : kCases) EXPECT_EQ(short_kernel_name(c.full), c.short_name) << c.full;
}

// Every kernel of the sample traces (examples/traces: the cuda example on the H200) is a plain
// function: its short name is the name before its parameter list, and no two collide.
TEST(Names, TheSampleTracesKernelsReadAsTheirFunctionNames) {
  auto reader = trace::TraceReader::open(std::string(LOCKSTEP_EXAMPLES_DIR) +
                                         "/traces/cuda-atomic-full-1/host-vm-pid-779.lstrace");
  std::set<std::string> full, shortened;
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind != trace::RecordKind::Kernel) return true;
    const std::string name(reader->string(r.name));
    if (full.insert(name).second) {
      const std::string s = short_kernel_name(name);
      EXPECT_EQ(s, name.substr(0, name.find('('))) << name;
      shortened.insert(s);
    }
    return true;
  });
  EXPECT_GE(full.size(), 10u);
  EXPECT_EQ(shortened.size(), full.size());
  EXPECT_TRUE(shortened.count("planted_atomic_sum_squares"));
}

TEST(Names, OnlyKernelsAreShortenedAndVerboseKeepsThemWhole) {
  EXPECT_EQ(display_name("gemm", "cublasLtMatmul"), "cublasLtMatmul");
  EXPECT_EQ(display_name("kernel", kCases[1].full), "indexFuncLargeIndex<ReduceAdd>");
  set_full_names(true);
  EXPECT_EQ(display_name("kernel", kCases[1].full), kCases[1].full);
  set_full_names(false);
}

// A short name is at most kShortNameBytes and an ellipsis, whatever the name's form (a plain
// identifier, one with an operator in its template arguments), and never cut inside a UTF-8
// sequence; a name at the bound is kept whole.
TEST(Names, AShortNameIsBoundedWithoutSplittingACharacter) {
  const std::string plain(1u << 20, 'k');
  EXPECT_EQ(short_kernel_name(plain), std::string(kShortNameBytes, 'k') + "\u2026");
  EXPECT_EQ(short_kernel_name(plain + "(float*)"), std::string(kShortNameBytes, 'k') + "\u2026");
  const std::string op(4000, 'f');
  const std::string shortened = short_kernel_name("void run<" + op + ">(int)");
  EXPECT_EQ(shortened, "run<" + op.substr(0, kShortNameBytes - 4) + "\u2026");
  // A name that does not parse (it ends in no identifier) is bounded as it is; its "é" (2
  // bytes) straddling the bound is cut before, not inside.
  const std::string accented = std::string(kShortNameBytes - 1, 'k') + "\u00e9" + " ...";
  EXPECT_EQ(short_kernel_name(accented), std::string(kShortNameBytes - 1, 'k') + "\u2026");
  const std::string at_bound(kShortNameBytes, 'k');
  EXPECT_EQ(short_kernel_name(at_bound), at_bound);
}

TEST(Names, BufferLabelsReadInWords) {
  EXPECT_EQ(buffer_words("kernel", "arg1+632"), "parameter 1 at +632 B");
  EXPECT_EQ(buffer_words("kernel", "arg0"), "parameter 0");
  EXPECT_EQ(buffer_words("graph", "n3.arg2+8"), "node 3 parameter 2 at +8 B");
  EXPECT_EQ(buffer_words("gemm", "A"), "operand A");
  EXPECT_EQ(buffer_words("gemm", "B_scale"), "scale of B");
  EXPECT_EQ(buffer_words("gemm", "D_amax"), "amax of D");
  EXPECT_EQ(buffer_words("collective", "send"), "send buffer");
  EXPECT_EQ(buffer_words("collective", "recv"), "receive buffer");
  EXPECT_EQ(buffer_words("memcpy", "host src"), "host source");
  EXPECT_EQ(buffer_words("kernel", "weird"), "weird");
}

}  // namespace
}  // namespace lockstep::tools
