// Compact in-memory records for the diff: one window of steps of one rank of one run.
//
// trace::Record carries 16 fields and two heap vectors; the diff holds a whole window of steps,
// so it keeps the same information in flat arenas. String ids are translated into a pool shared
// by both runs of a rank, so names compare as integers across the two files.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "trace/record.h"

namespace lockstep::tools {

// Strings of both runs of one rank; id 0 is the empty string.
class StringPool {
 public:
  StringPool() { intern(""); }
  uint32_t intern(std::string_view text);
  std::string_view text(uint32_t id) const { return texts_[id]; }

 private:
  std::deque<std::string> texts_;
  std::unordered_map<std::string_view, uint32_t> ids_;
};

struct OpBuffer {
  uint64_t bytes = 0;
  uint64_t fingerprint = 0;
  uint32_t label = 0;  // StringPool id
  trace::Role role = trace::Role::In;
  trace::DType dtype = trace::DType::Unknown;
  uint8_t flags = 0;
  bool has_value() const { return flags & trace::kFingerprintValid; }
};

// A scope path in a StringPool: its range names, outermost first, joined by this byte (no range
// name holds it), so that a path compares as one id across the two runs.
inline constexpr char kScopeSeparator = '\x1f';
std::string join_scope(const std::vector<std::string_view>& names);
std::vector<std::string> split_scope(std::string_view joined);  // {} for ""

struct Op {
  uint64_t seq = 0;
  uint32_t stream = 0;
  uint32_t step = 0;
  uint32_t name = 0;   // StringPool id
  uint32_t scope = 0;  // StringPool id of the record's scope path (join_scope); 0: none
  trace::RecordKind kind = trace::RecordKind::Kernel;
  uint8_t field_count = 0;
  uint16_t buffer_count = 0;
  uint32_t field_offset = 0;
  uint32_t buffer_offset = 0;
  uint32_t payload_offset = 0;
  uint32_t payload_bytes = 0;
  uint32_t thread = 0;  // the record's thread ordinal (the host thread that made the call)
};

// One run's records of a window of steps.
class OpTable {
 public:
  void clear();
  size_t size() const { return ops_.size(); }
  const Op& operator[](size_t i) const { return ops_[i]; }
  std::vector<Op>& ops() { return ops_; }
  const std::vector<Op>& ops() const { return ops_; }

  std::span<const uint64_t> fields(const Op& op) const {
    return {fields_.data() + op.field_offset, op.field_count};
  }
  uint64_t field(const Op& op, int index) const {
    return index < op.field_count ? fields_[op.field_offset + index] : 0;
  }
  // Rewrites a field of an op of this table (the step alignment renumbers B's collectives).
  void set_field(const Op& op, int index, uint64_t value) {
    if (index < op.field_count) fields_[op.field_offset + index] = value;
  }
  std::span<const OpBuffer> buffers(const Op& op) const {
    return {buffers_.data() + op.buffer_offset, op.buffer_count};
  }
  std::span<const uint8_t> payload(const Op& op) const {
    return {payload_.data() + op.payload_offset, op.payload_bytes};
  }

  // `name`, `labels` and `scope` are StringPool ids already translated by the caller.
  void add(const trace::Record& record, uint32_t name, std::span<const uint32_t> labels,
           uint32_t scope = 0);
  // The same, translating each buffer's label with label_of(buffer index, trace::StringId) ->
  // uint32_t: the hot path of a diff (no label vector, no call through a pointer).
  template <class LabelOf>
  void add_with(const trace::Record& record, uint32_t name, LabelOf&& label_of,
                uint32_t scope = 0);

  size_t memory_bytes() const;

 private:
  std::vector<Op> ops_;
  // Room for n more elements at the end of an arena whose used part is `used`: the vectors only
  // grow (geometrically) and are never shrunk or value-initialized record by record.
  template <class T>
  static T* extend(std::vector<T>& arena, size_t& used, size_t n) {
    if (used + n > arena.size()) arena.resize(std::max<size_t>(used + n, 2 * arena.size()));
    T* at = arena.data() + used;
    used += n;
    return at;
  }

  std::vector<uint64_t> fields_;  // arenas: used up to fields_used_, buffers_used_
  std::vector<OpBuffer> buffers_;
  size_t fields_used_ = 0, buffers_used_ = 0;
  std::vector<uint8_t> payload_;
};

template <class LabelOf>
void OpTable::add_with(const trace::Record& record, uint32_t name, LabelOf&& label_of,
                       uint32_t scope) {
  Op& op = ops_.emplace_back();
  op.seq = record.seq;
  op.stream = record.stream;
  op.step = record.step;
  op.name = name;
  op.scope = scope;
  op.thread = record.thread;
  op.kind = record.kind;
  const int count = trace::fast_field_count(record.kind);  // 0 for an unknown kind
  op.field_count = static_cast<uint8_t>(count);
  op.field_offset = static_cast<uint32_t>(fields_used_);
  // One fixed-size copy of all the record's fields (no loop, no libc call); only `count` of
  // them are kept: the next op's fields start right after.
  uint64_t* fields = extend(fields_, fields_used_, trace::kMaxFields);
  std::memcpy(fields, record.fields.data(), sizeof(record.fields));
  fields_used_ -= trace::kMaxFields - count;
  const size_t buffer_count = record.buffers.size();
  op.buffer_offset = static_cast<uint32_t>(buffers_used_);
  op.buffer_count = static_cast<uint16_t>(buffer_count);
  OpBuffer* out = extend(buffers_, buffers_used_, buffer_count);
  for (size_t i = 0; i < buffer_count; ++i) {
    const trace::BufferFingerprint& in = record.buffers[i];
    out[i] = OpBuffer{in.bytes, in.fingerprint, label_of(i, in.label), in.role, in.dtype, in.flags};
  }
  op.payload_offset = static_cast<uint32_t>(payload_.size());
  op.payload_bytes = static_cast<uint32_t>(record.payload.size());
  if (!record.payload.empty())
    payload_.insert(payload_.end(), record.payload.begin(), record.payload.end());
}

// Translates one file's string ids into a StringPool, asking the file only once per id.
class StringTranslator {
 public:
  template <class Lookup>  // Lookup: std::string_view(trace::StringId)
  uint32_t translate(trace::StringId id, StringPool& pool, Lookup&& lookup) {
    if (id == 0) return 0;
    if (id >= cache_.size()) cache_.resize(static_cast<size_t>(id) + 1, kUnknown);
    uint32_t& slot = cache_[id];
    if (slot == kUnknown) slot = pool.intern(lookup(id));
    return slot;
  }

 private:
  static constexpr uint32_t kUnknown = UINT32_MAX;
  std::vector<uint32_t> cache_;
};

// Translates one file's scope ids into StringPool ids of their paths, asking the file once per id.
class ScopeTranslator {
 public:
  template <class PathOf>  // PathOf: std::vector<std::string_view>(trace::ScopeId)
  uint32_t translate(trace::ScopeId id, StringPool& pool, PathOf&& path_of) {
    if (id == 0) return 0;
    if (id >= cache_.size()) cache_.resize(static_cast<size_t>(id) + 1, kUnknown);
    uint32_t& slot = cache_[id];
    if (slot == kUnknown) slot = pool.intern(join_scope(path_of(id)));
    return slot;
  }

 private:
  static constexpr uint32_t kUnknown = UINT32_MAX;
  std::vector<uint32_t> cache_;
};

}  // namespace lockstep::tools
