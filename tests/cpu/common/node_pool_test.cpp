// NodePool (common/node_pool.h): the free list behind RegionDigests' maps.
#include "common/node_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory_resource>
#include <set>

namespace lockstep {
namespace {

// Counts what reaches the upstream resource.
class CountingResource : public std::pmr::memory_resource {
 public:
  int allocations = 0, deallocations = 0;

 private:
  void* do_allocate(size_t bytes, size_t alignment) override {
    ++allocations;
    return std::pmr::new_delete_resource()->allocate(bytes, alignment);
  }
  void do_deallocate(void* p, size_t bytes, size_t alignment) override {
    ++deallocations;
    std::pmr::new_delete_resource()->deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override {
    return this == &o;
  }
};

TEST(NodePool, AFreedNodeIsTheNextOneHandedOut) {
  NodePool pool(4);
  void* a = pool.allocate(48);
  void* b = pool.allocate(48);
  EXPECT_NE(a, b);
  pool.deallocate(a, 48);
  EXPECT_EQ(pool.allocate(48), a);
  pool.deallocate(b, 48);
}

TEST(NodePool, NodesComeFromChunksAndGoBackOnlyWithThePool) {
  CountingResource upstream;
  {
    NodePool pool(4, &upstream);
    std::set<void*> nodes;
    for (int i = 0; i < 9; ++i) nodes.insert(pool.allocate(40));
    EXPECT_EQ(nodes.size(), 9u);  // distinct
    EXPECT_EQ(upstream.allocations, 3);  // chunks of 4 nodes
    for (void* p : nodes) pool.deallocate(p, 40);
    for (int i = 0; i < 9; ++i) nodes.insert(pool.allocate(40));  // from the free list
    EXPECT_EQ(nodes.size(), 9u);  // the same nodes again
    EXPECT_EQ(upstream.allocations, 3);
    EXPECT_EQ(upstream.deallocations, 0);
  }
  EXPECT_EQ(upstream.deallocations, 3);
}

TEST(NodePool, ALargerRequestThanTheFirstGoesUpstream) {
  CountingResource upstream;
  NodePool pool(4, &upstream);
  void* node = pool.allocate(32);
  EXPECT_EQ(upstream.allocations, 1);
  void* big = pool.allocate(4096);
  EXPECT_EQ(upstream.allocations, 2);
  pool.deallocate(big, 4096);
  EXPECT_EQ(upstream.deallocations, 1);
  pool.deallocate(node, 32);
  EXPECT_EQ(upstream.deallocations, 1);
}

TEST(NodePool, AMapOnItKeepsItsEntriesThroughChurn) {
  NodePool pool(8);
  std::pmr::map<uint64_t, uint64_t> map(&pool);
  std::map<uint64_t, uint64_t> reference;
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 20000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const uint64_t key = x % 512;
    if (x & 1 << 20) {
      map[key] = x, reference[key] = x;
    } else {
      map.erase(key), reference.erase(key);
    }
  }
  ASSERT_EQ(map.size(), reference.size());
  EXPECT_TRUE(std::equal(map.begin(), map.end(), reference.begin(), reference.end()));
}

}  // namespace
}  // namespace lockstep
