// The step index (format.h, Index block; step_index.h): written at close before the End block,
// read from the end of the file instead of walking every block, absent from files a writer did
// not close (which are walked as before), never trusted over a cut-off or corrupt tail.
#include <gtest/gtest.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "trace/block_frame.h"
#include "trace/step_index.h"

namespace lockstep::trace {
namespace {

using testing::read_bytes;
using testing::write_bytes;

std::unique_ptr<TraceWriter> open_writer(const std::string& path, WriterOptions options = {}) {
  options.path = path;
  std::string error;
  auto writer = TraceWriter::open(options, nlohmann::json{{"rank", 0}}, &error);
  EXPECT_TRUE(writer) << error;
  return writer;
}

// `steps` steps of `per_step` kernels; a numbered StepMarker opens every step but the first,
// and blocks span several steps when the writer's blocks are small.
void append_steps(TraceWriter& writer, uint32_t steps, int per_step) {
  Record record;
  uint64_t seq = 0;
  for (uint32_t step = 0; step < steps; ++step) {
    if (step > 0) {
      record.clear();
      record.kind = RecordKind::StepMarker;
      record.seq = ++seq;
      record.step = step;
      record.name = writer.intern("step " + std::to_string(step + 100));
      record.fields[fields::StepMarker::new_step] = step;
      record.fields[fields::StepMarker::job_step] = step + 100;
      record.fields[fields::StepMarker::numbered] = 1;
      writer.append(record);
    }
    for (int i = 0; i < per_step; ++i) {
      record.clear();
      record.kind = RecordKind::Kernel;
      record.name = writer.intern("kernel " + std::to_string(i % 5));
      record.seq = ++seq;
      record.step = step;
      record.fields[fields::Kernel::grid_x] = i * 7 + step;
      writer.append(record);
    }
    writer.end_step(step);
  }
}

std::string write_closed(const testing::TempDir& dir, const std::string& name,
                         uint32_t steps = 12, int per_step = 40) {
  const std::string path = dir.file(name);
  WriterOptions options;
  options.block_bytes = 2048;  // many blocks, some spanning steps
  auto writer = open_writer(path, options);
  append_steps(*writer, steps, per_step);
  writer->close();
  return path;
}

// Every block header of the file, walked here without the reader.
std::vector<BlockInfo> walk(const std::vector<uint8_t>& bytes) {
  FileHeader file{};
  std::memcpy(&file, bytes.data(), sizeof(file));
  std::vector<BlockInfo> out;
  for (uint64_t at = sizeof(file) + file.json_bytes; at + sizeof(BlockHeader) <= bytes.size();) {
    BlockHeader h{};
    std::memcpy(&h, bytes.data() + at, sizeof(h));
    out.push_back({at, static_cast<BlockType>(h.type), h.payload_bytes, h.record_count, h.min_step,
                   h.max_step, h.first_seq});
    at += sizeof(h) + h.payload_bytes;
  }
  return out;
}

bool same_blocks(const std::vector<BlockInfo>& a, const std::vector<BlockInfo>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.offset == y.offset && x.type == y.type && x.payload_bytes == y.payload_bytes &&
           x.record_count == y.record_count && x.min_step == y.min_step &&
           x.max_step == y.max_step;
  });
}

bool same_summaries(const std::vector<StepSummary>& a, const std::vector<StepSummary>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.step == y.step && x.record_count == y.record_count && x.digest == y.digest &&
           x.job_step == y.job_step;
  });
}

// Replaces the payload of the block at `offset` (same size) and seals it again: a file whose
// checksums all hold but whose content says something else.
void reseal(std::vector<uint8_t>& bytes, uint64_t offset,
            const std::function<void(uint8_t* payload, size_t size)>& edit) {
  BlockHeader h{};
  std::memcpy(&h, bytes.data() + offset, sizeof(h));
  uint8_t* payload = bytes.data() + offset + sizeof(h);
  edit(payload, h.payload_bytes);
  seal_block_header(h, payload, h.payload_bytes);
  std::memcpy(bytes.data() + offset, &h, sizeof(h));
}

TEST(StepIndex, IsWrittenAtCloseJustBeforeTheEndBlockAndListsEveryBlock) {
  testing::TempDir dir;
  const std::string path = write_closed(dir, "a.lstrace");
  const std::vector<uint8_t> bytes = read_bytes(path);
  const std::vector<BlockInfo> walked = walk(bytes);
  ASSERT_GE(walked.size(), 3u);
  EXPECT_EQ(walked[walked.size() - 2].type, BlockType::Index);
  EXPECT_EQ(walked.back().type, BlockType::End);
  EndIndexTrailer trailer{};
  std::memcpy(&trailer, bytes.data() + bytes.size() - sizeof(trailer), sizeof(trailer));
  EXPECT_EQ(trailer.magic, kIndexTrailerMagic);
  EXPECT_EQ(trailer.index_offset, walked[walked.size() - 2].offset);
  EXPECT_EQ(trailer.end_block_bytes, bytes.size() - walked.back().offset);

  auto reader = TraceReader::open(path);
  EXPECT_TRUE(reader->indexed());
  EXPECT_TRUE(same_blocks(reader->blocks(), walked)) << "the index lists the file's blocks";
  reader->verify_all();  // checks the index against the blocks and the Summary blocks
  ASSERT_TRUE(reader->end().has_value());
  EXPECT_TRUE(reader->end()->clean);
  EXPECT_EQ(reader->end()->reason, "exit");
}

TEST(StepIndex, GivesTheSameSummariesAsTheSummaryBlocks) {
  testing::TempDir dir;
  const std::string path = write_closed(dir, "a.lstrace");
  auto indexed = TraceReader::open(path);
  ASSERT_TRUE(indexed->indexed());
  const std::vector<StepSummary> from_index = indexed->step_summaries();
  // The same file without its index and End block (a writer killed just before close) is
  // walked, and its Summary blocks decoded.
  std::vector<uint8_t> bytes = read_bytes(path);
  const std::vector<BlockInfo> walked = walk(bytes);
  bytes.resize(walked[walked.size() - 2].offset);
  write_bytes(dir.file("walked.lstrace"), bytes);
  auto scanned = TraceReader::open(dir.file("walked.lstrace"));
  EXPECT_FALSE(scanned->indexed());
  EXPECT_FALSE(scanned->end().has_value());
  const std::vector<StepSummary> from_blocks = scanned->step_summaries();
  ASSERT_EQ(from_index.size(), 12u);
  EXPECT_TRUE(same_summaries(from_index, from_blocks));
  EXPECT_EQ(from_index[0].record_count, 40u);
  EXPECT_FALSE(from_index[0].job_step.has_value());
  EXPECT_EQ(from_index[3].record_count, 41u);  // its marker and 40 kernels
  EXPECT_EQ(from_index[3].job_step, 103u);
  // Records read through the index's block list are the file's.
  EXPECT_EQ(testing::read_all_records(*indexed).size(),
            testing::read_all_records(*scanned).size());
}

TEST(StepIndex, IsAbsentFromAFileSealedByASignalWhichIsWalkedAsBefore) {
  testing::TempDir dir;
  const std::string path = dir.file("killed.lstrace");
  auto writer = open_writer(path);
  append_steps(*writer, 4, 10);
  writer->flush();
  writer->seal_after_signal(15);
  // The file as the handler left it (the process would die here; this one closes the writer).
  write_bytes(dir.file("sealed.lstrace"), read_bytes(path));
  writer->close();
  auto reader = TraceReader::open(dir.file("sealed.lstrace"));
  EXPECT_FALSE(reader->indexed());
  for (const BlockInfo& block : reader->blocks()) EXPECT_NE(block.type, BlockType::Index);
  ASSERT_TRUE(reader->end().has_value());
  EXPECT_FALSE(reader->end()->clean);
  EXPECT_EQ(reader->end()->reason, "signal 15");
  reader->verify_all();
}

TEST(StepIndex, IsAbsentFromOlderTracesWhichReadAsBefore) {
  // The project's sample traces were written before the index (format versions 1 and 2).
  for (const char* name : {"cuda-det-full-1", "cuda-atomic-full-1"}) {
    const std::string run = std::string(LOCKSTEP_SOURCE_DIR) + "/examples/traces/" + name;
    for (const auto& entry : std::filesystem::directory_iterator(run)) {
      if (entry.path().extension() != ".lstrace") continue;
      auto reader = TraceReader::open(entry.path());
      EXPECT_FALSE(reader->indexed()) << entry.path();
      EXPECT_FALSE(reader->step_summaries().empty()) << entry.path();
      reader->verify_all();
    }
  }
}

TEST(StepIndex, IsNeverTrustedOverACutOffTail) {
  testing::TempDir dir;
  const std::string path = write_closed(dir, "a.lstrace", 6, 20);
  const std::vector<uint8_t> whole = read_bytes(path);
  const std::vector<BlockInfo> walked = walk(whole);
  const uint64_t index_at = walked[walked.size() - 2].offset;
  // Every cut from inside the last Records block to one byte short of the whole file.
  int cuts = 0;
  for (uint64_t size = walked[walked.size() - 3].offset + 1; size < whole.size(); ++size) {
    std::vector<uint8_t> bytes(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(size));
    write_bytes(dir.file("cut.lstrace"), bytes);
    auto reader = TraceReader::open(dir.file("cut.lstrace"));
    ASSERT_FALSE(reader->indexed()) << "cut at " << size;
    ASSERT_FALSE(reader->end().has_value()) << "cut at " << size << ": no End block, unfinished";
    if (size != index_at && size != walked.back().offset)
      EXPECT_TRUE(reader->truncated()) << "cut at " << size;
    ++cuts;
  }
  EXPECT_GT(cuts, 100);
}

TEST(StepIndex, AFlippedByteInTheIndexOrTheEndIsCaughtNotTrusted) {
  testing::TempDir dir;
  const std::string path = write_closed(dir, "a.lstrace");
  const std::vector<uint8_t> whole = read_bytes(path);
  const std::vector<BlockInfo> walked = walk(whole);
  const BlockInfo index = walked[walked.size() - 2], end = walked.back();
  struct Flip {
    const char* where;
    uint64_t offset;
    uint64_t block;  // the block the reader names
  } flips[] = {{"index payload", index.offset + sizeof(BlockHeader) + 20, index.offset},
               {"end trailer", whole.size() - 3, end.offset}};
  for (const Flip& flip : flips) {
    std::vector<uint8_t> bytes = whole;
    bytes[flip.offset] ^= 0x10;
    write_bytes(dir.file("flipped.lstrace"), bytes);
    auto reader = TraceReader::open(dir.file("flipped.lstrace"));
    EXPECT_FALSE(reader->indexed()) << flip.where;  // walked instead
    try {
      reader->verify_all();
      ADD_FAILURE() << flip.where << ": verify_all passed";
    } catch (const TraceError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("checksum mismatch"), std::string::npos) << what;
      EXPECT_NE(what.find("at offset " + std::to_string(flip.block)), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

TEST(StepIndex, AnIndexWhoseChecksumHoldsButWhoseEntriesDoNotIsCorruption) {
  testing::TempDir dir;
  const std::string path = write_closed(dir, "a.lstrace");
  const std::vector<uint8_t> whole = read_bytes(path);
  const uint64_t index_at = walk(whole)[walk(whole).size() - 2].offset;
  // An entry that does not start where the previous block ends.
  std::vector<uint8_t> bytes = whole;
  reseal(bytes, index_at, [](uint8_t* payload, size_t) {
    payload[sizeof(IndexHead) + sizeof(IndexBlockEntry)] ^= 0x01;  // entry 1's offset
  });
  write_bytes(dir.file("bad.lstrace"), bytes);
  auto reader = TraceReader::open(dir.file("bad.lstrace"));
  try {
    reader->blocks();
    ADD_FAILURE() << "a step index that does not cover the file was used";
  } catch (const TraceError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("corrupt step index"), std::string::npos) << what;
    EXPECT_NE(what.find("at offset " + std::to_string(index_at)), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  // A summary that is not the Summary blocks': used by a reader, caught by verify_all.
  bytes = whole;
  reseal(bytes, index_at, [](uint8_t* payload, size_t size) {
    payload[size - sizeof(IndexSummaryEntry) + 4] ^= 0x01;  // the last summary's record count
  });
  write_bytes(dir.file("lying.lstrace"), bytes);
  auto lying = TraceReader::open(dir.file("lying.lstrace"));
  EXPECT_TRUE(lying->indexed());
  EXPECT_THROW(lying->verify_all(), TraceError);
}

TEST(StepIndex, EncodingRefusesWhatCannotBeOneBlockAndDecodingBoundsEveryNumber) {
  std::vector<IndexBlockEntry> blocks(kMaxBlockPayload / sizeof(IndexBlockEntry) + 1);
  EXPECT_TRUE(encode_step_index(blocks, {}).empty());
  // Two blocks from offset 100, then summaries out of order.
  std::vector<IndexBlockEntry> two = {{100, 10, 1, 0, 0, 1, 1}, {150, 0, 0, 0, 0, 0, 2}};
  std::vector<IndexSummaryEntry> summaries = {{3, 1, 1, 0, 0}, {2, 1, 1, 0, 0}};
  std::vector<uint8_t> payload = encode_step_index(two, summaries);
  std::vector<IndexBlockEntry> out_blocks;
  std::vector<IndexSummaryEntry> out_summaries;
  std::string error;
  EXPECT_FALSE(decode_step_index(payload.data(), payload.size(), 100, 190, out_blocks,
                                 out_summaries, &error));
  EXPECT_NE(error.find("step order"), std::string::npos) << error;
  std::swap(summaries[0], summaries[1]);
  payload = encode_step_index(two, summaries);
  EXPECT_TRUE(decode_step_index(payload.data(), payload.size(), 100, 190, out_blocks,
                                out_summaries, &error))
      << error;
  EXPECT_FALSE(decode_step_index(payload.data(), payload.size(), 100, 200, out_blocks,
                                 out_summaries, &error));
  EXPECT_NE(error.find("does not cover"), std::string::npos) << error;
  EXPECT_FALSE(decode_step_index(payload.data(), payload.size() - 1, 100, 190, out_blocks,
                                 out_summaries, &error));
  EXPECT_FALSE(decode_step_index(payload.data(), 3, 100, 190, out_blocks, out_summaries, &error));
}

}  // namespace
}  // namespace lockstep::trace
