// libFuzzer target for the tools' path: a run directory of mutated files (run_dir_container.h)
// through run-set loading, verify, stats and diff, in process. Only the errors a command turns
// into "one line, exit 2" may come out (InputError, TraceError); a crash, hang, leak, sanitizer
// report or any other exception is a finding.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

#include "run_dir_container.h"
#include "tools/commands/commands.h"
#include "tools/run_set.h"
#include "trace/reader.h"
#include "trace/run_dir.h"

namespace fs = std::filesystem;

namespace {

struct Scratch {
  std::string dir;
  Scratch() {
    const char* base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    dir = std::string(base) + "/lockstep-run-set-fuzz-" + std::to_string(::getpid());
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

void write_file(const std::string& path, std::string_view bytes) {
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    if (!bytes.empty()) std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
}

// Runs one command's code path; the errors it is allowed to end with are swallowed.
template <class Fn>
void expect_clean(Fn&& fn) {
  try {
    fn();
  } catch (const lockstep::tools::InputError&) {
  } catch (const lockstep::trace::TraceError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "run_set_fuzz: escaped exception: %s\n", e.what());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Scratch scratch;
  const std::string& dir = scratch.dir;
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  int rank = 0;
  for (std::string_view part :
       lockstep::fuzz::split_files({reinterpret_cast<const char*>(data), size})) {
    if (!part.empty() && part.front() == '{') {
      write_file(dir + "/manifest.json", part);
    } else {
      write_file(dir + "/" + lockstep::trace::rank_trace_name(rank++), part);
    }
  }
  using namespace lockstep::tools;
  for (bool salvage : {false, true}) {
    expect_clean([&] {
      OpenOptions options;
      options.salvage = salvage;
      RunSet run = open_run_set(dir, options);
    });
    expect_clean([&] { stats_report(dir, 5, salvage); });
    expect_clean([&] {
      DiffRequest request;
      request.a = request.b = dir;
      request.print = false;
      request.salvage = salvage;
      request.threads = 1;
      run_diff(request);
    });
  }
  expect_clean([&] { run_verify(dir, false); });
  return 0;
}
