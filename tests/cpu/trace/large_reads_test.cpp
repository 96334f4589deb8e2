// The reader's large reads (issue #34): opening a file reads its headers in one read and its
// trailer, End block and index in two; verify_all and for_each_record read the blocks they walk
// in file order from one read of up to 4 MiB at a time. Whatever lies past those reads (a JSON
// header or an index larger than the first read, a block across a 4 MiB boundary) is read whole,
// and a flipped byte there is still caught at its block's offset.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "trace/block_frame.h"

namespace lockstep::trace {
namespace {

using testing::read_bytes;
using testing::write_bytes;

// The reader's read sizes (trace/reader.cpp), which these files must exceed.
constexpr size_t kFirstRead = 4096;      // file header and JSON header; the End block's tail
constexpr size_t kSpanChunk = 4u << 20;  // blocks read in file order

// `steps` steps of `per_step` Metric records of `payload` bytes each.
std::string write_file(const testing::TempDir& dir, const std::string& name,
                       const nlohmann::json& header, uint32_t steps, int per_step,
                       size_t payload, size_t block_bytes) {
  const std::string path = dir.file(name);
  WriterOptions options;
  options.path = path;
  options.block_bytes = block_bytes;
  std::string error;
  auto writer = TraceWriter::open(options, header, &error);
  EXPECT_TRUE(writer) << error;
  if (!writer) return path;
  Record record;
  uint64_t seq = 0;
  for (uint32_t step = 0; step < steps; ++step) {
    for (int i = 0; i < per_step; ++i) {
      record.clear();
      record.kind = RecordKind::Metric;
      record.name = writer->intern("loss " + std::to_string(i % 3));
      record.seq = ++seq;
      record.step = step;
      record.payload.assign(payload, static_cast<uint8_t>(seq * 31 + step));
      writer->append(record);
    }
    writer->end_step(step);
  }
  writer->close();
  return path;
}

// The block whose header and payload contain file offset `at`.
std::optional<BlockInfo> block_across(const std::string& path, uint64_t at) {
  for (const BlockInfo& block : TraceReader::open(path)->blocks())
    if (block.offset <= at && at < block.offset + sizeof(BlockHeader) + block.payload_bytes)
      return block;
  return std::nullopt;
}

TEST(LargeReads, AJsonHeaderLargerThanTheFirstReadIsReadWhole) {
  testing::TempDir dir;
  const std::string pad(3 * kFirstRead, 'p');
  const std::string path =
      write_file(dir, "a.lstrace", {{"rank", 0}, {"pad", pad}}, 3, 4, 8, 4096);
  auto reader = TraceReader::open(path);
  EXPECT_EQ(reader->header().value("pad", std::string()), pad);
  EXPECT_TRUE(reader->indexed());
  EXPECT_EQ(testing::read_all_records(*reader).size(), 12u);
}

TEST(LargeReads, AnIndexLargerThanTheTailReadIsReadFromTheEnd) {
  testing::TempDir dir;
  // 600 steps: 600 summaries of 29 bytes and a block a step or so of 33 bytes each.
  const std::string path = write_file(dir, "a.lstrace", {{"rank", 0}}, 600, 2, 8, 512);
  auto reader = TraceReader::open(path);
  ASSERT_TRUE(reader->indexed()) << "the index checks out though it lies past the tail read";
  const BlockInfo& index = reader->blocks()[reader->blocks().size() - 2];
  ASSERT_EQ(index.type, BlockType::Index);
  EXPECT_GT(index.payload_bytes, 4 * kFirstRead);
  ASSERT_EQ(reader->step_summaries().size(), 600u);
  EXPECT_EQ(reader->step_summaries().back().record_count, 2u);
  reader->verify_all();  // the index agrees with every block and Summary block
  ASSERT_TRUE(reader->end().has_value());
  EXPECT_TRUE(reader->end()->clean);
}

TEST(LargeReads, AFileOfSeveralSpanChunksIsReadWholeAndAFlipAcrossABoundaryIsCaught) {
  testing::TempDir dir;
  // ~10 MiB of 64 KiB blocks: two 4 MiB boundaries fall inside blocks.
  const std::string path = write_file(dir, "a.lstrace", {{"rank", 0}}, 40, 64, 4000, 64u << 10);
  {
    auto reader = TraceReader::open(path);
    reader->verify_all();
    const std::vector<Record> records = testing::read_all_records(*reader);
    ASSERT_EQ(records.size(), 40u * 64u);
    for (size_t i = 0; i < records.size(); ++i) {
      ASSERT_EQ(records[i].seq, i + 1);
      ASSERT_EQ(records[i].payload.size(), 4000u);
      ASSERT_EQ(records[i].payload[3999], static_cast<uint8_t>((i + 1) * 31 + records[i].step));
    }
    // A window of a few steps in the middle gives exactly their records.
    size_t middle = 0;
    reader->for_each_record(17, 23, [&](const Record& r) {
      EXPECT_GE(r.step, 17u);
      EXPECT_LE(r.step, 23u);
      ++middle;
      return true;
    });
    EXPECT_EQ(middle, 7u * 64u);
  }
  std::vector<uint8_t> bytes = read_bytes(path);
  ASSERT_GT(bytes.size(), 2 * kSpanChunk + (1u << 20));
  FileHeader file{};
  std::memcpy(&file, bytes.data(), sizeof(file));
  // verify_all's first read ends 4 MiB after the JSON header, inside a block whose payload
  // continues past it: that block is read again, whole, from its header.
  const uint64_t boundary = sizeof(file) + file.json_bytes + kSpanChunk;
  const std::optional<BlockInfo> victim = block_across(path, boundary);
  ASSERT_TRUE(victim.has_value());
  ASSERT_EQ(victim->type, BlockType::Records);
  const uint64_t victim_offset = victim->offset;
  ASSERT_LT(victim_offset + sizeof(BlockHeader), boundary) << "the boundary falls in the payload";
  ASSERT_LT(boundary + 10, victim_offset + sizeof(BlockHeader) + victim->payload_bytes);
  bytes[boundary + 10] ^= 0x20;
  write_bytes(dir.file("flipped.lstrace"), bytes);
  const std::string where = "block checksum mismatch (corrupt data) at offset " +
                            std::to_string(victim_offset);
  auto flipped = TraceReader::open(dir.file("flipped.lstrace"));
  try {
    flipped->verify_all();
    ADD_FAILURE() << "verify_all passed a flipped byte";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find(where), std::string::npos) << e.what();
  }
  try {
    testing::read_all_records(*flipped);
    ADD_FAILURE() << "for_each_record passed a flipped byte";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find(where), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lockstep::trace
