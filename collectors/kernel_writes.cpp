// Known whole-region writers by demangled name (kernel_writes.h).
#include "collectors/kernel_writes.h"

#include <array>
#include <cstring>
#include <utility>

namespace lockstep::collectors {
namespace {

// PyTorch's fill for a contiguous tensor (aten/src/ATen/native/cuda/Fill.cu through
// CUDALoops.cuh): vectorized_elementwise_kernel<vec, FillFunctor<T>, std::array<char*, 1>>
// (int N, FillFunctor<T> f, std::array<char*, 1> data) stores f() to data[0][0..N). The vectorized
// kernel is launched only for contiguous outputs; strided fills use other kernels (not matched).
constexpr std::string_view kFillPrefix = "void at::native::vectorized_elementwise_kernel<";
constexpr std::string_view kFillFunctor = ", at::native::FillFunctor<";
constexpr std::string_view kFillTail = ">, std::array<char*, 1ul> >(int, at::native::FillFunctor<";

// Element types a fill is instantiated for, by their demangled spelling.
constexpr std::array<std::pair<std::string_view, uint32_t>, 14> kElementBytes{{
    {"float", 4},
    {"double", 8},
    {"c10::BFloat16", 2},
    {"c10::Half", 2},
    {"int", 4},
    {"long", 8},
    {"short", 2},
    {"signed char", 1},
    {"unsigned char", 1},
    {"bool", 1},
    {"c10::Float8_e4m3fn", 1},
    {"c10::Float8_e5m2", 1},
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

std::optional<WholeWrite> whole_write_of(std::string_view name,
                                         const std::vector<ParamInfo>& layout) {
  if (!name.starts_with(kFillPrefix)) return std::nullopt;
  name.remove_prefix(kFillPrefix.size());
  size_t digits = 0;
  while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
  if (digits == 0) return std::nullopt;
  name.remove_prefix(digits);
  if (!name.starts_with(kFillFunctor)) return std::nullopt;
  name.remove_prefix(kFillFunctor.size());
  const size_t tail = name.find(kFillTail);
  if (tail == std::string_view::npos) return std::nullopt;
  const std::string_view type = name.substr(0, tail);
  // The signature repeats the type: "...FillFunctor<T>, std::array<char*, 1ul>)".
  const std::string_view rest = name.substr(tail + kFillTail.size());
  if (!rest.starts_with(type) || rest.substr(type.size()) != ">, std::array<char*, 1ul>)")
    return std::nullopt;
  const uint32_t bytes = element_bytes_of(type);
  if (bytes == 0) return std::nullopt;
  // (int N, FillFunctor<T>, std::array<char*, 1>): a 4-byte count and an 8-byte pointer.
  if (layout.size() != 3 || layout[0].size != 4 || layout[2].size != 8) return std::nullopt;
  return WholeWrite{0, 2, bytes, 1};
}

uint64_t whole_write_bytes(const WholeWrite& write, const std::vector<ParamInfo>& layout,
                           const std::vector<uint8_t>& bytes) {
  if (write.count_param >= layout.size()) return 0;
  const ParamInfo& count = layout[write.count_param];
  if (count.size != sizeof(int32_t) || count.offset + sizeof(int32_t) > bytes.size()) return 0;
  int32_t n = 0;
  std::memcpy(&n, bytes.data() + count.offset, sizeof(n));
  return n > 0 ? uint64_t(n) * write.element_bytes : 0;
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
