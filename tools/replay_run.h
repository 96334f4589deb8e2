// The replay run: one traced run of the job at level full, fingerprinting only the op's step and
// only the op's kernel, with LOCKSTEP_REPLAY naming the op (collectors/replay.h), and the verdict
// read from it (replay_verdict.h). `lockstep hunt`'s stage 4 and `lockstep replay` run it.
#pragma once

#include <string>
#include <vector>

#include "common/op_spec.h"
#include "tools/job_output.h"
#include "tools/replay_verdict.h"

namespace lockstep::tools {

struct ReplayRunRequest {
  std::string dir;  // the run's directory
  settings::OpSpec op;
  int rank = 0;  // whose Replay record answers (every rank replays its own matching launch)
  uint32_t replays = 16;
  bool overwrite = false;
  std::string torch_alloc = "auto";
  std::string jax_alloc = "auto";
  std::vector<std::string> command;
  JobOutput output = JobOutput::LogAndEcho;
  std::vector<std::pair<std::string, std::string>> job_env;  // more variables (hunt: scopes)
};

// The environment the job gets for the replay (LOCKSTEP_REPLAY, LOCKSTEP_REPLAYS), in order.
std::vector<std::pair<std::string, std::string>> replay_env(const settings::OpSpec& op,
                                                            uint32_t replays);

// Runs it and reads its verdict. A job that exits non-zero gives a NotFound verdict saying so
// (with where its output is); setup problems throw InputError as launch_traced does.
ReplayVerdict run_replay(const ReplayRunRequest& request);

}  // namespace lockstep::tools
