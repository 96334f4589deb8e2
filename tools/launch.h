// Running a job under the shim: LD_PRELOAD, the LOCKSTEP_* environment, signals and exit code.
#pragma once

#include <string>
#include <vector>

namespace lockstep::tools {

struct TraceRequest {
  std::string dir;
  std::string level;    // off|metrics|broad|full; empty: the shim's default
  std::string steps;    // A-B; empty: all
  std::string kernels;  // regex; empty: all
  bool overwrite = false;
  std::vector<std::string> command;
};

struct LaunchResult {
  int exit_code = 0;  // the job's code, or 128 + signal when a signal ended it
  double seconds = 0;
  std::string run_id;
};

// liblockstep.so: $LOCKSTEP_LIB, else next to this binary (../lib, or ../interpose in the build
// tree). Throws InputError when none exists.
std::string find_shim();

// ./lockstep-trace-YYYYmmdd-HHMMSS
std::string default_trace_dir();

// Prepares the run directory (refusing another run's traces unless overwrite), then runs the
// command as a child with the shim preloaded, forwarding signals sent to this process. Throws
// InputError for setup problems (no shim, unusable directory, command not found).
LaunchResult launch_traced(const TraceRequest& request);

// Validates "A-B" / "A" / "A-"; throws InputError naming `what`.
void parse_step_range(const std::string& text, const std::string& what, uint32_t& first,
                      uint32_t& last);

}  // namespace lockstep::tools
