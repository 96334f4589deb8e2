#include <algorithm>

#include <fmt/format.h>

#include "tools/metric_value.h"
#include "tools/report.h"
#include "tools/scope_text.h"
#include "tools/why/mechanisms.h"
#include "tools/why/names.h"
#include "tools/why/nccl_choice.h"

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

json optional_json(const std::optional<uint64_t>& v) { return v ? json(*v) : json(nullptr); }

// The text's class name as a JSON value: "host input" is "host_input".
std::string classification_key(Classification c) {
  std::string key = classification_name(c);
  std::replace(key.begin(), key.end(), ' ', '_');
  return key;
}

json divergence_json(const Divergence& d) {
  json j = {
      {"rank", d.rank},
      {"step", d.step},
      {"step_b", d.step_b},
      {"job_step", optional_json(d.job_step)},
      {"seq", seq_pair(d.seq_a, d.seq_b)},
      {"stream", d.stream},
      {"kind", d.kind},
      {"name", d.name},
      {"scope", d.scope},
      {"name_short", short_kernel_name(d.name)},  // as the text shows a kernel (names.h)
      {"occurrence", d.occurrence},
      {"epoch", d.epoch},
      {"classification", classification_key(d.classification)},
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
                   {"label_words", buffer_words(d.kind, d.buffer->label)},
                   {"bytes", d.buffer->bytes},
                   {"dtype", d.buffer->dtype},
                   {"fingerprint_a", hex64(d.buffer->fingerprint_a)},
                   {"fingerprint_b", hex64(d.buffer->fingerprint_b)}};
  if (d.classification == Classification::Structural)
    j["context"] = {{"a", context_json(d.context_a)}, {"b", context_json(d.context_b)}};
  // NCCL's own choices in each run (tools/why/nccl_choice.h); null where not recorded.
  if (d.is_collective) {
    auto choice = [](const std::vector<uint64_t>& fields) -> json {
      const auto c = nccl_choice_of(fields);
      if (!c) return nullptr;
      return {{"algo", c->algo.empty() ? json(nullptr) : json(c->algo)},
              {"proto", c->proto.empty() ? json(nullptr) : json(c->proto)},
              {"channels", c->channels == 0 ? json(nullptr) : json(c->channels)}};
    };
    j["nccl"] = {{"a", choice(d.fields)}, {"b", choice(d.fields_b)}};
  }
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

// How the steps were paired, and what one run held that the other did not (tools/README.md).
json alignment_json(const DiffResult& result) {
  const StepAlignment& a = result.alignment;
  json out = {{"mode", align_mode_name(a.mode)},
              {"reason", a.reason.empty() ? json(nullptr) : json(a.reason)},
              {"compared_job_steps", nullptr},
              {"resume", nullptr}};
  if (const std::optional<JobStepRange> steps = compared_job_steps(result))
    out["compared_job_steps"] = {
        {"first", steps->first <= steps->last ? json(steps->first) : json(nullptr)},
        {"last", steps->first <= steps->last ? json(steps->last) : json(nullptr)},
        {"setup", steps->with_setup}};
  if (a.by_number() && a.resumed != 0) {
    std::optional<uint64_t> at;
    for (const StepPairing& p : a.pairs)
      if (p.job_step) {
        at = p.job_step;
        break;
      }
    const Verdict verdict = verdict_of(result);
    out["resume"] = {{"run", std::string(1, a.resumed)},
                     {"at_step", optional_json(at)},
                     {"bit_exact", verdict == Verdict::Identical  ? json(true)
                                   : verdict == Verdict::Divergent ? json(false)
                                                                   : json(nullptr)},
                     {"verdict", resume_verdict(result)}};
  }
  return out;
}

json phases_json(const StepAlignment& a) {
  json out = json::array();
  for (const UnpairedSteps& u : a.unpaired)
    out.push_back({{"run", std::string(1, u.run)},
                   {"phase", unpaired_where_name(u.where)},
                   {"trace_steps", {u.span.first, u.span.last}},
                   {"job_steps", u.span.job_first
                                     ? json{*u.span.job_first, *u.span.job_last}
                                     : json(nullptr)},
                   {"records", u.span.records},
                   {"compared", false},
                   {"text", unpaired_text(u)}});
  return out;
}

json setup_json(const DiffResult& result) {
  json out = {{"phase", nullptr}, {"autotune", json::array()}, {"autotune_total", result.choices_total},
              {"fix", result.choices.empty() ? json(nullptr) : json(autotune_fix(result.choices))}};
  for (const ChoiceDifference& c : result.choices)
    out["autotune"].push_back({{"what", c.what}, {"a", c.a}, {"b", c.b}});
  if (const std::optional<SetupResult>& s = result.setup)
    out["phase"] = {{"rank", s->rank},
                    {"trace_steps_a", {s->a.first, s->a.last}},
                    {"trace_steps_b", {s->b.first, s->b.last}},
                    {"records_a", s->a.records},
                    {"records_b", s->b.records},
                    {"identical", s->identical()},
                    {"equal_by_summary", s->equal_by_summary},
                    {"records_compared", s->records_compared},
                    {"differences", s->differences},
                    {"first", s->first ? divergence_json(*s->first) : json(nullptr)}};
  return out;
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
      {"alignment", alignment_json(result)},
      {"phases", phases_json(result.alignment)},
      {"setup", setup_json(result)},
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
      {"culprit_receivers", json::array()},
      {"culprit_stack", result.culprit_stack_run == 0
                            ? json(nullptr)
                            : json{{"run", result.culprit_stack_run == 's'
                                               ? std::string("stacks")
                                               : std::string(1, result.culprit_stack_run)},
                                   {"python", result.culprit_python},
                                   {"native", result.culprit_native}}},
      {"first_scope", nullptr},
      {"per_rank", json::array()},
      {"structural", json::array()},
      {"structural_total", result.structural_total},
      {"metric_divergence", nullptr},
      {"state_divergence", nullptr},
      {"warnings", result.warnings},
      {"environment", environment_json(result.environment)},
      {"nccl_choices", {{"total", result.nccl_choices.total}, {"first", nullptr}}},
  };
  if (const auto& first = result.nccl_choices.first)
    j["nccl_choices"]["first"] = {{"rank", first->rank},
                                  {"step", first->step},
                                  {"name", first->name},
                                  {"comm_id", first->comm_id},
                                  {"comm_seq", first->comm_seq},
                                  {"seq", seq_pair(first->seq_a, first->seq_b)},
                                  {"difference", first->difference}};
  if (const Divergence* d = first_diverging_scope(result))
    j["first_scope"] = {{"rank", d->rank},
                        {"step", d->step},
                        {"scope", d->scope},
                        {"text", scope_text(d->scope)},
                        {"op", op_label(*d)}};
  if (result.culprit) j["culprit"]["mechanism"] = mechanism_json(*result.culprit);
  j["culprit_replay"] =
      result.culprit_replay ? replay_verdict_json(*result.culprit_replay) : json(nullptr);
  for (const Divergence& d : result.first_by_epoch) j["per_rank"].push_back(divergence_json(d));
  for (const Divergence& d : result.culprit_receivers)
    j["culprit_receivers"].push_back(divergence_json(d));
  for (const Divergence& d : result.structural) j["structural"].push_back(divergence_json(d));
  if (result.metric) {
    const MetricDivergence& m = *result.metric;
    j["metric_divergence"] = {{"rank", m.rank},
                              {"step", m.step},
                              {"step_b", m.step_b},
                              {"job_step", optional_json(m.job_step)},
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
                             {"step_b", s.step_b},
                             {"job_step", optional_json(s.job_step)},
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
