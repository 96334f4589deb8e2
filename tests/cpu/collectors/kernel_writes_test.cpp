// Known whole-region writers (collectors/kernel_writes.h): PyTorch's contiguous fill, matched by
// its real demangled names and layouts; anything else is not a known writer.
#include "collectors/kernel_writes.h"

#include <cstring>

#include <gtest/gtest.h>

namespace lockstep::collectors {
namespace {

// (int N, FillFunctor<T>, std::array<char*, 1>) as cuFuncGetParamInfo gives it for T = float.
const std::vector<ParamInfo> kFillLayout{{0, 4}, {4, 4}, {8, 8}};
const std::vector<ParamInfo> kBf16FillLayout{{0, 4}, {4, 2}, {8, 8}};
constexpr const char* kFloatFill =
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)";
constexpr const char* kBf16Fill =
    "void at::native::vectorized_elementwise_kernel<8, at::native::FillFunctor<c10::BFloat16>, "
    "std::array<char*, 1ul> >(int, at::native::FillFunctor<c10::BFloat16>, std::array<char*, "
    "1ul>)";

TEST(KernelWrites, PyTorchContiguousFillsAreWholeWriters) {
  auto fill = whole_write_of(kFloatFill, kFillLayout);
  ASSERT_TRUE(fill.has_value());
  EXPECT_EQ(fill->count_param, 0u);
  EXPECT_EQ(fill->pointer_param, 2u);
  EXPECT_EQ(fill->element_bytes, 4u);
  auto bf16 = whole_write_of(kBf16Fill, kBf16FillLayout);
  ASSERT_TRUE(bf16.has_value());
  EXPECT_EQ(bf16->element_bytes, 2u);
}

TEST(KernelWrites, OtherKernelsAndOtherLayoutsAreNot) {
  // Strided fills (unrolled kernel with offset calculators), other functors, two outputs, an
  // unknown element type, a mismatched signature, and the right name with the wrong layout.
  for (const char* name : {
           "void at::native::unrolled_elementwise_kernel<at::native::FillFunctor<float>, "
           "std::array<char*, 1ul>, TrivialOffsetCalculator<0, unsigned int> >(int, "
           "at::native::FillFunctor<float>, std::array<char*, 1ul>)",
           "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
           "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, "
           "3ul>)",
           "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
           "std::array<char*, 2ul> >(int, at::native::FillFunctor<float>, std::array<char*, 2ul>)",
           "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<my::T>, "
           "std::array<char*, 1ul> >(int, at::native::FillFunctor<my::T>, std::array<char*, 1ul>)",
           "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
           "std::array<char*, 1ul> >(int, at::native::FillFunctor<double>, std::array<char*, 1ul>)",
           "void at::native::vectorized_elementwise_kernel<, at::native::FillFunctor<float>, "
           "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
           "fill(float*, int, float)"}) {
    EXPECT_FALSE(whole_write_of(name, kFillLayout).has_value()) << name;
  }
  EXPECT_FALSE(whole_write_of(kFloatFill, {{0, 8}, {8, 4}, {16, 8}}).has_value());
  EXPECT_FALSE(whole_write_of(kFloatFill, {{0, 4}, {4, 4}}).has_value());
}

// The bias-gradient reduction of the GPT example on PyTorch 2.11 (one ReduceOp struct of 1048
// bytes; the trace showed cta_buf at +1016 and the semaphores at +1024).
constexpr const char* kReduce =
    "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, c10::BFloat16, 4, 8> >(at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, c10::BFloat16, 4, 8>)";

TEST(KernelWrites, PyTorchReductionsStageInAScratchBuffer) {
  auto scratch = scratch_word_of(kReduce, {{0, 1048}});
  ASSERT_TRUE(scratch.has_value());
  EXPECT_EQ(scratch->param, 0u);
  EXPECT_EQ(scratch->offset, 1016u);
  EXPECT_EQ(scratch->companion_offset, 1024u);
  // Another layout (two parameters, a struct too small or not 8-aligned), another kernel.
  EXPECT_FALSE(scratch_word_of(kReduce, {{0, 1048}, {1048, 8}}).has_value());
  EXPECT_FALSE(scratch_word_of(kReduce, {{0, 56}}).has_value());
  EXPECT_FALSE(scratch_word_of(kReduce, {{0, 1044}}).has_value());
  EXPECT_FALSE(scratch_word_of(kFloatFill, {{0, 1048}}).has_value());
  EXPECT_FALSE(scratch_word_of("void at::native::reduce_kernel<512, 1, Other>(Other)", {{0, 1048}})
                   .has_value());
  EXPECT_FALSE(whole_write_of(kReduce, {{0, 1048}}).has_value());
}

TEST(KernelWrites, BytesWrittenComeFromTheCount) {
  const WholeWrite fill{0, 2, 4};
  std::vector<uint8_t> bytes(16, 0);
  const int32_t n = 16777216;  // a 64 MiB float tensor
  std::memcpy(bytes.data(), &n, 4);
  EXPECT_EQ(whole_write_bytes(fill, kFillLayout, bytes), 64ull << 20);
  const int32_t negative = -1;
  std::memcpy(bytes.data(), &negative, 4);
  EXPECT_EQ(whole_write_bytes(fill, kFillLayout, bytes), 0u);
  bytes.resize(2);  // shorter than the count
  EXPECT_EQ(whole_write_bytes(fill, kFillLayout, bytes), 0u);
}

}  // namespace
}  // namespace lockstep::collectors
