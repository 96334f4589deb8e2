#include "collectors/alloc_map.h"

#include <iterator>
#include <mutex>

namespace lockstep::collectors {

void AllocationMap::widen(uintptr_t base, uint64_t bytes) {
  if (base < lowest_.load(std::memory_order_relaxed))
    lowest_.store(base, std::memory_order_relaxed);
  if (base + bytes > highest_.load(std::memory_order_relaxed))
    highest_.store(base + bytes, std::memory_order_relaxed);
}

bool AllocationMap::overlaps_locked(uintptr_t base, uint64_t bytes) const {
  if (containing_in_tree(base) != entries_.end()) return true;
  const auto next = entries_.lower_bound(base);  // an entry starting inside the new range
  return next != entries_.end() && next->first < base + bytes;
}

// A PyTorch job allocates every step (its caching allocator growing, stream-ordered pools):
// generation() moves only when a known allocation's answer may change.
void AllocationMap::add(uintptr_t base, uint64_t bytes, bool graph_owned) {
  if (bytes == 0) return;
  std::unique_lock lock(mutex_);
  put_locked(base, Entry{bytes, next_ordinal_++, false, graph_owned});
}

void AllocationMap::reserve(uintptr_t base, uint64_t bytes) {
  if (bytes == 0) return;
  std::unique_lock lock(mutex_);
  put_locked(base, Entry{bytes, next_ordinal_++, true});
}

void AllocationMap::put_locked(uintptr_t base, const Entry& entry) {
  widen(base, entry.bytes);
  const bool overlaps = overlaps_locked(base, entry.bytes);
  by_base_[base] = entries_.insert_or_assign(base, entry).first;
  if (overlaps) {
    overlapped_ = true;
    changed();
  }
}

void AllocationMap::erase_locked(uintptr_t base, bool reservation) {
  const auto found = by_base_.find(base);
  if (found == by_base_.end() || found->second->second.reservation != reservation) return;
  entries_.erase(found->second);
  by_base_.erase(found);
}

void AllocationMap::remove(uintptr_t base) {
  std::unique_lock lock(mutex_);
  erase_locked(base, false);
  changed();
}

void AllocationMap::release_reservation(uintptr_t base, uint64_t bytes) {
  std::unique_lock lock(mutex_);
  erase_locked(base, true);
  unmap_locked(base, base + bytes);
  changed();
}

void AllocationMap::map(uintptr_t ptr, uint64_t bytes) {
  if (bytes == 0) return;
  std::unique_lock lock(mutex_);
  unmap_locked(ptr, ptr + bytes);  // a remap replaces whatever was there
  mapped_[ptr] = ptr + bytes;
  changed();
}

void AllocationMap::unmap(uintptr_t ptr, uint64_t bytes) {
  std::unique_lock lock(mutex_);
  unmap_locked(ptr, ptr + bytes);
  changed();
}

void AllocationMap::unmap_locked(uintptr_t begin, uintptr_t end) {
  if (end <= begin) return;
  auto it = mapped_.upper_bound(begin);
  if (it != mapped_.begin()) --it;
  while (it != mapped_.end() && it->first < end) {
    const uintptr_t piece_begin = it->first, piece_end = it->second;
    if (piece_end <= begin) {
      ++it;
      continue;
    }
    it = mapped_.erase(it);
    if (piece_begin < begin) mapped_[piece_begin] = begin;            // keep the left part
    if (piece_end > end) it = mapped_.emplace(end, piece_end).first;  // and the right part
  }
}

AllocationMap::Entries::const_iterator AllocationMap::containing(uintptr_t ptr) const {
  const auto found = by_base_.find(ptr);
  return found != by_base_.end() ? found->second : containing_in_tree(ptr);
}

AllocationMap::Entries::const_iterator AllocationMap::containing_in_tree(uintptr_t ptr) const {
  auto it = entries_.upper_bound(ptr);
  if (it == entries_.begin()) return entries_.end();
  --it;
  if (ptr - it->first >= it->second.bytes) return entries_.end();
  return it;
}

std::optional<AllocationHit> AllocationMap::find(uintptr_t ptr) const {
  if (ptr < lowest_.load(std::memory_order_relaxed) ||
      ptr >= highest_.load(std::memory_order_relaxed))
    return std::nullopt;
  std::shared_lock lock(mutex_);
  auto it = containing(ptr);
  if (it == entries_.end()) return std::nullopt;
  return hit_locked(it, ptr);
}

AllocationMap::Reader::Reader(const AllocationMap& map)
    : map_(map),
      lowest_(map.lowest_.load(std::memory_order_relaxed)),
      highest_(map.highest_.load(std::memory_order_relaxed)),
      lock_(map.mutex_, std::defer_lock) {}

std::optional<AllocationHit> AllocationMap::Reader::find(uintptr_t ptr) {
  if (ptr < lowest_ || ptr >= highest_) return std::nullopt;
  // Under the lock held since the last hit was found: that allocation is still there.
  if (ptr - last_base_ < last_bytes_) {
    const uint64_t offset = ptr - last_base_;
    return AllocationHit{last_ordinal_, offset, last_base_, last_bytes_ - offset,
                         last_graph_owned_};
  }
  if (!lock_.owns_lock()) {
    lock_.lock();
    shortcut_ = !map_.overlapped_;
  }
  auto it = map_.containing(ptr);
  if (it == map_.entries_.end()) return std::nullopt;
  if (shortcut_ && !it->second.reservation) {
    last_base_ = it->first;
    last_bytes_ = it->second.bytes;
    last_ordinal_ = it->second.ordinal;
    last_graph_owned_ = it->second.graph_owned;
  }
  return map_.hit_locked(it, ptr);
}

std::optional<AllocationHit> AllocationMap::hit_locked(Entries::const_iterator it,
                                                       uintptr_t ptr) const {
  AllocationHit hit{it->second.ordinal, ptr - it->first, it->first, 0, it->second.graph_owned};
  if (!it->second.reservation) {
    hit.readable = it->second.bytes - hit.offset;
    return hit;
  }
  // Walk the contiguous mapped run that holds ptr, within the reservation.
  const uintptr_t reservation_end = it->first + it->second.bytes;
  auto piece = mapped_.upper_bound(ptr);
  if (piece == mapped_.begin()) return hit;
  --piece;
  if (piece->second <= ptr) return hit;
  uintptr_t run_end = piece->second;
  for (++piece; piece != mapped_.end() && piece->first == run_end; ++piece) run_end = piece->second;
  if (run_end > reservation_end) run_end = reservation_end;
  hit.readable = run_end - ptr;
  return hit;
}

size_t AllocationMap::size() const {
  std::shared_lock lock(mutex_);
  return entries_.size();
}

size_t AllocationMap::mapped_pieces() const {
  std::shared_lock lock(mutex_);
  return mapped_.size();
}

}  // namespace lockstep::collectors
