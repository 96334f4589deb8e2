// Sealing and checking block headers (format.h). Besides the checksum over header and payload,
// reserved[0..2] holds a 24-bit check of the header alone, so that a reader scanning headers
// tells a corrupted length (corruption) from a cut-off tail (truncation) without the payload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <xxhash.h>

#include "trace/format.h"

namespace lockstep::trace {

inline uint32_t block_header_check(const BlockHeader& header) {
  BlockHeader copy = header;
  std::memset(copy.reserved, 0, sizeof(copy.reserved));
  copy.checksum = 0;
  return static_cast<uint32_t>(XXH64(&copy, sizeof(copy), 0)) & 0xffffffu;
}

inline uint32_t stored_header_check(const BlockHeader& header) {
  return header.reserved[0] | (header.reserved[1] << 8) | (header.reserved[2] << 16);
}

inline uint64_t block_checksum(const BlockHeader& header, const uint8_t* payload, size_t bytes) {
  BlockHeader copy = header;
  copy.checksum = 0;
  XXH64_state_t state;
  XXH64_reset(&state, 0);
  XXH64_update(&state, &copy, sizeof(copy));
  if (bytes) XXH64_update(&state, payload, bytes);
  return XXH64_digest(&state);
}

// What is wrong with a block header read from a file, judged alone, or nullptr: the reader's
// walk, its reads through the step index and `lockstep verify` (tools/integrity.cpp) say it in
// these words.
inline const char* header_problem(const BlockHeader& header) {
  if (header.magic != kBlockMagic) return "corrupt block header (bad magic)";
  if (stored_header_check(header) != block_header_check(header))
    return "corrupt block header (header check mismatch)";
  if (header.payload_bytes > kMaxBlockPayload) return "corrupt block header (block too large)";
  return nullptr;
}
inline constexpr const char* kChecksumMismatch = "block checksum mismatch (corrupt data)";

// Fills magic, header check and checksum; the caller sets the other fields.
inline void seal_block_header(BlockHeader& header, const uint8_t* payload, size_t bytes) {
  header.magic = kBlockMagic;
  const uint32_t check = block_header_check(header);
  header.reserved[0] = check & 0xff;
  header.reserved[1] = (check >> 8) & 0xff;
  header.reserved[2] = (check >> 16) & 0xff;
  header.checksum = block_checksum(header, payload, bytes);
}

}  // namespace lockstep::trace
