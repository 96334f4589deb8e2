#include <set>

#include <gtest/gtest.h>

#include "collectors/comm_identity.h"

namespace lockstep::collectors {
namespace {

const void* handle(uintptr_t v) { return reinterpret_cast<const void*>(v); }

// What one rank's process does: two root communicators, then splits of the first. Handles
// (addresses) differ per rank and per run; the ids must not.
struct RankRun {
  CommRegistry registry;
  uint64_t world, second, child_a, child_b, child_again;
  RankRun(int rank, uintptr_t address_base) {
    world = registry.root_created(handle(address_base + 1), 4, rank, "ncclCommInitRank", false);
    second = registry.root_created(handle(address_base + 2), 4, rank, "ncclCommInitRank", false);
    const int color = rank % 2;
    child_a = registry.child_created(handle(address_base + 3), handle(address_base + 1), color, 2,
                                     rank / 2);
    child_b =
        registry.child_created(handle(address_base + 4), handle(address_base + 1), 7, 4, rank);
    child_again = registry.child_created(handle(address_base + 5), handle(address_base + 1), color,
                                         2, rank / 2);
  }
};

TEST(CommIdentity, SameOnEveryRankAndRunIndependentOfAddresses) {
  RankRun r0(0, 0x1000), r1(1, 0x9000), r2(2, 0x5550), r2_again(2, 0x7770);
  EXPECT_EQ(r0.world, 1u);
  EXPECT_EQ(r0.second, 2u);
  EXPECT_EQ(r0.world, r1.world);
  EXPECT_EQ(r0.second, r1.second);
  // Same colour: same child; different colour: different child.
  EXPECT_EQ(r0.child_a, r2.child_a);
  EXPECT_NE(r0.child_a, r1.child_a);
  EXPECT_EQ(r0.child_b, r1.child_b);
  // Splitting again with the same colour gives a new communicator.
  EXPECT_NE(r0.child_a, r0.child_again);
  EXPECT_EQ(r0.child_again, r2.child_again);
  // A second run of rank 2 at other addresses.
  EXPECT_EQ(r2.child_a, r2_again.child_a);
  EXPECT_EQ(r2.child_again, r2_again.child_again);
  std::set<uint64_t> ids = {r0.world,   r0.second,  r0.child_a,
                            r1.child_a, r0.child_b, r0.child_again};
  EXPECT_EQ(ids.size(), 6u);
}

TEST(CommIdentity, SplitsOfDifferentParentsDiffer) {
  CommRegistry reg;
  reg.root_created(handle(1), 2, 0, "ncclCommInitRank", false);
  reg.root_created(handle(2), 2, 0, "ncclCommInitRank", false);
  EXPECT_NE(reg.child_created(handle(3), handle(1), 0, 1, 0),
            reg.child_created(handle(4), handle(2), 0, 1, 0));
}

TEST(CommIdentity, SequenceNumbersPerCommunicator) {
  CommRegistry reg;
  reg.root_created(handle(1), 2, 1, "ncclCommInitRank", false);
  reg.root_created(handle(2), 2, 1, "ncclCommInitRank", false);
  EXPECT_EQ(reg.next_operation(handle(1)).operations, 1u);
  EXPECT_EQ(reg.next_operation(handle(1)).operations, 2u);
  EXPECT_EQ(reg.next_operation(handle(2)).operations, 1u);
  CommInfo info = reg.next_operation(handle(1));
  EXPECT_EQ(info.operations, 3u);
  EXPECT_EQ(info.id, 1u);
  EXPECT_EQ(info.nranks, 2);
  EXPECT_EQ(info.rank, 1);
}

TEST(CommIdentity, InitAllBatchSharesOneNumber) {
  CommRegistry reg;
  uint64_t a = reg.root_created(handle(1), 2, 0, "ncclCommInitAll", true);
  uint64_t b = reg.root_created(handle(2), 2, 1, "ncclCommInitAll", true);
  uint64_t c = reg.root_created(handle(3), 2, 0, "ncclCommInitAll", true);  // rank 0 again: new
  uint64_t d = reg.root_created(handle(4), 2, 0, "ncclCommInitRank", false);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(c, d);
}

TEST(CommIdentity, UnknownCommunicatorsAreAdoptedInOrderOfUse) {
  CommRegistry reg;
  CommInfo first = reg.next_operation(handle(77));
  CommInfo second = reg.next_operation(handle(66));
  EXPECT_EQ(first.id, (1ull << 62) + 1);
  EXPECT_EQ(second.id, (1ull << 62) + 2);
  EXPECT_EQ(reg.next_operation(handle(77)).operations, 2u);
  reg.destroyed(handle(77));
  EXPECT_FALSE(reg.find(handle(77)).has_value());
  reg.set_rank(handle(66), 8, 3);
  EXPECT_EQ(reg.find(handle(66))->nranks, 8);
}

}  // namespace
}  // namespace lockstep::collectors
