// Known whole-region writers by demangled name (kernel_writes.h).
#include "collectors/kernel_writes.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <utility>

namespace lockstep::collectors {
namespace {

// PyTorch's contiguous elementwise kernel (aten/src/ATen/native/cuda/CUDALoops.cuh):
// vectorized_elementwise_kernel<vec_size, func_t, std::array<char*, K>>(int N, func_t f,
// std::array<char*, K> data) stores f's result for elements 0..N to data[0], reading its K - 1
// inputs from data[1..K). It is launched only when every operand is contiguous and the output's
// type is the functor's result type (no casting); strided ops take other kernels (not matched).
// A fill (Fill.cu) is FillFunctor<T> with no input: K = 1, and its functor holds the value.
constexpr std::string_view kElementwisePrefix = "void at::native::vectorized_elementwise_kernel<";
constexpr std::string_view kFillFunctor = "at::native::FillFunctor<";
// Loops.cuh's wrappers of a binary functor, with a scalar (A/BUnary) or two tensors (Binary):
// <arg1_t, arg2_t, return_t, func_t>, the third their result.
constexpr std::array<std::string_view, 3> kWrapperFunctors{
    "at::native::AUnaryFunctor<", "at::native::BUnaryFunctor<", "at::native::BinaryFunctor<"};
// torchgen's ufunc functors (torchgen/dest/ufunc.py): CUDAFunctor_<op>, CUDAFunctorOnSelf_<op>
// and CUDAFunctorOnOther_<op>, each <scalar_t> and returning scalar_t.
constexpr std::string_view kUfuncFunctor = "at::native::CUDAFunctor";
constexpr std::array<std::string_view, 3> kUfuncKinds{"_", "OnSelf_", "OnOther_"};

// Element types a fill is instantiated for, by their demangled spelling.
constexpr std::array<std::pair<std::string_view, uint32_t>, 20> kElementBytes{{
    {"float", 4},
    {"double", 8},
    {"c10::BFloat16", 2},
    {"c10::Half", 2},
    {"int", 4},
    {"long", 8},
    {"unsigned long", 8},  // uint64_t: flash attention's Philox seed and offset, filled per layer
    {"unsigned int", 4},
    {"unsigned short", 2},
    {"short", 2},
    {"signed char", 1},
    {"unsigned char", 1},
    {"bool", 1},
    {"c10::Float8_e4m3fn", 1},
    {"c10::Float8_e5m2", 1},
    {"c10::Float8_e4m3fnuz", 1},
    {"c10::Float8_e5m2fnuz", 1},
    {"c10::Float8_e8m0fnu", 1},
    {"c10::complex<float>", 8},
    {"c10::complex<double>", 16},
}};

// PyTorch's reduction (aten/src/ATen/native/cuda/Reduce.cuh): reduce_kernel<...>(ReduceOp<...>
// op), one by-value struct that ends with `const void* src; const char* dst[2]; void* acc_buf;
// void* cta_buf; int* semaphores; int64_t base_idx; bool accumulate; bool final_output; int
// noutputs;`: cta_buf is 32 bytes before its end, semaphores 24. launch_reduce_kernel allocates
// cta_buf, then the semaphores (zeroed by a memset), right before the launch.
constexpr std::string_view kReducePrefix = "void at::native::reduce_kernel<";
constexpr std::string_view kReduceOp = "at::native::ReduceOp<";
constexpr uint32_t kCtaBufFromEnd = 32, kSemaphoresFromEnd = 24;
constexpr uint32_t kDstFromEnd = 56, kAccBufFromEnd = 40, kAccumulateFromEnd = 8,
                   kFinalOutputFromEnd = 7, kNoutputsFromEnd = 4;

// The bytes of an element type by its demangled spelling (kElementBytes), or 0.
uint32_t element_bytes_of(std::string_view type) {
  for (const auto& [spelling, bytes] : kElementBytes)
    if (spelling == type) return bytes;
  return 0;
}

// The `index`th top-level template argument of the list that starts right after a '<' at
// `name[0]`: commas inside <>, () and {} belong to nested arguments. Empty when there are fewer.
std::string_view template_argument(std::string_view name, size_t index) {
  int depth = 0;
  size_t begin = 0, k = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '<' || c == '(' || c == '{') {
      ++depth;
    } else if ((c == '>' || c == ')' || c == '}') && depth > 0) {
      --depth;
    } else if ((c == ',' || c == '>') && depth == 0) {
      if (k == index) {
        std::string_view arg = name.substr(begin, i - begin);
        while (arg.starts_with(' ')) arg.remove_prefix(1);
        while (arg.ends_with(' ')) arg.remove_suffix(1);
        return arg;
      }
      if (c == '>') return {};
      ++k;
      begin = i + 1;
    } else if (c == ')' || c == '}') {  // closes what the list is inside: malformed
      return {};
    }
  }
  return {};
}

// The index of the '>' that closes the template argument list starting right after a '<' at
// `name[0]`, or npos.
size_t list_end(std::string_view name) {
  int depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '<' || c == '(' || c == '{') {
      ++depth;
    } else if (c == '>' || c == ')' || c == '}') {
      if (depth == 0) return c == '>' ? i : std::string_view::npos;
      --depth;
    }
  }
  return std::string_view::npos;
}

// Whether `text` is a non-empty run of decimal digits (a template's int argument, a lambda's #N).
bool digits(std::string_view text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
}

// PyTorch kernels whose innermost lambda returns its arguments' type (each argument scalar_t,
// the result scalar_t: `[] GPU_LAMBDA(scalar_t a) -> scalar_t`), so that its name says its
// result: SiLU and its backward (Activation*.cu), negation (UnarySignKernels.cu), a same-type
// copy (Copy.cu). The AT_DISPATCH macros wrap it in one lambda per level:
// <namespace>::<kernel>(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::...::
// {lambda(T, ...)#1}.
constexpr std::array<std::string_view, 4> kSameTypeLambdaKernels{
    "at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::",
    "at::native::(anonymous namespace)::silu_backward_kernel(at::TensorIteratorBase&)::",
    "at::native::neg_kernel_cuda(at::TensorIteratorBase&)::",
    "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"};
constexpr std::string_view kDispatchLevel = "operator()() const::";

// For such a lambda: its argument type and count (*arguments); "" for any other name.
std::string_view same_type_lambda(std::string_view functor, uint32_t* arguments) {
  *arguments = 0;
  std::string_view rest;
  for (const std::string_view kernel : kSameTypeLambdaKernels)
    if (functor.starts_with(kernel)) rest = functor.substr(kernel.size());
  if (rest.empty()) return {};
  // {lambda()#N}::operator()() const:: per dispatch level, then the innermost lambda.
  constexpr std::string_view kLambda = "{lambda(";
  for (;;) {
    if (!rest.starts_with("{lambda()#")) break;
    const size_t close = rest.find("}::");
    if (close == std::string_view::npos) return {};
    if (!digits(rest.substr(10, close - 10))) return {};
    rest.remove_prefix(close + 3);
    if (!rest.starts_with(kDispatchLevel)) return {};
    rest.remove_prefix(kDispatchLevel.size());
  }
  if (!rest.starts_with(kLambda) || !rest.ends_with(")#1}")) return {};
  std::string_view list = rest.substr(kLambda.size(), rest.size() - kLambda.size() - 4);
  std::string_view type;
  for (;;) {
    const size_t comma = list.find(", ");
    const std::string_view argument = list.substr(0, comma);
    if (argument.empty() || (!type.empty() && argument != type)) return {};
    type = argument;
    ++*arguments;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 2);
  }
  return type;
}

// What a functor's name says, when it says it: the type it returns, the pointers a kernel of it
// passes (K: its output and inputs: a fill 1, a functor with a scalar (A/BUnary, OnSelf/OnOther)
// 2, one of two tensors (Binary, CUDAFunctor_) 3, a same-type lambda its arguments + 1), and
// whether it is a FillFunctor (no input; it holds the value). Nullopt for a lambda of another
// kernel, another functor, trailing text after its template arguments.
struct Functor {
  std::string_view result;
  uint32_t operands = 0;
  bool fill = false;
};
std::optional<Functor> functor_of(std::string_view functor) {
  // The `index`th of exactly `count` template arguments, the list opening `prefix_size` bytes in
  // and closing at the name's end; "" otherwise.
  const auto argument = [&](size_t prefix_size, size_t index, size_t count) {
    const std::string_view list = functor.substr(prefix_size);
    const size_t end = list_end(list);
    if (end == std::string_view::npos || end + 1 != list.size() ||
        template_argument(list, count - 1).empty() || !template_argument(list, count).empty())
      return std::string_view{};
    return template_argument(list, index);
  };
  const auto known = [](std::string_view result, uint32_t operands, bool fill = false) {
    return result.empty() ? std::nullopt : std::optional<Functor>(Functor{result, operands, fill});
  };
  if (functor.starts_with(kFillFunctor)) return known(argument(kFillFunctor.size(), 0, 1), 1, true);
  uint32_t arguments = 0;
  if (const std::string_view type = same_type_lambda(functor, &arguments); !type.empty())
    return known(type, arguments + 1);
  for (size_t w = 0; w < kWrapperFunctors.size(); ++w)  // A/BUnary with a scalar, Binary not
    if (functor.starts_with(kWrapperFunctors[w]))
      return known(argument(kWrapperFunctors[w].size(), 2, 4), w == 2 ? 3 : 2);
  if (functor.starts_with(kUfuncFunctor)) {
    const std::string_view rest = functor.substr(kUfuncFunctor.size());
    size_t kind = kUfuncKinds.size();
    for (size_t k = 0; k < kUfuncKinds.size(); ++k)
      if (rest.starts_with(kUfuncKinds[k])) kind = k;
    const size_t open = rest.find('<');
    if (kind == kUfuncKinds.size() || open == std::string_view::npos) return std::nullopt;
    for (const char c : rest.substr(0, open))
      if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
        return std::nullopt;
    // CUDAFunctor_op: two tensors; OnSelf_/OnOther_: one and a scalar.
    return known(argument(kUfuncFunctor.size() + open + 1, 0, 1), kind == 0 ? 3 : 2);
  }
  return std::nullopt;
}

// K of "std::array<char*, Kul>", or 0.
uint32_t pointer_array_size(std::string_view type) {
  constexpr std::string_view kArray = "std::array<char*, ";
  if (!type.starts_with(kArray) || !type.ends_with("ul>")) return 0;
  const std::string_view count = type.substr(kArray.size(), type.size() - kArray.size() - 3);
  if (count.size() > 2 || !digits(count)) return 0;
  uint32_t k = 0;
  for (const char c : count) k = k * 10 + uint32_t(c - '0');
  return k;
}

// PyTorch's multi_tensor_apply (MultiTensorApply.cuh), plain TensorListMetadata<depth> only
// (the scalar-list and fused-optimizer variants have other fields).
constexpr std::string_view kTensorListPrefix =
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
    "namespace)::TensorListMetadata<";
constexpr uint32_t kMaxBlocks = 320;  // depth_to_max_blocks: 320 at every depth

}  // namespace

std::optional<TensorList> tensor_list_of(std::string_view name,
                                         const std::vector<ParamInfo>& layout) {
  if (!name.starts_with(kTensorListPrefix) || layout.empty()) return std::nullopt;
  name.remove_prefix(kTensorListPrefix.size());
  if (name.size() < 2 || name[0] < '1' || name[0] > '9' || name[1] != '>') return std::nullopt;
  const uint32_t depth = name[0] - '0';
  // 8 * depth * T (addresses) + 8 * T (numel) + B + 4 * B + 4, padded to 8.
  const uint32_t fixed = (kMaxBlocks * 5 + 4 + 7) / 8 * 8;
  const uint32_t size = layout[0].size, per_tensor = 8 * (depth + 1);
  if (layout[0].offset != 0 || size <= fixed || (size - fixed) % per_tensor != 0)
    return std::nullopt;
  return TensorList{0, depth, (size - fixed) / per_tensor, kMaxBlocks};
}

bool touched_tensors(const TensorList& list, const std::vector<ParamInfo>& layout,
                     const std::vector<uint8_t>& bytes, uint32_t grid_x,
                     std::vector<uint8_t>* touched) {
  if (list.param >= layout.size() || grid_x == 0 || grid_x > list.max_blocks) return false;
  const uint64_t base = layout[list.param].offset;
  const uint64_t numel_at = base + 8ull * list.depth * list.max_tensors;
  const uint64_t blocks_at = numel_at + 8ull * list.max_tensors;
  if (blocks_at + list.max_blocks > bytes.size()) return false;
  touched->assign(list.max_tensors, 0);
  uint32_t previous = 0;
  for (uint32_t b = 0; b < grid_x; ++b) {
    const uint32_t t = bytes[blocks_at + b];
    if (t >= list.max_tensors || t < previous) return false;
    previous = t;
    if ((*touched)[t]) continue;
    int64_t numel = 0;
    std::memcpy(&numel, bytes.data() + numel_at + 8ull * t, sizeof(numel));
    if (numel <= 0) return false;
    (*touched)[t] = 1;
  }
  return true;
}

int tensor_of_word(const TensorList& list, const std::vector<ParamInfo>& layout,
                   uint32_t byte_offset) {
  if (list.param >= layout.size() || byte_offset < layout[list.param].offset) return -1;
  const uint32_t inside = byte_offset - layout[list.param].offset;
  if (inside % 8 != 0 || inside >= 8 * list.depth * list.max_tensors) return -1;
  return static_cast<int>(inside / 8 % list.max_tensors);
}

namespace {
// The size of a reduce_kernel's one ReduceOp parameter (the struct whose tail the offsets above
// count back from), or 0 when the name or the layout is another.
uint32_t reduce_op_size(std::string_view name, const std::vector<ParamInfo>& layout) {
  if (!name.starts_with(kReducePrefix) || name.find(kReduceOp) == name.npos) return 0;
  if (layout.size() != 1 || layout[0].offset != 0 || layout[0].size < 64 || layout[0].size % 8 != 0)
    return 0;
  return layout[0].size;
}
}  // namespace

std::optional<ScratchWord> scratch_word_of(std::string_view name,
                                           const std::vector<ParamInfo>& layout) {
  const uint32_t size = reduce_op_size(name, layout);
  if (size == 0) return std::nullopt;
  return ScratchWord{0, size - kCtaBufFromEnd, size - kSemaphoresFromEnd};
}

std::optional<ReducedElement> reduced_element_of(std::string_view name,
                                                 const std::vector<ParamInfo>& layout) {
  const uint32_t size = reduce_op_size(name, layout);
  if (size == 0) return std::nullopt;
  // ReduceOp<scalar_t, ops_t, index_t, out_scalar_t, vt0, input_vec_size>
  const size_t op = name.find(kReduceOp) + kReduceOp.size();
  const uint32_t element = element_bytes_of(template_argument(name.substr(op), 3));
  if (element == 0) return std::nullopt;
  return ReducedElement{0,
                        size - kDstFromEnd,
                        size - kAccBufFromEnd,
                        size - kAccumulateFromEnd,
                        size - kFinalOutputFromEnd,
                        size - kNoutputsFromEnd,
                        element};
}

bool reduction_overwrites_output(const ReducedElement& reduced,
                                 const std::vector<ParamInfo>& layout,
                                 const std::vector<uint8_t>& bytes) {
  if (reduced.param >= layout.size()) return false;
  const uint64_t base = layout[reduced.param].offset;
  if (base + reduced.noutputs_offset + sizeof(int32_t) > bytes.size()) return false;
  uint64_t acc_buf = 0;
  int32_t noutputs = 0;
  std::memcpy(&acc_buf, bytes.data() + base + reduced.acc_buf_offset, sizeof(acc_buf));
  std::memcpy(&noutputs, bytes.data() + base + reduced.noutputs_offset, sizeof(noutputs));
  const uint8_t accumulate = bytes[base + reduced.accumulate_offset];
  const uint8_t final_output = bytes[base + reduced.final_output_offset];
  return noutputs == 1 && accumulate == 0 && (acc_buf == 0 || final_output == 1);
}

namespace {
// A launch's ReduceConfig inside its ReduceOp: where it starts and its num_outputs.
struct FoundConfig {
  uint32_t at = 0;
  uint64_t outputs = 0;
};
// ReduceOp<...> { ops_t ops; arg_t ident; ReduceConfig config; InputCalculator input_calc;
// OutputCalculator output_calc; const void* src; const char* dst[2]; ... } (Reduce.cuh), and
// ReduceConfig { int element_size_bytes, num_inputs, num_outputs, step_input, step_output,
// ctas_per_output, input_mult[3], output_mult[2], block_width, block_height, num_threads;
// bool vectorize_input; int output_vec_size; }: 64 bytes, after at most 64 of ops and ident.
constexpr uint32_t kConfigBytes = 64, kMostBefore = 64;
std::optional<FoundConfig> find_config(const ReducedElement& reduced,
                                       const std::vector<ParamInfo>& layout,
                                       const std::vector<uint8_t>& bytes, const unsigned grid[3],
                                       const unsigned block[3]) {
  if (reduced.param >= layout.size() || grid[2] != 1 || block[2] != 1) return std::nullopt;
  const uint64_t base = layout[reduced.param].offset;
  if (base + layout[reduced.param].size > bytes.size() || reduced.dst_offset < 8)
    return std::nullopt;
  const uint32_t src = reduced.dst_offset - 8;
  const auto int_at = [&](uint32_t at) {
    int32_t v = 0;
    std::memcpy(&v, bytes.data() + base + at, sizeof(v));
    return int64_t{v};
  };
  for (uint32_t at = 0; at <= kMostBefore && at + kConfigBytes <= src; at += 4) {
    const int64_t element = int_at(at), inputs = int_at(at + 4), outputs = int_at(at + 8),
                  step_input = int_at(at + 12), step_output = int_at(at + 16),
                  ctas = int_at(at + 20), width = int_at(at + 44), height = int_at(at + 48),
                  threads = int_at(at + 52), vec = int_at(at + 60);
    if (element < 1 || element > 64 || inputs < 1 || outputs < 1 || step_input < 1 ||
        step_output < 1 || ctas < 1 || !(vec == 1 || vec == 2 || vec == 4 || vec == 8) ||
        outputs % vec != 0)
      continue;
    if (width != block[0] || height != block[1] || threads != width * height) continue;
    if ((outputs / vec + step_output - 1) / step_output != grid[0] || ctas != grid[1]) continue;
    return FoundConfig{at, uint64_t(outputs)};
  }
  return std::nullopt;
}
}  // namespace

std::optional<ReductionConfig> reduction_config(const ReducedElement& reduced,
                                                const std::vector<ParamInfo>& layout,
                                                const std::vector<uint8_t>& bytes,
                                                const unsigned grid[3], const unsigned block[3]) {
  const std::optional<FoundConfig> config = find_config(reduced, layout, bytes, grid, block);
  if (!config) return std::nullopt;
  return ReductionConfig{config->outputs, config->at + kConfigBytes, reduced.dst_offset - 8};
}

namespace {
// CUDALoops.cuh's contiguous path where a pointer is not aligned for vector loads (vec_size 1:
// a view that starts mid-vector): unrolled_elementwise_kernel<func_t, array_t, elems_per_thread,
// inp_calc_t, out_calc_t, loader_t, storer_t>(int N, func_t f, array_t data, inp_calc_t,
// out_calc_t, loader_t, storer_t), with trivial offset calculators (element i at i) and loads and
// stores without casting: f's result for elements 0..N to data[0], as the vectorized kernel.
// Where operand types differ (gpu_kernel_impl's dynamic casting, contiguous), the same kernel
// with LoadWithCast<K-1> and StoreWithCast<1>: element i, cast to the output's type, at data[0] +
// i * element_sizes[0] (MemoryAccess.cuh), the type and size the storer's bytes. Other
// calculators (strided operands) are not matched.
constexpr std::string_view kUnrolledPrefix = "void at::native::unrolled_elementwise_kernel<";

// c10::ScalarType's values and their sizes, for a casting store's check that its two agree.
constexpr std::array<std::pair<uint8_t, uint32_t>, 12> kScalarTypeBytes{{
    {0, 1},    // Byte
    {1, 1},    // Char
    {2, 2},    // Short
    {3, 4},    // Int
    {4, 8},    // Long
    {5, 2},    // Half
    {6, 4},    // Float
    {7, 8},    // Double
    {9, 8},    // ComplexFloat
    {10, 16},  // ComplexDouble
    {11, 1},   // Bool
    {15, 2},   // BFloat16
}};

// The whole write of an unrolled kernel's name (the part after kUnrolledPrefix), or nullopt.
std::optional<WholeWrite> unrolled_whole_write_of(std::string_view name,
                                                  const std::vector<ParamInfo>& layout) {
  const size_t end = list_end(name);
  if (end == std::string_view::npos) return std::nullopt;
  const std::string_view functor = template_argument(name, 0), array = template_argument(name, 1);
  const uint32_t k = pointer_array_size(array);
  const std::optional<Functor> f = functor_of(functor);
  if (!f || k == 0 || k != f->operands) return std::nullopt;
  const uint32_t element = element_bytes_of(f->result);
  if (element == 0) return std::nullopt;
  // elems_per_thread (an int) where this PyTorch has it, then the calculators, loader, storer:
  // both without casting, or both with.
  const size_t first = digits(template_argument(name, 2)) ? 3 : 2;
  const std::string inputs = "TrivialOffsetCalculator<" + std::to_string(k - 1) + ", unsigned int>";
  const std::string cast_loads = "at::native::memory::LoadWithCast<" + std::to_string(k - 1) + ">";
  const bool casts = template_argument(name, first + 2) == cast_loads;
  const std::array<std::string_view, 4> rest{
      inputs, "TrivialOffsetCalculator<1, unsigned int>",
      casts ? std::string_view(cast_loads) : "at::native::memory::LoadWithoutCast",
      casts ? "at::native::memory::StoreWithCast<1>" : "at::native::memory::StoreWithoutCast"};
  for (size_t i = 0; i < rest.size(); ++i)
    if (template_argument(name, first + i) != rest[i]) return std::nullopt;
  if (casts && f->fill) return std::nullopt;  // a fill does not cast: not PyTorch's
  if (!template_argument(name, first + rest.size()).empty()) return std::nullopt;
  std::string signature = "(int, " + std::string(functor) + ", " + std::string(array);
  for (const std::string_view type : rest) signature += ", " + std::string(type);
  if (name.substr(end + 1) != signature + ")") return std::nullopt;
  // (int N, func_t, std::array<char*, K>, two empty calculators, the loader, the storer): data[0]
  // first in the third; a casting storer {ScalarType dtypes[1]; uint32_t element_sizes[1]}.
  if (layout.size() != 7 || layout[0].size != 4 || layout[2].size != 8 * k) return std::nullopt;
  if (casts) {
    if (layout[6].size != 8) return std::nullopt;
    return WholeWrite{0, 2, 0, WholeWrite::kNoValue, 6};
  }
  return WholeWrite{0, 2, element, f->fill ? 1u : WholeWrite::kNoValue};
}
}  // namespace

std::optional<WholeWrite> whole_write_of(std::string_view name,
                                         const std::vector<ParamInfo>& layout) {
  if (name.starts_with(kUnrolledPrefix))
    return unrolled_whole_write_of(name.substr(kUnrolledPrefix.size()), layout);
  if (!name.starts_with(kElementwisePrefix)) return std::nullopt;
  name.remove_prefix(kElementwisePrefix.size());
  const size_t end = list_end(name);
  if (end == std::string_view::npos) return std::nullopt;
  const std::string_view vec = template_argument(name, 0), functor = template_argument(name, 1),
                         array = template_argument(name, 2);
  if (!digits(vec) || functor.empty() || !template_argument(name, 3).empty())
    return std::nullopt;
  // The signature repeats the functor and the array: "(int, func_t, std::array<char*, K>)".
  if (name.substr(end + 1) != "(int, " + std::string(functor) + ", " + std::string(array) + ")")
    return std::nullopt;
  const uint32_t k = pointer_array_size(array);
  const std::optional<Functor> f = functor_of(functor);
  // A fill has its output alone; any other functor reads as many inputs as its kind has.
  if (!f || k == 0 || k != f->operands) return std::nullopt;
  const uint32_t bytes = element_bytes_of(f->result);
  if (bytes == 0) return std::nullopt;
  // (int N, func_t, std::array<char*, K>): a 4-byte count and K 8-byte pointers, data[0] first.
  if (layout.size() != 3 || layout[0].size != 4 || layout[2].size != 8 * k) return std::nullopt;
  return WholeWrite{0, 2, bytes, f->fill ? 1u : WholeWrite::kNoValue};
}

namespace {
// CUDALoops.cuh's strided path: elementwise_kernel<nt, vt, L>(int, L) with L the lambda of
// gpu_kernel_impl_nocast<func_t>(at::TensorIteratorBase&, func_t const&).
constexpr std::string_view kStridedPrefix = "void at::native::elementwise_kernel<";
constexpr std::string_view kNocast = "at::native::gpu_kernel_impl_nocast<";
// OffsetCalculator.cuh (CUDA builds): MAX_DIMS 25; int dims, IntDivider<uint32_t> {divisor, m1,
// shift} sizes_[25], uint32_t strides_[25][K].
constexpr uint32_t kMaxDims = 25, kDividerBytes = 12, kSizesAt = 4;
constexpr uint32_t calculator_bytes(uint32_t k) { return kSizesAt + kMaxDims * (kDividerBytes + 4 * k); }
// The functor's own bytes after data (a scalar of at most 16, padded): the closure's slack.
constexpr uint32_t kMostFunctorBytes = 24;

// IntegerDivider.cuh's IntDivider<unsigned int>(d): shift the least with 2^shift >= d, m1 the
// magic number ((2^32 (2^shift - d)) / d + 1) mod 2^32.
bool divider_holds(uint32_t divisor, uint32_t m1, uint32_t shift) {
  if (divisor == 0) return false;
  uint32_t s = 0;
  while (s < 32 && (uint64_t{1} << s) < divisor) ++s;
  if (shift != s) return false;
  const uint64_t magic = ((uint64_t{1} << 32) * ((uint64_t{1} << s) - divisor)) / divisor + 1;
  return m1 == static_cast<uint32_t>(magic);
}
}  // namespace

std::optional<StridedWrite> strided_write_of(std::string_view name,
                                             const std::vector<ParamInfo>& layout) {
  if (!name.starts_with(kStridedPrefix)) return std::nullopt;
  name.remove_prefix(kStridedPrefix.size());
  const size_t end = list_end(name);
  if (end == std::string_view::npos) return std::nullopt;
  const std::string_view nt = template_argument(name, 0), vt = template_argument(name, 1),
                         lambda = template_argument(name, 2);
  if (!digits(nt) || !digits(vt) || lambda.empty() || !template_argument(name, 3).empty())
    return std::nullopt;
  if (name.substr(end + 1) != "(int, " + std::string(lambda) + ")") return std::nullopt;
  // The lambda: gpu_kernel_impl_nocast<F>(at::TensorIteratorBase&, F const&)::{lambda(int)#1}.
  if (!lambda.starts_with(kNocast)) return std::nullopt;
  const std::string_view rest = lambda.substr(kNocast.size());
  const size_t close = list_end(rest);
  if (close == std::string_view::npos) return std::nullopt;
  const std::string_view functor = template_argument(rest, 0);
  if (functor.empty() || !template_argument(rest, 1).empty()) return std::nullopt;
  if (rest.substr(close + 1) !=
      "(at::TensorIteratorBase&, " + std::string(functor) + " const&)::{lambda(int)#1}")
    return std::nullopt;
  const std::optional<Functor> f = functor_of(functor);
  const uint32_t element = f ? element_bytes_of(f->result) : 0, k = f ? f->operands : 0;
  if (element == 0) return std::nullopt;
  // (int N, L): the closure 8-aligned after the count; room for the calculator and data in
  // either order, and no more than a functor's few bytes besides.
  if (layout.size() != 2 || layout[0].offset != 0 || layout[0].size != 4 || layout[1].offset != 8)
    return std::nullopt;
  const uint32_t calculator = calculator_bytes(k), data = 8 * k;
  const uint32_t calculator_first = (calculator + 7) / 8 * 8;  // data's place after it
  const uint32_t least = std::max(calculator_first + data, data + calculator);
  if (layout[1].size < least || layout[1].size > least + kMostFunctorBytes) return std::nullopt;
  return StridedWrite{0, 1, k, element, {{{0, calculator_first}, {data, 0}}}};
}

std::optional<StridedOutput> strided_output(const StridedWrite& write,
                                            const std::vector<ParamInfo>& layout,
                                            const std::vector<uint8_t>& bytes) {
  if (write.count_param >= layout.size() || write.closure_param >= layout.size()) return std::nullopt;
  const ParamInfo& count = layout[write.count_param];
  const ParamInfo& closure = layout[write.closure_param];
  if (count.size != sizeof(int32_t) || count.offset + sizeof(int32_t) > bytes.size() ||
      uint64_t{closure.offset} + closure.size > bytes.size())
    return std::nullopt;
  int32_t n = 0;
  std::memcpy(&n, bytes.data() + count.offset, sizeof(n));
  if (n <= 0) return std::nullopt;
  const uint32_t calculator = calculator_bytes(write.args);
  const auto u32_at = [&](uint64_t at) {
    uint32_t v = 0;
    std::memcpy(&v, bytes.data() + at, sizeof(v));
    return v;
  };
  std::optional<StridedOutput> found;
  for (const auto& [calculator_at, data_at] : write.places) {
    if (uint64_t{calculator_at} + calculator > closure.size ||
        uint64_t{data_at} + 8 * write.args > closure.size)
      continue;
    const uint64_t at = uint64_t{closure.offset} + calculator_at;
    const uint32_t dims = u32_at(at);
    if (dims < 1 || dims > kMaxDims) continue;
    // (byte stride, size) of each dimension of more than one element, for the output.
    std::array<std::pair<uint64_t, uint64_t>, kMaxDims> extents{};
    size_t used = 0;
    uint64_t elements = 1;
    bool holds = true;
    for (uint32_t d = 0; d < dims && holds; ++d) {
      const uint64_t divider = at + kSizesAt + uint64_t{kDividerBytes} * d;
      const uint32_t size = u32_at(divider);
      holds = divider_holds(size, u32_at(divider + 4), u32_at(divider + 8));
      elements *= holds ? size : 1;
      holds = holds && elements <= uint64_t(n);
      const uint32_t stride = u32_at(at + kSizesAt + uint64_t{kDividerBytes} * kMaxDims +
                                     4ull * (uint64_t{d} * write.args));
      if (holds && size > 1) extents[used++] = {stride, size};
    }
    if (!holds || elements != uint64_t(n)) continue;
    std::sort(extents.begin(), extents.begin() + used);
    uint64_t next = write.element_bytes;  // the stride a dense next dimension must have
    bool dense = true;
    for (size_t e = 0; e < used && dense; ++e) {
      dense = extents[e].first == next;
      next *= extents[e].second;
    }
    if (found) return std::nullopt;  // both places read as a calculator: trust neither
    found = StridedOutput{data_at, dense ? uint64_t(n) * write.element_bytes : 0, calculator_at,
                          calculator};
  }
  return found;
}

namespace {
constexpr std::string_view kCatPrefix =
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy<";
constexpr std::string_view kOpaque = "at::native::(anonymous namespace)::OpaqueType<";
constexpr uint32_t kCatMaxDims = 4;  // CAT_ARRAY_MAX_INPUT_DIMS
constexpr uint32_t kSizeStrideBytes = 2 * kCatMaxDims * 4;  // TensorSizeStride<unsigned int, 4>

// The metadata's bytes for n inputs and stride_size entries, 32-bit indices.
uint32_t cat_metadata_bytes(uint32_t n, uint32_t strides) {
  const uint32_t tensor_stride_at = (21 * n + 3) / 4 * 4;
  return (tensor_stride_at + kSizeStrideBytes * strides + 7) / 8 * 8;
}
// A small decimal, or 0.
uint32_t small_number(std::string_view text) {
  if (!digits(text) || text.size() > 4) return 0;
  uint32_t v = 0;
  for (const char c : text) v = v * 10 + uint32_t(c - '0');
  return v;
}
}  // namespace

std::optional<CatWrite> cat_write_of(std::string_view name, const std::vector<ParamInfo>& layout) {
  if (!name.starts_with(kCatPrefix)) return std::nullopt;
  name.remove_prefix(kCatPrefix.size());
  const size_t end = list_end(name);
  if (end == std::string_view::npos || !template_argument(name, 5).empty()) return std::nullopt;
  const std::string_view type = template_argument(name, 0), index = template_argument(name, 1);
  const uint32_t dims = small_number(template_argument(name, 2)),
                 batch = small_number(template_argument(name, 3)),
                 strides = small_number(template_argument(name, 4));
  if (!type.starts_with(kOpaque) || !type.ends_with("u>") || index != "unsigned int" ||
      dims == 0 || dims > kCatMaxDims || batch == 0 || strides == 0 || strides > batch)
    return std::nullopt;
  const uint32_t element =
      small_number(type.substr(kOpaque.size(), type.size() - kOpaque.size() - 2));
  if (element == 0 || element > 16) return std::nullopt;
  const std::string t(type);
  const std::string signature =
      "(" + t + "*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<" + t +
      ", unsigned int, " + std::to_string(batch) + ", " + std::to_string(strides) +
      ">, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned "
      "int)";
  if (name.substr(end + 1) != signature) return std::nullopt;
  if (layout.size() != 5 || layout[0].size != 8 ||
      layout[1].size != cat_metadata_bytes(batch, strides) || layout[2].size != kSizeStrideBytes ||
      layout[3].size != 4 || layout[4].size != 4)
    return std::nullopt;
  return CatWrite{element, dims, batch, strides};
}

std::optional<CatOutput> cat_output(const CatWrite& write, const std::vector<ParamInfo>& layout,
                                    const std::vector<uint8_t>& bytes, uint32_t grid_y) {
  if (layout.size() != 5 || grid_y == 0 || grid_y > write.batch) return std::nullopt;
  for (const ParamInfo& p : layout)
    if (uint64_t{p.offset} + p.size > bytes.size()) return std::nullopt;
  const auto u32_at = [&](uint64_t at) {
    uint32_t v = 0;
    std::memcpy(&v, bytes.data() + at, sizeof(v));
    return v;
  };
  const uint64_t meta = layout[1].offset, os = layout[2].offset, n = write.batch;
  const uint32_t concat = u32_at(layout[3].offset), dim_stride = u32_at(layout[4].offset);
  if (concat >= write.dims) return std::nullopt;
  CatOutput out{0, static_cast<uint32_t>(8 * grid_y)};
  // The output: dense (sorted by stride, each the product of the sizes before), its elements.
  std::array<std::pair<uint64_t, uint64_t>, kCatMaxDims> extents{};
  size_t used = 0;
  uint64_t elements = 1, others = 1;
  for (uint32_t d = 0; d < write.dims; ++d) {
    const uint64_t size = u32_at(os + 4 * d), stride = u32_at(os + 4 * (kCatMaxDims + d));
    elements *= size;
    if (d != concat) others *= size;
    if (size > 1) extents[used++] = {stride, size};
  }
  if (elements == 0 || dim_stride != u32_at(os + 4 * (kCatMaxDims + concat))) return out;
  std::sort(extents.begin(), extents.begin() + used);
  uint64_t next = 1;
  for (size_t e = 0; e < used; ++e) {
    if (extents[e].first != next) return out;
    next *= extents[e].second;
  }
  // The inputs' slabs, in offset order, tile [0, size of concatDim).
  std::array<std::pair<uint64_t, uint64_t>, 256> slabs;  // (offset, dimSize): [0, grid_y) set
  if (grid_y > slabs.size()) return out;
  for (uint32_t i = 0; i < grid_y; ++i) {
    const uint64_t offset = u32_at(meta + 8 * n + 4 * i), size = u32_at(meta + 12 * n + 4 * i),
                   count = u32_at(meta + 16 * n + 4 * i);
    if (size == 0 || count != size * others) return out;
    slabs[i] = {offset, size};
  }
  std::sort(slabs.begin(), slabs.begin() + grid_y);
  uint64_t reached = 0;
  for (uint32_t i = 0; i < grid_y; ++i) {
    if (slabs[i].first != reached) return out;
    reached += slabs[i].second;
  }
  if (reached != u32_at(os + 4 * concat)) return out;
  out.bytes = elements * write.element_bytes;
  return out;
}

uint64_t whole_write_bytes(const WholeWrite& write, const std::vector<ParamInfo>& layout,
                           const std::vector<uint8_t>& bytes) {
  if (write.count_param >= layout.size()) return 0;
  const ParamInfo& count = layout[write.count_param];
  if (count.size != sizeof(int32_t) || count.offset + sizeof(int32_t) > bytes.size()) return 0;
  int32_t n = 0;
  std::memcpy(&n, bytes.data() + count.offset, sizeof(n));
  uint64_t element = write.element_bytes;
  if (write.stored_param != WholeWrite::kNoValue) {  // StoreWithCast<1>: its type and size
    if (write.stored_param >= layout.size()) return 0;
    const ParamInfo& stored = layout[write.stored_param];
    if (stored.size != 8 || uint64_t{stored.offset} + 8 > bytes.size()) return 0;
    const uint8_t type = bytes[stored.offset];
    uint32_t size = 0;
    std::memcpy(&size, bytes.data() + stored.offset + 4, sizeof(size));
    element = 0;
    for (const auto& [value, type_bytes] : kScalarTypeBytes)
      if (value == type && type_bytes == size) element = size;
  }
  return n > 0 ? uint64_t(n) * element : 0;
}

bool whole_write_value(const WholeWrite& write, const std::vector<ParamInfo>& layout,
                       const std::vector<uint8_t>& bytes, std::array<uint8_t, 16>* value) {
  if (write.value_param >= layout.size()) return false;
  const ParamInfo& param = layout[write.value_param];
  if (param.size != write.element_bytes || param.size > value->size() ||
      param.offset + param.size > bytes.size())
    return false;
  value->fill(0);
  std::memcpy(value->data(), bytes.data() + param.offset, param.size);
  return true;
}

}  // namespace lockstep::collectors
