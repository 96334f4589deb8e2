// HashEngine: fingerprints device memory regions on the GPU, in stream order, without ever
// synchronizing the caller's stream. Contract between hashing/ (implements) and collectors/
// (uses). The shim links no CUDA runtime: the engine loads its kernels from an embedded fatbin
// through the driver API, using entry points the caller resolves (DriverApi).
//
// Flow: enqueue() launches one kernel for N regions on the caller's stream; the kernel writes
// each digest plus a completion tag into pinned, mapped host memory (a bounded ring of slots).
// poll() (from a host thread) hands back finished slots. If the ring is full, enqueue() refuses
// and counts the overflow; it never waits for the GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <cuda.h>

namespace lockstep::hashing {

// Driver entry points the engine needs; resolve them with the real cuGetProcAddress.
struct DriverApi {
  decltype(&::cuCtxGetCurrent) ctxGetCurrent = nullptr;
  decltype(&::cuCtxGetDevice) ctxGetDevice = nullptr;
  decltype(&::cuModuleLoadData) moduleLoadData = nullptr;
  decltype(&::cuModuleGetFunction) moduleGetFunction = nullptr;
  decltype(&::cuLaunchKernel) launchKernel = nullptr;
  decltype(&::cuMemAlloc_v2) memAlloc = nullptr;
  decltype(&::cuMemFree_v2) memFree = nullptr;
  decltype(&::cuMemHostAlloc) memHostAlloc = nullptr;
  decltype(&::cuMemHostGetDevicePointer_v2) memHostGetDevicePointer = nullptr;
  decltype(&::cuMemFreeHost) memFreeHost = nullptr;
  decltype(&::cuMemsetD8Async) memsetD8Async = nullptr;
  decltype(&::cuStreamIsCapturing) streamIsCapturing = nullptr;
  decltype(&::cuThreadExchangeStreamCaptureMode) threadExchangeStreamCaptureMode = nullptr;
  decltype(&::cuGetErrorString) getErrorString = nullptr;
  // Added by hashing/ (additive): sizing the grid, zeroing the scratch once at create on a
  // private stream, unloading the module.
  decltype(&::cuDeviceGetAttribute) deviceGetAttribute = nullptr;
  decltype(&::cuOccupancyMaxActiveBlocksPerMultiprocessor)
      occupancyMaxActiveBlocksPerMultiprocessor = nullptr;
  decltype(&::cuStreamCreate) streamCreate = nullptr;
  decltype(&::cuStreamDestroy_v2) streamDestroy = nullptr;
  decltype(&::cuStreamSynchronize) streamSynchronize = nullptr;
  decltype(&::cuModuleUnload) moduleUnload = nullptr;
};
// Fills every member through `get_proc_address` (a real cuGetProcAddress_v2). False + error if
// one is missing.
bool load_driver_api(decltype(&::cuGetProcAddress_v2) get_proc_address, DriverApi* api,
                     std::string* error);
// For tests and benchmarks outside the shim: dlopen("libcuda.so.1") and load from it.
bool load_driver_api_from_libcuda(DriverApi* api, std::string* error);

// Most regions one enqueue() takes (one launch; the region table travels as kernel parameters).
inline constexpr uint32_t kMaxRegionsPerEnqueue = 1024;

struct Region {
  CUdeviceptr ptr = 0;
  uint64_t bytes = 0;
};

struct EngineOptions {
  size_t device_scratch_bytes = 16u << 20;  // per-region partials; allocated once, up front
  uint32_t ring_slots = 1u << 16;           // pinned digest slots
};

struct EngineStats {
  uint64_t regions_enqueued = 0;
  uint64_t bytes_enqueued = 0;
  uint64_t launches = 0;
  uint64_t overflows = 0;  // regions refused because the ring was full
  // Added by hashing/ (additive):
  uint64_t capture_refusals = 0;  // regions refused because the stream was capturing a graph
  uint64_t launch_failures = 0;   // regions refused because the launch failed (or n too large)
  uint64_t delivered = 0;         // digests handed out by poll()
};

class HashEngine {
 public:
  // Allocates everything up front for the current context. Call outside stream capture.
  static std::unique_ptr<HashEngine> create(const DriverApi& api, const EngineOptions& options,
                                            std::string* error);
  virtual ~HashEngine() = default;

  // One launch on `stream` that fingerprints regions[0..n). On success returns true and slot
  // ids first_slot .. first_slot+n-1 (mod ring) in *first_slot; their digests arrive via poll().
  // Returns false (and counts an overflow) when the ring has no room for n slots. Also false,
  // counted, when `stream` is capturing a graph (see hashing/README.md, "Graphs"), when
  // n > kMaxRegionsPerEnqueue, or when the launch fails. n == 0 returns true and launches nothing.
  // Thread-safe; never blocks on the GPU, never allocates.
  virtual bool enqueue(CUstream stream, const Region* regions, uint32_t n,
                       uint64_t* first_slot) = 0;

  // Non-blocking: calls on_digest(slot, digest) for every slot finished since the last call, in
  // slot order, and frees them. Returns the number delivered. Call from one thread.
  virtual size_t poll(const std::function<void(uint64_t slot, uint64_t digest)>& on_digest) = 0;

  virtual EngineStats stats() const = 0;
};

}  // namespace lockstep::hashing
