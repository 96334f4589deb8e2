#include <algorithm>
#include <cstdio>
#include <tuple>

#include <fmt/format.h>

#include "tools/commands/commands.h"
#include "tools/facts.h"
#include "tools/run_set.h"
#include "tools/wording.h"
#include "trace/field_format.h"

namespace lockstep::tools {

namespace {

// One line per kind of warning: counts of the same (source, code) summed over records and ranks;
// a warning whose count is a detail (the rank NCCL gave) once per distinct text.
std::vector<std::string> warning_lines(const std::vector<RankFacts>& facts) {
  struct Group {
    uint64_t count = 0;
    std::string detail;
    size_t ranks = 0;
  };
  std::vector<std::pair<std::tuple<trace::WarningSource, uint64_t, std::string>, Group>> groups;
  auto group = [&](const std::tuple<trace::WarningSource, uint64_t, std::string>& key) -> Group& {
    for (auto& [k, g] : groups)
      if (k == key) return g;
    return groups.emplace_back(key, Group{}).second;
  };
  for (const RankFacts& f : facts)
    for (const RankFacts::Warning& w : f.warnings) {
      const trace::WarningInfo* info = trace::find_warning(w.source, w.code);
      const bool summed = info && info->summed;
      Group& g = group({w.source, w.code, summed ? std::string() : w.detail});
      g.count += w.count;
      g.detail = w.detail;
      ++g.ranks;
    }
  std::vector<std::string> lines;
  for (auto& [key, g] : groups) {
    std::string line = trace::warning_text(std::get<0>(key), std::get<1>(key), g.count, g.detail);
    if (g.ranks > 1 && !std::get<2>(key).empty())
      line += fmt::format(" (in {} files)", g.ranks);
    lines.push_back(line + ".");
  }
  return lines;
}

}  // namespace

std::string stats_report(const std::string& dir_path, int top_n, bool salvage) {
  OpenOptions open_options;
  open_options.salvage = salvage;
  RunSet run = open_run_set(dir_path, open_options);
  for (const std::string& w : run.warnings) warn(w);
  std::vector<RankFacts> facts = scan_run(run, ScanOptions{});
  // A block that passed its checksum but does not decode: counts after it would be wrong.
  for (const RankFacts& f : facts)
    if (!f.corruption.empty()) throw InputError(f.corruption);
  std::map<std::string, uint64_t> by_kind, kernels;
  uint64_t records = 0, bytes = 0, file_bytes = 0, buffers = 0, fingerprinted = 0, dropped = 0,
           fingerprints_dropped = 0;
  uint32_t first_step = UINT32_MAX, last_step = 0;
  size_t max_steps = 0;
  for (const RankFacts& f : facts) {
    records += f.records;
    bytes += f.bytes_fingerprinted;
    file_bytes += f.file_bytes;
    buffers += f.buffers;
    fingerprinted += f.buffers_fingerprinted;
    dropped += f.dropped_records;
    fingerprints_dropped += f.fingerprints_dropped;
    for (auto& [k, n] : f.by_kind) by_kind[k] += n;
    for (auto& [k, n] : f.kernels) kernels[k] += n;
    if (!f.record_steps.empty()) {
      first_step = std::min(first_step, f.record_steps.front());
      last_step = std::max(last_step, f.record_steps.back());
    }
    max_steps = std::max(max_steps, f.record_steps.size());
  }
  // Two aligned columns: what, then the figures. Sections (by kind, warnings, kernels) indent
  // their rows under a heading.
  std::string out;
  auto row = [&](std::string_view what, const std::string& text) {
    out += fmt::format("{:<10} {}\n", what, text);
  };
  row("trace", dir_path);
  std::string ranks = fmt::format("{} of world size {}", count_of(run.files.size(), "rank", "ranks"),
                                  run.world_size);
  if (!run.missing_ranks.empty()) {
    std::string missing;
    for (size_t i = 0; i < run.missing_ranks.size() && i < 8; ++i)
      missing += fmt::format("{}{}", i ? ", " : "", run.missing_ranks[i]);
    if (run.missing_ranks.size() > 8) missing += ", ...";
    ranks += fmt::format(" ({} missing: {})", run.missing_ranks.size(), missing);
  }
  row("ranks", ranks);
  row("steps", max_steps ? fmt::format("{} ({}-{})", max_steps, first_step, last_step)
                         : std::string("none"));
  row("records", fmt::format("{} in {} on disk ({:.1f} bytes per record)", records,
                             binary_size(file_bytes),
                             records ? static_cast<double>(file_bytes) / records : 0.0));
  row("buffers", fmt::format("{}, {} fingerprinted ({} hashed)", buffers, fingerprinted,
                             binary_size(bytes)));
  row("dropped", dropped || fingerprints_dropped
                     ? fmt::format("{}, {} without a fingerprint",
                                   count_of(dropped, "record", "records"),
                                   count_of(fingerprints_dropped, "buffer", "buffers"))
                     : std::string("nothing"));
  const std::vector<std::string> warnings = warning_lines(facts);
  row("warnings", warnings.empty() ? std::string("none") : std::to_string(warnings.size()));

  std::vector<std::pair<std::string, uint64_t>> kinds(by_kind.begin(), by_kind.end());
  auto by_count = [](const auto& x, const auto& y) {
    return x.second > y.second || (x.second == y.second && x.first < y.first);
  };
  std::sort(kinds.begin(), kinds.end(), by_count);
  out += "\nrecords by kind\n";
  for (auto& [k, n] : kinds) out += fmt::format("  {:<14} {:>12}\n", k, n);
  if (!warnings.empty()) {
    out += "\nwarnings\n";
    for (const std::string& w : warnings) out += "  " + w + "\n";
  }
  std::vector<std::pair<std::string, uint64_t>> ranked(kernels.begin(), kernels.end());
  std::sort(ranked.begin(), ranked.end(), by_count);
  out += fmt::format("\ntop kernels and GEMMs by launches ({} distinct)\n", ranked.size());
  for (size_t i = 0; i < ranked.size() && i < static_cast<size_t>(top_n); ++i)
    out += fmt::format("  {:>12}  {}\n", ranked[i].second, ranked[i].first);
  std::string files;
  for (const RankFacts& f : facts)
    if (f.truncated) files += fmt::format("cut off: {} at offset {}\n", f.path, f.truncation_offset);
  for (const RankFile& f : run.files) {
    if (f.salvaged)
      files += fmt::format("salvaged: {}; only the prefix before it is counted\n",
                           f.integrity.corruption);
    else if (!f.integrity.end_block && !f.integrity.truncated)
      files += fmt::format("unfinished: {} has no end record (the writer did not finish)\n", f.path);
  }
  if (!files.empty()) out += "\n" + files;
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
  sub->add_option("--top", *top, "How many kernels and GEMMs to list (most launched first)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--salvage", *salvage,
                "Count the valid prefix of a file with a corrupt block (else exit 2)");
  sub->footer(
      "Ranks, steps, records and their size on disk, buffers fingerprinted, what was dropped,\n"
      "the trace's warnings as sentences (the same warning summed over records and ranks), the\n"
      "records by kind and the most launched kernels and GEMMs. Files cut off, salvaged or\n"
      "without their end record are named last.\n"
      "Exit status: 0 done, 2 invalid input or a corrupt block.\n\n"
      "Examples:\n  lockstep stats runs/a\n  lockstep stats runs/a --top 30");
  return [dir, top, salvage] {
    std::fputs(stats_report(*dir, *top, *salvage).c_str(), stdout);
    return 0;
  };
}

}  // namespace lockstep::tools
