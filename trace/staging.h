// A thread's staging of records in the trace writer: the batches records are built or copied
// into on the job's thread, and the owner's view of them. Shared by the writer (trace/writer.cpp,
// which drains, encodes and owns every batch) and TraceWriter::stage / commit_staged
// (trace/writer.h), whose common case is inline in the caller: a kernel launch at broad stages
// its record without a call into the writer (collectors/kernels.cpp). Nothing here is for a
// caller to touch directly.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "trace/record.h"

namespace lockstep::trace {

inline constexpr uint32_t kBatchRecords = 128;

// The record slot the next append fills, asked for now: a reused batch was last read by a drain
// on another core, and its line would otherwise be fetched on the job's next traced call rather
// than during the job's own work in between. Its first line only: a staged launch writes no
// other (collectors/kernels.cpp, namespace packed). (The write hint needs PRFCHW: on the
// generic x86-64 target this is a plain prefetcht0.) Always inlined: a function of a prefetch
// alone has no effect GCC keeps a call of it for, and it dropped the calls at -O2.
[[gnu::always_inline]] inline void prefetch_for_write(const Record* slot) {
  __builtin_prefetch(slot, 1, 3);
}

// Records copied as appended, in order; their Records keep their vectors' capacity when reused.
struct StagedBatch {
  // Records [0, count) are committed: written by the owner only (release), read by drains
  // (acquire). A batch goes back to zero only once drained whole and handed to the spares.
  std::atomic<uint32_t> count{0};
  // Records before it are taken by a drain (being or already encoded): retract() cannot take
  // them back. Guarded by the thread's stage_lock.
  uint32_t reserved = 0;
  std::array<Record, kBatchRecords> records;
  // Records taken back (retract) before a drain reached them: skipped, then cleared by the drain.
  // Set under the stage lock for slots not reserved yet; a drain reads them for its reserved ones.
  std::array<std::atomic<uint64_t>, (kBatchRecords + 63) / 64> retracted{};
  bool is_retracted(uint32_t i) const {
    return (retracted[i / 64].load(std::memory_order_relaxed) >> (i % 64)) & 1;
  }
  void reset() {  // drained whole, on its way to the spares
    count.store(0, std::memory_order_relaxed);
    reserved = 0;
    for (auto& word : retracted) word.store(0, std::memory_order_relaxed);
  }
};

// The owner's own view of its staging (only the owner reads or writes these; the first line of
// the writer's per-thread buffer): the batch that is filling and the index of its next slot
// (null: ask under the lock), and the slot between stage() and commit_staged(). Only the owner
// changes the filling batch (drains read its committed prefix and leave it), so the view is never
// stale. On a line of its own with the flag every stage() reads: a drain on another core writes
// the lines further down.
struct alignas(64) StagingView {
  StagedBatch* next_batch = nullptr;
  uint32_t next_index = 0;
  uint32_t staged_index = 0;
  StagedBatch* staged_batch = nullptr;
  std::atomic<bool> out_of_memory{false};  // no block to encode into: appends are refused
};

}  // namespace lockstep::trace
