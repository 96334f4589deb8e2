// A traced job's stdout and stderr kept in a log file of its run directory, and echoed where
// the command wants them: `check` and `hunt` keep every run's output (<run dir>/job.log), and
// under --json keep it off stdout, which then carries only the JSON document.
#pragma once

#include <cstdio>
#include <string>

#include <sys/types.h>

namespace lockstep::tools {

// Where a job's output goes (TraceRequest::output).
enum class JobOutput {
  Inherit,     // this process's stdout and stderr, untouched (`lockstep run`)
  LogAndEcho,  // job.log, and the job's stdout to ours, its stderr to ours
  LogOnly,     // job.log, and both to our stderr only when that is a terminal (--json)
};

inline constexpr const char* kJobLogName = "job.log";

// The pipes between a job and its log. Made before fork; the child calls attach_child, the
// parent pump_until_exit.
class JobLog {
 public:
  // Creates (truncates) `path` and the pipes; echo_out / echo_err (null: not echoed) get the
  // job's stdout / stderr as they come. Throws InputError naming the path.
  JobLog(const std::string& path, FILE* echo_out, FILE* echo_err);
  ~JobLog();
  JobLog(const JobLog&) = delete;
  JobLog& operator=(const JobLog&) = delete;

  // In the child, before exec: its stdout and stderr become the pipes. Async-signal-safe.
  void attach_child();
  // In the parent: copies the job's output into the log (and echoes) until `child` exited and
  // its output is drained; returns the child's wait status. Output still written by processes
  // the job left behind is read for a moment after the child's exit, then no longer.
  int pump_until_exit(pid_t child);

 private:
  int log_fd_ = -1;
  int out_[2] = {-1, -1}, err_[2] = {-1, -1};
  FILE *echo_out_ = nullptr, *echo_err_ = nullptr;
};

// The echo targets for `mode`: LogAndEcho (stdout, stderr), LogOnly (stderr twice when it is a
// terminal, else none).
void job_echo_targets(JobOutput mode, FILE** out, FILE** err);

}  // namespace lockstep::tools
