#include <cstdio>
#include <regex>

#include <fmt/format.h>

#include "tools/commands/commands.h"
#include "tools/metric_value.h"
#include "tools/run_set.h"
#include "trace/reader.h"

namespace lockstep::tools {

namespace {

struct ShowRequest {
  std::string dir;
  std::optional<int> rank;
  std::optional<uint32_t> step;
  std::string grep;
  uint64_t limit = 0;
  bool salvage = false;
};

std::string record_line(int rank, const trace::Record& r, trace::TraceReader& reader) {
  std::string line =
      fmt::format("r{} step {} seq {} stream {} thread {} {} {}", rank, r.step, r.seq, r.stream,
                  r.thread, trace::record_kind_name(r.kind), reader.string(r.name));
  const trace::RecordKindInfo* info = trace::find_record_kind(static_cast<uint8_t>(r.kind));
  if (info)
    for (size_t i = 0; i < info->field_names.size(); ++i)
      if (r.fields[i] != 0) line += fmt::format(" {}={}", info->field_names[i], r.fields[i]);
  for (const trace::BufferFingerprint& b : r.buffers) {
    line += fmt::format(" | {} {} {} {}B ", b.role == trace::Role::In ? "in" : "out",
                        reader.string(b.label), trace::dtype_name(b.dtype), b.bytes);
    if (b.flags & trace::kFingerprintValid)
      line += fmt::format("{:016x}", b.fingerprint);
    else if (b.flags & trace::kFingerprintDropped)
      line += "dropped";
    else
      line += (b.flags & trace::kNotWrittenSinceAlloc) ? "unwritten" : "-";
    if (b.flags & trace::kExtentClamped) line += " clamped";
    if (b.flags & trace::kLearnedReadOnly) line += " read-only";
    if (b.flags & trace::kFingerprintRecalled) line += " recalled";
    if (b.flags & trace::kDigestOfEnclosing) line += " enclosing";
    if (b.alloc_ordinal != 0) line += fmt::format(" @{}+{}", b.alloc_ordinal, b.alloc_offset);
  }
  if (!r.payload.empty())
    line += " | payload " +
            format_metric_value(r.payload, r.kind == trace::RecordKind::Metric
                                               ? r.fields[trace::fields::Metric::dtype_hint]
                                               : 0);
  return line;
}

}  // namespace

CommandRunner add_show_command(CLI::App& app) {
  auto request = std::make_shared<ShowRequest>();
  CLI::App* sub = app.add_subcommand("show", "Print a trace's records, one line each");
  sub->add_option("DIR", request->dir, "Trace directory (or one .lstrace file)")->required();
  sub->add_option("--rank", request->rank, "Only this rank");
  sub->add_option("--step", request->step, "Only this step");
  sub->add_option("--grep", request->grep, "Only records whose name matches this regex");
  sub->add_option("--limit", request->limit, "Stop after this many lines per rank (0: no limit)");
  sub->add_flag("--salvage", request->salvage,
                "Show the valid prefix of a file with a corrupt block (else exit 2)");
  sub->footer(R"(Examples:
  lockstep show runs/a --rank 0 --step 3
  lockstep show runs/a --grep 'ncclAllReduce|gemm' --limit 20)");
  return [request] {
    std::optional<std::regex> pattern;
    if (!request->grep.empty()) {
      try {
        pattern.emplace(request->grep, std::regex::ECMAScript | std::regex::optimize);
      } catch (const std::regex_error& e) {
        throw InputError(
            fmt::format("--grep: '{}' is not a valid regex: {}", request->grep, e.what()));
      }
    }
    OpenOptions open_options;
    open_options.salvage = request->salvage;
    RunSet run = open_run_set(request->dir, open_options);
    for (const std::string& w : run.warnings) warn(w);
    if (request->rank && !run.find(*request->rank))
      throw InputError(fmt::format("{}: no trace file for rank {}", request->dir, *request->rank));
    for (const RankFile& file : run.files) {
      if (request->rank && file.rank != *request->rank) continue;
      std::unique_ptr<trace::TraceReader> reader = file.open();
      if (file.salvaged) warn(file.integrity.corruption + "; showing the prefix before it");
      uint32_t first = request->step.value_or(0), last = request->step.value_or(UINT32_MAX);
      uint64_t shown = 0;
      std::string out;
      reader->for_each_record(first, last, [&](const trace::Record& r) {
        if (r.step < first || r.step > last) return true;
        if (pattern && !std::regex_search(std::string(reader->string(r.name)), *pattern))
          return true;
        out = record_line(file.rank, r, *reader);
        out += '\n';
        std::fputs(out.c_str(), stdout);
        return request->limit == 0 || ++shown < request->limit;
      });
      if (reader->truncated())
        warn(fmt::format("{}: cut off at offset {}; showing the valid prefix", file.path,
                         reader->truncation_offset()));
    }
    return 0;
  };
}

}  // namespace lockstep::tools
