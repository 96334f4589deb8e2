#include "tools/replay_run.h"

#include <filesystem>

#include <fmt/format.h>

#include "common/env.h"
#include "tools/launch.h"
#include "tools/op_stack.h"

namespace lockstep::tools {

std::vector<std::pair<std::string, std::string>> replay_env(const settings::OpSpec& op,
                                                            uint32_t replays) {
  return {{env::kReplay, settings::op_spec_text(op)}, {env::kReplays, std::to_string(replays)}};
}

ReplayVerdict run_replay(const ReplayRunRequest& request) {
  TraceRequest trace;
  trace.dir = request.dir;
  trace.level = "full";
  trace.steps = std::to_string(request.op.step);
  // Only the op's kernel is fingerprinted: the rest of its step runs at broad's cost.
  trace.kernels = exact_regex(request.op.name);
  trace.overwrite = request.overwrite;
  trace.torch_alloc = request.torch_alloc;
  trace.jax_alloc = request.jax_alloc;
  trace.command = request.command;
  trace.output = request.output;
  trace.job_env = request.job_env;
  for (auto& variable : replay_env(request.op, request.replays)) trace.job_env.push_back(variable);
  const LaunchResult launched = launch_traced(trace);
  if (launched.exit_code != 0) {
    ReplayVerdict v;
    v.run = request.dir;
    v.reason =
        fmt::format("the replay run exited with code {} (its output: {})", launched.exit_code,
                    (std::filesystem::path(request.dir) / kJobLogName).string());
    return v;
  }
  return read_replay_verdict(request.dir, request.rank, request.op.step);
}

}  // namespace lockstep::tools
