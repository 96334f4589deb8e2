// Stands in for libcuda.so.1: a few driver entry points that count their calls, and a
// cuGetProcAddress that picks variants by base name, version and per-thread flag like the
// driver does. Linked -Bsymbolic, so fakecuda_self() gives this library's own functions.
#include <cstring>

#include "call_counter.h"
#include "interpose/cuda_api.h"

STUB_EXPORT int fakecuda_calls(const char* name) { return stub::calls(name); }

STUB_EXPORT CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, unsigned, CUstream, void**, void**) {
  stub::count("cuLaunchKernel");
  return CUDA_SUCCESS;
}
STUB_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned,
                                         unsigned, unsigned, unsigned, CUstream, void**, void**) {
  stub::count("cuLaunchKernel_ptsz");
  return CUDA_SUCCESS;
}
STUB_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig*, CUfunction, void**, void**) {
  stub::count("cuLaunchKernelEx");
  return CUDA_SUCCESS;
}
STUB_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig*, CUfunction, void**, void**) {
  stub::count("cuLaunchKernelEx_ptsz");
  return CUDA_SUCCESS;
}
STUB_EXPORT CUresult cuCtxGetCurrent(CUcontext* ctx) {
  stub::count("cuCtxGetCurrent");
  if (ctx != nullptr) *ctx = nullptr;
  return CUDA_SUCCESS;
}
STUB_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t, size_t, CUdeviceptr,
                                         unsigned long long) {
  stub::count("cuMemAddressReserve");
  *ptr = 0x7f0000000000ULL;
  return CUDA_SUCCESS;
}
STUB_EXPORT CUresult cuMemAddressFree(CUdeviceptr, size_t) {
  stub::count("cuMemAddressFree");
  return CUDA_SUCCESS;
}
STUB_EXPORT CUresult cuMemMap(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                              unsigned long long) {
  stub::count("cuMemMap");
  return CUDA_SUCCESS;
}
STUB_EXPORT CUresult cuMemUnmap(CUdeviceptr, size_t) {
  stub::count("cuMemUnmap");
  return CUDA_SUCCESS;
}
STUB_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t) {
  stub::count("cuMemAlloc_v2");
  *p = 0x500000ULL;
  return CUDA_SUCCESS;
}

// The driver's internal resolver (what cudart calls without going through any export).
STUB_EXPORT CUresult fakecuda_get_proc(const char* symbol, void** pfn, int version,
                                       cuuint64_t flags,
                                       CUdriverProcAddressQueryResult* status);

STUB_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                         cuuint64_t flags,
                                         CUdriverProcAddressQueryResult* status) {
  stub::count("cuGetProcAddress_v2");
  return fakecuda_get_proc(symbol, pfn, version, flags, status);
}
STUB_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version,
                                      cuuint64_t flags) {
  stub::count("cuGetProcAddress");
  return fakecuda_get_proc(symbol, pfn, version, flags, nullptr);
}

namespace {
struct Entry {
  const char* base;
  int version;
  bool per_thread;
  void* fn;
};
const Entry kEntries[] = {
    {"cuLaunchKernel", 4000, false, reinterpret_cast<void*>(&cuLaunchKernel)},
    {"cuLaunchKernel", 7000, true, reinterpret_cast<void*>(&cuLaunchKernel_ptsz)},
    {"cuLaunchKernelEx", 11060, false, reinterpret_cast<void*>(&cuLaunchKernelEx)},
    {"cuLaunchKernelEx", 11060, true, reinterpret_cast<void*>(&cuLaunchKernelEx_ptsz)},
    {"cuGetProcAddress", 11030, false, reinterpret_cast<void*>(&cuGetProcAddress)},
    {"cuGetProcAddress", 12000, false, reinterpret_cast<void*>(&cuGetProcAddress_v2)},
    {"cuCtxGetCurrent", 4000, false, reinterpret_cast<void*>(&cuCtxGetCurrent)},
    {"cuMemAlloc", 3020, false, reinterpret_cast<void*>(&cuMemAlloc_v2)},
};
}  // namespace

STUB_EXPORT CUresult fakecuda_get_proc(const char* symbol, void** pfn, int version,
                                       cuuint64_t flags,
                                       CUdriverProcAddressQueryResult* status) {
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const Entry* best = nullptr;
  bool known = false;
  for (int pass = per_thread ? 0 : 1; pass < 2 && best == nullptr; ++pass) {
    const bool want_per_thread = pass == 0;
    for (const Entry& e : kEntries) {
      if (std::strcmp(e.base, symbol) != 0) continue;
      known = true;
      if (e.per_thread != want_per_thread || e.version > version) continue;
      if (best == nullptr || e.version > best->version) best = &e;
    }
  }
  *pfn = best != nullptr ? best->fn : nullptr;
  if (status != nullptr) {
    *status = best != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS
              : known         ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                              : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  return CUDA_SUCCESS;
}

// This library's own definition of a name (never the shim's: -Bsymbolic binds it here).
STUB_EXPORT void* fakecuda_self(const char* name) {
  if (std::strcmp(name, "cuLaunchKernel") == 0) return reinterpret_cast<void*>(&cuLaunchKernel);
  if (std::strcmp(name, "cuLaunchKernel_ptsz") == 0)
    return reinterpret_cast<void*>(&cuLaunchKernel_ptsz);
  if (std::strcmp(name, "cuCtxGetCurrent") == 0) return reinterpret_cast<void*>(&cuCtxGetCurrent);
  if (std::strcmp(name, "cuGetProcAddress_v2") == 0)
    return reinterpret_cast<void*>(&cuGetProcAddress_v2);
  return nullptr;
}
