#include "collectors/region_digests.h"

#include <algorithm>

namespace lockstep::collectors {

std::optional<RegionDigests::Known> RegionDigests::find(uint64_t ptr, uint64_t bytes,
                                                        const void* context,
                                                        const void* stream) const {
  // The entry starting at or before ptr: an exact region, or a fresh allocation holding it.
  auto it = entries_.upper_bound(ptr);
  if (it == entries_.begin()) return std::nullopt;
  --it;
  const Entry& entry = it->second;
  if (entry.known.fresh) {
    if (ptr + bytes > it->first + entry.bytes) return std::nullopt;
    return entry.known;
  }
  if (it->first != ptr || entry.bytes != bytes || entry.context != context) return std::nullopt;
  if (!entry.known.arrived && entry.stream != stream) return std::nullopt;
  return entry.known;
}

std::optional<RegionDigests::Known> RegionDigests::find_enclosing(
    uint64_t ptr, uint64_t bytes, uint64_t alloc_base, const void* context, const void* stream,
    uint64_t* start, uint64_t* length) const {
  if (alloc_base == 0 || ptr < alloc_base) return std::nullopt;
  // Entries starting in [alloc_base, ptr], nearest first: the smallest that holds the region.
  auto it = entries_.upper_bound(ptr);
  for (int looked = 0; it != entries_.begin() && looked < 16; ++looked) {
    --it;
    if (it->first < alloc_base) break;
    const Entry& entry = it->second;
    if (entry.known.fresh || it->first + entry.bytes < ptr + bytes) continue;
    if (entry.context != context || (!entry.known.arrived && entry.stream != stream)) continue;
    *start = it->first;
    *length = entry.bytes;
    return entry.known;
  }
  return std::nullopt;
}

void RegionDigests::freed_to_pool(uint64_t base, uint64_t end) {
  if (end <= base) return;
  // The whole allocation's entry; else what an earlier call for the same free kept aside (a
  // held-back free comes here when the job frees and again when the free is made).
  Entry whole;
  bool keep = false;
  if (const auto it = entries_.find(base);
      it != entries_.end() && !it->second.known.fresh && base + it->second.bytes == end) {
    whole = it->second, keep = true;
  } else if (const auto kept = freed_.find(base);
             kept != freed_.end() && base + kept->second.bytes == end) {
    whole = kept->second, keep = true;
  }
  written(base, end, base);  // drops the range's entries and anything freed there before
  if (!keep) return;
  if (freed_.size() >= kMaxEntries) freed_.clear(), longest_freed_ = 0;
  freed_[base] = whole;
  longest_freed_ = std::max(longest_freed_, whole.bytes);
}

bool RegionDigests::allocated_from_pool(uint64_t base, uint64_t bytes) {
  const auto it = freed_.find(base);
  if (bytes == 0 || it == freed_.end() || it->second.bytes != bytes || unknown_writes_ > 0) {
    drop_freed(base, base + bytes);  // the pool handed these bytes out otherwise
    return false;
  }
  const Entry whole = it->second;
  freed_.erase(it);
  written(base, base + bytes, base);
  remember(base, bytes, whole.context, whole.stream, whole.known);
  return true;
}

void RegionDigests::drop_freed(uint64_t ptr, uint64_t end) {
  if (freed_.empty() || end <= ptr) return;
  erase_overlapping(freed_, ptr >= longest_freed_ ? ptr - longest_freed_ + 1 : 0, ptr, end);
}

void RegionDigests::erase_overlapping(Entries& map, uint64_t from, uint64_t ptr, uint64_t end) {
  auto it = map.lower_bound(from);
  while (it != map.end() && it->first < end) {
    if (it->first + it->second.bytes > ptr)
      it = map.erase(it);
    else
      ++it;
  }
}

void RegionDigests::allocated(uint64_t base, uint64_t bytes) {
  if (bytes == 0) return;
  written(base, base + bytes, base);  // whatever was known of an earlier allocation there
  if (entries_.size() >= kMaxEntries) forget_all();
  Entry& entry = entries_[base];
  entry = Entry{};
  entry.bytes = bytes;
  entry.known.fresh = true;
  longest_ = std::max(longest_, bytes);
}

bool RegionDigests::may_remember(uint64_t ptr, uint64_t bytes, uint64_t alloc_base,
                                 const void* owner) const {
  if (bytes == 0 || alloc_base == 0) return false;  // outside the allocation map: writes unseen
  if (unknown_writes_ > 0) return false;
  for (const WriteInProgress& w : writes_)
    if (w.owner != owner && ptr < w.end && w.ptr < ptr + bytes) return false;
  return true;
}

void RegionDigests::remember(uint64_t ptr, uint64_t bytes, const void* context, const void* stream,
                             const Known& known) {
  if (entries_.size() >= kMaxEntries && !entries_.contains(ptr)) forget_all();
  Entry& entry = entries_[ptr];
  entry.bytes = bytes;
  entry.context = context;
  entry.stream = stream;
  entry.known = known;
  longest_ = std::max(longest_, bytes);
}

void RegionDigests::hashed(uint64_t ptr, uint64_t bytes, uint64_t alloc_base, const void* context,
                           const void* stream, uint64_t slot) {
  if (!may_remember(ptr, bytes, alloc_base, nullptr)) return;
  remember(ptr, bytes, context, stream, Known{false, false, 0, slot});
}

void RegionDigests::recalled(uint64_t ptr, uint64_t bytes, uint64_t alloc_base, const void* context,
                             const void* stream, uint64_t digest, const void* owner) {
  if (!may_remember(ptr, bytes, alloc_base, owner)) return;
  written(ptr, ptr + bytes, alloc_base);
  remember(ptr, bytes, context, stream, Known{false, true, digest, 0});
}

void RegionDigests::arrived(uint64_t ptr, uint64_t slot, uint64_t digest) {
  // Its region may have been freed meanwhile (its digest kept aside for the next allocation).
  for (auto* map : {&entries_, &freed_}) {
    const auto it = map->find(ptr);
    if (it == map->end()) continue;
    Known& known = it->second.known;
    if (known.fresh || known.arrived || known.slot != slot) continue;
    known.arrived = true;
    known.digest = digest;
  }
}

void RegionDigests::written(uint64_t ptr, uint64_t end, uint64_t alloc_base) {
  drop_freed(ptr, end);
  if (entries_.empty() || end <= ptr) return;
  // An entry overlapping [ptr, end) starts before end and less than `longest_` before ptr,
  // and not before the allocation both lie in.
  uint64_t from = ptr >= longest_ ? ptr - longest_ + 1 : 0;
  erase_overlapping(entries_, std::max(from, alloc_base), ptr, end);
}

void RegionDigests::write_begins(const void* owner, uint64_t ptr, uint64_t end) {
  if (end > ptr) writes_.push_back({owner, ptr, end});
}

void RegionDigests::writes_end(const void* owner, bool unknown) {
  if (unknown && unknown_writes_ > 0) --unknown_writes_;
  std::erase_if(writes_, [&](const WriteInProgress& w) { return w.owner == owner; });
}

void RegionDigests::forget_all() {
  entries_.clear();
  longest_ = 0;
  freed_.clear();
  longest_freed_ = 0;
}

}  // namespace lockstep::collectors
