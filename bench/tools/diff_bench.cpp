// Times `lockstep diff` on synthetic 8-rank runs: identical, diverging only in the last step,
// diverging in the first step, and an exhaustive compare (every record decoded and compared,
// for the records/s figure). Reports wall time and the child's peak RSS (getrusage).
//
//   lockstep_tools_diff_bench [records_per_rank=10000000] [dir=/tmp/lockstep-diff-bench] [keep]
//
// Scale mode (issue #34): 2,432 ranks x 200 steps x 200 records per run (the article's rank
// count; 97 M records, 1.22 GB a run at level broad, 2.38 GB at full), the same three diffs and
// `verify`, each run `repeats` times with the median of wall, user and system time and peak
// RSS, printed as a table and as one JSON line. The children run under RLIMIT_NOFILE = `nofile`
// (far below the 4,864 rank files of the two runs), so a diff that held a file open per rank
// would fail here. Then the floor every command stands on: reading every byte of two runs with
// XXH64 over it (what the integrity pass must do before any command reads a file), in this
// process, one worker per core, 4 MiB preads.
//
//   lockstep_tools_diff_bench --scale [dir=/tmp/lockstep-diff-scale] [keep|drop] [repeats=3]
//                             [ranks=2432] [nofile=256] [level=full]
// Runs already in `dir` are used as they are (write them once with `keep`, then time again).
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <xxhash.h>

#include "tools/synth/synthetic_trace.h"

namespace fs = std::filesystem;
namespace synth = lockstep::tools::synth;

namespace {

struct Measure {
  int code = -1;
  double seconds = 0;
  long peak_rss_kib = 0;
  double cpu_seconds = 0;  // user + system of the child: the machine is shared
  double user_seconds = 0, system_seconds = 0;
};

// nofile > 0: the child's RLIMIT_NOFILE (soft and hard), set before exec.
Measure run_cli(const std::vector<std::string>& args, rlim_t nofile = 0) {
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
    if (nofile > 0) {
      rlimit limit{nofile, nofile};
      if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(127);
    }
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
  m.user_seconds = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6;
  m.system_seconds = usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
  m.cpu_seconds = m.user_seconds + m.system_seconds;
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

struct Floor {
  double wall = 0, user = 0, sys = 0;
  uint64_t bytes = 0;
};

double cpu_seconds(const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; }

// Every byte of the rank files in `dirs` read (4 MiB preads, one worker per core) with XXH64
// over it: the least any command that checks every block must spend.
Floor read_floor(const std::vector<std::string>& dirs) {
  std::vector<std::string> files;
  for (const std::string& dir : dirs)
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".lstrace") files.push_back(e.path());
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> bytes{0}, sink{0};
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  const auto start = std::chrono::steady_clock::now();
  auto worker = [&] {
    std::vector<uint8_t> buffer(4u << 20);
    for (size_t i = next++; i < files.size(); i = next++) {
      const int fd = ::open(files[i].c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      uint64_t hash = 0;
      for (off_t at = 0;;) {
        const ssize_t got = ::pread(fd, buffer.data(), buffer.size(), at);
        if (got <= 0) break;
        hash ^= XXH64(buffer.data(), static_cast<size_t>(got), 0);
        at += got, bytes += static_cast<uint64_t>(got);
      }
      sink += hash;
      ::close(fd);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < std::max(1u, std::thread::hardware_concurrency()); ++t)
    pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  Floor f;
  f.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  getrusage(RUSAGE_SELF, &after);
  f.user = cpu_seconds(after.ru_utime) - cpu_seconds(before.ru_utime);
  f.sys = cpu_seconds(after.ru_stime) - cpu_seconds(before.ru_stime);
  f.bytes = bytes;
  return f;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Issue #34's scale: see the top of the file.
int scale_mode(int argc, char** argv) {
  const std::string root = argc > 2 ? argv[2] : "/tmp/lockstep-diff-scale";
  const bool keep = argc > 3 && std::string(argv[3]) == "keep";
  const int repeats = argc > 4 ? std::max(1, std::atoi(argv[4])) : 3;
  const int ranks = argc > 5 ? std::max(8, std::atoi(argv[5])) : 2432;
  const rlim_t nofile = argc > 6 ? static_cast<rlim_t>(std::atoll(argv[6])) : 256;
  const std::string level = argc > 7 ? argv[7] : "full";
  const uint32_t records_per_step = 200;  // ops + all-reduce + optimizer + metric
  synth::Spec spec;
  spec.world_size = ranks;
  spec.steps = 200;
  spec.ops_per_step = records_per_step - 3;
  spec.streams = 4;
  spec.writer_memory = 4u << 20;  // thousands of writers at once in this process
  spec.level = level;             // broad: kernels without fingerprints (smaller files)
  const uint64_t records = uint64_t{spec.steps} * records_per_step * spec.world_size;
  std::printf("runs: %d ranks x %u steps x %u records = %llu records per run\n", ranks,
              spec.steps, records_per_step, static_cast<unsigned long long>(records));
  fs::create_directories(root);
  const std::string a = root + "/a", last = root + "/b-last", first = root + "/b-first";
  synth::Spec s_last = spec, s_first = spec;
  s_last.plants.push_back({synth::Plant::Output, 5, spec.steps - 1, 100});
  s_first.plants.push_back({synth::Plant::Output, 5, 0, 100});
  bool wrote = false;
  for (const auto& [dir, s] : {std::pair{a, &spec}, {last, &s_last}, {first, &s_first}}) {
    if (fs::exists(dir + "/manifest.json")) continue;  // written by an earlier run (keep)
    const double t = time_write(dir, *s);
    std::printf("wrote %s in %.1f s (%.2f GB)\n", dir.c_str(), t, dir_bytes(dir) / 1e9);
    wrote = true;
  }
  if (wrote) {
    // A child's peak RSS counts what it had before exec, a fork of this process: thousands of
    // writers left it large. Measure from a fresh image of this program instead.
    std::fflush(stdout);
    std::vector<char*> again(argv, argv + argc);
    again.push_back(nullptr);
    execv("/proc/self/exe", again.data());
    std::perror("re-exec for measuring");
    return 1;
  }
  struct Case {
    const char* key;
    const char* name;
    std::vector<std::string> args;
    int expect;
  };
  const std::vector<Case> cases = {
      {"identical", "diff, identical", {"diff", a, a}, 0},
      {"last_step", "diff, diverging only in the last step", {"diff", a, last}, 1},
      {"first_step", "diff, one rank diverging in the first step", {"diff", a, first}, 1},
      {"verify", "verify", {"verify", a}, 0},
  };
  std::printf("\n%d repeats, medians; children under RLIMIT_NOFILE %llu\n", repeats,
              static_cast<unsigned long long>(nofile));
  std::printf("%-44s %5s %8s %8s %8s %9s\n", "lockstep", "exit", "wall s", "user s", "sys s",
              "peak MiB");
  std::string json = fmt::format(R"({{"bench":"diff-scale","ranks":{},"steps":{},)"
                                 R"("records_per_step":{},"records_per_run":{},)"
                                 R"("bytes_per_run":{},"repeats":{},"nofile":{},"cases":{{)",
                                 ranks, spec.steps, records_per_step, records, dir_bytes(a),
                                 repeats, static_cast<unsigned long long>(nofile));
  bool all_expected = true;
  for (size_t c = 0; c < cases.size(); ++c) {
    std::vector<double> wall, user, sys, rss;
    int code = cases[c].expect;  // the first unexpected exit code, if any
    for (int r = 0; r < repeats; ++r) {
      Measure m = run_cli(cases[c].args, nofile);
      wall.push_back(m.seconds), user.push_back(m.user_seconds), sys.push_back(m.system_seconds);
      rss.push_back(m.peak_rss_kib / 1024.0);
      if (m.code != cases[c].expect && code == cases[c].expect) code = m.code;
    }
    all_expected = all_expected && code == cases[c].expect;
    std::printf("%-44s %5d %8.2f %8.2f %8.2f %9.1f%s\n", cases[c].name, code, median(wall),
                median(user), median(sys), median(rss),
                code == cases[c].expect ? "" : "   (UNEXPECTED EXIT CODE)");
    json += fmt::format(R"({}"{}":{{"exit":{},"wall_s":{:.3f},"user_s":{:.3f},"sys_s":{:.3f},)"
                        R"("peak_rss_mib":{:.1f}}})",
                        c ? "," : "", cases[c].key, code, median(wall), median(user), median(sys),
                        median(rss));
  }
  json += "}";
  // The floor under the identical diff (run a read twice), the two diverging ones (a and b) and
  // verify (a, read once for the integrity pass and once more for the records).
  std::vector<double> wall, user, sys;
  uint64_t floor_bytes = 0;
  for (int r = 0; r < repeats; ++r) {
    const Floor f = read_floor({a, last});
    wall.push_back(f.wall), user.push_back(f.user), sys.push_back(f.sys);
    floor_bytes = f.bytes;
  }
  std::printf("%-44s %5s %8.2f %8.2f %8.2f   (%.2f GB)\n", "floor: read + XXH64 of two runs", "-",
              median(wall), median(user), median(sys), floor_bytes / 1e9);
  json += fmt::format(R"(,"floor_read_xxh64_two_runs":{{"bytes":{},"wall_s":{:.3f},"user_s":{:.3f},)"
                      R"("sys_s":{:.3f}}}}})",
                      floor_bytes, median(wall), median(user), median(sys));
  std::printf("\n%s\n", json.c_str());
  if (!keep) fs::remove_all(root);
  return all_expected ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--scale") return scale_mode(argc, argv);
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
