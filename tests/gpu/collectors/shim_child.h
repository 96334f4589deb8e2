// The GPU tests of this folder check the real shim from outside: the gtest parent (which never
// touches CUDA) runs this binary again as a child under LD_PRELOAD=<the shim> with a trace folder
// and a level, then reads the child's trace. A child returns 77 when there is no GPU (the test
// skips).
//
// How to add such a test: write its child as `int name(const char* arg)` doing the GPU work
// through the real libraries, add a row to kChildren (shim_child.cpp), and call
// run_under_shim("--flag", arg, dir, level) from the TEST.
#pragma once

#include <string>
#include <vector>

namespace lockstep::gpu_tests {

// The children (each test file's own), by their flag.
int fingerprints_child(const char* out_path);    // exact_fingerprints_gpu_test.cpp, --child
int unloaded_code_child(const char* unused);     // unloaded_code_gpu_test.cpp, --unload-child

// The shim of this build folder: next door to this binary when the folder was moved (carried to
// the GPU machine), else where the build put it.
std::string shim_path();

// Runs this binary as `self flag arg` under the shim, tracing into trace_dir at `level`, with
// `extra_env` ("NAME=value") beside the job's environment less any LOCKSTEP_*, LD_PRELOAD, RANK
// and NVTX injection of its own; returns waitpid's status (-1 if it could not start).
int run_under_shim(const std::string& flag, const std::string& arg, const std::string& trace_dir,
                   const std::string& level, const std::vector<std::string>& extra_env = {});

}  // namespace lockstep::gpu_tests
