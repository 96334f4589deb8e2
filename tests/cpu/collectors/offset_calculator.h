// The parameter bytes of PyTorch's strided elementwise kernel (CUDALoops.cuh's
// gpu_kernel_impl_nocast lambda, kernel_writes.h's StridedWrite) as a launch passes them, for
// tests: (int N, closure), the closure holding an OffsetCalculator<K> built as PyTorch builds it
// (OffsetCalculator.cuh, IntegerDivider.cuh) and std::array<char*, K> data, in either order.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace lockstep::collectors::testing {

inline constexpr uint32_t kCalculatorDims = 25;
inline constexpr uint32_t calculator_bytes(uint32_t k) { return 4 + kCalculatorDims * (12 + 4 * k); }

struct StridedLaunch {
  int32_t n = 0;
  // Per dimension (fastest first): its size and each operand's byte stride (output first).
  std::vector<std::pair<uint32_t, std::vector<uint32_t>>> dims;
  std::vector<uint64_t> data;  // K pointers, data[0] the output
  bool data_first = false;     // the other capture order
  uint32_t closure_bytes = 0;
  // 8-byte words left in the calculator's unused dimensions (closure offset, value): what the
  // host's stack held there, a pointer among them at times.
  std::vector<std::pair<uint32_t, uint64_t>> leftovers = {};
};

// IntDivider<unsigned int>(d): {divisor, m1, shift}.
inline void put_divider(uint8_t* at, uint32_t d) {
  uint32_t shift = 0;
  while (shift < 32 && (uint64_t{1} << shift) < d) ++shift;
  const uint32_t m1 =
      static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  std::memcpy(at, &d, 4);
  std::memcpy(at + 4, &m1, 4);
  std::memcpy(at + 8, &shift, 4);
}

// The packed bytes: N at 0, the closure at 8.
inline std::vector<uint8_t> strided_bytes(const StridedLaunch& launch) {
  const uint32_t k = static_cast<uint32_t>(launch.data.size());
  const uint32_t calculator_at = launch.data_first ? 8 * k : 0;
  const uint32_t data_at = launch.data_first ? 0 : (calculator_bytes(k) + 7) / 8 * 8;
  std::vector<uint8_t> bytes(8 + launch.closure_bytes, 0xab);  // unset bytes are garbage
  std::memcpy(bytes.data(), &launch.n, 4);
  uint8_t* calculator = bytes.data() + 8 + calculator_at;
  const int32_t dims = static_cast<int32_t>(launch.dims.size());
  std::memcpy(calculator, &dims, 4);
  for (size_t d = 0; d < launch.dims.size(); ++d) {
    put_divider(calculator + 4 + 12 * d, launch.dims[d].first);
    for (uint32_t arg = 0; arg < k; ++arg)
      std::memcpy(calculator + 4 + 12 * kCalculatorDims + 4 * (d * k + arg),
                  &launch.dims[d].second[arg], 4);
  }
  for (const auto& [at, value] : launch.leftovers) std::memcpy(bytes.data() + 8 + at, &value, 8);
  std::memcpy(bytes.data() + 8 + data_at, launch.data.data(), 8 * k);
  return bytes;
}

}  // namespace lockstep::collectors::testing
