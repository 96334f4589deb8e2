// The Tracer's record identity (sequence, stream and thread ordinals, interned names, buffer
// entries), appending, warnings, the kernel filter and capture queries: what every call
// uses. Its other parts: tracer_lifecycle.cpp, tracer_hashing.cpp, tracer_digest_reuse.cpp,
// tracer_collector.cpp, tracer_stats.cpp (README, The Tracer's files).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "collectors/driver_api.h"
#include "collectors/runtime.h"
#include "collectors/scopes.h"
#include "common/hot.h"
#include "common/hot_flags.h"
#include "common/self_time.h"

namespace lockstep::collectors {

LOCKSTEP_HOT StepCounter& Tracer::steps() {
  static StepCounter* counter = [] {
    const Config& config = configuration().config;
    // Its count in the line every traced call reads (stamp_with_seq reads it there).
    return new StepCounter(config.step_source, config.step_pattern, &hot_flags.step);
  }();
  return *counter;
}

LOCKSTEP_HOT StreamSteps& Tracer::stream_steps() {
  // Never freed: records are made during exit. Its switch in the line every traced call reads.
  static StreamSteps* rule = new StreamSteps(&hot_flags.stream_steps);
  return *rule;
}

Tracer::Tracer(const Config& config, std::unique_ptr<trace::TraceWriter> writer)
    : config_(config),
      reuse_digests_(config.reuse_digests && config.level == Level::Full),
      skip_unwritten_(reuse_digests_ && config.skip_unwritten),
      carry_freed_(reuse_digests_ && config.carry_freed),
      learn_roles_(config.learn_read_only && config.level == Level::Full),
      recall_fills_(config.recall_fills && config.level == Level::Full) {
  if (!config.kernels.empty()) kernel_filter_.emplace(config.kernels, std::regex::ECMAScript);
  if (!config.stacks.empty()) stack_filter_.emplace(config.stacks, std::regex::ECMAScript);
  hot_.writer = std::move(writer);
  hot_.level = config_.level;
  hot_.stacks_by_name = stack_filter_.has_value();
}

void Tracer::debug(const std::string& line) const {
  if (config_.debug)
    std::fprintf(stderr, "lockstep[%d]: %s\n", static_cast<int>(getpid()), line.c_str());
}

uint32_t Tracer::other_stream_ordinal(uintptr_t key) {
  HotThread::LastStream& last = t_hot.last_stream;
  // Heap, never freed: records are still made during exit, after thread_local destructors.
  thread_local auto* cache = new std::unordered_map<uintptr_t, uint32_t>;
  if (auto it = cache->find(key); it != cache->end()) {
    last = {this, key};
    t_hot.last_stream_ordinal = it->second;
    return it->second;
  }
  uint32_t ordinal;
  {
    std::lock_guard lock(streams_mutex_);
    auto [it, inserted] = streams_.try_emplace(key, static_cast<uint32_t>(streams_.size() + 1));
    ordinal = it->second;
  }
  if (cache->size() < 4096) cache->emplace(key, ordinal);
  last = {this, key};
  t_hot.last_stream_ordinal = ordinal;
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
  if (cached_for != hot_.writer.get()) {  // ids are per file: a forked child's tracer starts afresh
    cache->clear();
    cached_for = hot_.writer.get();
  }
  if (auto it = cache->find(text); it != cache->end()) return it->second;
  const trace::StringId id = hot_.writer->intern(text);
  if (cache->size() < 4096) cache->emplace(std::string(text), id);
  return id;
}

namespace {
// intern_literal's cache: direct-mapped by the text's address, plain data (constant-initialized
// initial-exec TLS: no guard), emptied when the thread's writer is another one (ids are per file).
struct LiteralIds {
  static constexpr size_t kSlots = 32;
  const trace::TraceWriter* writer = nullptr;
  const char* text[kSlots] = {};
  trace::StringId id[kSlots] = {};
};
thread_local constinit LiteralIds t_literal_ids;
}  // namespace

LOCKSTEP_HOT trace::StringId Tracer::intern_literal(const char* text) {
  LiteralIds& cache = t_literal_ids;
  const trace::TraceWriter* writer = hot_.writer.get();
  if (cache.writer != writer) [[unlikely]]
    cache = LiteralIds{writer};
  const size_t slot = (reinterpret_cast<uintptr_t>(text) >> 3) % LiteralIds::kSlots;
  if (cache.text[slot] == text) [[likely]]
    return cache.id[slot];
  const trace::StringId id = intern(text);
  cache.text[slot] = text;
  cache.id[slot] = id;
  return id;
}

trace::ScopeId Tracer::intern_scope(trace::ScopeId parent, std::string_view name) {
  const trace::StringId text = intern(name);
  // Heap, never freed, as intern's cache; keyed by (parent, name id).
  thread_local auto* cache = new std::unordered_map<uint64_t, trace::ScopeId>;
  thread_local const trace::TraceWriter* cached_for = nullptr;
  if (cached_for != hot_.writer.get()) {
    cache->clear();
    cached_for = hot_.writer.get();
  }
  const uint64_t key = (static_cast<uint64_t>(parent) << 32) | text;
  if (auto it = cache->find(key); it != cache->end()) return it->second;
  const trace::ScopeId id = hot_.writer->intern_scope(parent, text);
  if (cache->size() < 4096) cache->emplace(key, id);
  return id;
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
  if (hot_.closed.load(std::memory_order_relaxed)) return;
  self_time::Scope timed(self_time::Phase::Append);
  hot_.writer->append(record);
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

bool Tracer::kernel_stacks(std::string_view name) const {
  return stack_filter_ && std::regex_search(name.begin(), name.end(), *stack_filter_);
}

bool Tracer::capturing(CUstream stream, bool per_thread_default, uint64_t* capture_id,
                       CUgraph* graph) {
  *capture_id = 0;
  if (!capture_begun()) return false;
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

}  // namespace lockstep::collectors
