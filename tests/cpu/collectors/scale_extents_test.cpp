#include <algorithm>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "collectors/extents.h"

namespace lockstep::collectors {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Independent construction of the MX/NV 128x4-tile layout, the way quantization libraries
// "swizzle" a (rows, cols) scale matrix: pad to (R, C) = (roundup(rows,128), roundup(cols,4)),
// view as [R/128][4][32][C/4][4] (row = t*128 + g*32 + i, col = u*4 + j), permute to
// [R/128][C/4][32][4][4] (t, u, i, g, j) and flatten row-major. Returns offset[row][col].
std::vector<std::vector<uint64_t>> swizzled_offsets(uint64_t rows, uint64_t cols) {
  const uint64_t R = ceil_div(rows, 128) * 128, C = ceil_div(cols, 4) * 4;
  std::vector<std::vector<uint64_t>> offset(R, std::vector<uint64_t>(C));
  const uint64_t dims[5] = {R / 128, C / 4, 32, 4, 4};  // t, u, i, g, j
  for (uint64_t row = 0; row < R; ++row)
    for (uint64_t col = 0; col < C; ++col) {
      const uint64_t t = row / 128, g = (row % 128) / 32, i = row % 32, u = col / 4, j = col % 4;
      const uint64_t index[5] = {t, u, i, g, j};
      uint64_t flat = 0;
      for (int d = 0; d < 5; ++d) flat = flat * dims[d] + index[d];
      offset[row][col] = flat;
    }
  return offset;
}

TEST(ScaleExtents, BlockScaleOffsetMatchesTheSwizzleAndSizeCoversIt) {
  const cublasLtMatmulMatrixScale_t modes[] = {CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0,
                                               CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3};
  for (auto mode : modes)
    for (uint64_t outer : {1ull, 100ull, 128ull, 129ull, 300ull})
      for (uint64_t inner : {16ull, 32ull, 96ull, 160ull, 512ull, 1000ull}) {
        const uint64_t block = static_cast<uint64_t>(block_scale_block_size(mode));
        const uint64_t scale_cols = ceil_div(inner, block);
        auto reference = swizzled_offsets(outer, scale_cols);
        const uint64_t bytes = scale_buffer_bytes(mode, outer, inner);
        std::vector<bool> used(bytes, false);
        for (uint64_t r = 0; r < reference.size(); ++r)
          for (uint64_t c = 0; c < reference[r].size(); ++c) {
            const uint64_t got = block_scale_offset(r, c, scale_cols);
            ASSERT_EQ(got, reference[r][c]) << "outer " << outer << " inner " << inner;
            ASSERT_LT(got, bytes);
            ASSERT_FALSE(used[got]) << "two scales at one byte";
            used[got] = true;
          }
        // The padded buffer is exactly the tiles: every byte belongs to some scale.
        EXPECT_TRUE(std::all_of(used.begin(), used.end(), [](bool b) { return b; }));
      }
}

TEST(ScaleExtents, DocumentedSizesOfMxAndNvBlocks) {
  // MXFP8: roundup(outer,128) * roundup(ceil(inner/32),4).
  EXPECT_EQ(scale_buffer_bytes(CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0, 256, 1024), 256u * 32);
  EXPECT_EQ(scale_buffer_bytes(CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0, 1, 32), 128u * 4);
  EXPECT_EQ(scale_buffer_bytes(CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0, 130, 200),
            256u * 8);  // ceil(200/32) = 7 -> 8
  // NVFP4: block 16, K counted unpacked.
  EXPECT_EQ(scale_buffer_bytes(CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3, 128, 64), 128u * 4);
  EXPECT_EQ(scale_buffer_bytes(CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3, 128, 80), 128u * 8);
  EXPECT_EQ(block_scale_block_size(CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F), 0);
}

TEST(ScaleExtents, FloatScaleModes) {
  EXPECT_EQ(scale_buffer_bytes(CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, 4096, 4096), 4u);
  EXPECT_EQ(scale_buffer_bytes(CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, 300, 4096), 1200u);
  // VEC128: (outer, ceil(inner/128)) floats.
  EXPECT_EQ(scale_buffer_bytes(CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, 300, 129), 4u * 300 * 2);
  EXPECT_EQ(scale_buffer_bytes(CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, 64, 128), 4u * 64);
  // BLK128x128: ceil(outer/128) rows of ceil(inner/128) floats, row stride padded to 16 bytes.
  EXPECT_EQ(scale_buffer_bytes(CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, 128, 128), 4u);
  EXPECT_EQ(scale_buffer_bytes(CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, 256, 640),
            4u * (8 + 5));  // 2 rows of 5 -> stride 8
  EXPECT_EQ(scale_buffer_bytes(CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, 512, 512),
            4u * (4 * 3 + 4));
  EXPECT_EQ(scale_buffer_bytes(static_cast<cublasLtMatmulMatrixScale_t>(99), 1, 1), 0u);
  EXPECT_EQ(scale_dtype(CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0), trace::DType::UE8M0);
  EXPECT_EQ(scale_dtype(CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3), trace::DType::UE4M3);
  EXPECT_EQ(scale_dtype(CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F), trace::DType::F32);
}

}  // namespace
}  // namespace lockstep::collectors
