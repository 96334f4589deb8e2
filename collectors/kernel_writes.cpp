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
constexpr std::string_view kFillPrefix =
    "void at::native::vectorized_elementwise_kernel<";
constexpr std::string_view kFillFunctor = ", at::native::FillFunctor<";
constexpr std::string_view kFillTail = ">, std::array<char*, 1ul> >(int, at::native::FillFunctor<";

// Element types a fill is instantiated for, by their demangled spelling.
constexpr std::array<std::pair<std::string_view, uint32_t>, 14> kElementBytes{{
    {"float", 4}, {"double", 8}, {"c10::BFloat16", 2}, {"c10::Half", 2}, {"int", 4},
    {"long", 8}, {"short", 2}, {"signed char", 1}, {"unsigned char", 1}, {"bool", 1},
    {"c10::Float8_e4m3fn", 1}, {"c10::Float8_e5m2", 1}, {"c10::complex<float>", 8},
    {"c10::complex<double>", 16},
}};

// PyTorch's reduction (aten/src/ATen/native/cuda/Reduce.cuh): reduce_kernel<...>(ReduceOp<...>
// op), one by-value struct that ends with `const void* src; const char* dst[2]; void* acc_buf;
// void* cta_buf; int* semaphores; int64_t base_idx; bool accumulate; bool final_output; int
// noutputs;`: cta_buf is 32 bytes before its end, semaphores 24. launch_reduce_kernel allocates
// cta_buf, then the semaphores (zeroed by a memset), right before the launch.
constexpr std::string_view kReducePrefix = "void at::native::reduce_kernel<";
constexpr uint32_t kCtaBufFromEnd = 32, kSemaphoresFromEnd = 24;

}  // namespace

std::optional<ScratchWord> scratch_word_of(std::string_view name,
                                           const std::vector<ParamInfo>& layout) {
  if (!name.starts_with(kReducePrefix) || name.find("at::native::ReduceOp<") == name.npos)
    return std::nullopt;
  if (layout.size() != 1 || layout[0].size < 64 || layout[0].size % 8 != 0) return std::nullopt;
  return ScratchWord{0, layout[0].size - kCtaBufFromEnd, layout[0].size - kSemaphoresFromEnd};
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
  for (const auto& [spelling, bytes] : kElementBytes) {
    if (spelling != type) continue;
    // (int N, FillFunctor<T>, std::array<char*, 1>): a 4-byte count and an 8-byte pointer.
    if (layout.size() != 3 || layout[0].size != 4 || layout[2].size != 8) return std::nullopt;
    return WholeWrite{0, 2, bytes};
  }
  return std::nullopt;
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

}  // namespace lockstep::collectors
