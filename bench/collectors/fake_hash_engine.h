// The driver entry points the shim's hash engine (hashing/engine.cpp) needs, for the stand-in
// libcuda.so.1 of shim_launch_bench (fake_driver.cpp), so that a launch at full takes the whole
// path a GPU job's does: regions planned, a merged hash launch enqueued, its digests delivered.
// Not a test and never evidence of GPU work: a "hash launch" here returns at once after writing
// a made-up digest into each of its slots (the ring in host memory, as the GPU writes it into
// pinned memory), so the collector's poll finds them finished and the ring never fills. Tile
// kernels are absent (the engine then takes the batch kernels for every launch).
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "bench/collectors/fake_driver_entries.h"
#include "hashing/layout.h"

namespace lockstep::bench::fake_engine {
namespace lsf1 = lockstep::hashing::lsf1;

// A context, a device and the engine's six kernels, as handles nothing dereferences.
inline CUcontext context() { return reinterpret_cast<CUcontext>(0xc0de0000); }
constexpr uintptr_t kFirstHashFunction = 0xf0000000, kHashFunctions = 6;

inline CUresult ctx_get_current(CUcontext* ctx) {
  *ctx = context();
  return CUDA_SUCCESS;
}
inline CUresult ctx_get_device(CUdevice* device) {
  *device = 0;
  return CUDA_SUCCESS;
}
inline CUresult device_get_attribute(int* value, CUdevice_attribute, CUdevice) {
  *value = 132;  // every attribute the engine asks: multiprocessors
  return CUDA_SUCCESS;
}
inline CUresult module_load_data(CUmodule* module, const void*) {
  *module = reinterpret_cast<CUmodule>(0xd0d0);
  return CUDA_SUCCESS;
}
inline CUresult module_get_function(CUfunction* function, CUmodule, const char* name) {
  static const char* const names[kHashFunctions] = {
      lsf1::kSmallKernelName,        lsf1::kMediumKernelName,        lsf1::kLargeKernelName,
      lsf1::kSmallCompactKernelName, lsf1::kMediumCompactKernelName, lsf1::kLargeCompactKernelName};
  for (uintptr_t i = 0; i < kHashFunctions; ++i)
    if (std::strcmp(name, names[i]) == 0) {
      *function = reinterpret_cast<CUfunction>(kFirstHashFunction + i);
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}
inline CUresult occupancy(int* blocks, CUfunction, int, size_t) {
  *blocks = 8;
  return CUDA_SUCCESS;
}
// Device memory of the engine (its scratch): host memory, never read.
inline CUresult mem_alloc(CUdeviceptr* ptr, size_t bytes) {
  *ptr = reinterpret_cast<CUdeviceptr>(std::calloc(1, bytes));
  return *ptr != 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
inline CUresult mem_free(CUdeviceptr ptr) {
  std::free(reinterpret_cast<void*>(ptr));
  return CUDA_SUCCESS;
}
inline CUresult mem_host_alloc(void** ptr, size_t bytes, unsigned) {
  *ptr = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  return *ptr != nullptr ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
inline CUresult mem_host_get_device_pointer(CUdeviceptr* device, void* host, unsigned) {
  *device = reinterpret_cast<CUdeviceptr>(host);  // mapped: the same address
  return CUDA_SUCCESS;
}
inline CUresult mem_free_host(void* ptr) {
  std::free(ptr);
  return CUDA_SUCCESS;
}
inline CUresult memset_d8_async(CUdeviceptr ptr, unsigned char value, size_t bytes, CUstream) {
  std::memset(reinterpret_cast<void*>(ptr), value, bytes);
  return CUDA_SUCCESS;
}
inline CUresult stream_create(CUstream* stream, unsigned) {
  *stream = reinterpret_cast<CUstream>(0x5e5e);
  return CUDA_SUCCESS;
}
inline CUresult stream_nothing(CUstream) { return CUDA_SUCCESS; }
inline CUresult stream_is_capturing(CUstream, CUstreamCaptureStatus* status) {
  *status = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
inline CUresult exchange_capture_mode(CUstreamCaptureMode*) { return CUDA_SUCCESS; }
inline CUresult module_unload(CUmodule) { return CUDA_SUCCESS; }
inline CUresult get_error_string(CUresult, const char** text) {
  *text = "fake driver";
  return CUDA_SUCCESS;
}

// A launch: a hash kernel's writes each slot of its batch (BatchParams' header is the same at
// every capacity); any other kernel does nothing.
inline CUresult launch_kernel(CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void** params, void**) {
  const auto handle = reinterpret_cast<uintptr_t>(f);
  if (handle < kFirstHashFunction || handle >= kFirstHashFunction + kHashFunctions ||
      params == nullptr)
    return CUDA_SUCCESS;
  const auto* batch = static_cast<const lsf1::BatchParams<lsf1::kSmallBatch>*>(params[0]);
  auto* slots = reinterpret_cast<lsf1::DigestSlot*>(batch->slots);
  for (uint32_t i = 0; i < batch->count; ++i) {
    const uint64_t id = batch->first_slot + i, digest = id * 0x9E3779B97F4A7C15ull;
    lsf1::DigestSlot& slot = slots[id & batch->slot_mask];
    std::atomic_ref(slot.digest).store(digest, std::memory_order_relaxed);
    std::atomic_ref(slot.check).store(lsf1::slot_check(id, digest), std::memory_order_release);
  }
  return CUDA_SUCCESS;
}

// The entry point named `symbol` among the above, or null.
inline void* entry(const char* symbol) {
  static const FakeEntry entries[] = {
      {"cuCtxGetCurrent", reinterpret_cast<void*>(&ctx_get_current)},
      {"cuCtxGetDevice", reinterpret_cast<void*>(&ctx_get_device)},
      {"cuDeviceGetAttribute", reinterpret_cast<void*>(&device_get_attribute)},
      {"cuModuleLoadData", reinterpret_cast<void*>(&module_load_data)},
      {"cuModuleGetFunction", reinterpret_cast<void*>(&module_get_function)},
      {"cuOccupancyMaxActiveBlocksPerMultiprocessor", reinterpret_cast<void*>(&occupancy)},
      {"cuMemAlloc", reinterpret_cast<void*>(&mem_alloc)},
      {"cuMemFree", reinterpret_cast<void*>(&mem_free)},
      {"cuMemHostAlloc", reinterpret_cast<void*>(&mem_host_alloc)},
      {"cuMemHostGetDevicePointer", reinterpret_cast<void*>(&mem_host_get_device_pointer)},
      {"cuMemFreeHost", reinterpret_cast<void*>(&mem_free_host)},
      {"cuMemsetD8Async", reinterpret_cast<void*>(&memset_d8_async)},
      {"cuStreamCreate", reinterpret_cast<void*>(&stream_create)},
      {"cuStreamDestroy", reinterpret_cast<void*>(&stream_nothing)},
      {"cuStreamSynchronize", reinterpret_cast<void*>(&stream_nothing)},
      {"cuStreamIsCapturing", reinterpret_cast<void*>(&stream_is_capturing)},
      {"cuThreadExchangeStreamCaptureMode", reinterpret_cast<void*>(&exchange_capture_mode)},
      {"cuModuleUnload", reinterpret_cast<void*>(&module_unload)},
      {"cuGetErrorString", reinterpret_cast<void*>(&get_error_string)},
      {"cuLaunchKernel", reinterpret_cast<void*>(&launch_kernel)},
  };
  return find_fake_entry(entries, symbol);
}

}  // namespace lockstep::bench::fake_engine
