#include <gtest/gtest.h>

#include <cstring>

#include "sample_traces.h"
#include "test_util.h"

namespace lockstep::trace {
namespace {

std::string error_of(const std::string& path) {
  try {
    testing::read_everything(path);
  } catch (const TraceError& error) {
    return error.what();
  }
  return {};
}

void expect_one_line_error(const std::string& path, const std::string& needle) {
  const std::string message = error_of(path);
  EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
  EXPECT_NE(message.find(needle), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(Corruption, EveryFlippedByteIsFoundWithItsOffset) {
  testing::TempDir dir;
  const std::string good = dir.file("good.lstrace");
  std::string error;
  ASSERT_TRUE(testing::write_sample_trace(good, 5, &error)) << error;
  const auto bytes = testing::read_bytes(good);
  ASSERT_GT(testing::read_everything(good), 0u);
  const std::string bad = dir.file("bad.lstrace");
  for (size_t at = 0; at < bytes.size(); ++at) {
    auto flipped = bytes;
    flipped[at] ^= 0xff;
    testing::write_bytes(bad, flipped);
    const std::string message = error_of(bad);
    ASSERT_FALSE(message.empty()) << "flip at " << at << " not detected";
    EXPECT_EQ(message.find('\n'), std::string::npos);
    if (at >= sizeof(FileHeader)) EXPECT_NE(message.find("offset"), std::string::npos) << message;
  }
}

TEST(Corruption, FlipInTheMiddleNamesTheBlockOffset) {
  testing::TempDir dir;
  const std::string path = dir.file("mid.lstrace");
  std::string error;
  ASSERT_TRUE(testing::write_sample_trace(path, 0, &error)) << error;
  auto reader = TraceReader::open(path);
  const auto blocks = reader->blocks();
  ASSERT_GE(blocks.size(), 3u);
  const BlockInfo& middle = blocks[blocks.size() / 2];
  auto bytes = testing::read_bytes(path);
  bytes[middle.offset + sizeof(BlockHeader) + middle.payload_bytes / 2] ^= 0x10;
  testing::write_bytes(path, bytes);
  expect_one_line_error(
      path, "checksum mismatch (corrupt data) at offset " + std::to_string(middle.offset));
  // A flipped length in a middle block is corruption, not a cut-off tail.
  bytes = testing::read_bytes(path);
  bytes[middle.offset + sizeof(BlockHeader) + middle.payload_bytes / 2] ^= 0x10;
  bytes[middle.offset + offsetof(BlockHeader, payload_bytes) + 2] ^= 0x01;
  testing::write_bytes(path, bytes);
  expect_one_line_error(path, "corrupt block header (header check mismatch) at offset " +
                                  std::to_string(middle.offset));
}

TEST(Corruption, ForeignEmptyAndNewerFilesGiveOneLineErrors) {
  testing::TempDir dir;
  const std::string empty = dir.file("empty.lstrace");
  testing::write_bytes(empty, {});
  expect_one_line_error(empty, "empty file");

  const std::string foreign = dir.file("notes.txt");
  const std::string text = "hello, this is not a trace\nsecond line\n";
  testing::write_bytes(foreign, std::vector<uint8_t>(text.begin(), text.end()));
  expect_one_line_error(foreign, "not a lockstep trace");

  const std::string tiny = dir.file("tiny");
  testing::write_bytes(tiny, {'L', 'O'});
  expect_one_line_error(tiny, "not a lockstep trace");

  const std::string missing = dir.file("missing.lstrace");
  expect_one_line_error(missing, "cannot open");
  expect_one_line_error(dir.path(), "is a directory");

  const std::string newer = dir.file("newer.lstrace");
  std::string error;
  ASSERT_TRUE(testing::write_sample_trace(newer, 4, &error)) << error;
  auto bytes = testing::read_bytes(newer);
  const uint32_t version = kFormatVersion + 1;
  std::memcpy(bytes.data() + offsetof(FileHeader, format_version), &version, 4);
  testing::write_bytes(newer, bytes);
  const std::string message = error_of(newer);
  EXPECT_EQ(message, newer + ": trace format v3 is newer than this lockstep reads (v2)");

  const std::string cut = dir.file("cut.lstrace");
  bytes.resize(30);
  std::memcpy(bytes.data() + offsetof(FileHeader, format_version), &kFormatVersion, 4);
  testing::write_bytes(cut, bytes);
  expect_one_line_error(cut, "cut off inside its JSON header");
}

TEST(Corruption, CutOffTailGivesValidPrefixAndSaysSo) {
  testing::TempDir dir;
  const std::string path = dir.file("full.lstrace");
  std::string error;
  ASSERT_TRUE(testing::write_sample_trace(path, 0, &error)) << error;
  auto full_reader = TraceReader::open(path);
  const auto full = testing::read_all_records(*full_reader);
  const auto blocks = full_reader->blocks();
  const auto bytes = testing::read_bytes(path);
  const uint64_t data_start = blocks.front().offset;
  const std::string cut_path = dir.file("cut.lstrace");
  for (size_t size = data_start; size < bytes.size(); ++size) {
    testing::write_bytes(cut_path, {bytes.begin(), bytes.begin() + size});
    auto reader = TraceReader::open(cut_path);
    const auto records = testing::read_all_records(*reader);
    ASSERT_LE(records.size(), full.size());
    for (size_t i = 0; i < records.size(); ++i) ASSERT_EQ(records[i], full[i]);
    const bool at_boundary = std::any_of(blocks.begin(), blocks.end(),
                                         [&](const BlockInfo& b) { return b.offset == size; });
    EXPECT_EQ(reader->truncated(), !at_boundary) << size;
    if (reader->truncated()) {
      EXPECT_LE(reader->truncation_offset(), size);
      EXPECT_GT(reader->truncation_offset() + sizeof(BlockHeader) + kMaxBlockPayload, size);
    }
    reader->verify_all();
  }
}

}  // namespace
}  // namespace lockstep::trace
