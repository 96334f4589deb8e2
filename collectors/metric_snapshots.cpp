#include "collectors/metric_snapshots.h"

#include <array>
#include <atomic>
#include <mutex>

#include "collectors/driver_api.h"
#include "collectors/events.h"

namespace lockstep::collectors {
namespace {

constexpr size_t kSlots = 1024;
constexpr size_t kSlotBytes = 256;  // metrics are small (LOCKSTEP_METRIC_BYTES, default 64)

struct Snapshots {
  uint8_t* host = nullptr;  // kSlots * kSlotBytes pinned bytes, never freed
  std::array<std::atomic<bool>, kSlots> busy{};
  std::atomic<size_t> next{0};
  decltype(&::cuMemcpyDtoHAsync) copy = nullptr;
};

// Allocated once, on first use, with the thread's capture mode relaxed so that a capture in
// progress on another thread is not invalidated by our pinned allocation.
Snapshots* snapshots() {
  static Snapshots* instance = []() -> Snapshots* {
    const Driver& d = driver();
    if (d.getProcAddress == nullptr) return nullptr;
    ShimCallGuard guard;
    decltype(&::cuMemHostAlloc) host_alloc = nullptr;
    decltype(&::cuThreadExchangeStreamCaptureMode) exchange_mode = nullptr;
    auto* s = new Snapshots;
    CUdriverProcAddressQueryResult status{};
    d.getProcAddress("cuMemHostAlloc", reinterpret_cast<void**>(&host_alloc), 12040,
                     CU_GET_PROC_ADDRESS_DEFAULT, &status);
    d.getProcAddress("cuThreadExchangeStreamCaptureMode", reinterpret_cast<void**>(&exchange_mode),
                     12040, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    d.getProcAddress("cuMemcpyDtoHAsync", reinterpret_cast<void**>(&s->copy), 12040,
                     CU_GET_PROC_ADDRESS_DEFAULT, &status);
    if (host_alloc == nullptr || s->copy == nullptr) return nullptr;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (exchange_mode != nullptr) exchange_mode(&mode);
    void* host = nullptr;
    const CUresult r = host_alloc(&host, kSlots * kSlotBytes, 0);
    if (exchange_mode != nullptr) exchange_mode(&mode);
    if (r != CUDA_SUCCESS) return nullptr;
    s->host = static_cast<uint8_t*>(host);
    return s;
  }();
  return instance;
}

}  // namespace

const uint8_t* snapshot_metric(CUstream stream, bool per_thread_stream, CUdeviceptr src,
                               size_t bytes) {
  if (bytes == 0 || bytes > kSlotBytes || src == 0) return nullptr;
  Snapshots* s = snapshots();
  if (s == nullptr) return nullptr;
  const size_t slot = s->next.fetch_add(1, std::memory_order_relaxed) % kSlots;
  if (s->busy[slot].exchange(true, std::memory_order_acquire)) return nullptr;  // still unread
  if (stream == nullptr && per_thread_stream) stream = CU_STREAM_PER_THREAD;
  uint8_t* host = s->host + slot * kSlotBytes;
  ShimCallGuard guard;
  if (s->copy(host, src, bytes, stream) != CUDA_SUCCESS) {
    s->busy[slot].store(false, std::memory_order_release);
    return nullptr;
  }
  return host;
}

void release_metric_snapshot(const uint8_t* slot) {
  Snapshots* s = snapshots();
  if (s == nullptr || slot == nullptr) return;
  s->busy[static_cast<size_t>(slot - s->host) / kSlotBytes].store(false, std::memory_order_release);
}

}  // namespace lockstep::collectors
