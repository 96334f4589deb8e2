// FillDigests: the digest of a known fill's output, by what the fill writes (level full).
//
// A fill (kernel_writes.h) stores one value over a whole region, so its output bytes are a
// function of the value, the element size and the region's length: the digest of an earlier
// fill with the same three is the digest of this one's output. Under deterministic algorithms
// PyTorch NaN-fills every torch.empty, and the same sizes recur every step: the GPT example's
// fills wrote 9 GB a step, a fifth of everything full hashed. The first fill of each kind is
// hashed; its digest, once arrived, is remembered here, and later fills of that kind take it
// without a hash (their output entries are flagged recalled). Every kVerifyEvery-th fill of a
// kind is hashed all the same; a digest that then differs (the GPU wrote other bytes than the
// same fill before: bad memory, a bad SM) is reported and the kind is no longer recalled.
//
// Thread-safe (its own mutex: looked up on the launch path, taught by the collector).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace lockstep::collectors {

struct FillKind {
  std::array<uint8_t, 16> value{};  // the element's bytes (the rest zero)
  uint32_t element_bytes = 0;
  uint64_t bytes = 0;  // the region's length (what was hashed)
  bool operator==(const FillKind&) const = default;
};

class FillDigests {
 public:
  static constexpr uint32_t kVerifyEvery = 16;  // every 16th fill of a kind is hashed
  static constexpr size_t kMaxKinds = 4096;     // kinds remembered (a job has a few hundred)

  // The digest to take for this fill, or none: hash it (a new kind, a verifying fill, a kind
  // found wrong). Counts the kind's fills.
  std::optional<uint64_t> recall(const FillKind& kind);
  // A fill of `kind` hashed to `digest`. False when it differs from the digest remembered (the
  // first time only: the kind is then hashed, not compared).
  bool learn(const FillKind& kind, uint64_t digest);
  // The digest remembered for `kind`, if any (not counted as a fill).
  std::optional<uint64_t> known(const FillKind& kind);

 private:
  struct Hash {
    size_t operator()(const FillKind& k) const;
  };
  struct Known {
    uint64_t digest = 0;
    uint32_t fills = 0;
    bool arrived = false;
    bool contradicted = false;
  };
  std::mutex mutex_;
  std::unordered_map<FillKind, Known, Hash> kinds_;
};

}  // namespace lockstep::collectors
