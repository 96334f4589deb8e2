// Scale buffer extents of cuBLASLt's scale modes (cublasLt.h cublasLtMatmulMatrixScale_t; the
// cuBLAS documentation "1D Block Scaling Factors Layout" for the MX/NV 128x4 tiles).
#include <cublasLt.h>

#include "collectors/extents.h"

namespace lockstep::collectors {
namespace {
uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
uint64_t round_up(uint64_t a, uint64_t b) { return ceil_div(a, b) * b; }
}  // namespace

int block_scale_block_size(cublasLtMatmulMatrixScale_t mode) {
  if (mode == CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0) return 32;
  if (mode == CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3) return 16;
  return 0;
}

uint64_t block_scale_offset(uint64_t r, uint64_t c, uint64_t scale_cols) {
  // Tiles of 128 rows x 4 columns (512 bytes), tile columns contiguous within a tile row; the
  // column count is padded to whole tiles. Inside a tile, 32 rows of 16 bytes, each holding
  // 4 row groups (r%128)/32 x 4 columns.
  const uint64_t padded_cols = round_up(scale_cols, 4);
  return ((c / 4) * 4 + (r / 128) * padded_cols) * 128 + (r % 32) * 16 + ((r % 128) / 32) * 4 +
         c % 4;
}

uint64_t scale_buffer_bytes(cublasLtMatmulMatrixScale_t mode, uint64_t outer, uint64_t inner) {
  switch (mode) {
    case CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F:
      return 4;
    case CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F:
      return 4 * outer;
    case CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F:  // (outer, ceil(inner/128)), outer-major
      return 4 * outer * ceil_div(inner, 128);
    case CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F: {
      // (ceil(outer/128), ceil(inner/128)), inner-block-major with the row stride padded to
      // 16 bytes; the extent ends at the last scale.
      const uint64_t rows = ceil_div(outer, 128), cols = ceil_div(inner, 128);
      if (rows == 0 || cols == 0) return 0;
      return 4 * (round_up(cols, 4) * (rows - 1) + cols);
    }
    case CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3:
    case CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0: {
      const uint64_t block = static_cast<uint64_t>(block_scale_block_size(mode));
      if (outer == 0 || inner == 0) return 0;
      return round_up(outer, 128) * round_up(ceil_div(inner, block), 4);
    }
    default:
      return 0;
  }
}

trace::DType scale_dtype(cublasLtMatmulMatrixScale_t mode) {
  if (mode == CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0) return trace::DType::UE8M0;
  if (mode == CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3) return trace::DType::UE4M3;
  return trace::DType::F32;
}

}  // namespace lockstep::collectors
