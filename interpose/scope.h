// Thread-local nesting of API scopes, and the gate every hook passes before building an event.
//
// A call seen at two layers is one event, from the outermost: cudart forwarding a launch to a
// driver entry point that is also ours (a dlsym'd or cuGetProcAddress'd pointer), cudaMalloc
// reaching cuMemAlloc, cuBLAS calling cublasLtMatmul. Each kind of API has its own depth, so a
// kernel launched by cuBLAS is still a launch (collectors attribute it to the open GEMM).
#pragma once

#include <iterator>

#include "collectors/events.h"
#include "collectors/hot_thread.h"

namespace lockstep::interpose {

enum class Scope : int { Launch, Memory, Allocation, Graph, Blas, Nccl, kCount };

// In the thread's hot lines with the rest of what every traced call reads (hot_thread.h).
static_assert(std::size(collectors::HotThread{}.scope_depth) == static_cast<size_t>(Scope::kCount));
inline int16_t& scope_depth(Scope scope) {
  return collectors::t_hot.scope_depth[static_cast<int>(scope)];
}

// Keeps the scope, not a reference to its depth: the depth is reached %fs-relative at each use,
// where a reference needed the thread's linear address, a read of the thread control block's
// line on every launch (bench/collectors/launch_lines.py).
class Nesting {
 public:
  explicit Nesting(Scope scope) : scope_(scope), outermost_(scope_depth(scope)++ == 0) {}
  ~Nesting() { --scope_depth(scope_); }
  Nesting(const Nesting&) = delete;
  Nesting& operator=(const Nesting&) = delete;
  bool outermost() const { return outermost_; }

 private:
  Scope scope_;
  bool outermost_;
};

// Operations (launches, copies, GEMMs, collectives, graph launches) are reported only while
// tracing runs and the thread is not inside one of the shim's own calls.
inline bool trace_operations() { return collectors::active(); }
// State that later operations need (allocation map, kernel handles, communicators, graph
// execs) is reported whenever the call is the job's, tracing or not.
inline bool track_state() { return !collectors::inside_shim_call(); }

}  // namespace lockstep::interpose
