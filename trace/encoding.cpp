#include "trace/encoding.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "trace/varint.h"

namespace lockstep::trace {
namespace {

enum TagBits : uint8_t {
  kKindMask = 0x0f,
  kKindEscape = 0x0f,
  kSeqGap = 1 << 4,
  kContextChanged = 1 << 5,
  kNameChanged = 1 << 6,
  kExtension = 1 << 7,
};
enum ExtensionBits : uint8_t { kBufferCountChanged = 1, kHasPayload = 2, kExtensionKnownBits = 3 };
enum ContextBits : uint8_t { kStream = 1, kStep = 2, kThread = 4, kScope = 8 };
enum BufferBits : uint8_t {
  kRoleFlags = 1 << 0,
  kDType = 1 << 1,
  kLabel = 1 << 2,
  kBytes = 1 << 3,
  kFingerprint = 1 << 4,
  kAllocOrdinal = 1 << 5,
  kAllocOffset = 1 << 6,
  kBufferKnownBits = 0x7f,
};

inline uint64_t role_flags(const BufferFingerprint& b) {
  return (static_cast<uint64_t>(b.flags) << 1) | (static_cast<uint8_t>(b.role) & 1);
}

// Byte counts are mostly multiples of large powers of two: store mantissa and shift.
constexpr uint64_t kRawBytes = 63;
inline uint8_t* put_bytes(uint8_t* out, uint64_t bytes) {
  if (bytes == 0) return put_varint(out, 0);
  const int tz = __builtin_ctzll(bytes);
  const uint64_t mantissa = bytes >> tz;
  if (mantissa >= (uint64_t{1} << 57)) return put_varint(put_varint(out, kRawBytes), bytes);
  return put_varint(out, (mantissa << 6) | static_cast<uint64_t>(tz));
}
inline bool get_bytes(const uint8_t*& in, const uint8_t* end, uint64_t& bytes) {
  uint64_t value;
  if (!get_varint(in, end, value)) return false;
  if (value == kRawBytes) return get_varint(in, end, bytes);
  bytes = (value >> 6) << (value & 63);
  return true;
}

const BufferFingerprint kZeroBuffer{};

// Records hold a handful of buffers: copy them inline rather than through a libc call.
inline void copy_buffers(const BufferFingerprint* from, size_t count, BufferFingerprint* to) {
  if (count > 4) {
    std::copy_n(from, count, to);
    return;
  }
  switch (count) {
    case 4:
      to[3] = from[3];
      [[fallthrough]];
    case 3:
      to[2] = from[2];
      [[fallthrough]];
    case 2:
      to[1] = from[1];
      [[fallthrough]];
    case 1:
      to[0] = from[0];
      [[fallthrough]];
    default:
      break;
  }
}

// Wire ids the decoder knows, as a table: find_record_kind is a linear search.
constexpr auto kKnownKinds = [] {
  std::array<bool, kKindSlots> known{};
#define LOCKSTEP_RECORD_KIND(Enum, id, name, ...)                                          \
  static_assert((id) < kKindSlots, "kind " #Enum ": the decoder knows wire ids below 16"); \
  known[id] = true;
#include "trace/record_kinds.def"
#undef LOCKSTEP_RECORD_KIND
  return known;
}();

}  // namespace

// ---- shared state ---------------------------------------------------------------------------

void DeltaState::reset() {
  prev_seq = 0;
  prev_stream = prev_step = prev_thread = prev_scope = 0;
  std::memset(prev_name, 0, sizeof(prev_name));
  std::memset(last_slot_, 0, sizeof(last_slot_));
  if (++generation_ == 0) {  // wrapped: forget every entry for real
    for (Entry& entry : cache_) entry.generation = 0;
    generation_ = 1;
  }
}

void DeltaState::remember(const Record& record, int slot) {
  Entry& entry = cache_[slot];
  const uint8_t kind = static_cast<uint8_t>(record.kind);
  entry.generation = generation_;
  entry.kind = kind;
  entry.name = record.name;
  // Fields past the kind's count are never stored: remember what the decoder will see.
  const int count = fast_field_count(record.kind);
  std::memcpy(entry.fields, record.fields.data(), count * sizeof(uint64_t));
  std::memset(entry.fields + count, 0, (kMaxFields - count) * sizeof(uint64_t));
  entry.buffers.assign(record.buffers.begin(), record.buffers.end());
  last_slot_[kind & (kKindSlots - 1)] = static_cast<uint8_t>(slot);
}

void DeltaState::remember_decoded(const Record& record, int slot) {
  Entry& entry = cache_[slot];
  const uint8_t kind = static_cast<uint8_t>(record.kind);
  entry.generation = generation_;
  entry.kind = kind;
  entry.name = record.name;
  // A decoded record's fields past its kind's count are zero already: one fixed-size copy.
  std::memcpy(entry.fields, record.fields.data(), sizeof(entry.fields));
  const size_t count = record.buffers.size();
  if (entry.buffers.size() != count) entry.buffers.resize(count);
  copy_buffers(record.buffers.data(), count, entry.buffers.data());
  last_slot_[kind & (kKindSlots - 1)] = static_cast<uint8_t>(slot);
}

// ---- encoder --------------------------------------------------------------------------------

uint8_t* RecordEncoder::encode(const Record& record, uint32_t thread, uint8_t* out) {
  DeltaState& s = state_;
  const uint8_t kind = static_cast<uint8_t>(record.kind);
  const int kind_slot = kind & (kKindSlots - 1);
  const int slot = DeltaState::slot_for(kind, record.name);
  const DeltaState::Entry& base = s.base(kind_slot, record.name, slot);

  uint8_t* tag_at = out++;
  uint8_t tag = kind < kKindEscape ? kind : static_cast<uint8_t>(kKindEscape);
  if (kind >= kKindEscape) out = put_varint(out, kind);

  uint8_t extension = 0;
  if (record.buffers.size() != base.buffers.size()) extension |= kBufferCountChanged;
  if (!record.payload.empty()) extension |= kHasPayload;
  if (extension) tag |= kExtension, *out++ = extension;

  if (record.seq != s.prev_seq + 1) {
    tag |= kSeqGap;
    out = put_varint(out, zigzag(static_cast<int64_t>(record.seq - (s.prev_seq + 1))));
  }
  s.prev_seq = record.seq;

  if (record.stream != s.prev_stream || record.step != s.prev_step || thread != s.prev_thread ||
      record.scope != s.prev_scope) {
    tag |= kContextChanged;
    uint8_t* mask_at = out++;
    uint8_t mask = 0;
    if (record.stream != s.prev_stream) mask |= kStream, out = put_varint(out, record.stream);
    if (record.step != s.prev_step) {
      mask |= kStep;
      out = put_varint(out, zigzag(static_cast<int64_t>(record.step) - s.prev_step));
    }
    if (thread != s.prev_thread) mask |= kThread, out = put_varint(out, thread);
    if (record.scope != s.prev_scope) mask |= kScope, out = put_varint(out, record.scope);
    *mask_at = mask;
    s.prev_stream = record.stream, s.prev_step = record.step, s.prev_thread = thread;
    s.prev_scope = record.scope;
  }

  if (record.name != s.prev_name[kind_slot]) {
    tag |= kNameChanged;
    out = put_varint(out, record.name);
    s.prev_name[kind_slot] = record.name;
  }
  if (extension & kBufferCountChanged) out = put_varint(out, record.buffers.size());
  *tag_at = tag;

  const int count = fast_field_count(record.kind);
  uint32_t mask = 0;
  for (int i = 0; i < count; ++i)
    if (record.fields[i] != base.fields[i]) mask |= 1u << i;
  out = put_varint(out, mask);
  for (int i = 0; i < count; ++i)
    if (mask & (1u << i)) out = put_varint(out, record.fields[i]);

  for (size_t i = 0; i < record.buffers.size(); ++i) {
    const BufferFingerprint& b = record.buffers[i];
    const BufferFingerprint& p = i < base.buffers.size() ? base.buffers[i] : kZeroBuffer;
    uint8_t* bits_at = out++;
    uint8_t bits = 0;
    if (role_flags(b) != role_flags(p)) bits |= kRoleFlags, out = put_varint(out, role_flags(b));
    if (b.dtype != p.dtype) bits |= kDType, *out++ = static_cast<uint8_t>(b.dtype);
    if (b.label != p.label) bits |= kLabel, out = put_varint(out, b.label);
    if (b.bytes != p.bytes) bits |= kBytes, out = put_bytes(out, b.bytes);
    if (b.fingerprint != p.fingerprint) bits |= kFingerprint, out = put_fixed64(out, b.fingerprint);
    if (b.alloc_ordinal != p.alloc_ordinal)
      bits |= kAllocOrdinal, out = put_varint(out, b.alloc_ordinal);
    if (b.alloc_offset != p.alloc_offset)
      bits |= kAllocOffset, out = put_varint(out, b.alloc_offset);
    *bits_at = bits;
  }

  if (!record.payload.empty()) {
    out = put_varint(out, record.payload.size());
    std::memcpy(out, record.payload.data(), record.payload.size());
    out += record.payload.size();
  }
  s.remember(record, slot);
  return out;
}

// ---- decoder --------------------------------------------------------------------------------

namespace {
bool fail(std::string* error, const char* what) {
  if (error) *error = what;
  return false;
}
bool get_u32(const uint8_t*& in, const uint8_t* end, uint32_t& value) {
  uint64_t wide;
  if (!get_varint(in, end, wide) || wide > UINT32_MAX) return false;
  value = static_cast<uint32_t>(wide);
  return true;
}
}  // namespace

bool RecordDecoder::decode(const uint8_t*& in, const uint8_t* end, Record& out,
                           std::string* error) {
  DeltaState& s = state_;
  if (in >= end) return fail(error, "record cut off");
  const uint8_t tag = *in++;
  uint64_t wide_kind = tag & kKindMask;
  if (wide_kind == kKindEscape && !get_varint(in, end, wide_kind))
    return fail(error, "record cut off in kind");
  if (wide_kind >= kKindSlots || !kKnownKinds[wide_kind])
    return fail(error, "unknown record kind (written by a newer lockstep?)");
  const auto kind = static_cast<uint8_t>(wide_kind);
  out.kind = static_cast<RecordKind>(kind);

  uint8_t extension = 0;
  if (tag & kExtension) {
    if (in >= end) return fail(error, "record cut off in extension");
    extension = *in++;
    if (extension & ~kExtensionKnownBits) return fail(error, "bad extension bits");
  }

  uint64_t value;
  if (tag & kSeqGap) {
    if (!get_varint(in, end, value)) return fail(error, "record cut off in seq");
    out.seq = s.prev_seq + 1 + static_cast<uint64_t>(unzigzag(value));
  } else {
    out.seq = s.prev_seq + 1;
  }
  s.prev_seq = out.seq;

  if (tag & kContextChanged) {
    if (in >= end) return fail(error, "record cut off in context");
    const uint8_t bits = *in++;
    if (bits & ~(kStream | kStep | kThread | kScope)) return fail(error, "bad context mask");
    if ((bits & kStream) && !get_u32(in, end, s.prev_stream)) return fail(error, "bad stream");
    if (bits & kStep) {
      if (!get_varint(in, end, value)) return fail(error, "bad step");
      // A step delta beyond the 32-bit range is corruption (and would overflow the sum).
      const int64_t delta = unzigzag(value);
      if (delta > int64_t{UINT32_MAX} || delta < -int64_t{UINT32_MAX})
        return fail(error, "step out of range");
      const int64_t step = static_cast<int64_t>(s.prev_step) + delta;
      if (step < 0 || step > UINT32_MAX) return fail(error, "step out of range");
      s.prev_step = static_cast<uint32_t>(step);
    }
    if ((bits & kThread) && !get_u32(in, end, s.prev_thread)) return fail(error, "bad thread");
    if ((bits & kScope) && !get_u32(in, end, s.prev_scope)) return fail(error, "bad scope");
  }
  out.stream = s.prev_stream, out.step = s.prev_step, out.thread = s.prev_thread;
  out.scope = s.prev_scope;

  if ((tag & kNameChanged) && !get_u32(in, end, s.prev_name[kind]))
    return fail(error, "bad name id");
  out.name = s.prev_name[kind];
  const int slot = DeltaState::slot_for(kind, out.name);
  const DeltaState::Entry& base = s.base(kind, out.name, slot);

  size_t buffer_count = base.buffers.size();
  if (extension & kBufferCountChanged) {
    if (!get_varint(in, end, value)) return fail(error, "record cut off in buffer count");
    // Every buffer takes at least its mask byte: a count past the input is corruption.
    if (value > static_cast<uint64_t>(end - in)) return fail(error, "buffer count past the block");
    buffer_count = value;
  }

  uint64_t mask;
  if (!get_varint(in, end, mask)) return fail(error, "record cut off in field mask");
  const int count = fast_field_count(out.kind);
  // One fixed-size copy. An entry of this kind holds zeros past count (it was a decoded record);
  // the base may be the entry the last record of the kind left, taken since by another kind
  // (the format compares fields below count only): then the tail is cleared.
  static_assert(sizeof(base.fields) == sizeof(out.fields));
  std::memcpy(out.fields.data(), base.fields, sizeof(base.fields));
  if (base.kind != kind)
    for (int i = count; i < kMaxFields; ++i) out.fields[i] = 0;
  for (uint64_t rest = mask; rest; rest &= rest - 1) {
    const int bit = __builtin_ctzll(rest);
    if (!get_varint(in, end, value)) return fail(error, "record cut off in fields");
    if (bit < count) out.fields[bit] = value;  // else a newer trailing field: dropped
  }

  // Decoded in place: out's buffers keep their capacity from record to record.
  const size_t base_count = std::min(buffer_count, base.buffers.size());
  out.buffers.resize(buffer_count);
  BufferFingerprint* buffers = out.buffers.data();
  copy_buffers(base.buffers.data(), base_count, buffers);
  for (size_t i = base_count; i < buffer_count; ++i) buffers[i] = kZeroBuffer;
  for (size_t i = 0; i < buffer_count; ++i) {
    BufferFingerprint& b = buffers[i];
    if (in >= end) return fail(error, "record cut off in buffers");
    const uint8_t bits = *in++;
    if (!bits) continue;
    if (bits & ~kBufferKnownBits) return fail(error, "bad buffer mask");
    if (bits & kRoleFlags) {
      if (!get_varint(in, end, value) || value > 0x1ff) return fail(error, "bad buffer flags");
      b.role = static_cast<Role>(value & 1);
      b.flags = static_cast<uint8_t>(value >> 1);
    }
    if (bits & kDType) {
      if (in >= end) return fail(error, "record cut off in dtype");
      b.dtype = static_cast<DType>(*in++);
    }
    if ((bits & kLabel) && !get_u32(in, end, b.label)) return fail(error, "bad buffer label");
    if ((bits & kBytes) && !get_bytes(in, end, b.bytes)) return fail(error, "bad buffer bytes");
    if ((bits & kFingerprint) && !get_fixed64(in, end, b.fingerprint))
      return fail(error, "record cut off in fingerprint");
    if ((bits & kAllocOrdinal) && !get_u32(in, end, b.alloc_ordinal))
      return fail(error, "bad allocation ordinal");
    if ((bits & kAllocOffset) && !get_varint(in, end, b.alloc_offset))
      return fail(error, "bad allocation offset");
  }

  out.payload.clear();
  if (extension & kHasPayload) {
    if (!get_varint(in, end, value)) return fail(error, "record cut off in payload length");
    if (value == 0 || value > static_cast<uint64_t>(end - in))
      return fail(error, "payload past the block");
    out.payload.assign(in, in + value);
    in += value;
  }
  s.remember_decoded(out, slot);
  return true;
}

void encode_string(std::vector<uint8_t>& out, StringId id, std::string_view text) {
  uint8_t head[2 * kMaxVarintBytes];
  uint8_t* end = put_varint(put_varint(head, id), text.size());
  out.insert(out.end(), head, end);
  out.insert(out.end(), text.begin(), text.end());
}

}  // namespace lockstep::trace
