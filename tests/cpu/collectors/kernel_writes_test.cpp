// Known whole-region writers (collectors/kernel_writes.h): PyTorch's contiguous fill, matched by
// its real demangled names and layouts; anything else is not a known writer.
#include "collectors/kernel_writes.h"

#include <array>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cpu/collectors/cat_metadata.h"
#include "tests/cpu/collectors/offset_calculator.h"

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
  EXPECT_EQ(fill->value_param, 1u);
  auto bf16 = whole_write_of(kBf16Fill, kBf16FillLayout);
  ASSERT_TRUE(bf16.has_value());
  EXPECT_EQ(bf16->element_bytes, 2u);
}

TEST(KernelWrites, AFillOfUnsignedLongsIsAWholeWriterOfEightByteElements) {
  // The name exactly as `lockstep show --verbose` printed it on an H100 (PyTorch 2.11): flash
  // attention's Philox seed and offset, two such fills per attention layer a step.
  constexpr const char* kU64Fill =
      "void at::native::vectorized_elementwise_kernel<2, at::native::FillFunctor<unsigned long>, "
      "std::array<char*, 1ul> >(int, at::native::FillFunctor<unsigned long>, std::array<char*, "
      "1ul>)";
  const auto fill = whole_write_of(kU64Fill, {{0, 4}, {8, 8}, {16, 8}});
  ASSERT_TRUE(fill.has_value());
  EXPECT_EQ(fill->element_bytes, 8u);
  EXPECT_EQ(fill->value_param, 1u);
}

TEST(KernelWrites, OtherKernelsAndOtherLayoutsAreNot) {
  // A 3-argument unrolled kernel (not PyTorch's), other functors, two outputs, an
  // unknown element type, a mismatched signature, and the right name with the wrong layout.
  for (const char* name :
       {"void at::native::unrolled_elementwise_kernel<at::native::FillFunctor<float>, "
        "std::array<char*, 1ul>, TrivialOffsetCalculator<0, unsigned int> >(int, "
        "at::native::FillFunctor<float>, std::array<char*, 1ul>)",
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

// A contiguous elementwise op into data[0] (CUDALoops.cuh's vectorized_elementwise_kernel) whose
// functor's name says its result type: Loops.cuh's wrappers (the third argument) and torchgen's
// ufunc functors (their scalar_t). Spellings as the demangler gives them (PyTorch 2.11).
std::string elementwise(const std::string& functor, int k) {
  const std::string array = "std::array<char*, " + std::to_string(k) + "ul>";
  return "void at::native::vectorized_elementwise_kernel<4, " + functor + ", " + array +
         " >(int, " + functor + ", " + array + ")";
}
std::vector<ParamInfo> elementwise_layout(uint32_t functor_bytes, int k) {
  return {{0, 4}, {4, functor_bytes}, {(4 + functor_bytes + 7) / 8 * 8, uint32_t(8 * k)}};
}
constexpr const char* kMul =
    "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> "
    ">";
constexpr const char* kScalarMulBf16 =
    "at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, "
    "at::native::binary_internal::MulFunctor<float> >";

TEST(KernelWrites, ContiguousElementwiseOutputsOfNamedFunctorsAreWholeWriters) {
  const auto mul = whole_write_of(elementwise(kMul, 3), elementwise_layout(1, 3));
  ASSERT_TRUE(mul.has_value());
  EXPECT_EQ(mul->count_param, 0u);
  EXPECT_EQ(mul->pointer_param, 2u);
  EXPECT_EQ(mul->element_bytes, 4u);
  EXPECT_EQ(mul->value_param, WholeWrite::kNoValue);  // not a fill: no value to recall
  EXPECT_EQ(whole_write_of(elementwise(kScalarMulBf16, 2), elementwise_layout(8, 2))->element_bytes,
            2u);
  // The result type, not the inputs': a comparison writes bool.
  EXPECT_EQ(whole_write_of(elementwise("at::native::BUnaryFunctor<float, float, bool, "
                                       "at::native::CompareEqFunctor<float> >",
                                       2),
                           elementwise_layout(8, 2))
                ->element_bytes,
            1u);
  EXPECT_EQ(
      whole_write_of(elementwise("at::native::CUDAFunctor_add<float>", 3), elementwise_layout(4, 3))
          ->element_bytes,
      4u);
  EXPECT_EQ(whole_write_of(elementwise("at::native::CUDAFunctorOnSelf_add<c10::BFloat16>", 2),
                           elementwise_layout(8, 2))
                ->element_bytes,
            2u);
  // A fill keeps its value.
  EXPECT_EQ(whole_write_of(kFloatFill, kFillLayout)->value_param, 1u);
}

// Lambdas of kernels that return their arguments' type (SiLU, its backward, negation, a
// same-type copy), as PyTorch 2.11's dispatch macros nest them.
constexpr const char* kSiluLambda =
    "at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::"
    "operator()() const::{lambda()#4}::operator()() const::{lambda(float)#1}";

TEST(KernelWrites, ElementwiseKernelsWhoseNamesDoNotSayTheirResultAreNot) {
  // A lambda of a kernel not known to return its arguments' type (isnan's writes bool).
  const char* isnan =
      "at::native::isnan_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::"
      "{lambda(float)#1}";
  const char* silu = kSiluLambda;
  for (const auto& [name, k] : std::vector<std::pair<std::string, int>>{
           {elementwise(isnan, 2), 2},                                   // another kernel's lambda
           {elementwise(std::string(silu).replace(std::string(silu).rfind("#1"), 2, "#2"), 2),
            2},                                                           // another lambda of it
           {elementwise(std::string(silu).replace(std::string(silu).rfind("float"), 5,
                                                  "float, c10::BFloat16"),
                        3),
            3},                                                           // mixed arguments
           {elementwise(std::string(silu).replace(std::string(silu).find("#1}::") + 5, 0, "x"),
                        2),
            2},                                                           // a malformed level
           {elementwise(silu, 3), 3},                                     // K not its arguments + 1
           {elementwise("at::native::BinaryFunctor<float, float, float>", 3), 3},     // 3 arguments
           {elementwise("at::native::BinaryFunctor<float, float, my::T, F>", 3), 3},  // unknown
           {elementwise("at::native::CUDAFunctorX_add<float>", 3), 3},        // not torchgen's
           {elementwise("at::native::CUDAFunctor_add<float>::inner", 3), 3},  // trailing text
           {elementwise("at::native::CUDAFunctor_add<float>", 1), 1},         // no input
           {elementwise("at::native::FillFunctor<float>", 2), 2},             // a fill with input
       }) {
    EXPECT_FALSE(whole_write_of(name, elementwise_layout(4, k)).has_value()) << name;
  }
  // The array's size differs between the template and the signature; the layout's array is not
  // K pointers; the vector width is not a number.
  std::string mismatched = elementwise(kMul, 3);
  mismatched.replace(mismatched.rfind("3ul"), 3, "2ul");
  EXPECT_FALSE(whole_write_of(mismatched, elementwise_layout(1, 3)).has_value());
  EXPECT_FALSE(whole_write_of(elementwise(kMul, 3), elementwise_layout(1, 2)).has_value());
  std::string width = elementwise(kMul, 3);
  width.replace(width.find("<4,") + 1, 1, "N");
  EXPECT_FALSE(whole_write_of(width, elementwise_layout(1, 3)).has_value());
}

// PyTorch's strided multiply, as c++filt spells the mangled name the GPU's trace shows in
// short (elementwise_kernel<MulFunctor>): gpu_kernel_impl_nocast's lambda over a named functor.
constexpr const char* kStridedMul =
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<"
    "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> "
    "> >(at::TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, "
    "at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1}>(int, "
    "at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, "
    "at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, "
    "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> "
    "> const&)::{lambda(int)#1})";
std::string strided(const std::string& functor, const std::string& impl = "gpu_kernel_impl_nocast",
                    const std::string& lambda = "{lambda(int)#1}") {
  const std::string l = "at::native::" + impl + "<" + functor + " >(at::TensorIteratorBase&, " +
                        functor + " const&)::" + lambda;
  return "void at::native::elementwise_kernel<128, 2, " + l + ">(int, " + l + ")";
}
// (int N, closure): K = 3, the calculator's 604 bytes, data at 608, an empty functor: 640.
const std::vector<ParamInfo> kStridedMulLayout{{0, 4}, {8, 640}};

TEST(KernelWrites, StridedElementwiseOutputsOfNamedFunctorsAreKnownWriters) {
  ASSERT_EQ(strided(kMul), kStridedMul);  // the helper spells what c++filt gives
  const auto mul = strided_write_of(kStridedMul, kStridedMulLayout);
  ASSERT_TRUE(mul.has_value());
  EXPECT_EQ(mul->count_param, 0u);
  EXPECT_EQ(mul->closure_param, 1u);
  EXPECT_EQ(mul->args, 3u);
  EXPECT_EQ(mul->element_bytes, 4u);
  EXPECT_EQ(mul->places[0], std::make_pair(0u, 608u));  // the calculator first
  EXPECT_EQ(mul->places[1], std::make_pair(24u, 0u));   // data first
  // A scalar multiply of bf16 (K = 2: a 504-byte calculator, data at 504, the scalar after).
  const auto scalar = strided_write_of(strided(kScalarMulBf16), {{0, 4}, {8, 528}});
  ASSERT_TRUE(scalar.has_value());
  EXPECT_EQ(scalar->args, 2u);
  EXPECT_EQ(scalar->element_bytes, 2u);
  EXPECT_EQ(strided_write_of(strided("at::native::CUDAFunctor_add<float>"), kStridedMulLayout)
                ->element_bytes,
            4u);
  // Not these: the casting path's lambda (its output type is the tensor's, not the functor's),
  // another lambda, a functor whose result the name does not say, a signature that is another
  // lambda's, a closure too small or too large for K pointers and a calculator, more parameters.
  const char* isnan = "at::native::isnan_kernel(at::TensorIteratorBase&)::{lambda()#1}::"
                      "operator()() const::{lambda(float)#1}";
  for (const std::string& name :
       {strided(kMul, "gpu_kernel_impl"), strided(kMul, "gpu_kernel_impl_nocast", "{lambda(int)#2}"),
        strided(isnan), std::string(kStridedMul).replace(std::string(kStridedMul).rfind("#1"), 2, "#2"),
        elementwise(kMul, 3)})
    EXPECT_FALSE(strided_write_of(name, kStridedMulLayout).has_value()) << name;
  EXPECT_FALSE(strided_write_of(kStridedMul, {{0, 4}, {8, 624}}).has_value());
  EXPECT_FALSE(strided_write_of(kStridedMul, {{0, 4}, {8, 664}}).has_value());
  EXPECT_FALSE(strided_write_of(kStridedMul, {{0, 4}, {8, 640}, {648, 8}}).has_value());
  EXPECT_FALSE(strided_write_of(kStridedMul, {{0, 8}, {8, 640}}).has_value());
  const std::string name(kStridedMul);
  for (size_t n = 0; n < name.size(); ++n)
    EXPECT_FALSE(strided_write_of(std::string_view(name).substr(0, n), kStridedMulLayout))
        << name.substr(0, n);
}

// A launch's offset calculator says where its outputs go: a dense layout in any order covers
// N x 4 bytes from data[0]; a gap, an overlap or a broadcast covers nothing known; bytes that are
// no calculator, or one of another element count, are not taken for one.
TEST(KernelWrites, AStridedOutputIsWholeOnlyWhereItsCalculatorLaysItOutDensely) {
  const StridedWrite mul = *strided_write_of(kStridedMul, kStridedMulLayout);
  using testing::StridedLaunch;
  const std::vector<uint64_t> data{0x7f0000100000, 0x7f0000200000, 0x7f0000300000};
  // A transposed output: 8 x 16 floats, the fastest dimension 64 bytes apart.
  StridedLaunch launch{128, {{8, {64, 4, 4}}, {16, {4, 32, 32}}}, data, false, 640};
  auto out = strided_output(mul, kStridedMulLayout, testing::strided_bytes(launch));
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->data_offset, 608u);
  EXPECT_EQ(out->bytes, 512u);
  // The same captured the other way round: data at the closure's start.
  StridedLaunch data_first = launch;
  data_first.data_first = true;
  out = strided_output(mul, kStridedMulLayout, testing::strided_bytes(data_first));
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->data_offset, 0u);
  // One element; size-1 dimensions whatever their stride.
  EXPECT_EQ(strided_output(mul, kStridedMulLayout,
                           testing::strided_bytes({1, {{1, {0, 4, 4}}}, data, false, 640}))
                ->bytes,
            4u);
  EXPECT_EQ(strided_output(mul, kStridedMulLayout,
                           testing::strided_bytes(
                               {32, {{32, {4, 4, 4}}, {1, {999, 0, 0}}}, data, false, 640}))
                ->bytes,
            128u);
  EXPECT_EQ(out->calculator_offset, 24u);  // data first: the calculator after it
  EXPECT_EQ(out->calculator_bytes, 604u);
  // A calculator whose output is not dense: found (its words are no pointers), nothing written
  // known.
  for (const StridedLaunch& not_dense : {
           StridedLaunch{128, {{8, {128, 4, 4}}, {16, {4, 32, 32}}}, data, false, 640},  // a gap
           StridedLaunch{128, {{8, {4, 4, 4}}, {16, {4, 32, 32}}}, data, false, 640},  // overlap
           StridedLaunch{128, {{8, {0, 4, 4}}, {16, {4, 32, 32}}}, data, false, 640},  // broadcast
           StridedLaunch{128, {{128, {8, 4, 4}}}, data, false, 640},  // 8-byte elements: not float
       }) {
    const auto found = strided_output(mul, kStridedMulLayout, testing::strided_bytes(not_dense));
    ASSERT_TRUE(found.has_value());
    EXPECT_EQ(found->bytes, 0u);
    EXPECT_EQ(found->calculator_offset, 0u);
    EXPECT_EQ(found->data_offset, 608u);
  }
  // Not a calculator of this launch: its sizes are not N elements, or there are none.
  for (const StridedLaunch& not_this : {
           StridedLaunch{64, {{8, {64, 4, 4}}, {16, {4, 32, 32}}}, data, false, 640},
           StridedLaunch{0, {{1, {4, 4, 4}}}, data, false, 640},
       })
    EXPECT_FALSE(strided_output(mul, kStridedMulLayout, testing::strided_bytes(not_this)))
        << not_this.n;
  // Bytes that are not a calculator: a divider's magic number off by one, no dimensions, 26.
  std::vector<uint8_t> bytes = testing::strided_bytes(launch);
  bytes[8 + 4 + 4] ^= 1;
  EXPECT_FALSE(strided_output(mul, kStridedMulLayout, bytes));
  for (const int32_t dims : {0, 26}) {
    bytes = testing::strided_bytes(launch);
    std::memcpy(bytes.data() + 8, &dims, 4);
    EXPECT_FALSE(strided_output(mul, kStridedMulLayout, bytes)) << dims;
  }
  bytes = testing::strided_bytes(launch);
  bytes.resize(600);  // cut short
  EXPECT_FALSE(strided_output(mul, kStridedMulLayout, bytes));
}

TEST(KernelWrites, LambdasOfKernelsThatReturnTheirArgumentsTypeSayTheirResult) {
  EXPECT_EQ(whole_write_of(elementwise(kSiluLambda, 2), elementwise_layout(1, 2))->element_bytes,
            4u);
  const char* silu_backward =
      "at::native::(anonymous namespace)::silu_backward_kernel(at::TensorIteratorBase&)::"
      "{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::"
      "{lambda(c10::BFloat16, c10::BFloat16)#1}";
  EXPECT_EQ(whole_write_of(elementwise(silu_backward, 3), elementwise_layout(1, 3))->element_bytes,
            2u);
  const char* neg =
      "at::native::neg_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::"
      "{lambda()#8}::operator()() const::{lambda(c10::BFloat16)#1}";
  // Strided: K = 2, a 504-byte calculator, data at 504, an empty lambda.
  const auto strided_neg = strided_write_of(strided(neg), {{0, 4}, {8, 528}});
  ASSERT_TRUE(strided_neg.has_value());
  EXPECT_EQ(strided_neg->args, 2u);
  EXPECT_EQ(strided_neg->element_bytes, 2u);
  const char* copy =
      "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() "
      "const::{lambda()#7}::operator()() const::{lambda(float)#1}";
  EXPECT_EQ(whole_write_of(elementwise(copy, 2), elementwise_layout(1, 2))->element_bytes, 4u);
}

// The contiguous path's kernel for operands not aligned for vector loads, as PyTorch 2.11's
// CUDALoops.cuh instantiates it (launch_vectorized_kernel, vec_size 1): trivial offset
// calculators, loads and stores without casting.
std::string unrolled(const std::string& functor, int k,
                     const std::string& store = "StoreWithoutCast",
                     const std::string& inputs_calc = "",
                     const std::string& load = "LoadWithoutCast") {
  const std::string array = "std::array<char*, " + std::to_string(k) + "ul>";
  const std::string rest =
      (inputs_calc.empty() ? "TrivialOffsetCalculator<" + std::to_string(k - 1) + ", unsigned int>"
                           : inputs_calc) +
      ", TrivialOffsetCalculator<1, unsigned int>, at::native::memory::" + load +
      ", at::native::memory::" + store;
  return "void at::native::unrolled_elementwise_kernel<" + functor + ", " + array + ", 4, " +
         rest + ">(int, " + functor + ", " + array + ", " + rest + ")";
}
// (int N, func_t, std::array<char*, K>, four one-byte empty structs).
std::vector<ParamInfo> unrolled_layout(uint32_t functor_bytes, int k) {
  const uint32_t data = (4 + functor_bytes + 7) / 8 * 8, after = data + 8 * k;
  return {{0, 4}, {4, functor_bytes}, {data, uint32_t(8 * k)}, {after, 1}, {after + 1, 1},
          {after + 2, 1}, {after + 3, 1}};
}

TEST(KernelWrites, UnalignedContiguousOutputsOfNamedFunctorsAreWholeWritersToo) {
  const auto add = whole_write_of(unrolled("at::native::CUDAFunctor_add<float>", 3),
                                  unrolled_layout(4, 3));
  ASSERT_TRUE(add.has_value());
  EXPECT_EQ(add->count_param, 0u);
  EXPECT_EQ(add->pointer_param, 2u);
  EXPECT_EQ(add->element_bytes, 4u);
  EXPECT_EQ(add->value_param, WholeWrite::kNoValue);
  const char* copy =
      "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() "
      "const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1}";
  EXPECT_EQ(whole_write_of(unrolled(copy, 2), unrolled_layout(1, 2))->element_bytes, 2u);
  // Without elems_per_thread (older PyTorch): the same.
  std::string older = unrolled(kMul, 3);
  older.erase(older.find(", 4, "), 3);
  EXPECT_TRUE(whole_write_of(older, unrolled_layout(1, 3)).has_value()) << older;
  // A fill keeps its value.
  EXPECT_EQ(whole_write_of(unrolled("at::native::FillFunctor<float>", 1), unrolled_layout(4, 1))
                ->value_param,
            1u);
}

// Operands of different types (a float plus a bf16 tensor into a float one): the same kernel
// with casting loads and stores, as the unseen job's trace on an H100 showed it (PyTorch 2.11).
// The output's element is the storer's {ScalarType dtypes[1]; uint32_t element_sizes[1]}.
TEST(KernelWrites, ACastingUnrolledOutputIsWholeWithTheStoresElementSize) {
  const std::string add = "at::native::CUDAFunctor_add<float>";
  // Spelled as `lockstep show --verbose` printed it (the space before the list's last '>').
  const std::string name =
      "void at::native::unrolled_elementwise_kernel<at::native::CUDAFunctor_add<float>, "
      "std::array<char*, 3ul>, 4, TrivialOffsetCalculator<2, unsigned int>, "
      "TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<2>, "
      "at::native::memory::StoreWithCast<1> >(int, at::native::CUDAFunctor_add<float>, "
      "std::array<char*, 3ul>, TrivialOffsetCalculator<2, unsigned int>, "
      "TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<2>, "
      "at::native::memory::StoreWithCast<1>)";
  // LoadWithCast<2> {dtypes[2]; element_sizes[2]}: 12 bytes; StoreWithCast<1>: 8.
  std::vector<ParamInfo> layout = unrolled_layout(4, 3);
  layout[5] = {layout[4].offset + 4, 12};
  layout[6] = {layout[5].offset + 12, 8};
  const auto add_cast = whole_write_of(name, layout);
  ASSERT_TRUE(add_cast.has_value());
  EXPECT_TRUE(whole_write_of(unrolled(add, 3, "StoreWithCast<1>", "", "LoadWithCast<2>"),
                             layout));  // the helper's spelling, without that space
  EXPECT_EQ(add_cast->pointer_param, 2u);
  EXPECT_EQ(add_cast->element_bytes, 0u);  // per launch
  EXPECT_EQ(add_cast->stored_param, 6u);
  std::vector<uint8_t> bytes(layout[6].offset + 8, 0);
  const int32_t n = 1000;
  std::memcpy(bytes.data(), &n, 4);
  auto store = [&](uint8_t type, uint32_t size) {
    bytes[layout[6].offset] = type;
    std::memcpy(bytes.data() + layout[6].offset + 4, &size, 4);
    return whole_write_bytes(*add_cast, layout, bytes);
  };
  EXPECT_EQ(store(6, 4), 4000u);   // Float
  EXPECT_EQ(store(15, 2), 2000u);  // BFloat16
  EXPECT_EQ(store(6, 2), 0u);      // a size that is not its type's
  EXPECT_EQ(store(99, 4), 0u);     // a type not known
  bytes.resize(bytes.size() - 1);
  EXPECT_EQ(whole_write_bytes(*add_cast, layout, bytes), 0u);  // the storer cut short
  // A casting fill is not PyTorch's; a storer of another size; loads and stores not both casting.
  EXPECT_FALSE(whole_write_of(unrolled("at::native::FillFunctor<float>", 1, "StoreWithCast<1>", "",
                                       "LoadWithCast<0>"),
                              unrolled_layout(4, 1)));
  layout[6].size = 12;
  EXPECT_FALSE(whole_write_of(name, layout));
}

TEST(KernelWrites, UnrolledKernelsThatCastOrComputeOffsetsAreNot) {
  const std::string add = "at::native::CUDAFunctor_add<float>";
  for (const std::string& name : {
           unrolled(add, 3, "StoreWithCast<1>"),                  // casting stores, plain loads
           unrolled(add, 3, "StoreWithoutCast", "", "LoadWithCast<2>"),  // and the other way
           unrolled(add, 3, "StoreWithCast<2>", "", "LoadWithCast<2>"),  // two outputs
           unrolled(add, 3, "StoreWithCast<1>", "", "LoadWithCast<1>"),  // K - 1 inputs wrong
           unrolled(add, 3, "StoreWithoutCast",
                    "OffsetCalculator<2, unsigned int, false>"),               // strided inputs
           unrolled(add, 3, "StoreWithoutCast",
                    "TrivialOffsetCalculator<1, unsigned int>"),               // K - 1 wrong
           unrolled(add, 2),                                                   // K not 3
           unrolled(kSiluLambda, 3),                                           // K not 2
       }) {
    EXPECT_FALSE(whole_write_of(name, unrolled_layout(4, 3)).has_value()) << name;
  }
  std::string loads = unrolled(add, 3);
  while (loads.find("LoadWithoutCast") != std::string::npos)
    loads.replace(loads.find("LoadWithoutCast"), 15, "LoadWithCast<2>");
  EXPECT_FALSE(whole_write_of(loads, unrolled_layout(4, 3)).has_value());
  // The signature not the template's; a trailing argument; the layout not seven parameters or
  // its array not K pointers.
  std::string signature = unrolled(add, 3);
  signature.replace(signature.rfind("LoadWithoutCast"), 15, "LoadWithCast<2>");
  EXPECT_FALSE(whole_write_of(signature, unrolled_layout(4, 3)).has_value());
  std::string trailing = unrolled(add, 3);
  trailing.insert(trailing.find(">(int"), ", int");
  EXPECT_FALSE(whole_write_of(trailing, unrolled_layout(4, 3)).has_value());
  EXPECT_FALSE(whole_write_of(unrolled(add, 3), elementwise_layout(4, 3)).has_value());
  std::vector<ParamInfo> short_array = unrolled_layout(4, 3);
  short_array[2].size = 16;
  EXPECT_FALSE(whole_write_of(unrolled(add, 3), short_array).has_value());
}

// Every proper prefix of a matching name (a truncated or unbalanced name) is no known writer,
// and reading it never leaves the string.
TEST(KernelWrites, NoPrefixOfAWholeWritersNameIsOne) {
  for (const std::string& name :
       {elementwise(kMul, 3), elementwise("at::native::CUDAFunctorOnSelf_add<c10::BFloat16>", 2),
        std::string(kFloatFill), unrolled(kMul, 3)}) {
    const auto layout = name == kFloatFill                         ? kFillLayout
                        : name.find("OnSelf") != std::string::npos ? elementwise_layout(8, 2)
                        : name.find("unrolled") != std::string::npos ? unrolled_layout(1, 3)
                                                                   : elementwise_layout(1, 3);
    ASSERT_TRUE(whole_write_of(name, layout).has_value()) << name;
    for (size_t n = 0; n < name.size(); ++n)
      EXPECT_FALSE(whole_write_of(std::string_view(name).substr(0, n), layout).has_value())
          << name.substr(0, n);
  }
}

// The bias-gradient reduction of the GPT example on PyTorch 2.11 (one ReduceOp struct of 1048
// bytes; the trace showed cta_buf at +1016 and the semaphores at +1024).
constexpr const char* kReduce =
    "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<c10::BFloat16, "
    "at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, "
    "c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, "
    "c10::BFloat16, 4, 8> >(at::native::ReduceOp<c10::BFloat16, "
    "at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, "
    "c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, "
    "c10::BFloat16, 4, 8>)";

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

// A float norm to one element (p.norm(2), Adafactor's) with PyTorch's NormTwoOps, its struct of
// 1048 bytes as in the bias-gradient reduction above.
constexpr const char* kNormToScalar =
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
    "at::native::NormTwoOps<float, float, float>, unsigned int, float, 4, 4> >"
    "(at::native::ReduceOp<float, at::native::NormTwoOps<float, float, float>, unsigned int, "
    "float, 4, 4>)";

TEST(KernelWrites, AReductionsOutputWordAndElementSizeComeFromItsNameAndStruct) {
  auto reduced = reduced_element_of(kNormToScalar, {{0, 1048}});
  ASSERT_TRUE(reduced.has_value());
  EXPECT_EQ(reduced->param, 0u);
  EXPECT_EQ(reduced->dst_offset, 1048u - 56);  // 32 before cta_buf's word
  EXPECT_EQ(reduced->acc_buf_offset, 1048u - 40);
  EXPECT_EQ(reduced->accumulate_offset, 1048u - 8);
  EXPECT_EQ(reduced->final_output_offset, 1048u - 7);
  EXPECT_EQ(reduced->noutputs_offset, 1048u - 4);
  EXPECT_EQ(reduced->element_bytes, 4u);
  // out_scalar_t is ReduceOp's fourth argument, past a functor with commas of its own.
  auto bf16 = reduced_element_of(kReduce, {{0, 1048}});
  ASSERT_TRUE(bf16.has_value());
  EXPECT_EQ(bf16->element_bytes, 2u);
  const std::string to_long =
      "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
      "at::native::ArgMaxOps<float>, unsigned int, long, 4, 4> >(at::native::ReduceOp<float, "
      "at::native::ArgMaxOps<float>, unsigned int, long, 4, 4>)";
  EXPECT_EQ(reduced_element_of(to_long, {{0, 1048}})->element_bytes, 8u);
  // An unknown output type, a ReduceOp of three arguments, another layout, another kernel.
  EXPECT_FALSE(reduced_element_of("void at::native::reduce_kernel<512, 1, "
                                  "at::native::ReduceOp<float, Ops, unsigned int, my::T, 4, 4> >"
                                  "(at::native::ReduceOp<float, Ops, unsigned int, my::T, 4, 4>)",
                                  {{0, 1048}})
                   .has_value());
  EXPECT_FALSE(reduced_element_of("void at::native::reduce_kernel<512, 1, "
                                  "at::native::ReduceOp<float, Ops, unsigned int> >(x)",
                                  {{0, 1048}})
                   .has_value());
  EXPECT_FALSE(reduced_element_of(kNormToScalar, {{0, 1048}, {1048, 8}}).has_value());
  EXPECT_FALSE(reduced_element_of(kNormToScalar, {{0, 1044}}).has_value());
  EXPECT_FALSE(reduced_element_of(kNormToScalar, {{0, 56}}).has_value());
  EXPECT_FALSE(reduced_element_of(kFloatFill, kFillLayout).has_value());
  EXPECT_FALSE(whole_write_of(kNormToScalar, {{0, 1048}}).has_value());
}

// The struct's tail as a launch packs it: flags in their bytes, acc_buf a pointer or null.
std::vector<uint8_t> reduce_bytes(bool accumulate, bool final_output, int32_t noutputs,
                                  uint64_t acc_buf) {
  std::vector<uint8_t> bytes(1048, 0xee);
  std::memcpy(bytes.data() + 1048 - 40, &acc_buf, 8);
  bytes[1048 - 8] = accumulate, bytes[1048 - 7] = final_output;
  std::memcpy(bytes.data() + 1048 - 4, &noutputs, 4);
  return bytes;
}

TEST(KernelWrites, AReductionOverwritesItsOutputUnlessItAccumulatesIntoIt) {
  const std::vector<ParamInfo> layout{{0, 1048}};
  const ReducedElement reduced = *reduced_element_of(kNormToScalar, layout);
  EXPECT_TRUE(reduction_overwrites_output(reduced, layout, reduce_bytes(false, true, 1, 0)));
  // Not the final output, no acc_buf: the value goes to dst all the same (Reduce.cuh).
  EXPECT_TRUE(reduction_overwrites_output(reduced, layout, reduce_bytes(false, false, 1, 0)));
  EXPECT_TRUE(reduction_overwrites_output(reduced, layout, reduce_bytes(false, true, 1, 0x7000)));
  // Accumulating into dst reads it; a partial result goes to acc_buf; two outputs (dst[1]).
  EXPECT_FALSE(reduction_overwrites_output(reduced, layout, reduce_bytes(true, true, 1, 0)));
  EXPECT_FALSE(reduction_overwrites_output(reduced, layout, reduce_bytes(false, false, 1, 0x7000)));
  EXPECT_FALSE(reduction_overwrites_output(reduced, layout, reduce_bytes(false, true, 2, 0)));
  std::vector<uint8_t> shorter = reduce_bytes(false, true, 1, 0);
  shorter.resize(1040);
  EXPECT_FALSE(reduction_overwrites_output(reduced, layout, shorter));
}

// A ReduceOp of 1048 bytes whose ReduceConfig starts at `at` (after ops and ident) and says
// `outputs` outputs, launched as its config says (block 32 x 16, grid outputs/vec over
// step_output, ctas_per_output).
struct ReduceLaunch {
  std::vector<uint8_t> bytes;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {32, 16, 1};
};
ReduceLaunch reduce_into(uint32_t at, int32_t outputs, int32_t vec = 1, int32_t step_output = 1,
                         int32_t ctas = 1) {
  ReduceLaunch l;
  l.bytes = reduce_bytes(false, true, 1, 0);
  const int32_t config[16] = {4, 4096, outputs, 1,  step_output, ctas, 0, 0,
                              0, 0,    0,       32, 16,          512,  0, vec};
  std::memcpy(l.bytes.data() + at, config, sizeof config);
  l.grid[0] = unsigned((outputs / vec + step_output - 1) / step_output), l.grid[1] = unsigned(ctas);
  return l;
}

// reduction_config's output count, 0 where it finds no config.
uint64_t reduction_output_count(const ReducedElement& reduced, const std::vector<ParamInfo>& layout,
                                const std::vector<uint8_t>& bytes, const unsigned grid[3],
                                const unsigned block[3]) {
  const std::optional<ReductionConfig> config =
      reduction_config(reduced, layout, bytes, grid, block);
  return config ? config->outputs : 0;
}

TEST(KernelWrites, AReductionsOutputCountIsItsConfigsFoundByTheLaunchsDims) {
  const std::vector<ParamInfo> layout{{0, 1048}};
  const ReducedElement reduced = *reduced_element_of(kNormToScalar, layout);
  // NormTwoOps (empty) and a float identity: the config at 8; MeanOps' factor: at 12 or 16.
  for (uint32_t at : {8u, 16u, 0u, 40u}) {
    const ReduceLaunch l = reduce_into(at, 768);
    EXPECT_EQ(reduction_output_count(reduced, layout, l.bytes, l.grid, l.block), 768u) << at;
  }
  ReduceLaunch vec = reduce_into(8, 768, 4, 2, 3);  // 4 outputs a thread, split, global
  EXPECT_EQ(reduction_output_count(reduced, layout, vec.bytes, vec.grid, vec.block), 768u);
  // Not the launch's block, grid or a z dimension; no config anywhere; counts that cannot be.
  ReduceLaunch other = reduce_into(8, 768);
  other.block[0] = 64;
  EXPECT_EQ(reduction_output_count(reduced, layout, other.bytes, other.grid, other.block), 0u);
  other = reduce_into(8, 768);
  other.grid[0] += 1;
  EXPECT_EQ(reduction_output_count(reduced, layout, other.bytes, other.grid, other.block), 0u);
  other = reduce_into(8, 768);
  other.grid[2] = 2;
  EXPECT_EQ(reduction_output_count(reduced, layout, other.bytes, other.grid, other.block), 0u);
  const std::vector<uint8_t> none = reduce_bytes(false, true, 1, 0);
  const unsigned grid[3] = {768, 1, 1}, block[3] = {32, 16, 1};
  EXPECT_EQ(reduction_output_count(reduced, layout, none, grid, block), 0u);
  EXPECT_EQ(reduction_output_count(reduced, layout, reduce_into(8, 770, 4).bytes, grid, block), 0u);
  ReduceLaunch shorter = reduce_into(8, 768);
  shorter.bytes.resize(1040);
  EXPECT_EQ(reduction_output_count(reduced, layout, shorter.bytes, shorter.grid, shorter.block),
            0u);
}

TEST(KernelWrites, AReductionsCalculatorsLieBetweenItsConfigAndSrc) {
  const std::vector<ParamInfo> layout{{0, 1048}};
  const ReducedElement reduced = *reduced_element_of(kNormToScalar, layout);
  for (uint32_t at : {8u, 16u, 0u}) {
    const ReduceLaunch l = reduce_into(at, 768);
    const auto config = reduction_config(reduced, layout, l.bytes, l.grid, l.block);
    ASSERT_TRUE(config.has_value()) << at;
    EXPECT_EQ(config->outputs, 768u) << at;
    EXPECT_EQ(config->calculators_from, at + 64) << at;  // the config's 64 bytes, then input_calc
    EXPECT_EQ(config->calculators_to, reduced.dst_offset - 8);  // src: the first pointer after
  }
  // No config found: nothing is said to be a calculator (every word stays a pointer candidate).
  ReduceLaunch other = reduce_into(8, 768);
  other.block[0] = 64;
  EXPECT_FALSE(reduction_config(reduced, layout, other.bytes, other.grid, other.block));
  const std::vector<uint8_t> none = reduce_bytes(false, true, 1, 0);
  const unsigned grid[3] = {768, 1, 1}, block[3] = {32, 16, 1};
  EXPECT_FALSE(reduction_config(reduced, layout, none, grid, block));
}

// PyTorch 2.11's concatenation of bf16 tensors, as the unseen job's trace showed it on an H100.
constexpr const char* kCat =
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous "
    "namespace)::OpaqueType<2u>, unsigned int, 4, 64, 64>(at::native::(anonymous "
    "namespace)::OpaqueType<2u>*, at::native::(anonymous "
    "namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<2u>, "
    "unsigned int, 64, 64>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, "
    "4u>, int, unsigned int)";

TEST(KernelWrites, AConcatenationIsKnownByItsNameAndLayout) {
  const auto cat = cat_write_of(kCat, testing::kCatLayout);
  ASSERT_TRUE(cat.has_value());
  EXPECT_EQ(cat->element_bytes, 2u);
  EXPECT_EQ(cat->dims, 4u);
  EXPECT_EQ(cat->batch, 64u);
  EXPECT_EQ(cat->strides, 64u);
  const std::string name(kCat);
  auto replaced = [&](const std::string& from, const std::string& to, bool all = false) {
    std::string n = name;
    for (size_t at = n.find(from); at != std::string::npos; at = n.find(from, at + to.size())) {
      n.replace(at, from.size(), to);
      if (!all) break;
    }
    return n;
  };
  // Another element (float, not OpaqueType), 64-bit indices, 5 dims, the signature's batch not
  // the template's, a contig variant (other parameters), and the right name with another layout.
  for (const std::string& other :
       {replaced("OpaqueType<2u>", "float", true), replaced("unsigned int", "unsigned long", true),
        replaced(", 4, 64, 64>", ", 5, 64, 64>"),
        replaced("unsigned int, 64, 64>", "unsigned int, 32, 64>"),
        replaced("CatArrayBatchedCopy<", "CatArrayBatchedCopy_contig<")}) {
    EXPECT_FALSE(cat_write_of(other, testing::kCatLayout).has_value()) << other;
  }
  std::vector<ParamInfo> layout = testing::kCatLayout;
  layout[1].size = 3384;
  EXPECT_FALSE(cat_write_of(kCat, layout).has_value());
  for (size_t n = 0; n < name.size(); ++n)
    EXPECT_FALSE(cat_write_of(name.substr(0, n), testing::kCatLayout).has_value()) << n;
}

TEST(KernelWrites, AConcatenationWritesItsWholeOutputWhereItsInputsTileIt) {
  const CatWrite cat = *cat_write_of(kCat, testing::kCatLayout);
  const auto output = [&](const testing::CatLaunch& l, uint32_t grid_y) {
    return cat_output(cat, testing::kCatLayout, testing::cat_bytes(l), grid_y);
  };
  // Two halves of a 1024 x 64 bf16 tensor: the whole 128 KiB; the input pointers end at 16.
  const testing::CatLaunch halves = testing::halves_cat(0x1000, 0x2000, 0x3000, 1024, 32);
  ASSERT_TRUE(output(halves, 2).has_value());
  EXPECT_EQ(output(halves, 2)->bytes, 1024u * 64 * 2);
  EXPECT_EQ(output(halves, 2)->pointers_to, 16u);
  // In either order; along the first dimension (two blocks of rows).
  testing::CatLaunch swapped = halves;
  std::swap(swapped.inputs[0], swapped.inputs[1]);
  EXPECT_EQ(output(swapped, 2)->bytes, 1024u * 64 * 2);
  testing::CatLaunch rows = halves;
  rows.concat_dim = 2, rows.dim_stride = 64;
  rows.inputs = {{0x2000, 0, 512, 512 * 64}, {0x3000, 512, 512, 512 * 64}};
  EXPECT_EQ(output(rows, 2)->bytes, 1024u * 64 * 2);
  // Not whole: one input of the two in this launch (a longer list's first batch), a gap, an
  // overlap, an input's count not its slab's, dimStride not the output's, an output with a gap
  // between rows.
  EXPECT_EQ(output(halves, 1)->bytes, 0u);
  testing::CatLaunch l = halves;
  l.inputs[1].offset = 33;
  EXPECT_EQ(output(l, 2)->bytes, 0u);
  l = halves, l.inputs[1].offset = 31;
  EXPECT_EQ(output(l, 2)->bytes, 0u);
  l = halves, l.inputs[0].elements -= 1;
  EXPECT_EQ(output(l, 2)->bytes, 0u);
  l = halves, l.dim_stride = 2;
  EXPECT_EQ(output(l, 2)->bytes, 0u);
  l = halves, l.strides = {1024 * 80, 1024 * 80, 80, 1};
  EXPECT_EQ(output(l, 2)->bytes, 0u);
  // Not PyTorch's: no block rows, more than the batch, concatDim past the dims, bytes cut short.
  EXPECT_FALSE(output(halves, 0).has_value());
  EXPECT_FALSE(output(halves, 65).has_value());
  l = halves, l.concat_dim = 4;
  EXPECT_FALSE(output(l, 2).has_value());
  std::vector<uint8_t> shorter = testing::cat_bytes(halves);
  shorter.resize(3436);
  EXPECT_FALSE(cat_output(cat, testing::kCatLayout, shorter, 2).has_value());
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

// The value a fill stores is its functor's bytes (FillFunctor<T> holds one T): NaN under
// deterministic algorithms, a bf16 zero for torch.zeros.
TEST(KernelWrites, AFillsValueIsItsFunctorsBytes) {
  const auto fill = whole_write_of(kFloatFill, kFillLayout);
  ASSERT_TRUE(fill.has_value());
  std::vector<uint8_t> bytes(16, 0);
  const float nan = __builtin_nanf("");
  std::memcpy(bytes.data() + 4, &nan, 4);
  std::array<uint8_t, 16> value;
  value.fill(0xee);
  ASSERT_TRUE(whole_write_value(*fill, kFillLayout, bytes, &value));
  std::array<uint8_t, 16> expected{};
  std::memcpy(expected.data(), &nan, 4);
  EXPECT_EQ(value, expected);  // the rest zeroed
  const auto bf16 = whole_write_of(kBf16Fill, kBf16FillLayout);
  ASSERT_TRUE(bf16.has_value());
  bytes.assign(16, 0);
  bytes[4] = 0x80;  // -0.0 in bf16
  bytes[5] = 0x00;
  ASSERT_TRUE(whole_write_value(*bf16, kBf16FillLayout, bytes, &value));
  EXPECT_EQ(value[0], 0x80);
  EXPECT_EQ(value[1], 0x00);
  // A value parameter of another size than one element, or bytes cut short: no value.
  EXPECT_FALSE(whole_write_value(*fill, kBf16FillLayout, bytes, &value));
  bytes.resize(6);
  EXPECT_FALSE(whole_write_value(*fill, kFillLayout, bytes, &value));
}

// multi_tensor_apply's address table: the table's size read from the parameter's size (PyTorch
// 2.11 on the H200: TensorListMetadata<1> held 110 tensors, <3> 64), and the tensors a launch
// works on from block_to_tensor.
constexpr const char* kTensorList1 =
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
    "namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::BinaryOpScalarFunctor<"
    "float, 1, 1, 0>, std::multiplies<float>, float>(at::native::(anonymous namespace)::"
    "TensorListMetadata<1>, at::native::(anonymous namespace)::BinaryOpScalarFunctor<float, 1, 1, "
    "0>, std::multiplies<float>, float)";
constexpr const char* kTensorList3 =
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
    "namespace)::TensorListMetadata<3>, at::native::(anonymous namespace)::PointwiseOpScalarFunctor"
    "<float, 3, 3, 0>, std::multiplies<float>, float>(at::native::(anonymous namespace)::"
    "TensorListMetadata<3>, at::native::(anonymous namespace)::PointwiseOpScalarFunctor<float, 3, "
    "3, 0>, std::multiplies<float>, float)";

TEST(KernelWrites, TensorListTablesAreSizedFromTheParameter) {
  // 8 * depth * T + 8 * T + 320 + 4 * 320 + 4, padded to 8.
  auto one = tensor_list_of(kTensorList1, {{0, 8 * 2 * 110 + 1608}, {3368, 4}, {3372, 1}});
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->depth, 1u);
  EXPECT_EQ(one->max_tensors, 110u);
  auto three = tensor_list_of(kTensorList3, {{0, 8 * 4 * 64 + 1608}, {3656, 4}});
  ASSERT_TRUE(three.has_value());
  EXPECT_EQ(three->depth, 3u);
  EXPECT_EQ(three->max_tensors, 64u);
  EXPECT_EQ(tensor_of_word(*three, {{0, 3656}}, 0), 0);
  EXPECT_EQ(tensor_of_word(*three, {{0, 3656}}, 8 * 65), 1);    // list 1, tensor 1
  EXPECT_EQ(tensor_of_word(*three, {{0, 3656}}, 8 * 191), 63);  // list 2, the last
  EXPECT_EQ(tensor_of_word(*three, {{0, 3656}}, 8 * 192), -1);  // numel_for_tensor
  EXPECT_EQ(tensor_of_word(*three, {{0, 3656}}, 12), -1);       // not a word
  // A size no table gives, the scalar-list variant, another kernel.
  EXPECT_FALSE(tensor_list_of(kTensorList1, {{0, 3368 + 8}}).has_value());
  EXPECT_FALSE(tensor_list_of(kTensorList1, {}).has_value());
  std::string scalar_list = kTensorList1;
  scalar_list.replace(scalar_list.find("TensorListMetadata<1>"), 21,
                      "TensorListScalarListMetadata<float, 1>");
  EXPECT_FALSE(tensor_list_of(scalar_list, {{0, 3368}}).has_value());
  EXPECT_FALSE(tensor_list_of(kFloatFill, {{0, 3368}}).has_value());
}

TEST(KernelWrites, ALaunchWorksOnTheTensorsItsBlocksName) {
  const TensorList list{0, 1, 110, 320};
  const std::vector<ParamInfo> layout{{0, 3368}};
  std::vector<uint8_t> bytes(3368, 0);
  auto set_numel = [&](int t, int64_t n) { std::memcpy(bytes.data() + 880 + 8 * t, &n, 8); };
  for (int t = 0; t < 110; ++t) set_numel(t, 65536);  // stale counts as well
  const uint32_t blocks_at = 1760;
  bytes[blocks_at + 0] = 3, bytes[blocks_at + 1] = 3, bytes[blocks_at + 2] = 4;
  bytes[blocks_at + 3] = 0;  // a stale block entry past the grid
  std::vector<uint8_t> touched;
  ASSERT_TRUE(touched_tensors(list, layout, bytes, 3, &touched));
  std::vector<int> names;
  for (int t = 0; t < 110; ++t)
    if (touched[t]) names.push_back(t);
  EXPECT_EQ(names, (std::vector<int>{3, 4}));
  // Not PyTorch's table: a block going back (its entry 3 inside the grid), more blocks than the
  // table, a tensor with no elements, bytes cut short.
  EXPECT_FALSE(touched_tensors(list, layout, bytes, 4, &touched));
  EXPECT_FALSE(touched_tensors(list, layout, bytes, 321, &touched));
  set_numel(4, 0);
  EXPECT_FALSE(touched_tensors(list, layout, bytes, 3, &touched));
  set_numel(4, 1);
  bytes[blocks_at + 2] = 110;  // past the table
  EXPECT_FALSE(touched_tensors(list, layout, bytes, 3, &touched));
  bytes.resize(2000);
  EXPECT_FALSE(touched_tensors(list, layout, bytes, 1, &touched));
}

}  // namespace
}  // namespace lockstep::collectors
