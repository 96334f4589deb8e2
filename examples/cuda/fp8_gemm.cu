#include "fp8_gemm.h"

#include <cstdint>

#include "check.h"

namespace {

template <typename T>
cublasStatus_t set_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                        const T& value) {
  return cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value));
}

// Common part: descriptors for TN e4m3 x e4m3 -> d_type with a bf16 C.
bool make_layouts(int m, int n, int k, cudaDataType d_type, Fp8Gemm* gemm) {
  gemm->m = m, gemm->n = n, gemm->k = k;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&gemm->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  CUBLAS_CHECK(set_attr(gemm->desc, CUBLASLT_MATMUL_DESC_TRANSA, trans_a));
  CUBLAS_CHECK(set_attr(gemm->desc, CUBLASLT_MATMUL_DESC_TRANSB, trans_b));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&gemm->a, CUDA_R_8F_E4M3, k, m, k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&gemm->b, CUDA_R_8F_E4M3, k, n, k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&gemm->c, CUDA_R_16BF, m, n, m));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&gemm->d, d_type, m, n, m));
  return true;
}

bool pick_algo(cublasLtHandle_t lt, size_t workspace_bytes, Fp8Gemm* gemm, std::string* why) {
  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = workspace_bytes;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &ws, sizeof(ws)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, gemm->desc, gemm->a, gemm->b, gemm->c,
                                                     gemm->d, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    *why = std::string("no cuBLASLt algorithm (") + cublasGetStatusString(st) + ")";
    return false;
  }
  gemm->algo = result.algo;
  return true;
}

}  // namespace

bool make_fp8_tensorwise(cublasLtHandle_t lt, int m, int n, int k, const float* a_scale,
                         const float* b_scale, const float* d_scale, float* amax_d,
                         size_t workspace_bytes, Fp8Gemm* gemm, std::string* why) {
  make_layouts(m, n, k, CUDA_R_8F_E4M3, gemm);
  CUBLAS_CHECK(set_attr(gemm->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, a_scale));
  CUBLAS_CHECK(set_attr(gemm->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, b_scale));
  CUBLAS_CHECK(set_attr(gemm->desc, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, d_scale));
  CUBLAS_CHECK(set_attr(gemm->desc, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, amax_d));
  gemm->scale_modes = "A:SCALAR B:SCALAR D:SCALAR +AMAX_D";
  return pick_algo(lt, workspace_bytes, gemm, why);
}

size_t block_scale_floats(int outer, int k) {
  size_t inner_blocks = (static_cast<size_t>(k) + 127) / 128;
  size_t padded = (inner_blocks + 3) / 4 * 4;  // 16-byte aligned strides
  return static_cast<size_t>(outer) * padded;  // covers VEC128 (outer x blocks) and BLK128x128
}

bool make_fp8_block_scaled(cublasLtHandle_t lt, int m, int n, int k, const float* a_scale,
                           const float* b_scale, size_t workspace_bytes, Fp8Gemm* gemm,
                           std::string* why) {
  struct Combo {
    int32_t a, b;
    const char* name;
  };
  // Weights (A) in 128x128 blocks and activations (B) in 1x128 rows, as DeepSeek-V3 trains;
  // fall back to the other combinations Hopper documents.
  const Combo combos[] = {
      {CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
       "A:BLK128x128 B:VEC128"},
      {CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F,
       "A:VEC128 B:BLK128x128"},
      {CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
       "A:VEC128 B:VEC128"},
  };
  std::string last;
  for (const Combo& combo : combos) {
    make_layouts(m, n, k, CUDA_R_16BF, gemm);
    CUBLAS_CHECK(set_attr(gemm->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, combo.a));
    CUBLAS_CHECK(set_attr(gemm->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, combo.b));
    CUBLAS_CHECK(set_attr(gemm->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, a_scale));
    CUBLAS_CHECK(set_attr(gemm->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, b_scale));
    gemm->scale_modes = combo.name;
    if (pick_algo(lt, workspace_bytes, gemm, &last)) return true;
    destroy_fp8_gemm(gemm);
  }
  *why = last;
  return false;
}

void run_fp8_gemm(cublasLtHandle_t lt, const Fp8Gemm& gemm, const void* A, const void* B,
                  const void* C, void* D, void* workspace, size_t workspace_bytes,
                  cudaStream_t stream) {
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasLtMatmul(lt, gemm.desc, &alpha, A, gemm.a, B, gemm.b, &beta, C, gemm.c, D,
                              gemm.d, &gemm.algo, workspace, workspace_bytes, stream));
}

void destroy_fp8_gemm(Fp8Gemm* gemm) {
  if (gemm->d) cublasLtMatrixLayoutDestroy(gemm->d);
  if (gemm->c) cublasLtMatrixLayoutDestroy(gemm->c);
  if (gemm->b) cublasLtMatrixLayoutDestroy(gemm->b);
  if (gemm->a) cublasLtMatrixLayoutDestroy(gemm->a);
  if (gemm->desc) cublasLtMatmulDescDestroy(gemm->desc);
  *gemm = Fp8Gemm{};
}
