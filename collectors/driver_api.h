// Real CUDA driver and library entry points for collectors/, reached only through the
// SymbolResolver that interpose registers (never linked, never our own wrappers).
#pragma once

#include <string>

#include <cuda.h>

#include "collectors/events.h"

namespace lockstep::collectors {

struct Driver {
  decltype(&::cuGetProcAddress_v2) getProcAddress = nullptr;
  decltype(&::cuCtxGetCurrent) ctxGetCurrent = nullptr;
  decltype(&::cuCtxGetDevice) ctxGetDevice = nullptr;
  decltype(&::cuDeviceGetName) deviceGetName = nullptr;
  decltype(&::cuDeviceGetUuid_v2) deviceGetUuid = nullptr;
  decltype(&::cuDeviceGetPCIBusId) deviceGetPCIBusId = nullptr;  // the header's GPU identity
  decltype(&::cuDriverGetVersion) driverGetVersion = nullptr;
  decltype(&::cuDeviceGetCount) deviceGetCount = nullptr;  // the header's GPU count
  decltype(&::cuKernelGetName) kernelGetName = nullptr;
  decltype(&::cuFuncGetName) funcGetName = nullptr;
  decltype(&::cuKernelGetParamInfo) kernelGetParamInfo = nullptr;
  decltype(&::cuFuncGetParamInfo) funcGetParamInfo = nullptr;
  // The code a described kernel belongs to, so that its unload drops what is cached (kernels.cpp).
  decltype(&::cuFuncGetModule) funcGetModule = nullptr;
  decltype(&::cuKernelGetLibrary) kernelGetLibrary = nullptr;  // 12.5 and later
  decltype(&::cuLibraryGetModule) libraryGetModule = nullptr;  // a library's module here
  decltype(&::cuStreamGetCaptureInfo) streamGetCaptureInfo = nullptr;  // the 13.0 (v3) form
  decltype(&::cuStreamIsCapturing) streamIsCapturing = nullptr;
  decltype(&::cuEventCreate) eventCreate = nullptr;
  decltype(&::cuEventRecord) eventRecord = nullptr;
  decltype(&::cuEventQuery) eventQuery = nullptr;
  decltype(&::cuEventDestroy_v2) eventDestroy = nullptr;
  // Side streams of LOCKSTEP_SIDE_HASHES (side_hashes.h).
  decltype(&::cuStreamCreate) streamCreate = nullptr;
  decltype(&::cuStreamWaitEvent) streamWaitEvent = nullptr;
  decltype(&::cuPointerGetAttribute) pointerGetAttribute = nullptr;
  decltype(&::cuCtxPushCurrent_v2) ctxPushCurrent = nullptr;  // deferred hashes of another context
  decltype(&::cuCtxPopCurrent_v2) ctxPopCurrent = nullptr;
  decltype(&::cuMemFreeAsync) memFreeAsync = nullptr;  // frees the shim held back (defer_free)
  // A replay's snapshots (replay.h): stream-ordered, sized against what is free.
  decltype(&::cuMemAllocAsync) memAllocAsync = nullptr;
  decltype(&::cuMemcpyDtoDAsync_v2) memcpyDtoDAsync = nullptr;
  decltype(&::cuMemGetInfo_v2) memGetInfo = nullptr;
  // Graph walking (graphs.cpp). cuGraphKernelNodeGetParams is the _v2 form (12.0+).
  decltype(&::cuGraphGetNodes) graphGetNodes = nullptr;
  decltype(&::cuGraphNodeGetType) graphNodeGetType = nullptr;
  decltype(&::cuGraphKernelNodeGetParams) graphKernelNodeGetParams = nullptr;
  decltype(&::cuGraphChildGraphNodeGetGraph) graphChildGraphNodeGetGraph = nullptr;
  bool loaded = false;
};

// Resolves the driver once (thread-safe); `loaded` is false when libcuda is not in the process.
const Driver& driver();
// Registered by interpose (set_symbol_resolver); null before.
SymbolResolver symbol_resolver();
// resolver(name) or null.
void* resolve(const char* name);

// Versions of the libraries the job loaded (0 when absent).
int runtime_version();  // cudaRuntimeGetVersion
int nccl_version();     // ncclGetVersion
int cublas_version();   // cublasGetProperty(MAJOR/MINOR/PATCH) as major*10000+minor*100+patch
size_t cublaslt_version();

}  // namespace lockstep::collectors
