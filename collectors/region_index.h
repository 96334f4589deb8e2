// The first position of each (pointer, extent) pair in a list that grows, for a hash launch's
// unique regions (Tracer::enqueue_groups: the same bytes earlier in one launch are hashed once).
// A launch of a few regions compares them directly; the PyTorch hook's state call puts 77 in one
// launch and a graph replay thousands, where comparing each with every earlier one is quadratic
// (2,926 comparisons for 77, on the job's thread once per optimizer step).
//
// Open addressing over a power-of-two table of positions, sized for the launch's total before the
// first insert (at most half full, so a probe ends at an empty cell). The table is the caller's,
// kept from launch to launch: no allocation once it has grown.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lockstep::collectors {

class RegionIndex {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // Empties the index for at most `capacity` inserts.
  void reset(size_t capacity) {
    size_t size = 16;
    while (size < 2 * capacity) size *= 2;
    cells_.assign(size, Cell{0, 0, kNone});
    mask_ = size - 1;
  }
  // The position first inserted with (ptr, bytes), or kNone.
  uint32_t find(uint64_t ptr, uint64_t bytes) const {
    for (size_t at = slot(ptr, bytes);; at = (at + 1) & mask_) {
      const Cell& cell = cells_[at];
      if (cell.position == kNone) return kNone;
      if (cell.ptr == ptr && cell.bytes == bytes) return cell.position;
    }
  }
  // Remembers `position` for (ptr, bytes) unless an earlier position has it.
  void insert(uint64_t ptr, uint64_t bytes, uint32_t position) {
    for (size_t at = slot(ptr, bytes);; at = (at + 1) & mask_) {
      Cell& cell = cells_[at];
      if (cell.position == kNone) {
        cell = Cell{ptr, bytes, position};
        return;
      }
      if (cell.ptr == ptr && cell.bytes == bytes) return;
    }
  }

 private:
  struct Cell {
    uint64_t ptr, bytes;
    uint32_t position;
  };
  size_t slot(uint64_t ptr, uint64_t bytes) const {
    const uint64_t h = (ptr ^ (bytes * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
    return static_cast<size_t>(h >> 32) & mask_;
  }
  std::vector<Cell> cells_;
  size_t mask_ = 0;
};

}  // namespace lockstep::collectors
