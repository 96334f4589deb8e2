// RegionDigests: which earlier digest an input may take, and every write that takes it away.
#include "collectors/region_digests.h"

#include <gtest/gtest.h>

namespace lockstep::collectors {
namespace {

const void* const kCtx = reinterpret_cast<const void*>(0x10);
const void* const kOtherCtx = reinterpret_cast<const void*>(0x20);
const void* const kStream = reinterpret_cast<const void*>(0x100);
const void* const kOtherStream = reinterpret_cast<const void*>(0x200);
constexpr uint64_t kBase = 0x7f0000000000;  // one allocation of 1 MiB

TEST(RegionDigests, InFlightOnlyOnItsStreamArrivedOnAny) {
  RegionDigests d;
  d.hashed(kBase, 4096, kBase, kCtx, kStream, 7);
  auto known = d.find(kBase, 4096, kCtx, kStream);
  ASSERT_TRUE(known);
  EXPECT_FALSE(known->arrived);
  EXPECT_EQ(known->slot, 7u);
  EXPECT_FALSE(d.find(kBase, 4096, kCtx, kOtherStream));  // no stream order to rely on
  EXPECT_FALSE(d.find(kBase, 4096, kOtherCtx, kStream));
  EXPECT_FALSE(d.find(kBase, 4095, kCtx, kStream));  // another extent: another region
  EXPECT_FALSE(d.find(kBase + 8, 4088, kCtx, kStream));
  d.arrived(kBase, 6, 0xdead);  // an older slot: ignored
  EXPECT_FALSE(d.find(kBase, 4096, kCtx, kStream)->arrived);
  d.arrived(kBase, 7, 0xbeef);
  known = d.find(kBase, 4096, kCtx, kOtherStream);
  ASSERT_TRUE(known);
  EXPECT_TRUE(known->arrived);
  EXPECT_EQ(known->digest, 0xbeefu);
}

// A region inside a hashed region of the same allocation (a view into one tensor): the nearest
// enclosing entry, with find()'s stream rules; never one of another allocation or a fresh one.
TEST(RegionDigests, AnEnclosingRegionOfTheSameAllocation) {
  RegionDigests d;
  d.hashed(kBase, 4096, kBase, kCtx, kStream, 1);
  uint64_t start = 0, length = 0;
  auto known = d.find_enclosing(kBase + 256, 3840, kBase, kCtx, kStream, &start, &length);
  ASSERT_TRUE(known);
  EXPECT_EQ(known->slot, 1u);
  EXPECT_EQ(start, kBase);
  EXPECT_EQ(length, 4096u);
  EXPECT_FALSE(d.find_enclosing(kBase + 256, 3840, kBase, kCtx, kOtherStream, &start, &length));
  EXPECT_FALSE(d.find_enclosing(kBase + 256, 3840, kBase, kOtherCtx, kStream, &start, &length));
  EXPECT_FALSE(d.find_enclosing(kBase + 256, 3844, kBase, kCtx, kStream, &start, &length));
  // The allocation starts after the entry: not the same allocation.
  EXPECT_FALSE(d.find_enclosing(kBase + 256, 256, kBase + 128, kCtx, kStream, &start, &length));
  d.arrived(kBase, 1, 0xbeef);
  known = d.find_enclosing(kBase + 512, 256, kBase, kCtx, kOtherStream, &start, &length);
  ASSERT_TRUE(known);
  EXPECT_EQ(known->digest, 0xbeefu);
  // A nearer region that holds it wins; one that does not is passed over.
  d.hashed(kBase + 256, 3840, kBase, kCtx, kStream, 2);
  d.hashed(kBase + 384, 128, kBase, kCtx, kStream, 3);
  known = d.find_enclosing(kBase + 512, 256, kBase, kCtx, kStream, &start, &length);
  ASSERT_TRUE(known);
  EXPECT_EQ(known->slot, 2u);
  EXPECT_EQ(start, kBase + 256);
  // A write inside the allocation forgets them.
  d.written(kBase + 600, kBase + 601, kBase);
  EXPECT_FALSE(d.find_enclosing(kBase + 512, 256, kBase, kCtx, kStream, &start, &length));
}

TEST(RegionDigests, RehashReplacesTheEntry) {
  RegionDigests d;
  d.hashed(kBase, 4096, kBase, kCtx, kStream, 1);
  d.arrived(kBase, 1, 11);
  d.hashed(kBase, 4096, kBase, kCtx, kStream, 2);
  d.arrived(kBase, 1, 12);  // the old slot's digest arriving late changes nothing
  auto known = d.find(kBase, 4096, kCtx, kStream);
  ASSERT_TRUE(known);
  EXPECT_FALSE(known->arrived);
  EXPECT_EQ(known->slot, 2u);
  EXPECT_EQ(d.size(), 1u);
}

TEST(RegionDigests, OutsideTheAllocationMapNothingIsKept) {
  RegionDigests d;
  d.hashed(kBase, 4096, /*alloc_base=*/0, kCtx, kStream, 1);
  EXPECT_FALSE(d.find(kBase, 4096, kCtx, kStream));
  EXPECT_EQ(d.size(), 0u);
}

TEST(RegionDigests, WritesForgetEveryOverlappingRegionAndNothingElse) {
  RegionDigests d;
  // Suffix regions of one allocation (kernel pointers run to the allocation's end), a capped
  // region, and a neighbour allocation right after it.
  const uint64_t end = kBase + (1 << 20);
  d.hashed(kBase, end - kBase, kBase, kCtx, kStream, 1);
  d.hashed(kBase + 4096, end - kBase - 4096, kBase, kCtx, kStream, 2);
  d.hashed(kBase + 8192, 256, kBase, kCtx, kStream, 3);
  d.hashed(end, 4096, end, kCtx, kStream, 4);
  // A write to [base+4096+256, base+8192): overlaps the two long ones, not [8192, +256).
  d.written(kBase + 4096 + 256, kBase + 8192, kBase);
  EXPECT_FALSE(d.find(kBase, end - kBase, kCtx, kStream));
  EXPECT_FALSE(d.find(kBase + 4096, end - kBase - 4096, kCtx, kStream));
  EXPECT_TRUE(d.find(kBase + 8192, 256, kCtx, kStream));
  EXPECT_TRUE(d.find(end, 4096, kCtx, kStream));
  // Touching ends do not overlap: [base+8192+256, end) leaves [base+8192, +256) alone.
  d.written(kBase + 8192 + 256, end, kBase);
  EXPECT_TRUE(d.find(kBase + 8192, 256, kCtx, kStream));
  EXPECT_TRUE(d.find(end, 4096, kCtx, kStream));
  d.written(kBase + 8192 + 255, kBase + 8192 + 256, 0);  // the last byte, base unknown
  EXPECT_FALSE(d.find(kBase + 8192, 256, kCtx, kStream));
  EXPECT_TRUE(d.find(end, 4096, kCtx, kStream));
  d.written(end - 1, end + 1, 0);  // straddles into the neighbour
  EXPECT_FALSE(d.find(end, 4096, kCtx, kStream));
  EXPECT_EQ(d.size(), 0u);
}

TEST(RegionDigests, AFreshAllocationHoldsNoDigestUntilWritten) {
  RegionDigests d;
  d.allocated(kBase, 1 << 20);
  auto known = d.find(kBase + 4096, 256, kCtx, kStream);  // any region inside, any stream
  ASSERT_TRUE(known);
  EXPECT_TRUE(known->fresh);
  EXPECT_TRUE(d.find(kBase, 1 << 20, kOtherCtx, kOtherStream)->fresh);
  EXPECT_FALSE(d.find(kBase + 4096, 1 << 20, kCtx, kStream));  // runs past the allocation
  EXPECT_FALSE(d.find(kBase - 64, 128, kCtx, kStream));
  d.arrived(kBase, 0, 0x1234);  // slot 0 arriving does not touch a fresh entry
  EXPECT_TRUE(d.find(kBase, 64, kCtx, kStream)->fresh);
  d.written(kBase + 100, kBase + 101, kBase);  // one byte anywhere: no longer fresh
  EXPECT_FALSE(d.find(kBase + 4096, 256, kCtx, kStream));
  EXPECT_EQ(d.size(), 0u);
  // A new allocation at an address with digests of the old one: those are gone.
  d.hashed(kBase, 64, kBase, kCtx, kStream, 5);
  d.allocated(kBase, 1 << 20);
  EXPECT_TRUE(d.find(kBase, 64, kCtx, kStream)->fresh);
  EXPECT_EQ(d.size(), 1u);
}

// A write noted before its call runs: until the call returned, a hash recorded on another
// thread may precede it on the GPU, so no overlapping entry is kept; nor any entry at all while
// a call with unknown writes is open.
TEST(RegionDigests, NoEntryOverlapsAWriteInProgress) {
  RegionDigests d;
  int call = 0, other = 0;
  d.write_begins(&call, kBase + 4096, kBase + 8192);
  d.hashed(kBase + 4000, 200, kBase, kCtx, kStream, 1);  // overlaps: not kept
  d.hashed(kBase, 4096, kBase, kCtx, kStream, 2);        // touches only: kept
  d.hashed(kBase + 8192, 64, kBase, kCtx, kStream, 3);   // kept
  EXPECT_FALSE(d.find(kBase + 4000, 200, kCtx, kStream));
  EXPECT_TRUE(d.find(kBase, 4096, kCtx, kStream));
  EXPECT_TRUE(d.find(kBase + 8192, 64, kCtx, kStream));
  d.writes_end(&other, false);  // another call's end: still in progress
  d.hashed(kBase + 4000, 200, kBase, kCtx, kStream, 4);
  EXPECT_FALSE(d.find(kBase + 4000, 200, kCtx, kStream));
  d.writes_end(&call, false);
  d.hashed(kBase + 4000, 200, kBase, kCtx, kStream, 5);
  EXPECT_TRUE(d.find(kBase + 4000, 200, kCtx, kStream));
  d.unknown_write_begins();
  d.hashed(kBase + 9000, 8, kBase, kCtx, kStream, 6);
  EXPECT_FALSE(d.find(kBase + 9000, 8, kCtx, kStream));
  d.writes_end(&call, true);
  d.hashed(kBase + 9000, 8, kBase, kCtx, kStream, 7);
  EXPECT_TRUE(d.find(kBase + 9000, 8, kCtx, kStream));
}

TEST(RegionDigests, ForgetAllAndTheSizeBound) {
  RegionDigests d;
  for (uint64_t i = 0; i < RegionDigests::kMaxEntries; ++i)
    d.hashed(kBase + i * 64, 64, kBase, kCtx, kStream, i);
  EXPECT_EQ(d.size(), RegionDigests::kMaxEntries);
  d.hashed(kBase, 64, kBase, kCtx, kStream, 99);  // an existing start: replaced, no drop
  EXPECT_EQ(d.size(), RegionDigests::kMaxEntries);
  d.hashed(kBase - 64, 64, kBase - 64, kCtx, kStream, 100);  // one more: the rest dropped
  EXPECT_EQ(d.size(), 1u);
  d.forget_all();
  EXPECT_EQ(d.size(), 0u);
  EXPECT_FALSE(d.find(kBase - 64, 64, kCtx, kStream));
}

// LOCKSTEP_CARRY_FREED: a free keeps the whole allocation's digest aside (one that was in
// flight arrives there too); the next allocation of exactly that range takes it as its entry,
// with find()'s stream rules. Another size, a write over the range, an overlapping allocation or
// an unknown write drop it; a second call for the same free (a held-back one) keeps it.
TEST(RegionDigests, AFreedAllocationsDigestGoesToTheNextAllocationOfItsRange) {
  RegionDigests d;
  d.hashed(kBase, 4096, kBase, kCtx, kStream, 7);
  d.freed_to_pool(kBase, kBase + 4096);
  EXPECT_FALSE(d.find(kBase, 4096, kCtx, kStream));  // freed: no region there now
  d.arrived(kBase, 7, 0xbeef);                       // in flight when it was freed
  d.freed_to_pool(kBase, kBase + 4096);              // the held-back free, made
  EXPECT_EQ(d.freed_size(), 1u);
  ASSERT_TRUE(d.allocated_from_pool(kBase, 4096));
  auto known = d.find(kBase, 4096, kCtx, kOtherStream);
  ASSERT_TRUE(known);
  EXPECT_TRUE(known->arrived);
  EXPECT_EQ(known->digest, 0xbeefu);
  EXPECT_EQ(d.freed_size(), 0u);
  EXPECT_FALSE(d.allocated_from_pool(kBase, 4096));  // taken once

  // Only the whole allocation's region, and only for the same size.
  d.forget_all();
  d.hashed(kBase, 2048, kBase, kCtx, kStream, 8);
  d.freed_to_pool(kBase, kBase + 4096);
  EXPECT_EQ(d.freed_size(), 0u);
  d.hashed(kBase, 4096, kBase, kCtx, kStream, 9);
  d.freed_to_pool(kBase, kBase + 4096);
  EXPECT_FALSE(d.allocated_from_pool(kBase, 2048));
  EXPECT_EQ(d.freed_size(), 0u);  // the pool handed the range out otherwise: dropped

  // Dropped by a write over it, an overlapping allocation, an unknown write.
  for (int way = 0; way < 3; ++way) {
    d.hashed(kBase, 4096, kBase, kCtx, kStream, 10 + way);
    d.freed_to_pool(kBase, kBase + 4096);
    ASSERT_EQ(d.freed_size(), 1u);
    if (way == 0) d.written(kBase + 1024, kBase + 1032, kBase);
    if (way == 1) EXPECT_FALSE(d.allocated_from_pool(kBase - 4096, 8192));
    if (way == 2) d.forget_all();
    EXPECT_EQ(d.freed_size(), 0u) << way;
    EXPECT_FALSE(d.allocated_from_pool(kBase, 4096)) << way;
  }
  // In flight: only on the stream that hashes it, as any in-flight digest.
  d.hashed(kBase, 4096, kBase, kCtx, kStream, 20);
  d.freed_to_pool(kBase, kBase + 4096);
  ASSERT_TRUE(d.allocated_from_pool(kBase, 4096));
  EXPECT_FALSE(d.find(kBase, 4096, kCtx, kOtherStream));
  ASSERT_TRUE(d.find(kBase, 4096, kCtx, kStream));
  EXPECT_EQ(d.find(kBase, 4096, kCtx, kStream)->slot, 20u);
}

}  // namespace
}  // namespace lockstep::collectors
