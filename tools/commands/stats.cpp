#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "tools/commands/commands.h"
#include "tools/facts.h"
#include "tools/run_set.h"

namespace lockstep::tools {

std::string stats_report(const std::string& dir_path, int top_n, bool salvage) {
  OpenOptions open_options;
  open_options.salvage = salvage;
  RunSet run = open_run_set(dir_path, open_options);
  for (const std::string& w : run.warnings) warn(w);
  std::vector<RankFacts> facts = scan_run(run, ScanOptions{});
  // A block that passed its checksum but does not decode: counts after it would be wrong.
  for (const RankFacts& f : facts)
    if (!f.corruption.empty()) throw InputError(f.corruption);
  std::map<std::string, uint64_t> by_kind, kernels, warnings;
  uint64_t records = 0, bytes = 0, file_bytes = 0, buffers = 0, fingerprinted = 0, dropped = 0;
  uint32_t first_step = UINT32_MAX, last_step = 0;
  size_t max_steps = 0;
  for (const RankFacts& f : facts) {
    records += f.records;
    bytes += f.bytes_fingerprinted;
    file_bytes += f.file_bytes;
    buffers += f.buffers;
    fingerprinted += f.buffers_fingerprinted;
    dropped += f.dropped_records;
    for (auto& [k, n] : f.by_kind) by_kind[k] += n;
    for (auto& [k, n] : f.kernels) kernels[k] += n;
    for (auto& [k, n] : f.warnings) warnings[k] += n;
    if (!f.record_steps.empty()) {
      first_step = std::min(first_step, f.record_steps.front());
      last_step = std::max(last_step, f.record_steps.back());
    }
    max_steps = std::max(max_steps, f.record_steps.size());
  }
  std::string out;
  out += fmt::format("trace: {}\n", dir_path);
  out += fmt::format(
      "ranks: {} of world size {}{}\n", run.files.size(), run.world_size,
      run.missing_ranks.empty() ? "" : fmt::format(" ({} missing)", run.missing_ranks.size()));
  out += max_steps ? fmt::format("steps: {} ({}-{})\n", max_steps, first_step, last_step)
                   : std::string("steps: none\n");
  out += fmt::format("records: {} ({} bytes on disk, {:.1f} bytes/record)\n", records, file_bytes,
                     records ? static_cast<double>(file_bytes) / records : 0.0);
  out += "records by kind:\n";
  for (auto& [k, n] : by_kind) out += fmt::format("  {:<14} {:>12}\n", k, n);
  out += fmt::format("buffers: {} ({} fingerprinted, {} bytes fingerprinted)\n", buffers,
                     fingerprinted, bytes);
  out += fmt::format("dropped records: {}\n", dropped);
  out += fmt::format("warnings: {}\n", warnings.size());
  for (auto& [k, n] : warnings) out += fmt::format("  {:>10}  {}\n", n, k);
  std::vector<std::pair<std::string, uint64_t>> ranked(kernels.begin(), kernels.end());
  std::sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) {
    return x.second > y.second || (x.second == y.second && x.first < y.first);
  });
  out += fmt::format("top kernels and GEMMs ({} distinct):\n", ranked.size());
  for (size_t i = 0; i < ranked.size() && i < static_cast<size_t>(top_n); ++i)
    out += fmt::format("  {:>10}  {}\n", ranked[i].second, ranked[i].first);
  for (const RankFacts& f : facts)
    if (f.truncated) out += fmt::format("cut off: {} at offset {}\n", f.path, f.truncation_offset);
  for (const RankFile& f : run.files) {
    if (f.salvaged)
      out += fmt::format("salvaged: {}; only the prefix before it is counted\n",
                         f.integrity.corruption);
    else if (!f.integrity.end_block && !f.integrity.truncated)
      out += fmt::format("unfinished: {} has no end record (the writer did not finish)\n", f.path);
  }
  return out;
}

CommandRunner add_stats_command(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto top = std::make_shared<int>(10);
  auto salvage = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("stats",
                                     "Summarize a trace: records by kind, top kernels, "
                                     "bytes fingerprinted, dropped records, steps, ranks");
  sub->add_option("DIR", *dir, "Trace directory (or one .lstrace file)")->required();
  sub->add_option("--top", *top, "How many kernels to list")->capture_default_str();
  sub->add_flag("--salvage", *salvage,
                "Count the valid prefix of a file with a corrupt block (else exit 2)");
  sub->footer(
      "Exit status: 0 done, 2 invalid input or a corrupt block.\n\n"
      "Example:\n  lockstep stats runs/a");
  return [dir, top, salvage] {
    std::fputs(stats_report(*dir, *top, *salvage).c_str(), stdout);
    return 0;
  };
}

}  // namespace lockstep::tools
