#include "tools/resume_check.h"

#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "common/env.h"
#include "tools/commands/commands.h"
#include "tools/diff/result.h"
#include "tools/report.h"
#include "tools/run_set.h"

namespace lockstep::tools {
namespace fs = std::filesystem;

std::vector<std::string> resume_arguments(const std::vector<std::string>& command,
                                          uint64_t resume_at, const std::string& checkpoint) {
  const std::pair<std::string, std::string> fills[] = {{"{resume_at}", std::to_string(resume_at)},
                                                       {"{checkpoint}", checkpoint}};
  std::vector<std::string> out;
  for (std::string arg : command) {
    for (const auto& [key, value] : fills)
      for (size_t at = arg.find(key); at != std::string::npos; at = arg.find(key, at + value.size()))
        arg.replace(at, key.size(), value);
    out.push_back(std::move(arg));
  }
  return out;
}

int run_resume_check(const ResumeCheckRequest& request) {
  const std::string base = request.trace.dir.empty() ? default_trace_dir() : request.trace.dir;
  const std::string checkpoint = fs::absolute(fs::path(base) / "checkpoint").string();
  std::error_code ec;
  if (fs::exists(checkpoint, ec)) {
    // A checkpoint left by an earlier check would make the first run resume from it.
    if (!request.trace.overwrite)
      throw InputError(fmt::format("{}: a checkpoint of an earlier check is there (--overwrite "
                                   "removes it)",
                                   checkpoint));
    fs::remove_all(checkpoint, ec);
  }
  const std::pair<const char*, const char*> phases[] = {{"straight", "saves at"},
                                                        {"resumed", "resumes from"}};
  std::vector<std::string> dirs;
  for (const auto& [name, what] : phases) {
    TraceRequest trace = request.trace;
    trace.dir = (fs::path(base) / name).string();
    trace.command = resume_arguments(request.trace.command, request.resume_at, checkpoint);
    trace.job_env = {{env::kResumeAt, std::to_string(request.resume_at)},
                     {env::kCheckpoint, checkpoint}};
    // As check's runs: the job's output in the run's job.log (and, without --json, shown).
    trace.output = request.json ? JobOutput::LogOnly : JobOutput::LogAndEcho;
    LaunchResult launched = launch_traced(trace);
    std::fprintf(stderr, "lockstep check: %s run (%s step %llu): exit %d, %.2f s, %s\n", name,
                 what, static_cast<unsigned long long>(request.resume_at), launched.exit_code,
                 launched.seconds, trace_summary_line(trace.dir).c_str());
    if (launched.exit_code != 0)
      throw InputError(fmt::format("{}: the command exited with code {} in the {} run (its "
                                   "output: {})",
                                   request.trace.command[0], launched.exit_code, name,
                                   (fs::path(trace.dir) / kJobLogName).string()));
    if (dirs.empty() && !fs::exists(checkpoint, ec))
      throw InputError(fmt::format(
          "{}: the straight run wrote no checkpoint to {} (LOCKSTEP_CHECKPOINT) before step {} "
          "(the contract: lockstep check --help)",
          request.trace.command[0], checkpoint, request.resume_at));
    dirs.push_back(trace.dir);
  }
  DiffRequest diff;
  diff.a = dirs[0];
  diff.b = dirs[1];
  diff.json = request.json;
  diff.align = "number";
  DiffResult result;
  int code = run_diff(diff, &result);
  // The job must resume where it was told to; a resume elsewhere certifies another claim.
  std::optional<uint64_t> first_resumed;
  for (const StepPairing& p : result.alignment.pairs)
    if (p.job_step) {
      first_resumed = p.job_step;
      break;
    }
  if (result.alignment.resumed != 'b' || first_resumed != request.resume_at)
    warn(fmt::format("the resumed run's first step in common with the straight run is {}, not "
                     "{}: the job did not resume where LOCKSTEP_RESUME_AT said",
                     first_resumed ? std::to_string(*first_resumed) : "none",
                     request.resume_at));
  const std::string verdict = resume_verdict(result);
  const Verdict v = verdict_of(result);
  std::fprintf(request.json ? stderr : stdout, "lockstep check: %s (%s; runs in %s)\n",
               v == Verdict::Identical    ? "RESUME BIT-EXACT"
               : v == Verdict::Divergent ? "RESUME DIVERGENT"
                                         : "INCOMPLETE",
               verdict.empty() ? coverage_line(result).c_str() : verdict.c_str(), base.c_str());
  return code;
}

}  // namespace lockstep::tools
