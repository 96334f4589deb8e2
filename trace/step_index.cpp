#include "trace/step_index.h"

#include <cstring>

namespace lockstep::trace {
namespace {
// As the reader's bound on summed partial summaries (reader.cpp): far above any job.
constexpr uint64_t kMaxStepRecords = uint64_t{1} << 40;
}  // namespace

std::vector<uint8_t> encode_step_index(const std::vector<IndexBlockEntry>& blocks,
                                       const std::vector<IndexSummaryEntry>& summaries) {
  const uint64_t bytes = sizeof(IndexHead) + blocks.size() * sizeof(IndexBlockEntry) +
                         summaries.size() * sizeof(IndexSummaryEntry);
  if (bytes > kMaxBlockPayload) return {};
  std::vector<uint8_t> out(bytes);
  const IndexHead head{static_cast<uint32_t>(blocks.size()),
                       static_cast<uint32_t>(summaries.size())};
  uint8_t* at = out.data();
  std::memcpy(at, &head, sizeof(head));
  at += sizeof(head);
  if (!blocks.empty()) std::memcpy(at, blocks.data(), blocks.size() * sizeof(IndexBlockEntry));
  at += blocks.size() * sizeof(IndexBlockEntry);
  if (!summaries.empty())
    std::memcpy(at, summaries.data(), summaries.size() * sizeof(IndexSummaryEntry));
  return out;
}

bool decode_step_index(const uint8_t* payload, size_t bytes, uint64_t data_start,
                       uint64_t index_offset, std::vector<IndexBlockEntry>& blocks,
                       std::vector<IndexSummaryEntry>& summaries, std::string* error) {
  auto fail = [&](std::string what) {
    *error = std::move(what);
    return false;
  };
  IndexHead head{};
  if (bytes < sizeof(head)) return fail("step index shorter than its head");
  std::memcpy(&head, payload, sizeof(head));
  const uint64_t expected = sizeof(head) + uint64_t{head.blocks} * sizeof(IndexBlockEntry) +
                            uint64_t{head.summaries} * sizeof(IndexSummaryEntry);
  if (expected != bytes)
    return fail("step index of " + std::to_string(head.blocks) + " blocks and " +
                std::to_string(head.summaries) + " summaries cannot be " + std::to_string(bytes) +
                " bytes");
  const uint8_t* at = payload + sizeof(head);
  blocks.resize(head.blocks);
  if (head.blocks) std::memcpy(blocks.data(), at, head.blocks * sizeof(IndexBlockEntry));
  at += head.blocks * sizeof(IndexBlockEntry);
  summaries.resize(head.summaries);
  if (head.summaries)
    std::memcpy(summaries.data(), at, head.summaries * sizeof(IndexSummaryEntry));

  uint64_t next = data_start;  // where the next block must start
  for (size_t i = 0; i < blocks.size(); ++i) {
    const IndexBlockEntry& b = blocks[i];
    auto which = [i] { return "step index entry " + std::to_string(i); };  // only on failure
    if (b.offset != next) return fail(which() + " is not where the previous block ends");
    if (b.payload_bytes > kMaxBlockPayload) return fail(which() + " claims a block too large");
    next = b.offset + sizeof(BlockHeader) + b.payload_bytes;
    if (next > index_offset) return fail(which() + " runs past the index");
    if (b.type == 0 || b.type == static_cast<uint8_t>(BlockType::End) ||
        b.type == static_cast<uint8_t>(BlockType::Index))
      return fail(which() + " has a block type that cannot precede the index");
    if (b.min_step > b.max_step) return fail(which() + " has min step > max step");
    const uint64_t least = b.type == static_cast<uint8_t>(BlockType::Strings)
                               ? uint64_t{b.record_count} * 2
                               : uint64_t{b.record_count};
    if (least > b.payload_bytes) return fail(which() + " claims more records than fit");
  }
  if (next != index_offset) return fail("step index does not cover the blocks before it");
  for (size_t i = 0; i < summaries.size(); ++i) {
    const IndexSummaryEntry& s = summaries[i];
    if (i > 0 && s.step <= summaries[i - 1].step)
      return fail("step index summaries out of step order");
    if (s.record_count > kMaxStepRecords || s.numbered > 1)
      return fail("step index summary of step " + std::to_string(s.step) + " out of range");
  }
  return true;
}

}  // namespace lockstep::trace
