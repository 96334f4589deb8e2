// An "extension module" linked against the fake cudart: its calls carry versioned references
// (cudaLaunchKernel@libcudart.so.13) and bind to the preloaded shim first. The tests dlopen it
// RTLD_LOCAL, as Python does with extension modules.
#include <dlfcn.h>

#include "interpose/cuda_api.h"

#define APP_EXPORT extern "C" __attribute__((visibility("default")))

APP_EXPORT int app_launch_stub(bool per_thread) {
  int value = 7;
  void* args[] = {&value};
  return per_thread ? __cudaLaunchKernel_ptsz(nullptr, dim3(2, 3, 4), dim3(32), args, 16, nullptr)
                    : __cudaLaunchKernel(nullptr, dim3(2, 3, 4), dim3(32), args, 16, nullptr);
}
APP_EXPORT int app_launch_runtime() {
  return cudaLaunchKernel(reinterpret_cast<const void*>(&app_launch_stub), dim3(5), dim3(64),
                          nullptr, 0, nullptr);
}
APP_EXPORT int app_launch_ex_with_cluster() {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = 2;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(8);
  config.blockDim = dim3(128);
  config.attrs = &attr;
  config.numAttrs = 1;
  return cudaLaunchKernelExC(&config, reinterpret_cast<const void*>(&app_launch_stub), nullptr);
}
APP_EXPORT int app_malloc_copy_free() {
  void* p = nullptr;
  if (cudaMalloc(&p, 256) != cudaSuccess) return 1;
  char host[16] = {};
  if (cudaMemcpyAsync(host, p, sizeof host, cudaMemcpyDeviceToHost, nullptr) != cudaSuccess)
    return 2;
  return cudaFree(p) == cudaSuccess ? 0 : 3;
}
APP_EXPORT int app_graph() {
  cudaGraphExec_t exec = nullptr;
  if (cudaGraphInstantiateWithFlags(&exec, reinterpret_cast<cudaGraph_t>(0x5000), 0) != cudaSuccess)
    return 1;
  return cudaGraphLaunch(exec, nullptr) == cudaSuccess ? 0 : 2;
}
// dlsym(RTLD_DEFAULT) from an RTLD_LOCAL library also searches its own dependencies.
APP_EXPORT void* app_default_lookup(const char* name) {
  void* p = dlsym(RTLD_DEFAULT, name);
  __asm__ volatile("" ::: "memory");  // not a tail call: dlsym must see this library as caller
  return p;
}
