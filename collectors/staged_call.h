// A call whose record is staged in the trace writer's slot and committed before the real call
// (at broad: a classic cuBLAS GEMM, gemm.cpp; a copy or a set, memory_ops.cpp), as a broad
// launch's is (kernels.cpp): the thread's open one, plain data in a thread_local, and what its end
// does. To stage another kind of call: a thread_local StagedCall and a token of its own
// (0xb40ad0000000000N, no call-stack token looks so); at begin tracer->stage(), the record built
// in the slot (its kind's fields all set: the slot holds a stale record), then
// opened(tracer, tracer->commit_staged()); at end close(status) when the token is yours.
#pragma once

#include <atomic>

#include "collectors/runtime.h"
#include "trace/writer.h"

namespace lockstep::collectors {

struct StagedCall {
  Tracer* tracer = nullptr;
  trace::TraceWriter::Staged ticket;
  bool open = false;

  void opened(Tracer* by, const trace::TraceWriter::Staged& committed) {
    tracer = by, ticket = committed, open = true;
  }
  // The call returned `status`: closed, and false when none was open. A call that failed ran
  // nothing: its record is taken back (one already encoded stays, counted as a failed launch is).
  bool close(int status) {
    if (!open) return false;
    open = false;
    if (status != 0 && !tracer->retract(ticket)) [[unlikely]]
      tracer->stats.failed_launches_recorded.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
};

}  // namespace lockstep::collectors
