#include "collectors/fill_digests.h"

#include <cstring>

namespace lockstep::collectors {

size_t FillDigests::Hash::operator()(const FillKind& k) const {
  uint64_t words[2];
  std::memcpy(words, k.value.data(), sizeof(words));
  uint64_t h = words[0] * 0x9e3779b97f4a7c15ull ^ words[1];
  h = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull ^ k.bytes;
  h = (h ^ (h >> 31)) * 0x94d049bb133111ebull ^ k.element_bytes;
  return static_cast<size_t>(h ^ (h >> 32));
}

std::optional<uint64_t> FillDigests::recall(const FillKind& kind) {
  std::lock_guard lock(mutex_);
  auto it = kinds_.find(kind);
  if (it == kinds_.end()) {
    if (kinds_.size() < kMaxKinds) kinds_.emplace(kind, Known{0, 1, false, false});
    return std::nullopt;
  }
  Known& known = it->second;
  const bool verify = ++known.fills % kVerifyEvery == 0;
  if (!known.arrived || known.contradicted || verify) return std::nullopt;
  return known.digest;
}

std::optional<uint64_t> FillDigests::known(const FillKind& kind) {
  std::lock_guard lock(mutex_);
  auto it = kinds_.find(kind);
  if (it == kinds_.end() || !it->second.arrived) return std::nullopt;
  return it->second.digest;
}

bool FillDigests::learn(const FillKind& kind, uint64_t digest) {
  std::lock_guard lock(mutex_);
  auto it = kinds_.find(kind);
  if (it == kinds_.end()) return true;  // not followed (the table was full)
  Known& known = it->second;
  if (!known.arrived) {
    known.arrived = true;
    known.digest = digest;
    return true;
  }
  if (known.digest == digest || known.contradicted) return true;  // reported once
  known.contradicted = true;
  return false;
}

}  // namespace lockstep::collectors
