// Running a job under the shim: LD_PRELOAD, the LOCKSTEP_* environment, signals and exit code.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace lockstep::tools {

struct TraceRequest {
  std::string dir;
  std::string level;    // off|metrics|broad|full; empty: the shim's default
  std::string steps;    // A-B; empty: all
  std::string kernels;  // regex; empty: all
  bool overwrite = false;
  std::string torch_alloc = "auto";  // auto|async|none|keep: see torch_allocator_env
  std::vector<std::string> command;
};

// The PyTorch caching allocator hands out pieces of large segments, so a kernel's pointer
// region (pointer to end of allocation) covers neighbouring tensors and never-written bytes,
// whose contents vary between runs of a multi-stream job (DDP). With
// PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync every tensor is its own allocation: regions
// are exact. The environment changes for mode (auto: async at level full, else keep; async;
// none: PYTORCH_NO_CUDA_MEMORY_CACHING=1; keep), given the effective level and the user's
// PYTORCH_CUDA_ALLOC_CONF (null if unset; auto keeps a user's setting). `note` says what was
// chosen, empty when nothing changes. Throws InputError for an unknown mode.
struct EnvChange {
  std::vector<std::pair<std::string, std::string>> set;
  std::string note;
};
EnvChange torch_allocator_env(const std::string& mode, const std::string& level,
                              const char* user_alloc_conf);
inline constexpr const char* kTorchAllocHelp =
    "PyTorch allocator for exact kernel regions: auto (cudaMallocAsync at --level full), "
    "async, none (no caching), keep";

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
