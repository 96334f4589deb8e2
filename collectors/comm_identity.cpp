#include "collectors/comm_identity.h"

namespace lockstep::collectors {
namespace {
uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

uint64_t CommRegistry::child_id(uint64_t parent_id, int color, uint64_t split_index) {
  uint64_t h = mix(parent_id);
  h = mix(h ^ static_cast<uint64_t>(static_cast<int64_t>(color)));
  h = mix(h ^ split_index);
  return h | (1ull << 63);
}

uint64_t CommRegistry::root_created(const void* comm, int nranks, int rank, const std::string& api,
                                    bool in_group_or_batch) {
  std::lock_guard lock(mutex_);
  const bool joins_batch = in_group_or_batch && roots_ > 0 && api == batch_api_ &&
                           nranks == batch_nranks_ && !batch_ranks_.contains(rank);
  if (!joins_batch) {
    ++roots_;
    batch_api_ = api;
    batch_nranks_ = nranks;
    batch_ranks_.clear();
  }
  batch_ranks_.insert(rank);
  CommInfo& info = comms_[comm];
  info = CommInfo{};
  info.id = roots_;
  info.nranks = nranks;
  info.rank = rank;
  return info.id;
}

uint64_t CommRegistry::child_created(const void* comm, const void* parent, int color, int nranks,
                                     int rank) {
  std::lock_guard lock(mutex_);
  batch_nranks_ = -1;  // a split closes any open batch of root creations
  auto found = comms_.find(parent);
  if (found == comms_.end()) {
    found = comms_.emplace(parent, CommInfo{}).first;
    found->second.id = (1ull << 62) + ++adopted_;
  }
  CommInfo& parent_info = found->second;
  const uint64_t id = child_id(parent_info.id, color, parent_info.splits++);
  CommInfo& info = comms_[comm];
  info = CommInfo{};
  info.id = id;
  info.nranks = nranks;
  info.rank = rank;
  return id;
}

void CommRegistry::destroyed(const void* comm) {
  std::lock_guard lock(mutex_);
  comms_.erase(comm);
}

CommInfo CommRegistry::next_operation(const void* comm) {
  std::lock_guard lock(mutex_);
  auto [it, inserted] = comms_.try_emplace(comm);
  if (inserted) it->second.id = (1ull << 62) + ++adopted_;
  ++it->second.operations;
  return it->second;
}

std::optional<CommInfo> CommRegistry::find(const void* comm) const {
  std::lock_guard lock(mutex_);
  auto it = comms_.find(comm);
  if (it == comms_.end()) return std::nullopt;
  return it->second;
}

void CommRegistry::set_rank(const void* comm, int nranks, int rank) {
  std::lock_guard lock(mutex_);
  auto it = comms_.find(comm);
  if (it == comms_.end()) return;
  it->second.nranks = nranks;
  it->second.rank = rank;
}

}  // namespace lockstep::collectors
