// `lockstep export`: a trace as a timeline for the Perfetto UI, in Perfetto's protobuf format (a
// large trace stays loadable) or Chrome trace-event JSON; only the ranks and steps asked for, and
// never a file larger than the UI can open (--max-size).
#include <cstdio>
#include <filesystem>
#include <map>
#include <functional>
#include <set>

#include <fmt/format.h>

#include "common/settings.h"
#include "tools/commands/commands.h"
#include "tools/diff/compare.h"
#include "tools/export/sink.h"
#include "tools/why/names.h"
#include "tools/launch.h"
#include "tools/metric_value.h"
#include "tools/record_text.h"
#include "tools/run_set.h"
#include "tools/scope_text.h"
#include "tools/term.h"
#include "tools/wording.h"
#include "trace/field_format.h"
#include "trace/reader.h"

namespace lockstep::tools {

namespace {

// What the UI opens: ui.perfetto.dev loads a trace into the browser's memory; past about 1 GiB
// of protobuf or 256 MiB of JSON (parsed as text first) it runs out.
constexpr uint64_t kDefaultMaxProto = 1ull << 30, kDefaultMaxJson = 256ull << 20;
// The size is estimated before writing: the records chosen (step summaries) times the bytes per
// record of the first kSampleRecords of them, written to /dev/null (buffers per record, name
// lengths and interning vary too much between jobs for a constant), plus a tenth.
constexpr uint64_t kSampleRecords = 4096;

enum class Format { Json, Proto };

struct ExportRequest {
  std::string dir, out, against, format, steps, max_size;
  std::optional<int> rank;
  std::optional<uint32_t> around;
  bool salvage = false;
};

Format format_of(const ExportRequest& request) {
  if (request.format == "json") return Format::Json;
  if (request.format == "proto") return Format::Proto;
  if (!request.format.empty())
    throw InputError(fmt::format("--format: '{}' is not one of json|proto", request.format));
  return std::filesystem::path(request.out).extension() == ".json" ? Format::Json : Format::Proto;
}

// Records of [first, last] in the file, from the step summaries (exact per step), plus the
// records blocks past the last summarized step (a cut-off tail) by their headers.
uint64_t records_in(trace::TraceReader& reader, uint32_t first, uint32_t last) {
  uint64_t records = 0;
  int64_t summarized = -1;
  for (const trace::StepSummary& s : reader.step_summaries()) {
    summarized = s.step;
    if (s.step >= first && s.step <= last) records += s.record_count;
  }
  for (const trace::BlockInfo& b : reader.blocks())
    if (b.type == trace::BlockType::Records && static_cast<int64_t>(b.max_step) > summarized &&
        b.max_step >= first && b.min_step <= last)
      records += b.record_count;
  return records;
}

// The record's arguments in the UI: its place, its fields as `show` prints them, its buffers,
// its metric value or warning.
std::vector<exporting::Arg> record_args(const trace::Record& r, std::string_view name,
                                        trace::TraceReader& reader) {
  std::vector<exporting::Arg> args = {
      {"step", uint64_t{r.step}}, {"seq", r.seq}, {"thread", uint64_t{r.thread}}};
  if (const trace::RecordKindInfo* info = trace::find_record_kind(static_cast<uint8_t>(r.kind))) {
    const trace::FieldContext context{name, r.seq};
    for (size_t i = 0; i < info->field_names.size(); ++i) {
      const int field = static_cast<int>(i);
      if (!trace::field_shown(r.kind, field, r.fields[i])) continue;
      if (trace::field_format(r.kind, field).format == trace::Format::Decimal)
        args.push_back({std::string(info->field_names[i]), r.fields[i]});
      else
        args.push_back({std::string(info->field_names[i]),
                        trace::field_text(r.kind, field, r.fields[i], context)});
    }
  }
  for (const trace::BufferFingerprint& b : r.buffers)
    args.push_back({fmt::format("{} {}", b.role == trace::Role::In ? "in" : "out",
                                reader.string(b.label)),
                    fmt::format("{} ({} B)", fingerprint_text(b), b.bytes)});
  if (r.kind == trace::RecordKind::Metric)
    args.push_back({"value", format_metric_value(
                                 r.payload, r.fields[trace::fields::Metric::dtype_hint])});
  if (r.kind == trace::RecordKind::Warning) args.push_back({"warning", warning_sentence(r, name)});
  if (r.scope != 0) args.push_back({"scope", scope_text(reader.scope_path(r.scope))});
  return args;
}

using Marks = std::map<std::pair<int, uint64_t>, const Divergence*>;  // (rank, seq in DIR)

// The scopes open on each thread of a rank, as nested slices on the thread's scope track: a
// level opens at the first record made inside it and closes after the last (the file holds each
// thread's records in seq order), so a slice spans exactly the records made in it.
class ScopeSlices {
 public:
  ScopeSlices(int rank, trace::TraceReader& reader, exporting::Sink& sink)
      : rank_(rank), reader_(reader), sink_(sink) {}

  void record(const trace::Record& r) {
    Thread& t = threads_[r.thread];
    if (r.scope != t.scope) {
      const std::vector<std::string_view> path = reader_.scope_path(r.scope);
      size_t same = 0;
      while (same < path.size() && same < t.names.size() && path[same] == t.names[same]) ++same;
      close(r.thread, t, same);
      if (path.size() > same && !t.declared) sink_.scope_track(rank_, r.thread), t.declared = true;
      for (size_t i = same; i < path.size(); ++i) {
        t.names.emplace_back(path[i]);
        t.starts.push_back(r.seq);
      }
      t.scope = r.scope;
    }
    t.last_seq = r.seq;
  }

  void finish() {
    for (auto& [thread, t] : threads_) close(thread, t, 0);
  }

 private:
  struct Thread {
    trace::ScopeId scope = 0;
    std::vector<std::string> names;  // the open levels, outermost first
    std::vector<uint64_t> starts;    // the seq each opened at
    uint64_t last_seq = 0;
    bool declared = false;
  };

  // Closes the levels of `t` from the innermost down to `keep` levels, after its last record.
  void close(uint32_t thread, Thread& t, size_t keep) {
    while (t.names.size() > keep) {
      exporting::Event event;
      event.rank = rank_;
      event.scope_thread = thread;
      event.depth = static_cast<uint32_t>(t.names.size() - 1);
      event.seq = t.starts.back();
      event.length = t.last_seq + 1 - event.seq;
      event.name = t.names.back();
      event.category = "scope";
      sink_.event(event);
      t.names.pop_back();
      t.starts.pop_back();
    }
  }

  int rank_;
  trace::TraceReader& reader_;
  exporting::Sink& sink_;
  std::map<uint32_t, Thread> threads_;
};

// Writes the rank's records of [first, last] to the sink; `each` after every record returns
// false to stop. Returns the records written.
uint64_t export_rank(const RankFile& file, uint32_t first, uint32_t last, const Marks& marks,
                     exporting::Sink& sink, const std::function<bool()>& each) {
  std::unique_ptr<trace::TraceReader> reader = file.open();
  sink.rank(file.rank);
  std::set<uint32_t> streams;
  uint64_t written = 0;
  ScopeSlices scopes(file.rank, *reader, sink);
  reader->for_each_record(first, last, [&](const trace::Record& r) {
    if (r.kind == trace::RecordKind::StepSummary) return true;
    if (streams.insert(r.stream).second) sink.stream(file.rank, r.stream);
    scopes.record(r);
    const std::string_view name = reader->string(r.name);
    exporting::Event event;
    event.rank = file.rank;
    event.stream = r.stream;
    event.seq = r.seq;
    event.instant = r.kind == trace::RecordKind::StepMarker;
    event.category = std::string(trace::record_kind_name(r.kind));
    event.name = display_name(event.category, name);  // the full name in its arguments
    event.args = record_args(r, name, *reader);
    if (event.name != name) event.args.push_back({"full_name", std::string(name)});
    auto mark = marks.find({file.rank, r.seq});
    if (mark != marks.end()) {
      const Divergence& d = *mark->second;
      event.divergent = true;
      event.receiver = d.classification == Classification::Receiver;
      event.name = fmt::format("[{}] {}", classification_name(d.classification),
                               display_name(event.category, name));
      event.args.push_back({"divergence", d.detail});
    }
    sink.event(event);
    ++written;
    return each();
  });
  scopes.finish();
  return written;
}

std::unique_ptr<exporting::Sink> make_sink(Format format, FILE* out) {
  return format == Format::Proto ? exporting::proto_sink(out) : exporting::json_sink(out);
}

// Bytes per record of this export, from its first kSampleRecords records written to /dev/null.
double sampled_bytes_per_record(const std::vector<const RankFile*>& files, uint32_t first,
                                uint32_t last, const Marks& marks, Format format) {
  FILE* null = std::fopen("/dev/null", "wb");
  if (!null) return 0;
  std::unique_ptr<exporting::Sink> sink = make_sink(format, null);
  uint64_t sampled = 0;
  for (const RankFile* file : files) {
    sampled += export_rank(*file, first, last, marks, *sink,
                           [&] { return sampled + 1 < kSampleRecords; });
    if (sampled >= kSampleRecords) break;
  }
  std::fclose(null);
  return sampled ? static_cast<double>(sink->bytes()) / static_cast<double>(sampled) : 0;
}

}  // namespace

CommandRunner add_export_command(CLI::App& app) {
  auto request = std::make_shared<ExportRequest>();
  CLI::App* sub = app.add_subcommand(
      "export", "Write a trace as a timeline for the Perfetto UI (protobuf or trace-event JSON)");
  sub->add_option("DIR", request->dir, "Trace directory (or one .lstrace file)")->required();
  sub->add_option("--perfetto,-o", request->out,
                  "Output file: .json writes trace-event JSON, any other name Perfetto's "
                  "protobuf trace (.pftrace)")
      ->required();
  sub->add_option("--format", request->format, "json or proto (default: by the output's name)");
  sub->add_option("--rank", request->rank, "Only this rank");
  sub->add_flag_callback(
      "--verbose", [] { set_full_names(true); },
      "Full kernel names in the text (template arguments, lambdas), not the shortened ones");
  sub->add_option("--steps", request->steps, "Only steps A-B (A, A-, A-B)");
  sub->add_option("--around-divergence", request->around,
                  "Only the N steps before and after the first divergence (needs --against)");
  sub->add_option("--against", request->against,
                  "Another run of the same job: divergent ops are marked (diff of DIR vs it)");
  sub->add_option("--max-size", request->max_size,
                  "Refuse to write more than this (K/M/G suffixes; default 1G for protobuf, 256M "
                  "for JSON: what ui.perfetto.dev opens)");
  sub->add_flag("--salvage", request->salvage,
                "Export the valid prefix of a file with a corrupt block (else exit 2)");
  sub->footer(R"(One process per rank, one track per stream; each record a slice with its fields,
buffers (fingerprints), metric value, warning and scope as arguments; and per thread that opened
ranges (NVTX push/pop, lockstep_scope_push, a PyTorch module's forward and backward under
`lockstep run`) a track "thread N scopes" of nested slices, each spanning the records made in it.
Records carry no clock, so the time axis is the op's sequence number (1 us per op). With
--against, the diff's first divergence of each rank and its structural divergences are marked: "[origin]", "[receiver]", "[structural]" before
the name (and, in JSON, red). The size is estimated from the records chosen before anything is
written; over --max-size the export is refused (exit 2): choose a rank, steps or the steps
around the divergence. On a terminal a progress line counts the records.
Open the file at https://ui.perfetto.dev.

Examples:
  lockstep export runs/a -o a.pftrace
  lockstep export runs/a -o a.pftrace --rank 3 --steps 100-120
  lockstep export runs/a -o a.pftrace --against runs/b --around-divergence 2
  lockstep export runs/a -o a.json --rank 0 --steps 5     # JSON, for chrome://tracing too)");
  return [request] {
    const Format format = format_of(*request);
    uint32_t first = 0, last = UINT32_MAX;
    if (!request->steps.empty()) parse_step_range(request->steps, "--steps", first, last);
    if (request->around && request->against.empty())
      throw InputError("--around-divergence needs --against (the run to diff against)");
    if (request->around && !request->steps.empty())
      throw InputError("--around-divergence and --steps both choose steps: give one");
    uint64_t max_size = format == Format::Proto ? kDefaultMaxProto : kDefaultMaxJson;
    if (!request->max_size.empty()) {
      auto parsed = settings::parse_byte_size(request->max_size);
      if (!parsed || *parsed == 0)
        throw InputError(fmt::format("--max-size: '{}' is not a size (1G, 512M, 100000)",
                                     request->max_size));
      max_size = *parsed;
    }

    Marks marks;
    DiffResult diff;
    if (!request->against.empty()) {
      DiffRequest d;
      d.a = request->dir;
      d.b = request->against;
      d.print = false;
      d.salvage = request->salvage;
      if (request->rank) d.rank = request->rank;
      run_diff(d, &diff);
      for (const Divergence& x : diff.structural)
        if (x.seq_a) marks[{x.rank, x.seq_a}] = &x;
      for (const Divergence& x : diff.first_by_epoch)
        if (x.seq_a) marks[{x.rank, x.seq_a}] = &x;
    }
    if (request->around) {
      std::optional<uint32_t> at;
      for (const Divergence& x : diff.first_by_epoch) at = std::min(at.value_or(x.step), x.step);
      if (diff.metric) at = std::min(at.value_or(diff.metric->step), diff.metric->step);
      if (!at)
        throw InputError(fmt::format("--around-divergence: {} and {} do not diverge ({})",
                                     request->dir, request->against,
                                     verdict_name(verdict_of(diff))));
      first = *at > *request->around ? *at - *request->around : 0;
      last = *at + std::min<uint64_t>(*request->around, UINT32_MAX - *at);
    }

    OpenOptions open_options;
    open_options.salvage = request->salvage;
    RunSet run = open_run_set(request->dir, open_options);
    for (const std::string& w : run.warnings) warn(w);
    if (request->rank && !run.find(*request->rank))
      throw InputError(fmt::format("{}: no trace file for rank {}", request->dir, *request->rank));
    std::vector<const RankFile*> files;
    uint64_t records = 0;
    for (const RankFile& file : run.files) {
      if (request->rank && file.rank != *request->rank) continue;
      files.push_back(&file);
      records += records_in(*file.open(), first, last);
    }
    const uint64_t estimate = static_cast<uint64_t>(
        1.1 * sampled_bytes_per_record(files, first, last, marks, format) * records);
    const std::string narrow =
        "choose fewer with --rank, --steps or --around-divergence, or raise --max-size";
    if (estimate > max_size)
      throw InputError(fmt::format("{}: {} would make about {}, over the {} limit; {}",
                                   request->out, count_of(records, "record", "records"),
                                   binary_size(estimate), binary_size(max_size), narrow));

    FILE* out = std::fopen(request->out.c_str(), "wb");
    if (!out) throw InputError(request->out + ": cannot write");
    std::unique_ptr<exporting::Sink> sink = make_sink(format, out);
    auto fail = [&](const std::string& why) {
      std::fclose(out);
      std::error_code ec;
      std::filesystem::remove(request->out, ec);  // never leave half a trace behind
      throw InputError(why);
    };
    Progress progress("export: records");
    uint64_t events = 0;
    for (const RankFile* file : files) {
      if (file->salvaged) warn(file->integrity.corruption + "; exporting the prefix before it");
      export_rank(*file, first, last, marks, *sink, [&] {
        if (++events % 4096 != 0) return true;
        progress.update(static_cast<long>(events), static_cast<long>(records));
        if (sink->bytes() > max_size)
          fail(fmt::format("{}: passed the {} limit after {} records (the estimate was {}); {}",
                           request->out, binary_size(max_size), events, binary_size(estimate),
                           narrow));
        return true;
      });
    }
    sink->finish();
    progress.clear();
    if (sink->bytes() > max_size)
      fail(fmt::format("{}: {} is over the {} limit; {}", request->out,
                       binary_size(sink->bytes()), binary_size(max_size), narrow));
    if (std::fclose(out) != 0) throw InputError(request->out + ": write failed");
    std::string steps = first == 0 && last == UINT32_MAX
                            ? std::string()
                            : fmt::format(", steps {}-{}", first,
                                          last == UINT32_MAX ? std::string("end")
                                                             : std::to_string(last));
    std::fprintf(stderr, "lockstep: wrote %s of %s%s to %s (%s, %s)%s\n",
                 count_of(events, "event", "events").c_str(),
                 count_of(files.size(), "rank", "ranks").c_str(), steps.c_str(),
                 request->out.c_str(), format == Format::Proto ? "Perfetto protobuf" : "JSON",
                 binary_size(sink->bytes()).c_str(),
                 request->against.empty()
                     ? ""
                     : fmt::format("; {} marked", count_of(marks.size(), "divergent op",
                                                           "divergent ops"))
                           .c_str());
    return 0;
  };
}

}  // namespace lockstep::tools
