// The lockstep fingerprint, host reference. The GPU kernels must match it bit for bit.
// Definition, version history and speed: hashing/README.md.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::hashing {

inline constexpr uint32_t kFingerprintVersion = 1;

// Fingerprint of `bytes` bytes at `data` (any alignment).
uint64_t fingerprint(const void* data, size_t bytes);

}  // namespace lockstep::hashing
