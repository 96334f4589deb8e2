#include "collectors/driver_api.h"

#include <atomic>
#include <mutex>

#include <library_types.h>

namespace lockstep::collectors {
namespace {
std::atomic<SymbolResolver> g_resolver{nullptr};

template <typename Fn>
void load(const Driver& d, const char* name, int version, Fn* out) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status{};
  if (d.getProcAddress(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS &&
      status == CU_GET_PROC_ADDRESS_SUCCESS)
    *out = reinterpret_cast<Fn>(fn);
}
}  // namespace

void set_resolver_internal(SymbolResolver resolver) { g_resolver.store(resolver); }
SymbolResolver symbol_resolver() { return g_resolver.load(); }

void* resolve(const char* name) {
  SymbolResolver resolver = g_resolver.load();
  return resolver != nullptr ? resolver(name) : nullptr;
}

const Driver& driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    ShimCallGuard guard;
    d.getProcAddress = reinterpret_cast<decltype(d.getProcAddress)>(resolve("cuGetProcAddress_v2"));
    if (d.getProcAddress == nullptr) return;
    // The ABI version of every entry point below must match the type it is stored in. 12040:
    // the param-info APIs exist (12.4), cuStreamGetCaptureInfo is the v3 form the header
    // declares, and cuCtxGetDevice is still the one-argument form (13000 returns
    // cuCtxGetDevice_v2(device, ctx): calling that through the old type crashed the job).
    constexpr int v = 12040;
    load(d, "cuCtxGetCurrent", v, &d.ctxGetCurrent);
    load(d, "cuCtxGetDevice", v, &d.ctxGetDevice);
    load(d, "cuDeviceGetName", v, &d.deviceGetName);
    load(d, "cuDeviceGetCount", v, &d.deviceGetCount);
    load(d, "cuDeviceGetUuid", v, &d.deviceGetUuid);
    load(d, "cuDeviceGetPCIBusId", v, &d.deviceGetPCIBusId);
    load(d, "cuDriverGetVersion", v, &d.driverGetVersion);
    load(d, "cuKernelGetName", v, &d.kernelGetName);
    load(d, "cuFuncGetName", v, &d.funcGetName);
    load(d, "cuKernelGetParamInfo", v, &d.kernelGetParamInfo);
    load(d, "cuFuncGetParamInfo", v, &d.funcGetParamInfo);
    load(d, "cuFuncGetModule", v, &d.funcGetModule);
    load(d, "cuKernelGetLibrary", 12050, &d.kernelGetLibrary);
    load(d, "cuLibraryGetModule", v, &d.libraryGetModule);
    load(d, "cuStreamGetCaptureInfo", v, &d.streamGetCaptureInfo);
    load(d, "cuStreamIsCapturing", v, &d.streamIsCapturing);
    load(d, "cuEventCreate", v, &d.eventCreate);
    load(d, "cuEventRecord", v, &d.eventRecord);
    load(d, "cuEventQuery", v, &d.eventQuery);
    load(d, "cuEventDestroy", v, &d.eventDestroy);
    load(d, "cuStreamCreate", v, &d.streamCreate);
    load(d, "cuStreamWaitEvent", v, &d.streamWaitEvent);
    load(d, "cuPointerGetAttribute", v, &d.pointerGetAttribute);
    load(d, "cuCtxPushCurrent", v, &d.ctxPushCurrent);
    load(d, "cuCtxPopCurrent", v, &d.ctxPopCurrent);
    load(d, "cuMemFreeAsync", v, &d.memFreeAsync);
    load(d, "cuMemAllocAsync", v, &d.memAllocAsync);
    load(d, "cuMemcpyDtoDAsync", v, &d.memcpyDtoDAsync);
    load(d, "cuMemGetInfo", v, &d.memGetInfo);
    load(d, "cuGraphGetNodes", v, &d.graphGetNodes);
    load(d, "cuGraphNodeGetType", v, &d.graphNodeGetType);
    load(d, "cuGraphKernelNodeGetParams", v, &d.graphKernelNodeGetParams);
    load(d, "cuGraphChildGraphNodeGetGraph", v, &d.graphChildGraphNodeGetGraph);
    d.loaded = d.ctxGetCurrent != nullptr;
  });
  return d;
}

int runtime_version() {
  using Fn = int (*)(int*);
  auto fn = reinterpret_cast<Fn>(resolve("cudaRuntimeGetVersion"));
  int version = 0;
  if (fn != nullptr && fn(&version) != 0) version = 0;
  return version;
}

int nccl_version() {
  using Fn = int (*)(int*);
  auto fn = reinterpret_cast<Fn>(resolve("ncclGetVersion"));
  int version = 0;
  if (fn != nullptr && fn(&version) != 0) version = 0;
  return version;
}

int cublas_version() {
  using Fn = int (*)(libraryPropertyType, int*);
  auto fn = reinterpret_cast<Fn>(resolve("cublasGetProperty"));
  int major = 0, minor = 0, patch = 0;
  if (fn == nullptr || fn(MAJOR_VERSION, &major) != 0 || fn(MINOR_VERSION, &minor) != 0 ||
      fn(PATCH_LEVEL, &patch) != 0)
    return 0;
  return major * 10000 + minor * 100 + patch;
}

size_t cublaslt_version() {
  using Fn = size_t (*)();
  auto fn = reinterpret_cast<Fn>(resolve("cublasLtGetVersion"));
  return fn != nullptr ? fn() : 0;
}

}  // namespace lockstep::collectors
