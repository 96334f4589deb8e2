// The Tracer's hash scheduling: the hash engine of each context, the enqueue of a call's
// regions (shared regions, reused and enclosing digests), and merged, deferred and chained
// hash launches with the stream-ordered frees that wait for them (runtime.h, README
// "Merged hash launches at full").
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "collectors/region_index.h"
#include "collectors/tracer_parts.h"
#include "common/self_time.h"

namespace lockstep::collectors {

// ---- hash engines and enqueue ------------------------------------------------------------------
Tracer::EngineState* Tracer::engine_for_current_context() {
  const Driver& d = driver();
  CUcontext ctx = nullptr;
  if (!d.loaded || d.ctxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr) return nullptr;
  EngineState& state = engines_[ctx];
  if (state.engine) return &state;
  if (engine_failed_) return nullptr;
  hashing::DriverApi api;
  std::string error;
  if (!hashing::load_driver_api(d.getProcAddress, &api, &error)) {
    engine_failed_ = true;
    debug("hash engine: " + error);
    return nullptr;
  }
  hashing::EngineOptions options;
  options.device_scratch_bytes = config_.hash_memory;
  state.engine = hashing::HashEngine::create(api, options, &error);
  if (!state.engine) {
    engine_failed_ = true;
    std::fprintf(stderr, "lockstep: no fingerprints (hash engine: %s)\n", error.c_str());
    return nullptr;
  }
  state.slots.assign(options.ring_slots, SlotTarget{nullptr, 0});
  state.also.assign(options.ring_slots, SlotTarget{nullptr, 0});
  state.slot_region.assign(options.ring_slots, 0);
  state.waiters.reset(options.ring_slots);
  // Registered after CUDA is up, so it runs before CUDA's own exit teardown (atexit is LIFO).
  std::atexit(close_at_exit);
  return &state;
}

void Tracer::fingerprint(PendingRecord* pending, CUstream stream, bool per_thread_default,
                         const PlannedRegion* regions, size_t n, bool not_capturing,
                         const CallWrites* side_writes) {
  if (pending == nullptr || n == 0) return;
  const HashGroup group{pending, regions, n};
  enqueue_groups(stream, per_thread_default, &group, 1, not_capturing, side_writes);
}

void Tracer::fingerprint_repeating(PendingRecord* pending, CUstream stream,
                                   const PlannedRegion* regions, size_t n) {
  if (pending == nullptr || n == 0) return;
  const HashGroup group{pending, regions, n, /*repeats=*/true};
  enqueue_groups(stream, false, &group, 1, false);
}

void Tracer::enqueue_groups(CUstream stream, bool per_thread_default, const HashGroup* groups,
                            size_t count, bool not_capturing, const CallWrites* side_writes) {
  size_t total = 0;
  for (size_t g = 0; g < count; ++g) total += groups[g].n;
  if (total == 0) return;
  uint64_t capture_id = 0;
  if (!not_capturing && capturing(stream, per_thread_default, &capture_id)) {
    stats.capture_skipped.fetch_add(total, std::memory_order_relaxed);
    return;  // entries stay without kFingerprintValid
  }
  if (stream == nullptr && per_thread_default) stream = CU_STREAM_PER_THREAD;
  ShimCallGuard guard;
  self_time::Scope timed(self_time::Phase::HashEnqueue);
  std::unique_lock lock(pending_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) {
    self_time::Scope waiting(self_time::Phase::LockWait);
    lock.lock();
  }
  EngineState* state = engine_for_current_context();
  const bool reuse = reuse_digests_ && state != nullptr;
  const void* stream_key = digest_stream_key(stream);
  // The regions of every group, in order, with their owners. A merged launch often holds one
  // kernel's output and the next kernel's input that are the same bytes (the same pointer and
  // extent, nothing ran between): hashed once, the digest fills both records. A region that an
  // earlier launch hashed, with no write seen since, is not hashed at all (region_digests.h).
  thread_local auto* batch_buffer = new std::vector<hashing::Region>;  // never freed (exit)
  thread_local auto* owners_buffer = new std::vector<SlotTarget>;
  thread_local auto* also_buffer = new std::vector<SlotTarget>;
  thread_local auto* bases_buffer = new std::vector<uint64_t>;
  std::vector<hashing::Region>& all = *batch_buffer;
  std::vector<SlotTarget>& owners = *owners_buffer;
  std::vector<SlotTarget>& also = *also_buffer;
  std::vector<uint64_t>& bases = *bases_buffer;  // allocation base per unique region (0: none)
  all.clear();
  owners.clear();
  also.clear();
  bases.clear();
  // Regions a third or later record reads (a chained set): served as waiters on the slot.
  thread_local auto* extra_buffer = new std::vector<std::pair<size_t, SlotTarget>>;
  std::vector<std::pair<size_t, SlotTarget>>& extra = *extra_buffer;
  extra.clear();
  // Past a few regions, earlier ones are found through an index (region_index.h), not compared
  // one by one: the state call's 77 and a graph replay's thousands.
  constexpr size_t kCompareDirectly = 16;
  thread_local auto* index_buffer = new RegionIndex;  // never freed (exit)
  RegionIndex& index = *index_buffer;
  // One group whose regions are distinct looks nothing up: no index to clear.
  const bool indexed = total > kCompareDirectly && (count > 1 || groups[0].repeats);
  if (indexed) index.reset(total);
  size_t inserted = 0;
  size_t earlier = 0;  // the regions a region is looked up among: all[0, earlier)
  const auto look_among_all = [&] {
    earlier = all.size();
    for (; indexed && inserted < earlier; ++inserted)
      index.insert(all[inserted].ptr, all[inserted].bytes, static_cast<uint32_t>(inserted));
  };
  for (size_t g = 0; g < count; ++g) {
    // Against earlier groups only: a group's own regions are distinct (a GEMM whose A is its B
    // aside, hashed twice), and a graph replay's thousands are not compared with each other;
    // unless they may repeat (a state call's: tied weights).
    look_among_all();
    for (size_t i = 0; i < groups[g].n; ++i) {
      if (groups[g].repeats) look_among_all();
      const PlannedRegion& region = groups[g].regions[i];
      const SlotTarget owner{groups[g].pending, region.buffer_index};
      // The same bytes earlier in this launch (an output the next call reads, nothing ran
      // between that could write it): hashed once, the digest fills both records.
      size_t same = 0;
      if (indexed) {
        const uint32_t found = index.find(region.ptr, region.bytes);
        same = found == RegionIndex::kNone ? earlier : found;
      } else {
        while (same < earlier &&
               !(all[same].ptr == region.ptr && all[same].bytes == region.bytes))
          ++same;
      }
      if (same < earlier) {
        if (also[same].pending == nullptr)
          also[same] = owner;
        else
          extra.emplace_back(same, owner);
        continue;
      }
      // Inputs only: an output is hashed after its own write, whatever was known before.
      if (reuse) {
        if (const auto known =
                known_input_locked(owner.pending->record, region, state, stream_key)) {
          take_known_input_locked(owner, region, *known, state);
          continue;
        }
      }
      // A kernel's region inside a larger region of the same launch's own pointers, hashed in
      // this launch or known (the k and v views of one qkv tensor, inside q's region, each
      // running to the allocation's end): that region's digest, and the entry says so
      // (trace::kDigestOfEnclosing). Only its own: a word that merely looks like a pointer into
      // another op's region would then be hashed before and after over other bytes, and never
      // learned read-only. A known operand (PlannedRegion::operand) is a pointer: any known
      // enclosing region of its allocation (a slice of a tensor hashed whole, a view of a
      // recalled fill).
      const auto own_region = [&](uint64_t ptr, uint64_t bytes) {
        for (size_t j = 0; j < groups[g].n; ++j)
          if (groups[g].regions[j].ptr == ptr && groups[g].regions[j].bytes == bytes) return true;
        return false;
      };
      if (owner.pending->record.kind == trace::RecordKind::Kernel && region.alloc_base != 0) {
        size_t k = 0;
        while (k < all.size() && !(bases[k] == region.alloc_base && all[k].ptr <= region.ptr &&
                                   region.ptr + region.bytes <= all[k].ptr + all[k].bytes &&
                                   (region.operand || own_region(all[k].ptr, all[k].bytes))))
          ++k;
        if (k < all.size()) {
          take_enclosing_locked(owner, region, all[k].ptr, all[k].bytes);
          extra.emplace_back(k, owner);
          continue;
        }
        uint64_t start = 0, length = 0;
        if (reuse && owner.pending->record.buffers[region.buffer_index].role == trace::Role::In) {
          const auto known = region_digests_.find_enclosing(
              region.ptr, region.bytes, region.alloc_base, state, stream_key, &start, &length);
          if (known && (region.operand || own_region(start, length))) {
            take_enclosing_locked(owner, region, start, length);
            take_known_input_locked(owner, region, *known, state);
            continue;
          }
        }
      }
      all.push_back({region.ptr, region.bytes});
      owners.push_back(owner);
      also.push_back({nullptr, 0});
      bases.push_back(region.alloc_base);
    }
  }
  const size_t n = all.size();
  auto flag_dropped = [&](size_t from, size_t to) {  // unique regions [from, to)
    uint64_t flagged = 0;
    for (size_t k = from; k < to; ++k) {
      for (const SlotTarget* t : {&owners[k], &also[k]}) {
        if (t->pending == nullptr) continue;
        t->pending->record.buffers[t->buffer_index].flags |= trace::kFingerprintDropped;
        ++flagged;
      }
      for (const auto& [index, t] : extra) {
        if (index != k) continue;
        t.pending->record.buffers[t.buffer_index].flags |= trace::kFingerprintDropped;
        ++flagged;
      }
    }
    stats.fingerprints_dropped.fetch_add(flagged, std::memory_order_relaxed);
  };
  if (state == nullptr) {
    flag_dropped(0, n);
    return;
  }
  hashing::HashEngine* engine = state->engine.get();
  // A power of two (HashEngine::create refuses others): a slot is its id's low bits, not a
  // division per region (77 of them in a PyTorch step's state call).
  const uint64_t ring_mask = state->slots.size() - 1;
  // On a side stream, beside the call these regions are read for, when that call writes none
  // of them (side_hashes.h). One launch only: a set that needs more stays on the job's stream.
  // Does the call these regions are read for write one of them (each write over its pointer's
  // allocation run)? side_writes non-null.
  const auto call_writes_them = [&] {
    for (const auto* list : {side_writes->outputs, side_writes->also}) {
      if (list == nullptr) continue;
      for (const PlannedRegion& w : *list) {
        const auto [wstart, wend] = write_reach(w);
        for (size_t k = 0; k < n; ++k)
          if (all[k].ptr < wend && wstart < all[k].ptr + all[k].bytes) return true;
      }
    }
    return false;
  };
  SideHashes* side = nullptr;
  if (side_writes != nullptr && config_.side_hashes && n <= hashing::kMaxRegionsPerEnqueue &&
      stream != CU_STREAM_PER_THREAD && !capture_begun())
    side = side_hashes_locked();
  if (side != nullptr && call_writes_them()) {
    side->stayed_for_writer();
    side = nullptr;
  }
  const CUcontext side_ctx = side != nullptr ? current_context(driver()) : nullptr;
  const CUstream side_stream = side != nullptr ? side->begin(side_ctx, stream) : nullptr;
  // One launch per kMaxRegionsPerEnqueue regions (a graph replay can reach thousands).
  for (size_t start = 0; start < n; start += hashing::kMaxRegionsPerEnqueue) {
    const size_t chunk = std::min<size_t>(n - start, hashing::kMaxRegionsPerEnqueue);
    uint64_t first = 0;
    bool enqueued = false;
    {
      self_time::Scope launching(self_time::Phase::EngineLaunch);
      enqueued = engine->enqueue(side_stream != nullptr ? side_stream : stream, all.data() + start,
                                 static_cast<uint32_t>(chunk), &first);
    }
    if (side_stream != nullptr) {
      thread_local auto* reads_buffer = new std::vector<std::pair<uint64_t, uint64_t>>;
      std::vector<std::pair<uint64_t, uint64_t>>& reads = *reads_buffer;
      reads.clear();
      for (size_t k = start; k < start + chunk; ++k)
        reads.emplace_back(all[k].ptr, all[k].ptr + all[k].bytes);
      side->end(side_ctx, stream, reads.data(), reads.size(), enqueued);
    }
    if (!enqueued) {
      flag_dropped(start, start + chunk);
      continue;
    }
    for (size_t i = 0; i < chunk; ++i) {
      const uint64_t slot = (first + i) & ring_mask;
      state->slots[slot] = owners[start + i];
      ++owners[start + i].pending->outstanding;
      state->also[slot] = also[start + i];
      if (also[start + i].pending != nullptr) {
        ++also[start + i].pending->outstanding;
        stats.regions_shared.fetch_add(1, std::memory_order_relaxed);
      }
      if (reuse && bases[start + i] != 0) {
        const hashing::Region& region = all[start + i];
        region_digests_.hashed(region.ptr, region.bytes, bases[start + i], state, stream_key,
                               first + i);
        state->slot_region[slot] = region.ptr;
      }
    }
    for (const auto& [index, target] : extra) {
      if (index < start || index >= start + chunk) continue;
      state->waiters.add(first + (index - start), target);
      ++target.pending->outstanding;
      stats.regions_shared.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // A busy collector polls every millisecond: waking it per call would cost a futex call and a
  // context switch per kernel launch. An idle one (its kIdlePoll wait) is woken only once enough
  // records wait to matter: a state call once per step, broad's one hash launch, waits for the
  // collector's next look instead of paying a futex call and a cross-core wake on the job's
  // thread every step (issue #34). Woken after the unlock, so that it does not wake into the
  // lock this thread still holds (a second futex call, at the unlock).
  const bool wake = collector_idle_ && pending_records_ >= kWakePendingRecords;
  lock.unlock();
  if (wake) {
    stats.collector_wakes.fetch_add(1, std::memory_order_relaxed);
    collector_wake_.notify_one();
  }
}

std::optional<RegionDigests::Known> Tracer::known_input_locked(const trace::Record& record,
                                                               const PlannedRegion& region,
                                                               EngineState* state,
                                                               const void* stream_key) const {
  if (region.alloc_base == 0 || record.buffers[region.buffer_index].role != trace::Role::In)
    return std::nullopt;
  auto known = region_digests_.find(region.ptr, region.bytes, state, stream_key);
  if (known && known->fresh && !skip_unwritten_) return std::nullopt;
  return known;
}

void Tracer::take_enclosing_locked(const SlotTarget& owner, const PlannedRegion& region,
                                   uint64_t start, uint64_t length) {
  auto& entry = owner.pending->record.buffers[owner.buffer_index];
  entry.flags |= trace::kDigestOfEnclosing;
  entry.alloc_offset = start - region.alloc_base;
  entry.bytes = length;
  stats.regions_enclosed.fetch_add(1, std::memory_order_relaxed);
  stats.bytes_enclosed.fetch_add(region.bytes, std::memory_order_relaxed);
}

void Tracer::take_known_input_locked(const SlotTarget& owner, const PlannedRegion& region,
                                     const RegionDigests::Known& known, EngineState* state) {
  auto& entry = owner.pending->record.buffers[owner.buffer_index];
  if (known.fresh) {
    entry.flags |= trace::kNotWrittenSinceAlloc;
    stats.inputs_unwritten.fetch_add(1, std::memory_order_relaxed);
    stats.bytes_unwritten.fetch_add(region.bytes, std::memory_order_relaxed);
  } else if (known.arrived) {
    entry.fingerprint = known.digest;
    entry.flags |= trace::kFingerprintValid;
    stats.digests_reused.fetch_add(1, std::memory_order_relaxed);
    stats.bytes_not_reread.fetch_add(region.bytes, std::memory_order_relaxed);
  } else {
    state->waiters.add(known.slot, owner);
    ++owner.pending->outstanding;
    stats.digests_awaited.fetch_add(1, std::memory_order_relaxed);
    stats.bytes_not_reread.fetch_add(region.bytes, std::memory_order_relaxed);
  }
}

// ---- merged hash launches ------------------------------------------------------------------------
bool Tracer::deferred_overlaps(const std::vector<PlannedRegion>& writes) {
  if (!has_deferred_.load(std::memory_order_acquire)) return false;
  std::lock_guard lock(deferred_mutex_);
  return reaches_deferred_locked(writes);
}

bool Tracer::reaches_deferred_locked(const std::vector<PlannedRegion>& writes) const {
  for (const PlannedRegion& w : writes) {
    const auto [start, end] = write_reach(w);
    for (const PlannedRegion& d : deferred_.regions)
      if (d.ptr < end && start < d.ptr + d.bytes) return true;
  }
  return false;
}

void Tracer::defer_outputs(PendingRecord* pending, CUstream stream, bool per_thread_default,
                           std::vector<PlannedRegion>& regions, bool not_capturing) {
  if (pending == nullptr || regions.empty()) return;
  uint64_t capture_id = 0;
  if (!config_.merge_hashes ||
      (!not_capturing && capturing(stream, per_thread_default, &capture_id))) {
    // Now (merging off), or not at all (capturing: fingerprint() counts them skipped).
    fingerprint(pending, stream, per_thread_default, regions.data(), regions.size(), not_capturing);
    return;
  }
  const CUcontext ctx = current_context(driver());
  {
    std::lock_guard lock(pending_mutex_);
    ++pending->outstanding;  // the deferred hashes' reference, dropped when they are enqueued
  }
  thread_local auto* previous_buffer = new Deferred;  // never freed (exit)
  Deferred& previous = *previous_buffer;
  previous.clear();
  FlushCause cause = FlushCause::OtherThread;
  {
    std::lock_guard lock(deferred_mutex_);
    // A set this call chained onto (its inputs needed no launch): its outputs join it.
    const bool joins = !deferred_.empty() && deferred_.stream == stream &&
                       deferred_.per_thread_default == per_thread_default &&
                       deferred_.context == ctx && config_.chain_hashes;
    if (joins && deferred_.regions.size() + regions.size() <= kChainRegions) {
      deferred_.add(pending, regions.data(), regions.size());
      return;
    }
    if (!deferred_.empty()) {  // another thread's, or a full chain: out first
      if (joins) cause = FlushCause::ChainFull;
      previous.copy_from(deferred_);
      deferred_.clear();
    }
    deferred_.stream = stream;
    deferred_.per_thread_default = per_thread_default;
    deferred_.context = ctx;
    deferred_.add(pending, regions.data(), regions.size());
    has_deferred_.store(true, std::memory_order_release);
  }
  if (!previous.empty()) {
    stats.deferred_flushes[size_t(cause)].fetch_add(1, std::memory_order_relaxed);
    issue_deferred(previous);
  }
}

bool Tracer::take_deferred(Deferred* out) {
  std::lock_guard lock(deferred_mutex_);
  if (deferred_.empty()) return false;
  out->copy_from(deferred_);
  deferred_.clear();
  has_deferred_.store(false, std::memory_order_release);
  return true;
}

void Tracer::enqueue_deferred(Deferred& deferred, const HashGroup* extra, bool not_capturing,
                              const CallWrites* side_writes) {
  thread_local auto* groups_buffer = new std::vector<HashGroup>;  // never freed (exit)
  std::vector<HashGroup>& groups = *groups_buffer;
  groups.clear();
  size_t begin = 0;
  for (size_t k = 0; k < deferred.owners.size(); ++k) {
    groups.push_back(
        {deferred.owners[k], deferred.regions.data() + begin, deferred.ends[k] - begin});
    begin = deferred.ends[k];
  }
  if (extra != nullptr && extra->pending != nullptr && extra->n > 0) groups.push_back(*extra);
  // Frees held back for these hashes are made on the job's stream right after: the hashes must
  // be on it too.
  enqueue_groups(deferred.stream, deferred.per_thread_default, groups.data(), groups.size(),
                 not_capturing, deferred.frees.empty() ? side_writes : nullptr);
  synced_set_issued(deferred);  // other streams wait for these hashes (tracer_host_sync.cpp)
  for (PendingRecord* owner : deferred.owners) release(owner, true);
  issue_frees(deferred);
}

void Tracer::issue_deferred(Deferred& deferred) {
  const Driver& d = driver();
  const CUcontext current = current_context(d);
  // Another thread may flush: the hashes go to the stream's context, so make it current.
  const bool switch_context = current != deferred.context && deferred.context != nullptr &&
                              d.ctxPushCurrent != nullptr && d.ctxPopCurrent != nullptr;
  if (switch_context) {
    ShimCallGuard guard;
    if (d.ctxPushCurrent(deferred.context) != CUDA_SUCCESS) {
      for (PendingRecord* owner : deferred.owners)
        release(owner, true);  // flagged only by the missing digests
      return;
    }
  }
  enqueue_deferred(deferred, nullptr, false);
  if (switch_context) {
    ShimCallGuard guard;
    CUcontext popped = nullptr;
    d.ctxPopCurrent(&popped);
  }
}

bool Tracer::defer_free(CUdeviceptr ptr, uint64_t end, CUstream stream, bool per_thread_default) {
  const Driver& d = driver();
  if (!config_.merge_hashes || d.memFreeAsync == nullptr || ptr == 0 ||
      !has_deferred_.load(std::memory_order_acquire))
    return false;
  const CUcontext ctx = current_context(d);
  if (stream == nullptr && per_thread_default) stream = CU_STREAM_PER_THREAD;
  std::lock_guard lock(deferred_mutex_);
  if (deferred_.empty()) return false;
  deferred_.frees.push_back({ptr, end, stream, ctx});
  stats.frees_deferred.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void Tracer::issue_frees(Deferred& deferred) {
  if (deferred.frees.empty()) return;
  if (reuse_digests_) {
    // The deferred hashes just enqueued may have recorded digests of the freed memory (with
    // carry_freed, the whole allocation's waits for the next allocation of its range).
    std::lock_guard lock(pending_mutex_);
    for (const DeferredFree& free : deferred.frees) freed_to_pool_locked(free.ptr, free.end);
  }
  const Driver& d = driver();
  ShimCallGuard guard;  // the shim's own calls
  // The job's own frees, held back (on_stream_free returned without making them): their driver
  // time is the job's allocation calls', not the shim's (LOCKSTEP_DEBUG's self time leaves it
  // out and counts it as "alloc call", as the frees the hooks forward).
  self_time::Untimed theirs;
  self_time::Scope real(self_time::Phase::AllocCall);
  const CUcontext current = current_context(d);
  for (const DeferredFree& free : deferred.frees) {
    const bool switch_context = free.context != nullptr && free.context != current &&
                                d.ctxPushCurrent != nullptr && d.ctxPopCurrent != nullptr &&
                                d.ctxPushCurrent(free.context) == CUDA_SUCCESS;
    if (d.memFreeAsync(free.ptr, free.stream) != CUDA_SUCCESS)
      debug(fmt::format("deferred cuMemFreeAsync of {:#x} failed", free.ptr));
    if (switch_context) {
      CUcontext popped = nullptr;
      d.ctxPopCurrent(&popped);
    }
  }
  deferred.frees.clear();
}

void Tracer::flush_deferred_slow(FlushCause cause) {
  thread_local auto* scratch = new Deferred;  // never freed (exit)
  if (!take_deferred(scratch)) return;
  stats.deferred_flushes[size_t(cause)].fetch_add(1, std::memory_order_relaxed);
  issue_deferred(*scratch);
}

bool Tracer::chain_locked(PendingRecord* pending, CUstream stream, bool per_thread_default,
                          const PlannedRegion* regions, size_t n, const CallWrites& writes) {
  const auto refused = [this](ChainRefusal why) {
    stats.chain_refusals[size_t(why)].fetch_add(1, std::memory_order_relaxed);
    return false;
  };
  if (!config_.chain_hashes || !reuse_digests_ || pending == nullptr)
    return refused(ChainRefusal::NotChainable);
  if (deferred_.regions.size() + n > kChainRegions) return refused(ChainRefusal::Full);
  // It may write what the set has still to read: the set goes first.
  for (const auto* list : {writes.outputs, writes.also})
    if (list != nullptr && reaches_deferred_locked(*list)) return refused(ChainRefusal::WritesSet);
  if (stream == nullptr && per_thread_default) stream = CU_STREAM_PER_THREAD;
  const void* stream_key = digest_stream_key(stream);
  std::lock_guard lock(pending_mutex_);
  EngineState* state = engine_for_current_context();
  if (state == nullptr) return refused(ChainRefusal::NotChainable);
  // Every input must be known or one of the set's regions; decided before anything is taken.
  thread_local auto* joins_buffer = new std::vector<PlannedRegion>;  // never freed (exit)
  thread_local auto* known_buffer =
      new std::vector<std::pair<const PlannedRegion*, RegionDigests::Known>>;
  std::vector<PlannedRegion>& joins = *joins_buffer;
  auto& known_inputs = *known_buffer;
  joins.clear();
  known_inputs.clear();
  for (size_t i = 0; i < n; ++i) {
    const PlannedRegion& region = regions[i];
    const bool in_set = std::any_of(
        deferred_.regions.begin(), deferred_.regions.end(),
        [&](const PlannedRegion& d) { return d.ptr == region.ptr && d.bytes == region.bytes; });
    if (in_set) {
      joins.push_back(region);
      continue;
    }
    const auto known = known_input_locked(pending->record, region, state, stream_key);
    if (!known) return refused(ChainRefusal::InputUnknown);
    known_inputs.emplace_back(&region, *known);
  }
  for (const auto& [region, known] : known_inputs)
    take_known_input_locked({pending, region->buffer_index}, *region, known, state);
  if (!joins.empty()) {
    ++pending->outstanding;  // the set's reference, dropped when it is enqueued
    deferred_.add(pending, joins.data(), joins.size());
  }
  stats.chained_calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void Tracer::fingerprint_inputs(PendingRecord* pending, CUstream stream, bool per_thread_default,
                                const PlannedRegion* regions, size_t n, bool not_capturing,
                                const CallWrites* writes) {
  thread_local auto* scratch = new Deferred;  // never freed (exit)
  Deferred& deferred = *scratch;
  if (has_deferred_.load(std::memory_order_acquire)) {
    // A call on a capturing stream is not chained: enqueue_groups skips its inputs.
    uint64_t capture_id = 0;
    const bool chainable = writes != nullptr && config_.chain_hashes &&
                           (not_capturing || !capturing(stream, per_thread_default, &capture_id));
    bool taken = false, same_stream = false;
    {
      std::lock_guard lock(deferred_mutex_);
      if (!deferred_.empty()) {
        const CUcontext ctx = current_context(driver());
        same_stream = deferred_.stream == stream &&
                      deferred_.per_thread_default == per_thread_default &&
                      deferred_.context == ctx;
        if (same_stream && chainable &&
            chain_locked(pending, stream, per_thread_default, regions, n, *writes))
          return;
        if (same_stream && !chainable)
          stats.chain_refusals[size_t(ChainRefusal::NotChainable)].fetch_add(
              1, std::memory_order_relaxed);
        deferred.copy_from(deferred_);
        deferred_.clear();
        has_deferred_.store(false, std::memory_order_release);
        taken = true;
      }
    }
    if (taken && same_stream) {
      // The previous calls on this stream: nothing ran after them, one launch for all.
      const HashGroup inputs{pending, regions, n};
      enqueue_deferred(deferred, &inputs, not_capturing, writes);
      stats.merged_launches.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (taken) {
      stats.deferred_flushes[size_t(FlushCause::OtherStream)].fetch_add(1,
                                                                        std::memory_order_relaxed);
      issue_deferred(deferred);
    }
  }
  fingerprint(pending, stream, per_thread_default, regions, n, not_capturing, writes);
}

// ---- side streams (side_hashes.h) ----------------------------------------------------------------
SideHashes* Tracer::side_hashes_locked() {
  if (SideHashes* side = side_hashes_.load(std::memory_order_relaxed)) return side;
  if (!SideHashes::usable(driver())) return nullptr;
  side_hashes_owned_ = std::make_unique<SideHashes>(driver());
  side_hashes_.store(side_hashes_owned_.get(), std::memory_order_release);
  return side_hashes_owned_.get();
}

void Tracer::join_side_hashes(SideHashes* side) {
  ShimCallGuard guard;
  side->join_all();
}

void Tracer::side_hashes_before_call_slow(SideHashes* side, CUstream stream,
                                          bool per_thread_default, bool writes_known,
                                          const std::vector<PlannedRegion>& outputs,
                                          const std::vector<PlannedRegion>& also) {
  ShimCallGuard guard;
  if (!writes_known) {
    side->join_all();
    return;
  }
  if (stream == nullptr && per_thread_default) stream = CU_STREAM_PER_THREAD;
  thread_local auto* reach_buffer = new std::vector<std::pair<uint64_t, uint64_t>>;
  std::vector<std::pair<uint64_t, uint64_t>>& reach = *reach_buffer;
  reach.clear();
  for (const auto* list : {&outputs, &also})
    for (const PlannedRegion& w : *list) reach.push_back(write_reach(w));
  side->before_writes(stream, reach.data(), reach.size());
}

}  // namespace lockstep::collectors
