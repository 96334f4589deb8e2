// CUDA graphs: instantiation maps graph -> exec (collectors::graph_instantiated, which walks
// the graph's kernel nodes); each launch is bracketed by collectors::graph_launch_begin/end,
// which fingerprint the regions the nodes reach before and after the replay (level full) and
// record the nodes in node order.
#include "collectors/events.h"
#include "hook_support.h"

using namespace lockstep::interpose;
namespace collectors = lockstep::collectors;

namespace {

template <typename Result, typename Forward, typename Exec>
Result instantiate(Forward&& forward, Result success, const void* graph, Exec* exec) {
  Nesting nesting(Scope::Graph);
  const Result r = forward();
  if (r == success && exec != nullptr) {
    report_state(nesting.outermost(), [&] { collectors::graph_instantiated(graph, *exec); });
  }
  return r;
}

template <typename Result, typename Forward>
Result launch_graph(Forward&& forward, const void* exec, const void* stream, bool per_thread) {
  // Same scope as kernel launches: a graph launch is never nested in a kernel launch, and a
  // runtime graph launch reaching our driver wrapper must be one event.
  Nesting nesting(Scope::Launch);
  const bool report = nesting.outermost() && trace_operations();
  uint64_t token = 0;
  if (report) {
    try {
      token = collectors::graph_launch_begin(
          exec, reinterpret_cast<CUstream>(const_cast<void*>(stream)), per_thread);
    } catch (...) {}
  }
  const Result r =
      nesting.outermost() && validation::enabled()
          ? validation::bracketed(coverage::PushScope::Graph, trace_operations(), forward)
          : forward();
  if (report) {
    try {
      collectors::graph_launch_end(token, static_cast<int>(r));
    } catch (...) {}
  }
  return r;
}

}  // namespace

LOCKSTEP_INTERCEPTOR cudaError_t cudaGraphInstantiate(cudaGraphExec_t* pGraphExec,
                                                      cudaGraph_t graph, unsigned long long flags) {
  return instantiate(
      [&] { return LOCKSTEP_FORWARD(cudaGraphInstantiate, pGraphExec, graph, flags); }, cudaSuccess,
      graph, pGraphExec);
}
LOCKSTEP_INTERCEPTOR cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* pGraphExec,
                                                               cudaGraph_t graph,
                                                               unsigned long long flags) {
  return instantiate(
      [&] { return LOCKSTEP_FORWARD(cudaGraphInstantiateWithFlags, pGraphExec, graph, flags); },
      cudaSuccess, graph, pGraphExec);
}
LOCKSTEP_INTERCEPTOR cudaError_t cudaGraphInstantiateWithParams(
    cudaGraphExec_t* pGraphExec, cudaGraph_t graph, cudaGraphInstantiateParams* params) {
  return instantiate(
      [&] { return LOCKSTEP_FORWARD(cudaGraphInstantiateWithParams, pGraphExec, graph, params); },
      cudaSuccess, graph, pGraphExec);
}
LOCKSTEP_INTERCEPTOR cudaError_t cudaGraphInstantiateWithParams_ptsz(
    cudaGraphExec_t* pGraphExec, cudaGraph_t graph, cudaGraphInstantiateParams* params) {
  return instantiate(
      [&] {
        return LOCKSTEP_FORWARD(cudaGraphInstantiateWithParams_ptsz, pGraphExec, graph, params);
      },
      cudaSuccess, graph, pGraphExec);
}
LOCKSTEP_INTERCEPTOR cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  return launch_graph<cudaError_t>(
      [&] { return LOCKSTEP_FORWARD(cudaGraphLaunch, graphExec, stream); }, graphExec, stream,
      false);
}
LOCKSTEP_INTERCEPTOR cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec,
                                                      cudaStream_t stream) {
  return launch_graph<cudaError_t>(
      [&] { return LOCKSTEP_FORWARD(cudaGraphLaunch_ptsz, graphExec, stream); }, graphExec, stream,
      true);
}

LOCKSTEP_INTERCEPTOR CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                          unsigned long long flags) {
  return instantiate(
      [&] { return LOCKSTEP_FORWARD(cuGraphInstantiateWithFlags, phGraphExec, hGraph, flags); },
      CUDA_SUCCESS, hGraph, phGraphExec);
}
LOCKSTEP_INTERCEPTOR CUresult cuGraphInstantiateWithParams(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                           CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  return instantiate(
      [&] { return LOCKSTEP_FORWARD(cuGraphInstantiateWithParams, phGraphExec, hGraph, params); },
      CUDA_SUCCESS, hGraph, phGraphExec);
}
LOCKSTEP_INTERCEPTOR CUresult cuGraphInstantiateWithParams_ptsz(
    CUgraphExec* phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  return instantiate(
      [&] {
        return LOCKSTEP_FORWARD(cuGraphInstantiateWithParams_ptsz, phGraphExec, hGraph, params);
      },
      CUDA_SUCCESS, hGraph, phGraphExec);
}
LOCKSTEP_INTERCEPTOR CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  return launch_graph<CUresult>(
      [&] { return LOCKSTEP_FORWARD(cuGraphLaunch, hGraphExec, hStream); }, hGraphExec, hStream,
      false);
}
LOCKSTEP_INTERCEPTOR CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  return launch_graph<CUresult>(
      [&] { return LOCKSTEP_FORWARD(cuGraphLaunch_ptsz, hGraphExec, hStream); }, hGraphExec,
      hStream, true);
}
