// The Tracer's record of device writes for reused input digests (region_digests.h, README
// "Reused input digests at full"): what a call, a free or a recalled fill changes.
#include <mutex>

#include "collectors/tracer_parts.h"

namespace lockstep::collectors {

// ---- reused input digests -----------------------------------------------------------------------
void Tracer::writes_begin(const void* owner, const std::vector<PlannedRegion>& outputs,
                          const std::vector<PlannedRegion>& also) {
  if (!reuse_digests_ || (outputs.empty() && also.empty())) return;
  std::lock_guard lock(pending_mutex_);
  for (const auto* regions : {&outputs, &also}) {
    for (const PlannedRegion& region : *regions) {
      const auto [start, end] = write_reach(region);
      region_digests_.written(start, end, region.alloc_base);
      region_digests_.write_begins(owner, start, end);
    }
  }
}

void Tracer::unknown_writes_begin() {
  if (!reuse_digests_) return;
  std::lock_guard lock(pending_mutex_);
  if (region_digests_.size() != 0) stats.digests_forgotten.fetch_add(1, std::memory_order_relaxed);
  region_digests_.forget_all();
  region_digests_.unknown_write_begins();
}

void Tracer::writes_end(const void* owner, bool unknown) {
  if (!reuse_digests_) return;
  std::lock_guard lock(pending_mutex_);
  region_digests_.writes_end(owner, unknown);
}

void Tracer::region_written(uint64_t ptr, uint64_t end, uint64_t alloc_base) {
  if (!reuse_digests_) return;
  std::lock_guard lock(pending_mutex_);
  region_digests_.written(ptr, end, alloc_base);
}

void Tracer::region_recalled(const void* owner, const PlannedRegion& region, CUstream stream,
                             bool per_thread_default, uint64_t digest) {
  if (!reuse_digests_) return;
  if (stream == nullptr && per_thread_default) stream = CU_STREAM_PER_THREAD;
  std::lock_guard lock(pending_mutex_);
  EngineState* state = engine_for_current_context();
  if (state == nullptr) return;
  region_digests_.recalled(region.ptr, region.bytes, region.alloc_base, state,
                           digest_stream_key(stream), digest, owner);
}

void Tracer::region_allocated(uint64_t base, uint64_t bytes, bool from_pool) {
  // Without skipping or carrying, nothing to note: the free before it forgot that memory's
  // digests.
  const bool carry = carry_freed_ && from_pool;
  if (!skip_unwritten_ && !carry) return;
  std::lock_guard lock(pending_mutex_);
  if (carry && region_digests_.allocated_from_pool(base, bytes)) {
    stats.digests_carried.fetch_add(1, std::memory_order_relaxed);
    stats.bytes_carried.fetch_add(bytes, std::memory_order_relaxed);
    return;
  }
  if (skip_unwritten_) region_digests_.allocated(base, bytes);
}

void Tracer::region_freed_to_pool(uint64_t base, uint64_t end) {
  if (!reuse_digests_) return;
  std::lock_guard lock(pending_mutex_);
  freed_to_pool_locked(base, end);
}

void Tracer::freed_to_pool_locked(uint64_t base, uint64_t end) {
  if (carry_freed_)
    region_digests_.freed_to_pool(base, end);
  else
    region_digests_.written(base, end, base);
}

}  // namespace lockstep::collectors
