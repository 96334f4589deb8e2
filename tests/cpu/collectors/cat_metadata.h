// The parameter bytes of PyTorch's concatenation kernel (Shape.cu's CatArrayBatchedCopy<
// OpaqueType<N>, unsigned int, Dims, 64, 64>, kernel_writes.h's CatWrite) as a launch passes
// them, for tests: the output pointer at 0, the 3392-byte CatArrInputTensorMetadata at 8 ({T*
// input[64]; unsigned offset[64], dimSize[64], nElements[64]; bool isContiguous[64];
// TensorSizeStride tensorStride[64]}), the output's TensorSizeStride<unsigned, 4> at 3400,
// concatDim at 3432 and dimStride at 3436.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "collectors/kernel_params.h"

namespace lockstep::collectors::testing {

inline constexpr uint32_t kCatBatch = 64;
inline const std::vector<ParamInfo> kCatLayout{{0, 8}, {8, 3392}, {3400, 32}, {3432, 4}, {3436, 4}};

struct CatInput {
  uint64_t data = 0;
  uint32_t offset = 0;    // along concatDim, in elements
  uint32_t dim_size = 0;  // its size there
  uint32_t elements = 0;  // nElements
};
struct CatLaunch {
  uint64_t output = 0;
  std::vector<CatInput> inputs;
  std::array<uint32_t, 4> sizes{};    // the output's, in elements
  std::array<uint32_t, 4> strides{};  // the output's, in elements
  uint32_t concat_dim = 0;
  uint32_t dim_stride = 0;
  // 8-byte words left in the metadata past the inputs (offset inside it, value).
  std::vector<std::pair<uint32_t, uint64_t>> leftovers = {};
};

inline std::vector<uint8_t> cat_bytes(const CatLaunch& l) {
  std::vector<uint8_t> b(3440, 0);
  std::memcpy(b.data(), &l.output, 8);
  uint8_t* meta = b.data() + 8;
  for (const auto& [at, value] : l.leftovers) std::memcpy(meta + at, &value, 8);
  for (size_t i = 0; i < l.inputs.size(); ++i) {
    std::memcpy(meta + 8 * i, &l.inputs[i].data, 8);
    std::memcpy(meta + 8 * kCatBatch + 4 * i, &l.inputs[i].offset, 4);
    std::memcpy(meta + 12 * kCatBatch + 4 * i, &l.inputs[i].dim_size, 4);
    std::memcpy(meta + 16 * kCatBatch + 4 * i, &l.inputs[i].elements, 4);
    meta[20 * kCatBatch + i] = 1;  // isContiguous
  }
  std::memcpy(b.data() + 3400, l.sizes.data(), 16);
  std::memcpy(b.data() + 3416, l.strides.data(), 16);
  std::memcpy(b.data() + 3432, &l.concat_dim, 4);
  std::memcpy(b.data() + 3436, &l.dim_stride, 4);
  return b;
}

// rotate_half's torch.cat([-x2, x1], dim=-1) of two [1, 1, rows, half] bf16 tensors into a
// contiguous [1, 1, rows, 2 * half] one.
inline CatLaunch halves_cat(uint64_t output, uint64_t first, uint64_t second, uint32_t rows,
                            uint32_t half) {
  CatLaunch l;
  l.output = output;
  l.inputs = {{first, 0, half, rows * half}, {second, half, half, rows * half}};
  l.sizes = {1, 1, rows, 2 * half};
  l.strides = {rows * 2 * half, rows * 2 * half, 2 * half, 1};
  l.concat_dim = 3;
  l.dim_stride = 1;
  return l;
}

}  // namespace lockstep::collectors::testing
