// Binary encoding of Records inside a Records (or Summary) block payload.
//
// Each record is compared with the previous record in the same block (seq, stream, step, thread,
// and the name per kind) and with a base record for its fields and buffers: the last record of
// the same kind and name (a direct-mapped cache of 256 entries, so a training loop's repeated
// kernels cost little more than their fingerprints), else the last record of the same kind.
// Only what differs is written. State resets at every block start: every block decodes alone.
//
//   tag        u8: bits 0-3 kind wire id (15: varint kind follows), bit 4 seq gap,
//              bit 5 context changed, bit 6 name changed, bit 7 extension byte follows
//   [kind]     varint, only when bits 0-3 are 15
//   [ext]      u8: bit 0 buffer count differs from the base's, bit 1 payload present
//   [seq gap]  varint zigzag(seq - (previous seq + 1))
//   [context]  u8 mask (bit 0 stream, 1 step, 2 thread, 3 scope), then stream varint, step
//              zigzag delta, thread varint, scope varint for each bit set (scope: format
//              version 2; a version-1 file never sets bit 3)
//   [name]     varint
//   [count]    varint buffer count
//   field mask varint: bit i set where field i differs from the base; the values follow
//              (varint). A reader drops values past the fields it knows: a newer writer may
//              append trailing fields.
//   buffers    per buffer, u8 mask against the base's buffer in the same slot:
//              bit 0 (flags << 1 | role) varint, 1 dtype u8, 2 label varint,
//              3 bytes (varint (bytes >> tz) << 6 | tz, tz = trailing zero bits; tz 63: a plain
//              varint follows), 4 fingerprint fixed 8 bytes, 5 alloc_ordinal varint,
//              6 alloc_offset varint
//   [payload]  varint length (> 0), bytes
//
// Varints are LEB128 capped at 9 bytes (varint.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trace/record.h"

namespace lockstep::trace {

// Kinds with wire ids below this keep per-kind delta state.
inline constexpr int kKindSlots = 16;

// Delta state shared by encoder and decoder; both update it identically.
class DeltaState {
 public:
  static constexpr int kCacheEntries = 256;
  struct Entry {
    uint32_t generation = 0;
    uint8_t kind = 0;
    StringId name = 0;
    uint64_t fields[kMaxFields] = {};
    std::vector<BufferFingerprint> buffers;
  };

  void reset();
  static int slot_for(uint8_t kind, StringId name) {
    return static_cast<int>(((name * 0x9e3779b97f4a7c15ull) ^ (kind * 0xc2b2ae3d27d4eb4full)) >>
                            56);
  }
  // The base record for (kind, name): the cached entry, else the last of the kind, else zeros.
  const Entry& base(uint8_t kind, StringId name, int slot) const {
    const Entry& hit = cache_[slot];
    if (hit.generation == generation_ && hit.kind == kind && hit.name == name) return hit;
    const Entry& last = cache_[last_slot_[kind]];
    return last.generation == generation_ ? last : zero_;
  }
  // Remembers a record as the base of its (kind, name) and of its kind.
  void remember(const Record& record, int slot);
  // The same for a record the decoder produced (its fields past the kind's count are zero).
  void remember_decoded(const Record& record, int slot);

  uint64_t prev_seq = 0;
  uint32_t prev_stream = 0, prev_step = 0, prev_thread = 0, prev_scope = 0;
  StringId prev_name[kKindSlots] = {};

 private:
  uint32_t generation_ = 0;
  uint8_t last_slot_[kKindSlots] = {};
  Entry cache_[kCacheEntries];
  Entry zero_;
};

class RecordEncoder {
 public:
  RecordEncoder() { reset(); }
  void reset() { state_.reset(); }  // at the start of every block

  // Upper bound of encode()'s output for this record.
  static size_t max_encoded_size(const Record& record) {
    return 128 + kMaxFields * 9 + record.buffers.size() * 56 + record.payload.size();
  }
  // Writes the record at out (at least max_encoded_size bytes free); returns the new end.
  // thread: the thread ordinal to store (the writer's, when the record carries 0).
  uint8_t* encode(const Record& record, uint32_t thread, uint8_t* out);

 private:
  DeltaState state_;
};

class RecordDecoder {
 public:
  RecordDecoder() { reset(); }
  void reset() { state_.reset(); }

  // Decodes one record from [in, end), advancing in. On malformed input returns false and sets
  // *error (no offset; the caller adds file and offset).
  bool decode(const uint8_t*& in, const uint8_t* end, Record& out, std::string* error);

 private:
  DeltaState state_;
};

// Strings block payload: repeated (varint id, varint length, bytes).
void encode_string(std::vector<uint8_t>& out, StringId id, std::string_view text);

}  // namespace lockstep::trace
