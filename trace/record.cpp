// Tables generated from record_kinds.def and dtypes.def.
#include "trace/record.h"

#include <string>

namespace lockstep::trace {
namespace {

// Splits the stringified field list "a, b,\n c" into names; comments are already gone after
// preprocessing, so only commas and whitespace separate names. constexpr, so that the short
// texts are checked against the field lists at compile time (below).
constexpr std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\n' || text.front() == '\t'))
    text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n' || text.back() == '\t'))
    text.remove_suffix(1);
  return text;
}

template <class Visit>
constexpr void for_each_field_name(std::string_view list, Visit&& visit) {
  size_t pos = 0;
  while (pos < list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view name = trim(list.substr(pos, comma - pos));
    if (!name.empty()) visit(name);
    pos = comma + 1;
  }
}

std::vector<std::string_view> split_field_names(std::string_view list) {
  std::vector<std::string_view> names;
  for_each_field_name(list, [&](std::string_view name) { names.push_back(name); });
  return names;
}

// Index of `name` in the field list, or -1.
constexpr int field_index(std::string_view list, std::string_view name) {
  int index = 0, found = -1;
  for_each_field_name(list, [&](std::string_view field) {
    if (field == name && found < 0) found = index;
    ++index;
  });
  return found;
}

// Every "{name}" of a short text names a field of the row, and braces pair.
constexpr bool short_text_names_fields(std::string_view text, std::string_view list) {
  for (size_t pos = 0; pos < text.size(); ++pos) {
    if (text[pos] == '}') return false;
    if (text[pos] != '{') continue;
    size_t close = text.find('}', pos);
    if (close == std::string_view::npos) return false;
    if (field_index(list, text.substr(pos + 1, close - pos - 1)) < 0) return false;
    pos = close;
  }
  return true;
}

#define LOCKSTEP_RECORD_KIND(Enum, id, name, diff, regions, identity, noisy, text, ...) \
  static_assert(fields::Enum::kCount <= kMaxFields, "too many fields in kind " #Enum);  \
  static_assert(short_text_names_fields(text, #__VA_ARGS__),                            \
                "kind " #Enum ": its short text names a field it does not have");
#include "trace/record_kinds.def"
#undef LOCKSTEP_RECORD_KIND
static_assert(kMaxFields <= 32, "KindDiff::volatile_mask holds one bit per field");

std::vector<RecordKindInfo> build_kind_table() {
  std::vector<RecordKindInfo> kinds;
#define LOCKSTEP_RECORD_KIND(Enum, id, name, diff, regions, identity, noisy, text, ...) \
  kinds.push_back({RecordKind::Enum, name, split_field_names(#__VA_ARGS__), fields::Enum::kDiff});
#include "trace/record_kinds.def"
#undef LOCKSTEP_RECORD_KIND
  return kinds;
}

}  // namespace

const std::vector<RecordKindInfo>& record_kinds() {
  static const std::vector<RecordKindInfo> kinds = build_kind_table();
  return kinds;
}

const RecordKindInfo* find_record_kind(uint8_t wire_id) {
  for (const RecordKindInfo& info : record_kinds())
    if (static_cast<uint8_t>(info.kind) == wire_id) return &info;
  return nullptr;
}

const RecordKindInfo* find_record_kind(std::string_view name) {
  for (const RecordKindInfo& info : record_kinds())
    if (info.name == name) return &info;
  return nullptr;
}

std::string_view record_kind_name(RecordKind kind) {
  const RecordKindInfo* info = find_record_kind(static_cast<uint8_t>(kind));
  return info ? info->name : std::string_view("?");
}

int field_count(RecordKind kind) {
  switch (kind) {
#define LOCKSTEP_RECORD_KIND(Enum, id, name, ...) \
  case RecordKind::Enum:                          \
    return fields::Enum::kCount;
#include "trace/record_kinds.def"
#undef LOCKSTEP_RECORD_KIND
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
#define LOCKSTEP_DTYPE(Enum, id, name, bits) \
  case DType::Enum:                          \
    return name;
#include "trace/dtypes.def"
#undef LOCKSTEP_DTYPE
  }
  return "?";
}

int dtype_bits(DType dtype) {
  switch (dtype) {
#define LOCKSTEP_DTYPE(Enum, id, name, bits) \
  case DType::Enum:                          \
    return bits;
#include "trace/dtypes.def"
#undef LOCKSTEP_DTYPE
  }
  return 0;
}

}  // namespace lockstep::trace
