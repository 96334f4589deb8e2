#include "collectors/extents.h"

#include <algorithm>
#include <cstring>

namespace lockstep::collectors {

size_t nccl_type_bytes(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

trace::DType nccl_dtype(ncclDataType_t type) {
  using trace::DType;
  switch (type) {
    case ncclInt8:
      return DType::I8;
    case ncclUint8:
      return DType::U8;
    case ncclInt32:
      return DType::I32;
    case ncclUint32:
      return DType::U32;
    case ncclInt64:
      return DType::I64;
    case ncclUint64:
      return DType::U64;
    case ncclFloat16:
      return DType::F16;
    case ncclFloat32:
      return DType::F32;
    case ncclFloat64:
      return DType::F64;
    case ncclBfloat16:
      return DType::BF16;
    case ncclFloat8e4m3:
      return DType::FP8E4M3;
    case ncclFloat8e5m2:
      return DType::FP8E5M2;
    default:
      return DType::Unknown;
  }
}

int cuda_type_bits(cudaDataType type) {
  switch (type) {
    case CUDA_R_4I:
    case CUDA_R_4U:
    case CUDA_R_4F_E2M1:
      return 4;
    case CUDA_R_6F_E2M3:
    case CUDA_R_6F_E3M2:
      return 8;  // stored one per byte
    case CUDA_R_8I:
    case CUDA_R_8U:
    case CUDA_R_8F_E4M3:
    case CUDA_R_8F_E5M2:
    case CUDA_R_8F_UE8M0:
    case CUDA_C_4I:
    case CUDA_C_4U:
      return 8;
    case CUDA_R_16F:
    case CUDA_R_16BF:
    case CUDA_R_16I:
    case CUDA_R_16U:
    case CUDA_C_8I:
    case CUDA_C_8U:
      return 16;
    case CUDA_R_32F:
    case CUDA_R_32I:
    case CUDA_R_32U:
    case CUDA_C_16F:
    case CUDA_C_16BF:
    case CUDA_C_16I:
    case CUDA_C_16U:
      return 32;
    case CUDA_R_64F:
    case CUDA_R_64I:
    case CUDA_R_64U:
    case CUDA_C_32F:
    case CUDA_C_32I:
    case CUDA_C_32U:
      return 64;
    case CUDA_C_64F:
    case CUDA_C_64I:
    case CUDA_C_64U:
      return 128;
    default:
      return 0;
  }
}

trace::DType cuda_dtype(cudaDataType type) {
  using trace::DType;
  switch (type) {
    case CUDA_R_8I:
      return DType::I8;
    case CUDA_R_8U:
      return DType::U8;
    case CUDA_R_16I:
      return DType::I16;
    case CUDA_R_32I:
      return DType::I32;
    case CUDA_R_32U:
      return DType::U32;
    case CUDA_R_64I:
      return DType::I64;
    case CUDA_R_64U:
      return DType::U64;
    case CUDA_R_16F:
      return DType::F16;
    case CUDA_R_16BF:
      return DType::BF16;
    case CUDA_R_32F:
      return DType::F32;
    case CUDA_R_64F:
      return DType::F64;
    case CUDA_R_8F_E4M3:
      return DType::FP8E4M3;
    case CUDA_R_8F_E5M2:
      return DType::FP8E5M2;
    case CUDA_R_4F_E2M1:
      return DType::FP4E2M1;
    case CUDA_R_8F_UE8M0:
      return DType::UE8M0;
    case CUDA_C_32F:
      return DType::C32;
    case CUDA_C_64F:
      return DType::C64;
    default:
      return DType::Bytes;
  }
}

bool host_scalar_is_zero(const void* value, cudaDataType type) {
  if (value == nullptr) return false;
  auto bits_zero = [&](auto unsigned_value, auto magnitude_mask, int parts) {
    using U = decltype(unsigned_value);
    for (int i = 0; i < parts; ++i) {
      U v;
      std::memcpy(&v, static_cast<const char*>(value) + i * sizeof(U), sizeof(U));
      if ((v & magnitude_mask) != 0) return false;  // the sign bit alone is -0
    }
    return true;
  };
  switch (type) {
    case CUDA_R_16F:
    case CUDA_R_16BF:
      return bits_zero(uint16_t{}, uint16_t{0x7fff}, 1);
    case CUDA_R_32F:
      return bits_zero(uint32_t{}, uint32_t{0x7fffffffu}, 1);
    case CUDA_R_64F:
      return bits_zero(uint64_t{}, uint64_t{0x7fffffffffffffffull}, 1);
    case CUDA_C_16F:
    case CUDA_C_16BF:
      return bits_zero(uint16_t{}, uint16_t{0x7fff}, 2);
    case CUDA_C_32F:
      return bits_zero(uint32_t{}, uint32_t{0x7fffffffu}, 2);
    case CUDA_C_64F:
      return bits_zero(uint64_t{}, uint64_t{0x7fffffffffffffffull}, 2);
    case CUDA_R_32I:
      return bits_zero(uint32_t{}, uint32_t{0xffffffffu}, 1);
    case CUDA_C_32I:
      return bits_zero(uint32_t{}, uint32_t{0xffffffffu}, 2);
    default:
      return false;
  }
}

bool nccl_op_has_root(NcclOp op) {
  return op == NcclOp::Broadcast || op == NcclOp::Bcast || op == NcclOp::Reduce ||
         op == NcclOp::Gather || op == NcclOp::Scatter;
}
bool nccl_op_has_peer(NcclOp op) { return op == NcclOp::Send || op == NcclOp::Recv; }

NcclExtents nccl_extents(NcclOp op, size_t count, size_t element_bytes, int nranks, int rank,
                         int root, const void* send, const void* recv) {
  NcclExtents e;
  const uint64_t one = static_cast<uint64_t>(count) * element_bytes;
  const uint64_t all = one * static_cast<uint64_t>(std::max(nranks, 0));
  const auto s = reinterpret_cast<uintptr_t>(send);
  const auto r = reinterpret_cast<uintptr_t>(recv);
  const bool is_root = rank == root;
  switch (op) {
    case NcclOp::AllReduce:
      e = {one, one, s == r};
      break;
    case NcclOp::Broadcast:
      e = {is_root ? one : 0, one, is_root && s == r};
      break;
    case NcclOp::Bcast:  // one buffer, implicitly in place: the root's data is the input
      e = {is_root ? one : 0, one, true};
      break;
    case NcclOp::Reduce:
      e = {one, is_root ? one : 0, is_root && s == r};
      break;
    case NcclOp::AllGather:  // sendbuff == recvbuff + rank * sendcount
      e = {one, all, s == r + static_cast<uint64_t>(rank) * one};
      break;
    case NcclOp::ReduceScatter:  // recvbuff == sendbuff + rank * recvcount
      e = {all, one, r == s + static_cast<uint64_t>(rank) * one};
      break;
    case NcclOp::AlltoAll:
      e = {all, all, s == r};
      break;
    case NcclOp::Gather:  // sendbuff == recvbuff + root * count, on the root
      e = {one, is_root ? all : 0, is_root && s == r + static_cast<uint64_t>(root) * one};
      break;
    case NcclOp::Scatter:  // recvbuff == sendbuff + root * count, on the root
      e = {is_root ? all : 0, one, is_root && r == s + static_cast<uint64_t>(root) * one};
      break;
    case NcclOp::Send:
      e = {one, 0, false};
      break;
    case NcclOp::Recv:
      e = {0, one, false};
      break;
  }
  return e;
}

namespace {
uint64_t column_major_elements(int64_t rows, int64_t cols, int64_t ld) {
  if (rows <= 0 || cols <= 0) return 0;
  const uint64_t lead = static_cast<uint64_t>(std::max(ld, rows));
  return lead * static_cast<uint64_t>(cols - 1) + static_cast<uint64_t>(rows);
}
}  // namespace

uint64_t column_major_bytes(int64_t rows, int64_t cols, int64_t ld, int bits) {
  if (bits <= 0) return 0;
  return bits_to_bytes(column_major_elements(rows, cols, ld), bits);
}

uint64_t column_major_strided_bytes(int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                                    int64_t stride, int bits) {
  uint64_t elements = column_major_elements(rows, cols, ld);
  if (elements == 0 || bits <= 0) return 0;
  if (batch > 1 && stride > 0)
    elements += static_cast<uint64_t>(batch - 1) * static_cast<uint64_t>(stride);
  return bits_to_bytes(elements, bits);
}

uint64_t strided_batch_bytes(uint64_t one_matrix_bytes, int64_t batch, int64_t stride, int bits) {
  if (one_matrix_bytes == 0 || batch <= 1 || stride <= 0) return one_matrix_bytes;
  // The last matrix starts (batch-1)*stride elements in; the union runs to its end. A stride
  // smaller than one matrix (overlapping or broadcast batches) still ends there.
  return bits_to_bytes(static_cast<uint64_t>(batch - 1) * static_cast<uint64_t>(stride), bits) +
         one_matrix_bytes;
}

GemmOperandExtents cublas_gemm_extents(const CublasGemm& g) {
  GemmOperandExtents e;
  const int64_t a_rows = g.trans_a == CUBLAS_OP_N ? g.m : g.k;
  const int64_t a_cols = g.trans_a == CUBLAS_OP_N ? g.k : g.m;
  const int64_t b_rows = g.trans_b == CUBLAS_OP_N ? g.k : g.n;
  const int64_t b_cols = g.trans_b == CUBLAS_OP_N ? g.n : g.k;
  const int a_bits = cuda_type_bits(g.type_a), b_bits = cuda_type_bits(g.type_b),
            c_bits = cuda_type_bits(g.type_c);
  const int64_t batch = g.pointer_arrays ? 1 : g.batch;
  e.a_bytes = column_major_strided_bytes(a_rows, a_cols, g.lda, batch, g.stride_a, a_bits);
  e.b_bytes = column_major_strided_bytes(b_rows, b_cols, g.ldb, batch, g.stride_b, b_bits);
  e.c_bytes = column_major_strided_bytes(g.m, g.n, g.ldc, batch, g.stride_c, c_bits);
  if (g.pointer_arrays)
    e.pointer_array_bytes = static_cast<uint64_t>(std::max<int64_t>(g.batch, 0)) * sizeof(void*);
  return e;
}

namespace {
uint64_t lt_bytes(const LtLayout& l, int64_t batch) {
  const int bits = cuda_type_bits(l.type);
  const auto rows = static_cast<int64_t>(l.rows), cols = static_cast<int64_t>(l.cols);
  uint64_t bytes = 0;
  if (l.order == CUBLASLT_ORDER_ROW)
    bytes = column_major_strided_bytes(cols, rows, l.ld, batch, l.batch_stride, bits);
  else if (l.order == CUBLASLT_ORDER_COL)
    bytes = column_major_strided_bytes(rows, cols, l.ld, batch, l.batch_stride, bits);
  else  // tiled IMMA orders: bounded by ld x the larger dimension per matrix
    bytes = column_major_strided_bytes(std::max<int64_t>(l.ld, 1), std::max(rows, cols),
                                       std::max<int64_t>(l.ld, 1), batch, l.batch_stride, bits);
  // Planar complex: the imaginary plane follows at plane_offset bytes.
  if (l.plane_offset > 0 && bytes > 0) bytes += static_cast<uint64_t>(l.plane_offset);
  return bytes;
}
}  // namespace

uint64_t lt_layout_matrix_bytes(const LtLayout& l) { return lt_bytes(l, 1); }

uint64_t lt_layout_bytes(const LtLayout& l) {
  if (l.batch_mode == CUBLASLT_BATCH_MODE_POINTER_ARRAY) return lt_bytes(l, 1);
  return lt_bytes(l, l.batch_count);
}

EpilogueBuffers epilogue_buffers(uint32_t epilogue) {
  EpilogueBuffers b;
  const bool bgrad = (epilogue & 16u) != 0 || epilogue == CUBLASLT_EPILOGUE_BGRADA ||
                     epilogue == CUBLASLT_EPILOGUE_BGRADB;
  b.bias = (epilogue & CUBLASLT_EPILOGUE_BIAS) != 0 || bgrad;
  b.bias_is_output = bgrad;
  b.bias_along_columns = epilogue == CUBLASLT_EPILOGUE_BGRADB;
  b.aux = (epilogue & 128u) != 0;
  const bool backward = (epilogue & (8u | 64u)) != 0;  // DRELU, DGELU read the aux matrix
  b.aux_is_output = b.aux && !backward;
  b.aux_is_bitmask = b.aux && ((epilogue & CUBLASLT_EPILOGUE_RELU) != 0 || (epilogue & 8u) != 0);
  return b;
}

}  // namespace lockstep::collectors
