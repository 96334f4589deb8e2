// Records waiting on a hash slot's digest, by slot id (Tracer's EngineState::waiters): an input
// whose digest is still in flight (region_digests.h) and the third or later record of a chained
// set that reads one hashed region both wait on its slot, and the collector's thread serves them
// when the digest arrives.
//
// One FIFO list per ring index, its nodes in a pool with a free list: no allocation per waiter
// once the pool has grown. The std::unordered_multimap this replaces allocated a node on the
// launching thread and freed it on the collector's, about one per traced launch at full
// (bench/collectors/launch_cost_bench full+engine: 3.4-3.6 against 1.7 µs a launch). A ring index
// holds one slot id at a time (a slot is reused only after its digest was delivered), but each
// node keeps its slot id and take() matches it, so a stale node can never be served a wrong digest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lockstep::collectors {

template <class Target>
class SlotWaiters {
 public:
  // Empties it for a ring of `ring` slots.
  void reset(size_t ring) {
    lists_.assign(ring, List{});
    pool_.clear();
    free_ = kNone;
    size_ = 0;
  }
  // `target` waits on `slot` (after those already waiting on it).
  void add(uint64_t slot, const Target& target) {
    uint32_t node;
    if (free_ != kNone) {
      node = free_;
      free_ = pool_[node].next;
    } else {
      node = static_cast<uint32_t>(pool_.size());
      pool_.push_back({});
    }
    pool_[node] = Node{target, slot, kNone};
    List& list = lists_[slot % lists_.size()];
    if (list.tail == kNone)
      list.head = node;
    else
      pool_[list.tail].next = node;
    list.tail = node;
    ++size_;
  }
  // Calls f(target) for every waiter on `slot`, in the order they were added, and drops them.
  template <class F>
  void take(uint64_t slot, F&& f) {
    if (size_ == 0) return;
    List& list = lists_[slot % lists_.size()];
    uint32_t kept_head = kNone, kept_tail = kNone;
    for (uint32_t node = list.head; node != kNone;) {
      const uint32_t next = pool_[node].next;
      if (pool_[node].slot == slot) {
        f(pool_[node].target);
        pool_[node].next = free_;
        free_ = node;
        --size_;
      } else {  // not this slot's: stays, in order
        pool_[node].next = kNone;
        if (kept_tail == kNone)
          kept_head = node;
        else
          pool_[kept_tail].next = node;
        kept_tail = node;
      }
      node = next;
    }
    list.head = kept_head;
    list.tail = kept_tail;
  }
  // Calls f(target) for every waiter, of any slot.
  template <class F>
  void for_each(F&& f) const {
    for (const List& list : lists_)
      for (uint32_t node = list.head; node != kNone; node = pool_[node].next) f(pool_[node].target);
  }
  void clear() { reset(lists_.size()); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t pooled() const { return pool_.size(); }  // nodes held: the most that ever waited at once

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  struct Node {
    Target target;
    uint64_t slot;
    uint32_t next;
  };
  struct List {
    uint32_t head = kNone, tail = kNone;
  };
  std::vector<List> lists_;
  std::vector<Node> pool_;
  uint32_t free_ = kNone;
  size_t size_ = 0;
};

}  // namespace lockstep::collectors
