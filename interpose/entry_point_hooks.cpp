// cuGetProcAddress(_v2) and cudaGetDriverEntryPoint[ByVersion][_ptsz]: the driver hands out
// function pointers by base name, version and per-thread flag; we hand out the wrapper for
// the same variant, which forwards to the pointer the driver gave (so a NULL stream keeps the
// meaning the caller asked for). symbolStatus / driverStatus are written by the real call.
#include <cstring>

#include "debug_log.h"
#include "entry_points.h"
#include "hook_support.h"
#include "interception.h"

namespace lockstep::interpose {
namespace {

struct EntryPoint {
  const char* base;
  int first_version;
  bool per_thread;
  HookId hook;
};

constexpr EntryPoint kEntryPoints[] = {
#define LOCKSTEP_ENTRY(base, version, per_thread, hook) {#base, version, per_thread, HookId::hook},
#include "driver_entry_points.def"
#undef LOCKSTEP_ENTRY
};

const EntryPoint* pick(const char* symbol, int cuda_version, bool per_thread) {
  const EntryPoint* best = nullptr;
  for (const EntryPoint& e : kEntryPoints) {
    if (e.per_thread != per_thread || e.first_version > cuda_version) continue;
    if (std::strcmp(e.base, symbol) != 0) continue;
    if (best == nullptr || e.first_version > best->first_version) best = &e;
  }
  return best;
}

// cudart's own version, which cudaGetDriverEntryPoint (no version argument) uses.
int runtime_version() {
  static const int version = [] {
    using Fn = cudaError_t (*)(int*);
    int v = 0;
    if (auto f = reinterpret_cast<Fn>(resolve_symbol("cudaRuntimeGetVersion"))) {
      if (f(&v) != cudaSuccess) v = 0;
    }
    return v > 0 ? v : CUDART_VERSION;
  }();
  return version;
}

// cudaEnableDefault means per-thread in the _ptsz resolvers, legacy in the others.
bool runtime_flags_per_thread(unsigned long long flags, bool ptsz_api) {
  if ((flags & cudaEnablePerThreadDefaultStream) != 0) return true;
  if ((flags & cudaEnableLegacyStream) != 0) return false;
  return ptsz_api;
}

}  // namespace

void* substitute_entry_point(const char* symbol, int cuda_version, bool per_thread, void* real) {
  if (symbol == nullptr || real == nullptr || inside_own_object(real)) return real;
  const EntryPoint* e = pick(symbol, cuda_version, per_thread);
  // The driver falls back to the legacy function when there is no per-thread one.
  if (e == nullptr && per_thread) e = pick(symbol, cuda_version, false);
  if (e == nullptr) return real;
  void* forward_to = adopt_real_address(e->hook, real);
  void* wrapper = wrapper_address(e->hook);
  if (forward_to == nullptr || wrapper == nullptr) return real;
  LOCKSTEP_DEBUG_LOG("entry point %s (version %d, %s) -> wrapper %s", symbol, cuda_version,
                     per_thread ? "per-thread" : "legacy", hook_info(e->hook).name);
  return wrapper;
}

}  // namespace lockstep::interpose

using namespace lockstep::interpose;

namespace {

void substitute_in_place(const char* symbol, void** pfn, int version, bool per_thread) {
  if (pfn != nullptr && *pfn != nullptr) {
    *pfn = substitute_entry_point(symbol, version, per_thread, *pfn);
  }
}

}  // namespace

LOCKSTEP_INTERCEPTOR CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                                  cuuint64_t flags,
                                                  CUdriverProcAddressQueryResult* symbolStatus) {
  auto real = REAL(cuGetProcAddress_v2);
  if (real == nullptr) return missing_result<CUresult>();
  const CUresult result = real(symbol, pfn, cudaVersion, flags, symbolStatus);
  if (result == CUDA_SUCCESS) {
    substitute_in_place(symbol, pfn, cudaVersion,
                        (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0);
  }
  return result;
}

LOCKSTEP_INTERCEPTOR CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                               cuuint64_t flags) {
  auto real = REAL(cuGetProcAddress);
  if (real == nullptr) return missing_result<CUresult>();
  const CUresult result = real(symbol, pfn, cudaVersion, flags);
  if (result == CUDA_SUCCESS) {
    substitute_in_place(symbol, pfn, cudaVersion,
                        (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0);
  }
  return result;
}

LOCKSTEP_INTERCEPTOR cudaError_t
cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, unsigned long long flags,
                        cudaDriverEntryPointQueryResult* driverStatus) {
  auto real = REAL(cudaGetDriverEntryPoint);
  if (real == nullptr) return missing_result<cudaError_t>();
  const cudaError_t result = real(symbol, funcPtr, flags, driverStatus);
  if (result == cudaSuccess) {
    substitute_in_place(symbol, funcPtr, runtime_version(), runtime_flags_per_thread(flags, false));
  }
  return result;
}

LOCKSTEP_INTERCEPTOR cudaError_t
cudaGetDriverEntryPoint_ptsz(const char* symbol, void** funcPtr, unsigned long long flags,
                             cudaDriverEntryPointQueryResult* driverStatus) {
  auto real = REAL(cudaGetDriverEntryPoint_ptsz);
  if (real == nullptr) return missing_result<cudaError_t>();
  const cudaError_t result = real(symbol, funcPtr, flags, driverStatus);
  if (result == cudaSuccess) {
    substitute_in_place(symbol, funcPtr, runtime_version(), runtime_flags_per_thread(flags, true));
  }
  return result;
}

LOCKSTEP_INTERCEPTOR cudaError_t cudaGetDriverEntryPointByVersion(
    const char* symbol, void** funcPtr, unsigned int cudaVersion, unsigned long long flags,
    cudaDriverEntryPointQueryResult* driverStatus) {
  auto real = REAL(cudaGetDriverEntryPointByVersion);
  if (real == nullptr) return missing_result<cudaError_t>();
  const cudaError_t result = real(symbol, funcPtr, cudaVersion, flags, driverStatus);
  if (result == cudaSuccess) {
    substitute_in_place(symbol, funcPtr, static_cast<int>(cudaVersion),
                        runtime_flags_per_thread(flags, false));
  }
  return result;
}

LOCKSTEP_INTERCEPTOR cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
    const char* symbol, void** funcPtr, unsigned int cudaVersion, unsigned long long flags,
    cudaDriverEntryPointQueryResult* driverStatus) {
  auto real = REAL(cudaGetDriverEntryPointByVersion_ptsz);
  if (real == nullptr) return missing_result<cudaError_t>();
  const cudaError_t result = real(symbol, funcPtr, cudaVersion, flags, driverStatus);
  if (result == cudaSuccess) {
    substitute_in_place(symbol, funcPtr, static_cast<int>(cudaVersion),
                        runtime_flags_per_thread(flags, true));
  }
  return result;
}
