// Stands in for libcuda.so.1: a few driver entry points that count their calls, and a
// cuGetProcAddress that picks variants by base name, version and per-thread flag like the
// driver does. Linked -Bsymbolic, so fakecuda_self() gives this library's own functions.
#include <dlfcn.h>

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

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
STUB_EXPORT CUresult cuModuleUnload(CUmodule) {
  stub::count("cuModuleUnload");
  return CUDA_SUCCESS;
}
STUB_EXPORT CUresult cuLibraryUnload(CUlibrary) {
  stub::count("cuLibraryUnload");
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

// ---- stream order points: each call is recorded with its arguments, the number of
// "order_point" and "host_wait" lines the preloaded fake collectors had logged when the stub ran
// (so a test can
// tell the shim reported before forwarding), and returns the result the test chose.
namespace {
struct OrderCall {
  std::string args;
  int order_points_before = -1;
};
// Never destroyed (see call_counter.h).
std::mutex& order_mutex = *new std::mutex;
std::map<std::string, OrderCall>& order_calls = *new std::map<std::string, OrderCall>;
std::atomic<int> order_result{CUDA_SUCCESS};

int logged_order_points() {
  auto log_fn = reinterpret_cast<char* (*)()>(dlsym(RTLD_DEFAULT, "lockstep_fake_log"));
  if (log_fn == nullptr) return -2;  // no test shim preloaded
  char* text = log_fn();
  int n = 0;
  for (const char* line = text; line != nullptr && *line != '\0';) {
    const char* end = std::strchr(line, '\n');
    const size_t length = end != nullptr ? size_t(end - line) : std::strlen(line);
    const std::string_view text_line(line, length);
    if (text_line == "order_point" || text_line == "host_wait") ++n;
    line = end != nullptr ? end + 1 : nullptr;
  }
  std::free(text);
  return n;
}

unsigned long handle(const void* p) {
  return static_cast<unsigned long>(reinterpret_cast<uintptr_t>(p));
}

CUresult order_stub(const char* name, const char* format, ...)
    __attribute__((format(printf, 2, 3)));
CUresult order_stub(const char* name, const char* format, ...) {
  stub::count(name);
  char args[256];
  va_list list;
  va_start(list, format);
  std::vsnprintf(args, sizeof args, format, list);
  va_end(list);
  const int seen = logged_order_points();
  std::lock_guard<std::mutex> lock(order_mutex);
  order_calls[name] = OrderCall{args, seen};
  return static_cast<CUresult>(order_result.load());
}
}  // namespace

STUB_EXPORT void fakecuda_set_order_result(int result) { order_result = result; }
// Arguments of the last call of `name` ("" if never called; pointer valid until the next call).
STUB_EXPORT const char* fakecuda_last_args(const char* name) {
  std::lock_guard<std::mutex> lock(order_mutex);
  auto it = order_calls.find(name);
  return it == order_calls.end() ? "" : it->second.args.c_str();
}
// "order_point" lines logged when the last call of `name` started (-1: never called).
STUB_EXPORT int fakecuda_order_points_before(const char* name) {
  std::lock_guard<std::mutex> lock(order_mutex);
  auto it = order_calls.find(name);
  return it == order_calls.end() ? -1 : it->second.order_points_before;
}

STUB_EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
  return order_stub("cuEventRecord", "event=%#lx stream=%#lx", handle(e), handle(s));
}
STUB_EXPORT CUresult cuEventRecord_ptsz(CUevent e, CUstream s) {
  return order_stub("cuEventRecord_ptsz", "event=%#lx stream=%#lx", handle(e), handle(s));
}
STUB_EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
  return order_stub("cuStreamWaitEvent", "stream=%#lx event=%#lx flags=%u", handle(s), handle(e),
                    flags);
}
STUB_EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned flags) {
  return order_stub("cuStreamWaitEvent_ptsz", "stream=%#lx event=%#lx flags=%u", handle(s),
                    handle(e), flags);
}
STUB_EXPORT CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned flags) {
  return order_stub("cuEventRecordWithFlags", "event=%#lx stream=%#lx flags=%u", handle(e),
                    handle(s), flags);
}
STUB_EXPORT CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned flags) {
  return order_stub("cuEventRecordWithFlags_ptsz", "event=%#lx stream=%#lx flags=%u", handle(e),
                    handle(s), flags);
}
STUB_EXPORT CUresult cuStreamSynchronize(CUstream s) {
  return order_stub("cuStreamSynchronize", "stream=%#lx", handle(s));
}
STUB_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s) {
  return order_stub("cuStreamSynchronize_ptsz", "stream=%#lx", handle(s));
}
STUB_EXPORT CUresult cuStreamQuery(CUstream s) {
  return order_stub("cuStreamQuery", "stream=%#lx", handle(s));
}
STUB_EXPORT CUresult cuStreamQuery_ptsz(CUstream s) {
  return order_stub("cuStreamQuery_ptsz", "stream=%#lx", handle(s));
}
STUB_EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) {
  return order_stub("cuMemFreeAsync", "ptr=%#llx stream=%#lx", (unsigned long long)p, handle(s));
}
STUB_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) {
  return order_stub("cuMemFreeAsync_ptsz", "ptr=%#llx stream=%#lx", (unsigned long long)p,
                    handle(s));
}
STUB_EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
  return order_stub("cuStreamDestroy_v2", "stream=%#lx", handle(s));
}
STUB_EXPORT CUresult cuCtxSynchronize() { return order_stub("cuCtxSynchronize", "%s", ""); }
STUB_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  return order_stub("cuCtxSynchronize_v2", "ctx=%#lx", handle(ctx));
}
STUB_EXPORT CUresult cuStreamBeginCapture(CUstream s) {
  return order_stub("cuStreamBeginCapture", "stream=%#lx", handle(s));
}
STUB_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream s) {
  return order_stub("cuStreamBeginCapture_ptsz", "stream=%#lx", handle(s));
}
STUB_EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
  return order_stub("cuStreamBeginCapture_v2", "stream=%#lx mode=%d", handle(s), int(mode));
}
STUB_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode) {
  return order_stub("cuStreamBeginCapture_v2_ptsz", "stream=%#lx mode=%d", handle(s), int(mode));
}
#define FAKE_CAPTURE_TO_GRAPH(name)                                                            \
  STUB_EXPORT CUresult name(CUstream s, CUgraph g, const CUgraphNode* deps,                    \
                            const CUgraphEdgeData* data, size_t n, CUstreamCaptureMode mode) { \
    return order_stub(#name, "stream=%#lx graph=%#lx deps=%#lx data=%#lx n=%zu mode=%d",       \
                      handle(s), handle(g), handle(deps), handle(data), n, int(mode));         \
  }
FAKE_CAPTURE_TO_GRAPH(cuStreamBeginCaptureToGraph)
FAKE_CAPTURE_TO_GRAPH(cuStreamBeginCaptureToGraph_ptsz)
#undef FAKE_CAPTURE_TO_GRAPH
STUB_EXPORT CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void* data) {
  return order_stub("cuLaunchHostFunc", "stream=%#lx fn=%#lx data=%#lx", handle(s),
                    handle(reinterpret_cast<const void*>(fn)), handle(data));
}
STUB_EXPORT CUresult cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void* data) {
  return order_stub("cuLaunchHostFunc_ptsz", "stream=%#lx fn=%#lx data=%#lx", handle(s),
                    handle(reinterpret_cast<const void*>(fn)), handle(data));
}
STUB_EXPORT CUresult cuStreamAddCallback(CUstream s, CUstreamCallback cb, void* data,
                                         unsigned flags) {
  return order_stub("cuStreamAddCallback", "stream=%#lx callback=%#lx data=%#lx flags=%u",
                    handle(s), handle(reinterpret_cast<const void*>(cb)), handle(data), flags);
}
STUB_EXPORT CUresult cuStreamAddCallback_ptsz(CUstream s, CUstreamCallback cb, void* data,
                                              unsigned flags) {
  return order_stub("cuStreamAddCallback_ptsz", "stream=%#lx callback=%#lx data=%#lx flags=%u",
                    handle(s), handle(reinterpret_cast<const void*>(cb)), handle(data), flags);
}

// The driver's internal resolver (what cudart calls without going through any export).
STUB_EXPORT CUresult fakecuda_get_proc(const char* symbol, void** pfn, int version,
                                       cuuint64_t flags, CUdriverProcAddressQueryResult* status);

STUB_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
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
    {"cuModuleUnload", 2000, false, reinterpret_cast<void*>(&cuModuleUnload)},
    {"cuLibraryUnload", 12000, false, reinterpret_cast<void*>(&cuLibraryUnload)},
#define FAKE_ENTRY(base, version, per_thread, fn) \
  {#base, version, per_thread, reinterpret_cast<void*>(&fn)},
    // event waits and stream order points, as cudaTypedefs.h versions them
    FAKE_ENTRY(cuStreamWaitEvent, 3020, false, cuStreamWaitEvent)
    FAKE_ENTRY(cuStreamWaitEvent, 7000, true, cuStreamWaitEvent_ptsz)
    FAKE_ENTRY(cuEventRecord, 2000, false, cuEventRecord) FAKE_ENTRY(
        cuEventRecord, 7000, true, cuEventRecord_ptsz) FAKE_ENTRY(cuEventRecordWithFlags, 11010,
                                                                  false, cuEventRecordWithFlags)
        FAKE_ENTRY(cuEventRecordWithFlags, 11010, true, cuEventRecordWithFlags_ptsz) FAKE_ENTRY(
            cuStreamSynchronize, 2000, false, cuStreamSynchronize)
            FAKE_ENTRY(cuStreamSynchronize, 7000, true, cuStreamSynchronize_ptsz) FAKE_ENTRY(
                cuStreamQuery, 2000, false, cuStreamQuery) FAKE_ENTRY(cuStreamQuery, 7000, true,
                                                                      cuStreamQuery_ptsz)
                FAKE_ENTRY(cuCtxSynchronize, 2000, false, cuCtxSynchronize) FAKE_ENTRY(
                    cuCtxSynchronize, 13000, false, cuCtxSynchronize_v2)
                    FAKE_ENTRY(cuStreamBeginCapture, 10000, false, cuStreamBeginCapture) FAKE_ENTRY(
                        cuStreamBeginCapture, 10000,
                        true, cuStreamBeginCapture_ptsz) FAKE_ENTRY(cuStreamBeginCapture, 10010,
                                                                    false, cuStreamBeginCapture_v2)
                        FAKE_ENTRY(cuStreamBeginCapture, 10010, true, cuStreamBeginCapture_v2_ptsz)
                            FAKE_ENTRY(cuStreamBeginCaptureToGraph, 12030, false,
                                       cuStreamBeginCaptureToGraph)
                                FAKE_ENTRY(cuStreamBeginCaptureToGraph, 12030, true,
                                           cuStreamBeginCaptureToGraph_ptsz)
                                    FAKE_ENTRY(cuLaunchHostFunc, 10000, false, cuLaunchHostFunc)
                                        FAKE_ENTRY(cuLaunchHostFunc, 10000, true,
                                                   cuLaunchHostFunc_ptsz)
                                            FAKE_ENTRY(cuStreamAddCallback, 5000, false,
                                                       cuStreamAddCallback)
                                                FAKE_ENTRY(cuStreamAddCallback, 7000, true,
                                                           cuStreamAddCallback_ptsz)
                                                    FAKE_ENTRY(cuStreamDestroy, 4000, false,
                                                               cuStreamDestroy_v2)
                                                        FAKE_ENTRY(cuMemFreeAsync, 11020, false,
                                                                   cuMemFreeAsync)
                                                            FAKE_ENTRY(cuMemFreeAsync, 11020, true,
                                                                       cuMemFreeAsync_ptsz)
#undef FAKE_ENTRY
};
}  // namespace

STUB_EXPORT CUresult fakecuda_get_proc(const char* symbol, void** pfn, int version,
                                       cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
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
