#include "tools/why/mechanisms.h"

#include <regex>

#include <fmt/format.h>

#include "tools/diff/result.h"
#include "tools/regex_text.h"
#include "tools/why/gemm_config.h"
#include "trace/record.h"

namespace lockstep::tools {
namespace {

enum class Subject { Kernel, Gemm, Collective };

struct Row {
  std::string_view id;
  Subject subject;
  std::string_view pattern, what, fix;
};

constexpr Row kRows[] = {
#define LOCKSTEP_MECHANISM(Id, Kind, pattern, what, fix) {#Id, Subject::Kind, pattern, what, fix},
#include "tools/why/mechanisms.def"
#undef LOCKSTEP_MECHANISM
};

// Compiled once; a row that does not compile is a defect the tests catch (every row is tried).
const std::vector<std::regex>& compiled() {
  static const std::vector<std::regex> patterns = [] {
    std::vector<std::regex> out;
    for (const Row& row : kRows)
      out.emplace_back(std::string(row.pattern), std::regex::ECMAScript | std::regex::optimize);
    return out;
  }();
  return patterns;
}

std::optional<Subject> subject_of(std::string_view kind) {
  if (kind == "kernel") return Subject::Kernel;
  if (kind == "gemm") return Subject::Gemm;
  if (kind == "collective") return Subject::Collective;
  return std::nullopt;
}

bool explained_by_mechanism(Classification c) {
  return c == Classification::Origin || c == Classification::Structural;
}

}  // namespace

std::string mechanism_subject(std::string_view kind, std::string_view name,
                              std::span<const uint64_t> fields) {
  const std::optional<Subject> subject = subject_of(kind);
  if (!subject) return {};
  if (*subject != Subject::Gemm) return std::string(name);
  using F = trace::fields::Gemm;
  auto at = [&](int f) { return f < static_cast<int>(fields.size()) ? fields[f] : 0; };
  const bool lt = name.starts_with("cublasLt") && at(F::algo) != UINT64_MAX;
  const uint64_t split_k = lt ? at(F::algo) >> 48 & 0xffff : 0;
  return fmt::format("{} split-K {} reduction {}", name, split_k,
                     reduction_scheme_words(at(F::reduction_scheme)));
}

std::optional<Mechanism> match_mechanism(std::string_view kind, std::string_view name,
                                         std::span<const uint64_t> fields) {
  const std::optional<Subject> subject = subject_of(kind);
  if (!subject) return std::nullopt;
  const std::string text = mechanism_subject(kind, name, fields);
  for (size_t i = 0; i < std::size(kRows); ++i)
    if (kRows[i].subject == *subject && regex_search_bounded(text, compiled()[i]))
      return Mechanism{kRows[i].id, kRows[i].what, kRows[i].fix};
  return std::nullopt;
}

std::vector<std::string> mechanism_lines(const Divergence& d) {
  if (!explained_by_mechanism(d.classification) || !subject_of(d.kind)) return {};
  const std::optional<Mechanism> m = match_mechanism(d.kind, d.name, d.fields);
  if (!m) return {"mechanism: none known for this op (the table is tools/why/mechanisms.def)"};
  return {fmt::format("mechanism: {}", m->what), fmt::format("fix: {}", m->fix)};
}

nlohmann::json mechanism_json(const Divergence& d) {
  if (!explained_by_mechanism(d.classification)) return nullptr;
  const std::optional<Mechanism> m = match_mechanism(d.kind, d.name, d.fields);
  if (!m) return nullptr;
  return {{"id", m->id}, {"what", m->what}, {"fix", m->fix}};
}

std::vector<std::string_view> mechanism_ids() {
  std::vector<std::string_view> ids;
  for (const Row& row : kRows) ids.push_back(row.id);
  return ids;
}

}  // namespace lockstep::tools
