// The parent/child harness of this folder's GPU tests (shim_child.h) and their main().
#include "tests/gpu/collectors/shim_child.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

extern char** environ;

namespace lockstep::gpu_tests {
namespace fs = std::filesystem;

namespace {
struct Child {
  const char* flag;
  int (*main)(const char* arg);
};
constexpr Child kChildren[] = {
    {"--child", fingerprints_child},
    {"--unload-child", unloaded_code_child},
};
}  // namespace

std::string shim_path() {
  const fs::path moved =
      fs::read_symlink("/proc/self/exe").parent_path() / "../../../interpose/liblockstep.so";
  return fs::exists(moved) ? fs::weakly_canonical(moved).string() : LOCKSTEP_SHIM_PATH;
}

int run_under_shim(const std::string& flag, const std::string& arg, const std::string& trace_dir,
                   const std::string& level, const std::vector<std::string>& extra_env) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string var = *e;
    if (var.starts_with("LOCKSTEP_") || var.starts_with("LD_PRELOAD=") ||
        var.starts_with("RANK=") || var.starts_with("NVTX_INJECTION64_PATH="))
      continue;
    env_strings.push_back(var);
  }
  env_strings.push_back("LD_PRELOAD=" + shim_path());
  env_strings.push_back("LOCKSTEP_DIR=" + trace_dir);
  env_strings.push_back("LOCKSTEP_LEVEL=" + level);
  for (const std::string& var : extra_env) env_strings.push_back(var);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string self = fs::read_symlink("/proc/self/exe").string();
  std::string flag_copy = flag, arg_copy = arg;
  std::vector<char*> argv = {self.data(), flag_copy.data(), arg_copy.data(), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), envp.data()) != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

}  // namespace lockstep::gpu_tests

int main(int argc, char** argv) {
  if (argc == 3)
    for (const auto& child : lockstep::gpu_tests::kChildren)
      if (std::strcmp(argv[1], child.flag) == 0) return child.main(argv[2]);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
