// A stand-in libcuda.so.1 for shim_launch_bench (not a test, never evidence of GPU work): the
// entry points a kernel launch at broad reaches through the whole shim, each doing nothing
// (fake_driver_entries.h), and those of the shim's hash engine (fake_hash_engine.h: a context,
// and hash launches that deliver made-up digests at once), so that a launch at full takes the
// whole path. The launch itself returns at once, so the bench measures the shim's own time
// around it.
#include <cuda.h>

#include <cstring>

#include "bench/collectors/fake_driver_entries.h"
#include "bench/collectors/fake_hash_engine.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
CUresult driver_version(int* version) {
  *version = 13000;
  return CUDA_SUCCESS;
}
}  // namespace

FAKE_EXPORT CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, unsigned, CUstream, void**, void**) {
  return CUDA_SUCCESS;
}
// One allocation's worth of addresses (the bench's pointers), so that the shim sees a job's
// allocation; nothing is allocated.
FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t) {
  *dptr = 0x7f0000000000;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr) { return CUDA_SUCCESS; }
// Stream-ordered allocations (shim_launch_bench's "free" op, as PyTorch's cudaMallocAsync backend
// makes them): 1 MiB apart below the bench's allocation, each new (64 GiB of addresses, then
// again from the first; nothing is allocated). cuGetProcAddress hands out these internal
// functions: the exported names would resolve to the shim's own hooks.
namespace {
CUresult alloc_async(CUdeviceptr* dptr, size_t, CUstream) {
  static unsigned next = 0;
  *dptr = 0x7e0000000000 + (CUdeviceptr{next++ % 65536} << 20);
  return CUDA_SUCCESS;
}
CUresult free_async(CUdeviceptr, CUstream) { return CUDA_SUCCESS; }
}  // namespace
FAKE_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  return alloc_async(dptr, bytes, stream);
}
FAKE_EXPORT CUresult cuMemFreeAsync(CUdeviceptr ptr, CUstream stream) {
  return free_async(ptr, stream);
}
FAKE_EXPORT CUresult cuCtxGetCurrent(CUcontext* ctx) {
  return lockstep::bench::fake_engine::ctx_get_current(ctx);
}
FAKE_EXPORT CUresult cuDriverGetVersion(int* version) { return driver_version(version); }

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int, cuuint64_t,
                                         CUdriverProcAddressQueryResult* status) {
  *pfn = lockstep::bench::fake_engine::entry(symbol);
  if (*pfn == nullptr) *pfn = lockstep::bench::fake_driver_entry(symbol);
  if (*pfn == nullptr && std::strcmp(symbol, "cuDriverGetVersion") == 0)
    *pfn = reinterpret_cast<void*>(&driver_version);
  if (*pfn == nullptr && std::strcmp(symbol, "cuMemAllocAsync") == 0)
    *pfn = reinterpret_cast<void*>(&alloc_async);
  if (*pfn == nullptr && std::strcmp(symbol, "cuMemFreeAsync") == 0)
    *pfn = reinterpret_cast<void*>(&free_async);
  if (status != nullptr)
    *status = *pfn != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return *pfn != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
