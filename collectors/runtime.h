// The process-wide Tracer: configuration, trace writer, ordinals, allocation map, communicator
// registry, step counter, hash engines and the records waiting for their digests. Internal to
// collectors/ (events.h is the interface). Defined in one file per part: tracer_lifecycle.cpp,
// tracer.cpp (identity), tracer_hashing.cpp, tracer_digest_reuse.cpp, tracer_collector.cpp,
// tracer_stats.cpp (README, The Tracer's files).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include <cuda.h>

#include "collectors/alloc_map.h"
#include "collectors/comm_identity.h"
#include "collectors/config.h"
#include "collectors/events.h"
#include "collectors/fill_digests.h"
#include "collectors/hot_thread.h"
#include "collectors/pointer_roles.h"
#include "collectors/region_digests.h"
#include "collectors/scopes.h"
#include "collectors/side_hashes.h"
#include "collectors/slot_waiters.h"
#include "collectors/step_counter.h"
#include "collectors/stream_steps.h"
#include "collectors/tracer_stats.h"
#include "hashing/engine.h"
#include "trace/record.h"
#include "trace/writer.h"

namespace lockstep::collectors {

// A buffer planned for fingerprinting: where it is and which record entry it fills.
struct PlannedRegion {
  CUdeviceptr ptr = 0;
  uint64_t bytes = 0;
  uint32_t buffer_index = 0;
  // Where the pointer's allocation starts and its mapped run ends (0, 0 outside the
  // allocation map): what a write through ptr may reach, for reused digests.
  uint64_t alloc_base = 0;
  uint64_t run_end = 0;
  // A word the kernel's known semantics name as an operand (an elementwise kernel's data[k],
  // kernel_writes.h): a pointer for sure, not a word that merely looks like one, so its input
  // region may take the known digest of an enclosing region of its allocation that is not among
  // the launch's own (a view's: a slice's gradient copied into a zeros tensor from +64 on).
  bool operand = false;
};

// A record waiting for digests. `outstanding` counts digests not yet delivered plus one while
// the call is still open (so it is never appended before the API call returned).
// One record of a state call that a held State record stands for (state_records.cpp), the k-th
// (its seq: the held record's + k): its name and size; `entry`: record.buffers' next entry is
// its (none for an empty tensor).
struct StatePart {
  trace::StringId name = 0;
  uint64_t bytes = 0;
  bool entry = false;
};

struct PendingRecord {
  trace::Record record;
  uint32_t outstanding = 1;
  bool discard = false;  // the call failed: nothing ran, so nothing is appended
  // A kernel at full: whose pointer roles its In/Out digest pairs teach (pointer_roles.h).
  struct RolePair {
    uint32_t byte_offset;          // the pointer's word in the parameter buffer
    uint32_t in_index, out_index;  // its entries in record.buffers
  };
  PointerRoles* roles = nullptr;
  std::vector<RolePair> role_pairs;
  // The launch overwrites a region whole by its kernel's semantics (kernel_writes.h: an Out
  // entry with no In to compare): a write seen through its pointers, so its unchanged regions
  // count towards learning as when a compared region changed.
  bool writes_whole = false;
  // A known fill whose output is hashed: its digest teaches FillDigests (fill_digests.h).
  std::optional<FillKind> fill;
  uint32_t fill_index = 0;  // its output entry
  // A state call's records, when this one stands for them (Tracer::append_state_parts).
  std::vector<StatePart> state_parts;
  // Back to a new one's state for the next hold (Tracer's spare list), the record's vectors
  // keeping their capacity: a field added above is reset here too.
  void reuse() {
    outstanding = 1;
    discard = false;
    roles = nullptr;
    role_pairs.clear();
    writes_whole = false;
    fill.reset();
    fill_index = 0;
    state_parts.clear();
  }
};

class Tracer {
 public:
  // Null when tracing is off, misconfigured, failed to start, or in a forked child. Inline: one
  // load from the line of hot flags (common/hot_flags.h) once the tracer exists; the first
  // call makes it (get_first).
  static Tracer* get() {
    Tracer* tracer = hot_flags.tracer.load(std::memory_order_acquire);
    if (tracer != nullptr) [[likely]]
      return tracer;
    return get_first();
  }
  static const ConfigResult& configuration();  // parsed once, errors printed once
  // The tracer if it was already created; never creates one (markers must not start a trace).
  static Tracer* existing() { return hot_flags.tracer.load(std::memory_order_acquire); }
  // False once tracing is known to be impossible (bad config, level off, start failed, child).
  static bool possible() { return tracing_possible(); }

  const Config& config() const { return config_; }
  Level level() const { return hot_.level; }
  bool fingerprint_step(uint32_t step) const { return config_.in_window(step); }
  void debug(const std::string& line) const;

  // ---- record identity ----------------------------------------------------------------------
  uint64_t next_seq() { return hot_.seq.fetch_add(1, std::memory_order_relaxed) + 1; }
  // The first of `n` consecutive seqs (a call of n records: the state call's tensors).
  uint64_t next_seqs(uint64_t n) { return hot_.seq.fetch_add(n, std::memory_order_relaxed) + 1; }
  uint32_t stream_ordinal(CUstream stream, bool per_thread_default);
  uint32_t thread_ordinal();
  // Kernel names and buffer labels are interned on every record; the writer's table takes a
  // process-wide mutex, so each thread keeps its own cache in front of it.
  trace::StringId intern(std::string_view text);
  // intern() of a text that lives and never changes for the whole process (a string literal: an
  // API's name, a buffer label), through a per-thread cache keyed by its address in front of
  // intern's, which hashes the text (a DDP step's ~220 copies and sets paid two each).
  trace::StringId intern_literal(const char* text);
  // The scope (parent, name) as an id of this trace (trace/record.h, ScopeId), through a cache of
  // the thread's own in front of the writer's table (scopes.cpp calls it once per new range).
  trace::ScopeId intern_scope(trace::ScopeId parent, std::string_view name);
  // seq, stream, step, thread, scope (the ranges open on this thread: scopes.h), kind, name.
  void stamp(trace::Record* record, trace::RecordKind kind, std::string_view name, CUstream stream,
             bool per_thread_default) {
    stamp_with_seq(record, kind, name, stream, per_thread_default, next_seq());
  }
  // stamp() named by a string literal (an API's name: `api` in events.h), through intern_literal.
  void stamp_literal(trace::Record* record, trace::RecordKind kind, const char* name,
                     CUstream stream, bool per_thread_default) {
    stamp(record, kind, "", stream, per_thread_default);
    record->name = intern_literal(name);
  }
  // The same with a seq taken before (a launch at broad takes it before its first store to the
  // record: the locked add then waits for no store of ours that misses the cache).
  void stamp_with_seq(trace::Record* record, trace::RecordKind kind, std::string_view name,
                      CUstream stream, bool per_thread_default, uint64_t seq);
  // Adds a buffer entry (allocation ordinal + offset from the allocation map) to `record`, and,
  // when `hash`, plans its fingerprint into `plan`. The region is cut at the end of the mapped
  // range (flagged clamped); a pointer outside every known allocation is hashed only when its
  // extent is exact (the API itself reads those bytes).
  void add_buffer(trace::Record* record, std::vector<PlannedRegion>* plan, std::string_view label,
                  trace::Role role, trace::DType dtype, const void* ptr, uint64_t bytes, bool exact,
                  bool hash, uint64_t cap = UINT64_MAX) {
    add_buffer(record, plan, intern(label), role, dtype, ptr, bytes, exact, hash, cap);
  }
  // The same with the label already interned (the kernel path caches its "argN" labels).
  void add_buffer(trace::Record* record, std::vector<PlannedRegion>* plan, trace::StringId label,
                  trace::Role role, trace::DType dtype, const void* ptr, uint64_t bytes, bool exact,
                  bool hash, uint64_t cap = UINT64_MAX) {
    add_buffer(record, plan, label, role, dtype, ptr, bytes, exact, hash, cap,
               allocations_.find(reinterpret_cast<uintptr_t>(ptr)));
  }
  // The same with `ptr` already looked up in the allocation map (a kernel's decoded pointers:
  // each lookup walks a map that a training job keeps thousands of entries in).
  void add_buffer(trace::Record* record, std::vector<PlannedRegion>* plan, trace::StringId label,
                  trace::Role role, trace::DType dtype, const void* ptr, uint64_t bytes, bool exact,
                  bool hash, uint64_t cap, const std::optional<AllocationHit>& hit);

  // ---- appending --------------------------------------------------------------------------
  void append(const trace::Record& record);
  // append() without the copy (trace::TraceWriter::stage): the record is built in the writer's
  // staging slot, committed, and taken back if the call it describes failed. stage() is nullptr
  // once closed or where the writer refuses (then append() as usual).
  trace::Record* stage() {
    if (hot_.closed.load(std::memory_order_relaxed)) return nullptr;
    trace::TraceWriter& writer = *hot_.writer;
    if (t_hot.writer_slot.writer != writer.uid()) [[unlikely]]
      t_hot.writer_slot = writer.thread_slot();
    return writer.stage(t_hot.writer_slot);
  }
  trace::TraceWriter::Staged commit_staged() {
    return hot_.writer->commit_staged(t_hot.writer_slot);
  }
  // Every record appended so far completed and written (blocks; lt_copies.cpp at exit).
  void flush_writer() { hot_.writer->flush(); }
  // Every committed record named now (trace::TraceWriter::resolve_deferred): code_unloading.
  void name_deferred_records() { hot_.writer->resolve_deferred(); }
  bool retract(const trace::TraceWriter::Staged& ticket) { return hot_.writer->retract(ticket); }
  // Whether a kernel's name decides something on the launching thread (a LOCKSTEP_STACKS
  // filter): else a launch at broad leaves the name to the writer (kernels.cpp).
  bool stacks_by_name() const { return hot_.stacks_by_name; }
  void warn(WarningCode code, uint64_t count, std::string_view message);

  // ---- fingerprints ------------------------------------------------------------------------
  // Creates a pending record (outstanding = 1 for the open call). Null when the pending ring is
  // full: the caller then appends with kFingerprintDropped. Taken, the caller's record is left
  // with empty buffers and payload and a stale header (nothing reads it after a hold).
  PendingRecord* hold(trace::Record&& record);
  // Enqueues fingerprints of `regions` on `stream`, filling `pending` when they arrive. Regions
  // that cannot be hashed (capturing stream, ring full, no engine) are flagged dropped.
  // `not_capturing`: the caller has just seen that `stream` is not capturing (skips the check).
  // `side_writes`: what the call these regions are read for writes (enqueue_groups).
  struct CallWrites;  // below, with fingerprint_inputs
  void fingerprint(PendingRecord* pending, CUstream stream, bool per_thread_default,
                   const PlannedRegion* regions, size_t n, bool not_capturing = false,
                   const CallWrites* side_writes = nullptr);

  // fingerprint() of regions that may repeat (a state call's tensors, tied weights passed twice):
  // a region already in the launch is hashed once and its digest fills each entry.
  void fingerprint_repeating(PendingRecord* pending, CUstream stream, const PlannedRegion* regions,
                             size_t n);
  // The records a held State record stands for (a state call's, state_records.cpp): its
  // identity with each part's name, size and entry of its buffers, and consecutive seqs from
  // its own. Appended in order.
  void append_state_parts(const trace::Record& batch, const std::vector<StatePart>& parts);

  // ---- merged hash launches (LOCKSTEP_MERGE_HASHES) --------------------------------------------
  // A kernel's outputs need hashing after it and the next kernel's inputs before that one; on
  // one stream nothing runs between the two, so one hash launch serves both. defer_outputs()
  // keeps the outputs of a call that just launched (one deferred set, process-wide, of one
  // stream and context); fingerprint_inputs() launches them together with the next call's
  // inputs when that call is on the same stream and context, else flushes them first.
  // Chained (the default): when the next call needs no hash launch of its own (every input
  // either has a known digest, is unwritten and skipped, or is one of the deferred regions) and
  // may write none of the deferred regions, nothing is launched: the regions it reads join the
  // set (they are the same bytes until something writes them) and its outputs follow; one later
  // launch carries them all (at most kChainRegions). flush_deferred() enqueues them now: called
  // before anything that could order other work or the host after the stream (every other
  // traced call, frees, event records, synchronizations, capture begins: see
  // stream_order_point in events.h). Without merging, both enqueue at once. Outputs of a call
  // on a capturing stream are never deferred (the call has not run; a later flush on the
  // stream, once the capture ended, would hash what is there then): `not_capturing` says the
  // caller checked (a kernel's fingerprints are planned only outside capture), else it is
  // checked here.
  void defer_outputs(PendingRecord* pending, CUstream stream, bool per_thread_default,
                     std::vector<PlannedRegion>& regions, bool not_capturing);
  // What the call whose inputs these are may write, for chaining (null: launch, never chain).
  struct CallWrites {
    const std::vector<PlannedRegion>* outputs = nullptr;
    const std::vector<PlannedRegion>* also = nullptr;  // written, not hashed (a workspace)
  };
  void fingerprint_inputs(PendingRecord* pending, CUstream stream, bool per_thread_default,
                          const PlannedRegion* regions, size_t n, bool not_capturing,
                          const CallWrites* writes = nullptr);
  // A chained set's most regions: one small-batch hash launch (lsf1::kSmallBatch). A full chain
  // was 154 hash launches a step of the unseen job's ~1,100 (LOCKSTEP_DEBUG's "chain full"); 96
  // (one medium batch) saved 17 of them on one H100, as a larger set is more often written by the
  // next call (docs/performance.md, "Full"), so it stays 32.
  static constexpr size_t kChainRegions = 32;
  using FlushCause = collectors::FlushCause;   // tracer_stats.h
  // Also joins the hash launches in flight on side streams (LOCKSTEP_SIDE_HASHES,
  // side_hashes.h): every point that flushes is one after which the job may write, through
  // another stream or the host, what they read.
  void flush_deferred(FlushCause cause) {
    if (has_deferred_.load(std::memory_order_acquire)) flush_deferred_slow(cause);
    if (SideHashes* side = side_hashes_.load(std::memory_order_acquire))
      if (side->pending()) join_side_hashes(side);
  }
  // A call about to run on `stream` (per_thread_default: the thread's default stream): with
  // hash launches in flight on side streams, it waits for each one that reads what it may
  // write (`writes_known`: `outputs` and `also` are all it writes; else it waits for them all).
  void side_hashes_before_call(CUstream stream, bool per_thread_default, bool writes_known,
                               const std::vector<PlannedRegion>& outputs,
                               const std::vector<PlannedRegion>& also) {
    if (SideHashes* side = side_hashes_.load(std::memory_order_acquire))
      if (side->pending())
        side_hashes_before_call_slow(side, stream, per_thread_default, writes_known, outputs,
                                     also);
  }
  // ---- held across a host synchronization (LOCKSTEP_HOLD_ACROSS_SYNC) -------------------------
  // Every other traced call flushes the deferred set, so that what the job orders after the call
  // is ordered after the set's hashes. A small device-to-host copy (a metric: PyTorch's .item())
  // and the synchronization after it order only the host; torch's Adafactor makes ~220 a step,
  // each one a hash launch of its own. So a set of the copy's stream and context is held across
  // the copy (before_host_copy) and across host waits (hold_at_host_wait), and rides on the
  // stream's next hash launch. But once the host waited, it may order other work after the set's
  // writers with no call on their stream (a kernel on stream B writing a region of the set, after
  // the synchronize): so a set held across a host wait (or a copy that returned with its work
  // done, host_copy_returned) is marked synced, and once issued an event is recorded after its
  // hashes; until the host next sees that stream's work done (a copy on it that returned with its
  // work done, a synchronize of it or of the context), every traced call on another stream or
  // context makes its stream wait on that event first (before_work_on; a capturing stream does
  // not: its work runs at a graph launch, a traced call that waits). Never a host wait. Not on
  // per-thread default streams (one key for many streams), with side hashes, chaining off, or
  // once any capture has begun.
  struct HostCopyHold {
    uint64_t set_generation = 0;   // the held set's generation (0: none held)
    uint64_t issue_generation = 0;  // the synced issue outstanding at the copy (0: none)
  };
  HostCopyHold before_host_copy(CUstream stream, bool per_thread_default);
  // The copy of before_host_copy returned with its work done (not called otherwise).
  void host_copy_returned(CUstream stream, bool per_thread_default, const HostCopyHold& hold);
  // The host waits for (or asks about) a stream's or the context's work (events.h, HostWait): a
  // set that may be held is marked synced instead of flushed (nothing is queued by the wait: the
  // set reads what its writers left; whatever the job orders after it through the host is
  // ordered after the set's hashes by the event and waits above); any other set is flushed. The
  // outstanding issue's generation when the wait covers its stream (whole_context: the streams of
  // `context`, null the current one), for host_saw_issue_done.
  HostWait hold_at_host_wait(CUstream stream, bool per_thread_default, bool whole_context,
                             CUcontext context);
  // A host wait that covered the outstanding issue returned success: its hashes are done.
  void host_saw_issue_done(uint64_t issue_generation);
  // A traced call is about to queue work on `stream` (per_thread_default: the thread's default
  // stream).
  void before_work_on(CUstream stream, bool per_thread_default) {
    if (synced_live_.load(std::memory_order_acquire)) [[unlikely]]
      before_work_on_slow(stream, per_thread_default);
  }
  // How many synced sets were issued so far: a call compares it around its own hash planning,
  // and waits again only when that issued one (start_fingerprints).
  uint64_t synced_issue_count() const { return synced_issues_.load(std::memory_order_acquire); }

  // cuMemFreeAsync while outputs are deferred: instead of a hash launch of their own (PyTorch on
  // cudaMallocAsync frees after almost every op), the free waits and is made, on its stream,
  // right after the deferred hashes are enqueued. True when the tracer took the free over (the
  // job's call returns success); false when nothing is deferred (free it now).
  // `end`: the end of the freed allocation (digests of its regions are forgotten once the
  // deferred hashes that read it are enqueued).
  bool defer_free(CUdeviceptr ptr, uint64_t end, CUstream stream, bool per_thread_default);
  // The call returned: drop the open-call reference; appended once all digests arrived, unless
  // the call failed (keep = false: the op never ran, as for calls held without fingerprints).
  void release(PendingRecord* pending, bool keep = true);
  // Is `stream` capturing (or in an invalid capture state)? Capture id in *capture_id. No
  // driver query before the process's first capture begin (capture_begun(), events.h): until
  // then no stream can be capturing. The query cost a call that asks ~1 us on the H200's host
  // cold (a state call and each stream-ordered allocation at broad), and ~60-110 ns warm for
  // every launch at full (issue #34).
  bool capturing(CUstream stream, bool per_thread_default, uint64_t* capture_id,
                 CUgraph* graph = nullptr);

  // Host bytes that become valid when work queued on `stream` so far completes; `done` runs on
  // the collector thread then (or now when the stream cannot take an event).
  // The record's step is not summarized before `done` ran.
  void when_stream_done(CUstream stream, bool per_thread_default, uint32_t step,
                        std::function<void()> done);

  // ---- steps ----------------------------------------------------------------------------------
  static StepCounter& steps();  // process-wide: markers count even before the trace opens
  // Stream-ordered steps (stream_steps.h), when the job asked for them.
  static StreamSteps& stream_steps();
  // The key of a stream in the ordinal and step tables: the handle, or one value per default
  // stream.
  static uintptr_t stream_key(CUstream stream, bool per_thread_default) {
    const auto key = reinterpret_cast<uintptr_t>(stream);
    if (key != 0) return key;
    return per_thread_default ? reinterpret_cast<uintptr_t>(CU_STREAM_PER_THREAD)
                              : reinterpret_cast<uintptr_t>(CU_STREAM_LEGACY);
  }
  // `job_step`: the job's own number of the step that starts (the StepMarker's job_step).
  void step_advanced(uint32_t finished, std::string_view marker, uint64_t source,
                     std::optional<uint64_t> job_step = std::nullopt);

  AllocationMap& allocations() { return allocations_; }
  CommRegistry& comms() { return comms_; }

  // Kernel name filter (LOCKSTEP_KERNELS): true when no filter is set.
  bool kernel_selected(std::string_view demangled_name) const;
  // Do its launches record their call stack (LOCKSTEP_STACKS, stacks.h)? false when unset.
  bool kernel_stacks(std::string_view demangled_name) const;

  void close();               // flush and close the writer (atexit); idempotent
  void abandon_after_fork();  // child side of fork

  // What the shim did that the trace does not say (tracer_stats.h): bumped from every part of
  // collectors/, reported at close.
  TracerStats stats;

  // ---- reused input digests (region_digests.h), level full ----------------------------------
  bool reuses_digests() const { return reuse_digests_; }
  // A call's device writes, noted before it runs (digests of what they reach are forgotten), in
  // progress until it returned (writes_end; `owner` is the call). `also`: regions it writes
  // without their being hashed (a GEMM's workspace).
  void writes_begin(const void* owner, const std::vector<PlannedRegion>& outputs,
                    const std::vector<PlannedRegion>& also);
  void unknown_writes_begin();  // a write whose regions are not known: forget everything
  void writes_end(const void* owner, bool unknown);
  void region_written(uint64_t ptr, uint64_t end, uint64_t alloc_base);  // a free, an unmap
  // A new allocation: fresh (inputs in it not hashed) with skip_unwritten; `from_pool` (a
  // stream-ordered allocation) with carry_freed: the digest a free of the same range left.
  void region_allocated(uint64_t base, uint64_t bytes, bool from_pool = false);
  // A stream-ordered free of [base, end): its digests are forgotten; with carry_freed the
  // whole allocation's digest, if known, waits for the next allocation of that range.
  void region_freed_to_pool(uint64_t base, uint64_t end);
  // ---- learned read-only kernel pointers (pointer_roles.h), level full ------------------------
  bool learns_roles() const { return learn_roles_; }
  // ---- recalled fill digests (fill_digests.h), level full ------------------------------------
  bool recalls_fills() const { return recall_fills_; }
  FillDigests& fill_digests() { return fill_digests_; }
  // A recalled fill's output: the call noted its write; the region's digest is now `digest`.
  // `owner`: the call (its own write in progress does not count).
  void region_recalled(const void* owner, const PlannedRegion& region, CUstream stream,
                       bool per_thread_default, uint64_t digest);
  // Whether a call writing `writes` would change what the deferred set has still to read.
  bool deferred_overlaps(const std::vector<PlannedRegion>& writes);
  std::atomic<bool> rank_known{false};

 private:
  static Tracer* get_first();  // get() before the tracer exists: makes it, or gives up for good
  Tracer(const Config& config, std::unique_ptr<trace::TraceWriter> writer);
  static Tracer* create();
  static void close_at_exit();  // registered with atexit (again once CUDA is up)
  // close()'s parts: records still waiting get what arrived, the rest flagged dropped; then
  // LOCKSTEP_DEBUG's counters and the Warning records of what was not fingerprinted.
  void drain_at_close();
  void report_at_close();
  void collector_loop();
  void wake_collector();
  // Collects finished digests into their records; records now complete go to *complete (to be
  // appended outside the lock, then retired). True while work is pending.
  bool poll_once(std::vector<PendingRecord*>* complete);
  void finish_steps_locked();
  // The step ends markers handed over (step_advanced) into steps_to_end_, then ended as far as
  // their records are out; pending_mutex_ held.
  void take_handed_steps_locked();
  // Starts the collector's thread unless it runs; pending_mutex_ held.
  void start_collector_locked();
  struct HashGroup {
    PendingRecord* pending;
    const PlannedRegion* regions;
    size_t n;
    bool repeats = false;  // its own regions may repeat (else only earlier groups' are looked up)
  };
  // One engine launch (per kMaxRegionsPerEnqueue regions) for every group's regions.
  // side_writes: what the call these regions are read for writes; non-null lets the launch go
  // to a side stream (LOCKSTEP_SIDE_HASHES) when that call writes none of them.
  void enqueue_groups(CUstream stream, bool per_thread_default, const HashGroup* groups,
                      size_t count, bool not_capturing, const CallWrites* side_writes = nullptr);
  // The side streams' state, made on the first launch that may use one; null until then.
  SideHashes* side_hashes_locked();
  void join_side_hashes(SideHashes* side);
  void side_hashes_before_call_slow(SideHashes* side, CUstream stream, bool per_thread_default,
                                    bool writes_known, const std::vector<PlannedRegion>& outputs,
                                    const std::vector<PlannedRegion>& also);
  // A stream-ordered free the job made while outputs were deferred: issued right after them.
  struct DeferredFree {
    CUdeviceptr ptr = 0;
    uint64_t end = 0;
    CUstream stream = nullptr;  // CU_STREAM_PER_THREAD for the per-thread default stream
    CUcontext context = nullptr;
  };
  // The deferred set: the regions of one or more records (owners[k] owns regions
  // [ends[k-1], ends[k])), all on one stream and context.
  struct Deferred {
    std::vector<PendingRecord*> owners;
    std::vector<size_t> ends;
    CUstream stream = nullptr;
    bool per_thread_default = false;
    CUcontext context = nullptr;
    std::vector<PlannedRegion> regions;
    std::vector<DeferredFree> frees;
    // The host saw every writer of the set's regions finish (host_copy_returned): issued with an
    // event after it that other streams wait on (before_work_on).
    bool synced = false;
    uint64_t generation = 0;  // changes with every add and clear (before_host_copy's check)
    bool empty() const { return owners.empty(); }
    void add(PendingRecord* pending, const PlannedRegion* first, size_t n) {
      owners.push_back(pending);
      regions.insert(regions.end(), first, first + n);
      ends.push_back(regions.size());
      ++generation;
    }
    void clear() {
      owners.clear();
      ends.clear();
      regions.clear();
      frees.clear();
      synced = false;
      ++generation;
    }
    // Vectors copied, not moved: both sides keep their capacity (no allocation per kernel).
    void copy_from(const Deferred& other) {
      owners.assign(other.owners.begin(), other.owners.end());
      ends.assign(other.ends.begin(), other.ends.end());
      stream = other.stream;
      per_thread_default = other.per_thread_default;
      context = other.context;
      regions.assign(other.regions.begin(), other.regions.end());
      frees.assign(other.frees.begin(), other.frees.end());
      synced = other.synced;
    }
  };
  // Enqueues the deferred set (then `extra`, the next call's inputs, in the same launch) and
  // drops the set's references.
  void enqueue_deferred(Deferred& deferred, const HashGroup* extra, bool not_capturing,
                        const CallWrites* side_writes = nullptr);
  // deferred_mutex_ held: true when the call whose inputs these are needs no hash launch now
  // (see fingerprint_inputs); its known inputs are then filled and the regions it reads from
  // the set join it.
  bool chain_locked(PendingRecord* pending, CUstream stream, bool per_thread_default,
                    const PlannedRegion* regions, size_t n, const CallWrites& writes);
  // deferred_mutex_ held: whether writes through `writes` may reach what the set still reads.
  bool reaches_deferred_locked(const std::vector<PlannedRegion>& writes) const;
  void issue_frees(Deferred& deferred);  // the real cuMemFreeAsync of each, then cleared
  // A synced set's hashes were just enqueued on its stream (its context current): records the
  // event other streams wait on, and makes the issue outstanding.
  void synced_set_issued(const Deferred& deferred);
  void before_work_on_slow(CUstream stream, bool per_thread_default);
  bool hold_allowed() const;     // the configuration and the driver allow holding at all
  bool holdable_locked() const;  // deferred_mutex_ held: deferred_ may be held and synced
  // deferred_mutex_ held: deferred_ is non-empty and of this stream key and context; the
  // outstanding issue is of them.
  bool deferred_on_locked(uintptr_t key, CUcontext ctx) const;
  bool issue_on_locked(uintptr_t key, CUcontext ctx) const;
  void end_issue_locked();       // deferred_mutex_ held: the host saw the issue's hashes done
  // A stream-ordered free's digests forgotten; with carry_freed the whole allocation's kept
  // aside (region_digests.h). pending_mutex_ held.
  void freed_to_pool_locked(uint64_t base, uint64_t end);
  bool take_deferred(Deferred* out);
  void issue_deferred(Deferred& deferred);  // enqueue alone, then drop its reference
  // stream_ordinal's path for a stream other than the thread's last one (noinline: the
  // per-call path stays small).
  [[gnu::noinline]] uint32_t other_stream_ordinal(uintptr_t key);
  void flush_deferred_slow(FlushCause cause);
  // Fills one digest; true when that was the record's last outstanding one.
  bool deliver(PendingRecord* pending, uint32_t buffer_index, uint64_t digest, bool valid);
  // A complete record (already appended unless discarded): counters, step ends, freed.
  void retire_locked(PendingRecord* pending);
  // A complete record appended (unless discarded), then retired.
  void complete_locked(PendingRecord* pending);

  // What every traced launch reads of the tracer, in one cache line ahead of the rest: at broad
  // a launch costs the lines the job's work evicted since the last one (collectors/README.md,
  // "A call's cost at broad"), and these were four lines apart. `level` and `stacks_by_name`
  // are config_.level and stack_filter_'s presence, set once by the constructor.
  struct alignas(64) Hot {
    std::atomic<uint64_t> seq{0};
    std::unique_ptr<trace::TraceWriter> writer;
    Level level = Level::Off;
    bool stacks_by_name = false;
    std::atomic<bool> closed{false};
  } hot_;
  static_assert(sizeof(Hot) == 64);
  Config config_;
  std::atomic<uint32_t> next_thread_{0};
  std::mutex streams_mutex_;
  std::unordered_map<uintptr_t, uint32_t> streams_;
  AllocationMap allocations_;
  CommRegistry comms_;
  std::optional<std::regex> kernel_filter_;
  std::optional<std::regex> stack_filter_;

  // Pending records, digests in flight, deferred step ends, stream-done callbacks.
  std::mutex pending_mutex_;
  struct SlotTarget {
    PendingRecord* pending;
    uint32_t buffer_index;
  };
  struct EngineState {
    std::unique_ptr<hashing::HashEngine> engine;
    std::vector<SlotTarget> slots;  // by slot id % ring size; pending == nullptr: free
    std::vector<SlotTarget> also;   // a second record the same digest fills, or pending == nullptr
    // Reused digests: the region start each slot hashes (0: none), and records waiting on a
    // slot for a digest reused while in flight (keyed by slot id).
    std::vector<CUdeviceptr> slot_region;
    SlotWaiters<SlotTarget> waiters;  // by slot id (slot_waiters.h)
  };
  std::map<CUcontext, EngineState> engines_;
  // The current context's engine and slots (created on first use); null without one.
  EngineState* engine_for_current_context();
  // pending_mutex_ held: what is known of an input region of `record` that spares hashing it
  // (a digest arrived or in flight, or unwritten and skipped); nullopt when it needs hashing.
  std::optional<RegionDigests::Known> known_input_locked(const trace::Record& record,
                                                         const PlannedRegion& region,
                                                         EngineState* state,
                                                         const void* stream_key) const;
  // pending_mutex_ held: fills the input's entry from `known` (or makes it wait on the slot).
  void take_known_input_locked(const SlotTarget& owner, const PlannedRegion& region,
                               const RegionDigests::Known& known, EngineState* state);
  // pending_mutex_ held: the entry of `region` describes the enclosing region [start, start +
  // length) of the same allocation, whose digest it takes (trace::kDigestOfEnclosing).
  void take_enclosing_locked(const SlotTarget& owner, const PlannedRegion& region, uint64_t start,
                             uint64_t length);
  bool engine_failed_ = false;
  const bool reuse_digests_;   // config: reuse_digests at level full
  const bool skip_unwritten_;  // config: skip_unwritten, with reuse_digests_
  const bool carry_freed_;     // config: carry_freed, with reuse_digests_
  const bool learn_roles_;     // config: learn_read_only at level full
  const bool recall_fills_;    // config: recall_fills at level full
  FillDigests fill_digests_;
  void learn_roles_locked(const PendingRecord& pending);  // at retire: its In/Out pairs
  RegionDigests region_digests_;                          // under pending_mutex_
  size_t pending_records_ = 0;
  // Retired PendingRecords kept for the next hold (under pending_mutex_): a record's buffers keep
  // their capacity, and the collector thread frees nothing the job's thread allocated (the
  // PyTorch hook's 77 state records after each optimizer step: two mallocs and a cross-thread
  // free each, a third of that call's cost).
  std::vector<PendingRecord*> spare_pending_;
  PendingRecord* new_pending_locked(trace::Record& record);
  // A complete held record into the trace: itself, or the state call's records it stands for.
  void append_held(const PendingRecord& pending);
  std::map<uint32_t, size_t> pending_per_step_;
  std::deque<uint32_t> steps_to_end_;
  struct StreamDone {
    CUevent event;
    uint32_t step;
    std::function<void()> done;
  };
  std::vector<StreamDone> stream_done_;
  std::mutex deferred_mutex_;
  Deferred deferred_;  // under deferred_mutex_
  std::atomic<bool> has_deferred_{false};
  // The outstanding synced issue (before_work_on), under deferred_mutex_.
  struct SyncedIssue {
    CUcontext context = nullptr;
    uintptr_t stream_key = 0;
    CUevent event = nullptr;
    uint64_t generation = 0;  // 0: none outstanding
    std::vector<std::pair<uintptr_t, CUcontext>> waited;  // streams made to wait on it
  };
  SyncedIssue synced_issue_;
  std::vector<std::pair<CUcontext, CUevent>> synced_events_;  // one per context, kept to exit
  std::atomic<uint64_t> synced_issues_{0};  // synced sets issued (synced_issue_count)
  std::atomic<bool> synced_live_{false};  // synced_issue_.generation != 0
  std::atomic<uintptr_t> synced_key_{0};  // synced_issue_'s stream and context, read unlocked
  std::atomic<CUcontext> synced_context_{nullptr};
  std::atomic<bool> hold_broken_{false};  // an event could not be recorded: hold nothing more
  std::atomic<SideHashes*> side_hashes_{nullptr};  // read without a lock by every flush
  std::unique_ptr<SideHashes> side_hashes_owned_;   // made under pending_mutex_, kept to exit
  std::condition_variable collector_wake_;
  bool collector_idle_ = false;  // in its long wait: new digests must wake it (else it polls)
  std::thread collector_;
  // Set once, under pending_mutex_, by start_collector_locked; read without it by markers: once
  // the collector's thread runs, a marker hands the step it ended to it instead of ending the
  // step itself (the job's thread takes no lock the collector holds and makes no futex call, the
  // writer's wake, at a step's end; the collector's next look, kIdlePoll at most, ends it).
  std::atomic<bool> collector_running_{false};
  bool closing_ = false;
  std::mutex handed_mutex_;
  std::vector<uint32_t> handed_steps_;  // under handed_mutex_, in marker order

  static constexpr size_t kMaxPendingRecords = 1u << 16;
  // Records held that wake an idle collector (enqueue_groups); fewer wait for its next look,
  // kIdlePoll at most.
  static constexpr size_t kWakePendingRecords = 64;
  static constexpr std::chrono::milliseconds kIdlePoll{20};
};

// The per-thread state shared by the event handlers (OpenApi, open_api()): collectors/hot_thread.h.

// A record's identity, inline: every traced call stamps one, and as calls into tracer.cpp (the
// stamp, the stream's and the thread's ordinals, the scope) a broad launch ran four prologues and
// epilogues for ~30 instructions of work (bench/collectors/launch_lines.py). Their slow paths
// (another stream than the thread's last, a thread with open ranges, a name to intern) stay out
// of line.
inline uint32_t Tracer::stream_ordinal(CUstream stream, bool per_thread_default) {
  const uintptr_t key = stream_key(stream, per_thread_default);
  // The last stream this thread used, asked first: launches come in runs on one stream.
  const HotThread::LastStream& last = t_hot.last_stream;
  if (last.tracer != this || last.key != key) [[unlikely]]
    return other_stream_ordinal(key);
  return t_hot.last_stream_ordinal;
}

inline uint32_t Tracer::thread_ordinal() {
  uint32_t& ordinal = t_hot.thread_ordinal;
  if (ordinal == 0) [[unlikely]]
    ordinal = next_thread_.fetch_add(1, std::memory_order_relaxed) + 1;
  return ordinal;
}

inline void Tracer::stamp_with_seq(trace::Record* record, trace::RecordKind kind,
                                   std::string_view name, CUstream stream, bool per_thread_default,
                                   uint64_t seq) {
  record->kind = kind;
  record->seq = seq;
  record->stream = stream_ordinal(stream, per_thread_default);
  // The process's counter and rule switch as steps() and stream_steps() keep them, read from the
  // line of hot flags without the function statics and heap objects around them (the counter
  // counts from 0 before steps() makes it, as it would).
  record->step = hot_flags.step.load(std::memory_order_relaxed);
  // Step markers and warnings are no work on a stream: they neither take nor move its step.
  if (hot_flags.stream_steps.load(std::memory_order_acquire) &&
      kind != trace::RecordKind::StepMarker && kind != trace::RecordKind::Warning) [[unlikely]]
    record->step = stream_steps().step_of(stream_key(stream, per_thread_default), record->step);
  record->thread = thread_ordinal();
  record->scope = current_scope(*this);
  record->name = name.empty() ? 0 : intern(name);  // "" (a kernel's, named later): no call
}

}  // namespace lockstep::collectors
