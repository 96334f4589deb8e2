// Stream order points: driver calls by which the job makes later work, or the host, wait on
// what a stream has queued so far (event records, synchronizations, queries, capture begins,
// host callbacks, stream destruction). collectors::stream_order_point() runs before the real call, so that work the
// shim deferred on a stream is queued ahead of whatever the job orders after this point.
// These calls are frequent (a query per poll): no nesting scope and no event, just the call.
// The runtime needs no wrappers: cudart reaches these through cuGetProcAddress, which hands out
// the ones below (driver_entry_points.def).
#include "collectors/events.h"
#include "hook_support.h"

using namespace lockstep::interpose;
namespace collectors = lockstep::collectors;

namespace {

// Never throws into the job and never touches the result of the real call.
inline void order_point() {
  try {
    if (trace_operations()) collectors::stream_order_point();
  } catch (...) {}
}

// The host waits for (or asks about) queued work: reported before the real call and, with its
// result, after it (deferred hashes stay held across it: collectors::stream_host_wait_begin).
inline collectors::HostWait host_wait_begin(CUstream stream, bool per_thread_default,
                                            bool whole_context, CUcontext context) {
  try {
    if (trace_operations())
      return collectors::stream_host_wait_begin(stream, per_thread_default, whole_context,
                                                context);
  } catch (...) {}
  return {};
}
inline void host_wait_end(const collectors::HostWait& wait, CUresult result) {
  try {
    collectors::stream_host_wait_end(wait, result);
  } catch (...) {}
}

// A capture begin: noted whether or not this thread traces (collectors::capture_begins), then
// an order point like the others.
inline void capture_point() {
  collectors::capture_begins();
  order_point();
}

// An event record: an order point, and the point where the stream's work moves to the current
// step under stream-ordered steps (collectors/stream_steps.h).
inline void event_point(CUevent event, CUstream stream, bool per_thread_default) {
  order_point();
  try {
    if (trace_operations()) collectors::stream_event_recorded(event, stream, per_thread_default);
  } catch (...) {}
}
inline void event_point_legacy(CUevent event, CUstream stream) { event_point(event, stream, false); }
inline void event_point_ptsz(CUevent event, CUstream stream) { event_point(event, stream, true); }

// A stream waits on an event: not an order point (nothing waits on this stream's queue), only
// the step the waiting stream's next work belongs to (collectors/stream_steps.h).
inline void event_wait(CUstream stream, bool per_thread_default, CUevent event) {
  try {
    if (trace_operations()) collectors::stream_event_waited(stream, per_thread_default, event);
  } catch (...) {}
}

}  // namespace

// NAME(PARAMS): POINT() before the real NAME(ARGS), whose result is returned untouched.
#define LOCKSTEP_ORDER_POINT(POINT, NAME, PARAMS, ARGS) \
  LOCKSTEP_INTERCEPTOR CUresult NAME PARAMS {           \
    POINT();                                            \
    return LOCKSTEP_FORWARD(NAME, LOCKSTEP_ARGS ARGS);  \
  }
#define LOCKSTEP_ARGS(...) __VA_ARGS__

// ---- events ----
#define LOCKSTEP_EVENT_POINT(POINT, NAME, PARAMS, ARGS) \
  LOCKSTEP_INTERCEPTOR CUresult NAME PARAMS {           \
    POINT(hEvent, hStream);                             \
    return LOCKSTEP_FORWARD(NAME, LOCKSTEP_ARGS ARGS);  \
  }
LOCKSTEP_EVENT_POINT(event_point_legacy, cuEventRecord, (CUevent hEvent, CUstream hStream),
                     (hEvent, hStream))
LOCKSTEP_EVENT_POINT(event_point_ptsz, cuEventRecord_ptsz, (CUevent hEvent, CUstream hStream),
                     (hEvent, hStream))
LOCKSTEP_EVENT_POINT(event_point_legacy, cuEventRecordWithFlags,
                     (CUevent hEvent, CUstream hStream, unsigned int flags),
                     (hEvent, hStream, flags))
LOCKSTEP_EVENT_POINT(event_point_ptsz, cuEventRecordWithFlags_ptsz,
                     (CUevent hEvent, CUstream hStream, unsigned int flags),
                     (hEvent, hStream, flags))

// ---- event waits ----
LOCKSTEP_INTERCEPTOR CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent,
                                                unsigned int Flags) {
  event_wait(hStream, false, hEvent);
  return LOCKSTEP_FORWARD(cuStreamWaitEvent, hStream, hEvent, Flags);
}
LOCKSTEP_INTERCEPTOR CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent,
                                                     unsigned int Flags) {
  event_wait(hStream, true, hEvent);
  return LOCKSTEP_FORWARD(cuStreamWaitEvent_ptsz, hStream, hEvent, Flags);
}

// ---- synchronization and queries ----
// NAME(PARAMS): the host waits on STREAM (PER_THREAD: null is the thread's default stream;
// WHOLE: every stream of context CTX, null the current one), before and after the real NAME(ARGS).
#define LOCKSTEP_HOST_WAIT(NAME, PARAMS, ARGS, STREAM, PER_THREAD, WHOLE, CTX)         \
  LOCKSTEP_INTERCEPTOR CUresult NAME PARAMS {                                          \
    const collectors::HostWait wait = host_wait_begin(STREAM, PER_THREAD, WHOLE, CTX); \
    const CUresult result = LOCKSTEP_FORWARD(NAME, LOCKSTEP_ARGS ARGS);               \
    host_wait_end(wait, result);                                                       \
    return result;                                                                     \
  }
LOCKSTEP_HOST_WAIT(cuStreamSynchronize, (CUstream hStream), (hStream), hStream, false, false,
                   nullptr)
LOCKSTEP_HOST_WAIT(cuStreamSynchronize_ptsz, (CUstream hStream), (hStream), hStream, true, false,
                   nullptr)
LOCKSTEP_HOST_WAIT(cuStreamQuery, (CUstream hStream), (hStream), hStream, false, false, nullptr)
LOCKSTEP_HOST_WAIT(cuStreamQuery_ptsz, (CUstream hStream), (hStream), hStream, true, false,
                   nullptr)
LOCKSTEP_HOST_WAIT(cuCtxSynchronize, (), (), nullptr, false, true, nullptr)
// CUDA 13: the context to synchronize is an argument (cuGetProcAddress version >= 13000).
LOCKSTEP_HOST_WAIT(cuCtxSynchronize_v2, (CUcontext ctx), (ctx), nullptr, false, true, ctx)
#undef LOCKSTEP_HOST_WAIT

// ---- stream capture (what was queued before the capture began stays outside the graph) ----
LOCKSTEP_ORDER_POINT(capture_point, cuStreamBeginCapture, (CUstream hStream), (hStream))
LOCKSTEP_ORDER_POINT(capture_point, cuStreamBeginCapture_ptsz, (CUstream hStream), (hStream))
LOCKSTEP_ORDER_POINT(capture_point, cuStreamBeginCapture_v2,
                     (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))
LOCKSTEP_ORDER_POINT(capture_point, cuStreamBeginCapture_v2_ptsz,
                     (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))
LOCKSTEP_ORDER_POINT(capture_point, cuStreamBeginCaptureToGraph,
                     (CUstream hStream, CUgraph hGraph, const CUgraphNode* dependencies,
                      const CUgraphEdgeData* dependencyData, size_t numDependencies,
                      CUstreamCaptureMode mode),
                     (hStream, hGraph, dependencies, dependencyData, numDependencies, mode))
LOCKSTEP_ORDER_POINT(capture_point, cuStreamBeginCaptureToGraph_ptsz,
                     (CUstream hStream, CUgraph hGraph, const CUgraphNode* dependencies,
                      const CUgraphEdgeData* dependencyData, size_t numDependencies,
                      CUstreamCaptureMode mode),
                     (hStream, hGraph, dependencies, dependencyData, numDependencies, mode))

// ---- host functions (the host runs them once the stream reached them) ----
LOCKSTEP_ORDER_POINT(order_point, cuLaunchHostFunc, (CUstream hStream, CUhostFn fn, void* userData),
                     (hStream, fn, userData))
LOCKSTEP_ORDER_POINT(order_point, cuLaunchHostFunc_ptsz,
                     (CUstream hStream, CUhostFn fn, void* userData), (hStream, fn, userData))
LOCKSTEP_ORDER_POINT(order_point, cuStreamAddCallback,
                     (CUstream hStream, CUstreamCallback callback, void* userData,
                      unsigned int flags),
                     (hStream, callback, userData, flags))
LOCKSTEP_ORDER_POINT(order_point, cuStreamAddCallback_ptsz,
                     (CUstream hStream, CUstreamCallback callback, void* userData,
                      unsigned int flags),
                     (hStream, callback, userData, flags))

// ---- destruction (deferred work must be queued while the handle is still the job's stream) ----
LOCKSTEP_ORDER_POINT(order_point, cuStreamDestroy_v2, (CUstream hStream), (hStream))

#undef LOCKSTEP_ARGS
#undef LOCKSTEP_ORDER_POINT
