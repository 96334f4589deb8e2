// Sealing the trace on a fatal signal (collectors/fatal_signals.h), each case in a forked child:
// the handler is installed once per process.
#include <gtest/gtest.h>

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "collectors/fatal_signals.h"
#include "trace/reader.h"
#include "trace/writer.h"

namespace lockstep::collectors {
namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/lockstep-signals-XXXXXX";
    path = mkdtemp(name);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

// Runs `job` in a child that traces two steps into `path` and arms the seal; returns the
// child's wait status.
template <class Job>
int run_traced_child(const std::string& path, Job&& job) {
  pid_t pid = fork();
  if (pid == 0) {
    trace::WriterOptions options;
    options.path = path;
    std::string error;
    auto writer = trace::TraceWriter::open(options, nlohmann::json{{"rank", 0}}, &error);
    if (!writer) _exit(90);
    trace::Record record;
    record.kind = trace::RecordKind::Kernel;
    record.name = writer->intern("kernel");
    for (uint32_t step = 0; step < 2; ++step) {
      record.seq = step + 1;
      record.step = step;
      writer->append(record);
      writer->end_step(step);
    }
    writer->flush();
    job(*writer);
    writer->close();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

std::optional<trace::TraceEnd> end_of(const std::string& path) {
  auto reader = trace::TraceReader::open(path);
  reader->blocks();
  return reader->end();
}

TEST(FatalSignals, ATerminatedJobDiesOfItsSignalAndItsTraceSaysSoNotClean) {
  TempDir dir;
  const std::string path = dir.path + "/t.lstrace";
  int status = run_traced_child(path, [](trace::TraceWriter& writer) {
    seal_trace_on_fatal_signals(&writer);
    raise(SIGTERM);
    _exit(91);  // not reached: SIGTERM's default action ends the process
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  auto end = end_of(path);
  ASSERT_TRUE(end.has_value());
  EXPECT_FALSE(end->clean);
  EXPECT_EQ(end->reason, "signal " + std::to_string(SIGTERM));
}

TEST(FatalSignals, ASentSegvStillKillsTheJobWithSegv) {
  TempDir dir;
  const std::string path = dir.path + "/t.lstrace";
  int status = run_traced_child(path, [](trace::TraceWriter& writer) {
    seal_trace_on_fatal_signals(&writer);
    raise(SIGSEGV);  // si_code SI_TKILL: not a fault that comes back by itself
    _exit(91);
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGSEGV);
  auto end = end_of(path);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->reason, "signal " + std::to_string(SIGSEGV));
}

void count_signal(int) {}

TEST(FatalSignals, ASignalTheJobHandlesIsLeftToTheJobAndTheTraceClosesCleanly) {
  TempDir dir;
  const std::string path = dir.path + "/t.lstrace";
  int status = run_traced_child(path, [](trace::TraceWriter& writer) {
    signal(SIGTERM, count_signal);  // the job's own handler, installed before the tracer's start
    seal_trace_on_fatal_signals(&writer);
    raise(SIGTERM);  // handled by the job: it lives on
  });
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  auto end = end_of(path);
  ASSERT_TRUE(end.has_value());
  EXPECT_TRUE(end->clean);
  EXPECT_EQ(end->reason, "exit");
}

TEST(FatalSignals, AnIgnoredSignalStaysIgnored) {
  TempDir dir;
  const std::string path = dir.path + "/t.lstrace";
  int status = run_traced_child(path, [](trace::TraceWriter& writer) {
    signal(SIGHUP, SIG_IGN);
    seal_trace_on_fatal_signals(&writer);
    raise(SIGHUP);
  });
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  auto end = end_of(path);
  ASSERT_TRUE(end.has_value());
  EXPECT_TRUE(end->clean);
}

}  // namespace
}  // namespace lockstep::collectors
