#include "tools/job_output.h"

#include <cerrno>
#include <chrono>
#include <cstring>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "tools/run_set.h"

namespace lockstep::tools {

namespace {

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// The whole buffer, or false (the log's disk is full or gone: the job runs on regardless).
bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

void job_echo_targets(JobOutput mode, FILE** out, FILE** err) {
  *out = *err = nullptr;
  if (mode == JobOutput::LogAndEcho) {
    *out = stdout;
    *err = stderr;
  } else if (mode == JobOutput::LogOnly && ::isatty(STDERR_FILENO)) {
    *out = *err = stderr;
  }
}

JobLog::JobLog(const std::string& path, FILE* echo_out, FILE* echo_err)
    : echo_out_(echo_out), echo_err_(echo_err) {
  log_fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd_ < 0)
    throw InputError(fmt::format("{}: cannot be written: {}", path, strerror(errno)));
  if (::pipe2(out_, O_CLOEXEC) != 0 || ::pipe2(err_, O_CLOEXEC) != 0) {
    int err = errno;
    for (int* fd : {&log_fd_, &out_[0], &out_[1], &err_[0], &err_[1]}) close_fd(*fd);
    throw InputError(fmt::format("pipe: {}", strerror(err)));
  }
}

JobLog::~JobLog() {
  for (int* fd : {&log_fd_, &out_[0], &out_[1], &err_[0], &err_[1]}) close_fd(*fd);
}

void JobLog::attach_child() {
  ::dup2(out_[1], STDOUT_FILENO);  // dup2 clears close-on-exec on the copies
  ::dup2(err_[1], STDERR_FILENO);
}

int JobLog::pump_until_exit(pid_t child) {
  using Clock = std::chrono::steady_clock;
  // After the job's own process exited, what it left behind (a daemon holding the pipes) is
  // read while it keeps coming, at most this long: the command must not wait for it.
  constexpr auto kLinger = std::chrono::seconds(2);
  close_fd(out_[1]);
  close_fd(err_[1]);
  int fds[2] = {out_[0], err_[0]};
  FILE* echo[2] = {echo_out_, echo_err_};
  bool open[2] = {true, true};
  bool exited = false, log_ok = true;
  int status = 0;
  Clock::time_point exited_at;
  static char buffer[1 << 16];
  while (open[0] || open[1]) {
    if (!exited && ::waitpid(child, &status, WNOHANG) == child) {
      exited = true;
      exited_at = Clock::now();
    }
    if (exited && Clock::now() - exited_at > kLinger) break;
    pollfd polled[2];
    int which[2], count = 0;
    for (int i = 0; i < 2; ++i)
      if (open[i]) {
        polled[count] = {fds[i], POLLIN, 0};
        which[count++] = i;
      }
    int ready = ::poll(polled, count, exited ? 200 : 100);
    if (ready < 0 && errno == EINTR) continue;  // a signal, forwarded to the job
    if (ready < 0) break;
    if (ready == 0) {
      if (exited) break;  // the job is gone and nothing more came: drained
      continue;
    }
    for (int k = 0; k < count; ++k) {
      if (polled[k].revents == 0) continue;
      const int i = which[k];
      ssize_t n = ::read(fds[i], buffer, sizeof(buffer));
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        open[i] = false;
        continue;
      }
      if (log_ok && !write_all(log_fd_, buffer, static_cast<size_t>(n))) {
        log_ok = false;
        std::fprintf(stderr, "lockstep: warning: the job's log could not be written: %s\n",
                     strerror(errno));
      }
      if (echo[i] != nullptr) {
        std::fwrite(buffer, 1, static_cast<size_t>(n), echo[i]);
        std::fflush(echo[i]);
      }
    }
  }
  close_fd(out_[0]);
  close_fd(err_[0]);
  if (!exited)
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {}
  return status;
}

}  // namespace lockstep::tools
