#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "tools/commands/commands.h"
#include "tools/facts.h"
#include "tools/run_set.h"

namespace lockstep::tools {

CommandRunner add_verify_command(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "verify", "Check every file's integrity and certify that the trace is complete");
  sub->add_option("DIR", *dir, "Trace directory (or one .lstrace file)")->required();
  sub->footer(R"(Certified complete means: every rank of the world size has a file, every block's
checksum holds, no file is cut off, no record was dropped, every step with records has its
summary, and all ranks reached the same last step.
Exit status: 0 certified, 2 otherwise (each problem on its own line).

Example:
  lockstep verify runs/a && lockstep diff runs/a runs/b)");
  return [dir] {
    RunSet run = open_run_set(*dir);
    for (const std::string& w : run.warnings) warn(w);
    std::vector<RankFacts> facts = scan_run(run, ScanOptions{true, true});
    std::vector<std::string> problems;
    for (int r : run.missing_ranks)
      problems.push_back(fmt::format("{}: rank {} of world size {} has no trace file", *dir, r,
                                     run.world_size));
    uint64_t records = 0;
    uint32_t last_step_min = UINT32_MAX, last_step_max = 0;
    for (const RankFacts& f : facts) {
      records += f.records;
      std::vector<std::string> mine;
      if (!f.corruption.empty()) mine.push_back(f.corruption);
      if (f.truncated)
        mine.push_back(fmt::format("{}: cut off at offset {} (the writer did not finish)", f.path,
                                   f.truncation_offset));
      if (f.dropped_records)
        mine.push_back(fmt::format("{}: {} records dropped by the writer", f.path, f.dropped_records));
      std::vector<uint32_t> unsummarized;
      std::set_difference(f.record_steps.begin(), f.record_steps.end(), f.summary_steps.begin(),
                          f.summary_steps.end(), std::back_inserter(unsummarized));
      if (!unsummarized.empty())
        mine.push_back(fmt::format("{}: {} step(s) without a summary, first {}", f.path,
                                   unsummarized.size(), unsummarized.front()));
      if (!f.record_steps.empty()) {
        last_step_min = std::min(last_step_min, f.record_steps.back());
        last_step_max = std::max(last_step_max, f.record_steps.back());
      }
      std::printf("%-4s rank %d  %s  %llu records, %zu steps\n", mine.empty() ? "ok" : "BAD",
                  f.rank, f.path.c_str(), static_cast<unsigned long long>(f.records),
                  f.record_steps.size());
      problems.insert(problems.end(), mine.begin(), mine.end());
    }
    if (last_step_min != UINT32_MAX && last_step_min != last_step_max)
      problems.push_back(fmt::format("{}: ranks end at different steps ({} to {})", *dir,
                                     last_step_min, last_step_max));
    if (!problems.empty()) {
      for (const std::string& p : problems) std::fprintf(stderr, "lockstep: %s\n", p.c_str());
      std::printf("NOT CERTIFIED: %zu problem%s\n", problems.size(), problems.size() == 1 ? "" : "s");
      return kExitInvalid;
    }
    std::printf("CERTIFIED COMPLETE: %zu ranks, %llu records, nothing dropped or cut off\n",
                facts.size(), static_cast<unsigned long long>(records));
    return 0;
  };
}

}  // namespace lockstep::tools
