// A run directory and its records for Python: tools::open_run_set (the checks every command
// makes: integrity, one run, ranks) and trace::TraceReader (the decoding), nothing else.
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "python/src/core.h"
#include "tools/integrity.h"
#include "tools/metric_value.h"
#include "tools/run_set.h"
#include "trace/reader.h"
#include "trace/record.h"

namespace lockstep::python {
namespace {

// One fingerprinted buffer of a record, its string ids resolved.
struct Buffer {
  std::string role;   // "in" | "out"
  std::string label;  // "A", "send", "arg3", ...
  std::string dtype;
  uint64_t bytes = 0;
  std::optional<uint64_t> fingerprint;  // none: not hashed (dropped, unwritten)
  uint8_t flags = 0;                    // trace::BufferFlags
  uint32_t alloc_ordinal = 0;
  uint64_t alloc_offset = 0;
};

// The names of trace::BufferFlags as Python sees them (Buffer.flag_names); `show` prints the
// same words.
const std::pair<uint8_t, const char*> kFlagNames[] = {
    {trace::kFingerprintDropped, "dropped"},  {trace::kExtentClamped, "clamped"},
    {trace::kExtentExact, "exact"},           {trace::kNotWrittenSinceAlloc, "unwritten"},
    {trace::kLearnedReadOnly, "read-only"},   {trace::kFingerprintRecalled, "recalled"},
    {trace::kDigestOfEnclosing, "enclosing"},
};

struct Record {
  int rank = 0;
  uint64_t seq = 0;
  uint32_t step = 0, stream = 0, thread = 0;
  std::string kind, name;
  std::vector<std::string> scope;  // the ranges open on its thread, outermost first
  std::vector<std::pair<std::string, uint64_t>> fields;  // the kind's fields, in table order
  std::vector<Buffer> buffers;
  std::string payload;                // Metric bytes
  std::optional<std::string> metric;  // a Metric's value as the CLI prints it
};

Record convert(const trace::Record& r, int rank, trace::TraceReader& reader) {
  Record out;
  out.rank = rank;
  out.seq = r.seq;
  out.step = r.step;
  out.stream = r.stream;
  out.thread = r.thread;
  out.kind = std::string(trace::record_kind_name(r.kind));
  out.name = std::string(reader.string(r.name));
  for (std::string_view level : reader.scope_path(r.scope)) out.scope.emplace_back(level);
  if (const trace::RecordKindInfo* info = trace::find_record_kind(static_cast<uint8_t>(r.kind)))
    for (size_t i = 0; i < info->field_names.size(); ++i)
      out.fields.emplace_back(std::string(info->field_names[i]), r.fields[i]);
  for (const trace::BufferFingerprint& b : r.buffers) {
    Buffer buffer;
    buffer.role = b.role == trace::Role::In ? "in" : "out";
    buffer.label = std::string(reader.string(b.label));
    buffer.dtype = std::string(trace::dtype_name(b.dtype));
    buffer.bytes = b.bytes;
    if (b.flags & trace::kFingerprintValid) buffer.fingerprint = b.fingerprint;
    buffer.flags = b.flags;
    buffer.alloc_ordinal = b.alloc_ordinal;
    buffer.alloc_offset = b.alloc_offset;
    out.buffers.push_back(std::move(buffer));
  }
  out.payload.assign(r.payload.begin(), r.payload.end());
  if (r.kind == trace::RecordKind::Metric)
    out.metric = tools::format_metric_value(r.payload, r.fields[trace::fields::Metric::dtype_hint]);
  return out;
}

// One rank's file of an opened run. Holds the run, whose salvaged copies live as long as it.
class TraceFile {
 public:
  TraceFile(std::shared_ptr<const tools::RunSet> run, const tools::RankFile& file)
      : run_(std::move(run)), file_(file), reader_(file.open()) {}

  int rank() const { return file_.rank; }
  const std::string& path() const { return file_.path; }
  bool salvaged() const { return file_.salvaged; }
  bool whole() const { return file_.integrity.whole() && !file_.salvaged; }
  py::object header() const { return to_python(file_.header); }

  py::object end() {
    reader_->blocks();
    const std::optional<trace::TraceEnd>& end = reader_->end();
    if (!end) return py::none();
    py::dict d;
    d["records"] = end->records;
    d["dropped"] = end->dropped;
    d["steps"] = end->steps;
    d["last_step"] = end->last_step;
    d["write_errors"] = end->write_errors;
    d["clean"] = end->clean;
    d["reason"] = end->reason;
    return std::move(d);
  }

  std::vector<std::tuple<uint32_t, uint64_t, uint64_t>> step_summaries() {
    std::vector<std::tuple<uint32_t, uint64_t, uint64_t>> out;
    for (const trace::StepSummary& s : reader_->step_summaries())
      out.emplace_back(s.step, s.record_count, s.digest);
    return out;
  }

  // Step windows of about `max_records` records each (a step is never split), from the block
  // index: records() over each in turn reads the file once, holding one window at a time.
  std::vector<std::pair<uint32_t, uint32_t>> windows(uint64_t max_records) {
    std::vector<const trace::BlockInfo*> blocks;
    for (const trace::BlockInfo& b : reader_->blocks())
      if (b.type == trace::BlockType::Records && b.record_count > 0 && b.min_step <= b.max_step)
        blocks.push_back(&b);
    std::sort(blocks.begin(), blocks.end(),
              [](const auto* x, const auto* y) { return x->min_step < y->min_step; });
    std::vector<std::pair<uint32_t, uint32_t>> out;
    uint64_t count = 0;
    for (const trace::BlockInfo* b : blocks) {
      if (!out.empty() && b->max_step <= out.back().second) {
        count += b->record_count;  // inside the current window
        continue;
      }
      if (out.empty() || count >= max_records) {
        // A new window starts after the last one (a block straddling both is read by both; its
        // records are taken once, by step).
        const uint32_t first = out.empty() ? b->min_step : out.back().second + 1;
        out.emplace_back(std::max(first, b->min_step), b->max_step);
        count = b->record_count;
      } else {
        out.back().second = b->max_step;
        count += b->record_count;
      }
    }
    return out;
  }

  // Records whose step is in [first, last], in process order (seq), optionally of some kinds.
  std::vector<Record> records(uint32_t first, uint32_t last,
                              const std::optional<std::vector<std::string>>& kinds) {
    std::unordered_set<std::string> wanted;
    if (kinds)
      for (const std::string& k : *kinds) {
        if (!trace::find_record_kind(k))
          throw tools::InputError("kinds: '" + k + "' is not a record kind");
        wanted.insert(k);
      }
    std::vector<Record> out;
    reader_->for_each_record(first, last, [&](const trace::Record& r) {
      if (wanted.empty() || wanted.count(std::string(trace::record_kind_name(r.kind))))
        out.push_back(convert(r, file_.rank, *reader_));
      return true;
    });
    std::stable_sort(out.begin(), out.end(),
                     [](const Record& x, const Record& y) { return x.seq < y.seq; });
    return out;
  }

 private:
  std::shared_ptr<const tools::RunSet> run_;
  const tools::RankFile& file_;  // inside *run_
  std::unique_ptr<trace::TraceReader> reader_;
};

struct Run {
  std::shared_ptr<const tools::RunSet> set;
};

}  // namespace

void bind_run(py::module_& m) {
  py::class_<Buffer>(m, "Buffer", "A fingerprinted buffer of a record")
      .def_readonly("role", &Buffer::role)
      .def_readonly("label", &Buffer::label)
      .def_readonly("dtype", &Buffer::dtype)
      .def_readonly("bytes", &Buffer::bytes)
      .def_readonly("fingerprint", &Buffer::fingerprint)
      .def_readonly("flags", &Buffer::flags)
      .def_property_readonly("flag_names",
                             [](const Buffer& b) {
                               std::vector<std::string> names;
                               for (const auto& [bit, name] : kFlagNames)
                                 if (b.flags & bit) names.emplace_back(name);
                               return names;
                             })
      .def_readonly("alloc_ordinal", &Buffer::alloc_ordinal)
      .def_readonly("alloc_offset", &Buffer::alloc_offset)
      .def("__repr__", [](const Buffer& b) {
        return "<Buffer " + b.role + " " + b.label + " " + b.dtype + " " + std::to_string(b.bytes) +
               " bytes>";
      });

  py::class_<Record>(m, "Record", "One traced op (or marker, metric, warning) of one rank")
      .def_readonly("rank", &Record::rank)
      .def_readonly("seq", &Record::seq)
      .def_readonly("step", &Record::step)
      .def_readonly("stream", &Record::stream)
      .def_readonly("thread", &Record::thread)
      .def_readonly("kind", &Record::kind)
      .def_readonly("name", &Record::name)
      .def_property_readonly("scope",
                             [](const Record& r) {
                               py::tuple levels(r.scope.size());
                               for (size_t i = 0; i < r.scope.size(); ++i) levels[i] = r.scope[i];
                               return levels;
                             })
      .def_property_readonly("fields",
                             [](const Record& r) {
                               py::dict d;
                               for (const auto& [name, value] : r.fields) d[py::str(name)] = value;
                               return d;
                             })
      .def_readonly("buffers", &Record::buffers)
      .def_property_readonly("payload", [](const Record& r) { return py::bytes(r.payload); })
      .def_readonly("metric", &Record::metric)
      .def("__repr__", [](const Record& r) {
        return "<Record rank " + std::to_string(r.rank) + " step " + std::to_string(r.step) +
               " seq " + std::to_string(r.seq) + " " + r.kind + " " + r.name + ">";
      });

  py::class_<TraceFile>(m, "TraceFile", "One rank's trace file of an opened run")
      .def_property_readonly("rank", &TraceFile::rank)
      .def_property_readonly("path", &TraceFile::path)
      .def_property_readonly("salvaged", &TraceFile::salvaged)
      .def_property_readonly("whole", &TraceFile::whole)
      .def_property_readonly("header", &TraceFile::header)
      .def("end", &TraceFile::end)
      .def("step_summaries", &TraceFile::step_summaries)
      .def("windows", &TraceFile::windows, py::arg("max_records"))
      .def("records", &TraceFile::records, py::arg("first"), py::arg("last"),
           py::arg("kinds") = py::none());

  py::class_<Run>(m, "RunSet", "A run directory opened and checked as every command does")
      .def_property_readonly("path", [](const Run& r) { return r.set->path; })
      .def_property_readonly("world_size", [](const Run& r) { return r.set->world_size; })
      .def_property_readonly("run_id", [](const Run& r) { return r.set->run_id; })
      .def_property_readonly("missing_ranks", [](const Run& r) { return r.set->missing_ranks; })
      .def_property_readonly("warnings", [](const Run& r) { return r.set->warnings; })
      .def_property_readonly("ranks",
                             [](const Run& r) {
                               std::vector<int> ranks;
                               for (const tools::RankFile& f : r.set->files)
                                 ranks.push_back(f.rank);
                               return ranks;
                             })
      .def(
          "file",
          [](const Run& r, int rank) {
            const tools::RankFile* file = r.set->find(rank);
            if (!file)
              throw tools::InputError(r.set->path + ": rank " + std::to_string(rank) +
                                      " has no trace file");
            return TraceFile(r.set, *file);
          },
          py::arg("rank"));

  m.def(
      "open_run",
      [](const std::string& path, bool salvage) {
        tools::OpenOptions options;
        options.salvage = salvage;
        return Run{std::make_shared<const tools::RunSet>(tools::open_run_set(path, options))};
      },
      py::arg("path"), py::arg("salvage") = false);

  m.def(
      "record_kinds",
      [] {
        std::vector<std::pair<std::string, std::vector<std::string>>> out;
        for (const trace::RecordKindInfo& info : trace::record_kinds())
          out.emplace_back(
              std::string(info.name),
              std::vector<std::string>(info.field_names.begin(), info.field_names.end()));
        return out;
      },
      "Every record kind's name and field names, in wire-id order (trace/record_kinds.def)");
}

}  // namespace lockstep::python
