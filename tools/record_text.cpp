#include "tools/record_text.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "tools/metric_value.h"
#include "tools/scope_text.h"
#include "trace/field_format.h"

#include "tools/why/names.h"

namespace lockstep::tools {

std::string fields_text(const trace::Record& r, std::string_view name) {
  std::string out;
  const trace::RecordKindInfo* info = trace::find_record_kind(static_cast<uint8_t>(r.kind));
  if (!info) return out;
  const trace::FieldContext context{name, r.seq};
  for (size_t i = 0; i < info->field_names.size(); ++i) {
    const int field = static_cast<int>(i);
    if (!trace::field_shown(r.kind, field, r.fields[i])) continue;
    out += fmt::format(" {}={}", info->field_names[i],
                       trace::field_text(r.kind, field, r.fields[i], context));
  }
  return out;
}

std::string fingerprint_text(const trace::BufferFingerprint& b) {
  std::string out;
  if (b.flags & trace::kFingerprintValid)
    out = fmt::format("{:016x}", b.fingerprint);
  else if (b.flags & trace::kFingerprintDropped)
    out = "dropped";
  else
    out = (b.flags & trace::kNotWrittenSinceAlloc) ? "unwritten" : "-";
  if (b.flags & trace::kExtentClamped) out += " clamped";
  if (b.flags & trace::kLearnedReadOnly) out += " read-only";
  if (b.flags & trace::kFingerprintRecalled) out += " recalled";
  if (b.flags & trace::kDigestOfEnclosing) out += " enclosing";
  return out;
}

std::string buffer_text(const trace::BufferFingerprint& b, std::string_view label) {
  std::string out = fmt::format("{} {} {} {}B {}", b.role == trace::Role::In ? "in" : "out", label,
                                trace::dtype_name(b.dtype), b.bytes, fingerprint_text(b));
  if (b.alloc_ordinal != 0) out += fmt::format(" @{}+{}", b.alloc_ordinal, b.alloc_offset);
  return out;
}

std::string warning_sentence(const trace::Record& r, std::string_view name) {
  if (r.kind != trace::RecordKind::Warning) return {};
  return trace::warning_text(trace::warning_source(r.seq), r.fields[trace::fields::Warning::code],
                             r.fields[trace::fields::Warning::count], name);
}

std::string record_line(int rank, const trace::Record& r, trace::TraceReader& reader) {
  const std::string_view name = reader.string(r.name);
  const std::string_view kind = trace::record_kind_name(r.kind);
  std::string line = fmt::format("r{} step {} seq {} stream {} thread {} {} {}", rank, r.step,
                                 r.seq, r.stream, r.thread, kind, display_name(kind, name));
  line += fields_text(r, name);
  for (const trace::BufferFingerprint& b : r.buffers)
    line += " | " + buffer_text(b, reader.string(b.label));
  if (r.kind == trace::RecordKind::Warning) line += " | " + warning_sentence(r, name);
  if (r.kind == trace::RecordKind::Stack) {  // the frames, one per line under it
    const std::string frames(r.payload.begin(), r.payload.end());
    for (size_t at = 0; at < frames.size();) {
      const size_t end = std::min(frames.find('\n', at), frames.size());
      line += "\n    " + frames.substr(at, end - at);
      at = end + 1;
    }
    return line;
  }
  if (!r.payload.empty())
    line += " | payload " +
            format_metric_value(r.payload, r.kind == trace::RecordKind::Metric
                                               ? r.fields[trace::fields::Metric::dtype_hint]
                                               : 0);
  if (r.scope != 0) line += " | scope " + scope_text(reader.scope_path(r.scope));
  return line;
}

void for_each_record_in_seq_order(trace::TraceReader& reader, uint32_t first_step,
                                  uint32_t last_step,
                                  const std::function<bool(const trace::Record&)>& callback) {
  // Windows of whole steps from the summaries (a step is never split), then the steps after the
  // last summary, if any.
  std::vector<std::pair<uint32_t, uint32_t>> windows;
  uint64_t in_window = 0;
  uint32_t next = first_step;
  bool open = false;
  uint32_t window_first = first_step;
  for (const trace::StepSummary& s : reader.step_summaries()) {
    if (s.step < first_step || s.step > last_step) continue;
    if (!open) window_first = next, open = true;
    in_window += s.record_count;
    if (in_window >= kWindowRecords) {
      windows.emplace_back(window_first, s.step);
      open = false, in_window = 0;
    }
    if (s.step == UINT32_MAX) return;  // nothing can follow
    next = s.step + 1;
  }
  if (open) windows.emplace_back(window_first, next - 1);
  if (next <= last_step) windows.emplace_back(next, last_step);

  std::vector<trace::Record> records;
  for (auto [first, last] : windows) {
    records.clear();
    reader.for_each_record(first, last, [&](const trace::Record& r) {
      records.push_back(r);
      return true;
    });
    std::stable_sort(records.begin(), records.end(),
                     [](const trace::Record& x, const trace::Record& y) { return x.seq < y.seq; });
    for (const trace::Record& r : records)
      if (!callback(r)) return;
  }
}

}  // namespace lockstep::tools
