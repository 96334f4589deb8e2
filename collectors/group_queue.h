// NCCL group semantics: inside ncclGroupStart/End nothing reaches the stream until the
// outermost ncclGroupEnd, so an operation's output fingerprints must wait for it. Groups nest
// and are per thread; the caller keeps one GroupQueue per thread.
#pragma once

#include <chrono>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include <nccl.h>

namespace lockstep::collectors {

template <typename Item>
class GroupQueue {
 public:
  void start() { ++depth_; }
  bool in_group() const { return depth_ > 0; }
  int depth() const { return depth_; }

  // Queues the item when inside a group (returns true); outside, the caller handles it now.
  bool defer(Item item) {
    if (depth_ == 0) return false;
    items_.push_back(std::move(item));
    return true;
  }

  // After the real ncclGroupEnd returned: the items to complete, in call order, once the
  // outermost group closed; empty otherwise. An unmatched end is ignored.
  std::vector<Item> end() {
    if (depth_ > 0) --depth_;
    if (depth_ > 0) return {};
    return std::exchange(items_, {});
  }

 private:
  int depth_ = 0;
  std::vector<Item> items_;
};

// Non-blocking communicators may return ncclInProgress before the work is on the stream. Poll
// the communicator's async error (ncclCommGetAsyncError) until it is no longer in progress.
// Returns the final state, or ncclInProgress if `timeout` passed first (the caller then drops
// the fingerprints rather than hang the job).
inline ncclResult_t wait_until_enqueued(const std::function<ncclResult_t()>& async_error,
                                        std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int spins = 0;; ++spins) {
    ncclResult_t state = async_error();
    if (state != ncclInProgress) return state;
    if (std::chrono::steady_clock::now() >= deadline) return ncclInProgress;
    if (spins > 64)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    else
      std::this_thread::yield();
  }
}

}  // namespace lockstep::collectors
