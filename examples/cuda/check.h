// Error checks for the example job: print where and why, then exit(1). (An example program may
// exit; the shim never does.)
#pragma once

#include <cstdio>
#include <cstdlib>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#define CUDA_CHECK(call)                                                        \
  do {                                                                          \
    cudaError_t err_ = (call);                                                  \
    if (err_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(err_));                                   \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

#define CUBLAS_CHECK(call)                                                      \
  do {                                                                          \
    cublasStatus_t st_ = (call);                                                \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                         \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
                   cublasGetStatusString(st_));                                 \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

#define NCCL_CHECK(call)                                                        \
  do {                                                                          \
    ncclResult_t res_ = (call);                                                 \
    if (res_ != ncclSuccess) {                                                  \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
                   ncclGetErrorString(res_));                                   \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

// Kernel launches: catch configuration errors right away.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
