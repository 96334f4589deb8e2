#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include <fmt/format.h>

#include "collectors/driver_api.h"
#include "collectors/runtime.h"
#include "common/self_time.h"
#include "common/hot.h"

namespace lockstep::collectors {
namespace {

// The calling thread's current context; null without one or without a driver (CPU tests).
CUcontext current_context(const Driver& d) {
  CUcontext ctx = nullptr;
  if (d.ctxGetCurrent != nullptr) d.ctxGetCurrent(&ctx);
  return ctx;
}

// The stream a digest in flight serves (region_digests.h). The per-thread default stream is one
// handle for a different stream in every thread: its digests serve only the thread that hashed
// them, so its key is a per-thread address.
const void* digest_stream_key(CUstream stream) {
  thread_local const char per_thread_stream_key = 0;
  return stream == CU_STREAM_PER_THREAD ? static_cast<const void*>(&per_thread_stream_key)
                                        : static_cast<const void*>(stream);
}

// What a write through region.ptr may reach: anywhere in its allocation's mapped run, before
// ptr (negative offsets) and past a clamped extent. [first, second).
std::pair<uint64_t, uint64_t> write_reach(const PlannedRegion& region) {
  return {region.alloc_base != 0 ? region.alloc_base : region.ptr,
          std::max<uint64_t>(region.run_end, region.ptr + region.bytes)};
}

}  // namespace

OpenApi& open_api() {
  thread_local OpenApi state;
  return state;
}

StepCounter& Tracer::steps() {
  static StepCounter* counter = [] {
    const Config& config = configuration().config;
    return new StepCounter(config.step_source, config.step_pattern);
  }();
  return *counter;
}

Tracer::Tracer(const Config& config, std::unique_ptr<trace::TraceWriter> writer)
    : config_(config),
      writer_(std::move(writer)),
      reuse_digests_(config.reuse_digests && config.level == Level::Full),
      skip_unwritten_(reuse_digests_ && config.skip_unwritten),
      learn_roles_(config.learn_read_only && config.level == Level::Full),
      recall_fills_(config.recall_fills && config.level == Level::Full) {
  if (!config.kernels.empty()) kernel_filter_.emplace(config.kernels, std::regex::ECMAScript);
}

void Tracer::debug(const std::string& line) const {
  if (config_.debug) std::fprintf(stderr, "lockstep[%d]: %s\n", static_cast<int>(getpid()), line.c_str());
}

namespace {
// The last stream this thread used, asked first: launches come in runs on one stream.
struct LastStream {
  const Tracer* tracer;
  uintptr_t key;
  uint32_t ordinal;
};
thread_local LastStream t_last_stream{nullptr, 0, 0};
}  // namespace

LOCKSTEP_HOT uint32_t Tracer::stream_ordinal(CUstream stream, bool per_thread_default) {
  uintptr_t key = reinterpret_cast<uintptr_t>(stream);
  if (key == 0) key = per_thread_default ? reinterpret_cast<uintptr_t>(CU_STREAM_PER_THREAD)
                                         : reinterpret_cast<uintptr_t>(CU_STREAM_LEGACY);
  const LastStream& last = t_last_stream;
  if (last.tracer == this && last.key == key) [[likely]] return last.ordinal;
  return other_stream_ordinal(key);
}

uint32_t Tracer::other_stream_ordinal(uintptr_t key) {
  LastStream& last = t_last_stream;
  // Heap, never freed: records are still made during exit, after thread_local destructors.
  thread_local auto* cache = new std::unordered_map<uintptr_t, uint32_t>;
  if (auto it = cache->find(key); it != cache->end()) {
    last = {this, key, it->second};
    return it->second;
  }
  uint32_t ordinal;
  {
    std::lock_guard lock(streams_mutex_);
    auto [it, inserted] = streams_.try_emplace(key, static_cast<uint32_t>(streams_.size() + 1));
    ordinal = it->second;
  }
  if (cache->size() < 4096) cache->emplace(key, ordinal);
  last = {this, key, ordinal};
  return ordinal;
}

namespace {
struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};
}  // namespace

LOCKSTEP_HOT trace::StringId Tracer::intern(std::string_view text) {
  if (text.empty()) return 0;  // the string table's id of "" (most records' stamp)
  // Heap, never freed: records are still made during exit, after thread_local destructors.
  thread_local auto* cache =
      new std::unordered_map<std::string, trace::StringId, TextHash, std::equal_to<>>;
  thread_local const trace::TraceWriter* cached_for = nullptr;
  if (cached_for != writer_.get()) {  // ids are per file: a forked child's tracer starts afresh
    cache->clear();
    cached_for = writer_.get();
  }
  if (auto it = cache->find(text); it != cache->end()) return it->second;
  const trace::StringId id = writer_->intern(text);
  if (cache->size() < 4096) cache->emplace(std::string(text), id);
  return id;
}

LOCKSTEP_HOT uint32_t Tracer::thread_ordinal() {
  thread_local uint32_t ordinal = 0;
  if (ordinal == 0) ordinal = next_thread_.fetch_add(1, std::memory_order_relaxed) + 1;
  return ordinal;
}

LOCKSTEP_HOT void Tracer::stamp(trace::Record* record, trace::RecordKind kind, std::string_view name,
                   CUstream stream, bool per_thread_default) {
  record->kind = kind;
  record->seq = next_seq();
  record->stream = stream_ordinal(stream, per_thread_default);
  record->step = steps().current();
  record->thread = thread_ordinal();
  record->name = name.empty() ? 0 : intern(name);  // "" (a kernel's, named later): no call
}

void Tracer::add_buffer(trace::Record* record, std::vector<PlannedRegion>* plan,
                        trace::StringId label, trace::Role role, trace::DType dtype,
                        const void* ptr, uint64_t bytes, bool exact, bool hash, uint64_t cap,
                        const std::optional<AllocationHit>& hit) {
  if (ptr == nullptr || bytes == 0) return;
  trace::BufferFingerprint entry;
  entry.role = role;
  entry.dtype = dtype;
  entry.label = label;
  entry.bytes = bytes;
  if (exact) entry.flags |= trace::kExtentExact;
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  uint64_t hashable = bytes;
  if (hit) {
    entry.alloc_ordinal = hit->ordinal;
    entry.alloc_offset = hit->offset;
    hashable = std::min(hashable, hit->readable);
  } else if (!exact) {
    hashable = 0;
  }
  if (hashable > cap) hashable = cap;
  if (hashable < bytes) {
    entry.flags |= trace::kExtentClamped;
    entry.bytes = hashable;
  }
  record->buffers.push_back(entry);
  if (hash && plan != nullptr && hashable > 0)
    plan->push_back({static_cast<CUdeviceptr>(address), hashable,
                     static_cast<uint32_t>(record->buffers.size() - 1), hit ? hit->base : 0,
                     hit ? address + hit->readable : 0});
}

LOCKSTEP_HOT void Tracer::append(const trace::Record& record) {
  if (closed_.load(std::memory_order_relaxed)) return;
  self_time::Scope timed(self_time::Phase::Append);
  writer_->append(record);
}

void Tracer::warn(WarningCode code, uint64_t count, std::string_view message) {
  trace::Record record;
  stamp(&record, trace::RecordKind::Warning, message, nullptr, false);
  record.stream = 0;
  record.fields[trace::fields::Warning::code] = static_cast<uint64_t>(code);
  record.fields[trace::fields::Warning::count] = count;
  append(record);
}

bool Tracer::kernel_selected(std::string_view name) const {
  if (!kernel_filter_) return true;
  return std::regex_search(name.begin(), name.end(), *kernel_filter_);
}

bool Tracer::capturing(CUstream stream, bool per_thread_default, uint64_t* capture_id,
                       CUgraph* graph) {
  *capture_id = 0;
  const Driver& d = driver();
  if (d.streamGetCaptureInfo == nullptr) return false;
  if (stream == nullptr && per_thread_default) stream = CU_STREAM_PER_THREAD;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  ShimCallGuard guard;
  CUresult result = [&] {
    self_time::Scope timed(self_time::Phase::CaptureQuery);
    return d.streamGetCaptureInfo(stream, &status, &id, graph, nullptr, nullptr, nullptr);
  }();
  if (result != CUDA_SUCCESS) return true;  // e.g. implicit capture of the legacy stream: hands off
  if (status == CU_STREAM_CAPTURE_STATUS_NONE) return false;
  *capture_id = id;
  return true;
}

// ---- pending records ------------------------------------------------------------------------
PendingRecord* Tracer::hold(trace::Record&& record) {
  self_time::Scope timed(self_time::Phase::Hold);
  std::lock_guard lock(pending_mutex_);
  if (pending_records_ >= kMaxPendingRecords || closing_) return nullptr;
  auto* pending = new PendingRecord{std::move(record), 1};
  ++pending_records_;
  ++pending_per_step_[pending->record.step];
  if (!collector_running_) {
    collector_running_ = true;
    collector_ = std::thread([this] { collector_loop(); });
  }
  return pending;
}

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
  // Registered after CUDA is up, so it runs before CUDA's own exit teardown (atexit is LIFO).
  std::atexit(close_at_exit);
  return &state;
}

void Tracer::fingerprint(PendingRecord* pending, CUstream stream, bool per_thread_default,
                         const PlannedRegion* regions, size_t n, bool not_capturing) {
  if (pending == nullptr || n == 0) return;
  const HashGroup group{pending, regions, n};
  enqueue_groups(stream, per_thread_default, &group, 1, not_capturing);
}

void Tracer::enqueue_groups(CUstream stream, bool per_thread_default, const HashGroup* groups,
                            size_t count, bool not_capturing) {
  size_t total = 0;
  for (size_t g = 0; g < count; ++g) total += groups[g].n;
  if (total == 0) return;
  uint64_t capture_id = 0;
  if (!not_capturing && capturing(stream, per_thread_default, &capture_id)) {
    capture_skipped.fetch_add(total, std::memory_order_relaxed);
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
  for (size_t g = 0; g < count; ++g) {
    // Against earlier groups only: a group's own regions are distinct (a GEMM whose A is its B
    // aside, hashed twice), and a graph replay's thousands are not compared with each other.
    const size_t earlier = all.size();
    for (size_t i = 0; i < groups[g].n; ++i) {
      const PlannedRegion& region = groups[g].regions[i];
      const SlotTarget owner{groups[g].pending, region.buffer_index};
      // The same bytes earlier in this launch (an output the next call reads, nothing ran
      // between that could write it): hashed once, the digest fills both records.
      size_t same = 0;
      while (same < earlier && !(all[same].ptr == region.ptr && all[same].bytes == region.bytes))
        ++same;
      if (same < earlier) {
        if (also[same].pending == nullptr) also[same] = owner;
        else extra.emplace_back(same, owner);
        continue;
      }
      // Inputs only: an output is hashed after its own write, whatever was known before.
      if (reuse) {
        if (const auto known = known_input_locked(owner.pending->record, region, state, stream_key)) {
          take_known_input_locked(owner, region, *known, state);
          continue;
        }
      }
      // A kernel's region inside a larger region of the same launch's own pointers, hashed in
      // this launch or known (the k and v views of one qkv tensor, inside q's region, each
      // running to the allocation's end): that region's digest, and the entry says so
      // (trace::kDigestOfEnclosing). Only its own: a word that merely looks like a pointer into
      // another op's region would then be hashed before and after over other bytes, and never
      // learned read-only.
      const auto own_region = [&](uint64_t ptr, uint64_t bytes) {
        for (size_t j = 0; j < groups[g].n; ++j)
          if (groups[g].regions[j].ptr == ptr && groups[g].regions[j].bytes == bytes) return true;
        return false;
      };
      if (owner.pending->record.kind == trace::RecordKind::Kernel && region.alloc_base != 0) {
        size_t k = 0;
        while (k < all.size() &&
               !(bases[k] == region.alloc_base && all[k].ptr <= region.ptr &&
                 region.ptr + region.bytes <= all[k].ptr + all[k].bytes &&
                 own_region(all[k].ptr, all[k].bytes)))
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
          if (known && own_region(start, length)) {
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
    fingerprints_dropped.fetch_add(flagged, std::memory_order_relaxed);
  };
  if (state == nullptr) {
    flag_dropped(0, n);
    return;
  }
  hashing::HashEngine* engine = state->engine.get();
  const uint64_t ring = state->slots.size();
  // One launch per kMaxRegionsPerEnqueue regions (a graph replay can reach thousands).
  for (size_t start = 0; start < n; start += hashing::kMaxRegionsPerEnqueue) {
    const size_t chunk = std::min<size_t>(n - start, hashing::kMaxRegionsPerEnqueue);
    uint64_t first = 0;
    bool enqueued = false;
    {
      self_time::Scope launching(self_time::Phase::EngineLaunch);
      enqueued = engine->enqueue(stream, all.data() + start, static_cast<uint32_t>(chunk), &first);
    }
    if (!enqueued) {
      flag_dropped(start, start + chunk);
      continue;
    }
    for (size_t i = 0; i < chunk; ++i) {
      const uint64_t slot = (first + i) % ring;
      state->slots[slot] = owners[start + i];
      ++owners[start + i].pending->outstanding;
      state->also[slot] = also[start + i];
      if (also[start + i].pending != nullptr) {
        ++also[start + i].pending->outstanding;
        regions_shared.fetch_add(1, std::memory_order_relaxed);
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
      state->waiters.emplace(first + (index - start), target);
      ++target.pending->outstanding;
      regions_shared.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // A busy collector polls every millisecond: waking it per call would cost a futex call and a
  // context switch per kernel launch.
  if (collector_idle_) collector_wake_.notify_one();
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
  regions_enclosed.fetch_add(1, std::memory_order_relaxed);
  bytes_enclosed.fetch_add(region.bytes, std::memory_order_relaxed);
}

void Tracer::take_known_input_locked(const SlotTarget& owner, const PlannedRegion& region,
                                     const RegionDigests::Known& known, EngineState* state) {
  auto& entry = owner.pending->record.buffers[owner.buffer_index];
  if (known.fresh) {
    entry.flags |= trace::kNotWrittenSinceAlloc;
    inputs_unwritten.fetch_add(1, std::memory_order_relaxed);
    bytes_unwritten.fetch_add(region.bytes, std::memory_order_relaxed);
  } else if (known.arrived) {
    entry.fingerprint = known.digest;
    entry.flags |= trace::kFingerprintValid;
    digests_reused.fetch_add(1, std::memory_order_relaxed);
    bytes_not_reread.fetch_add(region.bytes, std::memory_order_relaxed);
  } else {
    state->waiters.emplace(known.slot, owner);
    ++owner.pending->outstanding;
    digests_awaited.fetch_add(1, std::memory_order_relaxed);
    bytes_not_reread.fetch_add(region.bytes, std::memory_order_relaxed);
  }
}

// ---- reused input digests -------------------------------------------------------------------------
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
  if (region_digests_.size() != 0) digests_forgotten.fetch_add(1, std::memory_order_relaxed);
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

void Tracer::region_allocated(uint64_t base, uint64_t bytes) {
  // Without skipping, nothing to note: the free before it forgot that memory's digests.
  if (!skip_unwritten_) return;
  std::lock_guard lock(pending_mutex_);
  region_digests_.allocated(base, bytes);
}

// ---- merged hash launches ------------------------------------------------------------------------
void Tracer::defer_outputs(PendingRecord* pending, CUstream stream, bool per_thread_default,
                           std::vector<PlannedRegion>& regions, bool not_capturing) {
  if (pending == nullptr || regions.empty()) return;
  uint64_t capture_id = 0;
  if (!config_.merge_hashes ||
      (!not_capturing && capturing(stream, per_thread_default, &capture_id))) {
    // Now (merging off), or not at all (capturing: fingerprint() counts them skipped).
    fingerprint(pending, stream, per_thread_default, regions.data(), regions.size(),
                not_capturing);
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
    deferred_flushes[size_t(cause)].fetch_add(1, std::memory_order_relaxed);
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

void Tracer::enqueue_deferred(Deferred& deferred, const HashGroup* extra, bool not_capturing) {
  thread_local auto* groups_buffer = new std::vector<HashGroup>;  // never freed (exit)
  std::vector<HashGroup>& groups = *groups_buffer;
  groups.clear();
  size_t begin = 0;
  for (size_t k = 0; k < deferred.owners.size(); ++k) {
    groups.push_back({deferred.owners[k], deferred.regions.data() + begin, deferred.ends[k] - begin});
    begin = deferred.ends[k];
  }
  if (extra != nullptr && extra->pending != nullptr && extra->n > 0) groups.push_back(*extra);
  enqueue_groups(deferred.stream, deferred.per_thread_default, groups.data(), groups.size(),
                 not_capturing);
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

bool Tracer::defer_free(CUdeviceptr ptr, uint64_t end, CUstream stream,
                        bool per_thread_default) {
  const Driver& d = driver();
  if (!config_.merge_hashes || d.memFreeAsync == nullptr || ptr == 0 ||
      !has_deferred_.load(std::memory_order_acquire))
    return false;
  const CUcontext ctx = current_context(d);
  if (stream == nullptr && per_thread_default) stream = CU_STREAM_PER_THREAD;
  std::lock_guard lock(deferred_mutex_);
  if (deferred_.empty()) return false;
  deferred_.frees.push_back({ptr, end, stream, ctx});
  frees_deferred.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void Tracer::issue_frees(Deferred& deferred) {
  if (deferred.frees.empty()) return;
  if (reuse_digests_) {
    // The deferred hashes just enqueued may have recorded digests of the freed memory.
    std::lock_guard lock(pending_mutex_);
    for (const DeferredFree& free : deferred.frees)
      region_digests_.written(free.ptr, free.end, free.ptr);
  }
  const Driver& d = driver();
  ShimCallGuard guard;  // the shim's own calls
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
  deferred_flushes[size_t(cause)].fetch_add(1, std::memory_order_relaxed);
  issue_deferred(*scratch);
}

bool Tracer::chain_locked(PendingRecord* pending, CUstream stream, bool per_thread_default,
                          const PlannedRegion* regions, size_t n, const CallWrites& writes) {
  if (!config_.chain_hashes || !reuse_digests_ || pending == nullptr) return false;
  if (deferred_.regions.size() + n > kChainRegions) return false;
  // It may write what the set has still to read: the set goes first.
  for (const auto* list : {writes.outputs, writes.also})
    if (list != nullptr && reaches_deferred_locked(*list)) return false;
  if (stream == nullptr && per_thread_default) stream = CU_STREAM_PER_THREAD;
  const void* stream_key = digest_stream_key(stream);
  std::lock_guard lock(pending_mutex_);
  EngineState* state = engine_for_current_context();
  if (state == nullptr) return false;
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
    if (!known) return false;
    known_inputs.emplace_back(&region, *known);
  }
  for (const auto& [region, known] : known_inputs)
    take_known_input_locked({pending, region->buffer_index}, *region, known, state);
  if (!joins.empty()) {
    ++pending->outstanding;  // the set's reference, dropped when it is enqueued
    deferred_.add(pending, joins.data(), joins.size());
  }
  chained_calls.fetch_add(1, std::memory_order_relaxed);
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
    const bool chainable =
        writes != nullptr && config_.chain_hashes &&
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
        deferred.copy_from(deferred_);
        deferred_.clear();
        has_deferred_.store(false, std::memory_order_release);
        taken = true;
      }
    }
    if (taken && same_stream) {
      // The previous calls on this stream: nothing ran after them, one launch for all.
      const HashGroup inputs{pending, regions, n};
      enqueue_deferred(deferred, &inputs, not_capturing);
      merged_launches.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (taken) {
      deferred_flushes[size_t(FlushCause::OtherStream)].fetch_add(1, std::memory_order_relaxed);
      issue_deferred(deferred);
    }
  }
  fingerprint(pending, stream, per_thread_default, regions, n, not_capturing);
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
  bool evidence = false;  // some region of this launch changed: its writes are seen
  for (const auto& pair : pending.role_pairs) {
    bool changed = false;
    if (compared(pair, &changed) && changed) evidence = true;
  }
  for (const auto& pair : pending.role_pairs) {
    bool changed = false;
    if (!compared(pair, &changed)) continue;
    switch (pending.roles->observe(pair.byte_offset, pending.record.step, changed, evidence)) {
      case PointerRoles::Change::None: break;
      case PointerRoles::Change::Learned:
        roles_learned.fetch_add(1, std::memory_order_relaxed);
        break;
      case PointerRoles::Change::Contradicted:
        roles_contradicted.fetch_add(1, std::memory_order_relaxed);
        debug(fmt::format("pointer learned read-only was written: kernel {}, parameter byte {}, "
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
    if ((out.flags & trace::kFingerprintValid) && !fill_digests_.learn(*pending->fill, out.fingerprint)) {
      fills_differed.fetch_add(1, std::memory_order_relaxed);
      debug(fmt::format("a fill wrote other bytes than an earlier fill of the same value and size: "
                        "seq {}, {} bytes (this kind is hashed from now on)",
                        pending->record.seq, out.bytes));
    }
  }
  --pending_records_;
  auto it = pending_per_step_.find(pending->record.step);
  if (it != pending_per_step_.end() && --it->second == 0) pending_per_step_.erase(it);
  delete pending;
  finish_steps_locked();
}

void Tracer::complete_locked(PendingRecord* pending) {
  if (!pending->discard) append(pending->record);
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
  if (!collector_running_) {
    collector_running_ = true;
    collector_ = std::thread([this] { collector_loop(); });
  }
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
      if (!state.waiters.empty()) {
        const auto [first, last] = state.waiters.equal_range(slot);
        for (auto it = first; it != last; ++it)
          if (deliver(it->second.pending, it->second.buffer_index, digest, true))
            complete->push_back(it->second.pending);
        state.waiters.erase(first, last);
      }
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
        if (!pending->discard) append(pending->record);
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
    collector_idle_ = !busy;
    collector_wake_.wait_for(lock, busy ? std::chrono::milliseconds(1)
                                        : std::chrono::milliseconds(50));
    collector_idle_ = false;
  }
}

// ---- steps ------------------------------------------------------------------------------------
void Tracer::finish_steps_locked() {
  while (!steps_to_end_.empty()) {
    const uint32_t step = steps_to_end_.front();
    if (!pending_per_step_.empty() && pending_per_step_.begin()->first <= step) return;
    writer_->end_step(step);
    steps_to_end_.pop_front();
  }
}

void Tracer::step_advanced(uint32_t finished, std::string_view marker, uint64_t source) {
  trace::Record record;
  stamp(&record, trace::RecordKind::StepMarker, marker, nullptr, false);
  record.stream = 0;
  record.step = finished + 1;
  record.fields[trace::fields::StepMarker::new_step] = finished + 1;
  record.fields[trace::fields::StepMarker::marker_source] = source;
  append(record);
  std::lock_guard lock(pending_mutex_);
  steps_to_end_.push_back(finished);
  finish_steps_locked();
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
          fingerprints_dropped.fetch_add(1, std::memory_order_relaxed);
        }
      }
      for (auto& [slot, target] : state.waiters)
        target.pending->record.buffers[target.buffer_index].flags |= trace::kFingerprintDropped;
      fingerprints_dropped.fetch_add(state.waiters.size(), std::memory_order_relaxed);
      for (auto* targets : {&state.slots, &state.also}) {
        for (SlotTarget& target : *targets) {
          if (target.pending == nullptr) continue;
          PendingRecord* pending = target.pending;
          target.pending = nullptr;
          if (deliver(pending, UINT32_MAX, 0, false)) complete_locked(pending);
        }
      }
      for (auto& [slot, target] : state.waiters)
        if (deliver(target.pending, UINT32_MAX, 0, false)) complete_locked(target.pending);
      state.waiters.clear();
    }
    pending_per_step_.clear();
    finish_steps_locked();
  }
}

void Tracer::report_at_close() {
  {
    static constexpr const char* kCauseNames[] = {"next kernel unhashed", "other stream",
                                                  "other thread", "other call", "chain full", "free",
                                                  "order point", "step", "close"};
    static_assert(std::size(kCauseNames) == size_t(FlushCause::kCount));
    std::string causes;
    uint64_t alone = 0;
    for (size_t i = 0; i < size_t(FlushCause::kCount); ++i) {
      const uint64_t n = deferred_flushes[i].load();
      alone += n;
      if (n != 0) causes += fmt::format("{}{} {}", causes.empty() ? "" : ", ", kCauseNames[i], n);
    }
    hashing::EngineStats total;
    std::lock_guard lock(pending_mutex_);  // engines_ (the map) is guarded by it
    for (auto& [ctx, state] : engines_) {
      if (!state.engine) continue;
      const hashing::EngineStats s = state.engine->stats();
      total.launches += s.launches;
      total.regions_enqueued += s.regions_enqueued;
      total.bytes_enqueued += s.bytes_enqueued;
    }
    debug(fmt::format("hash launches: {} ({} regions, {} bytes); {} carried two kernels' regions, "
                      "{} deferred sets enqueued on their own ({}); {} regions hashed once for "
                      "two records; {} calls chained (no hash launch of their own)",
                      total.launches, total.regions_enqueued, total.bytes_enqueued,
                      merged_launches.load(), alone, causes.empty() ? "none" : causes,
                      regions_shared.load(), chained_calls.load()));
    if (reuse_digests_)
      debug(fmt::format("input digests reused: {} arrived, {} in flight ({} bytes not read "
                        "again); every reuse forgotten {} times (writes not known); {} inputs "
                        "not written since their allocation, not hashed ({} bytes)",
                        digests_reused.load(), digests_awaited.load(), bytes_not_reread.load(),
                        digests_forgotten.load(), inputs_unwritten.load(),
                        bytes_unwritten.load()));
    debug(fmt::format("kernel regions inside a larger region of their allocation hashed at the "
                      "same point (its digest taken): {} ({} bytes not read)",
                      regions_enclosed.load(), bytes_enclosed.load()));
    if (learn_roles_)
      debug(fmt::format("kernel pointers learned read-only: {} (found written later: {}); {} "
                        "outputs not hashed ({} bytes)",
                        roles_learned.load(), roles_contradicted.load(), outputs_read_only.load(),
                        bytes_read_only.load()));
    debug(fmt::format("kernel regions overwritten whole by known writers (fills), input not "
                      "hashed: {} ({} bytes)",
                      inputs_overwritten.load(), bytes_overwritten.load()));
    debug(fmt::format("kernel scratch buffers not hashed (reduce_kernel's cta_buf): {} ({} bytes)",
                      scratch_regions.load(), bytes_scratch.load()));
    debug(fmt::format("multi-tensor-apply address words of tensors the launch does not work on "
                      "(not pointers of the launch): {}",
                      stale_tensor_words.load()));
    if (recall_fills_)
      debug(fmt::format("fill outputs recalled, not hashed: {} ({} bytes); fills that differed "
                        "from an earlier same fill: {}",
                        fills_recalled.load(), bytes_recalled.load(), fills_differed.load()));
    debug(fmt::format("frees held back until their deferred hashes were enqueued: {}",
                      frees_deferred.load()));
    debug(fmt::format("cuBLASLt layouts and algorithms known by their bytes: {}, read from the "
                      "library: {}",
                      lt_reads_cached.load(), lt_reads_missed.load()));
    debug("shim self time: " + self_time::report());
    // What the job's threads spent in the shim per step, steady state: the overhead of off,
    // metrics and broad measured without the noise of comparing whole runs.
    const uint32_t steps = std::max<uint32_t>(1, Tracer::steps().current());
    debug(fmt::format("shim self time per step: {:.1f} us steady ({} steps), {:.1f} ms in "
                      "slow first calls",
                      self_time::steady_total_ns() / 1e3 / steps, steps,
                      self_time::slow_total_ns() / 1e6));
  }
  if (uint64_t n = nested_kernels.load())
    warn(WarningCode::NestedKernels, n, "kernels attributed to the enclosing library call");
  if (uint64_t n = capture_skipped.load())
    warn(WarningCode::CaptureNotFingerprinted, n, "buffers on capturing streams not fingerprinted");
  if (uint64_t n = fingerprints_dropped.load())
    warn(WarningCode::FingerprintsDropped, n, "fingerprints dropped (hash ring full or no engine)");
  if (uint64_t n = roles_contradicted.load())
    warn(WarningCode::ReadOnlyWritten, n,
         "kernel pointer arguments learned read-only were written later (outputs of launches "
         "before that may be missing; LOCKSTEP_LEARN_READONLY=0 hashes every output)");
  if (uint64_t n = fills_differed.load())
    warn(WarningCode::FillDiffered, n,
         "fills wrote other bytes than an earlier fill of the same value and size (bad memory or "
         "a bad SM? LOCKSTEP_RECALL_FILLS=0 hashes every fill)");
  if (uint64_t n = lt_cache_mismatches.load())
    warn(WarningCode::LtCacheMismatch, n,
         "cuBLASLt layouts or algorithms with the bytes of an earlier one read other attributes: "
         "GEMM records before that may carry the earlier one's shape or algorithm");
  if (uint64_t n = writer_->stats().dropped)
    warn(WarningCode::RecordsDropped, n, "records dropped by the trace writer");
}

}  // namespace lockstep::collectors
