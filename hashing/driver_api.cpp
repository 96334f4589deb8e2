// Resolving the driver entry points the engine uses, without linking libcuda.
#include <dlfcn.h>

#include <string>

#include "hashing/engine.h"

namespace lockstep::hashing {
namespace {

// The 12.0 semantics of each entry point: every 12.x and 13.x driver has them.
constexpr int kDriverApiVersion = 12000;

template <typename Fn>
bool resolve(decltype(&::cuGetProcAddress_v2) get_proc_address, const char* name, Fn* out,
             std::string* error) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status{};
  const CUresult rc =
      get_proc_address(name, &fn, kDriverApiVersion, CU_GET_PROC_ADDRESS_DEFAULT, &status);
  if (rc != CUDA_SUCCESS || fn == nullptr || status != CU_GET_PROC_ADDRESS_SUCCESS) {
    if (error) *error = std::string("driver entry point not found: ") + name;
    return false;
  }
  *out = reinterpret_cast<Fn>(fn);
  return true;
}

}  // namespace

bool load_driver_api(decltype(&::cuGetProcAddress_v2) get_proc_address, DriverApi* api,
                     std::string* error) {
  if (get_proc_address == nullptr || api == nullptr) {
    if (error) *error = "load_driver_api: null argument";
    return false;
  }
  DriverApi a;
  const bool ok =
      resolve(get_proc_address, "cuCtxGetCurrent", &a.ctxGetCurrent, error) &&
      resolve(get_proc_address, "cuCtxGetDevice", &a.ctxGetDevice, error) &&
      resolve(get_proc_address, "cuModuleLoadData", &a.moduleLoadData, error) &&
      resolve(get_proc_address, "cuModuleGetFunction", &a.moduleGetFunction, error) &&
      resolve(get_proc_address, "cuLaunchKernel", &a.launchKernel, error) &&
      resolve(get_proc_address, "cuMemAlloc", &a.memAlloc, error) &&
      resolve(get_proc_address, "cuMemFree", &a.memFree, error) &&
      resolve(get_proc_address, "cuMemHostAlloc", &a.memHostAlloc, error) &&
      resolve(get_proc_address, "cuMemHostGetDevicePointer", &a.memHostGetDevicePointer, error) &&
      resolve(get_proc_address, "cuMemFreeHost", &a.memFreeHost, error) &&
      resolve(get_proc_address, "cuMemsetD8Async", &a.memsetD8Async, error) &&
      resolve(get_proc_address, "cuStreamIsCapturing", &a.streamIsCapturing, error) &&
      resolve(get_proc_address, "cuThreadExchangeStreamCaptureMode",
              &a.threadExchangeStreamCaptureMode, error) &&
      resolve(get_proc_address, "cuGetErrorString", &a.getErrorString, error) &&
      resolve(get_proc_address, "cuDeviceGetAttribute", &a.deviceGetAttribute, error) &&
      resolve(get_proc_address, "cuOccupancyMaxActiveBlocksPerMultiprocessor",
              &a.occupancyMaxActiveBlocksPerMultiprocessor, error) &&
      resolve(get_proc_address, "cuStreamCreate", &a.streamCreate, error) &&
      resolve(get_proc_address, "cuStreamDestroy", &a.streamDestroy, error) &&
      resolve(get_proc_address, "cuStreamSynchronize", &a.streamSynchronize, error) &&
      resolve(get_proc_address, "cuModuleUnload", &a.moduleUnload, error);
  if (ok) *api = a;
  return ok;
}

bool load_driver_api_from_libcuda(DriverApi* api, std::string* error) {
  void* libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);  // kept open for the process
  if (libcuda == nullptr) {
    if (error) *error = std::string("cannot load libcuda.so.1: ") + dlerror();
    return false;
  }
  auto get_proc_address =
      reinterpret_cast<decltype(&::cuGetProcAddress_v2)>(dlsym(libcuda, "cuGetProcAddress_v2"));
  if (get_proc_address == nullptr) {
    if (error) *error = "libcuda.so.1 has no cuGetProcAddress_v2";
    return false;
  }
  return load_driver_api(get_proc_address, api, error);
}

}  // namespace lockstep::hashing
