// Step digests: the content hash of one record, independent of everything that can differ
// between two identical runs (seq, thread, string ids, allocation ordinals). A step's digest is
// the wrapping sum of its records' content hashes, so thread interleaving does not matter and
// partial summaries of one step add up (the reader merges them).
#pragma once

#include <cstdint>
#include <string_view>

#include <xxhash.h>

#include "trace/record.h"

namespace lockstep::trace {

inline uint64_t text_hash(std::string_view text) { return XXH3_64bits(text.data(), text.size()); }

// label_hash(StringId) -> uint64_t text hash of the buffer label.
template <class LabelHash>
uint64_t content_hash(const Record& record, uint64_t name_hash, LabelHash&& label_hash) {
  constexpr int kWords = 30;  // 240 bytes: XXH3's mid-size path, faster than its long one
  uint64_t words[kWords];
  int used = 0;
  uint64_t hash = 0x6c6f636b73746570ull;  // "lockstep"
  auto put = [&](uint64_t word) {
    if (used == kWords) hash = XXH3_64bits_withSeed(words, sizeof(words), hash), used = 0;
    words[used++] = word;
  };
  const int count = fast_field_count(record.kind);
  put(static_cast<uint64_t>(record.kind) | (static_cast<uint64_t>(count) << 8) |
      (static_cast<uint64_t>(record.buffers.size()) << 16));
  put((static_cast<uint64_t>(record.stream) << 32) | record.step);
  put(name_hash);
  for (int i = 0; i < count; ++i) put(record.fields[i]);
  for (const BufferFingerprint& b : record.buffers) {
    put(static_cast<uint64_t>(b.role) | (static_cast<uint64_t>(b.dtype) << 8) |
        (static_cast<uint64_t>(b.flags) << 16));
    put(label_hash(b.label));
    put(b.bytes);
    put(b.fingerprint);
    put(b.alloc_offset);
  }
  hash = XXH3_64bits_withSeed(words, used * sizeof(uint64_t), hash);
  if (!record.payload.empty())
    hash = XXH3_64bits_withSeed(record.payload.data(), record.payload.size(), hash);
  return hash;
}

}  // namespace lockstep::trace
