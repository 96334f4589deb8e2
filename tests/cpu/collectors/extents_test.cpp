#include <algorithm>
#include <cstdint>
#include <vector>

#include <cstdint>

#include <gtest/gtest.h>

#include "collectors/extents.h"

namespace lockstep::collectors {
namespace {

// ---- NCCL: a reference model that walks which element blocks each rank touches -------------
struct Touched {
  uint64_t send_end = 0, recv_end = 0;  // one past the last element read / written
  void read(uint64_t begin, uint64_t n) { send_end = std::max(send_end, begin + n); }
  void write(uint64_t begin, uint64_t n) { recv_end = std::max(recv_end, begin + n); }
};

Touched reference(NcclOp op, uint64_t count, int nranks, int rank, int root) {
  Touched t;
  const bool is_root = rank == root;
  switch (op) {
    case NcclOp::AllReduce:
      t.read(0, count);
      t.write(0, count);
      break;
    case NcclOp::Broadcast:
    case NcclOp::Bcast:
      if (is_root) t.read(0, count);
      t.write(0, count);
      break;
    case NcclOp::Reduce:
      t.read(0, count);
      if (is_root) t.write(0, count);
      break;
    case NcclOp::AllGather:
      t.read(0, count);
      for (int from = 0; from < nranks; ++from) t.write(from * count, count);
      break;
    case NcclOp::ReduceScatter:
      for (int to = 0; to < nranks; ++to) t.read(to * count, count);
      t.write(0, count);
      break;
    case NcclOp::AlltoAll:
      for (int peer = 0; peer < nranks; ++peer)
        t.read(peer * count, count), t.write(peer * count, count);
      break;
    case NcclOp::Gather:
      t.read(0, count);
      if (is_root)
        for (int from = 0; from < nranks; ++from) t.write(from * count, count);
      break;
    case NcclOp::Scatter:
      if (is_root)
        for (int to = 0; to < nranks; ++to) t.read(to * count, count);
      t.write(0, count);
      break;
    case NcclOp::Send:
      t.read(0, count);
      break;
    case NcclOp::Recv:
      t.write(0, count);
      break;
  }
  return t;
}

TEST(NcclExtents, EveryOpRankAndRootMatchesTheReferenceModel) {
  const NcclOp ops[] = {NcclOp::AllReduce, NcclOp::Broadcast,     NcclOp::Bcast,    NcclOp::Reduce,
                        NcclOp::AllGather, NcclOp::ReduceScatter, NcclOp::AlltoAll, NcclOp::Gather,
                        NcclOp::Scatter,   NcclOp::Send,          NcclOp::Recv};
  const ncclDataType_t types[] = {ncclInt8,    ncclFloat16,    ncclBfloat16, ncclFloat32,
                                  ncclFloat64, ncclFloat8e4m3, ncclUint64};
  int checked = 0;
  for (NcclOp op : ops)
    for (ncclDataType_t type : types)
      for (uint64_t count : {0ull, 1ull, 7ull, 1000ull})
        for (int nranks = 1; nranks <= 8; ++nranks)
          for (int rank = 0; rank < nranks; ++rank)
            for (int root = 0; root < nranks; ++root) {
              const size_t esz = nccl_type_bytes(type);
              Touched want = reference(op, count, nranks, rank, root);
              static char send[1], recv[1];
              NcclExtents got = nccl_extents(op, count, esz, nranks, rank, root, send, recv);
              ASSERT_EQ(got.send_bytes, want.send_end * esz)
                  << int(op) << " n=" << nranks << " r=" << rank << " root=" << root;
              ASSERT_EQ(got.recv_bytes, want.recv_end * esz)
                  << int(op) << " n=" << nranks << " r=" << rank << " root=" << root;
              ++checked;
            }
  EXPECT_GT(checked, 10000);
}

TEST(NcclExtents, TypeSizes) {
  EXPECT_EQ(nccl_type_bytes(ncclInt8), 1u);
  EXPECT_EQ(nccl_type_bytes(ncclFloat8e5m2), 1u);
  EXPECT_EQ(nccl_type_bytes(ncclBfloat16), 2u);
  EXPECT_EQ(nccl_type_bytes(ncclUint32), 4u);
  EXPECT_EQ(nccl_type_bytes(ncclFloat64), 8u);
  EXPECT_EQ(nccl_type_bytes(static_cast<ncclDataType_t>(99)), 0u);
}

TEST(NcclExtents, InPlaceFollowsTheHeaderComments) {
  alignas(8) static char buffer[1 << 12];
  char* base = buffer;
  const size_t count = 10, esz = 4;
  // AllReduce / Broadcast / Reduce: sendbuff == recvbuff.
  EXPECT_TRUE(nccl_extents(NcclOp::AllReduce, count, esz, 4, 1, 0, base, base).in_place);
  EXPECT_FALSE(nccl_extents(NcclOp::AllReduce, count, esz, 4, 1, 0, base, base + 8).in_place);
  EXPECT_TRUE(nccl_extents(NcclOp::Broadcast, count, esz, 4, 2, 2, base, base).in_place);
  EXPECT_TRUE(nccl_extents(NcclOp::Reduce, count, esz, 4, 0, 0, base, base).in_place);
  EXPECT_TRUE(nccl_extents(NcclOp::Bcast, count, esz, 4, 3, 0, base, base).in_place);
  // AllGather: sendbuff == recvbuff + rank * sendcount.
  EXPECT_TRUE(
      nccl_extents(NcclOp::AllGather, count, esz, 4, 2, 0, base + 2 * count * esz, base).in_place);
  EXPECT_FALSE(nccl_extents(NcclOp::AllGather, count, esz, 4, 2, 0, base, base).in_place);
  EXPECT_TRUE(nccl_extents(NcclOp::AllGather, count, esz, 4, 0, 0, base, base).in_place);
  // ReduceScatter: recvbuff == sendbuff + rank * recvcount.
  EXPECT_TRUE(nccl_extents(NcclOp::ReduceScatter, count, esz, 4, 3, 0, base, base + 3 * count * esz)
                  .in_place);
  EXPECT_FALSE(nccl_extents(NcclOp::ReduceScatter, count, esz, 4, 3, 0, base, base).in_place);
  // Gather: sendbuff == recvbuff + root * count (root only); Scatter: recvbuff == sendbuff +
  // root * count.
  EXPECT_TRUE(nccl_extents(NcclOp::Gather, count, esz, 4, 1, 1, base + count * esz, base).in_place);
  EXPECT_FALSE(
      nccl_extents(NcclOp::Gather, count, esz, 4, 0, 1, base + count * esz, base).in_place);
  EXPECT_TRUE(
      nccl_extents(NcclOp::Scatter, count, esz, 4, 2, 2, base, base + 2 * count * esz).in_place);
  EXPECT_FALSE(nccl_extents(NcclOp::Send, count, esz, 4, 2, 2, base, base).in_place);
}

// ---- cuBLAS: brute force over every element of op(A), op(B), C ---------------------------------
// Offset (in elements) one past the last element that a column-major rows x cols matrix
// with leading dimension ld touches, over `batch` matrices `stride` apart.
uint64_t brute_elements(int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  uint64_t end = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t i = 0; i < rows; ++i) end = std::max<uint64_t>(end, b * stride + i + j * ld + 1);
  return end;
}

TEST(CublasExtents, GemmLayoutsWithTransposesAndBatches) {
  int checked = 0;
  for (auto ta : {CUBLAS_OP_N, CUBLAS_OP_T})
    for (auto tb : {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C})
      for (int64_t m : {1, 3, 8})
        for (int64_t n : {1, 5})
          for (int64_t k : {1, 4, 9})
            for (int64_t pad : {0, 3})
              for (int64_t batch : {1, 3})
                for (cudaDataType type : {CUDA_R_32F, CUDA_R_16BF, CUDA_R_8F_E4M3}) {
                  CublasGemm g;
                  g.trans_a = ta, g.trans_b = tb, g.m = m, g.n = n, g.k = k;
                  g.type_a = g.type_b = type;
                  g.type_c = CUDA_R_32F;
                  const int64_t a_rows = ta == CUBLAS_OP_N ? m : k,
                                a_cols = ta == CUBLAS_OP_N ? k : m;
                  const int64_t b_rows = tb == CUBLAS_OP_N ? k : n,
                                b_cols = tb == CUBLAS_OP_N ? n : k;
                  g.lda = a_rows + pad, g.ldb = b_rows + pad, g.ldc = m + pad;
                  g.batch = batch;
                  g.stride_a = g.lda * a_cols + 5, g.stride_b = g.ldb * b_cols,
                  g.stride_c = g.ldc * n;
                  const int64_t esz = cuda_type_bits(type) / 8;
                  GemmOperandExtents e = cublas_gemm_extents(g);
                  ASSERT_EQ(e.a_bytes,
                            esz * brute_elements(a_rows, a_cols, g.lda, batch, g.stride_a));
                  ASSERT_EQ(e.b_bytes,
                            esz * brute_elements(b_rows, b_cols, g.ldb, batch, g.stride_b));
                  ASSERT_EQ(e.c_bytes, 4 * brute_elements(m, n, g.ldc, batch, g.stride_c));
                  ++checked;
                }
  EXPECT_GT(checked, 1000);
}

TEST(CublasExtents, PointerArraysCountOneMatrixEach) {
  CublasGemm g;
  g.m = 4, g.n = 3, g.k = 2, g.lda = 4, g.ldb = 2, g.ldc = 4, g.batch = 5;
  g.pointer_arrays = true;
  GemmOperandExtents e = cublas_gemm_extents(g);
  EXPECT_EQ(e.a_bytes, 4u * 4 * 2);
  EXPECT_EQ(e.c_bytes, 4u * 4 * 3);
  EXPECT_EQ(e.pointer_array_bytes, 5 * sizeof(void*));
}

TEST(CublasExtents, ZeroSizedGemmTouchesNothing) {
  CublasGemm g;
  g.m = 0, g.n = 3, g.k = 2, g.lda = 1, g.ldb = 2, g.ldc = 1;
  GemmOperandExtents e = cublas_gemm_extents(g);
  EXPECT_EQ(e.a_bytes, 0u);
  EXPECT_EQ(e.c_bytes, 0u);
}

// ---- cuBLASLt layouts: brute force in both orders, FP4 packing ----------------------------------
TEST(LtExtents, LayoutsInBothOrdersWithBatches) {
  int checked = 0;
  for (int32_t order : {CUBLASLT_ORDER_COL, CUBLASLT_ORDER_ROW})
    for (uint64_t rows : {1, 7, 16})
      for (uint64_t cols : {1, 6})
        for (int64_t pad : {0, 2})
          for (int32_t batch : {1, 4})
            for (cudaDataType type : {CUDA_R_16F, CUDA_R_32F, CUDA_R_4F_E2M1, CUDA_R_8F_E5M2}) {
              LtLayout l;
              l.type = type, l.order = order, l.rows = rows, l.cols = cols;
              l.ld = (order == CUBLASLT_ORDER_COL ? rows : cols) + pad;
              l.batch_count = batch;
              l.batch_stride = l.ld * (order == CUBLASLT_ORDER_COL ? cols : rows) + 2;
              uint64_t end = 0;  // elements
              for (int32_t b = 0; b < batch; ++b)
                for (uint64_t i = 0; i < rows; ++i)
                  for (uint64_t j = 0; j < cols; ++j) {
                    uint64_t at = order == CUBLASLT_ORDER_COL ? i + j * l.ld : i * l.ld + j;
                    end = std::max<uint64_t>(end, b * l.batch_stride + at + 1);
                  }
              const int bits = cuda_type_bits(type);
              ASSERT_EQ(lt_layout_bytes(l), (end * bits + 7) / 8)
                  << order << " " << rows << "x" << cols << " type " << type;
              ++checked;
            }
  EXPECT_EQ(checked, 2 * 3 * 2 * 2 * 2 * 4);
}

TEST(LtExtents, Fp4PacksTwoPerByteAndPointerArraysCountOneMatrix) {
  LtLayout l;
  l.type = CUDA_R_4F_E2M1, l.rows = 64, l.cols = 32, l.ld = 64;
  EXPECT_EQ(lt_layout_bytes(l), 64u * 32 / 2);
  l.batch_count = 8, l.batch_mode = CUBLASLT_BATCH_MODE_POINTER_ARRAY, l.batch_stride = 9999;
  EXPECT_EQ(lt_layout_bytes(l), 64u * 32 / 2);
}

TEST(LtExtents, Epilogues) {
  EpilogueBuffers b = epilogue_buffers(CUBLASLT_EPILOGUE_DEFAULT);
  EXPECT_FALSE(b.bias || b.aux);
  b = epilogue_buffers(CUBLASLT_EPILOGUE_BIAS);
  EXPECT_TRUE(b.bias && !b.bias_is_output && !b.aux);
  b = epilogue_buffers(CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
  EXPECT_TRUE(b.bias && !b.bias_is_output && b.aux && b.aux_is_output && !b.aux_is_bitmask);
  b = epilogue_buffers(CUBLASLT_EPILOGUE_RELU_AUX);
  EXPECT_TRUE(!b.bias && b.aux && b.aux_is_output && b.aux_is_bitmask);
  b = epilogue_buffers(CUBLASLT_EPILOGUE_DGELU_BGRAD);
  EXPECT_TRUE(b.bias && b.bias_is_output && b.aux && !b.aux_is_output && !b.aux_is_bitmask);
  b = epilogue_buffers(CUBLASLT_EPILOGUE_DRELU_BGRAD);
  EXPECT_TRUE(b.bias && b.bias_is_output && b.aux && !b.aux_is_output && b.aux_is_bitmask);
  b = epilogue_buffers(CUBLASLT_EPILOGUE_DRELU);
  EXPECT_TRUE(!b.bias && b.aux && !b.aux_is_output);
  b = epilogue_buffers(CUBLASLT_EPILOGUE_BGRADA);
  EXPECT_TRUE(b.bias && b.bias_is_output && !b.bias_along_columns && !b.aux);
  b = epilogue_buffers(CUBLASLT_EPILOGUE_BGRADB);
  EXPECT_TRUE(b.bias && b.bias_is_output && b.bias_along_columns && !b.aux);
}

// beta == 0 means cuBLAS does not read C: C is then no input of the GEMM.
TEST(GemmScalars, HostScalarIsZeroForEveryScaleType) {
  const float f0 = 0.0f, fneg0 = -0.0f, f1 = 1.0f, ftiny = 1e-45f;
  EXPECT_TRUE(host_scalar_is_zero(&f0, CUDA_R_32F));
  EXPECT_TRUE(host_scalar_is_zero(&fneg0, CUDA_R_32F));
  EXPECT_FALSE(host_scalar_is_zero(&f1, CUDA_R_32F));
  EXPECT_FALSE(host_scalar_is_zero(&ftiny, CUDA_R_32F));  // a denormal is not zero
  const double d0 = -0.0, d1 = 0.5;
  EXPECT_TRUE(host_scalar_is_zero(&d0, CUDA_R_64F));
  EXPECT_FALSE(host_scalar_is_zero(&d1, CUDA_R_64F));
  const uint16_t h0 = 0x8000, h1 = 0x3c00;  // -0 and 1.0 in fp16 (bf16 -0 has the same bits)
  EXPECT_TRUE(host_scalar_is_zero(&h0, CUDA_R_16F));
  EXPECT_TRUE(host_scalar_is_zero(&h0, CUDA_R_16BF));
  EXPECT_FALSE(host_scalar_is_zero(&h1, CUDA_R_16F));
  const float c_real_zero[2] = {0.0f, 2.0f}, c_zero[2] = {0.0f, -0.0f};
  EXPECT_FALSE(host_scalar_is_zero(c_real_zero, CUDA_C_32F));  // imaginary part matters
  EXPECT_TRUE(host_scalar_is_zero(c_zero, CUDA_C_32F));
  const int32_t i0 = 0, i_min = INT32_MIN;
  EXPECT_TRUE(host_scalar_is_zero(&i0, CUDA_R_32I));
  EXPECT_FALSE(host_scalar_is_zero(&i_min, CUDA_R_32I));  // no sign-bit rule for integers
  EXPECT_FALSE(host_scalar_is_zero(nullptr, CUDA_R_32F));
  EXPECT_FALSE(host_scalar_is_zero(&f0, CUDA_R_8F_E4M3));  // not a scale type: unknown
}

TEST(GemmScalars, ScaleTypeFollowsTheComputeType) {
  EXPECT_EQ(cublas_scale_type(CUBLAS_COMPUTE_32F, CUDA_R_16BF), CUDA_R_32F);
  EXPECT_EQ(cublas_scale_type(CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F), CUDA_R_32F);
  EXPECT_EQ(cublas_scale_type(CUBLAS_COMPUTE_16F, CUDA_R_16F), CUDA_R_16F);
  EXPECT_EQ(cublas_scale_type(CUBLAS_COMPUTE_64F, CUDA_R_64F), CUDA_R_64F);
  EXPECT_EQ(cublas_scale_type(CUBLAS_COMPUTE_32I, CUDA_R_32I), CUDA_R_32I);
  EXPECT_EQ(cublas_scale_type(CUBLAS_COMPUTE_32F, CUDA_C_32F), CUDA_C_32F);
  EXPECT_EQ(cublas_scale_type(CUBLAS_COMPUTE_64F_PEDANTIC, CUDA_C_64F), CUDA_C_64F);
}

}  // namespace
}  // namespace lockstep::collectors
