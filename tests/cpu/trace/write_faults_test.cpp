// Fault injection for the writer: write failures (ENOSPC, EIO, short writes, a file that cannot
// be cut back) at every write of a small trace. In every case the job goes on (no crash, no
// hang, appends return promptly), the failure is counted and said once, and the file that
// results reads as a valid prefix that is never certified: no End block, or an unclean one.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace lockstep::trace {
namespace {

using Clock = std::chrono::steady_clock;

enum class Fault {
  None,
  EnospcOnce,        // the disk was full for one write
  EnospcFromThenOn,  // the disk stays full
  EioOnce,
  ShortOnce,        // one write takes half its bytes: the writer completes it
  ShortThenEnospc,  // half a block, then the disk is full
  EioUncuttable,    // writes fail and the failed block cannot be cut off again
};

const char* fault_name(Fault fault) {
  switch (fault) {
    case Fault::None:
      return "none";
    case Fault::EnospcOnce:
      return "ENOSPC once";
    case Fault::EnospcFromThenOn:
      return "ENOSPC from then on";
    case Fault::EioOnce:
      return "EIO once";
    case Fault::ShortOnce:
      return "short write once";
    case Fault::ShortThenEnospc:
      return "short write, then ENOSPC";
    case Fault::EioUncuttable:
      return "EIO, ftruncate failing";
  }
  return "?";
}

// The writer's system calls with a fault at the at-th pwritev call.
struct Injector {
  Fault fault = Fault::None;
  int at = 0;
  std::atomic<int> calls{0};
  std::atomic<bool> fired{false};

  ssize_t pwritev(int fd, const iovec* parts, int count, off_t offset) {
    const int call = ++calls;
    if (fault == Fault::None || call < at) return ::pwritev(fd, parts, count, offset);
    const bool first = call == at;
    auto fail = [&](int error) -> ssize_t {
      fired = true;
      errno = error;
      return -1;
    };
    switch (fault) {
      case Fault::EnospcOnce:
        return first ? fail(ENOSPC) : ::pwritev(fd, parts, count, offset);
      case Fault::EioOnce:
        return first ? fail(EIO) : ::pwritev(fd, parts, count, offset);
      case Fault::EnospcFromThenOn:
        return fail(ENOSPC);
      case Fault::EioUncuttable:
        return fail(EIO);
      case Fault::ShortOnce:
      case Fault::ShortThenEnospc:
        if (!first)
          return fault == Fault::ShortOnce ? ::pwritev(fd, parts, count, offset) : fail(ENOSPC);
        fired = true;
        return ::pwrite(fd, parts[0].iov_base, std::max<size_t>(1, parts[0].iov_len / 2), offset);
      case Fault::None:
        break;
    }
    return ::pwritev(fd, parts, count, offset);
  }

  int ftruncate(int fd, off_t length) {
    if (fault == Fault::EioUncuttable && fired) {
      errno = EIO;
      return -1;
    }
    return ::ftruncate(fd, length);
  }
};

struct Outcome {
  bool opened = false;
  std::string open_error;
  WriterStats stats;
  std::vector<std::string> reported;  // on_error lines
  bool fired = false;
  int calls = 0;
  Clock::duration slowest_append{};
  Clock::duration whole{};
};

constexpr uint64_t kRecords = 600;

Record record_for(uint64_t seq) {
  Record record;
  record.kind = RecordKind::Kernel;
  record.seq = seq;
  record.step = static_cast<uint32_t>((seq - 1) / 200);
  record.buffers.resize(1);
  record.buffers[0].fingerprint = seq * 0x9e3779b97f4a7c15ull;
  return record;
}

// A small trace of three steps, several blocks, strings, a flush: the writes a job makes.
Outcome write_trace(const std::string& path, Fault fault, int at) {
  auto injector = std::make_shared<Injector>();
  injector->fault = fault;
  injector->at = at;
  auto reported = std::make_shared<std::vector<std::string>>();
  auto reported_mutex = std::make_shared<std::mutex>();
  WriterOptions options;
  options.path = path;
  options.block_bytes = 4096;
  options.flush_interval_ms = 60000;  // writes come from steps, flush and close: a fixed count
  options.pwritev = [injector](int fd, const iovec* parts, int count, off_t offset) {
    return injector->pwritev(fd, parts, count, offset);
  };
  options.ftruncate = [injector](int fd, off_t length) { return injector->ftruncate(fd, length); };
  options.on_error = [reported, reported_mutex](const std::string& line) {
    std::lock_guard lock(*reported_mutex);
    reported->push_back(line);
  };
  Outcome outcome;
  const auto start = Clock::now();
  auto writer = TraceWriter::open(options, nlohmann::json{{"rank", 0}}, &outcome.open_error);
  outcome.opened = writer != nullptr;
  if (writer) {
    const StringId names[] = {writer->intern("gemm"), writer->intern("softmax")};
    for (uint64_t seq = 1; seq <= kRecords; ++seq) {
      Record record = record_for(seq);
      record.name = names[seq % 2];
      const auto before = Clock::now();
      writer->append(record);
      outcome.slowest_append = std::max(outcome.slowest_append, Clock::now() - before);
      if (seq % 200 == 0) writer->end_step(record.step);
      if (seq == 300) writer->flush();
    }
    writer->close();
    outcome.stats = writer->stats();
  }
  outcome.whole = Clock::now() - start;
  outcome.fired = injector->fired;
  outcome.calls = injector->calls;
  outcome.reported = *reported;
  return outcome;
}

// What every faulty run must leave: see the top of this file.
void check(const std::string& path, Fault fault, int at, const Outcome& outcome) {
  SCOPED_TRACE(std::string(fault_name(fault)) + " at write " + std::to_string(at));
  EXPECT_LT(outcome.slowest_append, std::chrono::milliseconds(500))
      << "an append waited on the disk";
  EXPECT_LT(outcome.whole, std::chrono::seconds(20)) << "the writer hung";
  if (!outcome.opened) {
    // The header could not be written: the shim is told (open's error) and runs untraced.
    EXPECT_EQ(at, 1);
    EXPECT_NE(outcome.open_error.find("cannot write the trace header"), std::string::npos)
        << outcome.open_error;
    EXPECT_NE(::access(path.c_str(), F_OK), 0) << "a header-less file was left behind";
    return;
  }
  const bool failed = outcome.fired && fault != Fault::ShortOnce;
  if (failed) {
    EXPECT_GT(outcome.stats.write_errors, 0u);
    ASSERT_EQ(outcome.reported.size(), 1u) << "said once, not per failed write";
    EXPECT_NE(outcome.reported[0].find(path), std::string::npos) << outcome.reported[0];
    EXPECT_NE(outcome.reported[0].find(fault == Fault::EioOnce || fault == Fault::EioUncuttable
                                           ? std::strerror(EIO)
                                           : std::strerror(ENOSPC)),
              std::string::npos)
        << outcome.reported[0];
    EXPECT_EQ(outcome.reported[0].find('\n'), std::string::npos);
  } else {
    EXPECT_EQ(outcome.stats.write_errors, 0u);
    EXPECT_TRUE(outcome.reported.empty());
  }
  EXPECT_EQ(outcome.stats.appended + outcome.stats.dropped, kRecords)
      << "every record accounted for";

  auto reader = TraceReader::open(path);
  if (fault != Fault::EioUncuttable) reader->verify_all();  // failed writes were cut off again
  const auto& end = reader->end();
  if (failed) {
    EXPECT_TRUE(!end || (!end->clean && end->write_errors > 0))
        << "a file that lost writes was certified";
  } else {
    ASSERT_TRUE(end.has_value());
    EXPECT_TRUE(end->clean);
    EXPECT_EQ(end->records, kRecords);
  }
  // What is in the file is what the job appended, in order, unchanged.
  uint64_t last = 0, seen = 0;
  reader->for_each_record([&](const Record& record) {
    EXPECT_GT(record.seq, last);
    last = record.seq;
    ++seen;
    EXPECT_EQ(record.buffers.at(0).fingerprint, record_for(record.seq).buffers[0].fingerprint);
    EXPECT_EQ(record.step, record_for(record.seq).step);
    const std::string_view name = reader->string(record.name);  // strings were written again
    EXPECT_EQ(name, record.seq % 2 ? "softmax" : "gemm");
    return true;
  });
  if (!failed) EXPECT_EQ(seen, kRecords);
}

TEST(WriteFaults, EveryFailureAtEveryWriteIsCountedSaidOnceAndNeverCertified) {
  testing::TempDir dir;
  const Outcome clean = write_trace(dir.file("clean.lstrace"), Fault::None, 0);
  check(dir.file("clean.lstrace"), Fault::None, 0, clean);
  ASSERT_GT(clean.calls, 5) << "the trace should take several writes";
  int cases = 0;
  for (Fault fault : {Fault::EnospcOnce, Fault::EnospcFromThenOn, Fault::EioOnce, Fault::ShortOnce,
                      Fault::ShortThenEnospc, Fault::EioUncuttable}) {
    int fired = 0;
    for (int at = 1; at <= clean.calls + 1; ++at) {
      const std::string path = dir.file("fault-" + std::to_string(cases++) + ".lstrace");
      const Outcome outcome = write_trace(path, fault, at);
      check(path, fault, at, outcome);
      fired += outcome.fired;
    }
    // How the background thread groups blocks into writes varies a little from run to run: the
    // last write or two may not exist in a given run, every other one must have been hit.
    EXPECT_GE(fired, clean.calls - 2) << fault_name(fault);
  }
  std::printf("write faults: %d cases over %d writes each\n", cases, clean.calls);
}

TEST(WriteFaults, TheDefaultReportGoesToStderrOnce) {
  testing::TempDir dir;
  const std::string path = dir.file("stderr.lstrace");
  const std::string captured = dir.file("stderr.txt");
  const int saved = ::dup(STDERR_FILENO);
  const int file = ::open(captured.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(file, 0);
  ::fflush(stderr);
  ::dup2(file, STDERR_FILENO);
  {
    WriterOptions options;
    options.path = path;
    options.block_bytes = 4096;
    options.pwritev = [calls = std::make_shared<int>(0)](int fd, const iovec* parts, int count,
                                                         off_t offset) {
      if (++*calls == 1) return ::pwritev(fd, parts, count, offset);  // the header goes through
      errno = ENOSPC;
      return ssize_t{-1};
    };
    std::string error;
    auto writer = TraceWriter::open(options, nlohmann::json::object(), &error);
    if (writer) {
      for (uint64_t seq = 1; seq <= 2000; ++seq) writer->append(record_for(seq));
      writer->flush();
      writer->close();
    }
  }
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(file);
  const auto bytes = testing::read_bytes(captured);
  const std::string text(bytes.begin(), bytes.end());
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_NE(text.find("lockstep: cannot write the trace " + path), std::string::npos) << text;
  EXPECT_NE(text.find("the job goes on"), std::string::npos) << text;
}

TEST(WriteFaults, ASealWhoseWriteFailsLeavesNoEnd) {
  testing::TempDir dir;
  const std::string path = dir.file("seal.lstrace");
  auto failing = std::make_shared<std::atomic<bool>>(false);
  WriterOptions options;
  options.path = path;
  options.on_error = [](const std::string&) {};  // close's failing writes: not this test's point
  options.pwritev = [failing](int fd, const iovec* parts, int count, off_t offset) {
    if (!*failing) return ::pwritev(fd, parts, count, offset);
    errno = EIO;
    return ssize_t{-1};
  };
  std::string error;
  auto writer = TraceWriter::open(options, nlohmann::json::object(), &error);
  ASSERT_TRUE(writer) << error;
  for (uint64_t seq = 1; seq <= 50; ++seq) writer->append(record_for(seq));
  writer->flush();
  *failing = true;
  writer->seal_after_signal(SIGSEGV);
  auto reader = TraceReader::open(path);
  reader->verify_all();
  EXPECT_FALSE(reader->end().has_value());
  EXPECT_EQ(testing::read_all_records(*reader).size(), 50u);
  writer->close();
}

}  // namespace
}  // namespace lockstep::trace
