// SideHashes: hash launches on a side stream, beside the job's kernels instead of between them
// (LOCKSTEP_SIDE_HASHES=1, level full, experimental; issue #34, docs/performance.md "Full").
//
// At full, the hash launch before a kernel K reads the previous kernel's outputs and K's inputs.
// On the job's stream A it holds K back until it is done; on a side stream S it runs beside K:
//
//   A: ... K-1 | record e |                 K      ...  (wait h) | writer of those bytes
//   S:              wait e | hash launch | record h
//
// What keeps it sound (the side stream's digests must be of the bytes the in-stream hash would
// read): the Tracer sends a launch here only when K writes none of its regions; every later op
// that may write them is ordered after h on the GPU:
//   - an op whose writes are known (a kernel, a GEMM, a memory operation): before_writes() makes
//     its stream wait on every set it reaches;
//   - anything else (an event record, a synchronize, a free, a collective, a graph launch, a
//     step's end, the window's end): join_all() makes each set's job stream wait on it, so that
//     whatever the job orders after that point (another stream through its events, the host
//     through a synchronize) is after the hash too;
//   - at most kMaxPending sets stay pending: the oldest is joined when a newer one comes.
// Every wait is a cuStreamWaitEvent on an event the same thread recorded before: never a host
// wait, never an order CUDA does not see (stream memory operations could hang the job:
// bench/hashing/side_stream_bench.cu), and every dependency points to work queued earlier, so no
// cycle can form. The Tracer hashes in-stream while any graph capture has begun (a capturing
// stream cannot wait on an event recorded outside its capture).
//
// Thread-safe; pending() is one relaxed load (every flush point reads it).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include <cuda.h>

#include "collectors/driver_api.h"

namespace lockstep::collectors {

class SideHashes {
 public:
  // Does `d` have every entry point it calls (stream and event creation, records, waits, the
  // current context)?
  static bool usable(const Driver& d) {
    return d.streamCreate && d.eventCreate && d.eventRecord && d.streamWaitEvent &&
           d.ctxGetCurrent && d.ctxPushCurrent && d.ctxPopCurrent;
  }
  static constexpr size_t kMaxPending = 8;   // sets in flight before the oldest is joined
  static constexpr size_t kEvents = 16;      // "hashed" events per side stream (> kMaxPending)
  static constexpr size_t kMaxStreams = 32;  // job streams with a side stream; more: in-stream

  // `d`: the real driver in the shim, fakes in tests; usable(d) holds.
  explicit SideHashes(const Driver& d) : d_(d) {}

  // Before a hash launch meant for job stream `stream` of context `ctx` (current): the side
  // stream to launch it on, made to wait for everything `stream` has queued; null when there is
  // none (the per-thread default stream, a failed call, too many job streams):
  // launch on `stream`.
  // Call with the Tracer's hash lock held, and end() right after the launch.
  CUstream begin(CUcontext ctx, CUstream stream);
  // After the launch on begin()'s side stream: its regions [ptr, ptr + bytes) stay pending
  // until a writer, a join or a newer set orders `stream` after them. launched: false when the
  // launch was refused (nothing reads them; nothing pending).
  void end(CUcontext ctx, CUstream stream, const std::pair<uint64_t, uint64_t>* regions, size_t n,
           bool launched);
  // An op about to write the ranges [first, second) on `stream` (of the current context): that
  // stream waits for every pending set one of them reaches. A set whose job stream it is is
  // then no longer pending (everything after on that stream is ordered after it).
  void before_writes(CUstream stream, const std::pair<uint64_t, uint64_t>* writes, size_t n);
  // Each pending set's job stream waits for it; nothing is pending after.
  void join_all();
  bool pending() const { return count_.load(std::memory_order_relaxed) != 0; }

  // A launch that could have gone beside but stayed on the job's stream: the call it comes
  // before may write one of its regions (counted for LOCKSTEP_DEBUG's line).
  void stayed_for_writer() {
    std::lock_guard lock(mutex_);
    ++stats_.stayed;
  }

  struct Stats {
    uint64_t launches = 0;      // hash launches on a side stream
    uint64_t stayed = 0;        // stayed on the job's stream: the next call may write them
    uint64_t writer_waits = 0;  // a writer's stream made to wait on a set
    uint64_t joins = 0;         // sets joined by join_all()
    uint64_t evictions = 0;     // sets joined because newer ones came
    uint64_t failures = 0;      // side streams or events that could not be made or used
  };
  Stats stats() const;

 private:
  struct Side {
    CUcontext ctx = nullptr;
    CUstream job = nullptr;    // the job's stream (CU_STREAM_PER_THREAD/LEGACY as given)
    CUstream side = nullptr;   // ours, non-blocking
    CUevent queued = nullptr;  // recorded on `job` before each launch; `side` waits on it
    CUevent hashed[kEvents] = {};
    size_t next_event = 0;
  };
  struct Set {
    Side* side = nullptr;
    CUevent hashed = nullptr;
    std::vector<std::pair<uint64_t, uint64_t>> regions;  // [start, end)
  };
  Side* side_for_locked(CUcontext ctx, CUstream stream);
  // `stream` (of set.side->ctx) waits for `set` (a failure counted).
  void wait_locked(CUstream stream, const Set& set);
  void count_locked() { count_.store(pending_.size(), std::memory_order_relaxed); }

  const Driver d_;  // a copy: the tests' fakes need not outlive it
  mutable std::mutex mutex_;
  std::vector<Side> sides_;   // reserved kMaxStreams: pointers into it stay valid
  std::vector<Set> pending_;  // oldest first
  std::atomic<size_t> count_{0};
  bool broken_ = false;  // an event record failed: no more side launches
  Stats stats_;
};

}  // namespace lockstep::collectors
