// A fake GPU behind the hash engine's driver entry points, for CPU tests and benchmarks of the
// full level: a current context, a module whose "launches" complete at once (each region's
// digest is ptr ^ bytes, changed by every write(ptr) a test makes, written to its slot as the
// real kernel would), and a log of the hash launches (stream, regions), of cuMemFreeAsync calls
// and of event records and waits, in call order. Header-only; one instance per process.
// hold(true) keeps launches from completing until release(): digests stay in flight for as long
// as a test needs.
#pragma once

#include <cuda.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "hashing/layout.h"

namespace lockstep::testing {

struct FakeHashLaunch {
  CUstream stream;
  uint32_t regions;
  CUdeviceptr freed = 0;  // a cuMemFreeAsync of this pointer (regions 0), not a launch
  uint32_t capacity = 0;  // the launched kernel's regions of room (layout.h: small, medium, large)
  // An event recorded on `stream` (waits false) or `stream` made to wait on it (waits true):
  // not a launch either (side streams, collectors/side_hashes.h).
  CUevent event = nullptr;
  bool waits = false;
};

class FakeGpu {
 public:
  static FakeGpu& instance() {
    static FakeGpu* gpu = new FakeGpu;  // never freed: used until exit
    return *gpu;
  }
  // The entry point for `name`, or null when the fake GPU does not provide it.
  void* proc(const std::string& name) const {
    for (const auto& [entry, fn] : kEntries)
      if (name == entry) return fn;
    return nullptr;
  }
  std::vector<FakeHashLaunch> launches() {
    std::lock_guard lock(mutex_);
    return launches_;
  }
  long launch_count() const { return count_.load(std::memory_order_relaxed); }
  void hold(bool on) {
    std::lock_guard lock(mutex_);
    holding_ = on;
  }
  void release() {  // completes every held launch, in launch order
    std::lock_guard lock(mutex_);
    for (const Held& h : held_) write_slot(h.slots, h.mask, h.id, h.digest);
    held_.clear();
  }
  void reset_count() { count_.store(0); }
  // Each cuMemFreeAsync from now on spins this long (a driver call that takes time).
  void free_takes_ns(uint64_t ns) { free_ns_.store(ns); }
  void reset_launches() {
    std::lock_guard lock(mutex_);
    launches_.clear();
  }
  // Offer the tile kernels (before the engine is created): digests then arrive as tile sums
  // the engine finalizes on the host.
  void tile_kernels(bool on) { tile_kernels_ = on; }
  // The job wrote the region starting at p: hashes enqueued from now on see other bytes.
  void write(CUdeviceptr p) {
    std::lock_guard lock(mutex_);
    ++versions_[p];
  }
  static CUcontext context() { return reinterpret_cast<CUcontext>(0x10); }
  // Streams the shim makes: the engine's private one first (kFirstStream), then side streams.
  static constexpr uintptr_t kFirstStream = 0x40;
  static bool made_stream(CUstream s) {
    const auto id = reinterpret_cast<uintptr_t>(s);
    return id >= kFirstStream && id < kFirstStream + 16;
  }

 private:
  static CUresult ctx_get_current(CUcontext* ctx) {
    *ctx = context();
    return CUDA_SUCCESS;
  }
  static CUresult ctx_get_device(CUdevice* device) {
    *device = 0;
    return CUDA_SUCCESS;
  }
  static CUresult ok() { return CUDA_SUCCESS; }
  static CUresult module_load(CUmodule* module, const void*) {
    *module = reinterpret_cast<CUmodule>(0x20);
    return CUDA_SUCCESS;
  }
  // From 0x31: the batch kernels (small, medium, large); from 0x35: the tile kernels, whose tile
  // sums go to the partial ring and are finalized by the engine's poll().
  static constexpr uintptr_t kBatchKernels = 0x31, kTileKernels = 0x35;
  static CUresult get_function(CUfunction* f, CUmodule, const char* name) {
    const bool tiles = std::strstr(name, "tiles") != nullptr;
    // Off unless a test asks: the harness's digests are then ptr ^ bytes exactly.
    if (tiles && !instance().tile_kernels_) return CUDA_ERROR_NOT_FOUND;
    // Function ids: kBatchKernels or kTileKernels, plus the capacity's index (small, medium,
    // large).
    const uintptr_t capacity = std::strstr(name, "large")    ? 2
                               : std::strstr(name, "medium") ? 1
                                                             : 0;
    *f = reinterpret_cast<CUfunction>((tiles ? kTileKernels : kBatchKernels) + capacity);
    return CUDA_SUCCESS;
  }
  struct Held {
    void* slots;
    uint64_t mask, id, digest;
  };
  static void write_slot(void* slots, uint64_t mask, uint64_t id, uint64_t digest) {
    using namespace lockstep::hashing::lsf1;
    DigestSlot& slot = reinterpret_cast<DigestSlot*>(slots)[id & mask];
    __atomic_store_n(&slot.digest, digest, __ATOMIC_RELAXED);
    __atomic_store_n(&slot.check, slot_check(id, digest), __ATOMIC_RELEASE);
  }
  template <uint32_t kCapacity>
  static uint32_t complete(void* params, bool tiles) {  // instance().mutex_ held
    using namespace lockstep::hashing::lsf1;
    const auto* p = static_cast<const BatchParams<kCapacity>*>(params);
    FakeGpu& gpu = instance();
    auto put = [&](void* slots, uint64_t mask, uint64_t id, uint64_t value) {
      if (gpu.holding_)
        gpu.held_.push_back({slots, mask, id, value});
      else
        write_slot(slots, mask, id, value);
    };
    for (uint32_t i = 0; i < p->count; ++i) {
      const RegionEntry& region = p->regions[i];
      const auto version = gpu.versions_.find(region.ptr);
      const uint64_t digest = region.ptr ^ region.bytes ^
                              (version == gpu.versions_.end() ? 0 : version->second << 40);
      if (!tiles) {
        put(reinterpret_cast<void*>(p->slots), p->slot_mask, p->first_slot + i, digest);
        continue;
      }
      // The tile kernel: one sum per tile; the engine adds them and finalizes (another value
      // than `digest`, still a function of the region's pointer, length and version).
      for (uint32_t u = 0; u < region.units; ++u)
        put(reinterpret_cast<void*>(p->partials), p->partial_mask,
            p->first_partial + region.first_unit + u, u == 0 ? digest : 0);
    }
    return p->count;
  }
  static CUresult launch(CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                         unsigned, CUstream stream, void** args, void**) {
    using lockstep::hashing::lsf1::kLargeBatch;
    using lockstep::hashing::lsf1::kMediumBatch;
    using lockstep::hashing::lsf1::kSmallBatch;
    FakeGpu& gpu = instance();
    gpu.count_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(gpu.mutex_);
    const auto id = reinterpret_cast<uintptr_t>(f);
    const bool tiles = id >= kTileKernels;
    const uintptr_t capacity = id - (tiles ? kTileKernels : kBatchKernels);
    const uint32_t n = capacity == 2   ? complete<kLargeBatch>(args[0], tiles)
                       : capacity == 1 ? complete<kMediumBatch>(args[0], tiles)
                                       : complete<kSmallBatch>(args[0], tiles);
    const uint32_t room = capacity == 2 ? kLargeBatch : capacity == 1 ? kMediumBatch : kSmallBatch;
    if (gpu.launches_.size() < 4096) gpu.launches_.push_back({stream, n, 0, room});
    return CUDA_SUCCESS;
  }
  static CUresult free_async(CUdeviceptr p, CUstream stream) {
    FakeGpu& gpu = instance();
    if (const uint64_t ns = gpu.free_ns_.load()) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
      while (std::chrono::steady_clock::now() < until) {}
    }
    std::lock_guard lock(gpu.mutex_);
    if (gpu.launches_.size() < 4096) gpu.launches_.push_back({stream, 0, p});
    return CUDA_SUCCESS;
  }
  static CUresult mem_alloc(CUdeviceptr* p, size_t bytes) {
    *p = reinterpret_cast<CUdeviceptr>(std::calloc(1, bytes));
    return CUDA_SUCCESS;
  }
  static CUresult mem_host_alloc(void** p, size_t bytes, unsigned) {
    *p = std::calloc(1, bytes);
    return CUDA_SUCCESS;
  }
  static CUresult host_device_pointer(CUdeviceptr* d, void* p, unsigned) {
    *d = reinterpret_cast<CUdeviceptr>(p);
    return CUDA_SUCCESS;
  }
  static CUresult is_capturing(CUstream, CUstreamCaptureStatus* status) {
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
  }
  static CUresult exchange_mode(CUstreamCaptureMode*) { return CUDA_SUCCESS; }
  static CUresult error_string(CUresult, const char** text) {
    *text = "fake";
    return CUDA_SUCCESS;
  }
  static CUresult attribute(int* v, CUdevice_attribute, CUdevice) {
    *v = 132;
    return CUDA_SUCCESS;
  }
  static CUresult occupancy(int* blocks, CUfunction, int, size_t) {
    *blocks = 8;
    return CUDA_SUCCESS;
  }
  static CUresult stream_create(CUstream* s, unsigned) {
    FakeGpu& gpu = instance();
    std::lock_guard lock(gpu.mutex_);
    *s = reinterpret_cast<CUstream>(kFirstStream + gpu.streams_++);
    return CUDA_SUCCESS;
  }
  static CUresult event_create(CUevent* e, unsigned) {
    FakeGpu& gpu = instance();
    std::lock_guard lock(gpu.mutex_);
    *e = reinterpret_cast<CUevent>(0xe000 + gpu.events_++);
    return CUDA_SUCCESS;
  }
  static CUresult log_event(CUstream stream, CUevent event, bool waits) {
    FakeGpu& gpu = instance();
    std::lock_guard lock(gpu.mutex_);
    if (gpu.launches_.size() < 4096) gpu.launches_.push_back({stream, 0, 0, 0, event, waits});
    return CUDA_SUCCESS;
  }
  static CUresult event_record(CUevent event, CUstream stream) {
    return log_event(stream, event, false);
  }
  static CUresult stream_wait_event(CUstream stream, CUevent event, unsigned) {
    return log_event(stream, event, true);
  }
  static CUresult ctx_push(CUcontext) { return CUDA_SUCCESS; }
  static CUresult ctx_pop(CUcontext* ctx) {
    *ctx = context();
    return CUDA_SUCCESS;
  }
  static inline const std::pair<const char*, void*> kEntries[] = {
      {"cuCtxGetCurrent", reinterpret_cast<void*>(&ctx_get_current)},
      {"cuCtxGetDevice", reinterpret_cast<void*>(&ctx_get_device)},
      {"cuModuleLoadData", reinterpret_cast<void*>(&module_load)},
      {"cuModuleGetFunction", reinterpret_cast<void*>(&get_function)},
      {"cuLaunchKernel", reinterpret_cast<void*>(&launch)},
      {"cuMemAlloc", reinterpret_cast<void*>(&mem_alloc)},
      {"cuMemFree", reinterpret_cast<void*>(&ok)},
      {"cuMemFreeAsync", reinterpret_cast<void*>(&free_async)},
      {"cuMemHostAlloc", reinterpret_cast<void*>(&mem_host_alloc)},
      {"cuMemHostGetDevicePointer", reinterpret_cast<void*>(&host_device_pointer)},
      {"cuMemFreeHost", reinterpret_cast<void*>(&ok)},
      {"cuMemsetD8Async", reinterpret_cast<void*>(&ok)},
      {"cuStreamIsCapturing", reinterpret_cast<void*>(&is_capturing)},
      {"cuThreadExchangeStreamCaptureMode", reinterpret_cast<void*>(&exchange_mode)},
      {"cuGetErrorString", reinterpret_cast<void*>(&error_string)},
      {"cuDeviceGetAttribute", reinterpret_cast<void*>(&attribute)},
      {"cuOccupancyMaxActiveBlocksPerMultiprocessor", reinterpret_cast<void*>(&occupancy)},
      {"cuStreamCreate", reinterpret_cast<void*>(&stream_create)},
      {"cuEventCreate", reinterpret_cast<void*>(&event_create)},
      {"cuEventRecord", reinterpret_cast<void*>(&event_record)},
      {"cuStreamWaitEvent", reinterpret_cast<void*>(&stream_wait_event)},
      {"cuCtxPushCurrent", reinterpret_cast<void*>(&ctx_push)},
      {"cuCtxPopCurrent", reinterpret_cast<void*>(&ctx_pop)},
      {"cuStreamDestroy", reinterpret_cast<void*>(&ok)},
      {"cuStreamSynchronize", reinterpret_cast<void*>(&ok)},
      {"cuModuleUnload", reinterpret_cast<void*>(&ok)},
  };

  std::mutex mutex_;
  std::vector<FakeHashLaunch> launches_;
  bool holding_ = false;
  bool tile_kernels_ = false;
  std::vector<Held> held_;
  std::map<CUdeviceptr, uint64_t> versions_;
  std::atomic<long> count_{0};
  std::atomic<uint64_t> free_ns_{0};
  uintptr_t streams_ = 0, events_ = 0;
};

}  // namespace lockstep::testing
