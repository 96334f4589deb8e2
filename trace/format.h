// On-disk layout of a lockstep trace file. Little-endian throughout.
//
//   FileHeader (24 bytes) | JSON header (json_bytes) | Block | Block | ...
//   Block = BlockHeader (40 bytes) | payload (payload_bytes)
//
// A block's checksum covers its header fields (checksum zeroed) and its payload, so a reader
// detects flipped bytes anywhere and a cut-off tail (the last block is short). Blocks never
// depend on later blocks: the valid prefix of a killed job's file is a usable trace.
//
// Partial StepSummary records of one step (late records, close) add up: the reader sums their
// counts and digests.
//
// Block types:
//   Records   varint-encoded records (encoding.h)
//   Strings   string definitions (id, bytes); always written before any block that uses them
//   Summary   StepSummary records, one per finished step; a diff reads only these to skip
//             equal steps without decoding their record blocks
#pragma once

#include <cstdint>

namespace lockstep::trace {

inline constexpr char kFileMagic[8] = {'L', 'O', 'C', 'K', 'S', 'T', 'E', 'P'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr uint32_t kBlockMagic = 0x4b42534cu;  // "LSBK"
inline constexpr const char* kTraceFileSuffix = ".lstrace";
inline constexpr const char* kManifestName = "manifest.json";

#pragma pack(push, 1)
struct FileHeader {
  char magic[8];
  uint32_t format_version;
  uint32_t json_bytes;
  uint64_t json_checksum;  // XXH64 of the JSON bytes, seed 0
};
static_assert(sizeof(FileHeader) == 24);

enum class BlockType : uint8_t { Records = 1, Strings = 2, Summary = 3 };

struct BlockHeader {
  uint32_t magic;          // kBlockMagic
  uint8_t type;            // BlockType
  uint8_t reserved[3];     // 24-bit check of this header alone (block_frame.h): a reader
                           // tells a corrupt length from a cut-off tail without the payload
  uint32_t payload_bytes;
  uint32_t record_count;   // records or strings in the payload
  uint32_t min_step;       // steps covered by the records (Summary: summarized steps)
  uint32_t max_step;
  uint64_t first_seq;      // smallest seq in the block (0 for Strings)
  uint64_t checksum;       // XXH64 over this header with checksum = 0, then the payload
};
static_assert(sizeof(BlockHeader) == 40);
#pragma pack(pop)

inline constexpr uint32_t kMaxBlockPayload = 64u << 20;  // a reader refuses larger blocks

}  // namespace lockstep::trace
