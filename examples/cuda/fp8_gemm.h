// cuBLASLt FP8 e4m3 GEMMs in the TN layout Hopper requires:
//   D (m x n, column-major) = op(A)^T-stored (k x m) x B (k x n), with scale buffers.
// Tensorwise: SCALAR_32F scales for A, B, D and the amax of D; D in e4m3, C in bf16.
// Block-scaled (Hopper, cuBLAS >= 12.9): 128x128 / 1x128 float scales, D in bf16.
#pragma once

#include <string>

#include <cublasLt.h>
#include <cuda_runtime.h>

struct Fp8Gemm {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  int m = 0, n = 0, k = 0;
  std::string scale_modes;  // e.g. "A:BLK128x128 B:VEC128", for the log
};

// Scale pointers are device pointers to float scale factors (dequantization: real = fp8 *
// scale). amax_d receives max|D| before D's conversion to fp8. Returns false with `why` set
// when cuBLASLt offers no algorithm for it on this GPU.
bool make_fp8_tensorwise(cublasLtHandle_t lt, int m, int n, int k, const float* a_scale,
                         const float* b_scale, const float* d_scale, float* amax_d,
                         size_t workspace_bytes, Fp8Gemm* gemm, std::string* why);

// Block scales: A_scale / B_scale hold at least block_scale_floats(outer, k) floats.
bool make_fp8_block_scaled(cublasLtHandle_t lt, int m, int n, int k, const float* a_scale,
                           const float* b_scale, size_t workspace_bytes, Fp8Gemm* gemm,
                           std::string* why);
// Floats a VEC128_32F or BLK128x128_32F scale tensor of a matrix with `outer` rows/cols and
// inner dimension k can need (the larger of both modes, with 16-byte padded strides).
size_t block_scale_floats(int outer, int k);

// D = A x B (alpha 1, beta 0; C is read with beta 0 but must be valid).
void run_fp8_gemm(cublasLtHandle_t lt, const Fp8Gemm& gemm, const void* A, const void* B,
                  const void* C, void* D, void* workspace, size_t workspace_bytes,
                  cudaStream_t stream);
void destroy_fp8_gemm(Fp8Gemm* gemm);
