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
  } catch (...) {
  }
}

// A capture begin: noted whether or not this thread traces (collectors::capture_begins), then
// an order point like the others.
inline void capture_point() {
  collectors::capture_begins();
  order_point();
}

}  // namespace

// ---- events ----
LOCKSTEP_INTERCEPTOR CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
  order_point();
  return LOCKSTEP_FORWARD(cuEventRecord, hEvent, hStream);
}
LOCKSTEP_INTERCEPTOR CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) {
  order_point();
  return LOCKSTEP_FORWARD(cuEventRecord_ptsz, hEvent, hStream);
}
LOCKSTEP_INTERCEPTOR CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream,
                                                     unsigned int flags) {
  order_point();
  return LOCKSTEP_FORWARD(cuEventRecordWithFlags, hEvent, hStream, flags);
}
LOCKSTEP_INTERCEPTOR CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream,
                                                          unsigned int flags) {
  order_point();
  return LOCKSTEP_FORWARD(cuEventRecordWithFlags_ptsz, hEvent, hStream, flags);
}

// ---- synchronization and queries ----
LOCKSTEP_INTERCEPTOR CUresult cuStreamSynchronize(CUstream hStream) {
  order_point();
  return LOCKSTEP_FORWARD(cuStreamSynchronize, hStream);
}
LOCKSTEP_INTERCEPTOR CUresult cuStreamSynchronize_ptsz(CUstream hStream) {
  order_point();
  return LOCKSTEP_FORWARD(cuStreamSynchronize_ptsz, hStream);
}
LOCKSTEP_INTERCEPTOR CUresult cuStreamQuery(CUstream hStream) {
  order_point();
  return LOCKSTEP_FORWARD(cuStreamQuery, hStream);
}
LOCKSTEP_INTERCEPTOR CUresult cuStreamQuery_ptsz(CUstream hStream) {
  order_point();
  return LOCKSTEP_FORWARD(cuStreamQuery_ptsz, hStream);
}
LOCKSTEP_INTERCEPTOR CUresult cuCtxSynchronize() {
  order_point();
  return LOCKSTEP_FORWARD(cuCtxSynchronize);
}
// CUDA 13: the context to synchronize is an argument (cuGetProcAddress version >= 13000).
LOCKSTEP_INTERCEPTOR CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  order_point();
  return LOCKSTEP_FORWARD(cuCtxSynchronize_v2, ctx);
}

// ---- stream capture (what was queued before the capture began stays outside the graph) ----
LOCKSTEP_INTERCEPTOR CUresult cuStreamBeginCapture(CUstream hStream) {
  capture_point();
  return LOCKSTEP_FORWARD(cuStreamBeginCapture, hStream);
}
LOCKSTEP_INTERCEPTOR CUresult cuStreamBeginCapture_ptsz(CUstream hStream) {
  capture_point();
  return LOCKSTEP_FORWARD(cuStreamBeginCapture_ptsz, hStream);
}
LOCKSTEP_INTERCEPTOR CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
  capture_point();
  return LOCKSTEP_FORWARD(cuStreamBeginCapture_v2, hStream, mode);
}
LOCKSTEP_INTERCEPTOR CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream,
                                                           CUstreamCaptureMode mode) {
  capture_point();
  return LOCKSTEP_FORWARD(cuStreamBeginCapture_v2_ptsz, hStream, mode);
}
LOCKSTEP_INTERCEPTOR CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                                          const CUgraphNode* dependencies,
                                                          const CUgraphEdgeData* dependencyData,
                                                          size_t numDependencies,
                                                          CUstreamCaptureMode mode) {
  capture_point();
  return LOCKSTEP_FORWARD(cuStreamBeginCaptureToGraph, hStream, hGraph, dependencies,
                          dependencyData, numDependencies, mode);
}
LOCKSTEP_INTERCEPTOR CUresult cuStreamBeginCaptureToGraph_ptsz(
    CUstream hStream, CUgraph hGraph, const CUgraphNode* dependencies,
    const CUgraphEdgeData* dependencyData, size_t numDependencies, CUstreamCaptureMode mode) {
  capture_point();
  return LOCKSTEP_FORWARD(cuStreamBeginCaptureToGraph_ptsz, hStream, hGraph, dependencies,
                          dependencyData, numDependencies, mode);
}

// ---- host functions (the host runs them once the stream reached them) ----
LOCKSTEP_INTERCEPTOR CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void* userData) {
  order_point();
  return LOCKSTEP_FORWARD(cuLaunchHostFunc, hStream, fn, userData);
}
LOCKSTEP_INTERCEPTOR CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn,
                                                    void* userData) {
  order_point();
  return LOCKSTEP_FORWARD(cuLaunchHostFunc_ptsz, hStream, fn, userData);
}
LOCKSTEP_INTERCEPTOR CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback,
                                                  void* userData, unsigned int flags) {
  order_point();
  return LOCKSTEP_FORWARD(cuStreamAddCallback, hStream, callback, userData, flags);
}
LOCKSTEP_INTERCEPTOR CUresult cuStreamAddCallback_ptsz(CUstream hStream,
                                                       CUstreamCallback callback,
                                                       void* userData, unsigned int flags) {
  order_point();
  return LOCKSTEP_FORWARD(cuStreamAddCallback_ptsz, hStream, callback, userData, flags);
}

// ---- destruction (deferred work must be queued while the handle is still the job's stream) ----
LOCKSTEP_INTERCEPTOR CUresult cuStreamDestroy_v2(CUstream hStream) {
  order_point();
  return LOCKSTEP_FORWARD(cuStreamDestroy_v2, hStream);
}
