#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace lockstep::trace {
namespace {

// The child appends kernels with seq 1, 2, 3... until it is killed.
[[noreturn]] void append_forever(const std::string& path) {
  WriterOptions options;
  options.path = path;
  options.flush_interval_ms = 20;
  std::string error;
  auto writer = TraceWriter::open(options, nlohmann::json{{"role", "victim"}}, &error);
  if (!writer) ::_exit(3);
  Record record;
  record.kind = RecordKind::Kernel;
  record.name = writer->intern("victim_kernel");
  record.buffers.resize(2);
  for (uint64_t seq = 1;; ++seq) {
    record.seq = seq;
    record.step = static_cast<uint32_t>(seq / 5000);
    record.buffers[0].fingerprint = seq * 0x9e3779b97f4a7c15ull;
    record.buffers[1].fingerprint = ~seq;
    writer->append(record);
    if (seq % 5000 == 0) writer->end_step(record.step - 1);
    if (seq % 1000 == 0) std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
}

TEST(Kill, SigkilledWriterLeavesReadablePrefix) {
  testing::TempDir dir;
  const std::string path = dir.file("victim.lstrace");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) append_forever(path);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "child exited early: " << status;

  auto reader = TraceReader::open(path);
  EXPECT_EQ(reader->header()["role"], "victim");
  uint64_t expected = 1;
  reader->for_each_record([&](const Record& record) {
    EXPECT_EQ(record.seq, expected);  // a gap-free prefix of what the child appended
    EXPECT_EQ(reader->string(record.name), "victim_kernel");
    EXPECT_EQ(record.buffers.at(1).fingerprint, ~record.seq);
    expected = record.seq + 1;
    return true;
  });
  const uint64_t records = expected - 1;
  EXPECT_GT(records, 1000u) << "flushes every 20 ms: a 300 ms run must leave records";
  EXPECT_FALSE(reader->end().has_value()) << "a killed job's trace is a prefix, never complete";
  reader->verify_all();
  for (const auto& summary : reader->step_summaries())  // seq 1..4999 are step 0
    EXPECT_EQ(summary.record_count, summary.step == 0 ? 4999u : 5000u) << summary.step;
  std::printf("killed writer: %llu records readable, truncated=%d\n",
              static_cast<unsigned long long>(records), reader->truncated());
}

TraceWriter* g_sealed_writer = nullptr;

// What the shim's handler does for a fatal signal: seal, then let the signal kill the process.
void seal_and_die(int signo) {
  g_sealed_writer->seal_after_signal(signo);
  ::signal(signo, SIG_DFL);
  ::raise(signo);
}

TEST(Kill, SigtermSealedByAHandlerLeavesAnUncleanEndNeverAComplete) {
  testing::TempDir dir;
  int sealed = 0;
  constexpr int kTrials = 5;
  for (int trial = 0; trial < kTrials; ++trial) {
    const std::string path = dir.file("term-" + std::to_string(trial) + ".lstrace");
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      WriterOptions options;
      options.path = path;
      options.flush_interval_ms = 20;
      std::string error;
      auto writer = TraceWriter::open(options, nlohmann::json::object(), &error);
      if (!writer) ::_exit(3);
      g_sealed_writer = writer.get();
      ::signal(SIGTERM, seal_and_die);
      Record record;
      record.kind = RecordKind::Kernel;
      for (uint64_t seq = 1;; ++seq) {
        record.seq = seq;
        record.step = static_cast<uint32_t>(seq / 5000);
        writer->append(record);
        if (seq % 5000 == 0) writer->end_step(record.step - 1);
        if (seq % 1000 == 0) std::this_thread::sleep_for(std::chrono::microseconds(500));
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    ASSERT_EQ(::kill(child, SIGTERM), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "child exited: " << status;
    auto reader = TraceReader::open(path);
    reader->verify_all();  // the End block never interleaves with a block being written
    const uint64_t records = testing::read_all_records(*reader).size();
    if (const auto& end = reader->end()) {
      ++sealed;
      EXPECT_FALSE(end->clean);
      EXPECT_EQ(end->reason, "signal " + std::to_string(SIGTERM));
      EXPECT_GE(end->records, records) << "records still in memory are counted, not written";
    }
  }
  // Best effort: the handler gives up only while the background thread is mid-write.
  EXPECT_GT(sealed, 0) << "no trial of " << kTrials << " got an End block";
  std::printf("SIGTERM: %d of %d traces sealed\n", sealed, kTrials);
}

TEST(Kill, SealsRacingTheBackgroundThreadNeverInterleave) {
  testing::TempDir dir;
  WriterOptions options;
  options.path = dir.file("race.lstrace");
  options.flush_interval_ms = 1;
  options.block_bytes = 4096;
  std::string error;
  auto writer = TraceWriter::open(options, nlohmann::json::object(), &error);
  ASSERT_TRUE(writer) << error;
  // The job runs until the sealing loop has raced it often enough, however fast this machine
  // appends: a fixed count of records finished before ten seals on a fast CI host.
  constexpr int kSeals = 20;
  std::atomic<int> seals{0};
  std::atomic<bool> done{false};
  uint64_t appended = 0;
  std::thread job([&] {
    Record record;
    record.kind = RecordKind::Kernel;
    uint64_t seq = 1;
    for (; seq <= 100000 || seals.load() < kSeals; ++seq) {
      record.seq = seq;
      record.step = static_cast<uint32_t>(seq / 2000);
      writer->append(record);
      if (seq % 2000 == 0) writer->end_step(record.step - 1);
    }
    appended = seq - 1;
    done = true;
  });
  while (!done) {  // a job that handles SIGINT itself and carries on, over and over
    writer->seal_after_signal(SIGINT);
    seals.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  job.join();
  writer->close();
  auto reader = TraceReader::open(options.path);
  reader->verify_all();
  ASSERT_TRUE(reader->end().has_value());
  EXPECT_TRUE(reader->end()->clean);
  EXPECT_EQ(reader->end()->reason, "exit");
  EXPECT_EQ(testing::read_all_records(*reader).size(), appended);
  EXPECT_EQ(reader->end()->records, appended);
  EXPECT_GE(seals.load(), kSeals);
}

TEST(Kill, WriteErrorsAreCountedAndTheFileStaysValid) {
  testing::TempDir dir;
  const std::string path = dir.file("full.lstrace");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);  // writes past the limit fail with EFBIG instead
    rlimit limit{64 << 10, 64 << 10};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    WriterOptions options;
    options.path = path;
    options.block_bytes = 8192;
    std::string error;
    auto writer = TraceWriter::open(options, nlohmann::json::object(), &error);
    if (!writer) ::_exit(3);
    Record record;
    record.kind = RecordKind::Gemm;
    record.buffers.resize(1);
    for (uint64_t seq = 1; seq <= 20000; ++seq) {
      record.seq = seq;
      record.buffers[0].fingerprint = seq * 0x9e3779b97f4a7c15ull;
      writer->append(record);
    }
    writer->close();
    ::_exit(writer->stats().write_errors > 0 ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << "3: open failed, 4: no write error counted";
  auto reader = TraceReader::open(path);
  reader->verify_all();  // failed writes were cut off again: no garbage in the middle
  EXPECT_FALSE(reader->truncated());
  EXPECT_FALSE(reader->end() && reader->end()->clean) << "a file that lost blocks is never clean";
  EXPECT_GT(testing::read_all_records(*reader).size(), 0u);
}

TEST(Kill, ForkedChildAbandonsTheParentsWriter) {
  testing::TempDir dir;
  WriterOptions options;
  options.path = dir.file("parent.lstrace");
  options.flush_interval_ms = 5;
  std::string error;
  auto writer = TraceWriter::open(options, nlohmann::json::object(), &error);
  ASSERT_TRUE(writer) << error;
  Record record;
  record.kind = RecordKind::Kernel;
  uint64_t seq = 0;
  for (; seq < 1000; ++seq) record.seq = seq + 1, writer->append(record);
  const pid_t child = ::fork();  // the background thread may hold any lock right now
  ASSERT_GE(child, 0);
  if (child == 0) {
    writer->abandon_after_fork();
    record.seq = 1;
    const bool refused = !writer->append(record);
    writer.reset();  // must neither join the parent's thread nor write the parent's file
    WriterOptions own;
    own.path = dir.file("child.lstrace");
    auto child_writer = TraceWriter::open(own, nlohmann::json::object(), &error);
    if (!child_writer) ::_exit(3);
    for (int i = 0; i < 10; ++i) record.seq = i + 1, child_writer->append(record);
    child_writer->close();
    ::_exit(refused ? 0 : 4);
  }
  for (; seq < 2000; ++seq) record.seq = seq + 1, writer->append(record);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  writer->close();
  auto parent = TraceReader::open(options.path);
  const auto records = testing::read_all_records(*parent);
  ASSERT_EQ(records.size(), 2000u);
  for (size_t i = 0; i < records.size(); ++i) EXPECT_EQ(records[i].seq, i + 1);
  EXPECT_EQ(testing::read_all_records(*TraceReader::open(dir.file("child.lstrace"))).size(), 10u);
}

}  // namespace
}  // namespace lockstep::trace
