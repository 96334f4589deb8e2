// cuBLAS GEMMs -> collectors::cublas_gemm_begin/end; cuBLASLt -> lt_matmul_begin/end. One Blas
// nesting scope: libcublas calls the public cublasLtMatmul for some GEMMs, which must stay one
// record (the outer cuBLAS call). Kernels they launch are still reported as launches.
#include "collectors/events.h"
#include "hook_support.h"

using namespace lockstep::interpose;
namespace collectors = lockstep::collectors;

namespace {

using collectors::CublasGemm;

template <typename Forward, typename Describe>
cublasStatus_t traced_gemm(Forward&& forward, Describe&& describe) {
  return traced_call(
      Scope::Blas, forward, [&] { return collectors::cublas_gemm_begin(describe()); },
      [](uint64_t token, cublasStatus_t status) {
        collectors::cublas_gemm_end(token, static_cast<int>(status));
      });
}

template <typename I>
CublasGemm gemm(const char* api, cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb,
                I m, I n, I k, const void* A, cudaDataType type_a, I lda, const void* B,
                cudaDataType type_b, I ldb, void* C, cudaDataType type_c, I ldc, int compute_type,
                const void* beta, cudaDataType scale_type) {
  CublasGemm g;
  g.api = api;
  g.handle = handle;
  g.trans_a = ta;
  g.trans_b = tb;
  g.m = m;
  g.n = n;
  g.k = k;
  g.A = A;
  g.lda = lda;
  g.type_a = type_a;
  g.B = B;
  g.ldb = ldb;
  g.type_b = type_b;
  g.C = C;
  g.ldc = ldc;
  g.type_c = type_c;
  g.compute_type = compute_type;
  g.beta = beta;
  g.scale_type = scale_type;
  return g;
}

}  // namespace

// ---- GemmEx ----
#define LOCKSTEP_GEMM_EX(name, I)                                                                 \
  LOCKSTEP_HOT_INTERCEPTOR cublasStatus_t name(                                                   \
      cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, I m, I n, I k,   \
      const void* alpha, const void* A, cudaDataType Atype, I lda, const void* B,                 \
      cudaDataType Btype, I ldb, const void* beta, void* C, cudaDataType Ctype, I ldc,            \
      cublasComputeType_t computeType, cublasGemmAlgo_t algo) {                                   \
    return traced_gemm(                                                                           \
        [&] {                                                                                     \
          return LOCKSTEP_FORWARD(name, handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, \
                                  Btype, ldb, beta, C, Ctype, ldc, computeType, algo);            \
        },                                                                                        \
        [&] {                                                                                     \
          CublasGemm g = gemm<I>(#name, handle, transa, transb, m, n, k, A, Atype, lda, B, Btype, \
                                 ldb, C, Ctype, ldc, computeType, beta,                           \
                                 collectors::cublas_scale_type(computeType, Ctype));              \
          g.algo = algo;                                                                          \
          return g;                                                                               \
        });                                                                                       \
  }
LOCKSTEP_GEMM_EX(cublasGemmEx, int)
LOCKSTEP_GEMM_EX(cublasGemmEx_64, int64_t)
#undef LOCKSTEP_GEMM_EX

// ---- typed GEMMs: the data type is the compute type ----
#define LOCKSTEP_TYPED_GEMM(name, T, I, cuda_type)                                                \
  LOCKSTEP_INTERCEPTOR cublasStatus_t name(                                                       \
      cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, I m, I n, I k,   \
      const T* alpha, const T* A, I lda, const T* B, I ldb, const T* beta, T* C, I ldc) {         \
    return traced_gemm(                                                                           \
        [&] {                                                                                     \
          return LOCKSTEP_FORWARD(name, handle, transa, transb, m, n, k, alpha, A, lda, B, ldb,   \
                                  beta, C, ldc);                                                  \
        },                                                                                        \
        [&] {                                                                                     \
          return gemm<I>(#name, handle, transa, transb, m, n, k, A, cuda_type, lda, B, cuda_type, \
                         ldb, C, cuda_type, ldc, cuda_type, beta, cuda_type);                     \
        });                                                                                       \
  }
LOCKSTEP_TYPED_GEMM(cublasSgemm_v2, float, int, CUDA_R_32F)
LOCKSTEP_TYPED_GEMM(cublasSgemm_v2_64, float, int64_t, CUDA_R_32F)
LOCKSTEP_TYPED_GEMM(cublasDgemm_v2, double, int, CUDA_R_64F)
LOCKSTEP_TYPED_GEMM(cublasDgemm_v2_64, double, int64_t, CUDA_R_64F)
LOCKSTEP_TYPED_GEMM(cublasHgemm, __half, int, CUDA_R_16F)
LOCKSTEP_TYPED_GEMM(cublasHgemm_64, __half, int64_t, CUDA_R_16F)
#undef LOCKSTEP_TYPED_GEMM

#define LOCKSTEP_TYPED_STRIDED_GEMM(name, T, I, cuda_type)                                        \
  LOCKSTEP_INTERCEPTOR cublasStatus_t name(                                                       \
      cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, I m, I n, I k,   \
      const T* alpha, const T* A, I lda, long long strideA, const T* B, I ldb, long long strideB, \
      const T* beta, T* C, I ldc, long long strideC, I batchCount) {                              \
    return traced_gemm(                                                                           \
        [&] {                                                                                     \
          return LOCKSTEP_FORWARD(name, handle, transa, transb, m, n, k, alpha, A, lda, strideA,  \
                                  B, ldb, strideB, beta, C, ldc, strideC, batchCount);            \
        },                                                                                        \
        [&] {                                                                                     \
          CublasGemm g = gemm<I>(#name, handle, transa, transb, m, n, k, A, cuda_type, lda, B,    \
                                 cuda_type, ldb, C, cuda_type, ldc, cuda_type, beta, cuda_type);  \
          g.batch = batchCount;                                                                   \
          g.stride_a = strideA;                                                                   \
          g.stride_b = strideB;                                                                   \
          g.stride_c = strideC;                                                                   \
          return g;                                                                               \
        });                                                                                       \
  }
LOCKSTEP_TYPED_STRIDED_GEMM(cublasSgemmStridedBatched, float, int, CUDA_R_32F)
LOCKSTEP_TYPED_STRIDED_GEMM(cublasSgemmStridedBatched_64, float, int64_t, CUDA_R_32F)
LOCKSTEP_TYPED_STRIDED_GEMM(cublasHgemmStridedBatched, __half, int, CUDA_R_16F)
LOCKSTEP_TYPED_STRIDED_GEMM(cublasHgemmStridedBatched_64, __half, int64_t, CUDA_R_16F)
#undef LOCKSTEP_TYPED_STRIDED_GEMM

// ---- batched Ex ----
#define LOCKSTEP_STRIDED_BATCHED_EX(name, I)                                                       \
  LOCKSTEP_INTERCEPTOR cublasStatus_t name(                                                        \
      cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, I m, I n, I k,    \
      const void* alpha, const void* A, cudaDataType Atype, I lda, long long strideA,              \
      const void* B, cudaDataType Btype, I ldb, long long strideB, const void* beta, void* C,      \
      cudaDataType Ctype, I ldc, long long strideC, I batchCount, cublasComputeType_t computeType, \
      cublasGemmAlgo_t algo) {                                                                     \
    return traced_gemm(                                                                            \
        [&] {                                                                                      \
          return LOCKSTEP_FORWARD(name, handle, transa, transb, m, n, k, alpha, A, Atype, lda,     \
                                  strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc, strideC,   \
                                  batchCount, computeType, algo);                                  \
        },                                                                                         \
        [&] {                                                                                      \
          CublasGemm g = gemm<I>(#name, handle, transa, transb, m, n, k, A, Atype, lda, B, Btype,  \
                                 ldb, C, Ctype, ldc, computeType, beta,                            \
                                 collectors::cublas_scale_type(computeType, Ctype));               \
          g.algo = algo;                                                                           \
          g.batch = batchCount;                                                                    \
          g.stride_a = strideA;                                                                    \
          g.stride_b = strideB;                                                                    \
          g.stride_c = strideC;                                                                    \
          return g;                                                                                \
        });                                                                                        \
  }
LOCKSTEP_STRIDED_BATCHED_EX(cublasGemmStridedBatchedEx, int)
LOCKSTEP_STRIDED_BATCHED_EX(cublasGemmStridedBatchedEx_64, int64_t)
#undef LOCKSTEP_STRIDED_BATCHED_EX

#define LOCKSTEP_BATCHED_EX(name, I)                                                             \
  LOCKSTEP_INTERCEPTOR cublasStatus_t name(                                                      \
      cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, I m, I n, I k,  \
      const void* alpha, const void* const Aarray[], cudaDataType Atype, I lda,                  \
      const void* const Barray[], cudaDataType Btype, I ldb, const void* beta,                   \
      void* const Carray[], cudaDataType Ctype, I ldc, I batchCount,                             \
      cublasComputeType_t computeType, cublasGemmAlgo_t algo) {                                  \
    return traced_gemm(                                                                          \
        [&] {                                                                                    \
          return LOCKSTEP_FORWARD(name, handle, transa, transb, m, n, k, alpha, Aarray, Atype,   \
                                  lda, Barray, Btype, ldb, beta, Carray, Ctype, ldc, batchCount, \
                                  computeType, algo);                                            \
        },                                                                                       \
        [&] {                                                                                    \
          CublasGemm g =                                                                         \
              gemm<I>(#name, handle, transa, transb, m, n, k, Aarray, Atype, lda, Barray, Btype, \
                      ldb, const_cast<void**>(Carray), Ctype, ldc, computeType, beta,            \
                      collectors::cublas_scale_type(computeType, Ctype));                        \
          g.algo = algo;                                                                         \
          g.batch = batchCount;                                                                  \
          g.pointer_arrays = true;                                                               \
          return g;                                                                              \
        });                                                                                      \
  }
LOCKSTEP_BATCHED_EX(cublasGemmBatchedEx, int)
LOCKSTEP_BATCHED_EX(cublasGemmBatchedEx_64, int64_t)
#undef LOCKSTEP_BATCHED_EX

// ---- cuBLASLt ----
LOCKSTEP_HOT_INTERCEPTOR cublasStatus_t cublasLtMatmul(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
    const void* A, cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
    const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
    cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
    size_t workspaceSizeInBytes, cudaStream_t stream) {
  return traced_call(
      Scope::Blas,
      [&] {
        return LOCKSTEP_FORWARD(cublasLtMatmul, lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc,
                                beta, C, Cdesc, D, Ddesc, algo, workspace, workspaceSizeInBytes,
                                stream);
      },
      [&] {
        collectors::LtMatmul m;
        m.handle = lightHandle;
        m.desc = computeDesc;
        m.alpha = alpha;
        m.beta = beta;
        m.A = A;
        m.a_layout = Adesc;
        m.B = B;
        m.b_layout = Bdesc;
        m.C = C;
        m.c_layout = Cdesc;
        m.D = D;
        m.d_layout = Ddesc;
        m.algo = algo;
        m.workspace = workspace;
        m.workspace_bytes = workspaceSizeInBytes;
        m.stream = stream;
        return collectors::lt_matmul_begin(m);
      },
      [](uint64_t token, cublasStatus_t status) {
        collectors::lt_matmul_end(token, static_cast<int>(status));
      });
}
