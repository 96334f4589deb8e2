// NodePool: a memory resource for the nodes of one node-based container (a std::pmr::map), which
// allocates nodes of one size: a free list, refilled from chunks that live as long as the pool.
//
// Why not std::pmr::unsynchronized_pool_resource: it serves every size, so each allocation and
// deallocation first searches its pools for the size's (_M_find_pool) and then its chunk list;
// on the full launch's path (RegionDigests makes and drops an entry for about every region of
// every kernel) this took a cold full launch from 5,766 to 5,508 instructions and from 452 to
// 433 code lines missed (bench/collectors/launch_lines.py --level full). Here both are a
// pointer swap.
//
// A request larger than the first size asked for, or more aligned than it, goes upstream (the
// map's header is never allocated; a map allocates only nodes). Not thread-safe, like the
// container it serves. Memory returns to the upstream resource only when the pool is destroyed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory_resource>
#include <vector>

namespace lockstep {

class NodePool : public std::pmr::memory_resource {
 public:
  explicit NodePool(size_t nodes_per_chunk = 256,
                    std::pmr::memory_resource* upstream = std::pmr::new_delete_resource())
      : nodes_per_chunk_(nodes_per_chunk), upstream_(upstream) {}
  NodePool(const NodePool&) = delete;
  NodePool& operator=(const NodePool&) = delete;
  ~NodePool() override {
    for (void* chunk : chunks_) upstream_->deallocate(chunk, chunk_bytes(), kAlign);
  }

 private:
  static constexpr size_t kAlign = alignof(std::max_align_t);
  struct FreeNode {
    FreeNode* next;
  };
  size_t chunk_bytes() const { return node_bytes_ * nodes_per_chunk_; }

  void* do_allocate(size_t bytes, size_t alignment) override {
    if (node_bytes_ == 0 && alignment <= kAlign)  // the first request sets the node size
      node_bytes_ = (std::max(bytes, sizeof(FreeNode)) + kAlign - 1) / kAlign * kAlign;
    if (bytes > node_bytes_ || alignment > kAlign) return upstream_->allocate(bytes, alignment);
    if (free_ == nullptr) refill();
    FreeNode* node = free_;
    free_ = node->next;
    return node;
  }
  void do_deallocate(void* p, size_t bytes, size_t alignment) override {
    if (bytes > node_bytes_ || alignment > kAlign) return upstream_->deallocate(p, bytes, alignment);
    auto* node = static_cast<FreeNode*>(p);
    node->next = free_;
    free_ = node;
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }
  // A new chunk's nodes, pushed so that the first handed out is the chunk's first.
  void refill() {
    auto* chunk = static_cast<std::byte*>(upstream_->allocate(chunk_bytes(), kAlign));
    chunks_.push_back(chunk);
    for (size_t i = nodes_per_chunk_; i-- > 0;) {
      auto* node = reinterpret_cast<FreeNode*>(chunk + i * node_bytes_);
      node->next = free_;
      free_ = node;
    }
  }

  const size_t nodes_per_chunk_;
  std::pmr::memory_resource* const upstream_;
  size_t node_bytes_ = 0;
  FreeNode* free_ = nullptr;
  std::vector<void*> chunks_;
};

}  // namespace lockstep
