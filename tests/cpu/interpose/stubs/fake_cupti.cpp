// A stand-in for libcupti.so.13 (validation mode mechanics on a machine with no GPU): records
// the external correlation ids pushed, and at a flush hands back, through the registered buffer
// callbacks, one kernel + runtime API + external correlation record per push, plus a kernel
// nobody pushed for ("unhooked_kernel", a driver cuLaunchKernel) and one of lockstep's own hash
// kernels. FAKE_CUPTI_BUSY=1 makes cuptiSubscribe report another subscriber.
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include <cupti.h>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
std::mutex g_mutex;
std::vector<uint64_t> g_pushed;  // every value pushed, in order
int g_depth = 0, g_pops = 0;
uint32_t g_enabled_kinds = 0;
CUpti_BuffersCallbackRequestFunc g_request = nullptr;
CUpti_BuffersCallbackCompleteFunc g_complete = nullptr;

// Buffer framing of this fake: [uint64 size][record], records 8-byte aligned.
template <typename Record>
void put(std::vector<uint8_t>* out, const Record& record) {
  const uint64_t size = (sizeof(Record) + 7) / 8 * 8;
  const size_t at = out->size();
  out->resize(at + 8 + size);
  std::memcpy(out->data() + at, &size, 8);
  std::memcpy(out->data() + at + 8, &record, sizeof(Record));
}
CUpti_ActivityKernel10 kernel(uint32_t correlation, const char* name, uint32_t graph) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.correlationId = correlation;
  k.name = name;
  k.graphId = graph;
  return k;
}
CUpti_ActivityAPI api(CUpti_ActivityKind kind, uint32_t correlation, CUpti_CallbackId cbid) {
  CUpti_ActivityAPI a{};
  a.kind = kind;
  a.correlationId = correlation;
  a.cbid = cbid;
  return a;
}
}  // namespace

FAKE_EXPORT int fake_cupti_pushes() {
  std::lock_guard l(g_mutex);
  return static_cast<int>(g_pushed.size());
}
FAKE_EXPORT int fake_cupti_pops() {
  std::lock_guard l(g_mutex);
  return g_pops;
}
FAKE_EXPORT uint64_t fake_cupti_pushed(int i) {
  std::lock_guard l(g_mutex);
  return g_pushed.at(i);
}
FAKE_EXPORT uint32_t fake_cupti_enabled_kinds() { return g_enabled_kinds; }

// The CUPTI entry points, exported (the build hides symbols by default).
#pragma GCC visibility push(default)
CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult, const char** str) {
  *str = "fake CUPTI error";
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc, void*) {
  const char* busy = std::getenv("FAKE_CUPTI_BUSY");
  if (busy != nullptr && *busy == '1') return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(0x1);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                    CUpti_BuffersCallbackCompleteFunc complete) {
  g_request = request;
  g_complete = complete;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  g_enabled_kinds |= 1u << static_cast<unsigned>(kind);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind,
                                                            uint64_t id) {
  if (kind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard l(g_mutex);
  g_pushed.push_back(id);
  ++g_depth;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind,
                                                           uint64_t* last) {
  std::lock_guard l(g_mutex);
  if (g_depth == 0) return CUPTI_ERROR_QUEUE_EMPTY;
  --g_depth;
  ++g_pops;
  if (last != nullptr) *last = g_pushed.back();
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  *dropped = 2;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid,
                                                CUpti_Activity** record) {
  uint8_t* at = *record == nullptr ? buffer : reinterpret_cast<uint8_t*>(*record);
  if (*record != nullptr) {
    uint64_t size = 0;
    std::memcpy(&size, at - 8, 8);
    at += size;
  }
  if (at + 8 > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(at + 8);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t) {
  if (g_request == nullptr || g_complete == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  std::vector<uint8_t> records;
  {
    std::lock_guard l(g_mutex);
    uint32_t correlation = 0;
    for (uint64_t value : g_pushed) {
      ++correlation;
      const bool graph = (value & 7) == 4;  // pushed around a graph launch
      CUpti_ActivityExternalCorrelation e{};
      e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
      e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
      e.externalId = value;
      e.correlationId = correlation;
      put(&records, e);
      put(&records, api(CUPTI_ACTIVITY_KIND_RUNTIME, correlation,
                        graph ? CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000
                              : CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000));
      put(&records, kernel(correlation, graph ? "replayed_kernel" : "fake_kernel", graph ? 7 : 0));
    }
    put(&records, api(CUPTI_ACTIVITY_KIND_DRIVER, 1000, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
    put(&records, kernel(1000, "unhooked_kernel", 0));
    put(&records, kernel(1001, "lsf1_batch_small", 0));
  }
  uint8_t* buffer = nullptr;
  size_t size = 0, max_records = 0;
  g_request(&buffer, &size, &max_records);
  if (buffer == nullptr || size < records.size()) return CUPTI_ERROR_OUT_OF_MEMORY;
  std::memcpy(buffer, records.data(), records.size());
  g_complete(nullptr, 0, buffer, size, records.size());
  return CUPTI_SUCCESS;
}
#pragma GCC visibility pop
