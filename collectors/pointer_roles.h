// PointerRoles: the pointer words of one kernel function that its launches were seen not to
// write (level full, LOCKSTEP_LEARN_READONLY).
//
// A launch does not say which of its pointers it writes, so every kernel region is hashed after
// the kernel (Out) as well as before (In). Most of those regions are inputs, hashed again
// unchanged: the larger part of full's cost once input digests are reused. The tracer compares
// each region's In and Out digests when a kernel record completes and tells them here. A word
// whose region came out unchanged in kLearnAfter launches spread over two steps or more, each of
// which changed another of its regions (evidence that the launch's writes go through pointers
// the shim sees), and that never came out changed, is learned read-only: later launches skip its
// Out hash (the In entry is flagged kLearnedReadOnly) and do not count it as written, so its
// digest stays reusable. Every kVerifyEvery-th launch of the kernel hashes every region again; a
// word found changed there is unlearned for good and reported (a warning in the trace).
//
// Why a whole step: some words are written in one launch and not in the next of the same step (a
// multi-tensor-apply kernel's address table keeps stale entries past the tensors a launch
// processes; a radix sort swaps its buffers between passes). Over one step they show both; on
// the GPT example (10 steps, every output hashed) three launches alone learned 11 such words,
// three launches over two steps none, and skipped 37% of the output bytes. Keyed by word and
// pointer value instead, nothing was wrong either, but only 5% was skipped: activations move
// between steps. A job without step markers learns nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace lockstep::collectors {

class PointerRoles {
 public:
  static constexpr uint32_t kLearnAfter = 8;    // unchanged launches (over 2+ steps) first
  static constexpr uint32_t kVerifyEvery = 16;  // every 16th launch hashes every region
  static constexpr uint32_t kMaxWords = 512;    // parameter words followed (4 KiB, the limit)

  explicit PointerRoles(const std::string* kernel_name) : kernel_name_(kernel_name) {}
  const std::string& kernel_name() const { return *kernel_name_; }

  // ---- job threads ----
  // This launch hashes every region (a verification launch). Counts launches.
  bool next_launch_verifies() {
    return launches_.fetch_add(1, std::memory_order_relaxed) % kVerifyEvery == kVerifyEvery - 1;
  }
  bool read_only(uint32_t byte_offset) const {
    const uint32_t word = byte_offset / 8;
    return word < kMaxWords && state_[word].load(std::memory_order_relaxed) == kReadOnly;
  }

  // ---- the collector (one thread at a time: the tracer's pending mutex) ----
  enum class Change { None, Learned, Contradicted };
  // The word's region came out of a launch in `step` changed or not. `evidence`: another region
  // of the same launch changed (an unchanged region counts towards learning only then).
  Change observe(uint32_t byte_offset, uint32_t step, bool changed, bool evidence);

 private:
  enum : uint8_t { kUnknown = 0, kReadOnly = 1, kWritten = 2 };
  struct Unchanged {
    uint8_t count = 0;
    uint32_t first_step = 0;
  };
  const std::string* kernel_name_;
  std::atomic<uint32_t> launches_{0};
  std::atomic<uint8_t> state_[kMaxWords] = {};
  Unchanged unchanged_[kMaxWords] = {};  // collector only
};

}  // namespace lockstep::collectors
