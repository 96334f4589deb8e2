// HashEngine on the driver API: kernels from the embedded fatbin, scratch and the digest ring
// allocated once at create, one launch per enqueue(), lock-free in-order delivery in poll().
#include "hashing/engine.h"

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include "hashing/layout.h"

namespace lockstep::hashing {

extern const unsigned char lockstep_hash_kernels_fatbin[];
extern const size_t lockstep_hash_kernels_fatbin_size;

namespace {

using lsf1::BatchParams;
using lsf1::DigestSlot;
using lsf1::RegionScratch;

bool all_entry_points(const DriverApi& a) {
  return a.ctxGetCurrent && a.ctxGetDevice && a.moduleLoadData && a.moduleGetFunction &&
         a.launchKernel && a.memAlloc && a.memFree && a.memHostAlloc && a.memHostGetDevicePointer &&
         a.memFreeHost && a.memsetD8Async && a.streamIsCapturing &&
         a.threadExchangeStreamCaptureMode && a.getErrorString && a.deviceGetAttribute &&
         a.occupancyMaxActiveBlocksPerMultiprocessor && a.streamCreate && a.streamDestroy &&
         a.streamSynchronize && a.moduleUnload;
}

uint64_t units_of(uint64_t bytes) {
  return std::max<uint64_t>(1, (bytes + lsf1::kTileBytes - 1) / lsf1::kTileBytes);
}

class DriverHashEngine final : public HashEngine {
 public:
  explicit DriverHashEngine(const DriverApi& api) : api_(api) {}
  ~DriverHashEngine() override { release(); }

  bool init(const EngineOptions& options, std::string* error);
  bool enqueue(CUstream stream, const Region* regions, uint32_t n, uint64_t* first_slot) override;
  size_t poll(const std::function<void(uint64_t, uint64_t)>& on_digest) override;
  EngineStats stats() const override;

 private:
  bool check(CUresult rc, const char* what, std::string* error) const;
  template <uint32_t kCapacity>
  bool launch(CUstream stream, CUfunction function, uint32_t max_blocks, uint32_t threads,
              BatchParams<kCapacity>* params, const Region* regions, uint32_t n, uint64_t first,
              uint64_t first_partial);
  void release();
  // The digest of region slot `id` whose tiles went to the partial ring, once all its tile sums
  // are there (false: not yet).
  bool finalize_from_partials(uint64_t id, uint64_t* digest) const;

  // How a region slot's digest arrives: in the slot itself (units == 0), or as `units` tile
  // sums in the partial ring from first_partial on, finalized by poll() with `bytes`.
  struct SlotSource {
    uint64_t first_partial = 0;
    uint64_t bytes = 0;
    uint32_t units = 0;
  };

  DriverApi api_;
  CUmodule module_ = nullptr;
  // [bulk, compact, tiles] x [small, medium, large batch]; resident blocks on the whole device.
  static constexpr int kTiles = 2;
  static constexpr int kCapacities = 3;
  CUfunction kernels_[3][kCapacities] = {};
  uint32_t max_blocks_[3][kCapacities] = {};
  CUdeviceptr scratch_ = 0;
  DigestSlot* slots_ = nullptr;
  CUdeviceptr slots_device_ = 0;
  uint32_t ring_slots_ = 0;
  DigestSlot* partials_ = nullptr;  // the partial ring (tile sums), pinned and mapped
  CUdeviceptr partials_device_ = 0;
  uint32_t partial_slots_ = 0;
  std::vector<SlotSource> sources_;  // per region slot; written by enqueue, read by poll

  std::mutex enqueue_mutex_;       // slot assignment and launch order agree
  uint64_t tail_ = 0;              // next slot id to hand out (under enqueue_mutex_)
  std::atomic<uint64_t> head_{0};  // next slot id poll() waits for
  // Slots before it are enqueued and their sources_ written: poll() reads no further (a stale
  // source of the ring's previous round would point at partials that look finished).
  std::atomic<uint64_t> published_{0};
  uint64_t partial_tail_ = 0;      // next partial id (under enqueue_mutex_)
  std::atomic<uint64_t> partial_head_{0};  // partials before it are free again (poll)
  BatchParams<lsf1::kSmallBatch> small_params_{};    // under enqueue_mutex_
  BatchParams<lsf1::kMediumBatch> medium_params_{};  // under enqueue_mutex_
  BatchParams<lsf1::kLargeBatch> large_params_{};    // under enqueue_mutex_

  std::atomic<uint64_t> regions_enqueued_{0}, bytes_enqueued_{0}, launches_{0}, overflows_{0},
      capture_refusals_{0}, launch_failures_{0}, delivered_{0};
};

bool DriverHashEngine::check(CUresult rc, const char* what, std::string* error) const {
  if (rc == CUDA_SUCCESS) return true;
  if (error) {
    const char* text = nullptr;
    api_.getErrorString(rc, &text);
    *error = std::string("HashEngine: ") + what + " failed: " + (text ? text : "unknown error");
  }
  return false;
}

bool DriverHashEngine::init(const EngineOptions& options, std::string* error) {
  const uint32_t slots = options.ring_slots;
  if (slots == 0 || (slots & (slots - 1)) != 0) {
    if (error) *error = "HashEngine: ring_slots must be a power of two";
    return false;
  }
  const size_t scratch_bytes = size_t{slots} * sizeof(RegionScratch);
  if (scratch_bytes > options.device_scratch_bytes) {
    if (error) *error = "HashEngine: device_scratch_bytes too small for ring_slots (16 B a slot)";
    return false;
  }
  ring_slots_ = slots;

  CUcontext context = nullptr;
  if (!check(api_.ctxGetCurrent(&context), "cuCtxGetCurrent", error)) return false;
  if (context == nullptr) {
    if (error) *error = "HashEngine: no current CUDA context";
    return false;
  }
  CUdevice device = 0;
  int sms = 0;
  if (!check(api_.ctxGetDevice(&device), "cuCtxGetDevice", error) ||
      !check(api_.deviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device),
             "cuDeviceGetAttribute", error))
    return false;

  // Allocations are "unsafe" calls for a capture in another thread in global mode: relax.
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (!check(api_.threadExchangeStreamCaptureMode(&mode), "cuThreadExchangeStreamCaptureMode",
             error))
    return false;
  bool ok =
      check(api_.moduleLoadData(&module_, lockstep_hash_kernels_fatbin), "cuModuleLoadData", error);
  const char* names[3][kCapacities] = {
      {lsf1::kSmallKernelName, lsf1::kMediumKernelName, lsf1::kLargeKernelName},
      {lsf1::kSmallCompactKernelName, lsf1::kMediumCompactKernelName,
       lsf1::kLargeCompactKernelName},
      {lsf1::kSmallTileKernelName, lsf1::kMediumTileKernelName, lsf1::kLargeTileKernelName}};
  for (int kind = 0; kind < 3; ++kind) {
    const int threads = kind == kTiles ? lsf1::kTileKernelThreads : lsf1::kThreadsPerBlock;
    for (int capacity = 0; capacity < kCapacities; ++capacity) {
      CUfunction& function = kernels_[kind][capacity];
      int per_sm = 0;
      // The tile kernels are optional: without them every launch takes the batch kernels.
      if (kind == kTiles && ok &&
          api_.moduleGetFunction(&function, module_, names[kind][capacity]) != CUDA_SUCCESS) {
        for (CUfunction& tiles : kernels_[kTiles]) tiles = nullptr;
        break;
      }
      ok = ok &&
           (kind == kTiles ||
            check(api_.moduleGetFunction(&function, module_, names[kind][capacity]),
                  "cuModuleGetFunction", error)) &&
           check(api_.occupancyMaxActiveBlocksPerMultiprocessor(&per_sm, function, threads, 0),
                 "cuOccupancyMaxActiveBlocksPerMultiprocessor", error);
      max_blocks_[kind][capacity] = uint32_t(std::max(1, per_sm * sms));
    }
  }

  void* host = nullptr;
  ok = ok && check(api_.memAlloc(&scratch_, scratch_bytes), "cuMemAlloc(scratch)", error) &&
       check(api_.memHostAlloc(&host, size_t{slots} * sizeof(DigestSlot),
                               CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
             "cuMemHostAlloc(slots)", error);
  if (ok) {
    slots_ = static_cast<DigestSlot*>(host);
    std::memset(slots_, 0, size_t{slots} * sizeof(DigestSlot));
    ok = check(api_.memHostGetDevicePointer(&slots_device_, host, 0), "cuMemHostGetDevicePointer",
               error);
  }
  // The partial ring: as many slots as the digest ring (a tile kernel launch takes at most
  // kTileKernelMaxUnits of them; a launch that finds no room takes the other kernels).
  void* partial_host = nullptr;
  partial_slots_ = slots;
  ok = ok &&
       check(api_.memHostAlloc(&partial_host, size_t{partial_slots_} * sizeof(DigestSlot),
                               CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
             "cuMemHostAlloc(partials)", error);
  if (ok) {
    partials_ = static_cast<DigestSlot*>(partial_host);
    std::memset(partials_, 0, size_t{partial_slots_} * sizeof(DigestSlot));
    ok = check(api_.memHostGetDevicePointer(&partials_device_, partial_host, 0),
               "cuMemHostGetDevicePointer", error);
    sources_.assign(slots, SlotSource{});
  }
  // Zero the scratch on a private stream: ordered before any later launch on any stream.
  CUstream zero_stream = nullptr;
  ok =
      ok && check(api_.streamCreate(&zero_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate", error);
  if (zero_stream) {
    ok = ok &&
         check(api_.memsetD8Async(scratch_, 0, scratch_bytes, zero_stream), "cuMemsetD8Async",
               error) &&
         check(api_.streamSynchronize(zero_stream), "cuStreamSynchronize", error);
    api_.streamDestroy(zero_stream);
  }
  api_.threadExchangeStreamCaptureMode(&mode);
  return ok;
}

void DriverHashEngine::release() {
  if (slots_) api_.memFreeHost(slots_);
  if (partials_) api_.memFreeHost(partials_);
  partials_ = nullptr;
  if (scratch_) api_.memFree(scratch_);
  if (module_) api_.moduleUnload(module_);
  slots_ = nullptr;
  scratch_ = 0;
  module_ = nullptr;
}

template <uint32_t kCapacity>
bool DriverHashEngine::launch(CUstream stream, CUfunction function, uint32_t max_blocks,
                              uint32_t threads, BatchParams<kCapacity>* params,
                              const Region* regions, uint32_t n, uint64_t first,
                              uint64_t first_partial) {
  params->first_slot = first;
  params->slots = slots_device_;
  params->scratch = scratch_;
  params->slot_mask = ring_slots_ - 1;
  params->count = n;
  params->partial_mask = partial_slots_ - 1;
  params->first_partial = first_partial;
  params->partials = partials_device_;
  uint64_t units = 0;
  for (uint32_t i = 0; i < n; ++i) {
    lsf1::RegionEntry& entry = params->regions[i];
    entry.ptr = regions[i].ptr;
    entry.bytes = regions[i].bytes;
    entry.first_unit = uint32_t(units);
    entry.units = uint32_t(units_of(regions[i].bytes));
    units += units_of(regions[i].bytes);
  }
  if (units > 0x7FFFFFFFu) return false;  // more than 32 TiB in one launch
  params->total_units = uint32_t(units);
  // Tile kernels: a block per tile; the others: a warp per tile.
  const uint64_t tiles_per_block = threads == lsf1::kTileKernelThreads ? 1 : threads / lsf1::kLanes;
  const uint32_t blocks =
      uint32_t(std::min<uint64_t>(max_blocks, (units + tiles_per_block - 1) / tiles_per_block));
  void* args[] = {params};
  return api_.launchKernel(function, blocks, 1, 1, threads, 1, 1, 0, stream, args, nullptr) ==
         CUDA_SUCCESS;
}

bool DriverHashEngine::enqueue(CUstream stream, const Region* regions, uint32_t n,
                               uint64_t* first_slot) {
  if (n == 0) {
    std::lock_guard lock(enqueue_mutex_);
    if (first_slot) *first_slot = tail_;
    return true;
  }
  if (regions == nullptr || n > kMaxRegionsPerEnqueue) {
    launch_failures_ += n;
    return false;
  }
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (api_.streamIsCapturing(stream, &capture) != CUDA_SUCCESS) {
    launch_failures_ += n;
    return false;
  }
  if (capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    capture_refusals_ += n;
    return false;
  }
  std::lock_guard lock(enqueue_mutex_);
  const uint64_t first = tail_;
  if (first - head_.load(std::memory_order_acquire) + n > ring_slots_) {
    overflows_ += n;
    return false;
  }
  uint64_t bytes = 0, units = 0;
  for (uint32_t i = 0; i < n; ++i) {
    bytes += regions[i].bytes;
    units += units_of(regions[i].bytes);
  }
  // Few tiles: the tile kernels, if the partial ring has room for one sum per tile; little
  // data: latency rules, the compact kernels; much data: the unrolled bulk ones.
  const uint64_t first_partial = partial_tail_;
  const bool tiles =  // init() found all of the tile kernels or keeps none: the last says which
      kernels_[kTiles][kCapacities - 1] != nullptr && units <= lsf1::kTileKernelMaxUnits &&
      first_partial - partial_head_.load(std::memory_order_acquire) + units <= partial_slots_;
  const int kind = tiles ? kTiles : bytes < lsf1::kCompactBelowBytes ? 1 : 0;
  const uint32_t threads = tiles ? lsf1::kTileKernelThreads : lsf1::kThreadsPerBlock;
  // The sources are set before the launch: poll() may see a slot finish as soon as it runs.
  uint64_t at = first_partial;
  for (uint32_t i = 0; i < n; ++i) {
    SlotSource& source = sources_[(first + i) & (ring_slots_ - 1)];
    source = tiles ? SlotSource{at, regions[i].bytes, uint32_t(units_of(regions[i].bytes))}
                   : SlotSource{};
    at += tiles ? units_of(regions[i].bytes) : 0;
  }
  // The smallest capacity that holds the n regions: the launch copies all of its parameters.
  const bool launched =
      n <= lsf1::kSmallBatch
          ? launch(stream, kernels_[kind][0], max_blocks_[kind][0], threads, &small_params_,
                   regions, n, first, first_partial)
      : n <= lsf1::kMediumBatch
          ? launch(stream, kernels_[kind][1], max_blocks_[kind][1], threads, &medium_params_,
                   regions, n, first, first_partial)
          : launch(stream, kernels_[kind][2], max_blocks_[kind][2], threads, &large_params_,
                   regions, n, first, first_partial);
  if (!launched) {
    launch_failures_ += n;
    return false;
  }
  if (tiles) partial_tail_ = first_partial + units;
  tail_ = first + n;
  published_.store(tail_, std::memory_order_release);
  regions_enqueued_ += n;
  bytes_enqueued_ += bytes;
  ++launches_;
  if (first_slot) *first_slot = first;
  return true;
}

bool DriverHashEngine::finalize_from_partials(uint64_t id, uint64_t* digest) const {
  const SlotSource& source = sources_[id & (ring_slots_ - 1)];
  uint64_t sum = 0;  // wrapping, as on the GPU
  for (uint64_t p = source.first_partial; p < source.first_partial + source.units; ++p) {
    DigestSlot& slot = partials_[p & (partial_slots_ - 1)];
    const uint64_t value = std::atomic_ref(slot.digest).load(std::memory_order_acquire);
    const uint64_t check_word = std::atomic_ref(slot.check).load(std::memory_order_acquire);
    if (check_word != lsf1::slot_check(p, value)) return false;  // not written yet (or torn)
    sum += value;
  }
  const uint64_t words[2] = {sum, source.bytes};  // LSF1's final step (fingerprint.cpp)
  *digest = XXH64(words, sizeof words, lsf1::kFinalSeed);
  return true;
}

size_t DriverHashEngine::poll(const std::function<void(uint64_t, uint64_t)>& on_digest) {
  size_t count = 0;
  uint64_t head = head_.load(std::memory_order_relaxed);
  for (;;) {
    if (head >= published_.load(std::memory_order_acquire)) break;
    const SlotSource& source = sources_[head & (ring_slots_ - 1)];
    uint64_t digest = 0;
    if (source.units != 0) {
      if (!finalize_from_partials(head, &digest)) break;
      partial_head_.store(source.first_partial + source.units, std::memory_order_release);
    } else {
      DigestSlot& slot = slots_[head & (ring_slots_ - 1)];
      digest = std::atomic_ref(slot.digest).load(std::memory_order_acquire);
      const uint64_t check_word = std::atomic_ref(slot.check).load(std::memory_order_acquire);
      if (check_word != lsf1::slot_check(head, digest)) break;  // not written yet (or torn)
    }
    if (on_digest) on_digest(head, digest);
    ++head;
    ++count;
    head_.store(head, std::memory_order_release);
  }
  delivered_ += count;
  return count;
}

EngineStats DriverHashEngine::stats() const {
  EngineStats s;
  s.regions_enqueued = regions_enqueued_.load();
  s.bytes_enqueued = bytes_enqueued_.load();
  s.launches = launches_.load();
  s.overflows = overflows_.load();
  s.capture_refusals = capture_refusals_.load();
  s.launch_failures = launch_failures_.load();
  s.delivered = delivered_.load();
  return s;
}

}  // namespace

std::unique_ptr<HashEngine> HashEngine::create(const DriverApi& api, const EngineOptions& options,
                                               std::string* error) {
  if (!all_entry_points(api)) {
    if (error) *error = "HashEngine: DriverApi is incomplete (use load_driver_api)";
    return nullptr;
  }
  auto engine = std::make_unique<DriverHashEngine>(api);
  if (!engine->init(options, error)) return nullptr;
  return engine;
}

}  // namespace lockstep::hashing
