// The step index (format.h, Index block): what a reader would otherwise learn by walking every
// block header and decoding every Summary block, written once by the writer at close, just
// before the End block, and found from the end of the file (EndIndexTrailer). A diff of
// thousands of rank files reads its step summaries with a few reads per file instead of one
// per block.
//
// Payload (little-endian, packed, sizes exact):
//   IndexHead | IndexBlockEntry x head.blocks | IndexSummaryEntry x head.summaries
// Blocks: every block before the Index block, in file order, contiguous from the end of the
// JSON header. Summaries: one per summarized step, ascending, partial summaries merged (as
// TraceReader::step_summaries() gives them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/format.h"

namespace lockstep::trace {

#pragma pack(push, 1)
struct IndexHead {
  uint32_t blocks;
  uint32_t summaries;
};
struct IndexBlockEntry {
  uint64_t offset;  // of the block header
  uint32_t payload_bytes;
  uint32_t record_count;
  uint32_t min_step, max_step;
  uint64_t first_seq;
  uint8_t type;  // BlockType
};
struct IndexSummaryEntry {
  uint32_t step;
  uint64_t record_count;
  uint64_t digest;
  uint64_t job_step;
  uint8_t numbered;  // 1: job_step is the job's number of the step
};
#pragma pack(pop)
static_assert(sizeof(IndexHead) == 8 && sizeof(IndexBlockEntry) == 33 &&
              sizeof(IndexSummaryEntry) == 29);

// The payload for these entries; empty when it would exceed kMaxBlockPayload (the writer then
// writes no index, and readers walk the blocks as for a file without one).
std::vector<uint8_t> encode_step_index(const std::vector<IndexBlockEntry>& blocks,
                                       const std::vector<IndexSummaryEntry>& summaries);

// Parses and bounds a payload: sizes exact, blocks contiguous from `data_start` up to
// `index_offset` with sane headers (format.h bounds), summaries in strictly increasing step
// order with counts that cannot overflow. False with *error (a phrase, no file name) when not.
bool decode_step_index(const uint8_t* payload, size_t bytes, uint64_t data_start,
                       uint64_t index_offset, std::vector<IndexBlockEntry>& blocks,
                       std::vector<IndexSummaryEntry>& summaries, std::string* error);

}  // namespace lockstep::trace
