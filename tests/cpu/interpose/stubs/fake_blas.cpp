// Stands in for libcublasLt.so.13 (cublasLtMatmul) and libcublas.so.13 (cublasGemmEx, which
// like the real one calls the public cublasLtMatmul through its PLT). Built twice, see
// CMakeLists.txt: FAKE_CUBLAS_LT builds the Lt part.
#include "call_counter.h"
#include "interpose/cuda_api.h"

#ifdef FAKE_CUBLAS_LT
STUB_EXPORT int fakecublaslt_calls(const char* name) { return stub::calls(name); }
STUB_EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*,
                                          const void*, cublasLtMatrixLayout_t, const void*,
                                          cublasLtMatrixLayout_t, const void*, const void*,
                                          cublasLtMatrixLayout_t, void*, cublasLtMatrixLayout_t,
                                          const cublasLtMatmulAlgo_t*, void*, size_t,
                                          cudaStream_t) {
  stub::count("cublasLtMatmul");
  return CUBLAS_STATUS_SUCCESS;
}
#else
STUB_EXPORT int fakecublas_calls(const char* name) { return stub::calls(name); }
STUB_EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                        int, int, const void*, const void*, cudaDataType, int,
                                        const void*, cudaDataType, int, const void*, void*,
                                        cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) {
  stub::count("cublasGemmEx");
  return cublasLtMatmul(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                        nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, nullptr);
}
#endif
