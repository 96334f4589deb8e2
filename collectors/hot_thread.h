// The per-thread state that every traced call reads, in one 128-byte-aligned pair of cache lines.
//
// Between two launches the job's own work (PyTorch's dispatch, the driver's launch) evicts the
// shim's lines, and a launch then pays a miss for each line it touches. Its thread-locals were
// seven lines of the shim's TLS block (the built shim's readelf, session 29: the interpose scope
// depths, the shim-call depth, the thread ordinal, the last stream's ordinal, the range stack,
// the replay flag, the open call each on a line of its own neighbours); here they are two
// adjacent lines, which the CPU's adjacent-line prefetcher fetches as a pair. The trace writer's
// slot for this thread is here too, kept for trace/ (TraceWriter::ThreadSlot), which fills it.
//
// Add a field here only if every traced call reads it (else it costs every launch a line's
// share for nothing); keep each line at 64 bytes (static_asserts below) and say whose it is.
// Everything is zero-initialized constant data: no guard, no constructor, initial-exec TLS.
#pragma once
#include <cstddef>
#include <cstdint>

#include "trace/writer.h"

namespace lockstep::collectors {

class Tracer;
struct ThreadScopes;  // collectors/scopes.cpp
struct ReplayArmed;   // collectors/replay.cpp

// The library call (cuBLAS, cuBLASLt, NCCL) open on this thread: kernels and copies it makes are
// attributed to it, not recorded separately. With the open broad launch (kernels.cpp), which
// every traced launch reads at its begin and end too.
struct alignas(64) OpenApi {
  int depth = 0;         // nesting of library calls
  int gemm_depth = 0;    // cuBLAS/cuBLASLt calls (an Lt call inside cublasGemmEx is the same GEMM)
  int nccl_group = 0;    // ncclGroupStart depth (kernels named nccl* inside are NCCL's)
  int launch_depth = 0;  // kernel launch open (runtime over driver: one record)
  uint64_t outer_api = 0;  // RecordKind of the outermost open call
  // The launch broad_launch_begin opened, between its begin and end (kernels.cpp).
  struct BroadLaunch {
    // Closed between launches (a nested launch never gets here: launch_depth). One byte, stored
    // once: as three flags, GCC merged two of their stores into one of a 16-bit constant loaded
    // from .rodata, a data line read cold on every launch.
    enum class State : uint8_t {
      Closed,
      Staged,    // the record is committed in the writer's staging slot (`ticket`)
      Unstaged,  // the record is in the thread's fallback slot (kernels.cpp)
      Nested,    // a library's own launch (inside cuBLAS): counted, no record
    };
    Tracer* tracer = nullptr;
    trace::TraceWriter::Staged ticket;  // Staged: the committed record
    State state = State::Closed;
  } broad;
  // Not an open call's, but read after every launch too, in this line's last free word:
  // LOCKSTEP_REPLAY armed this thread for the launch that just returned (collectors/replay.h).
  ReplayArmed* replay_armed = nullptr;

  // A GEMM opens (what it calls, cuBLASLt and its kernels, is its own) and closes. One with a
  // call-stack entry (open_gemm) is closed by finish_call (events.cpp, its raised flags); a
  // staged or copied one (gemm.cpp, lt_copies.cpp) closes itself.
  void gemm_opened() {
    ++depth, ++gemm_depth;
    if (outer_api == 0) outer_api = static_cast<uint64_t>(trace::RecordKind::Gemm);
  }
  void gemm_closed() {
    --depth, --gemm_depth;
    if (depth == 0) outer_api = 0;
  }
};
static_assert(sizeof(OpenApi) == 64);

struct alignas(128) HotThread {
  OpenApi api;  // first line
  // Second line.
  int16_t scope_depth[6] = {};  // interpose/scope.h: nesting per API scope (Scope::kCount)
  int shim_depth = 0;           // collectors/events.cpp: inside the shim's own calls
  uint32_t thread_ordinal = 0;  // collectors/tracer.cpp: this thread's in the trace (0: none yet)
  uint32_t last_stream_ordinal = 0;  // collectors/tracer.cpp: last_stream's ordinal
  struct LastStream {  // collectors/tracer.cpp: the stream a record was last stamped for
    const Tracer* tracer = nullptr;
    uintptr_t key = 0;
  } last_stream;
  ThreadScopes* scopes = nullptr;  // collectors/scopes.cpp: the open ranges (null: never any)
  // collectors/runtime.h (Tracer::stage, commit_staged): this thread's slot in the trace writer.
  trace::TraceWriter::ThreadSlot writer_slot;
};
static_assert(sizeof(HotThread) == 128 && offsetof(HotThread, scope_depth) == 64);

// initial-exec (the shim's parts are built with it, CMakeLists.txt: lockstep_shim_part; said
// here too so that a test binary's copy is the same): one %fs-relative address.
inline thread_local HotThread t_hot __attribute__((tls_model("initial-exec")));

inline OpenApi& open_api() { return t_hot.api; }

}  // namespace lockstep::collectors
