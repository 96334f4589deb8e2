#include <fmt/format.h>

#include "tools/metric_value.h"
#include "tools/report.h"

namespace lockstep::tools {
namespace {

using nlohmann::json;

std::string hex64(uint64_t v) { return fmt::format("{:#018x}", v); }

json seq_pair(uint64_t a, uint64_t b) {
  return {{"a", a ? json(a) : json(nullptr)}, {"b", b ? json(b) : json(nullptr)}};
}

json context_json(const std::vector<ContextLine>& lines) {
  json out = json::array();
  for (const ContextLine& l : lines)
    out.push_back({{"seq", l.seq}, {"op", l.text}, {"marked", l.marked}});
  return out;
}

json divergence_json(const Divergence& d) {
  json j = {
      {"rank", d.rank},
      {"step", d.step},
      {"seq", seq_pair(d.seq_a, d.seq_b)},
      {"stream", d.stream},
      {"kind", d.kind},
      {"name", d.name},
      {"occurrence", d.occurrence},
      {"epoch", d.epoch},
      {"classification", classification_name(d.classification)},
      {"structural_kind", d.structural == StructuralKind::None
                              ? json(nullptr)
                              : json(structural_kind_name(d.structural))},
      {"detail", d.detail},
      {"collective",
       d.is_collective ? json{{"comm_id", d.comm_id}, {"comm_seq", d.comm_seq}} : json(nullptr)},
      {"received_from", d.received_from >= 0 ? json(d.received_from) : json(nullptr)},
      {"made_before_step", d.made_before_step ? json(*d.made_before_step) : json(nullptr)},
      {"buffer", nullptr},
  };
  if (d.buffer)
    j["buffer"] = {{"role", d.buffer->role},
                   {"label", d.buffer->label},
                   {"bytes", d.buffer->bytes},
                   {"dtype", d.buffer->dtype},
                   {"fingerprint_a", hex64(d.buffer->fingerprint_a)},
                   {"fingerprint_b", hex64(d.buffer->fingerprint_b)}};
  if (d.classification == Classification::Structural)
    j["context"] = {{"a", context_json(d.context_a)}, {"b", context_json(d.context_b)}};
  return j;
}

json metric_value(const std::vector<uint8_t>& bytes, uint64_t hint) {
  std::string hex;
  for (uint8_t b : bytes) hex += fmt::format("{:02x}", b);
  // The hex stays the record of truth; the decoded values (by dtype_hint, else guessed from the
  // size: "dtype_guessed") are for reading.
  const MetricValue value = decode_metric(bytes, hint);
  return {{"decoded", format_metric_value(bytes, hint)},
          {"bytes_hex", hex},
          {"dtype", trace::dtype_name(value.dtype)},
          {"dtype_guessed", value.guessed},
          {"values", value.values}};
}

}  // namespace

nlohmann::json diff_json(const DiffResult& result, const DiffContext& context) {
  json j = {
      {"schema", "lockstep-diff"},
      {"version", kDiffSchemaVersion},
      {"verdict", verdict_name(verdict_of(result))},
      {"compared",
       {{"first_step", result.first_step ? json(*result.first_step) : json(nullptr)},
        {"last_step", result.last_step ? json(*result.last_step) : json(nullptr)},
        {"records", result.records_compared},
        {"steps_compared", result.steps_compared},
        {"steps_skipped", result.steps_skipped},
        {"trace_first_step",
         result.trace_first_step ? json(*result.trace_first_step) : json(nullptr)},
        {"trace_last_step", result.trace_last_step ? json(*result.trace_last_step) : json(nullptr)},
        {"window_first_step",
         result.window_first_step ? json(*result.window_first_step) : json(nullptr)}}},
      {"not_compared", result.not_compared},
      {"a", {{"path", context.a}}},
      {"b", {{"path", context.b}}},
      {"world_size", context.world_size},
      {"ranks_compared", context.ranks},
      {"stats",
       {{"records_compared", result.records_compared},
        {"divergent_records", result.divergent_records},
        {"unexplained_records", result.unexplained},
        {"steps_compared", result.steps_compared},
        {"steps_skipped", result.steps_skipped},
        {"seconds", context.seconds}}},
      {"first_divergence", result.first_by_epoch.empty()
                               ? json(nullptr)
                               : divergence_json(result.first_by_epoch.front())},
      {"culprit_rank", result.culprit ? json(result.culprit->rank) : json(nullptr)},
      {"culprit", result.culprit ? divergence_json(*result.culprit) : json(nullptr)},
      {"per_rank", json::array()},
      {"structural", json::array()},
      {"structural_total", result.structural_total},
      {"metric_divergence", nullptr},
      {"state_divergence", nullptr},
      {"warnings", result.warnings},
  };
  for (const Divergence& d : result.first_by_epoch) j["per_rank"].push_back(divergence_json(d));
  for (const Divergence& d : result.structural) j["structural"].push_back(divergence_json(d));
  if (result.metric) {
    const MetricDivergence& m = *result.metric;
    j["metric_divergence"] = {{"rank", m.rank},
                              {"step", m.step},
                              {"stream", m.stream},
                              {"name", m.name},
                              {"occurrence", m.occurrence},
                              {"seq", seq_pair(m.seq_a, m.seq_b)},
                              {"dtype_hint", m.dtype_hint},
                              {"a", metric_value(m.a, m.dtype_hint)},
                              {"b", metric_value(m.b, m.dtype_hint)}};
  }
  if (result.state) {
    const StateDivergence& s = *result.state;
    j["state_divergence"] = {{"rank", s.rank},
                             {"step", s.step},
                             {"name", s.name},
                             {"state_kind", state_kind_name(s.state_kind)},
                             {"bytes", s.bytes},
                             {"seq", seq_pair(s.seq_a, s.seq_b)},
                             {"fingerprint_a", hex64(s.fingerprint_a)},
                             {"fingerprint_b", hex64(s.fingerprint_b)}};
  }
  return j;
}

}  // namespace lockstep::tools
