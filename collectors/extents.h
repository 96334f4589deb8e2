// Exact byte extents from API semantics: NCCL counts, cuBLAS/cuBLASLt matrix layouts, cuBLASLt
// scale buffers. Pure functions; every formula is tested exhaustively on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cublasLt.h>
#include <nccl.h>

#include "collectors/events.h"
#include "trace/record.h"

namespace lockstep::collectors {

// ---- element types ----------------------------------------------------------------------
size_t nccl_type_bytes(ncclDataType_t type);  // 0 for an unknown type
trace::DType nccl_dtype(ncclDataType_t type);
int cuda_type_bits(cudaDataType type);  // 4 for FP4/INT4, 0 for an unknown type
trace::DType cuda_dtype(cudaDataType type);
// Bytes of `elements` elements of `bits` bits each (FP4: two per byte, rounded up).
inline uint64_t bits_to_bytes(uint64_t elements, int bits) {
  return (elements * static_cast<uint64_t>(bits) + 7) / 8;
}

// ---- NCCL ---------------------------------------------------------------------------------
// What one rank reads (send, before the op) and writes (recv, after the op). A buffer the op
// does not use on this rank (non-root recv of Reduce/Gather, non-root send of Broadcast/
// Scatter, the missing side of Send/Recv) has 0 bytes.
struct NcclExtents {
  uint64_t send_bytes = 0;
  uint64_t recv_bytes = 0;
  bool in_place = false;  // as defined by the nccl.h comment of each op
};
NcclExtents nccl_extents(NcclOp op, size_t count, size_t element_bytes, int nranks, int rank,
                         int root, const void* send, const void* recv);
bool nccl_op_has_root(NcclOp op);  // Broadcast, Bcast, Reduce, Gather, Scatter
bool nccl_op_has_peer(NcclOp op);  // Send, Recv

// ---- classic cuBLAS (column-major) ------------------------------------------------------------
// A stored matrix of rows x cols with leading dimension ld, column-major, elements of `bits`.
// Bytes from the first element to one past the last: bits*(ld*(cols-1)+rows)/8.
uint64_t column_major_bytes(int64_t rows, int64_t cols, int64_t ld, int bits);
// Adds (batch-1)*stride elements for strided batches (stride in elements). For byte-sized
// elements; sub-byte types use column_major_strided_bytes.
uint64_t strided_batch_bytes(uint64_t one_matrix_bytes, int64_t batch, int64_t stride, int bits);
// Column-major matrices, `batch` of them `stride` elements apart, counted in elements before
// rounding to bytes (so FP4 batches are not rounded per matrix).
uint64_t column_major_strided_bytes(int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                                    int64_t stride, int bits);

struct GemmOperandExtents {
  uint64_t a_bytes = 0, b_bytes = 0, c_bytes = 0;  // per matrix when pointer_arrays
  uint64_t pointer_array_bytes = 0;                // batch * sizeof(void*) when pointer_arrays
};
// A stored lda x (trans_a == N ? k : m); B ldb x (trans_b == N ? n : k); C ldc x n.
GemmOperandExtents cublas_gemm_extents(const CublasGemm& gemm);

// True when a host-side alpha/beta of `type` is zero (either sign): with beta == 0 cuBLAS does
// not read C, so C is no input (its bytes may be whatever the allocator left there). False for
// a null pointer or a type it does not know.
bool host_scalar_is_zero(const void* value, cudaDataType type);

// ---- cuBLASLt matrix layouts ------------------------------------------------------------------
struct LtLayout {
  cudaDataType type = CUDA_R_32F;
  int32_t order = CUBLASLT_ORDER_COL;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch_count = 1;
  int64_t batch_stride = 0;  // elements
  int64_t plane_offset = 0;  // bytes, planar complex
  uint32_t batch_mode = CUBLASLT_BATCH_MODE_STRIDED;
  bool operator==(const LtLayout&) const = default;
};
// Bytes of one stored matrix (COL: ld x cols; ROW: ld x rows), plus strided batches. For
// pointer-array batch mode, the bytes of one matrix. Orders other than COL/ROW (IMMA tiled
// orders) are bounded by ld*(other dimension), which covers their tiles.
uint64_t lt_layout_bytes(const LtLayout& layout);
uint64_t lt_layout_matrix_bytes(const LtLayout& layout);  // one matrix, no batches

// ---- cuBLASLt scale buffers -----------------------------------------------------------------
// `inner` is the blocked (innermost stored) dimension, `outer` the other: K and M for A, K and
// N for B, M and N for a column-major C/D. Returns bytes of one matrix's scale buffer, 0 for an
// unknown mode.
uint64_t scale_buffer_bytes(cublasLtMatmulMatrixScale_t mode, uint64_t outer, uint64_t inner);
// Block size of the MX/NV modes (32 for VEC32_UE8M0, 16 for VEC16_UE4M3), else 0.
int block_scale_block_size(cublasLtMatmulMatrixScale_t mode);
// Byte offset of scale (row r over `outer`, column c over ceil(inner/B)) in the 128x4-tile
// layout of the MX/NV modes; scale_cols = ceil(inner/B) (unpadded).
uint64_t block_scale_offset(uint64_t r, uint64_t c, uint64_t scale_cols);
trace::DType scale_dtype(cublasLtMatmulMatrixScale_t mode);

// ---- epilogues -------------------------------------------------------------------------------
struct EpilogueBuffers {
  bool bias = false;                // bias pointer is used
  bool bias_is_output = false;      // BGRADA, BGRADB, DRELU_BGRAD, DGELU_BGRAD: bias gradient
  bool bias_along_columns = false;  // BGRADB: one value per column of D, else per row
  bool aux = false;                 // aux pointer is used
  bool aux_is_output = false;       // *_AUX forward epilogues; input for D* backward ones
  bool aux_is_bitmask = false;      // ReLU aux is a bit mask (ld in bits)
};
EpilogueBuffers epilogue_buffers(uint32_t epilogue);

}  // namespace lockstep::collectors
