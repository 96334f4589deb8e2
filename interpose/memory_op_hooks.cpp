// Copies and sets -> collectors::memory_op_begin/end. One Memory nesting scope, so a cudart
// copy that reaches our driver wrapper is one event.
#include "collectors/events.h"
#include "hook_support.h"

using namespace lockstep::interpose;
namespace collectors = lockstep::collectors;

namespace {

using collectors::MemoryOp;

constexpr int kHostToDevice = cudaMemcpyHostToDevice;
constexpr int kDeviceToHost = cudaMemcpyDeviceToHost;
constexpr int kDeviceToDevice = cudaMemcpyDeviceToDevice;
constexpr int kUnspecified = cudaMemcpyDefault;

template <typename Forward>
auto traced_memory_op(Forward&& forward, const MemoryOp& op) {
  return traced_call(
      Scope::Memory, forward, [&] { return collectors::memory_op_begin(op); },
      [](uint64_t token, auto result) {
        collectors::memory_op_end(token, static_cast<int>(result));
      });
}

MemoryOp copy(const char* api, bool async, int direction, void* dst, const void* src, size_t bytes,
              CUstream stream, bool per_thread) {
  MemoryOp op;
  op.api = api;
  op.is_async = async;
  op.direction = direction;
  op.dst = dst;
  op.src = src;
  op.bytes = bytes;
  op.stream = stream;
  op.per_thread_stream = per_thread;
  return op;
}

MemoryOp set(const char* api, bool async, void* dst, uint32_t value, unsigned element_bytes,
             size_t elements, CUstream stream, bool per_thread) {
  MemoryOp op;
  op.api = api;
  op.is_set = true;
  op.is_async = async;
  op.dst = dst;
  op.bytes = elements * element_bytes;
  op.set_value = value;
  op.set_element_bytes = element_bytes;
  op.stream = stream;
  op.per_thread_stream = per_thread;
  return op;
}

void* host(CUdeviceptr p) { return reinterpret_cast<void*>(p); }

}  // namespace

// ---- runtime ----
#define LOCKSTEP_RUNTIME_MEMCPY(name, per_thread)                                            \
  LOCKSTEP_INTERCEPTOR cudaError_t name(void* dst, const void* src, size_t count,            \
                                        cudaMemcpyKind kind) {                               \
    return traced_memory_op([&] { return LOCKSTEP_FORWARD(name, dst, src, count, kind); },   \
                            copy(#name, false, kind, dst, src, count, nullptr, per_thread)); \
  }
LOCKSTEP_RUNTIME_MEMCPY(cudaMemcpy, false)
LOCKSTEP_RUNTIME_MEMCPY(cudaMemcpy_ptds, true)
#undef LOCKSTEP_RUNTIME_MEMCPY

#define LOCKSTEP_RUNTIME_MEMCPY_ASYNC(name, per_thread)                                            \
  LOCKSTEP_HOT_INTERCEPTOR cudaError_t name(void* dst, const void* src, size_t count,              \
                                            cudaMemcpyKind kind, cudaStream_t stream) {            \
    return traced_memory_op([&] { return LOCKSTEP_FORWARD(name, dst, src, count, kind, stream); }, \
                            copy(#name, true, kind, dst, src, count, stream, per_thread));         \
  }
LOCKSTEP_RUNTIME_MEMCPY_ASYNC(cudaMemcpyAsync, false)
LOCKSTEP_RUNTIME_MEMCPY_ASYNC(cudaMemcpyAsync_ptsz, true)
#undef LOCKSTEP_RUNTIME_MEMCPY_ASYNC

#define LOCKSTEP_RUNTIME_MEMSET(name, per_thread)                                               \
  LOCKSTEP_INTERCEPTOR cudaError_t name(void* devPtr, int value, size_t count) {                \
    return traced_memory_op(                                                                    \
        [&] { return LOCKSTEP_FORWARD(name, devPtr, value, count); },                           \
        set(#name, false, devPtr, static_cast<uint8_t>(value), 1, count, nullptr, per_thread)); \
  }
LOCKSTEP_RUNTIME_MEMSET(cudaMemset, false)
LOCKSTEP_RUNTIME_MEMSET(cudaMemset_ptds, true)
#undef LOCKSTEP_RUNTIME_MEMSET

#define LOCKSTEP_RUNTIME_MEMSET_ASYNC(name, per_thread)                                       \
  LOCKSTEP_HOT_INTERCEPTOR cudaError_t name(void* devPtr, int value, size_t count,            \
                                            cudaStream_t stream) {                            \
    return traced_memory_op(                                                                  \
        [&] { return LOCKSTEP_FORWARD(name, devPtr, value, count, stream); },                 \
        set(#name, true, devPtr, static_cast<uint8_t>(value), 1, count, stream, per_thread)); \
  }
LOCKSTEP_RUNTIME_MEMSET_ASYNC(cudaMemsetAsync, false)
LOCKSTEP_RUNTIME_MEMSET_ASYNC(cudaMemsetAsync_ptsz, true)
#undef LOCKSTEP_RUNTIME_MEMSET_ASYNC

// ---- driver: synchronous copies (legacy / per-thread default stream) ----
#define LOCKSTEP_DRIVER_DTOH(name, per_thread)                                                     \
  LOCKSTEP_INTERCEPTOR CUresult name(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount) {     \
    return traced_memory_op([&] { return LOCKSTEP_FORWARD(name, dstHost, srcDevice, ByteCount); }, \
                            copy(#name, false, kDeviceToHost, dstHost, host(srcDevice), ByteCount, \
                                 nullptr, per_thread));                                            \
  }
LOCKSTEP_DRIVER_DTOH(cuMemcpyDtoH_v2, false)
LOCKSTEP_DRIVER_DTOH(cuMemcpyDtoH_v2_ptds, true)
#undef LOCKSTEP_DRIVER_DTOH

#define LOCKSTEP_DRIVER_HTOD(name, per_thread)                                                     \
  LOCKSTEP_INTERCEPTOR CUresult name(CUdeviceptr dstDevice, const void* srcHost,                   \
                                     size_t ByteCount) {                                           \
    return traced_memory_op([&] { return LOCKSTEP_FORWARD(name, dstDevice, srcHost, ByteCount); }, \
                            copy(#name, false, kHostToDevice, host(dstDevice), srcHost, ByteCount, \
                                 nullptr, per_thread));                                            \
  }
LOCKSTEP_DRIVER_HTOD(cuMemcpyHtoD_v2, false)
LOCKSTEP_DRIVER_HTOD(cuMemcpyHtoD_v2_ptds, true)
#undef LOCKSTEP_DRIVER_HTOD

#define LOCKSTEP_DRIVER_DTOD(name, per_thread)                                                    \
  LOCKSTEP_INTERCEPTOR CUresult name(CUdeviceptr dstDevice, CUdeviceptr srcDevice,                \
                                     size_t ByteCount) {                                          \
    return traced_memory_op(                                                                      \
        [&] { return LOCKSTEP_FORWARD(name, dstDevice, srcDevice, ByteCount); },                  \
        copy(#name, false, kDeviceToDevice, host(dstDevice), host(srcDevice), ByteCount, nullptr, \
             per_thread));                                                                        \
  }
LOCKSTEP_DRIVER_DTOD(cuMemcpyDtoD_v2, false)
LOCKSTEP_DRIVER_DTOD(cuMemcpyDtoD_v2_ptds, true)
#undef LOCKSTEP_DRIVER_DTOD

// ---- driver: asynchronous copies ----
#define LOCKSTEP_DRIVER_DTOH_ASYNC(name, per_thread)                                         \
  LOCKSTEP_INTERCEPTOR CUresult name(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount, \
                                     CUstream hStream) {                                     \
    return traced_memory_op(                                                                 \
        [&] { return LOCKSTEP_FORWARD(name, dstHost, srcDevice, ByteCount, hStream); },      \
        copy(#name, true, kDeviceToHost, dstHost, host(srcDevice), ByteCount, hStream,       \
             per_thread));                                                                   \
  }
LOCKSTEP_DRIVER_DTOH_ASYNC(cuMemcpyDtoHAsync_v2, false)
LOCKSTEP_DRIVER_DTOH_ASYNC(cuMemcpyDtoHAsync_v2_ptsz, true)
#undef LOCKSTEP_DRIVER_DTOH_ASYNC

#define LOCKSTEP_DRIVER_HTOD_ASYNC(name, per_thread)                                               \
  LOCKSTEP_INTERCEPTOR CUresult name(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount, \
                                     CUstream hStream) {                                           \
    return traced_memory_op(                                                                       \
        [&] { return LOCKSTEP_FORWARD(name, dstDevice, srcHost, ByteCount, hStream); },            \
        copy(#name, true, kHostToDevice, host(dstDevice), srcHost, ByteCount, hStream,             \
             per_thread));                                                                         \
  }
LOCKSTEP_DRIVER_HTOD_ASYNC(cuMemcpyHtoDAsync_v2, false)
LOCKSTEP_DRIVER_HTOD_ASYNC(cuMemcpyHtoDAsync_v2_ptsz, true)
#undef LOCKSTEP_DRIVER_HTOD_ASYNC

#define LOCKSTEP_DRIVER_COPY_ASYNC(name, direction, per_thread)                              \
  LOCKSTEP_INTERCEPTOR CUresult name(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,     \
                                     CUstream hStream) {                                     \
    return traced_memory_op(                                                                 \
        [&] { return LOCKSTEP_FORWARD(name, dst, src, ByteCount, hStream); },                \
        copy(#name, true, direction, host(dst), host(src), ByteCount, hStream, per_thread)); \
  }
LOCKSTEP_DRIVER_COPY_ASYNC(cuMemcpyDtoDAsync_v2, kDeviceToDevice, false)
LOCKSTEP_DRIVER_COPY_ASYNC(cuMemcpyDtoDAsync_v2_ptsz, kDeviceToDevice, true)
LOCKSTEP_DRIVER_COPY_ASYNC(cuMemcpyAsync, kUnspecified, false)
LOCKSTEP_DRIVER_COPY_ASYNC(cuMemcpyAsync_ptsz, kUnspecified, true)
#undef LOCKSTEP_DRIVER_COPY_ASYNC

// ---- driver: sets ----
#define LOCKSTEP_DRIVER_MEMSET(name, type, element_bytes, per_thread)                      \
  LOCKSTEP_INTERCEPTOR CUresult name(CUdeviceptr dstDevice, type value, size_t N) {        \
    return traced_memory_op(                                                               \
        [&] { return LOCKSTEP_FORWARD(name, dstDevice, value, N); },                       \
        set(#name, false, host(dstDevice), value, element_bytes, N, nullptr, per_thread)); \
  }
LOCKSTEP_DRIVER_MEMSET(cuMemsetD8_v2, unsigned char, 1, false)
LOCKSTEP_DRIVER_MEMSET(cuMemsetD8_v2_ptds, unsigned char, 1, true)
LOCKSTEP_DRIVER_MEMSET(cuMemsetD32_v2, unsigned int, 4, false)
LOCKSTEP_DRIVER_MEMSET(cuMemsetD32_v2_ptds, unsigned int, 4, true)
#undef LOCKSTEP_DRIVER_MEMSET

#define LOCKSTEP_DRIVER_MEMSET_ASYNC(name, type, element_bytes, per_thread)               \
  LOCKSTEP_INTERCEPTOR CUresult name(CUdeviceptr dstDevice, type value, size_t N,         \
                                     CUstream hStream) {                                  \
    return traced_memory_op(                                                              \
        [&] { return LOCKSTEP_FORWARD(name, dstDevice, value, N, hStream); },             \
        set(#name, true, host(dstDevice), value, element_bytes, N, hStream, per_thread)); \
  }
LOCKSTEP_DRIVER_MEMSET_ASYNC(cuMemsetD8Async, unsigned char, 1, false)
LOCKSTEP_DRIVER_MEMSET_ASYNC(cuMemsetD8Async_ptsz, unsigned char, 1, true)
LOCKSTEP_DRIVER_MEMSET_ASYNC(cuMemsetD32Async, unsigned int, 4, false)
LOCKSTEP_DRIVER_MEMSET_ASYNC(cuMemsetD32Async_ptsz, unsigned int, 4, true)
#undef LOCKSTEP_DRIVER_MEMSET_ASYNC
