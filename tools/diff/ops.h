// Compact in-memory records for the diff: one window of steps of one rank of one run.
//
// trace::Record carries 16 fields and two heap vectors; the diff holds a whole window of steps,
// so it keeps the same information in flat arenas. String ids are translated into a pool shared
// by both runs of a rank, so names compare as integers across the two files.
#pragma once

#include <cstdint>
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

struct Op {
  uint64_t seq = 0;
  uint32_t stream = 0;
  uint32_t step = 0;
  uint32_t name = 0;  // StringPool id
  trace::RecordKind kind = trace::RecordKind::Kernel;
  uint8_t field_count = 0;
  uint16_t buffer_count = 0;
  uint32_t field_offset = 0;
  uint32_t buffer_offset = 0;
  uint32_t payload_offset = 0;
  uint32_t payload_bytes = 0;
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
  std::span<const OpBuffer> buffers(const Op& op) const {
    return {buffers_.data() + op.buffer_offset, op.buffer_count};
  }
  std::span<const uint8_t> payload(const Op& op) const {
    return {payload_.data() + op.payload_offset, op.payload_bytes};
  }

  // `name` and `labels` are StringPool ids already translated by the caller.
  void add(const trace::Record& record, uint32_t name, std::span<const uint32_t> labels);

  size_t memory_bytes() const;

 private:
  std::vector<Op> ops_;
  std::vector<uint64_t> fields_;
  std::vector<OpBuffer> buffers_;
  std::vector<uint8_t> payload_;
};

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

}  // namespace lockstep::tools
