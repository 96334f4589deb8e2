// Deferred hashes held across a host synchronization (LOCKSTEP_HOLD_ACROSS_SYNC; runtime.h,
// "held across a host synchronization", and collectors/README.md): the metric copy that keeps
// the set, the copy's return that marks it synced, host waits that leave a synced set alone, the
// event recorded when a synced set is issued, and the waits of other streams on it.
#include <algorithm>
#include <mutex>

#include <fmt/format.h>

#include "collectors/tracer_parts.h"

namespace lockstep::collectors {

bool Tracer::hold_allowed() const {
  const Driver& d = driver();
  return config_.hold_across_sync && config_.merge_hashes && config_.chain_hashes &&
         !config_.side_hashes && !hold_broken_.load(std::memory_order_relaxed) &&
         !capture_begun() && d.eventCreate != nullptr && d.eventRecord != nullptr &&
         d.streamWaitEvent != nullptr;
}

bool Tracer::deferred_on_locked(uintptr_t key, CUcontext ctx) const {
  return !deferred_.empty() && stream_key(deferred_.stream, deferred_.per_thread_default) == key &&
         deferred_.context == ctx;
}

bool Tracer::issue_on_locked(uintptr_t key, CUcontext ctx) const {
  return synced_issue_.generation != 0 && synced_issue_.stream_key == key &&
         synced_issue_.context == ctx;
}

bool Tracer::holdable_locked() const {
  // Not a thread's default stream (one key stands for every thread's); and only where its issue
  // can be ordered before other streams: no other issue outstanding (one at a time), or this
  // stream's.
  const uintptr_t key = stream_key(deferred_.stream, deferred_.per_thread_default);
  return !deferred_.empty() && key != stream_key(nullptr, true) &&
         (synced_issue_.generation == 0 || issue_on_locked(key, deferred_.context));
}

Tracer::HostCopyHold Tracer::before_host_copy(CUstream stream, bool per_thread_default) {
  HostCopyHold hold;
  if (hold_allowed() && (has_deferred_.load(std::memory_order_acquire) ||
                         synced_live_.load(std::memory_order_acquire))) {
    const CUcontext ctx = current_context(driver());
    const uintptr_t key = stream_key(stream, per_thread_default);
    std::lock_guard lock(deferred_mutex_);
    // The outstanding issue this copy may see done: one of this stream and context.
    if (issue_on_locked(key, ctx)) hold.issue_generation = synced_issue_.generation;
    // Only a set of the copy's own stream and context: the copy is ordered after its writers.
    if (deferred_on_locked(key, ctx) && holdable_locked()) {
      hold.set_generation = deferred_.generation;
      return hold;
    }
  }
  flush_deferred(FlushCause::OtherCall);
  return hold;
}

void Tracer::host_copy_returned(CUstream stream, bool per_thread_default,
                                const HostCopyHold& hold) {
  if (hold.set_generation == 0 && hold.issue_generation == 0) return;
  const CUcontext ctx = current_context(driver());
  std::lock_guard lock(deferred_mutex_);
  // The copy came after everything queued on its stream before it, the issue's event too.
  if (hold.issue_generation != 0 && synced_issue_.generation == hold.issue_generation)
    end_issue_locked();
  // Unchanged since the copy began (no other thread added to it): every writer of its regions
  // was queued before the copy, and the copy is done.
  if (hold.set_generation != 0 && deferred_.generation == hold.set_generation &&
      deferred_on_locked(stream_key(stream, per_thread_default), ctx) && !deferred_.synced) {
    deferred_.synced = true;
    stats.sets_held_across_sync.fetch_add(1, std::memory_order_relaxed);
  }
}

HostWait Tracer::hold_at_host_wait(CUstream stream, bool per_thread_default, bool whole_context,
                                   CUcontext context) {
  HostWait wait;
  if (!hold_allowed()) {
    flush_deferred(FlushCause::OrderPoint);  // side hashes joined too
    return wait;
  }
  if (!has_deferred_.load(std::memory_order_acquire) &&
      !synced_live_.load(std::memory_order_acquire))
    return wait;
  const CUcontext ctx = current_context(driver());
  const uintptr_t key = stream_key(stream, per_thread_default);
  {
    std::lock_guard lock(deferred_mutex_);
    // A whole-context wait covers the issue only when it is of the context waited on (another
    // context's synchronize leaves this one's hashes unseen).
    if (whole_context ? synced_issue_.generation != 0 &&
                            synced_issue_.context == (context != nullptr ? context : ctx)
                      : issue_on_locked(key, ctx))
      wait.issue_generation = synced_issue_.generation;
    if (deferred_.empty()) return wait;
    // Whatever the host waits for, the wait queues nothing: the set still reads what its
    // writers left, and marked synced it is ordered before other streams once issued.
    if (holdable_locked()) {
      if (!deferred_.synced) {
        deferred_.synced = true;
        stats.sets_held_across_sync.fetch_add(1, std::memory_order_relaxed);
      }
      return wait;
    }
  }
  flush_deferred(FlushCause::OrderPoint);
  return wait;
}

void Tracer::host_saw_issue_done(uint64_t issue_generation) {
  std::lock_guard lock(deferred_mutex_);
  if (synced_issue_.generation == issue_generation) end_issue_locked();  // else issued again
}

void Tracer::end_issue_locked() {
  synced_issue_.generation = 0;
  synced_issue_.waited.clear();
  synced_live_.store(false, std::memory_order_release);
}

void Tracer::synced_set_issued(const Deferred& deferred) {
  if (!deferred.synced) return;
  const Driver& d = driver();
  std::lock_guard lock(deferred_mutex_);
  CUevent event = nullptr;
  for (const auto& [ctx, e] : synced_events_)
    if (ctx == deferred.context) event = e;
  ShimCallGuard guard;  // the shim's own calls
  if (event == nullptr) {
    if (d.eventCreate(&event, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) event = nullptr;
    if (event != nullptr) synced_events_.emplace_back(deferred.context, event);
  }
  if (event == nullptr || d.eventRecord(event, deferred.stream) != CUDA_SUCCESS) {
    // Nothing to order other streams with (never seen): hold no set again.
    stats.synced_failures.fetch_add(1, std::memory_order_relaxed);
    hold_broken_.store(true, std::memory_order_relaxed);
    debug("an event after held hashes could not be recorded: no longer held across copies");
    return;
  }
  synced_issue_.context = deferred.context;
  synced_issue_.stream_key = stream_key(deferred.stream, false);
  synced_issue_.event = event;
  synced_issue_.generation = synced_issues_.fetch_add(1, std::memory_order_release) + 1;
  synced_issue_.waited.clear();
  synced_key_.store(synced_issue_.stream_key, std::memory_order_relaxed);
  synced_context_.store(synced_issue_.context, std::memory_order_relaxed);
  synced_live_.store(true, std::memory_order_release);
  stats.synced_sets_issued.fetch_add(1, std::memory_order_relaxed);
}

void Tracer::before_work_on_slow(CUstream stream, bool per_thread_default) {
  const Driver& d = driver();
  const CUcontext ctx = current_context(d);
  const uintptr_t key = stream_key(stream, per_thread_default);
  // The issue's own stream, without the lock (while an issue is outstanding, every call comes
  // here). Stored before synced_live_ was: at least as new as the issue seen outstanding.
  if (key == synced_key_.load(std::memory_order_relaxed) &&
      ctx == synced_context_.load(std::memory_order_relaxed))
    return;
  std::lock_guard lock(deferred_mutex_);
  if (synced_issue_.generation == 0 || issue_on_locked(key, ctx)) return;  // none, or in order
  const std::pair<uintptr_t, CUcontext> here{key, ctx};
  auto& waited = synced_issue_.waited;
  if (std::find(waited.begin(), waited.end(), here) != waited.end()) return;
  uint64_t capture_id = 0;
  // Captured work runs at a graph launch, itself a traced call that waits.
  if (capture_begun() && capturing(stream, per_thread_default, &capture_id)) return;
  ShimCallGuard guard;
  const CUstream target = stream == nullptr && per_thread_default ? CU_STREAM_PER_THREAD : stream;
  if (d.streamWaitEvent(target, synced_issue_.event, 0) != CUDA_SUCCESS) {
    stats.synced_failures.fetch_add(1, std::memory_order_relaxed);
    debug(fmt::format("a stream could not be made to wait for held hashes ({:#x})", key));
    return;
  }
  // One key stands for every thread's default stream: those wait each time.
  if (key != stream_key(nullptr, true)) waited.push_back(here);
  stats.synced_waits.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace lockstep::collectors
