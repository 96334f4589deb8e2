// The Tracer's digest collection and retirement: records held for their digests, the
// collector thread that delivers them and stream-done callbacks, retirement (learned
// pointer roles, fill digests), step summaries once a step's records are out, and the
// drain at close.
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "collectors/driver_api.h"
#include "collectors/runtime.h"
#include "common/self_time.h"

namespace lockstep::collectors {

// ---- pending records ------------------------------------------------------------------------
namespace {
constexpr size_t kMaxSparePending = 4096;
}  // namespace

// pending_mutex_ held. The record is moved in (both sides keep their vectors' capacity); the
// caller's gets empty vectors and a stale header (hold()'s contract).
PendingRecord* Tracer::new_pending_locked(trace::Record& record) {
  PendingRecord* pending = nullptr;
  if (!spare_pending_.empty()) {
    pending = spare_pending_.back();
    spare_pending_.pop_back();
  } else {
    pending = new PendingRecord;
  }
  pending->record.take_from(record);
  return pending;
}

PendingRecord* Tracer::hold(trace::Record&& record) {
  self_time::Scope timed(self_time::Phase::Hold);
  std::lock_guard lock(pending_mutex_);
  if (pending_records_ >= kMaxPendingRecords || closing_) return nullptr;
  PendingRecord* pending = new_pending_locked(record);
  ++pending_records_;
  ++pending_per_step_[pending->record.step];
  start_collector_locked();
  return pending;
}

void Tracer::start_collector_locked() {
  if (collector_running_.load(std::memory_order_relaxed)) return;
  collector_ = std::thread([this] { collector_loop(); });
  collector_running_.store(true, std::memory_order_release);
}

bool Tracer::deliver(PendingRecord* pending, uint32_t buffer_index, uint64_t digest, bool valid) {
  // pending_mutex_ held.
  if (valid && buffer_index < pending->record.buffers.size()) {
    auto& entry = pending->record.buffers[buffer_index];
    entry.fingerprint = digest;
    entry.flags |= trace::kFingerprintValid;
  }
  return --pending->outstanding == 0;
}

void Tracer::learn_roles_locked(const PendingRecord& pending) {
  const auto& buffers = pending.record.buffers;
  auto compared = [&](const PendingRecord::RolePair& pair, bool* changed) {
    if (pair.in_index >= buffers.size() || pair.out_index >= buffers.size()) return false;
    const trace::BufferFingerprint &in = buffers[pair.in_index], &out = buffers[pair.out_index];
    if (!(in.flags & out.flags & trace::kFingerprintValid)) return false;
    // Digests of the same bytes only (an enclosing region's may be another one before and after).
    if (in.bytes != out.bytes || in.alloc_offset != out.alloc_offset ||
        ((in.flags ^ out.flags) & trace::kDigestOfEnclosing))
      return false;
    *changed = in.fingerprint != out.fingerprint;
    return true;
  };
  // Some region of this launch changed, or it overwrote one whole: its writes are seen.
  bool evidence = pending.writes_whole;
  for (const auto& pair : pending.role_pairs) {
    bool changed = false;
    if (compared(pair, &changed) && changed) evidence = true;
  }
  for (const auto& pair : pending.role_pairs) {
    bool changed = false;
    if (!compared(pair, &changed)) continue;
    switch (pending.roles->observe(pair.byte_offset, pending.record.step, changed, evidence)) {
      case PointerRoles::Change::None:
        break;
      case PointerRoles::Change::Learned:
        stats.roles_learned.fetch_add(1, std::memory_order_relaxed);
        break;
      case PointerRoles::Change::Contradicted:
        stats.roles_contradicted.fetch_add(1, std::memory_order_relaxed);
        debug(
            fmt::format("pointer learned read-only was written: kernel {}, parameter byte {}, "
                        "seq {} (hashed after every launch from now on)",
                        pending.roles->kernel_name(), pair.byte_offset, pending.record.seq));
        break;
    }
  }
}

void Tracer::retire_locked(PendingRecord* pending) {
  if (pending->roles != nullptr && !pending->discard) learn_roles_locked(*pending);
  if (pending->fill && !pending->discard && pending->fill_index < pending->record.buffers.size()) {
    const trace::BufferFingerprint& out = pending->record.buffers[pending->fill_index];
    if ((out.flags & trace::kFingerprintValid) &&
        !fill_digests_.learn(*pending->fill, out.fingerprint)) {
      stats.fills_differed.fetch_add(1, std::memory_order_relaxed);
      debug(
          fmt::format("a fill wrote other bytes than an earlier fill of the same value and size: "
                      "seq {}, {} bytes (this kind is hashed from now on)",
                      pending->record.seq, out.bytes));
    }
  }
  --pending_records_;
  auto it = pending_per_step_.find(pending->record.step);
  if (it != pending_per_step_.end() && --it->second == 0) pending_per_step_.erase(it);
  if (spare_pending_.size() < kMaxSparePending) {
    pending->reuse();
    spare_pending_.push_back(pending);
  } else {
    delete pending;
  }
  finish_steps_locked();
}

void Tracer::append_held(const PendingRecord& pending) {
  if (pending.state_parts.empty())
    append(pending.record);
  else
    append_state_parts(pending.record, pending.state_parts);
}

void Tracer::complete_locked(PendingRecord* pending) {
  if (!pending->discard) append_held(*pending);
  retire_locked(pending);
}

void Tracer::release(PendingRecord* pending, bool keep) {
  if (pending == nullptr) return;
  std::lock_guard lock(pending_mutex_);
  if (!keep) pending->discard = true;
  if (deliver(pending, UINT32_MAX, 0, false)) complete_locked(pending);
}

void Tracer::when_stream_done(CUstream stream, bool per_thread_default, uint32_t step,
                              std::function<void()> done) {
  const Driver& d = driver();
  if (d.eventCreate == nullptr || d.eventRecord == nullptr || d.eventQuery == nullptr) return;
  if (stream == nullptr && per_thread_default) stream = CU_STREAM_PER_THREAD;
  ShimCallGuard guard;
  CUevent event = nullptr;
  if (d.eventCreate(&event, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) return;
  if (d.eventRecord(event, stream) != CUDA_SUCCESS) {
    d.eventDestroy(event);
    return;
  }
  std::lock_guard lock(pending_mutex_);
  stream_done_.push_back({event, step, std::move(done)});
  ++pending_per_step_[step];
  start_collector_locked();
  collector_wake_.notify_one();
}

bool Tracer::poll_once(std::vector<PendingRecord*>* complete) {
  // pending_mutex_ held by the caller (through the unique_lock in collector_loop).
  for (auto& [ctx, state] : engines_) {
    if (!state.engine) continue;
    state.engine->poll([&](uint64_t slot, uint64_t digest) {
      const size_t at = slot % state.slots.size();
      for (SlotTarget* target : {&state.slots[at], &state.also[at]}) {
        if (target->pending == nullptr) continue;
        PendingRecord* pending = target->pending;
        target->pending = nullptr;
        if (deliver(pending, target->buffer_index, digest, true)) complete->push_back(pending);
      }
      if (state.slot_region[at] != 0) {
        region_digests_.arrived(state.slot_region[at], slot, digest);
        state.slot_region[at] = 0;
      }
      state.waiters.take(slot, [&](const SlotTarget& target) {
        if (deliver(target.pending, target.buffer_index, digest, true))
          complete->push_back(target.pending);
      });
    });
  }
  return pending_records_ > 0 || !stream_done_.empty();
}

void Tracer::collector_loop() {
  ShimCallGuard guard;  // everything this thread does is the shim's own work
  std::unique_lock lock(pending_mutex_);
  std::vector<PendingRecord*> complete;
  while (!closing_) {
    complete.clear();
    const bool busy = poll_once(&complete);
    if (!complete.empty()) {
      // Appended without the lock (the writer is thread-safe), so that launching threads do
      // not wait on the encoding; retired after, so that no step ends before its records.
      lock.unlock();
      for (PendingRecord* pending : complete)
        if (!pending->discard) append_held(*pending);
      lock.lock();
      for (PendingRecord* pending : complete) retire_locked(pending);
    }
    // Completed stream-done events: run their callbacks without the lock.
    std::vector<StreamDone> ready;
    const Driver& d = driver();
    for (size_t i = 0; i < stream_done_.size();) {
      if (d.eventQuery(stream_done_[i].event) == CUDA_SUCCESS) {
        d.eventDestroy(stream_done_[i].event);
        ready.push_back(std::move(stream_done_[i]));
        stream_done_.erase(stream_done_.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
    if (!ready.empty()) {
      lock.unlock();
      for (auto& item : ready) item.done();
      lock.lock();
      for (auto& item : ready) {
        auto it = pending_per_step_.find(item.step);
        if (it != pending_per_step_.end() && --it->second == 0) pending_per_step_.erase(it);
      }
      finish_steps_locked();
      continue;
    }
    take_handed_steps_locked();
    collector_idle_ = !busy;
    collector_wake_.wait_for(lock, busy ? std::chrono::milliseconds(1) : kIdlePoll);
    collector_idle_ = false;
  }
}

// ---- steps ------------------------------------------------------------------------------------
void Tracer::finish_steps_locked() {
  while (!steps_to_end_.empty()) {
    const uint32_t step = steps_to_end_.front();
    if (!pending_per_step_.empty() && pending_per_step_.begin()->first <= step) return;
    hot_.writer->end_step(step);
    steps_to_end_.pop_front();
  }
}

void Tracer::take_handed_steps_locked() {
  thread_local auto* taken_buffer = new std::vector<uint32_t>;  // never freed (exit)
  std::vector<uint32_t>& taken = *taken_buffer;
  {
    std::lock_guard handed(handed_mutex_);
    if (handed_steps_.empty()) return;
    taken.swap(handed_steps_);
  }
  steps_to_end_.insert(steps_to_end_.end(), taken.begin(), taken.end());
  stats.steps_handed.fetch_add(taken.size(), std::memory_order_relaxed);
  taken.clear();
  finish_steps_locked();
}

void Tracer::step_advanced(uint32_t finished, std::string_view marker, uint64_t source,
                           std::optional<uint64_t> job_step) {
  trace::Record record;
  stamp(&record, trace::RecordKind::StepMarker, marker, nullptr, false);
  record.stream = 0;
  record.step = finished + 1;
  record.fields[trace::fields::StepMarker::new_step] = finished + 1;
  record.fields[trace::fields::StepMarker::marker_source] = source;
  if (job_step) {
    record.fields[trace::fields::StepMarker::job_step] = *job_step;
    record.fields[trace::fields::StepMarker::numbered] = 1;
  }
  append(record);
  // The step whose records are all made: under stream-ordered steps another thread's stream may
  // still add records to `finished` (it moves at its next order point, stream_steps.h), but none
  // to the step before it.
  const bool by_streams = stream_steps().enabled();
  if (by_streams) StreamSteps::thread_started(finished + 1);
  if (!by_streams || finished > 0) {
    self_time::Scope ending(self_time::Phase::StepEnd);
    const uint32_t ended = by_streams ? finished - 1 : finished;
    if (collector_running_.load(std::memory_order_acquire)) {
      std::lock_guard handed(handed_mutex_);
      handed_steps_.push_back(ended);
    } else {
      // No collector yet (metrics, or nothing held so far): the marker ends the step, as the
      // collector would, under the lock (records held from now on wait for their step's end).
      std::lock_guard lock(pending_mutex_);
      steps_to_end_.push_back(ended);
      finish_steps_locked();
    }
  }
  if (config_.debug) {
    self_time::Untimed quiet;  // LOCKSTEP_DEBUG's own line: not what the marker costs a job
    debug(fmt::format("step {} -> {} ({})", finished, finished + 1, marker));
  }
}

// ---- shutdown -----------------------------------------------------------------------------------
void Tracer::drain_at_close() {
  {
    // Give digests already on the GPU a moment to arrive (the job has usually synchronized).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    std::unique_lock lock(pending_mutex_);
    ShimCallGuard guard;
    std::vector<PendingRecord*> complete;
    while (pending_records_ > 0 && std::chrono::steady_clock::now() < deadline) {
      complete.clear();
      poll_once(&complete);
      for (PendingRecord* pending : complete) complete_locked(pending);
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      lock.lock();
    }
    closing_ = true;
  }
  collector_wake_.notify_all();
  if (collector_.joinable()) collector_.join();
  {
    std::lock_guard lock(pending_mutex_);
    // Records still waiting: appended without the missing digests, flagged.
    for (auto& [ctx, state] : engines_) {
      for (auto* targets : {&state.slots, &state.also}) {
        for (SlotTarget& target : *targets) {
          if (target.pending == nullptr) continue;
          target.pending->record.buffers[target.buffer_index].flags |= trace::kFingerprintDropped;
          stats.fingerprints_dropped.fetch_add(1, std::memory_order_relaxed);
        }
      }
      state.waiters.for_each([&](const SlotTarget& target) {
        target.pending->record.buffers[target.buffer_index].flags |= trace::kFingerprintDropped;
      });
      stats.fingerprints_dropped.fetch_add(state.waiters.size(), std::memory_order_relaxed);
      for (auto* targets : {&state.slots, &state.also}) {
        for (SlotTarget& target : *targets) {
          if (target.pending == nullptr) continue;
          PendingRecord* pending = target.pending;
          target.pending = nullptr;
          if (deliver(pending, UINT32_MAX, 0, false)) complete_locked(pending);
        }
      }
      state.waiters.for_each([&](const SlotTarget& target) {
        if (deliver(target.pending, UINT32_MAX, 0, false)) complete_locked(target.pending);
      });
      state.waiters.clear();
    }
    pending_per_step_.clear();
    take_handed_steps_locked();
    finish_steps_locked();
  }
}
}  // namespace lockstep::collectors
