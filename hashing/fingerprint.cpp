// LSF1 host reference: a direct transcription of the definition in hashing/README.md.
#include "hashing/fingerprint.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "hashing/layout.h"

namespace lockstep::hashing {

static_assert(std::endian::native == std::endian::little, "LSF1 reads words little-endian");

uint64_t fingerprint(const void* data, size_t bytes) {
  using namespace lsf1;
  const auto* base = static_cast<const unsigned char*>(data);
  uint64_t leaf_sum = 0;  // wrapping: the order of the additions does not matter
  unsigned char leaf[kLeafBytes];
  for (uint64_t tile = 0; tile * kTileBytes < bytes; ++tile) {
    const unsigned char* tile_data = base + tile * kTileBytes;
    const uint64_t tile_bytes = std::min<uint64_t>(kTileBytes, bytes - tile * kTileBytes);
    for (uint32_t lane = 0; lane < kLanes; ++lane) {
      // Gather the lane's stripes lane, lane+32, ... (the last one may be short).
      size_t leaf_bytes = 0;
      for (uint64_t at = uint64_t{lane} * kStripeBytes; at < tile_bytes;
           at += uint64_t{kLanes} * kStripeBytes) {
        const size_t n = std::min<uint64_t>(kStripeBytes, tile_bytes - at);
        std::memcpy(leaf + leaf_bytes, tile_data + at, n);
        leaf_bytes += n;
      }
      if (leaf_bytes == 0) continue;                              // empty leaves do not exist
      leaf_sum += XXH64(leaf, leaf_bytes, tile * kLanes + lane);  // seed = leaf index
    }
  }
  const uint64_t final_words[2] = {leaf_sum, static_cast<uint64_t>(bytes)};
  return XXH64(final_words, sizeof final_words, kFinalSeed);
}

}  // namespace lockstep::hashing
