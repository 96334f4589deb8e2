// Allocations and VA reservations -> collectors::on_alloc/on_free/on_va_*/on_map/on_unmap,
// which keep the allocation interval map. Frees and unmaps are reported before the real call:
// once it returns, another thread may already be given the same addresses.
// One Allocation nesting scope: cudaMalloc reaching our cuMemAlloc wrapper is reported once.
#include "collectors/events.h"
#include "hook_support.h"

using namespace lockstep::interpose;
namespace collectors = lockstep::collectors;

namespace {

CUdeviceptr as_device(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// forward(), timed as the job's allocation call (LOCKSTEP_DEBUG's "alloc call") when it is the
// job's and the outermost layer: the driver time that a full run's cudaMallocAsync backend adds.
template <typename Forward>
auto timed_forward(bool outermost, Forward&& forward) {
  namespace self_time = collectors::self_time;
  if (!outermost || !self_time::enabled.load(std::memory_order_relaxed) || !track_state())
    return forward();
  self_time::Scope timed(self_time::Phase::AllocCall);
  return forward();
}

// Forward an allocation; on success report [*ptr, *ptr + bytes()).
template <typename Result, typename Forward, typename Bytes>
Result allocation(Forward&& forward, Result success, const CUdeviceptr* ptr, Bytes&& bytes) {
  Nesting nesting(Scope::Allocation);
  const Result r = timed_forward(nesting.outermost(), forward);
  if (r == success && ptr != nullptr) {
    report_state(nesting.outermost(), [&] { collectors::on_alloc(*ptr, bytes()); });
  }
  return r;
}

// A stream-ordered allocation: reported with its stream (capturing streams make graph memory).
template <typename Result, typename Forward, typename Bytes>
Result stream_allocation(Forward&& forward, Result success, const CUdeviceptr* ptr, Bytes&& bytes,
                         const void* stream, bool per_thread_default) {
  Nesting nesting(Scope::Allocation);
  const Result r = timed_forward(nesting.outermost(), forward);
  if (r == success && ptr != nullptr) {
    report_state(nesting.outermost(), [&] {
      collectors::on_stream_alloc(
          *ptr, bytes(), reinterpret_cast<CUstream>(const_cast<void*>(stream)), per_thread_default);
    });
  }
  return r;
}

template <typename Forward, typename Report>
auto release(Forward&& forward, Report&& report) {
  Nesting nesting(Scope::Allocation);
  report_state(nesting.outermost(), report);
  return timed_forward(nesting.outermost(), forward);
}

// A stream-ordered free: the collectors may take it over (made later, after the hashes that
// still read the memory); the job's call then succeeds without being forwarded now.
template <typename Result, typename Forward>
Result stream_release(Forward&& forward, Result success, CUdeviceptr ptr, const void* stream,
                      bool per_thread_default) {
  Nesting nesting(Scope::Allocation);
  bool taken = false;
  report_state(nesting.outermost(), [&] {
    if (ptr != 0)
      taken = collectors::on_stream_free(ptr, reinterpret_cast<CUstream>(const_cast<void*>(stream)),
                                         per_thread_default);
  });
  return taken ? success : timed_forward(nesting.outermost(), forward);
}

}  // namespace

// ---- runtime ----
LOCKSTEP_INTERCEPTOR cudaError_t cudaMalloc(void** devPtr, size_t size) {
  CUdeviceptr p = 0;
  return allocation(
      [&] {
        const cudaError_t r = LOCKSTEP_FORWARD(cudaMalloc, devPtr, size);
        if (devPtr != nullptr) p = as_device(*devPtr);
        return r;
      },
      cudaSuccess, &p, [&] { return size; });
}

#define LOCKSTEP_RUNTIME_MALLOC_ASYNC(name, per_thread)                                    \
  LOCKSTEP_INTERCEPTOR cudaError_t name(void** devPtr, size_t size, cudaStream_t stream) { \
    CUdeviceptr p = 0;                                                                     \
    return stream_allocation(                                                              \
        [&] {                                                                              \
          const cudaError_t r = LOCKSTEP_FORWARD(name, devPtr, size, stream);              \
          if (devPtr != nullptr) p = as_device(*devPtr);                                   \
          return r;                                                                        \
        },                                                                                 \
        cudaSuccess, &p, [&] { return size; }, stream, per_thread);                        \
  }
LOCKSTEP_RUNTIME_MALLOC_ASYNC(cudaMallocAsync, false)
LOCKSTEP_RUNTIME_MALLOC_ASYNC(cudaMallocAsync_ptsz, true)
#undef LOCKSTEP_RUNTIME_MALLOC_ASYNC

#define LOCKSTEP_RUNTIME_MALLOC_POOL(name, per_thread)                                  \
  LOCKSTEP_INTERCEPTOR cudaError_t name(void** ptr, size_t size, cudaMemPool_t memPool, \
                                        cudaStream_t stream) {                          \
    CUdeviceptr p = 0;                                                                  \
    return stream_allocation(                                                           \
        [&] {                                                                           \
          const cudaError_t r = LOCKSTEP_FORWARD(name, ptr, size, memPool, stream);     \
          if (ptr != nullptr) p = as_device(*ptr);                                      \
          return r;                                                                     \
        },                                                                              \
        cudaSuccess, &p, [&] { return size; }, stream, per_thread);                     \
  }
LOCKSTEP_RUNTIME_MALLOC_POOL(cudaMallocFromPoolAsync, false)
LOCKSTEP_RUNTIME_MALLOC_POOL(cudaMallocFromPoolAsync_ptsz, true)
#undef LOCKSTEP_RUNTIME_MALLOC_POOL

LOCKSTEP_INTERCEPTOR cudaError_t cudaFree(void* devPtr) {
  return release([&] { return LOCKSTEP_FORWARD(cudaFree, devPtr); },
                 [&] {
                   if (devPtr != nullptr) collectors::on_free(as_device(devPtr));
                 });
}
LOCKSTEP_INTERCEPTOR cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t stream) {
  return stream_release([&] { return LOCKSTEP_FORWARD(cudaFreeAsync, devPtr, stream); },
                        cudaSuccess, as_device(devPtr), stream, false);
}
LOCKSTEP_INTERCEPTOR cudaError_t cudaFreeAsync_ptsz(void* devPtr, cudaStream_t stream) {
  return stream_release([&] { return LOCKSTEP_FORWARD(cudaFreeAsync_ptsz, devPtr, stream); },
                        cudaSuccess, as_device(devPtr), stream, true);
}

// ---- driver ----
LOCKSTEP_INTERCEPTOR CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  return allocation([&] { return LOCKSTEP_FORWARD(cuMemAlloc_v2, dptr, bytesize); }, CUDA_SUCCESS,
                    dptr, [&] { return bytesize; });
}
LOCKSTEP_INTERCEPTOR CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch,
                                                 size_t WidthInBytes, size_t Height,
                                                 unsigned int ElementSizeBytes) {
  return allocation(
      [&] {
        return LOCKSTEP_FORWARD(cuMemAllocPitch_v2, dptr, pPitch, WidthInBytes, Height,
                                ElementSizeBytes);
      },
      CUDA_SUCCESS, dptr, [&] { return (pPitch != nullptr ? *pPitch : WidthInBytes) * Height; });
}
LOCKSTEP_INTERCEPTOR CUresult cuMemFree_v2(CUdeviceptr dptr) {
  return release([&] { return LOCKSTEP_FORWARD(cuMemFree_v2, dptr); },
                 [&] {
                   if (dptr != 0) collectors::on_free(dptr);
                 });
}

#define LOCKSTEP_DRIVER_ALLOC_ASYNC(name, per_thread)                                            \
  LOCKSTEP_INTERCEPTOR CUresult name(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {     \
    return stream_allocation([&] { return LOCKSTEP_FORWARD(name, dptr, bytesize, hStream); },    \
                             CUDA_SUCCESS, dptr, [&] { return bytesize; }, hStream, per_thread); \
  }
LOCKSTEP_DRIVER_ALLOC_ASYNC(cuMemAllocAsync, false)
LOCKSTEP_DRIVER_ALLOC_ASYNC(cuMemAllocAsync_ptsz, true)
#undef LOCKSTEP_DRIVER_ALLOC_ASYNC

#define LOCKSTEP_DRIVER_ALLOC_POOL(name, per_thread)                                               \
  LOCKSTEP_INTERCEPTOR CUresult name(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,        \
                                     CUstream hStream) {                                           \
    return stream_allocation(                                                                      \
        [&] { return LOCKSTEP_FORWARD(name, dptr, bytesize, pool, hStream); }, CUDA_SUCCESS, dptr, \
        [&] { return bytesize; }, hStream, per_thread);                                            \
  }
LOCKSTEP_DRIVER_ALLOC_POOL(cuMemAllocFromPoolAsync, false)
LOCKSTEP_DRIVER_ALLOC_POOL(cuMemAllocFromPoolAsync_ptsz, true)
#undef LOCKSTEP_DRIVER_ALLOC_POOL

LOCKSTEP_INTERCEPTOR CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  return stream_release([&] { return LOCKSTEP_FORWARD(cuMemFreeAsync, dptr, hStream); },
                        CUDA_SUCCESS, dptr, hStream, false);
}
LOCKSTEP_INTERCEPTOR CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  return stream_release([&] { return LOCKSTEP_FORWARD(cuMemFreeAsync_ptsz, dptr, hStream); },
                        CUDA_SUCCESS, dptr, hStream, true);
}

// ---- virtual memory management (PyTorch expandable segments) ----
LOCKSTEP_INTERCEPTOR CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                                  CUdeviceptr addr, unsigned long long flags) {
  Nesting nesting(Scope::Allocation);
  const CUresult r = LOCKSTEP_FORWARD(cuMemAddressReserve, ptr, size, alignment, addr, flags);
  if (r == CUDA_SUCCESS && ptr != nullptr) {
    report_state(nesting.outermost(), [&] { collectors::on_va_reserve(*ptr, size); });
  }
  return r;
}
LOCKSTEP_INTERCEPTOR CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  return release([&] { return LOCKSTEP_FORWARD(cuMemAddressFree, ptr, size); },
                 [&] { collectors::on_va_free(ptr, size); });
}
LOCKSTEP_INTERCEPTOR CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                       CUmemGenericAllocationHandle handle,
                                       unsigned long long flags) {
  Nesting nesting(Scope::Allocation);
  const CUresult r = LOCKSTEP_FORWARD(cuMemMap, ptr, size, offset, handle, flags);
  if (r == CUDA_SUCCESS) report_state(nesting.outermost(), [&] { collectors::on_map(ptr, size); });
  return r;
}
LOCKSTEP_INTERCEPTOR CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  return release([&] { return LOCKSTEP_FORWARD(cuMemUnmap, ptr, size); },
                 [&] { collectors::on_unmap(ptr, size); });
}
