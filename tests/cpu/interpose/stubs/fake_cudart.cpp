// Stands in for libcudart.so.13, with versioned symbols (fake_cudart.map:
// cudaLaunchKernel@@libcudart.so.13). Like the real one it reaches the driver through pointers
// it looked up itself: dlsym on the driver's handle, and the driver's internal resolver.
#include <dlfcn.h>

#include "call_counter.h"
#include "interpose/cuda_api.h"

extern "C" CUresult fakecuda_get_proc(const char*, void**, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult*);

namespace {
void* driver_symbol(const char* name) {
  void* driver = dlopen("libfakecuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
  if (driver == nullptr) return nullptr;
  void* p = dlsym(driver, name);
  dlclose(driver);
  return p;
}

cudaError_t launch_through_driver(const char* driver_name, dim3 grid, dim3 block, size_t smem,
                                  cudaStream_t stream, void** args) {
  using Launch = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**);
  auto launch = reinterpret_cast<Launch>(driver_symbol(driver_name));
  if (launch == nullptr) return cudaErrorSharedObjectSymbolNotFound;
  return launch(nullptr, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                static_cast<unsigned>(smem), stream, args, nullptr) == CUDA_SUCCESS
             ? cudaSuccess
             : cudaErrorLaunchFailure;
}

cudaError_t entry_point(const char* symbol, void** fn, int version, unsigned long long flags,
                        bool ptsz_api, cudaDriverEntryPointQueryResult* status) {
  const bool per_thread = (flags & cudaEnablePerThreadDefaultStream) != 0 ||
                          ((flags & cudaEnableLegacyStream) == 0 && ptsz_api);
  CUdriverProcAddressQueryResult driver_status;
  fakecuda_get_proc(symbol, fn, version,
                    per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                               : CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                    &driver_status);
  if (status != nullptr) *status = static_cast<cudaDriverEntryPointQueryResult>(driver_status);
  return cudaSuccess;
}
}  // namespace

STUB_EXPORT int fakecudart_calls(const char* name) { return stub::calls(name); }

STUB_EXPORT cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 13000;
  return cudaSuccess;
}

STUB_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3 grid, dim3 block, void** args,
                                           size_t smem, cudaStream_t stream) {
  stub::count("__cudaLaunchKernel");
  return launch_through_driver("cuLaunchKernel", grid, block, smem, stream, args);
}
STUB_EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t, dim3 grid, dim3 block, void** args,
                                                size_t smem, cudaStream_t stream) {
  stub::count("__cudaLaunchKernel_ptsz");
  return launch_through_driver("cuLaunchKernel_ptsz", grid, block, smem, stream, args);
}
STUB_EXPORT cudaError_t cudaLaunchKernel(const void*, dim3, dim3, void**, size_t, cudaStream_t) {
  stub::count("cudaLaunchKernel");
  return cudaSuccess;
}
STUB_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t*, const void*, void**) {
  stub::count("cudaLaunchKernelExC");
  return cudaSuccess;
}
STUB_EXPORT cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** fn,
                                                unsigned long long flags,
                                                cudaDriverEntryPointQueryResult* status) {
  stub::count("cudaGetDriverEntryPoint");
  return entry_point(symbol, fn, 13000, flags, false, status);
}
STUB_EXPORT cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** fn,
                                                     unsigned long long flags,
                                                     cudaDriverEntryPointQueryResult* status) {
  stub::count("cudaGetDriverEntryPoint_ptsz");
  return entry_point(symbol, fn, 13000, flags, true, status);
}
STUB_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn,
                                                         unsigned int version,
                                                         unsigned long long flags,
                                                         cudaDriverEntryPointQueryResult* status) {
  stub::count("cudaGetDriverEntryPointByVersion");
  return entry_point(symbol, fn, static_cast<int>(version), flags, false, status);
}
STUB_EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
    const char* symbol, void** fn, unsigned int version, unsigned long long flags,
    cudaDriverEntryPointQueryResult* status) {
  stub::count("cudaGetDriverEntryPointByVersion_ptsz");
  return entry_point(symbol, fn, static_cast<int>(version), flags, true, status);
}
STUB_EXPORT cudaError_t cudaMalloc(void** p, size_t) {
  stub::count("cudaMalloc");
  *p = reinterpret_cast<void*>(0x100000);
  return cudaSuccess;
}
STUB_EXPORT cudaError_t cudaFree(void*) {
  stub::count("cudaFree");
  return cudaSuccess;
}
STUB_EXPORT cudaError_t cudaMemcpyAsync(void*, const void*, size_t, cudaMemcpyKind, cudaStream_t) {
  stub::count("cudaMemcpyAsync");
  return cudaSuccess;
}
STUB_EXPORT cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t,
                                                      unsigned long long) {
  stub::count("cudaGraphInstantiateWithFlags");
  *exec = reinterpret_cast<cudaGraphExec_t>(0x6000);
  return cudaSuccess;
}
STUB_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t, cudaStream_t) {
  stub::count("cudaGraphLaunch");
  return cudaSuccess;
}
