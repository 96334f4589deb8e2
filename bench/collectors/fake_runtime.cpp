// A stand-in libcudart.so for shim_launch_bench's runtime-stub launches (not a test, never
// evidence of GPU work): __cudaLaunchKernel, the entry point nvcc 13 compiles `kernel<<<...>>>`
// into and PyTorch's own kernels reach the shim by (../shared/FIELD-NOTES.md), returning at
// once. The shim finds it as the real one by its library's name (interpose/real_symbols.cpp).
#include <cuda_runtime_api.h>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t,
                                           cudaStream_t) {
  return cudaSuccess;
}
FAKE_EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t, dim3, dim3, void**, size_t,
                                                cudaStream_t) {
  return cudaSuccess;
}
