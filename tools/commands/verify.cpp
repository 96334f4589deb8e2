#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "tools/commands/commands.h"
#include "tools/facts.h"
#include "tools/integrity.h"
#include "tools/run_set.h"
#include "tools/wording.h"

namespace lockstep::tools {

int run_verify(const std::string& dir, bool print) {
  OpenOptions open_options;
  open_options.corrupt_is_error = false;  // reported below with every other problem
  RunSet run = open_run_set(dir, open_options);
  if (print)
    for (const std::string& w : run.warnings) warn(w);
  std::vector<RankFacts> facts = scan_run(run, ScanOptions{true, true});
  std::vector<std::string> problems;
  if (!run.missing_ranks.empty())
    problems.push_back(fmt::format(
        "{}: {} rank{} of world size {} {} no trace file (first: "
        "rank {})",
        dir, run.missing_ranks.size(), run.missing_ranks.size() == 1 ? "" : "s", run.world_size,
        run.missing_ranks.size() == 1 ? "has" : "have", run.missing_ranks.front()));
  uint64_t records = 0;
  uint32_t last_step_min = UINT32_MAX, last_step_max = 0;
  std::string out;
  for (size_t i = 0; i < facts.size(); ++i) {
    const RankFacts& f = facts[i];
    const RankFile& file = run.files[i];
    records += f.records;
    std::vector<std::string> mine;
    std::optional<trace::TraceEnd> end;
    if (file.integrity.corrupt_offset || !f.corruption.empty()) {
      mine.push_back(file.integrity.corrupt_offset ? file.integrity.corruption : f.corruption);
    } else {
      std::unique_ptr<trace::TraceReader> reader = file.open();
      end = end_of(*reader);
      bool cut = f.truncated || file.integrity.truncated;
      if (cut || !end || !file.integrity.whole()) {
        // What a killed job left: never complete, at best a readable prefix.
        int64_t through = last_complete_step(*reader);
        std::string prefix = through < 0 ? std::string("no complete step")
                                         : fmt::format("readable prefix up to step {}", through);
        mine.push_back(
            cut ? fmt::format("{}: cut off at offset {} (the writer did not finish): {}", f.path,
                              file.integrity.truncated ? file.integrity.truncation_offset
                                                       : f.truncation_offset,
                              prefix)
                : fmt::format("{}: no end record (the writer did not finish): {}", f.path, prefix));
      }
    }
    // Counts that must agree in a file written whole: what its end record and its step summaries
    // say against the records present (a block lost, added or rewritten, its checksum valid).
    if (end && end->records != f.records)
      mine.push_back(fmt::format("{}: {} present, its end record says {}", f.path,
                                 count_of(f.records, "record", "records"), end->records));
    if (f.steps_miscounted)
      mine.push_back(fmt::format("{}: {} step{} whose records are not as many as {} (first: {})",
                                 f.path, f.steps_miscounted, f.steps_miscounted == 1 ? "" : "s",
                                 f.steps_miscounted == 1 ? "its summary says"
                                                         : "their summaries say",
                                 f.first_miscount));
    uint64_t dropped = std::max(f.dropped_records, end ? end->dropped : 0);
    if (dropped)
      mine.push_back(fmt::format("{}: {} record{} dropped by the writer", f.path, dropped,
                                 dropped == 1 ? "" : "s"));
    if (f.fingerprints_dropped)
      mine.push_back(fmt::format("{}: {} buffer{} recorded without {} fingerprint (hash ring full)",
                                 f.path, f.fingerprints_dropped,
                                 f.fingerprints_dropped == 1 ? "" : "s",
                                 f.fingerprints_dropped == 1 ? "its" : "their"));
    if (end && end->write_errors)
      mine.push_back(fmt::format("{}: {} failed writes", f.path, end->write_errors));
    if (end && !end->clean)
      mine.push_back(fmt::format("{}: the writer did not finish cleanly{}", f.path,
                                 end->reason.empty() ? "" : " (" + end->reason + ")"));
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
    out += fmt::format("{:<4} rank {}  {}  {}, {}\n", mine.empty() ? "ok" : "BAD", f.rank, f.path,
                       count_of(f.records, "record", "records"),
                       count_of(f.record_steps.size(), "step", "steps"));
    problems.insert(problems.end(), mine.begin(), mine.end());
  }
  if (last_step_min != UINT32_MAX && last_step_min != last_step_max)
    problems.push_back(fmt::format("{}: ranks end at different steps ({} to {})", dir,
                                   last_step_min, last_step_max));
  if (!problems.empty()) {
    out += fmt::format("NOT CERTIFIED: {} problem{}\n", problems.size(),
                       problems.size() == 1 ? "" : "s");
  } else {
    out += fmt::format(
        "CERTIFIED COMPLETE: {}, {}, every file finished by its "
        "writer, nothing dropped, cut off or corrupt\n",
        count_of(facts.size(), "rank", "ranks"), count_of(records, "record", "records"));
  }
  if (print) {
    for (const std::string& p : problems) std::fprintf(stderr, "lockstep: %s\n", p.c_str());
    std::fputs(out.c_str(), stdout);
  }
  return problems.empty() ? 0 : kExitInvalid;
}

CommandRunner add_verify_command(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "verify", "Check every file's integrity and certify that the trace is complete");
  sub->add_option("DIR", *dir, "Trace directory (or one .lstrace file)")->required();
  sub->footer(R"(Certified complete means: every rank of the world size has a file, every file ends
with its writer's end record, every block's checksum holds, no file is cut off, no record was
dropped, every step with records has its summary, the records present are as many as the end
record and each step's summary say, and all ranks reached the same last step. A
file without its end record (a killed job) is at best "readable prefix up to step N".
Exit status: 0 certified, 2 otherwise (each problem on its own line).

Example:
  lockstep verify runs/a && lockstep diff runs/a runs/b)");
  return [dir] { return run_verify(*dir, true); };
}

}  // namespace lockstep::tools
