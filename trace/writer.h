// TraceWriter: the shim's side of the format. One per process.
//
// Hot path (append): the calling thread copies the record into a staging batch of its own; no
// shared lock and no system call. A background thread hashes and encodes staged records in
// batches into per-thread blocks, writes full blocks, and flushes every flush_interval_ms,
// after each end_step and at close, so a killed job leaves a trace readable up to shortly
// before death. Block memory is bounded by memory_budget (staging batches are not counted: a
// thread holds at most 64 waiting plus 4 spare batches of 128 records); when the disk cannot
// keep up, records are dropped and counted (stats().dropped) rather than block the job.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "trace/record.h"
#include "trace/staging.h"

namespace lockstep::trace {

struct WriterOptions {
  std::string path;                  // the .lstrace file; created with O_EXCL
  size_t memory_budget = 64u << 20;  // all thread buffers + queued blocks
  size_t block_bytes = 256u << 10;   // a thread buffer is handed off when this full
  int flush_interval_ms = 200;
  // Commit a staged record that does not fill its batch without a lock, where the process can
  // issue a process-wide barrier at close (writer.cpp, top). false: every commit locks (tests
  // run both ways).
  bool lock_free_commit = true;

  // The writer's file system calls: the real ones unless a test injects failures
  // (tests/cpu/trace/write_faults_test.cpp). They are called from the background thread, open,
  // close and seal_after_signal, so a replacement must be async-signal-safe too.
  std::function<ssize_t(int fd, const iovec* parts, int count, off_t offset)> pwritev;
  std::function<int(int fd, off_t length)> ftruncate;

  // Told once, in one line, when a write fails (disk full, I/O error...): the trace will lack
  // blocks and its End block will not be clean; the job goes on. Called on the writer's
  // background thread (or close's). Empty: the line goes to stderr.
  std::function<void(const std::string& line)> on_error;
};

// Warning record codes the writer itself emits (fields::Warning::code). Codes below 100 are the
// trace library's; collectors use 100 and up.
inline constexpr uint64_t kWarningRecordsDropped = 1;  // count = records dropped since last one

struct WriterStats {
  uint64_t appended = 0;  // records encoded into blocks (accepted ones still staged: not yet)
  uint64_t dropped = 0;   // records refused for lack of memory or disk
  uint64_t blocks_written = 0;
  uint64_t bytes_written = 0;  // file bytes, header included
  uint64_t write_errors = 0;   // failed write() calls (disk full, ...)
};

class TraceWriter {
 public:
  // header: the JSON header (header.h builds it). Returns nullptr and sets *error on failure
  // (existing file, unwritable directory, ...).
  static std::unique_ptr<TraceWriter> open(const WriterOptions& options,
                                           const nlohmann::json& header, std::string* error);
  virtual ~TraceWriter() = default;
  TraceWriter() = default;
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // append() without the copy, for the hottest records (a kernel launch at level broad,
  // collectors/kernels.cpp): the caller builds the record in this thread's next staging slot.
  // stage() returns that slot or nullptr where append() would refuse (closed, no memory). The
  // slot holds a stale record: set the kind, the header and the kind's fields (fields past the
  // kind's count are neither hashed nor encoded: free for a name resolver's keys); its buffers
  // and payload are already empty. commit_staged() appends it; between the two this thread
  // appends nothing else. The ticket names the record for retract(), which takes it back if it
  // is not encoded yet (a launch that failed) and returns whether it did; a null ticket
  // (refused at commit: closed meanwhile) retracts nothing and returns true.
  //
  // Given `slot`, the calling thread's view of its staging in this writer, which the caller
  // keeps in a thread-local line it reads on every call anyway (collectors/hot_thread.h), the
  // common case of both is inline in the caller (below; trace/staging.h): no call, no read of the
  // writer's vtable or of a thread-local of the writer's (its TLS offset in the GOT, its line).
  // The slot by value, two registers: a reference to a thread-local needs the thread's linear
  // address, a read of its control block's line. thread_slot() fills one; a slot is this
  // writer's while its `writer` is uid(), another writer's (a forked child's new one) is
  // looked up again on every call.
  struct Staged {  // two words: returned in registers
    const void* batch = nullptr;
    uint32_t index = 0;
    uint32_t seq = 0;  // the record's seq, low half (the slot may hold another record later)
  };
  struct ThreadSlot {
    uint64_t writer = 0;            // the writer's uid() (0: none)
    StagingView* view = nullptr;  // this thread's staging in that writer
  };
  Record* stage(ThreadSlot slot);
  Staged commit_staged(ThreadSlot slot);
  virtual ThreadSlot thread_slot() = 0;
  virtual Record* stage() = 0;
  virtual Staged commit_staged() = 0;
  virtual bool retract(const Staged& ticket) = 0;
  // Unique in the process (never reused), in the object's first line beside its vtable pointer.
  uint64_t uid() const { return uid_; }

  // Thread-safe. Returns the same id for the same bytes. The definition reaches the file before
  // any block that references the id.
  virtual StringId intern(std::string_view text) = 0;

  // Thread-safe. Returns the same id for the same (parent, name) (ScopeTable); the Scope record
  // defining it reaches the file before any block whose records carry the id. `name` must be an
  // id intern() returned. Call once per new range stack, not per record.
  virtual ScopeId intern_scope(ScopeId parent, StringId name) = 0;

  // Thread-safe, lock-free on the fast path. The record's step feeds that step's summary digest.
  // Returns false if the record was refused (counted as dropped): writer closed, or no block
  // memory at all. An accepted record is encoded later; if no block memory is left by then it
  // is dropped and counted too (stats().appended counts the records encoded).
  virtual bool append(const Record& record) = 0;

  // Gives a record appended with name == kDeferredName its name, on whichever thread encodes it
  // (usually the background thread), before it is hashed: the launching thread need not look a
  // kernel's name up. It may also complete the record's fields of its kind from what the stager
  // left for it (a cuBLASLt GEMM: copies of its objects, named in a field past the kind's own,
  // collectors/lt_copies.h). Set once, before any such record; a record the resolver cannot name
  // gets 0 (""). Called under that thread's encoding lock: it must not append.
  using NameResolver = std::function<StringId(Record& record)>;
  virtual void set_name_resolver(NameResolver resolver) = 0;

  // Encodes, on the calling thread, every record any thread has committed so far (it waits for a
  // drain in progress), so that each one with kDeferredName is named now: before the code it
  // names is unloaded and the resolver's lookup could no longer answer (or would answer for other
  // code at the same handle). Safe from any thread that holds no staged record open. Writes
  // nothing to the file.
  virtual void resolve_deferred() = 0;

  // The step `step` is finished: the background thread writes its StepSummary (count and
  // digest of its records) and flushes; the caller does not wait. Call once per step, in
  // increasing order.
  virtual void end_step(uint32_t step) = 0;

  // Write everything appended so far (blocks until written). Safe from any thread.
  virtual void flush() = 0;

  // Summarize the current step, flush, stop the background thread, write the End block
  // (format.h) as the file's last block, and close the file. Idempotent. Called from atexit in
  // the shim (reason "exit") and before an exec (reason "exec"); `reason` is cut to
  // kMaxEndReason bytes. The End block is clean when no write failed.
  void close() { close("exit"); }
  virtual void close(std::string_view reason) = 0;

  // Async-signal-safe, best effort, for the fatal signals the shim catches (SIGTERM, SIGINT,
  // SIGSEGV...): writes an End block (clean = 0, reason "signal N") unless another thread is
  // writing to the file at that moment, in which case it does nothing and the trace reads as a
  // readable prefix. Never blocks, allocates or takes a lock; records still in memory are not
  // written (the End block's counts say what the writer had taken). If the process lives on
  // (the job handled the signal), the next write takes the End block off again and close()
  // writes the real one. Does nothing after close() or abandon_after_fork().
  virtual void seal_after_signal(int signo) noexcept = 0;

  // After fork(), in the child: forget the parent's file and thread without touching them.
  virtual void abandon_after_fork() = 0;

  virtual WriterStats stats() const = 0;

 protected:
  // The exits of stage(slot) and commit_staged(slot) (below), out of line in the writer: the
  // calling thread's view where the slot is not this writer's (null: refused); block memory
  // asked for again (false: none); the next batch where the view has none; the commit under the
  // lock (the batch's last slot, or no process barrier); a lock-free commit that found the writer
  // closing.
  virtual StagingView* thread_view() = 0;
  virtual bool staging_memory(StagingView& view) = 0;
  virtual StagedBatch* next_staging_batch(StagingView& view) = 0;
  virtual Staged commit_locked(StagingView& view, StagedBatch* batch, uint32_t index,
                               const Staged& ticket) = 0;
  virtual Staged commit_closing(StagingView& view, const Staged& ticket) = 0;

  // `slot`'s view where it is this writer's, else the calling thread's found the slow way.
  StagingView* view_of(ThreadSlot slot) { return slot.writer == uid_ ? slot.view : thread_view(); }

  // What stage(slot) and commit_staged(slot) read of the writer, after the vtable pointer in the
  // object's first line. accepting_: false from close() (or a fork's abandon) on;
  // lock_free_commit_: commit without the stage lock (trace/writer.cpp, top of the file).
  std::atomic<bool> accepting_{true};
  bool lock_free_commit_ = false;

 private:
  static uint64_t next_uid();
  const uint64_t uid_ = next_uid();
};

inline Record* TraceWriter::stage(ThreadSlot slot) {
  if (!accepting_.load(std::memory_order_relaxed)) [[unlikely]]
    return nullptr;
  StagingView* view = view_of(slot);
  if (view == nullptr) [[unlikely]]
    return nullptr;
  if (view->out_of_memory.load(std::memory_order_relaxed) && !staging_memory(*view)) [[unlikely]]
    return nullptr;
  // No lock: the slot is where the owner's view says, which a drain never reads past and never
  // frees.
  StagedBatch* batch = view->next_batch;
  if (batch == nullptr) [[unlikely]]
    batch = next_staging_batch(*view);
  view->staged_batch = batch;
  view->staged_index = view->next_index;
  return &batch->records[view->next_index];  // its buffers and payload are empty (the drain's)
}

inline TraceWriter::Staged TraceWriter::commit_staged(ThreadSlot slot) {
  StagingView* view = view_of(slot);
  if (view == nullptr || view->staged_batch == nullptr) [[unlikely]]
    return {};
  StagedBatch* batch = view->staged_batch;  // the filling batch: only the owner changes that
  const uint32_t index = view->staged_index;
  view->staged_batch = nullptr;
  const Staged ticket{batch, index, static_cast<uint32_t>(batch->records[index].seq)};
  if (lock_free_commit_ && index + 1 < kBatchRecords) [[likely]] {
    batch->count.store(index + 1, std::memory_order_release);
    view->next_index = index + 1;
    prefetch_for_write(&batch->records[index + 1]);
    // The store above, then this load: close() makes every thread pass a full barrier between
    // its store of `accepting_` and its freeze, so a commit that still reads true is frozen in.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (!accepting_.load(std::memory_order_relaxed)) [[unlikely]]
      return commit_closing(*view, ticket);
    return ticket;
  }
  return commit_locked(*view, batch, index, ticket);
}

// Digest contribution of one record to its step summary. Independent of seq, thread, string ids
// and allocation ordinals, so two identical runs give identical step digests even when threads
// interleave differently. `name` is the text of record.name and buffer_labels[i] the text of
// record.buffers[i].label. A step's digest is the wrapping sum of its records' hashes.
uint64_t record_content_hash(const Record& record, std::string_view name,
                             const std::vector<std::string_view>& buffer_labels);

}  // namespace lockstep::trace
