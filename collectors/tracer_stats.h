// The Tracer's counters: what the shim did that the trace does not say by itself (hash launches
// merged or sent alone, digests reused, regions not hashed and why, cuBLASLt lookups, buffers not
// fingerprinted). Bumped from the call paths in collectors/ with relaxed atomics
// (`tracer->stats.x.fetch_add(n, std::memory_order_relaxed)`); read once, at close:
// LOCKSTEP_DEBUG prints debug_lines(), and the counts that mean missing evidence become Warning
// records (warnings()). Adding a counter: a field here (with what it counts), and its place in
// debug_lines() or warnings() in tracer_stats.cpp; a counter nothing prints is read by no one.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hashing/engine.h"

namespace lockstep::collectors {

// Codes of Warning records (name = the message).
enum class WarningCode : uint64_t {
  FingerprintsDropped = 1,      // count = buffers whose fingerprint could not be taken
  RankFromNccl = 2,             // count = rank learned from NCCL (header had none)
  RecordsDropped = 3,           // count = records the writer dropped
  CaptureNotFingerprinted = 4,  // count = ops on capturing streams recorded without digests
  NestedKernels = 5,            // count = kernels attributed to an enclosing library call
  ReadOnlyWritten = 6,          // count = kernel pointer words learned read-only, then seen written
  FillDiffered = 7,             // count = fills whose bytes differed from an earlier same fill's
  LtCacheMismatch = 8,  // count = cuBLASLt objects whose bytes matched but attributes did not
  FailedLaunchRecorded = 9,  // count = failed launches whose staged record was already encoded
  LtCopyMismatch = 10,  // count = copied cuBLASLt GEMMs whose copies read other attributes
};

// Why deferred outputs went out on their own (counted; LOCKSTEP_DEBUG prints them at close).
enum class FlushCause : uint8_t {
  KernelUnhashed,  // the next kernel is not fingerprinted (or has no regions)
  OtherStream,     // the next fingerprinted kernel is on another stream or context
  OtherThread,     // another thread deferred a kernel's outputs meanwhile
  OtherCall,       // a traced call other than a kernel launch
  ChainFull,       // a chained set reached kChainRegions
  Free,            // a free or unmap of device memory
  OrderPoint,      // event record, synchronize, query, capture begin, host callback
  Step,            // a step marker
  Close,
  kCount
};

// Why a call on the deferred set's stream launched hashes (the set and its own inputs, merged)
// instead of chaining onto the set (counted; LOCKSTEP_DEBUG prints them at close): what bounds
// the hash launches a job needs at full (docs/performance.md, "Full").
enum class ChainRefusal : uint8_t {
  NotChainable,  // its writes are not known, a synchronous copy, a capture, or chaining is off
  Full,          // the set and its inputs would pass kChainRegions
  WritesSet,     // it may write what the set has still to read (an in-place op on an output)
  InputUnknown,  // an input with no known digest (a new allocation, another extent, written)
  kCount
};

struct TracerStats {
  // ---- merged hash launches (LOCKSTEP_MERGE_HASHES) --------------------------------------------
  std::atomic<uint64_t> frees_deferred{0};   // stream-ordered frees held for the deferred set
  std::atomic<uint64_t> merged_launches{0};  // hash launches that carried two kernels' regions
  std::atomic<uint64_t> chained_calls{0};    // calls that needed no hash launch of their own
  // Deferred sets enqueued on their own, by cause.
  std::atomic<uint64_t> deferred_flushes[size_t(FlushCause::kCount)] = {};
  // Held across a host synchronization (LOCKSTEP_HOLD_ACROSS_SYNC, tracer_host_sync.cpp).
  std::atomic<uint64_t> sets_held_across_sync{0};  // sets marked synced at a host wait or copy
  std::atomic<uint64_t> synced_sets_issued{0};     // synced sets enqueued, an event after each
  std::atomic<uint64_t> synced_waits{0};           // other streams made to wait on that event
  std::atomic<uint64_t> synced_failures{0};        // events not made, recorded or waited on
  // Calls on the set's stream that launched instead of chaining, by reason.
  std::atomic<uint64_t> chain_refusals[size_t(ChainRefusal::kCount)] = {};

  // ---- cuBLASLt objects known by their bytes (bytes_keyed_cache.h) ----------------------------
  std::atomic<uint64_t> lt_reads_cached{0};      // cuBLASLt layouts/algorithms known by their bytes
  std::atomic<uint64_t> lt_reads_missed{0};      // read from the library (counted at debug only)
  std::atomic<uint64_t> failed_launches_recorded{0};  // kernels.cpp, broad: record kept
  std::atomic<uint64_t> lt_cache_mismatches{0};  // equal bytes, other attributes: cache turned off
  std::atomic<uint64_t> lt_copy_mismatches{0};   // copies read otherwise (lt_copies.h): copies off
  std::atomic<uint64_t> lt_copies_ring_full{0};  // GEMMs read on the job's thread: ring busy

  // ---- records and buffers ----------------------------------------------------------------------
  std::atomic<uint64_t> nested_kernels{0};        // kernels attributed to an enclosing call
  std::atomic<uint64_t> capture_skipped{0};       // buffers on capturing streams, not hashed
  std::atomic<uint64_t> fingerprints_dropped{0};  // buffers flagged kFingerprintDropped
  std::atomic<uint64_t> regions_shared{0};  // hashed once for two records (see enqueue_groups)
  std::atomic<uint64_t> collector_wakes{0};  // an idle collector woken by a launching thread
  std::atomic<uint64_t> steps_handed{0};     // step ends markers left to the collector's thread

  // ---- reused input digests (region_digests.h), level full ----------------------------------
  std::atomic<uint64_t> digests_reused{0};     // inputs filled from an arrived digest
  std::atomic<uint64_t> digests_awaited{0};    // inputs filled from a digest in flight
  std::atomic<uint64_t> bytes_not_reread{0};   // their bytes
  std::atomic<uint64_t> digests_forgotten{0};  // unknown writes that dropped known digests
  std::atomic<uint64_t> digests_carried{0};    // freed allocations' digests given to the next
  std::atomic<uint64_t> bytes_carried{0};      // their bytes
  std::atomic<uint64_t> regions_enclosed{0};   // kernel regions given an enclosing region's digest
  std::atomic<uint64_t> bytes_enclosed{0};     // their own bytes (not read)
  std::atomic<uint64_t> inputs_unwritten{0};   // inputs in fresh allocations, not hashed
  std::atomic<uint64_t> bytes_unwritten{0};    // their bytes

  // ---- learned read-only kernel pointers (pointer_roles.h), level full ------------------------
  std::atomic<uint64_t> outputs_read_only{0};   // kernel outputs not hashed: learned read-only
  std::atomic<uint64_t> bytes_read_only{0};     // their bytes
  std::atomic<uint64_t> inputs_overwritten{0};  // kernel inputs a known writer overwrites whole
  std::atomic<uint64_t> bytes_overwritten{0};   // their bytes (not hashed)
  std::atomic<uint64_t> scratch_regions{0};     // kernel scratch buffers (kernel_writes.h)
  std::atomic<uint64_t> bytes_scratch{0};       // their bytes (not hashed)
  std::atomic<uint64_t> stale_tensor_words{0};  // multi-tensor-apply words of untouched tensors
  std::atomic<uint64_t> calculator_words{0};    // struct words that are no pointers (leftovers)
  std::atomic<uint64_t> roles_learned{0};       // words learned read-only
  std::atomic<uint64_t> roles_contradicted{0};  // of those, found written later

  // ---- recalled fill digests (fill_digests.h), level full ------------------------------------
  std::atomic<uint64_t> fills_recalled{0};  // fill outputs not hashed: digest recalled
  std::atomic<uint64_t> bytes_recalled{0};  // their bytes
  std::atomic<uint64_t> fills_differed{0};  // verifying fills whose digest differed

  // ---- the report at close ------------------------------------------------------------------
  // Which optional parts ran: a part that was off has no line.
  struct Parts {
    bool reuse_digests = false;
    bool learn_roles = false;
    bool recall_fills = false;
    bool carry_freed = false;
  };
  // LOCKSTEP_DEBUG's lines, in order; `engines`: the hash engines' totals.
  std::vector<std::string> debug_lines(const hashing::EngineStats& engines,
                                       const Parts& parts) const;
  // A Warning record for each count that means evidence is missing or suspect, in the order
  // they are written at close; none for a zero count. (Records the writer dropped are the
  // writer's count: the Tracer adds that warning.)
  struct Warning {
    WarningCode code;
    uint64_t count;
    const char* message;
  };
  std::vector<Warning> warnings() const;
};

}  // namespace lockstep::collectors
