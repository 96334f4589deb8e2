#include <cstdio>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tools/commands/commands.h"
#include "tools/diff/compare.h"
#include "tools/run_set.h"
#include "trace/reader.h"

namespace lockstep::tools {

namespace {

struct ExportRequest {
  std::string dir, perfetto, against;
  bool salvage = false;
};

}  // namespace

CommandRunner add_export_command(CLI::App& app) {
  auto request = std::make_shared<ExportRequest>();
  CLI::App* sub =
      app.add_subcommand("export", "Write a trace as Chrome trace-event JSON for the Perfetto UI");
  sub->add_option("DIR", request->dir, "Trace directory (or one .lstrace file)")->required();
  sub->add_option("--perfetto", request->perfetto, "Output JSON file")->required();
  sub->add_option("--against", request->against,
                  "Another run of the same job: divergent ops are marked (diff of DIR vs it)");
  sub->add_flag("--salvage", request->salvage,
                "Export the valid prefix of a file with a corrupt block (else exit 2)");
  sub->footer(R"(One process per rank, one thread track per stream. Records carry no clock, so the
time axis is the op's sequence number (1 us per op). Open the file at https://ui.perfetto.dev.

Examples:
  lockstep export runs/a --perfetto a.json
  lockstep export runs/a --perfetto a.json --against runs/b)");
  return [request] {
    std::map<std::pair<int, uint64_t>, const Divergence*> marks;  // (rank, seq in DIR)
    DiffResult diff;
    if (!request->against.empty()) {
      DiffRequest d;
      d.a = request->dir;
      d.b = request->against;
      d.print = false;
      d.salvage = request->salvage;
      run_diff(d, &diff);
      for (const Divergence& x : diff.structural)
        if (x.seq_a) marks[{x.rank, x.seq_a}] = &x;
      for (const Divergence& x : diff.first_by_epoch)
        if (x.seq_a) marks[{x.rank, x.seq_a}] = &x;
    }
    OpenOptions open_options;
    open_options.salvage = request->salvage;
    RunSet run = open_run_set(request->dir, open_options);
    for (const std::string& w : run.warnings) warn(w);
    FILE* out = std::fopen(request->perfetto.c_str(), "w");
    if (!out) throw InputError(request->perfetto + ": cannot write");
    std::string sep = "\n";
    auto emit = [&](const nlohmann::json& event) {
      std::string text = sep + event.dump();
      std::fwrite(text.data(), 1, text.size(), out);
      sep = ",\n";
    };
    std::fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", out);
    uint64_t events = 0;
    for (const RankFile& file : run.files) {
      std::unique_ptr<trace::TraceReader> reader = file.open();
      if (file.salvaged) warn(file.integrity.corruption + "; exporting the prefix before it");
      emit({{"ph", "M"},
            {"pid", file.rank},
            {"name", "process_name"},
            {"args", {{"name", fmt::format("rank {}", file.rank)}}}});
      emit({{"ph", "M"},
            {"pid", file.rank},
            {"name", "process_sort_index"},
            {"args", {{"sort_index", file.rank}}}});
      std::set<uint32_t> streams;
      reader->for_each_record([&](const trace::Record& r) {
        if (r.kind == trace::RecordKind::StepSummary) return true;
        if (streams.insert(r.stream).second)
          emit({{"ph", "M"},
                {"pid", file.rank},
                {"tid", r.stream},
                {"name", "thread_name"},
                {"args",
                 {{"name",
                   r.stream ? fmt::format("stream {}", r.stream) : std::string("no stream")}}}});
        std::string name(reader->string(r.name));
        nlohmann::json args = {{"step", r.step}, {"seq", r.seq}, {"thread", r.thread}};
        for (size_t i = 0; i < r.buffers.size(); ++i) {
          const trace::BufferFingerprint& b = r.buffers[i];
          args[fmt::format("{} {}", b.role == trace::Role::In ? "in" : "out",
                           reader->string(b.label))] =
              (b.flags & trace::kLearnedReadOnly)
                  ? fmt::format("{:016x} read-only ({} B)", b.fingerprint, b.bytes)
              : (b.flags & trace::kFingerprintRecalled)
                  ? fmt::format("{:016x} recalled ({} B)", b.fingerprint, b.bytes)
              : (b.flags & trace::kDigestOfEnclosing)
                  ? fmt::format("{:016x} enclosing region at +{} ({} B)", b.fingerprint,
                                b.alloc_offset, b.bytes)
              : (b.flags & trace::kFingerprintValid)
                  ? fmt::format("{:016x} ({} B)", b.fingerprint, b.bytes)
              : (b.flags & trace::kNotWrittenSinceAlloc) ? fmt::format("unwritten ({} B)", b.bytes)
                                                         : std::string("-");
        }
        nlohmann::json event = {{"ph", r.kind == trace::RecordKind::StepMarker ? "i" : "X"},
                                {"pid", file.rank},
                                {"tid", r.stream},
                                {"ts", r.seq},
                                {"name", name},
                                {"cat", std::string(trace::record_kind_name(r.kind))},
                                {"args", std::move(args)}};
        if (r.kind == trace::RecordKind::StepMarker)
          event["s"] = "p";
        else
          event["dur"] = 1;
        auto mark = marks.find({file.rank, r.seq});
        if (mark != marks.end()) {
          const Divergence& d = *mark->second;
          event["cname"] = d.classification == Classification::Receiver ? "bad" : "terrible";
          event["name"] = fmt::format("[{}] {}", classification_name(d.classification), name);
          event["args"]["divergence"] = d.detail;
        }
        emit(event);
        ++events;
        return true;
      });
    }
    std::fputs("\n]}\n", out);
    bool ok = std::fclose(out) == 0;
    if (!ok) throw InputError(request->perfetto + ": write failed");
    std::fprintf(
        stderr, "lockstep: wrote %llu events of %zu ranks to %s%s\n",
        static_cast<unsigned long long>(events), run.files.size(), request->perfetto.c_str(),
        request->against.empty() ? ""
                                 : fmt::format(" ({} divergent ops marked)", marks.size()).c_str());
    return 0;
  };
}

}  // namespace lockstep::tools
