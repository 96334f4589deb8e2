#include "tools/why/nccl_choice.h"

#include <tuple>

#include <fmt/format.h>

#include "trace/field_format.h"
#include "trace/record.h"

namespace lockstep::tools {
namespace {

using F = trace::fields::Collective;

uint64_t at(std::span<const uint64_t> fields, int i) {
  return i < static_cast<int>(fields.size()) ? fields[i] : 0;
}

std::string text(int field, uint64_t value) {
  return value == 0 ? std::string()
                    : trace::field_text(trace::RecordKind::Collective, field, value);
}

}  // namespace

std::optional<NcclChoiceText> nccl_choice_of(std::span<const uint64_t> fields) {
  const uint64_t algo = at(fields, F::nccl_algo), proto = at(fields, F::nccl_proto),
                 channels = at(fields, F::nccl_channels);
  if (algo == 0 && proto == 0 && channels == 0) return std::nullopt;
  return NcclChoiceText{text(F::nccl_algo, algo), text(F::nccl_proto, proto), channels};
}

std::string nccl_choice_difference(std::span<const uint64_t> a, std::span<const uint64_t> b) {
  std::string parts;
  static constexpr struct {
    int field;
    const char* words;
  } kParts[] = {
      {F::nccl_algo, "algorithm"}, {F::nccl_proto, "protocol"}, {F::nccl_channels, "channels"}};
  for (const auto& part : kParts) {
    const uint64_t x = at(a, part.field), y = at(b, part.field);
    if (x == 0 || y == 0 || x == y) continue;  // not recorded in one run: nothing to compare
    parts += fmt::format("{}{} {} vs {}", parts.empty() ? "" : ", ", part.words,
                         trace::field_text(trace::RecordKind::Collective, part.field, x),
                         trace::field_text(trace::RecordKind::Collective, part.field, y));
  }
  return parts.empty() ? parts : "NCCL " + parts;
}

void NcclChoiceNotes::add(NcclChoiceNote note) {
  ++total;
  if (!first || std::tuple(note.step, note.rank, note.seq_a) <
                    std::tuple(first->step, first->rank, first->seq_a))
    first = std::move(note);
}

void NcclChoiceNotes::merge(const NcclChoiceNotes& other) {
  const uint64_t before = total;
  if (other.first) add(*other.first);
  total = before + other.total;
}

}  // namespace lockstep::tools
