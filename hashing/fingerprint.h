// LSF1, the lockstep fingerprint: host reference. The GPU kernels match it bit for bit.
// Definition (16 KiB tiles, lane-striped 512-byte leaves, XXH64 seeded by leaf index, wrapping
// sum, XXH64 of {sum, length}), properties, version history and speed: hashing/README.md.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::hashing {

inline constexpr uint32_t kFingerprintVersion = 1;

// Fingerprint of `bytes` bytes at `data` (any alignment; bytes == 0 is defined).
uint64_t fingerprint(const void* data, size_t bytes);

}  // namespace lockstep::hashing
