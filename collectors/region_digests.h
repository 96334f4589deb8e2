// RegionDigests: the digest of each device region hashed since nothing last wrote it.
//
// At level full every pointer a kernel takes is hashed before it (input) and after it (output),
// because a launch does not say which arguments it writes. Most inputs are bytes an earlier
// record hashed already: a weight hashed after the optimizer wrote it, an activation hashed
// after the kernel that made it. Their input digest is that earlier digest, as long as nothing
// wrote the region since: reused, the bytes are not read again (roughly half of full's hashing).
//
// The tracer records every region it hashes here (its slot; the digest once it arrives) and
// tells it every write it sees: a traced op's output regions (the whole mapped run from the
// pointer on, since a clamped extent may be written past the clamp), frees and unmaps. A call
// whose writes are not known (a graph launch, a kernel not fingerprinted, a pointer-array GEMM)
// forgets everything. A digest still in flight is reused only on the stream that hashes it
// (stream order guarantees it sees the same bytes); an arrived digest on any stream (the bytes
// it read were final before the reader was launched).
//
// With LOCKSTEP_SKIP_UNWRITTEN, an allocation no traced op has written since it was made is
// "fresh": an input inside it holds whatever the allocator left there (an output-only tensor,
// passed to a kernel that will write it), so it is not hashed at all and its buffer says so.
//
// With LOCKSTEP_CARRY_FREED, a stream-ordered free keeps the digest of the whole allocation (the
// region from its base to its end, as a kernel that wrote it through its base hashed it) aside,
// and the next pool allocation of exactly that address and size takes it as a known region: the
// bytes the pool hands back are the freed ones, so a kernel's new output tensor needs no hash
// before the kernel writes it. Anything that may change that memory in between drops it: a write
// seen over it, another allocation overlapping it, an unknown write (forget_all).
//
// Not thread-safe: the tracer holds its pending mutex around every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory_resource>
#include <optional>
#include <vector>

#include "common/node_pool.h"

namespace lockstep::collectors {

class RegionDigests {
 public:
  struct Known {
    bool fresh = false;    // inside an allocation nothing wrote since it was made: no digest
    bool arrived = false;  // digest is valid; else it arrives with `slot`
    uint64_t digest = 0;
    uint64_t slot = 0;
  };

  // The region [ptr, ptr + bytes) hashed exactly so (same start, same length), with no write
  // seen since, and usable from `stream` of `context`; or inside a fresh allocation.
  std::optional<Known> find(uint64_t ptr, uint64_t bytes, const void* context,
                            const void* stream) const;
  // [ptr, ptr + bytes) was enqueued for hashing on `stream` as `slot`; it lies inside the
  // allocation starting at alloc_base. Replaces entries that start at ptr.
  void hashed(uint64_t ptr, uint64_t bytes, uint64_t alloc_base, const void* context,
              const void* stream, uint64_t slot);
  // A region hashed that holds [ptr, ptr + bytes) inside the same allocation (starting at or
  // after alloc_base), with the same rules as find(): its start and length in *start, *length.
  std::optional<Known> find_enclosing(uint64_t ptr, uint64_t bytes, uint64_t alloc_base,
                                      const void* context, const void* stream, uint64_t* start,
                                      uint64_t* length) const;
  // [ptr, ptr + bytes) holds bytes whose digest is known without hashing (a recalled fill):
  // usable from any stream, like an arrived digest. The write that put them there is noted
  // (written, write_begins) first; no entry when another write in progress overlaps.
  void recalled(uint64_t ptr, uint64_t bytes, uint64_t alloc_base, const void* context,
                const void* stream, uint64_t digest, const void* owner);
  // A new allocation [base, base + bytes): fresh until something writes any of it.
  void allocated(uint64_t base, uint64_t bytes);
  // A stream-ordered free of the allocation [base, end): its entries are dropped (written()),
  // the one for exactly [base, end) kept aside for the next allocation of that range.
  void freed_to_pool(uint64_t base, uint64_t end);
  // A pool allocation [base, base + bytes): true when a free of exactly that range left its
  // digest, which is now the region's entry; false otherwise (the caller goes on as before).
  bool allocated_from_pool(uint64_t base, uint64_t bytes);
  // The digest of `slot`, which hashed the region starting at ptr, arrived.
  void arrived(uint64_t ptr, uint64_t slot, uint64_t digest);
  // Something wrote (or may have written) [ptr, end). alloc_base: the start of its allocation
  // when known (entries never cross allocations), else 0.
  void written(uint64_t ptr, uint64_t end, uint64_t alloc_base);
  void forget_all();
  // A write noted before its call runs is in progress until the call returned (its work is then
  // in stream order): a hash recorded meanwhile (another thread, the same stream) may precede
  // the write on the GPU, so hashed() keeps no entry overlapping it. `owner`: the call.
  // unknown: the call's writes are not known (no entry is kept at all).
  void write_begins(const void* owner, uint64_t ptr, uint64_t end);
  void unknown_write_begins() { ++unknown_writes_; }
  void writes_end(const void* owner, bool unknown);

  size_t size() const { return entries_.size(); }
  size_t freed_size() const { return freed_.size(); }
  // Above this many entries the oldest knowledge is dropped wholesale (a job that never reuses).
  static constexpr size_t kMaxEntries = 1u << 16;

 private:
  struct Entry {
    uint64_t bytes = 0;
    const void* context = nullptr;  // unused for a fresh allocation (known.fresh)
    const void* stream = nullptr;
    Known known;
  };
  // Nodes from a free list (common/node_pool.h): an entry is made and dropped for about every
  // region of every kernel.
  NodePool pool_;
  using Entries = std::pmr::map<uint64_t, Entry>;
  Entries entries_{&pool_};  // by start address
  Entries freed_{&pool_};    // freed allocations' digests, by base
  uint64_t longest_freed_ = 0;
  void drop_freed(uint64_t ptr, uint64_t end);  // those overlapping [ptr, end)
  uint64_t longest_ = 0;  // the longest entry ever: bounds the overlap search
  // Erases the entries of `map` that overlap [ptr, end), looking from `from` on (an entry
  // overlapping it starts before end and less than its map's longest entry before ptr).
  static void erase_overlapping(Entries& map, uint64_t from, uint64_t ptr, uint64_t end);
  struct WriteInProgress {
    const void* owner;
    uint64_t ptr, end;
  };
  std::vector<WriteInProgress> writes_;  // few: the calls between note_writes and their return
  uint32_t unknown_writes_ = 0;
  // Whether [ptr, ptr + bytes) may get an entry now: inside a known allocation, and no write in
  // progress (but `owner`'s own; null: any) may change it.
  bool may_remember(uint64_t ptr, uint64_t bytes, uint64_t alloc_base, const void* owner) const;
  // The entry at ptr (the table forgotten first when full).
  void remember(uint64_t ptr, uint64_t bytes, const void* context, const void* stream,
                const Known& known);
};

}  // namespace lockstep::collectors
