// Per-thread stack of open intercepted calls: begin() pushes, end() pops. The token handed to
// interpose is the stack depth (plus a tag), so end() can check it pairs with the open call.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <cuda.h>
#include <nccl.h>

#include "collectors/events.h"
#include "collectors/runtime.h"

namespace lockstep::collectors {

enum class CallKind : uint8_t { Nested, Kernel, Graph, Memory, Metric, Gemm, Nccl };

struct CallState {
  CallKind kind = CallKind::Nested;
  Tracer* tracer = nullptr;
  trace::Record record;  // used when nothing is fingerprinted
  PendingRecord* pending = nullptr;
  std::vector<PlannedRegion> outputs;  // fingerprinted after the call returned
  CUstream stream = nullptr;
  bool per_thread_stream = false;
  // Memory / metric
  void* dst = nullptr;
  const void* src = nullptr;
  uint64_t bytes = 0;
  bool is_async = false;
  Tracer::HostCopyHold host_copy_hold;  // a metric copy's (Tracer::before_host_copy)
  // NCCL
  ncclComm_t comm = nullptr;
  NcclOp nccl_op = NcclOp::AllReduce;  // with the buffers: which of NCCL's choices is this call's
  const void* nccl_send = nullptr;
  const void* nccl_recv = nullptr;
  // Graph launch: the exec being launched
  const void* graph_exec = nullptr;
  // Which OpenApi counters this call raised (undone at end).
  bool raised_depth = false, raised_gemm = false, raised_launch = false;
  // Reused digests (level full): `outputs` are every device region the call may write (set by
  // the collector where that holds), and whether note_writes() has told the tracer yet.
  bool writes_known = false, writes_noted = false, writes_open = false;
  std::vector<PlannedRegion> writes_only;  // written, not hashed (a GEMM's workspace)
  // Outputs whose digest is known without hashing (a recalled fill; also in writes_only).
  std::vector<std::pair<PlannedRegion, uint64_t>> recalled;

  trace::Record& live_record() { return pending != nullptr ? pending->record : record; }
};

CallState& push_call(CallKind kind, uint64_t* token, CUstream stream = nullptr,
                     bool per_thread_default = false);
// Holds call.record until its digests arrive and enqueues the fingerprints of `inputs` on the
// call's stream now, before the call (in one launch with deferred kernel outputs of that
// stream, Tracer::fingerprint_inputs); call.outputs are enqueued when it returns. When the
// pending ring is full the buffers are flagged dropped and nothing is hashed.
void start_fingerprints(CallState& call, std::vector<PlannedRegion>& inputs,
                        bool not_capturing = false);
// The call of `token` returned: its state (popped by finish_call), its noted writes now in
// stream order before any hash enqueued from here on. Null for token 0 or a token that does not
// pair. Every end hook starts with it.
CallState* returned_call(uint64_t token);
// Tells the tracer what the call may write (its outputs, or "unknown": every reusable digest
// is forgotten), once: start_fingerprints does it after the call's inputs are looked up, before
// the call runs; finish_call for calls that did not get there.
void note_writes(CallState& call);
void finish_call(CallState* state);  // undoes OpenApi counters and pops (note_writes first)

}  // namespace lockstep::collectors
