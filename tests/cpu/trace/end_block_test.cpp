// The End block (format.h): written last at close with the writer's counts, absent from a file
// whose writer did not finish, and nothing may follow it.
#include <gtest/gtest.h>

#include <signal.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "sample_traces.h"
#include "test_util.h"

namespace lockstep::trace {
namespace {

std::unique_ptr<TraceWriter> open_writer(const std::string& path, WriterOptions options = {}) {
  options.path = path;
  std::string error;
  auto writer = TraceWriter::open(options, nlohmann::json{{"rank", 0}}, &error);
  EXPECT_TRUE(writer) << error;
  return writer;
}

// Appends `per_step` kernels to each of `steps` steps, ending each step.
void append_steps(TraceWriter& writer, uint32_t steps, int per_step) {
  Record record;
  record.kind = RecordKind::Kernel;
  record.name = writer.intern("k");
  uint64_t seq = 0;
  for (uint32_t step = 0; step < steps; ++step) {
    for (int i = 0; i < per_step; ++i) {
      record.seq = ++seq;
      record.step = step;
      writer.append(record);
    }
    writer.end_step(step);
  }
}

uint64_t records_in_file(TraceReader& reader) {
  uint64_t count = 0;
  for (const BlockInfo& block : reader.blocks())
    if (block.type == BlockType::Records) count += block.record_count;
  return count;
}

TEST(EndBlock, IsWrittenAtCloseWithTheRightCounts) {
  testing::TempDir dir;
  const std::string path = dir.file("closed.lstrace");
  auto writer = open_writer(path);
  append_steps(*writer, 5, 30);
  writer->close();
  const WriterStats stats = writer->stats();
  ASSERT_EQ(stats.appended, 150u);

  auto reader = TraceReader::open(path);
  reader->verify_all();
  ASSERT_FALSE(reader->blocks().empty());
  EXPECT_EQ(reader->blocks().back().type, BlockType::End);
  const auto& end = reader->end();
  ASSERT_TRUE(end.has_value());
  EXPECT_TRUE(end->clean);
  EXPECT_EQ(end->reason, "exit");
  EXPECT_EQ(end->records, 150u);
  EXPECT_EQ(end->records, records_in_file(*reader));
  EXPECT_EQ(end->dropped, 0u);
  EXPECT_EQ(end->steps, 5u);
  EXPECT_EQ(end->steps, reader->step_summaries().size());
  EXPECT_EQ(end->last_step, 4u);
  EXPECT_EQ(end->write_errors, 0u);
  EXPECT_FALSE(reader->truncated());
}

TEST(EndBlock, CloseBeforeExecSaysExec) {
  testing::TempDir dir;
  const std::string path = dir.file("exec.lstrace");
  auto writer = open_writer(path);
  append_steps(*writer, 1, 3);
  writer->close("exec");
  writer->close();  // idempotent: no second End block
  auto reader = TraceReader::open(path);
  ASSERT_TRUE(reader->end().has_value());
  EXPECT_EQ(reader->end()->reason, "exec");
  EXPECT_TRUE(reader->end()->clean);
}

TEST(EndBlock, DroppedRecordsAreCountedAndTheirWarningsAreAmongTheRecords) {
  testing::TempDir dir;
  const std::string path = dir.file("dropped.lstrace");
  WriterOptions options;
  options.block_bytes = 64 << 10;
  options.memory_budget = 32 << 10;  // no block at all: every record is dropped
  auto writer = open_writer(path, options);
  append_steps(*writer, 2, 100);
  writer->close();
  auto reader = TraceReader::open(path);
  ASSERT_TRUE(reader->end().has_value());
  EXPECT_EQ(reader->end()->dropped, 200u);
  EXPECT_TRUE(reader->end()->clean) << "drops are counted, not a failure of the file";
  EXPECT_GT(reader->end()->records, 0u) << "the drop Warning records";
  EXPECT_EQ(reader->end()->records, records_in_file(*reader));
}

TEST(EndBlock, HeaderOnlyFileHasNoEnd) {
  testing::TempDir dir;
  const std::string path = dir.file("header.lstrace");
  auto writer = open_writer(path);
  writer->close();
  auto bytes = testing::read_bytes(path);
  auto reader = TraceReader::open(path);
  ASSERT_EQ(reader->blocks().size(), 1u);  // an empty trace that was finished: just the End
  ASSERT_TRUE(reader->end().has_value());
  EXPECT_EQ(reader->end()->records, 0u);

  bytes.resize(reader->blocks().front().offset);  // what a job killed at once leaves
  testing::write_bytes(path, bytes);
  auto cut = TraceReader::open(path);
  EXPECT_TRUE(cut->blocks().empty());
  EXPECT_FALSE(cut->truncated());
  EXPECT_FALSE(cut->end().has_value());
}

TEST(EndBlock, FileCutAtEveryBlockBoundaryHasNoEnd) {
  testing::TempDir dir;
  const std::string path = dir.file("full.lstrace");
  std::string error;
  ASSERT_TRUE(testing::write_sample_trace(path, 1, &error)) << error;
  const auto bytes = testing::read_bytes(path);
  const auto blocks = TraceReader::open(path)->blocks();
  ASSERT_GT(blocks.size(), 3u);
  const std::string cut_path = dir.file("cut.lstrace");
  for (const BlockInfo& block : blocks) {
    testing::write_bytes(cut_path, {bytes.begin(), bytes.begin() + block.offset});
    auto reader = TraceReader::open(cut_path);
    reader->verify_all();  // a valid prefix...
    EXPECT_FALSE(reader->truncated()) << block.offset;
    EXPECT_FALSE(reader->end().has_value()) << "...never a finished trace: cut at " << block.offset;
  }
}

TEST(EndBlock, ABlockAfterTheEndIsCorruption) {
  testing::TempDir dir;
  const std::string path = dir.file("appended.lstrace");
  std::string error;
  ASSERT_TRUE(testing::write_sample_trace(path, 0, &error)) << error;
  const auto bytes = testing::read_bytes(path);
  const auto blocks = TraceReader::open(path)->blocks();
  ASSERT_GE(blocks.size(), 2u);
  ASSERT_EQ(blocks.back().type, BlockType::End);
  // A whole valid block (the first one) after the End block.
  const BlockInfo& first = blocks.front();
  auto appended = bytes;
  appended.insert(appended.end(), bytes.begin() + first.offset,
                  bytes.begin() + first.offset + sizeof(BlockHeader) + first.payload_bytes);
  testing::write_bytes(path, appended);
  try {
    TraceReader::open(path)->blocks();
    FAIL() << "a block after the End block was accepted";
  } catch (const TraceError& e) {
    EXPECT_NE(std::string(e.what()).find("after the end-of-trace block"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("offset " + std::to_string(bytes.size())),
              std::string::npos)
        << e.what();
  }
  // A second End block, and a few stray bytes, likewise.
  auto twice = bytes;
  twice.insert(twice.end(), bytes.begin() + blocks.back().offset, bytes.end());
  testing::write_bytes(path, twice);
  EXPECT_THROW(TraceReader::open(path)->blocks(), TraceError);
  auto stray = bytes;
  stray.push_back(0);
  testing::write_bytes(path, stray);
  EXPECT_THROW(TraceReader::open(path)->blocks(), TraceError);
}

TEST(EndBlock, FlippedEndPayloadIsCorruptionNotAFinishedTrace) {
  testing::TempDir dir;
  const std::string path = dir.file("flipped.lstrace");
  std::string error;
  ASSERT_TRUE(testing::write_sample_trace(path, 0, &error)) << error;
  auto bytes = testing::read_bytes(path);
  const BlockInfo end = TraceReader::open(path)->blocks().back();
  ASSERT_EQ(end.type, BlockType::End);
  bytes[end.offset + sizeof(BlockHeader) + offsetof(EndPayload, clean)] ^= 1;
  testing::write_bytes(path, bytes);
  auto reader = TraceReader::open(path);
  EXPECT_THROW(reader->end(), TraceError);
  EXPECT_THROW(reader->verify_all(), TraceError);
}

TEST(EndBlock, SealAfterSignalWritesAnUncleanEndWithTheSignal) {
  testing::TempDir dir;
  const std::string path = dir.file("sealed.lstrace");
  auto writer = open_writer(path);
  append_steps(*writer, 3, 10);
  writer->flush();
  writer->seal_after_signal(SIGTERM);  // the background thread is idle after the flush
  writer->seal_after_signal(SIGTERM);  // a second signal: still one End block
  // The file as a job dying now leaves it (a copy: close() below would replace the End).
  const std::string dead = dir.file("dead.lstrace");
  testing::write_bytes(dead, testing::read_bytes(path));
  auto reader = TraceReader::open(dead);
  reader->verify_all();
  ASSERT_TRUE(reader->end().has_value());
  EXPECT_FALSE(reader->end()->clean);
  EXPECT_EQ(reader->end()->reason, "signal " + std::to_string(SIGTERM));
  EXPECT_EQ(reader->end()->records, 30u);
  EXPECT_EQ(reader->end()->last_step, 2u);
  EXPECT_EQ(testing::read_all_records(*reader).size(), 30u);
  writer->close();
}

TEST(EndBlock, AJobThatLivesOnAfterASealIsClosedCleanly) {
  testing::TempDir dir;
  const std::string path = dir.file("survivor.lstrace");
  auto writer = open_writer(path);
  append_steps(*writer, 2, 10);
  writer->flush();
  writer->seal_after_signal(SIGINT);  // the job's own handler catches it and carries on
  Record record;
  record.kind = RecordKind::Kernel;
  for (int i = 0; i < 10; ++i) record.seq = 100 + i, record.step = 2, writer->append(record);
  writer->close();
  auto reader = TraceReader::open(path);
  reader->verify_all();  // the sealed End block was taken off: nothing follows an End
  ASSERT_TRUE(reader->end().has_value());
  EXPECT_TRUE(reader->end()->clean);
  EXPECT_EQ(reader->end()->reason, "exit");
  EXPECT_EQ(reader->end()->records, 30u);
  EXPECT_EQ(records_in_file(*reader), 30u);
  int ends = 0;
  for (const BlockInfo& block : reader->blocks()) ends += block.type == BlockType::End;
  EXPECT_EQ(ends, 1);
}

TEST(EndBlock, SealAfterCloseDoesNothing) {
  testing::TempDir dir;
  const std::string path = dir.file("closed.lstrace");
  auto writer = open_writer(path);
  append_steps(*writer, 1, 5);
  writer->close();
  const auto before = testing::read_bytes(path);
  writer->seal_after_signal(SIGTERM);
  EXPECT_EQ(testing::read_bytes(path), before);
}

}  // namespace
}  // namespace lockstep::trace
