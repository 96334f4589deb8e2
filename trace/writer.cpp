// TraceWriter implementation. See writer.h for the contract.
//
// Threads: every appending thread owns a ThreadBuffer (found through a thread_local cache). An
// append only copies the record into the thread's staging batch under a per-thread spinlock
// (a staged record, writer.h: stage/commit_staged, is committed with no lock at all: below);
// hashing and encoding (a few hundred ns per record in a job whose own work keeps evicting our
// code and tables from the CPU caches) happen later in batches, on the background thread: it
// drains a thread's staged batches into the thread's Block under the thread's encode mutex,
// when asked (every kWakeBatches full batches), at each flush, at end_step and at close. The
// owner drains its own batches only when kMaxFullBatches wait (the background thread cannot keep
// up).
// A full block goes to the write queue under a mutex: once per block_bytes.
//
// A batch's records [0, count) are committed: the owner writes a slot, then stores count+1 with
// release; a drain reads count with acquire and encodes the committed records it has not
// reserved yet (StagedBatch::reserved), leaving the batch with its owner until it is full. So a
// commit that does not fill its batch takes no lock: a locked instruction there waits for the
// record's own stores to reach the cache (issue #34: 50-60 ns of a launch's ~150 at broad). What
// the lock gave, close() gets another way: it stops accepting, then makes every thread pass a
// full barrier (membarrier), then freezes each thread's committed count under its stage lock.
// A commit that still saw the writer accepting was stored before that barrier and is in the
// final drain; one that saw it closing checks the frozen count and counts itself dropped if it
// came too late. Without membarrier (an old kernel, a seccomp filter) every commit locks.
//
// Lock order: encode_mutex -> stage_lock -> queue_mutex / pool_mutex.
//
// The file: whoever writes to it owns it through file_state (an atomic, not a mutex, so that a
// signal handler can try to take it without blocking): the background thread, open (before the
// thread starts), close (after it stopped), and seal_after_signal when the file is free. Every
// write is a whole block, or is cut off again, so a free file ends at a block boundary.
#include <fcntl.h>
#include <linux/membarrier.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "trace/block_frame.h"
#include "trace/digest.h"
#include "trace/encoding.h"
#include "trace/format.h"
#include "trace/scope_table.h"
#include "trace/step_index.h"
#include "trace/string_table.h"
#include "trace/writer.h"
#include "common/hot.h"

namespace lockstep::trace {
namespace {

using Clock = std::chrono::steady_clock;

inline constexpr uint64_t kNoJobStep = UINT64_MAX;

struct StepTotal {
  uint32_t step;
  uint64_t count;
  uint64_t digest;
  uint64_t job_step = kNoJobStep;  // from the step's numbered StepMarker record, if any
};

struct Block {
  BlockType type = BlockType::Records;
  std::unique_ptr<uint8_t[]> data;
  size_t capacity = 0;
  size_t used = 0;
  uint32_t count = 0;
  uint32_t min_step = 0, max_step = 0;
  uint64_t first_seq = 0;
  bool budgeted = false;  // counted against memory_budget (thread blocks), returned on release
  std::vector<StepTotal> totals;  // a Summary block's, for the step index once it is written
};

class SpinLock {
 public:
  void lock() {
    while (flag_.exchange(true, std::memory_order_acquire)) {
      while (flag_.load(std::memory_order_relaxed)) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
      }
    }
  }
  void unlock() { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

// Full batches that wake the background thread. A wake is a futex call on the job's thread (and
// a sleeping core to rouse): one per 2048 records, not per 128. Step ends, the flush timer and
// close drain whatever is staged anyway.
inline constexpr size_t kWakeBatches = 16;
inline constexpr size_t kMaxFullBatches = 64;  // a backlog the owner drains itself
// Drained batches kept for reuse. Not more: kept, a batch's lines are in the drain's core when the
// owner writes them again, where a new one is cleared on the owner's; sixteen (a PyTorch step's
// seven batches all reused) measured no faster on the H200 and slower in a flood on this machine's
// CPU (results/overhead/2026-12-04T00*-fe1af8f-*).
inline constexpr size_t kSpareBatches = 4;

// Whether this process can make every one of its threads pass a full memory barrier
// (membarrier's private expedited command, Linux 4.14; registered once): close()'s half of the
// lock-free commit (top of this file).
bool process_barrier_available() {
  static const bool registered =
      syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  return registered;
}
bool process_barrier() {
  return syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
}

// The owner's view first (StagingView, trace/staging.h: its first line; `filling` is the batch
// the view's next_batch names, or none).
struct ThreadBuffer : StagingView {
  // Staging, guarded by stage_lock (the owner, and a drainer taking full batches).
  alignas(64) SpinLock stage_lock;
  std::unique_ptr<StagedBatch> filling;
  std::vector<std::unique_ptr<StagedBatch>> full;   // oldest first
  std::vector<std::unique_ptr<StagedBatch>> spare;  // drained, ready for reuse
  // Set by close() after its barrier: drains read `frozen_batch` up to `frozen_count` and no
  // other filling batch; a later commit there is dropped.
  bool frozen = false;
  const StagedBatch* frozen_batch = nullptr;
  uint32_t frozen_count = 0;
  // Encoding, guarded by encode_mutex (drainers: background thread, close, an owner whose
  // staging is full).
  alignas(64) std::mutex encode_mutex;
  std::unique_ptr<Block> block;
  RecordEncoder encoder;
  std::vector<StepTotal> steps;            // digests of steps not summarized yet; usually one entry
  // appended: records encoded (written under encode_mutex); dropped: refused or lost.
  std::atomic<uint64_t> appended{0}, dropped{0};
  uint32_t ordinal = 0;
  std::atomic<bool> owner_exited{false};
  std::atomic<bool> writer_closed{false};
};

// The calling thread's buffers, one per writer it appended to (a process has one writer; tests
// have several). The destructor tells the writers that the thread is gone.
struct ThreadSlots {
  std::vector<std::pair<uint64_t, std::shared_ptr<ThreadBuffer>>> slots;
  ~ThreadSlots() {
    for (auto& [uid, buffer] : slots) buffer->owner_exited.store(true, std::memory_order_release);
  }
};
thread_local ThreadSlots tls_slots;
// The buffer this thread used last and its writer's uid, apart from the slots: a thread_local
// with a destructor is reached through its init guard on every access (a call and a line).
// Plain data, constant-initialized: one load. It outlives the slots' destructor at thread exit
// as before (the writer keeps the buffer). A broad launch passes a slot of its own instead
// (TraceWriter::ThreadSlot, kept in collectors/hot_thread.h).
thread_local constinit TraceWriter::ThreadSlot tls_last;


void add_step(std::vector<StepTotal>& steps, uint32_t step, uint64_t count, uint64_t digest,
              uint64_t job_step = kNoJobStep) {
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (it->step == step) {
      it->count += count;
      it->digest += digest;
      if (job_step != kNoJobStep) it->job_step = job_step;
      return;
    }
  }
  steps.push_back({step, count, digest, job_step});
}

// The job's number a record gives its step: a StepMarker that carried one (record_kinds.def).
uint64_t job_step_of(const Record& record) {
  if (record.kind != RecordKind::StepMarker || record.fields[fields::StepMarker::numbered] == 0)
    return kNoJobStep;
  return record.fields[fields::StepMarker::job_step];
}

class Writer final : public TraceWriter {
 public:
  Writer(const WriterOptions& options, int fd) : options_(options), fd_(fd) {
    options_.block_bytes = std::clamp<size_t>(options_.block_bytes, 4096, kMaxBlockPayload);
    if (options_.flush_interval_ms <= 0) options_.flush_interval_ms = 200;
    if (!options_.pwritev) options_.pwritev = ::pwritev;
    if (!options_.ftruncate) options_.ftruncate = ::ftruncate;
    lock_free_commit_ = options_.lock_free_commit && process_barrier_available();
  }
  ~Writer() override {
    if (abandoned_.load()) {
      // After fork: the parent's mutexes and thread may be in any state; touch nothing.
      (void)state_.release();
      return;
    }
    close("exit");
  }

  bool write_file_header(const nlohmann::json& header, std::string* error) {
    const std::string json = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    FileHeader file{};
    std::memcpy(file.magic, kFileMagic, sizeof(kFileMagic));
    file.format_version = kFormatVersion;
    file.json_bytes = static_cast<uint32_t>(json.size());
    file.json_checksum = XXH64(json.data(), json.size(), 0);
    std::string bytes(reinterpret_cast<const char*>(&file), sizeof(file));
    bytes += json;
    int write_errno = 0;
    if (!write_at(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), nullptr, 0,
                  /*report=*/false, &write_errno)) {
      if (error)
        *error = options_.path + ": cannot write the trace header: " + std::strerror(write_errno);
      return false;
    }
    header_written_ = true;
    return true;
  }

  void start() {
    state_->thread = std::thread([this] { background_loop(); });
  }

  StringId intern(std::string_view text) override { return state_->strings.intern(text); }
  ScopeId intern_scope(ScopeId parent, StringId name) override {
    return state_->scopes.intern(parent, name);
  }

  LOCKSTEP_HOT bool append(const Record& record) override {
    State& s = *state_;
    const int count = fast_field_count(record.kind);
    if (count == 0 || writers_own_kind(record.kind) ||
        !accepting_.load(std::memory_order_relaxed)) {
      s.rejected.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    ThreadBuffer* tb = thread_buffer();
    if (!tb) {
      s.rejected.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (tb->out_of_memory.load(std::memory_order_relaxed) && !retry_memory(*tb)) {
      tb->dropped.fetch_add(1, std::memory_order_relaxed);
      s.dropped_all.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    bool wake = false;
    size_t backlog = 0;  // full batches waiting
    tb->stage_lock.lock();
    if (!accepting_.load(std::memory_order_relaxed)) {
      tb->stage_lock.unlock();
      tb->dropped.fetch_add(1, std::memory_order_relaxed);
      s.dropped_all.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    StagedBatch* batch = tb->filling.get();
    if (batch == nullptr) batch = (tb->filling = take_spare(*tb)).get();
    const uint32_t index = batch->count.load(std::memory_order_relaxed);
    batch->records[index].copy_from(record);
    batch->count.store(index + 1, std::memory_order_release);
    published_locked(*tb, batch, &backlog, &wake);
    tb->stage_lock.unlock();
    after_publish(*tb, backlog, wake);
    return true;
  }

  Record* stage() override { return TraceWriter::stage(tls_last); }
  Staged commit_staged() override { return TraceWriter::commit_staged(tls_last); }
  ThreadSlot thread_slot() override {
    ThreadBuffer* tb = thread_buffer();
    return tb != nullptr ? ThreadSlot{uid(), tb} : ThreadSlot{};
  }

 protected:
  StagingView* thread_view() override { return thread_buffer(); }
  bool staging_memory(StagingView& view) override {
    return retry_memory(static_cast<ThreadBuffer&>(view));
  }

  // stage()'s batch when the owner's view has none (the first stage, or the last one filled a
  // batch): out of stage()'s lines, which a launch reads cold.
  StagedBatch* next_staging_batch(StagingView& view) override {
    ThreadBuffer& tb = static_cast<ThreadBuffer&>(view);
    tb.stage_lock.lock();
    StagedBatch* batch = tb.filling.get();
    if (batch == nullptr) batch = (tb.filling = take_spare(tb)).get();
    tb.next_batch = batch;
    tb.next_index = batch->count.load(std::memory_order_relaxed);
    tb.stage_lock.unlock();
    return batch;
  }

  // commit_staged() of a batch's last slot (it joins the full ones), or with no process barrier:
  // under the lock, out of the lock-free commit's lines.
  Staged commit_locked(StagingView& view, StagedBatch* batch, uint32_t index,
                       const Staged& ticket) override {
    ThreadBuffer& tb = static_cast<ThreadBuffer&>(view);
    State& s = *state_;
    bool wake = false;
    size_t backlog = 0;
    tb.stage_lock.lock();
    if (!accepting_.load(std::memory_order_relaxed)) {
      tb.stage_lock.unlock();
      tb.dropped.fetch_add(1, std::memory_order_relaxed);
      s.dropped_all.fetch_add(1, std::memory_order_relaxed);
      return {};
    }
    batch->count.store(index + 1, std::memory_order_release);
    published_locked(tb, batch, &backlog, &wake);
    tb.stage_lock.unlock();
    after_publish(tb, backlog, wake);
    return ticket;
  }

  // A lock-free commit that found the writer closing: kept if close() froze this thread's count
  // after it (or has not frozen it yet: it will count it), else dropped and counted.
  Staged commit_closing(StagingView& view, const Staged& ticket) override {
    ThreadBuffer& tb = static_cast<ThreadBuffer&>(view);
    tb.stage_lock.lock();
    const bool lost =
        tb.frozen && (ticket.batch != tb.frozen_batch || ticket.index >= tb.frozen_count);
    tb.stage_lock.unlock();
    if (!lost) return ticket;
    tb.dropped.fetch_add(1, std::memory_order_relaxed);
    state_->dropped_all.fetch_add(1, std::memory_order_relaxed);
    return {};
  }

 public:
  bool retract(const Staged& ticket) override {
    if (ticket.batch == nullptr) return true;
    ThreadBuffer* tb = thread_buffer();
    if (!tb) return false;
    // Still staged and not reserved by a drain: in `filling` or `full`, the same record by its
    // seq (a drained batch may be filling again with other records). The pointer is only compared.
    bool taken_back = false;
    tb->stage_lock.lock();
    StagedBatch* batch = nullptr;
    if (tb->filling.get() == ticket.batch) batch = tb->filling.get();
    for (auto& full : tb->full)
      if (full.get() == ticket.batch) batch = full.get();
    if (batch != nullptr && ticket.index >= batch->reserved &&
        ticket.index < batch->count.load(std::memory_order_relaxed) &&
        static_cast<uint32_t>(batch->records[ticket.index].seq) == ticket.seq) {
      batch->retracted[ticket.index / 64].fetch_or(uint64_t{1} << (ticket.index % 64),
                                                   std::memory_order_relaxed);
      taken_back = true;
    }
    tb->stage_lock.unlock();
    return taken_back;
  }

  // Read by drains only for records carrying kDeferredName, which come after this call.
  void set_name_resolver(NameResolver resolver) override { name_resolver_ = std::move(resolver); }

  // The background thread's sweep, here on the caller's: its first pass takes every record
  // committed before the call; later arrivals are bounded by its sweep limit.
  void resolve_deferred() override {
    if (abandoned_.load() || closed_.load()) return;
    drain_all();
  }

  void end_step(uint32_t step) override {
    if (abandoned_.load() || closed_.load()) return;
    // The background thread drains, summarizes and writes; the job does not wait for it.
    State& s = *state_;
    {
      std::lock_guard lock(s.queue_mutex);
      if (s.stopped) return;
      s.steps_to_end.push_back(step);
    }
    s.wake.notify_one();
  }

  void flush() override {
    if (abandoned_.load() || closed_.load()) return;
    request_flush(std::chrono::milliseconds(10000));
  }

  using TraceWriter::close;
  void close(std::string_view reason) override {
    if (abandoned_.load() || closed_.exchange(true)) return;
    State& s = *state_;
    accepting_.store(false);
    // Every in-flight append finishes (or sees accepting == false) before the last cycle; every
    // lock-free commit is in the frozen count or finds itself out of it (top of this file).
    // (Registered at open, the barrier does not fail; if it did, a pause stands in for it.)
    if (lock_free_commit_ && !process_barrier())
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    {
      std::lock_guard registry(s.registry_mutex);
      for (auto& tb : s.threads) {
        tb->stage_lock.lock();
        tb->frozen = true;
        tb->frozen_batch = tb->filling.get();
        tb->frozen_count = tb->filling ? tb->filling->count.load(std::memory_order_acquire) : 0;
        tb->stage_lock.unlock();
      }
    }
    {
      std::lock_guard lock(s.queue_mutex);
      s.stop = true;  // the last cycle summarizes every step left and writes everything
    }
    s.wake.notify_all();
    if (s.thread.joinable()) s.thread.join();
    if (!unwritten_strings_.empty() || !unwritten_scopes_.empty()) {
      // the last cycle failed to write some definitions
      std::vector<std::unique_ptr<Block>> none;
      write_cycle(none);
    }
    // The step index, then the End block pointing at it (format.h): only for a file every
    // write reached, so that the index lists exactly the blocks before it.
    uint64_t index_offset = 0;
    if (header_written_ && !broken_ && s.write_errors.load() == 0) index_offset = write_index();
    // The End block last, after the final flush above: only a file that has one was finished.
    if (header_written_ && take_file()) {
      if (!broken_) {
        const bool clean = s.write_errors.load() == 0;
        EndBlock end;
        const size_t bytes =
            make_end_block(end, clean, reason.data(), reason.size(), index_offset);
        write_taken(end.bytes, bytes, nullptr, 0, /*report=*/true, nullptr);
      }
      s.file_state.store(kFileClosed, std::memory_order_release);
    }
    ::close(fd_);
    fd_ = -1;
    std::lock_guard registry(s.registry_mutex);
    for (auto& tb : s.threads) {
      std::lock_guard encoding(tb->encode_mutex);
      tb->block.reset();
      tb->writer_closed.store(true, std::memory_order_release);
    }
  }

  void seal_after_signal(int signo) noexcept override {
    if (abandoned_.load() || !header_written_) return;
    struct KeepErrno {  // a signal handler must leave errno as the interrupted code had it
      int saved = errno;
      ~KeepErrno() { errno = saved; }
    } keep_errno;
    State& s = *state_;
    int expected = kFileFree;
    // Never waits: if the background thread (or close) is writing, its block would interleave
    // with ours, so the trace stays a readable prefix instead.
    if (!s.file_state.compare_exchange_strong(expected, kFileWriting, std::memory_order_acquire))
      return;
    if (broken_) {
      s.file_state.store(kFileFree, std::memory_order_release);
      return;
    }
    char reason[32] = "signal ";
    size_t length = 7;
    char digits[12];
    size_t count = 0;
    unsigned value = signo < 0 ? 0u : static_cast<unsigned>(signo);
    do digits[count++] = static_cast<char>('0' + value % 10);
    while ((value /= 10) && count < 10);
    while (count) reason[length++] = digits[--count];
    EndBlock end;
    const size_t bytes = make_end_block(end, /*clean=*/false, reason, length);
    int error = 0;
    if (write_all(end.bytes, bytes, nullptr, 0, &error)) {
      s.file_state.store(kFileSealed, std::memory_order_release);
      return;
    }
    // A partial End block reads as a cut-off tail; take it off for a later writer if we can.
    if (options_.ftruncate(fd_, static_cast<off_t>(file_offset_)) != 0) broken_ = true;
    s.file_state.store(kFileFree, std::memory_order_release);
  }

  void abandon_after_fork() override {
    if (abandoned_.exchange(true)) return;
    State& s = *state_;
    accepting_.store(false);
    // The thread object refers to a thread that does not exist in this process: never join it.
    new std::thread(std::move(s.thread));
    if (fd_ >= 0) ::close(fd_);  // our copy of the descriptor only; the parent's file is untouched
    fd_ = -1;
  }

  WriterStats stats() const override {
    const State& s = *state_;
    WriterStats out;
    if (abandoned_.load()) return out;  // the parent's locks may be held forever in this process
    {
      std::lock_guard registry(s.registry_mutex);
      for (const auto& tb : s.threads) {
        out.appended += tb->appended.load(std::memory_order_relaxed);
        out.dropped += tb->dropped.load(std::memory_order_relaxed);
      }
      out.appended += s.retired_appended;
      out.dropped += s.retired_dropped;
    }
    out.dropped += s.rejected.load(std::memory_order_relaxed);
    out.blocks_written = s.blocks_written.load(std::memory_order_relaxed);
    out.bytes_written = s.bytes_written.load(std::memory_order_relaxed);
    out.write_errors = s.write_errors.load(std::memory_order_relaxed);
    return out;
  }

 private:
  // file_state: the file is free, being written (by its one owner), ends with an End block a
  // signal handler wrote (the next write takes it off), or closed for good.
  static constexpr int kFileFree = 0, kFileWriting = 1, kFileSealed = 2, kFileClosed = 3;

  struct State {
    StringTable strings;
    ScopeTable scopes;
    std::atomic<uint64_t> rejected{0};  // bad kind, or no thread buffer

    mutable std::mutex registry_mutex;
    std::vector<std::shared_ptr<ThreadBuffer>> threads;
    uint32_t next_thread_ordinal = 1;
    uint64_t retired_appended = 0, retired_dropped = 0;

    std::mutex pool_mutex;
    std::vector<std::unique_ptr<Block>> pool;  // free thread blocks of block_bytes capacity
    size_t memory_in_use = 0;                  // capacity of all budgeted blocks

    std::mutex queue_mutex;
    std::condition_variable wake, flushed;
    std::vector<std::unique_ptr<Block>> queue;  // full blocks and summaries, in handoff order
    uint64_t flush_requested = 0, flush_done = 0;
    std::vector<uint32_t> steps_to_end;  // end_step calls the background thread has not done
    bool drain_requested = false;        // some thread has kWakeBatches batches staged
    bool stop = false, stopped = false;

    std::atomic<uint64_t> blocks_written{0}, bytes_written{0}, write_errors{0};
    uint64_t dropped_reported = 0;  // background thread only

    // What the End block says, kept in plain atomics so that a signal handler can read them
    // (stats() takes the registry mutex).
    std::atomic<uint64_t> appended_all{0};      // records encoded, every thread
    std::atomic<uint64_t> dropped_all{0};       // records dropped by threads (rejected: above)
    std::atomic<uint64_t> warnings_written{0};  // the writer's own drop Warning records
    std::atomic<uint64_t> summary_records{0};   // StepSummary records queued
    std::atomic<uint32_t> last_step{0};         // highest step summarized
    std::atomic<int> file_state{kFileFree};     // who may write the file (top of this file)
    std::atomic<bool> error_reported{false};    // on_error was called
    std::thread thread;
  };

  // Writers of `counter` are serialized (encode_mutex): a plain add, not a locked one.
  static void bump(std::atomic<uint64_t>& counter, uint64_t n = 1) {
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  // Caller holds tb.stage_lock, and just added a record to `batch` (tb.filling), on the owner's
  // thread: a full batch joins the queue (wake: it is the kWakeBatches-th waiting), else the
  // next slot is prefetched; the owner's view follows.
  static void published_locked(ThreadBuffer& tb, StagedBatch* batch, size_t* backlog, bool* wake) {
    const uint32_t count = batch->count.load(std::memory_order_relaxed);
    if (count == kBatchRecords) {
      tb.full.push_back(std::move(tb.filling));
      *backlog = tb.full.size();
      *wake = *backlog == kWakeBatches;
      tb.next_batch = nullptr;
    } else {
      prefetch_for_write(&batch->records[count]);
      tb.next_batch = batch;
      tb.next_index = count;
    }
  }

  // After the stage lock is released: drain (the background thread cannot keep up: a tight loop,
  // or a starved core; the owner takes its turn, which bounds staging memory and slows the flood
  // to the encoding rate) or wake the background thread.
  void after_publish(ThreadBuffer& tb, size_t backlog, bool wake) {
    State& s = *state_;
    if (backlog >= kMaxFullBatches) {
      std::lock_guard encoding(tb.encode_mutex);
      drain_locked(tb);
    } else if (wake) {
      {
        std::lock_guard lock(s.queue_mutex);
        s.drain_requested = true;
      }
      s.wake.notify_one();
    }
  }

  // Caller holds tb.stage_lock.
  static std::unique_ptr<StagedBatch> take_spare(ThreadBuffer& tb) {
    if (tb.spare.empty()) return std::make_unique<StagedBatch>();
    auto batch = std::move(tb.spare.back());
    tb.spare.pop_back();
    return batch;
  }

  // An append found the thread without a block: try once more for one (memory may have been
  // released since), so that a budget too small for any block refuses records at once.
  // An append never waits on a drain (wait: a thread's first block, once).
  bool retry_memory(ThreadBuffer& tb, bool wait = false) {
    std::unique_lock encoding(tb.encode_mutex, std::defer_lock);
    if (wait)
      encoding.lock();
    else if (!encoding.try_lock())
      return false;
    if (!accepting_.load(std::memory_order_relaxed)) return false;
    if (!tb.block) tb.block = acquire_block(options_.block_bytes);
    tb.out_of_memory.store(!tb.block, std::memory_order_relaxed);
    return tb.block != nullptr;
  }

  // Caller holds tb.encode_mutex. Hashes and encodes every record the thread has committed, in
  // order, into its block; records that find no memory are dropped and counted. Full batches
  // are taken (then kept as spares or freed); the filling one stays with its owner, read up to its
  // committed count. Returns whether full batches arrived meanwhile.
  bool drain_locked(ThreadBuffer& tb) {
    std::vector<std::unique_ptr<StagedBatch>> batches;
    std::vector<uint32_t> starts;  // per full batch: its first record not reserved
    starts.reserve(kMaxFullBatches + 1);
    tb.stage_lock.lock();
    batches.swap(tb.full);
    for (auto& batch : batches) {
      starts.push_back(batch->reserved);
      batch->reserved = kBatchRecords;
    }
    StagedBatch* filling = tb.filling.get();
    uint32_t from = 0, to = 0;
    if (filling != nullptr) {
      from = filling->reserved;
      to = filling->count.load(std::memory_order_acquire);
      if (tb.frozen) to = filling == tb.frozen_batch ? std::min(to, tb.frozen_count) : from;
      to = std::max(from, to);
      filling->reserved = to;
    }
    tb.stage_lock.unlock();
    if (batches.empty() && from == to) return false;
    uint64_t encoded = 0, lost = 0;
    auto encode_range = [&](StagedBatch& batch, uint32_t begin, uint32_t end) {
      for (uint32_t i = begin; i < end; ++i) {
        Record& record = batch.records[i];
        if (!batch.is_retracted(i)) {
          if (record.name == kDeferredName)
            record.name = name_resolver_ ? name_resolver_(record) : 0;
          if (encode_locked(tb, record))
            ++encoded;
          else
            ++lost;
        }
        // Slots go back empty: stage() hands one out without touching its vectors' lines.
        record.buffers.clear();
        record.payload.clear();
      }
    };
    for (size_t b = 0; b < batches.size(); ++b) {
      encode_range(*batches[b], starts[b], kBatchRecords);
      batches[b]->reset();
    }
    if (filling != nullptr) encode_range(*filling, from, to);
    bump(tb.appended, encoded);
    state_->appended_all.fetch_add(encoded, std::memory_order_relaxed);
    if (lost) {
      tb.dropped.fetch_add(lost, std::memory_order_relaxed);
      state_->dropped_all.fetch_add(lost, std::memory_order_relaxed);
    }
    tb.stage_lock.lock();
    for (auto& batch : batches)
      if (tb.spare.size() < kSpareBatches) tb.spare.push_back(std::move(batch));
    const bool more = !tb.full.empty();
    tb.stage_lock.unlock();
    return more;
  }

  // Caller holds tb.encode_mutex.
  bool encode_locked(ThreadBuffer& tb, const Record& record) {
    State& s = *state_;
    const size_t need = RecordEncoder::max_encoded_size(record);
    Block* block = tb.block.get();
    if (!block || block->capacity - block->used < need) {
      block = refill(tb, need);
      if (!block && std::this_thread::get_id() == s.thread.get_id()) {
        write_queue();  // the writer's own drain: write what waits, which frees its memory
        block = refill(tb, need);
      }
      tb.out_of_memory.store(block == nullptr, std::memory_order_relaxed);
      if (!block) return false;
    }
    const uint64_t digest = content_hash(record, s.strings.hash(record.name),
                                         [&s](StringId id) { return s.strings.hash(id); });
    if (block->count == 0) {
      tb.encoder.reset();
      block->first_seq = record.seq;
      block->min_step = block->max_step = record.step;
    } else {
      block->first_seq = std::min(block->first_seq, record.seq);
      block->min_step = std::min(block->min_step, record.step);
      block->max_step = std::max(block->max_step, record.step);
    }
    const uint32_t thread = record.thread ? record.thread : tb.ordinal;
    block->used =
        tb.encoder.encode(record, thread, block->data.get() + block->used) - block->data.get();
    ++block->count;
    add_step(tb.steps, record.step, 1, digest, job_step_of(record));
    return true;
  }

  // The miss on its own branch, the hit straight through (written the other way round, GCC laid
  // the hit out after the function's end: a jump out and back, a code line more per call).
  ThreadBuffer* thread_buffer() {
    if (tls_last.writer != uid()) [[unlikely]]
      return thread_buffer_slow();
    return static_cast<ThreadBuffer*>(tls_last.view);
  }

  [[gnu::noinline]] ThreadBuffer* thread_buffer_slow() {
    auto& slots = tls_slots.slots;
    std::erase_if(slots, [](const auto& slot) {
      return slot.second->writer_closed.load(std::memory_order_acquire);
    });
    for (auto& [writer, buffer] : slots) {
      if (writer == uid()) {
        tls_last = {uid(), buffer.get()};
        return buffer.get();
      }
    }
    State& s = *state_;
    auto buffer = std::make_shared<ThreadBuffer>();
    {
      std::lock_guard registry(s.registry_mutex);
      if (!accepting_.load()) return nullptr;
      buffer->ordinal = s.next_thread_ordinal++;
      buffer->steps.reserve(8);
      s.threads.push_back(buffer);
    }
    retry_memory(*buffer,
                 /*wait=*/true);  // the first block now: a budget without room refuses at once
    slots.emplace_back(uid(), buffer);
    tls_last = {uid(), buffer.get()};
    return buffer.get();
  }

  // Caller holds tb.encode_mutex. Hands off the current block and gets one with room for `need` bytes.
  Block* refill(ThreadBuffer& tb, size_t need) {
    State& s = *state_;
    if (tb.block && tb.block->count > 0) {
      {
        std::lock_guard lock(s.queue_mutex);
        s.queue.push_back(std::move(tb.block));
      }
      s.wake.notify_one();
    }
    if (tb.block) release_block(std::move(tb.block));
    tb.block = acquire_block(need);
    return tb.block.get();
  }

  std::unique_ptr<Block> acquire_block(size_t need) {
    State& s = *state_;
    const size_t capacity = std::max(options_.block_bytes, need);
    if (capacity > kMaxBlockPayload) return nullptr;
    std::lock_guard lock(s.pool_mutex);
    if (capacity == options_.block_bytes && !s.pool.empty()) {
      auto block = std::move(s.pool.back());
      s.pool.pop_back();
      return block;
    }
    if (s.memory_in_use + capacity > options_.memory_budget) return nullptr;
    auto block = std::make_unique<Block>();
    block->data.reset(new (std::nothrow) uint8_t[capacity]);
    if (!block->data) return nullptr;
    block->capacity = capacity;
    block->budgeted = true;
    s.memory_in_use += capacity;
    return block;
  }

  void release_block(std::unique_ptr<Block> block) {
    if (!block || !block->budgeted) return;
    State& s = *state_;
    block->used = 0, block->count = 0;
    std::lock_guard lock(s.pool_mutex);
    if (block->capacity == options_.block_bytes && s.pool.size() < kPoolKeep) {
      s.pool.push_back(std::move(block));
    } else {
      s.memory_in_use -= block->capacity;
    }
  }

  // Takes the digests of steps <= `step` (all steps when `all`) from every thread, merged.
  std::vector<StepTotal> collect_steps(uint32_t step, bool all) {
    State& s = *state_;
    std::map<uint32_t, StepTotal> merged;
    std::lock_guard registry(s.registry_mutex);
    for (auto& tb : s.threads) {
      std::lock_guard encoding(tb->encode_mutex);
      drain_locked(*tb);
      auto keep = tb->steps.begin();
      for (auto it = tb->steps.begin(); it != tb->steps.end(); ++it) {
        if (all || it->step <= step) {
          auto [slot, fresh] = merged.try_emplace(it->step, StepTotal{it->step, 0, 0});
          slot->second.count += it->count;
          slot->second.digest += it->digest;
          if (it->job_step != kNoJobStep) slot->second.job_step = it->job_step;
        } else {
          *keep++ = *it;
        }
      }
      tb->steps.erase(keep, tb->steps.end());
    }
    std::vector<StepTotal> out;
    for (auto& [key, total] : merged) out.push_back(total);
    return out;
  }

  void enqueue_summary(std::vector<StepTotal> totals) {
    std::sort(totals.begin(), totals.end(), [](auto& a, auto& b) { return a.step < b.step; });
    auto block = std::make_unique<Block>();
    block->type = BlockType::Summary;
    Record record;
    record.kind = RecordKind::StepSummary;
    block->capacity = totals.size() * RecordEncoder::max_encoded_size(record);
    block->data.reset(new uint8_t[block->capacity]);
    auto encoder = std::make_unique<RecordEncoder>();  // 40 KiB of delta state: not on the stack
    uint8_t* out = block->data.get();
    for (const StepTotal& total : totals) {
      record.step = total.step;
      record.fields[fields::StepSummary::summarized_step] = total.step;
      record.fields[fields::StepSummary::record_count] = total.count;
      record.fields[fields::StepSummary::digest] = total.digest;
      const bool numbered = total.job_step != kNoJobStep;
      record.fields[fields::StepSummary::job_step] = numbered ? total.job_step : 0;
      record.fields[fields::StepSummary::numbered] = numbered ? 1 : 0;
      out = encoder->encode(record, 0, out);
    }
    block->used = out - block->data.get();
    block->count = static_cast<uint32_t>(totals.size());
    block->totals = totals;
    block->min_step = totals.front().step;
    block->max_step = totals.back().step;
    State& s = *state_;
    s.summary_records.fetch_add(totals.size(), std::memory_order_relaxed);
    if (totals.back().step > s.last_step.load(std::memory_order_relaxed))
      s.last_step.store(totals.back().step, std::memory_order_relaxed);  // background thread only
    {
      std::lock_guard lock(s.queue_mutex);
      s.queue.push_back(std::move(block));
    }
    s.wake.notify_one();
  }

  // Asks the background thread for a write cycle that takes every thread's partial block, and
  // waits for it at most `limit`: the job is never held up long by a slow disk.
  void request_flush(std::chrono::milliseconds limit) {
    State& s = *state_;
    std::unique_lock lock(s.queue_mutex);
    if (s.stopped) return;
    const uint64_t ticket = ++s.flush_requested;
    s.wake.notify_one();
    s.flushed.wait_for(lock, limit, [&] { return s.flush_done >= ticket || s.stopped; });
  }

  void background_loop() {
    State& s = *state_;
    const auto interval = std::chrono::milliseconds(options_.flush_interval_ms);
    auto next_flush = Clock::now() + interval;
    for (;;) {
      bool flush = false, stop = false, drain = false;
      uint64_t ticket = 0;
      std::vector<uint32_t> steps;
      {
        std::unique_lock lock(s.queue_mutex);
        s.wake.wait_until(lock, next_flush, [&] {
          return s.stop || s.flush_requested > s.flush_done || !s.queue.empty() ||
                 !s.steps_to_end.empty() || s.drain_requested;
        });
        stop = s.stop;
        ticket = s.flush_requested;
        steps.swap(s.steps_to_end);
        drain = s.drain_requested;
        s.drain_requested = false;
        // A finished step is flushed too, so that a killed job leaves its last steps readable.
        flush = stop || ticket > s.flush_done || !steps.empty() || Clock::now() >= next_flush;
      }
      for (uint32_t step : steps) {  // in end_step order, which is increasing
        std::vector<StepTotal> totals = collect_steps(step, /*all=*/false);
        add_step(totals, step, 0, 0);  // a step with no records still gets its summary
        enqueue_summary(std::move(totals));
      }
      if (stop) {
        std::vector<StepTotal> totals = collect_steps(0, /*all=*/true);
        if (!totals.empty()) enqueue_summary(std::move(totals));
      }
      // Stolen partial blocks join the queue behind their threads' full blocks, so each
      // thread's blocks reach the file in order.
      if (flush) {
        steal_partial_blocks();
        next_flush = Clock::now() + interval;
      } else if (drain) {
        drain_all();
      }
      write_queue(/*with_drop_report=*/flush);
      if (flush) {
        std::lock_guard lock(s.queue_mutex);
        s.flush_done = std::max(s.flush_done, ticket);
        if (stop && s.queue.empty()) s.stopped = true;
      }
      s.flushed.notify_all();
      if (stop && s.stopped) return;
    }
  }

  // Sweeps every thread while full batches keep arriving, at most kSweeps times; then another
  // cycle follows after this one has written its blocks (a burst neither fills the memory
  // budget unwritten nor holds off the timed flush and new threads for long).
  void drain_all() {
    State& s = *state_;
    constexpr int kSweeps = 8;
    bool more = true;
    for (int sweep = 0; more && sweep < kSweeps; ++sweep) {
      more = false;
      std::lock_guard registry(s.registry_mutex);
      for (auto& tb : s.threads) {
        std::lock_guard encoding(tb->encode_mutex);
        more |= drain_locked(*tb);
      }
    }
    if (more) {
      std::lock_guard lock(s.queue_mutex);
      s.drain_requested = true;
    }
  }

  void steal_partial_blocks() {
    State& s = *state_;
    std::lock_guard registry(s.registry_mutex);
    for (auto it = s.threads.begin(); it != s.threads.end();) {
      ThreadBuffer& tb = **it;
      bool gone = false;
      {
        // Read before the drain: the owner's last append happened before it set the flag, so
        // the drain below sees that record.
        const bool exited = tb.owner_exited.load(std::memory_order_acquire);
        std::lock_guard encoding(tb.encode_mutex);
        drain_locked(tb);
        if (tb.block && tb.block->count > 0) {
          std::lock_guard lock(s.queue_mutex);  // encode_mutex, then queue_mutex: as in refill()
          s.queue.push_back(std::move(tb.block));
        }
        gone = exited && tb.steps.empty();
        if (gone) release_block(std::move(tb.block));
      }
      if (gone) {
        s.retired_appended += tb.appended.load(std::memory_order_relaxed);
        s.retired_dropped += tb.dropped.load(std::memory_order_relaxed);
        tb.writer_closed.store(true, std::memory_order_release);
        it = s.threads.erase(it);
      } else {
        ++it;
      }
    }
  }

  // Dropped records are never silent: a Warning record (code kWarningRecordsDropped, count)
  // in a block of its own, written by this thread so that it cannot be dropped in turn.
  void report_drops(std::vector<std::unique_ptr<Block>>& blocks) {
    State& s = *state_;
    const uint64_t dropped = stats().dropped;
    if (dropped <= s.dropped_reported) return;
    Record warning;
    warning.kind = RecordKind::Warning;
    warning.name = s.strings.intern(
        "lockstep: trace records dropped (writer memory budget full or disk too slow)");
    warning.fields[fields::Warning::code] = kWarningRecordsDropped;
    warning.fields[fields::Warning::count] = dropped - s.dropped_reported;
    s.dropped_reported = dropped;
    auto block = std::make_unique<Block>();
    block->capacity = RecordEncoder::max_encoded_size(warning);
    block->data.reset(new uint8_t[block->capacity]);
    auto encoder = std::make_unique<RecordEncoder>();
    block->used = encoder->encode(warning, 0, block->data.get()) - block->data.get();
    block->count = 1;
    blocks.push_back(std::move(block));
    s.warnings_written.fetch_add(1, std::memory_order_relaxed);
  }

  // Background thread only: writes the queued blocks now (after a Warning block for records
  // dropped since the last report, if asked).
  void write_queue(bool with_drop_report = false) {
    State& s = *state_;
    std::vector<std::unique_ptr<Block>> blocks;
    {
      std::lock_guard lock(s.queue_mutex);
      blocks.swap(s.queue);
    }
    if (with_drop_report) report_drops(blocks);
    write_cycle(blocks);
  }

  // Strings first: every id used by the blocks taken above was interned before they were taken,
  // so its definition is in this strings block or an earlier one.
  // Definitions whose block failed to write go again in the next cycle (a transient failure must
  // not leave every later record naming an undefined string).
  // Scopes are taken before strings: a scope's name was interned before the scope, so the
  // strings taken after it include that name, and the Strings block precedes the Scopes block.
  void write_cycle(std::vector<std::unique_ptr<Block>>& blocks) {
    State& s = *state_;
    auto scopes = std::exchange(unwritten_scopes_, {});
    auto fresh_scopes = s.scopes.take_pending();
    scopes.insert(scopes.end(), fresh_scopes.begin(), fresh_scopes.end());
    auto pending = std::exchange(unwritten_strings_, {});
    auto fresh = s.strings.take_pending();
    pending.insert(pending.end(), fresh.begin(), fresh.end());
    size_t at = 0;
    while (at < pending.size()) {
      std::vector<uint8_t> payload;
      uint32_t count = 0;
      const size_t first = at;
      for (; at < pending.size() && payload.size() < (4u << 20); ++at, ++count)
        encode_string(payload, pending[at].first, pending[at].second);
      BlockHeader header{};
      header.type = static_cast<uint8_t>(BlockType::Strings);
      header.record_count = count;
      if (!write_block(header, payload.data(), payload.size()))
        unwritten_strings_.insert(unwritten_strings_.end(), pending.begin() + first,
                                  pending.begin() + at);
    }
    write_scopes(scopes);
    for (auto& block : blocks) {
      BlockHeader header{};
      header.type = static_cast<uint8_t>(block->type);
      header.record_count = block->count;
      header.min_step = block->min_step;
      header.max_step = block->max_step;
      header.first_seq = block->type == BlockType::Records ? block->first_seq : 0;
      if (write_block(header, block->data.get(), block->used))
        for (const StepTotal& total : block->totals) {  // a Summary block's, now in the file
          IndexSummaryEntry& entry = index_summaries_[total.step];
          entry.step = total.step;
          entry.record_count += total.count;
          entry.digest += total.digest;
          if (total.job_step != kNoJobStep) entry.job_step = total.job_step, entry.numbered = 1;
        }
      release_block(std::move(block));
    }
    blocks.clear();
  }

  // Scope definitions as Scope records (record_kinds.def) in Scopes blocks; those whose block
  // fails to write go again in the next cycle, as string definitions do.
  void write_scopes(const std::vector<ScopeDefinition>& scopes) {
    size_t at = 0;
    Record record;
    record.kind = RecordKind::Scope;
    while (at < scopes.size()) {
      const size_t first = at;
      std::vector<uint8_t> payload;
      RecordEncoder encoder;
      uint32_t count = 0;
      for (; at < scopes.size() && payload.size() < (4u << 20); ++at, ++count) {
        record.name = scopes[at].name;
        record.fields[fields::Scope::scope_id] = scopes[at].id;
        record.fields[fields::Scope::parent] = scopes[at].parent;
        const size_t used = payload.size();
        payload.resize(used + RecordEncoder::max_encoded_size(record));
        payload.resize(encoder.encode(record, 0, payload.data() + used) - payload.data());
      }
      BlockHeader header{};
      header.type = static_cast<uint8_t>(BlockType::Scopes);
      header.record_count = count;
      if (!write_block(header, payload.data(), payload.size()))
        unwritten_scopes_.insert(unwritten_scopes_.end(), scopes.begin() + first,
                                 scopes.begin() + at);
    }
  }

  bool write_block(BlockHeader& header, const uint8_t* payload, size_t bytes) {
    header.payload_bytes = static_cast<uint32_t>(bytes);
    seal_block_header(header, payload, bytes);
    State& s = *state_;
    if (!write_at(reinterpret_cast<const uint8_t*>(&header), sizeof(header), payload, bytes))
      return false;
    s.blocks_written.fetch_add(1, std::memory_order_relaxed);
    // file_offset_ changes only under the file, taken by this thread (the background thread, or
    // close after it stopped): the block ends there.
    index_blocks_.push_back({file_offset_ - sizeof(header) - bytes, header.payload_bytes,
                             header.record_count, header.min_step, header.max_step,
                             header.first_seq, header.type});
    return true;
  }

  // Writes the step index (step_index.h) of every block written so far; its offset, or 0 when
  // there is none (too large for one block, or its write failed).
  uint64_t write_index() {
    if (index_blocks_.empty()) return 0;  // a trace of no block: nothing to find
    std::vector<IndexSummaryEntry> summaries;
    summaries.reserve(index_summaries_.size());
    for (const auto& [step, entry] : index_summaries_) summaries.push_back(entry);
    std::vector<uint8_t> payload = encode_step_index(index_blocks_, summaries);
    if (payload.empty()) return 0;
    const uint64_t offset = file_offset_;
    BlockHeader header{};
    header.type = static_cast<uint8_t>(BlockType::Index);
    header.record_count = static_cast<uint32_t>(index_blocks_.size() + summaries.size());
    if (!summaries.empty())
      header.min_step = summaries.front().step, header.max_step = summaries.back().step;
    return write_block(header, payload.data(), payload.size()) ? offset : 0;
  }

  // Appends at the end of the file; a failed write is cut off again so that the file stays a
  // valid trace, and is counted and reported (once). Not for signal handlers: see take_file().
  bool write_at(const uint8_t* a, size_t a_bytes, const uint8_t* b, size_t b_bytes,
                bool report = true, int* error_out = nullptr) {
    if (!take_file()) return false;
    const bool ok = write_taken(a, a_bytes, b, b_bytes, report, error_out);
    state_->file_state.store(kFileFree, std::memory_order_release);
    return ok;
  }

  // Waits (briefly: a signal handler's few system calls) until the file is free and takes it.
  // False once the file is closed.
  bool take_file() {
    State& s = *state_;
    for (;;) {
      int expected = kFileFree;
      if (s.file_state.compare_exchange_weak(expected, kFileWriting, std::memory_order_acquire))
        return true;
      if (expected == kFileClosed) return false;
      if (expected == kFileSealed &&
          s.file_state.compare_exchange_strong(expected, kFileWriting, std::memory_order_acquire)) {
        // A signal handler wrote an End block and the process lived on (the job handled the
        // signal): take the End block off again; close() writes the real one. If it cannot be
        // taken off, nothing more is written: the file ends with that (unclean) End block.
        if (options_.ftruncate(fd_, static_cast<off_t>(file_offset_)) != 0) broken_ = true;
        return true;
      }
      if (expected == kFileWriting) std::this_thread::yield();
    }
  }

  // Caller owns the file (file_state == kFileWriting).
  bool write_taken(const uint8_t* a, size_t a_bytes, const uint8_t* b, size_t b_bytes, bool report,
                   int* error_out) {
    State& s = *state_;
    int error = EIO;
    if (!broken_ && write_all(a, a_bytes, b, b_bytes, &error)) {
      file_offset_ += a_bytes + b_bytes;
      s.bytes_written.fetch_add(a_bytes + b_bytes, std::memory_order_relaxed);
      return true;
    }
    s.write_errors.fetch_add(1, std::memory_order_relaxed);
    if (!broken_ && options_.ftruncate(fd_, static_cast<off_t>(file_offset_)) != 0) {
      // The failed block's bytes stay: anything written after them would follow garbage, so
      // nothing is. The file reads as cut off there.
      broken_ = true;
    }
    if (error_out) *error_out = error;
    if (report) report_write_error(error);
    return false;
  }

  // Writes both parts at file_offset_, going on after short writes. Async-signal-safe (the
  // injected system calls must be too). On failure sets *error to the errno.
  bool write_all(const uint8_t* a, size_t a_bytes, const uint8_t* b, size_t b_bytes,
                 int* error) const noexcept {
    const iovec parts[2] = {{const_cast<uint8_t*>(a), a_bytes}, {const_cast<uint8_t*>(b), b_bytes}};
    const int part_count = b_bytes ? 2 : 1;
    const size_t total = a_bytes + b_bytes;
    size_t done = 0;
    while (done < total) {
      // Skip what was written already.
      size_t skip = done;
      iovec rest[2];
      int n = 0;
      for (int i = 0; i < part_count; ++i) {
        if (skip >= parts[i].iov_len) {
          skip -= parts[i].iov_len;
          continue;
        }
        rest[n++] = {static_cast<uint8_t*>(parts[i].iov_base) + skip, parts[i].iov_len - skip};
        skip = 0;
      }
      errno = 0;
      const ssize_t written =
          options_.pwritev(fd_, rest, n, static_cast<off_t>(file_offset_ + done));
      if (written < 0 && errno == EINTR) continue;
      if (written <= 0) {
        *error = written < 0 && errno != 0 ? errno : EIO;  // 0 bytes for a write: no progress
        return false;
      }
      done += std::min(static_cast<size_t>(written), total - done);
    }
    return true;
  }

  // The one line the job's user sees about a failing disk; once per writer.
  void report_write_error(int error) {
    State& s = *state_;
    if (s.error_reported.exchange(true)) return;
    std::string line = "lockstep: cannot write the trace " + options_.path + " (" +
                       std::strerror(error) +
                       "); it will be incomplete, and the job goes on untouched";
    if (options_.on_error) {
      options_.on_error(line);
    } else {
      line += '\n';
      if (::write(STDERR_FILENO, line.data(), line.size()) < 0) { /* nowhere else to say it */
      }
    }
  }

  // An End block (format.h), header and payload, ready to write. No allocation, no lock:
  // seal_after_signal uses it.
  struct EndBlock {
    uint8_t bytes[sizeof(BlockHeader) + sizeof(EndPayload) + kMaxEndReason +
                  sizeof(EndIndexTrailer)];
  };
  // index_offset: the Index block just written before it (the payload then ends with an
  // EndIndexTrailer); 0 for none.
  size_t make_end_block(EndBlock& out, bool clean, const char* reason, size_t reason_bytes,
                        uint64_t index_offset = 0) const noexcept {
    const State& s = *state_;
    EndPayload payload{};
    payload.records = s.appended_all.load() + s.warnings_written.load();
    payload.dropped = s.dropped_all.load() + s.rejected.load();
    payload.steps = s.summary_records.load();
    payload.write_errors = s.write_errors.load();
    payload.last_step = s.last_step.load();
    payload.clean = clean ? 1 : 0;
    reason_bytes = std::min<size_t>(reason_bytes, kMaxEndReason);
    payload.reason_bytes = static_cast<uint8_t>(reason_bytes);
    uint8_t* body = out.bytes + sizeof(BlockHeader);
    std::memcpy(body, &payload, sizeof(payload));
    for (size_t i = 0; i < reason_bytes; ++i) {  // printable ASCII: tools print it
      const char c = reason[i];
      body[sizeof(payload) + i] = c >= 0x20 && c < 0x7f ? static_cast<uint8_t>(c) : '?';
    }
    size_t body_bytes = sizeof(payload) + reason_bytes;
    if (index_offset != 0) {
      const EndIndexTrailer trailer{
          index_offset,
          static_cast<uint32_t>(sizeof(BlockHeader) + body_bytes + sizeof(EndIndexTrailer)),
          kIndexTrailerMagic};
      std::memcpy(body + body_bytes, &trailer, sizeof(trailer));
      body_bytes += sizeof(trailer);
    }
    BlockHeader header{};
    header.type = static_cast<uint8_t>(BlockType::End);
    header.payload_bytes = static_cast<uint32_t>(body_bytes);
    header.min_step = header.max_step = payload.last_step;
    seal_block_header(header, body, body_bytes);
    std::memcpy(out.bytes, &header, sizeof(header));
    return sizeof(header) + body_bytes;
  }

  static constexpr size_t kPoolKeep = 16;

  std::unique_ptr<State> state_ = std::make_unique<State>();

  WriterOptions options_;
  int fd_;
  uint64_t file_offset_ = 0;  // the file's owner only (file_state)
  bool broken_ = false;       // the owner only: a failed write could not be cut off again
  // String definitions whose block failed to write (background thread only); the views point
  // into the string table, whose keys never move.
  std::vector<std::pair<StringId, std::string_view>> unwritten_strings_;
  std::vector<ScopeDefinition> unwritten_scopes_;  // the same for scope definitions
  // The step index's entries: every block written, and the summaries of the Summary blocks
  // written (background thread, then close). ~33 bytes a block and ~29 a step.
  std::vector<IndexBlockEntry> index_blocks_;
  std::map<uint32_t, IndexSummaryEntry> index_summaries_;
  bool header_written_ = false;  // set by open, before the background thread starts
  NameResolver name_resolver_;  // set_name_resolver
  std::atomic<bool> closed_{false};
  std::atomic<bool> abandoned_{false};
};

}  // namespace

uint64_t TraceWriter::next_uid() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::unique_ptr<TraceWriter> TraceWriter::open(const WriterOptions& options,
                                               const nlohmann::json& header, std::string* error) {
  const int fd = ::open(options.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (error) *error = options.path + ": cannot create trace file: " + std::strerror(errno);
    return nullptr;
  }
  auto writer = std::make_unique<Writer>(options, fd);
  if (!writer->write_file_header(header, error)) {
    writer->close();
    ::unlink(options.path.c_str());
    return nullptr;
  }
  writer->start();
  return writer;
}

}  // namespace lockstep::trace
