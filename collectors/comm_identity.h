// Communicator identity that is the same on every rank and in every run. NCCL's unique id is
// random per run, so it is not used. Instead:
//   root communicators: numbered 1, 2, ... by creation order in the process (every rank creates
//     them in the same order). A batch of creations for several devices of one clique in one
//     call (ncclCommInitAll) or one group gets one number.
//   split / shrink children: hash of (parent id, colour, k-th split of that parent), with the
//     top bit set, since every member of the parent takes part in every split, in order.
//   communicators first seen in an operation (created before the shim saw them): (1<<62) + the
//     order of first use.
// Every operation gets the next sequence number of its communicator (1-based).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

namespace lockstep::collectors {

struct CommInfo {
  uint64_t id = 0;
  int nranks = 0;
  int rank = 0;
  uint64_t operations = 0;  // sequence number of the last operation
  uint64_t splits = 0;      // children made from this communicator
};

class CommRegistry {
 public:
  // in_group_or_batch: created inside ncclGroupStart/End or by a call that creates several
  // communicators at once (ncclCommInitAll).
  uint64_t root_created(const void* comm, int nranks, int rank, const std::string& api,
                        bool in_group_or_batch);
  // color < 0 for shrink (no colour).
  uint64_t child_created(const void* comm, const void* parent, int color, int nranks, int rank);
  void destroyed(const void* comm);

  // Next operation on `comm`: its id and sequence number. Unknown communicators are adopted.
  // nranks/rank are filled from what creation said (0 if it did not say).
  CommInfo next_operation(const void* comm);
  std::optional<CommInfo> find(const void* comm) const;
  // Rank and size learned later (ncclCommUserRank / ncclCommCount).
  void set_rank(const void* comm, int nranks, int rank);

  static uint64_t child_id(uint64_t parent_id, int color, uint64_t split_index);

 private:
  mutable std::mutex mutex_;
  std::unordered_map<const void*, CommInfo> comms_;
  uint64_t roots_ = 0;
  uint64_t adopted_ = 0;
  // The open batch of root creations (see root_created).
  std::string batch_api_;
  int batch_nranks_ = -1;
  std::set<int> batch_ranks_;
};

}  // namespace lockstep::collectors
