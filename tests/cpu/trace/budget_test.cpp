#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace lockstep::trace {
namespace {

TEST(Budget, ExhaustedBudgetDropsAndCountsNeverSilently) {
  testing::TempDir dir;
  WriterOptions options;
  options.path = dir.file("budget.lstrace");
  options.block_bytes = 64 << 10;
  options.memory_budget = 32 << 10;  // not even one thread block
  std::string error;
  auto writer = TraceWriter::open(options, nlohmann::json::object(), &error);
  ASSERT_TRUE(writer) << error;
  Record record;
  record.kind = RecordKind::Kernel;
  for (uint64_t seq = 1; seq <= 1000; ++seq) {
    record.seq = seq;
    EXPECT_FALSE(writer->append(record));
  }
  writer->close();
  const WriterStats stats = writer->stats();
  EXPECT_EQ(stats.appended, 0u);
  EXPECT_EQ(stats.dropped, 1000u);

  auto reader = TraceReader::open(options.path);
  size_t kernels = 0;
  uint64_t reported = 0;
  reader->for_each_record([&](const Record& r) {
    if (r.kind == RecordKind::Kernel) ++kernels;
    if (r.kind == RecordKind::Warning &&
        r.fields[fields::Warning::code] == kWarningRecordsDropped) {
      reported += r.fields[fields::Warning::count];
      EXPECT_NE(reader->string(r.name).find("dropped"), std::string_view::npos);
    }
    return true;
  });
  EXPECT_EQ(kernels, 0u);      // no block of records
  EXPECT_EQ(reported, 1000u);  // and the drop is in the trace
}

// Two small blocks of memory and a tight loop: records may be dropped, never silently.
TEST(Budget, BudgetOfTwoBlocksLosesNothingUncounted) {
  testing::TempDir dir;
  WriterOptions options;
  options.path = dir.file("tight.lstrace");
  options.block_bytes = 4096;
  options.memory_budget = 2 * 4096;
  std::string error;
  auto writer = TraceWriter::open(options, nlohmann::json::object(), &error);
  ASSERT_TRUE(writer) << error;
  Record record;
  record.kind = RecordKind::Memcpy;
  uint64_t accepted = 0;
  for (uint64_t seq = 1; seq <= 20000; ++seq) {
    record.seq = seq;
    record.fields[fields::Memcpy::bytes] = seq;
    accepted += writer->append(record);
  }
  writer->close();
  const WriterStats stats = writer->stats();
  // An accepted record is encoded later and may still be dropped then (counted): every record
  // is either on disk or counted, never both, never neither.
  EXPECT_LE(stats.appended, accepted);
  EXPECT_EQ(stats.appended + stats.dropped, 20000u);
  auto reader = TraceReader::open(options.path);
  size_t memcpys = 0;
  reader->for_each_record(
      [&](const Record& r) { return memcpys += r.kind == RecordKind::Memcpy, true; });
  EXPECT_EQ(memcpys, stats.appended);  // what was accepted is all on disk
}

TEST(Budget, AppendAfterCloseIsDroppedAndCounted) {
  testing::TempDir dir;
  WriterOptions options;
  options.path = dir.file("closed.lstrace");
  std::string error;
  auto writer = TraceWriter::open(options, nlohmann::json::object(), &error);
  ASSERT_TRUE(writer) << error;
  Record record;
  record.seq = 1;
  EXPECT_TRUE(writer->append(record));
  writer->close();
  writer->close();  // idempotent
  record.seq = 2;
  EXPECT_FALSE(writer->append(record));
  EXPECT_EQ(writer->stats().appended, 1u);
  EXPECT_EQ(writer->stats().dropped, 1u);
  std::string second_error;
  EXPECT_FALSE(TraceWriter::open(options, nlohmann::json::object(), &second_error));  // O_EXCL
  EXPECT_NE(second_error.find(options.path), std::string::npos);
}

}  // namespace
}  // namespace lockstep::trace
