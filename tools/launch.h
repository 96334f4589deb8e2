// Running a job under the shim: LD_PRELOAD, the LOCKSTEP_* environment, signals and exit code.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/settings.h"
#include "tools/job_output.h"

namespace lockstep::tools {

// What `lockstep run` asks of the shim. dir, level, steps, kernels, stacks, state and overwrite are
// the settings of common/settings.def that have a flag (request_field()).
struct TraceRequest {
  std::string dir;
  std::string level;    // settings::kLevelNames; empty: the shim's default
  std::string steps;    // A-B; empty: all
  std::string kernels;  // regex; empty: all
  std::string stacks;   // LOCKSTEP_STACKS regex; empty: none
  std::string state;    // LOCKSTEP_STATE; empty: the default
  bool overwrite = false;
  std::string torch_alloc = "auto";  // auto|async|none|keep: see torch_allocator_env
  std::string jax_alloc = "auto";    // auto|platform|keep: see xla_allocator_env
  std::string jax_graphs = "auto";   // auto|off|keep: see xla_command_buffer_env
  std::vector<std::string> command;
  JobOutput output = JobOutput::Inherit;  // else also into <dir>/job.log (job_output.h)
  // More variables for the job (check --resume-at's contract: resume_check.h).
  std::vector<std::pair<std::string, std::string>> job_env;
};

// The PyTorch caching allocator hands out pieces of large segments, so a kernel's pointer
// region (pointer to end of allocation) covers neighbouring tensors and never-written bytes,
// whose contents vary between runs of a multi-stream job (DDP). With
// PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync every tensor is its own allocation: regions
// are exact. The environment changes for mode (auto: async at level full, else keep; async;
// none: PYTORCH_NO_CUDA_MEMORY_CACHING=1; keep), given the effective level and the user's
// PYTORCH_CUDA_ALLOC_CONF (null if unset; auto keeps a user's setting). `note` says what was
// chosen, empty when nothing changes; launch_traced prints it only for a job that
// looks_like_pytorch (the variables do nothing to a job without PyTorch, the note would only
// puzzle its user). Throws InputError for an unknown mode.
struct EnvChange {
  std::vector<std::pair<std::string, std::string>> set;
  std::string note;
};
EnvChange torch_allocator_env(const std::string& mode, const std::string& level,
                              const char* user_alloc_conf);
// A command that runs Python or a PyTorch launcher: an argument named python*, torchrun,
// accelerate or deepspeed (after any directory), or a *.py script (mpirun -np 2 python x.py).
bool looks_like_pytorch(const std::vector<std::string>& command);
inline constexpr const char* kTorchAllocHelp =
    "PyTorch allocator for exact kernel regions: auto (cudaMallocAsync at --level full), "
    "async, none (no caching), keep";

// XLA (JAX) sub-allocates every buffer from one arena it reserves at start-up (the BFC
// allocator, 75% of the GPU preallocated), so a kernel's pointer region (pointer to end of
// allocation) covers most of the arena: other buffers and bytes no op wrote. With
// XLA_PYTHON_CLIENT_ALLOCATOR=platform every buffer is its own cuMemAlloc, freed when dead, and
// nothing is preallocated: regions are exact. The environment changes for mode (auto: platform
// at level full, else keep; platform; keep), given the effective level and the user's
// XLA_PYTHON_CLIENT_ALLOCATOR and XLA_PYTHON_CLIENT_PREALLOCATE (null if unset): auto keeps an
// allocator the user chose. `note` as for torch_allocator_env (printed for a Python job). Throws
// InputError for an unknown mode.
EnvChange xla_allocator_env(const std::string& mode, const std::string& level,
                            const char* user_allocator, const char* user_preallocate);
inline constexpr const char* kJaxAllocHelp =
    "JAX/XLA allocator for exact kernel regions: auto (XLA_PYTHON_CLIENT_ALLOCATOR=platform at "
    "--level full, unless set), platform, keep";

// XLA runs each compiled program's kernels as a CUDA graph (a "command buffer"); lockstep
// fingerprints a graph's regions before and after the whole replay, so a difference made inside
// it is located to the replay, not to the kernel that made it. With
// --xla_gpu_enable_command_buffer= (empty: no command types) XLA launches the same kernels one
// by one, in the same order, with the same numbers: each kernel is fingerprinted on its own.
// The XLA_FLAGS for mode (auto: off at level full, else keep; off; keep), given the effective
// level and the user's XLA_FLAGS (null if unset): a command-buffer flag the user gave is kept.
// Throws InputError for an unknown mode.
EnvChange xla_command_buffer_env(const std::string& mode, const std::string& level,
                                 const char* user_xla_flags);
inline constexpr const char* kJaxGraphsHelp =
    "XLA command buffers (CUDA graphs), which hide which kernel of a program made a difference: "
    "auto (off at --level full, unless XLA_FLAGS sets them), off, keep";

struct LaunchResult {
  int exit_code = 0;  // the job's code, or 128 + signal when a signal ended it
  double seconds = 0;
  std::string run_id;
};

// liblockstep.so: $LOCKSTEP_LIB, else next to this binary (../lib, or ../interpose in the build
// tree). Throws InputError when none exists.
std::string find_shim();

// lockstep-trace-YYYYmmdd-HHMMSS in the working directory, created here (mkdir: atomic), with
// -2, -3, ... after it when that name is taken, so that two commands started in one second never
// share a directory. Throws InputError when none can be created.
std::string default_trace_dir();

// The TraceRequest field that a setting's flag sets (`text` for an option, `flag` for a switch);
// both null for a setting without a field. run.cpp binds every flag of settings.def through it.
struct RequestField {
  std::string* text = nullptr;
  bool* flag = nullptr;
};
RequestField request_field(TraceRequest& request, settings::Id id);

// Every value the job would get checked with the shim's own parsers before it starts: the
// request's flags (InputError "--kernels: '(' is not a valid regular expression (...)") and the
// LOCKSTEP_* variables of this environment that no flag replaces ("LOCKSTEP_STEPS=7-3 (from the
// environment) is not ..."), so that the job never runs untraced for a bad value.
void check_request(const TraceRequest& request);

// check_request, then prepares the run directory (refusing another run's traces unless overwrite;
// the message names --overwrite), then runs the command as a child with the shim preloaded and
// LOCKSTEP_FROM_CLI=1, forwarding signals sent to this process; its output goes where
// request.output says. Throws InputError for setup
// problems (bad value, no shim, unusable directory, command not found).
LaunchResult launch_traced(const TraceRequest& request);

// settings::parse_step_window, throwing InputError naming `what` ("--steps: '7-3' is not ...").
void parse_step_range(const std::string& text, const std::string& what, uint32_t& first,
                      uint32_t& last);

}  // namespace lockstep::tools
