// Times `lockstep diff` on synthetic 8-rank runs: identical, diverging only in the last step,
// diverging in the first step, and an exhaustive compare (every record decoded and compared,
// for the records/s figure). Reports wall time and the child's peak RSS (getrusage).
//
//   lockstep_tools_diff_bench [records_per_rank=10000000] [dir=/tmp/lockstep-diff-bench] [keep]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tools/synth/synthetic_trace.h"

namespace fs = std::filesystem;
namespace synth = lockstep::tools::synth;

namespace {

struct Measure {
  int code = -1;
  double seconds = 0;
  long peak_rss_kib = 0;
  double cpu_seconds = 0;  // user + system of the child: the machine is shared
};

Measure run_cli(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  std::string cli = LOCKSTEP_CLI;
  argv.push_back(cli.data());
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(stdout);
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout)) _exit(127);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  Measure m;
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  m.peak_rss_kib = usage.ru_maxrss;
  m.cpu_seconds = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec +
                  usage.ru_stime.tv_usec / 1e6;
  return m;
}

double time_write(const std::string& dir, const synth::Spec& spec) {
  fs::remove_all(dir);
  auto start = std::chrono::steady_clock::now();
  std::string error = synth::write_run(dir, spec, dir);
  if (!error.empty()) {
    std::fprintf(stderr, "write %s: %s\n", dir.c_str(), error.c_str());
    std::exit(1);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

uint64_t dir_bytes(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& e : fs::directory_iterator(dir))
    total += e.is_regular_file() ? e.file_size() : 0;
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t per_rank = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10'000'000;
  const std::string root = argc > 2 ? argv[2] : "/tmp/lockstep-diff-bench";
  const bool keep = argc > 3;
  const uint32_t records_per_step = 10'000;  // ops + all-reduce + optimizer + metric
  synth::Spec spec;
  spec.world_size = 8;
  spec.ops_per_step = records_per_step - 3;
  spec.steps = static_cast<uint32_t>(std::max<uint64_t>(2, per_rank / records_per_step));
  spec.streams = 4;
  const uint64_t records = static_cast<uint64_t>(spec.steps) * records_per_step * spec.world_size;
  std::printf("runs: 8 ranks x %u steps x %u records = %llu records per run\n", spec.steps,
              records_per_step, static_cast<unsigned long long>(records));

  fs::create_directories(root);
  std::string a = root + "/a", last = root + "/b-last", first = root + "/b-first";
  double t = time_write(a, spec);
  std::printf("wrote %s in %.1f s (%.1f M records/s, %.1f bytes/record)\n", a.c_str(), t,
              records / t / 1e6, static_cast<double>(dir_bytes(a)) / records);
  synth::Spec s_last = spec;
  s_last.plants.push_back({synth::Plant::Output, 5, spec.steps - 1, 100});
  t = time_write(last, s_last);
  synth::Spec s_first = spec;
  s_first.plants.push_back({synth::Plant::Output, 5, 0, 100});
  t += time_write(first, s_first);
  std::printf("wrote the two diverging runs in %.1f s\n\n", t);

  struct Case {
    const char* name;
    std::vector<std::string> args;
    int expect;
    uint64_t compared;  // records decoded and compared (both runs), for records/s
  };
  std::vector<Case> cases = {
      {"identical (summaries only)", {"diff", a, a}, 0, 0},
      {"diverging only in the last step", {"diff", a, last}, 1, 0},
      {"diverging in the first step", {"diff", a, first}, 1, 0},
      {"exhaustive compare, identical", {"diff", "--exhaustive", a, a}, 0, 2 * records},
      {"exhaustive compare, first step diverges",
       {"diff", "--exhaustive", a, first},
       1,
       2 * records},
  };
  std::printf("%-42s %5s %8s %8s %9s %12s\n", "lockstep diff", "exit", "wall s", "cpu s",
              "peak MiB", "M records/s");
  for (const Case& c : cases) {
    Measure m = run_cli(c.args);
    std::printf(
        "%-42s %5d %8.3f %8.3f %9.1f %12s%s\n", c.name, m.code, m.seconds, m.cpu_seconds,
        m.peak_rss_kib / 1024.0,
        c.compared ? std::to_string(c.compared / m.seconds / 1e6).substr(0, 6).c_str() : "-",
        m.code == c.expect ? "" : "   (UNEXPECTED EXIT CODE)");
  }
  if (!keep) fs::remove_all(root);
  return 0;
}
