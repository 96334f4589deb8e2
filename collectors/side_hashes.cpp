// SideHashes (side_hashes.h): side streams, their events, and the sets in flight on them.
#include "collectors/side_hashes.h"

namespace lockstep::collectors {

namespace {
// The stream handle's context is the current one for the legacy and per-thread default
// streams: a wait queued from another context's thread must make the set's context current.
class ContextScope {
 public:
  ContextScope(const Driver& d, CUcontext ctx) : d_(d) {
    CUcontext current = nullptr;
    if (ctx != nullptr && d.ctxGetCurrent(&current) == CUDA_SUCCESS && current != ctx)
      pushed_ = d.ctxPushCurrent(ctx) == CUDA_SUCCESS;
  }
  ~ContextScope() {
    CUcontext popped = nullptr;
    if (pushed_) d_.ctxPopCurrent(&popped);
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  const Driver& d_;
  bool pushed_ = false;
};
}  // namespace

SideHashes::Side* SideHashes::side_for_locked(CUcontext ctx, CUstream stream) {
  for (Side& s : sides_)
    if (s.ctx == ctx && s.job == stream) return s.side != nullptr ? &s : nullptr;
  if (sides_.size() >= kMaxStreams) return nullptr;
  if (sides_.capacity() < kMaxStreams) sides_.reserve(kMaxStreams);
  Side& s = sides_.emplace_back();
  s.ctx = ctx;
  s.job = stream;
  // Made once per job stream; a failure leaves the entry without a side stream (in-stream for
  // good: no retry per launch).
  bool ok = d_.streamCreate(&s.side, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
            d_.eventCreate(&s.queued, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS;
  for (CUevent& e : s.hashed)
    ok = ok && d_.eventCreate(&e, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS;
  if (!ok) {
    ++stats_.failures;
    s.side = nullptr;  // what was made stays (a handful of handles, once)
    return nullptr;
  }
  return &s;
}

CUstream SideHashes::begin(CUcontext ctx, CUstream stream) {
  // The per-thread default stream is another stream in every thread: a join from another
  // thread would wait on the wrong one.
  if (stream == CU_STREAM_PER_THREAD) return nullptr;
  std::lock_guard lock(mutex_);
  if (broken_) return nullptr;
  Side* s = side_for_locked(ctx, stream);
  if (s == nullptr) return nullptr;
  if (d_.eventRecord(s->queued, stream) != CUDA_SUCCESS ||
      d_.streamWaitEvent(s->side, s->queued, 0) != CUDA_SUCCESS) {
    ++stats_.failures;
    return nullptr;  // a record without its wait orders nothing: in-stream is still sound
  }
  return s->side;
}

void SideHashes::end(CUcontext ctx, CUstream stream, const std::pair<uint64_t, uint64_t>* regions,
                     size_t n, bool launched) {
  std::lock_guard lock(mutex_);
  if (!launched) return;
  Side* s = side_for_locked(ctx, stream);
  if (s == nullptr) return;
  ++stats_.launches;
  // The oldest set is joined before its event can come round again (kEvents > kMaxPending).
  if (pending_.size() >= kMaxPending) {
    wait_locked(pending_.front().side->job, pending_.front());
    pending_.erase(pending_.begin());
    ++stats_.evictions;
  }
  Set set;
  set.side = s;
  set.hashed = s->hashed[s->next_event];
  s->next_event = (s->next_event + 1) % kEvents;
  if (d_.eventRecord(set.hashed, s->side) != CUDA_SUCCESS) {
    // Nothing to order a writer after: no more side launches (a driver that fails an event
    // record fails the job's own calls too; the set's digests are what the GPU read).
    ++stats_.failures;
    broken_ = true;
    return;
  }
  set.regions.assign(regions, regions + n);
  pending_.push_back(std::move(set));
  count_locked();
}

void SideHashes::wait_locked(CUstream stream, const Set& set) {
  ContextScope scope(d_, set.side->ctx);
  if (d_.streamWaitEvent(stream, set.hashed, 0) != CUDA_SUCCESS) ++stats_.failures;
}

void SideHashes::before_writes(CUstream stream, const std::pair<uint64_t, uint64_t>* writes,
                               size_t n) {
  if (!pending()) return;
  std::lock_guard lock(mutex_);
  const auto reaches = [&](const Set& set) {
    for (size_t i = 0; i < n; ++i)
      for (const auto& [start, end] : set.regions)
        if (start < writes[i].second && writes[i].first < end) return true;
    return false;
  };
  CUcontext current = nullptr;
  d_.ctxGetCurrent(&current);
  auto it = pending_.begin();
  while (it != pending_.end()) {
    if (!reaches(*it)) {
      ++it;
      continue;
    }
    // The writer's stream is of the current context; the wait needs no context switch.
    if (d_.streamWaitEvent(stream, it->hashed, 0) != CUDA_SUCCESS) ++stats_.failures;
    ++stats_.writer_waits;
    if (it->side->job == stream && it->side->ctx == current)
      it = pending_.erase(it);
    else
      ++it;
  }
  count_locked();
}

void SideHashes::join_all() {
  if (!pending()) return;
  std::lock_guard lock(mutex_);
  for (const Set& set : pending_) {
    wait_locked(set.side->job, set);
    ++stats_.joins;
  }
  pending_.clear();
  count_locked();
}

SideHashes::Stats SideHashes::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace lockstep::collectors
