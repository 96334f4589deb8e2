#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace lockstep::trace {
namespace {

// A writer whose timer never flushes during a test: whatever it encodes, something else asked for.
std::unique_ptr<TraceWriter> open_without_timed_flush(const std::string& path,
                                                      WriterOptions* options) {
  options->path = path;
  options->flush_interval_ms = 60000;
  std::string error;
  auto writer = TraceWriter::open(*options, nlohmann::json::object(), &error);
  EXPECT_TRUE(writer) << error;
  return writer;
}

// Kernel records with seq first..last in `step`.
void append_kernels(TraceWriter& writer, uint64_t first, uint64_t last, uint32_t step) {
  Record record;
  record.kind = RecordKind::Kernel;
  record.step = step;
  for (uint64_t seq = first; seq <= last; ++seq) {
    record.seq = seq;
    ASSERT_TRUE(writer.append(record));
  }
}

TEST(Threads, EightThreadsAppendAtOnceNothingLostOrderKept) {
  testing::TempDir dir;
  WriterOptions options;
  options.path = dir.file("threads.lstrace");
  options.flush_interval_ms = 20;  // partial blocks get stolen while threads append
  std::string error;
  auto writer = TraceWriter::open(options, nlohmann::json::object(), &error);
  ASSERT_TRUE(writer) << error;
  constexpr int kThreads = 8, kPerThread = 100000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const StringId name = writer->intern("thread_" + std::to_string(t));
      Record record;
      record.kind = RecordKind::Kernel;
      record.name = name;
      record.stream = t;
      for (int i = 0; i < kPerThread; ++i) {
        record.seq = (static_cast<uint64_t>(t) << 32) | i;  // thread and index in one
        record.step = i / 10000;
        record.fields[fields::Kernel::grid_x] = i;
        ASSERT_TRUE(writer->append(record));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  writer->close();
  EXPECT_EQ(writer->stats().appended, uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(writer->stats().dropped, 0u);

  auto reader = TraceReader::open(options.path);
  std::vector<int64_t> next(kThreads, 0);
  std::map<uint32_t, int> thread_of_ordinal;
  size_t total = 0;
  reader->for_each_record([&](const Record& record) {
    const int t = static_cast<int>(record.seq >> 32);
    const int64_t i = static_cast<int64_t>(record.seq & 0xffffffffu);
    EXPECT_LT(t, kThreads);
    if (t >= kThreads) return false;
    EXPECT_EQ(i, next[t]) << "thread " << t;  // per-thread order kept, nothing missing
    next[t] = i + 1;
    EXPECT_EQ(record.fields[fields::Kernel::grid_x], static_cast<uint64_t>(i));
    EXPECT_EQ(reader->string(record.name), "thread_" + std::to_string(t));
    // The writer gives each thread its own ordinal.
    auto [it, fresh] = thread_of_ordinal.try_emplace(record.thread, t);
    EXPECT_EQ(it->second, t);
    ++total;
    return true;
  });
  EXPECT_EQ(total, size_t{kThreads} * kPerThread);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(next[t], kPerThread);
  EXPECT_EQ(thread_of_ordinal.size(), size_t{kThreads});
  auto summaries = reader->step_summaries();
  ASSERT_EQ(summaries.size(), 10u);
  for (const auto& summary : summaries) EXPECT_EQ(summary.record_count, uint64_t{kThreads} * 10000);
}

TEST(Threads, ExitedThreadsRecordsAreWritten) {
  testing::TempDir dir;
  WriterOptions options;
  options.path = dir.file("exit.lstrace");
  options.flush_interval_ms = 10;
  std::string error;
  auto writer = TraceWriter::open(options, nlohmann::json::object(), &error);
  ASSERT_TRUE(writer) << error;
  for (int t = 0; t < 20; ++t) {
    std::thread([&, t] {
      Record record;
      record.kind = RecordKind::Memset;
      record.seq = t + 1;
      writer->append(record);
    }).join();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // retired by the background thread
  writer->close();
  EXPECT_EQ(writer->stats().appended, 20u);
  auto reader = TraceReader::open(options.path);
  EXPECT_EQ(testing::read_all_records(*reader).size(), 20u);
}

// The job's thread only stages a record; hashing and encoding wait for the background thread
// (a full batch, a flush, a step's end). A record still staged at end_step counts in its step.
TEST(Threads, AppendStagesAndTheBackgroundThreadEncodes) {
  testing::TempDir dir;
  WriterOptions options;
  auto writer = open_without_timed_flush(dir.file("staged.lstrace"), &options);
  ASSERT_TRUE(writer);
  append_kernels(*writer, 1, 10, 0);
  EXPECT_EQ(writer->stats().appended, 0u) << "append encoded on the calling thread";
  writer->end_step(0);  // returns at once; the background thread drains, summarizes, writes
  writer->flush();
  EXPECT_EQ(writer->stats().appended, 10u);
  append_kernels(*writer, 11, 1000, 1);  // several full batches
  writer->close();
  EXPECT_EQ(writer->stats().appended, 1000u);
  auto reader = TraceReader::open(options.path);
  uint64_t expected = 1;
  reader->for_each_record([&](const Record& r) {
    EXPECT_EQ(r.seq, expected++);
    return true;
  });
  EXPECT_EQ(expected, 1001u);
  std::map<uint32_t, uint64_t> counts;
  for (const auto& summary : reader->step_summaries()) counts[summary.step] += summary.record_count;
  EXPECT_EQ(counts[0], 10u);
  EXPECT_EQ(counts[1], 990u);
}

// Staged batches wake the background thread once enough are full (writer.cpp: kWakeBatches of
// 128 records): it encodes them with no step end, flush or close to ask it. 4096 records are 32
// batches: past the wake, short of the backlog the owner would drain itself (64).
TEST(Threads, FullBatchesWakeTheBackgroundThread) {
  testing::TempDir dir;
  WriterOptions options;
  auto writer = open_without_timed_flush(dir.file("woken.lstrace"), &options);
  ASSERT_TRUE(writer);
  append_kernels(*writer, 1, 4096, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (writer->stats().appended == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_GT(writer->stats().appended, 0u) << "no drain without a step end, flush or close";
  writer->close();
  EXPECT_EQ(writer->stats().appended, 4096u);
}

// Short-lived threads whose steps end while they still append, each exiting with a record
// staged: every record is written, counted and summarized once. (The interleaving where the
// writer retires an exited thread between its drain and its exit check is not forced here; the
// writer reads the exit flag before the drain, so that it cannot happen.)
TEST(Threads, ShortLivedThreadsRecordsAreAllCounted) {
  testing::TempDir dir;
  WriterOptions options;
  options.path = dir.file("short.lstrace");
  options.flush_interval_ms = 1;  // retire exited threads as often as possible
  std::string error;
  auto writer = TraceWriter::open(options, nlohmann::json::object(), &error);
  ASSERT_TRUE(writer) << error;
  constexpr int kThreads = 300;
  std::atomic<uint64_t> seq{0};
  for (int t = 0; t < kThreads; ++t) {
    std::thread([&, t] {
      Record record;
      record.kind = RecordKind::Kernel;
      record.step = static_cast<uint32_t>(t);
      record.seq = ++seq;
      writer->append(record);
      writer->end_step(static_cast<uint32_t>(t));  // this step's summary, from the writer
      record.step = static_cast<uint32_t>(t + 1);
      record.seq = ++seq;
      writer->append(record);  // then exit with it staged
    }).join();
  }
  writer->close();
  EXPECT_EQ(writer->stats().appended, 2u * kThreads);
  EXPECT_EQ(writer->stats().dropped, 0u);
  auto reader = TraceReader::open(options.path);
  uint64_t records = 0, summarized = 0;
  reader->for_each_record([&](const Record&) { return ++records, true; });
  for (const auto& summary : reader->step_summaries()) summarized += summary.record_count;
  EXPECT_EQ(records, 2u * kThreads);
  EXPECT_EQ(summarized, 2u * kThreads);
}

}  // namespace
}  // namespace lockstep::trace
