#include "tools/diff/ops.h"

namespace lockstep::tools {

uint32_t StringPool::intern(std::string_view text) {
  auto it = ids_.find(text);
  if (it != ids_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(texts_.size());
  texts_.emplace_back(text);  // a deque never moves its elements: the view key stays valid
  ids_.emplace(texts_.back(), id);
  return id;
}

void OpTable::clear() {
  ops_.clear();
  fields_.clear();
  buffers_.clear();
  payload_.clear();
}

void OpTable::add(const trace::Record& record, uint32_t name, std::span<const uint32_t> labels) {
  Op op;
  op.seq = record.seq;
  op.stream = record.stream;
  op.step = record.step;
  op.name = name;
  op.kind = record.kind;
  int count = trace::field_count(record.kind);
  if (count < 0 || count > trace::kMaxFields) count = 0;
  op.field_count = static_cast<uint8_t>(count);
  op.field_offset = static_cast<uint32_t>(fields_.size());
  fields_.insert(fields_.end(), record.fields.begin(), record.fields.begin() + count);
  op.buffer_offset = static_cast<uint32_t>(buffers_.size());
  op.buffer_count = static_cast<uint16_t>(record.buffers.size());
  for (size_t i = 0; i < record.buffers.size(); ++i) {
    const trace::BufferFingerprint& in = record.buffers[i];
    buffers_.push_back(OpBuffer{in.bytes, in.fingerprint, i < labels.size() ? labels[i] : 0,
                                in.role, in.dtype, in.flags});
  }
  op.payload_offset = static_cast<uint32_t>(payload_.size());
  op.payload_bytes = static_cast<uint32_t>(record.payload.size());
  payload_.insert(payload_.end(), record.payload.begin(), record.payload.end());
  ops_.push_back(op);
}

size_t OpTable::memory_bytes() const {
  return ops_.capacity() * sizeof(Op) + fields_.capacity() * sizeof(uint64_t) +
         buffers_.capacity() * sizeof(OpBuffer) + payload_.capacity();
}

}  // namespace lockstep::tools
