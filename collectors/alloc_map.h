// The allocation interval map: device allocations and VMM reservations fed by the allocation
// hooks, so that a pointer becomes (allocation ordinal, offset) and a region's end is known
// without a driver query per launch.
//
// Ordinals count allocations and reservations in creation order (1-based), so two runs that
// allocate in the same order give the same ordinals even when addresses move.
// VMM (PyTorch expandable segments): a reservation owns the ordinal; only its mapped subranges
// (cuMemMap) may be read. A region ends at the end of the contiguous mapped run holding it.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

namespace lockstep::collectors {

struct AllocationHit {
  uint32_t ordinal = 0;
  uint64_t offset = 0;  // pointer - allocation (or reservation) base
  uintptr_t base = 0;
  uint64_t readable = 0;     // bytes from the pointer to the end of its mapped run; 0 if unmapped
  bool graph_owned = false;  // a stream-ordered allocation made into a capturing stream
};

// Addresses from `lowest` to `highest` (exclusive): where every known allocation lies. A word
// outside it is no pointer into one, told without a lookup.
struct AddressRange {
  uintptr_t lowest = 0, highest = UINTPTR_MAX;
  bool holds(uintptr_t p) const { return p >= lowest && p < highest; }
};

class AllocationMap {
 public:
  // cuMemAlloc*, cudaMalloc*, pools. graph_owned: cudaMallocAsync & co. into a capturing
  // stream, which make a graph memory node: mapped only while the graph runs, so never read
  // from outside it.
  void add(uintptr_t base, uint64_t bytes, bool graph_owned = false);
  void remove(uintptr_t base);                               // frees of any allocation at base
  void reserve(uintptr_t base, uint64_t bytes);              // cuMemAddressReserve
  void release_reservation(uintptr_t base, uint64_t bytes);  // cuMemAddressFree
  void map(uintptr_t ptr, uint64_t bytes);                   // cuMemMap
  void unmap(uintptr_t ptr, uint64_t bytes);                 // cuMemUnmap

  std::optional<AllocationHit> find(uintptr_t ptr) const;

  // find() for many pointers in a row (a launch's parameter words at full: tens to hundreds of
  // them, most in the address range of the job's allocations): one shared lock for all of them,
  // taken at the first word inside that range, and the last hit's allocation tried before the
  // index, unless entries ever overlapped (a later entry inside it would answer instead). An
  // allocation hook on another thread waits for the reader's few microseconds.
  class Reader {
   public:
    explicit Reader(const AllocationMap& map);
    std::optional<AllocationHit> find(uintptr_t ptr);
    // Where find() may answer: nothing outside it (the bounds when the reader was made).
    AddressRange range() const { return {lowest_, highest_}; }

   private:
    const AllocationMap& map_;
    uintptr_t lowest_, highest_;  // the bounds when the reader was made
    std::shared_lock<std::shared_mutex> lock_;
    uintptr_t last_base_ = 0;  // the last hit's plain allocation (not a reservation), if any
    uint64_t last_bytes_ = 0;
    uint32_t last_ordinal_ = 0;
    bool last_graph_owned_ = false;
    bool shortcut_ = false;  // no entries overlapped when the lock was taken
  };
  // Bumped by every change that may alter an answer find() gave: a free, an unmap or a map (a
  // remap replaces, a new piece may lengthen a run), a reservation released, an allocation or
  // reservation that replaces or overlaps a known one. A caller that remembers find()'s hits
  // (state_records.cpp: the same tensors every optimizer step) keeps them while it stays the
  // same. An allocation that overlaps nothing known leaves it: no hit changes, though a pointer
  // find() did not place may be inside it now (remember no empty answer).
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  size_t size() const;
  size_t mapped_pieces() const;

 private:
  struct Entry {
    uint64_t bytes = 0;
    uint32_t ordinal = 0;
    bool reservation = false;
    bool graph_owned = false;
  };
  using Entries = std::map<uintptr_t, Entry>;
  // Entry containing ptr, or end(): by_base_ first (on cudaMallocAsync a tensor's storage
  // pointer is its allocation's base), then the tree.
  Entries::const_iterator containing(uintptr_t ptr) const;
  Entries::const_iterator containing_in_tree(uintptr_t ptr) const;
  void unmap_locked(uintptr_t begin, uintptr_t end);
  // find()'s answer for ptr inside the entry at it (under the lock).
  std::optional<AllocationHit> hit_locked(Entries::const_iterator it, uintptr_t ptr) const;
  // entries_[base] = entry (the bounds widened, an overlap noted), by_base_ kept with it.
  void put_locked(uintptr_t base, const Entry& entry);
  // The entry at base, if it is (or is not) a reservation, from both.
  void erase_locked(uintptr_t base, bool reservation);

  mutable std::shared_mutex mutex_;
  Entries entries_;  // keyed by base
  // The same entries by their exact base. A job holds thousands of allocations (one per tensor on
  // cudaMallocAsync, which full runs on): the tree's ~12 levels were a cold lookup's ~20 data
  // lines, a third of a full launch's data misses (bench/collectors/launch_lines.py --live 3000);
  // a base found here is one or two lines, and a free finds and erases its entry without a walk.
  // The entry with that base is the one the tree's walk would find for it (the last starting at
  // or before the pointer), so both answer alike.
  std::unordered_map<uintptr_t, Entries::const_iterator> by_base_;
  std::map<uintptr_t, uintptr_t> mapped_;  // [begin, end) of mapped pieces, not overlapping
  uint32_t next_ordinal_ = 1;
  std::atomic<uint64_t> generation_{0};  // changed under the unique lock
  void changed() { generation_.fetch_add(1, std::memory_order_release); }
  // Whether [base, base + bytes) meets an entry (under the unique lock).
  bool overlaps_locked(uintptr_t base, uint64_t bytes) const;
  // Set (under the unique lock) once an entry is added over a known one: a free not seen. From
  // then on a Reader's last hit may not be the answer for a pointer inside it.
  bool overlapped_ = false;
  // Bounds of every address ever added: most scalar words fall outside and skip the lock.
  std::atomic<uintptr_t> lowest_{UINTPTR_MAX}, highest_{0};
  void widen(uintptr_t base, uint64_t bytes);
};

}  // namespace lockstep::collectors
