// What the real shim says about its settings when it loads, as the user sees it: liblockstep.so
// preloaded into /bin/true, which makes no CUDA call (none of these messages may wait for one).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/settings.h"

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int code = -1;
  std::string err;
};

// Runs /bin/true with the shim preloaded and exactly `vars` (plus LD_PRELOAD) as environment.
Outcome run_true(const std::vector<std::string>& vars) {
  const fs::path err_path =
      fs::temp_directory_path() / ("shim-messages-" + std::to_string(::getpid()) + ".err");
  std::vector<std::string> env = vars;
  env.push_back(std::string("LD_PRELOAD=") + SHIM_PATH);
  std::vector<char*> envp;
  for (std::string& entry : env) envp.push_back(entry.data());
  envp.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 2);
    char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
    ::execve("/bin/true", argv, envp.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  Outcome outcome;
  outcome.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream file(err_path);
  outcome.err.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  fs::remove(err_path);
  return outcome;
}

size_t lines(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

TEST(ShimMessages, NothingIsSaidWhenEverySettingIsGood) {
  const fs::path dir = fs::temp_directory_path() / "shim-messages-good";
  Outcome r = run_true({"LOCKSTEP_DIR=" + dir.string(), "LOCKSTEP_LEVEL=full"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.err, "");
}

TEST(ShimMessages, FailHardStopsTheJobWithOneLineAndItsExitCode) {
  Outcome r = run_true({"LOCKSTEP_LEVEL=fast", "LOCKSTEP_FAIL_HARD=1"});
  EXPECT_EQ(r.code, lockstep::settings::kFailHardExitCode);
  EXPECT_EQ(r.err,
            "lockstep: LOCKSTEP_LEVEL=fast is not one of off|metrics|broad|full; stopping the job "
            "(LOCKSTEP_FAIL_HARD=1, exit code 78)\n");
}

TEST(ShimMessages, WithoutFailHardABadSettingIsOneLineAndTheJobRunsUntraced) {
  Outcome r = run_true({"LOCKSTEP_LEVEL=fast"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.err,
            "lockstep: LOCKSTEP_LEVEL=fast is not one of off|metrics|broad|full; running "
            "untraced\n");
}

TEST(ShimMessages, AMisspelledVariableGetsOneWarningNamingTheNearestSetting) {
  Outcome r = run_true({"LOCKSTEP_LEVL=full", "LOCKSTEP_LEVEL=off"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.err,
            "lockstep: warning: LOCKSTEP_LEVL is not a lockstep setting, ignored (nearest: "
            "LOCKSTEP_LEVEL)\n");
}

TEST(ShimMessages, AnUnwritableTraceDirectoryIsReportedWhenTheShimLoads) {
  Outcome r = run_true({"LOCKSTEP_DIR=/proc/forbidden"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_TRUE(
      r.err.starts_with("lockstep: LOCKSTEP_DIR /proc/forbidden cannot be created in "
                        "/proc"))
      << r.err;
  EXPECT_TRUE(r.err.ends_with("; running untraced\n")) << r.err;
  r = run_true({"LOCKSTEP_DIR=/proc/forbidden", "LOCKSTEP_FAIL_HARD=yes"});
  EXPECT_EQ(r.code, lockstep::settings::kFailHardExitCode) << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  // Level off traces nothing, so writes nothing: no check.
  EXPECT_EQ(run_true({"LOCKSTEP_DIR=/proc/forbidden", "LOCKSTEP_LEVEL=off"}).err, "");
}

TEST(ShimMessages, TheLoadTimeCheckLeavesNoDirectoryBehind) {
  const fs::path dir =
      fs::temp_directory_path() / ("shim-messages-new-" + std::to_string(::getpid())) / "trace";
  Outcome r = run_true({"LOCKSTEP_DIR=" + dir.string()});
  EXPECT_EQ(r.err, "");
  EXPECT_FALSE(fs::exists(dir.parent_path())) << "the shim created " << dir.parent_path();
}

TEST(ShimMessages, ThroughLockstepRunTheMessagesNameItsFlags) {
  Outcome r = run_true({"LOCKSTEP_DIR=/proc/forbidden", "LOCKSTEP_FROM_CLI=1"});
  EXPECT_TRUE(r.err.starts_with("lockstep: --output /proc/forbidden cannot be created")) << r.err;
}

}  // namespace
