// Tables generated from record_kinds.def and dtypes.def.
#include "trace/record.h"

#include <string>

namespace lockstep::trace {
namespace {

// Splits the stringified field list "a, b,\n c" into names; comments are already gone after
// preprocessing, so only commas and whitespace separate names.
std::vector<std::string_view> split_field_names(std::string_view list) {
  std::vector<std::string_view> names;
  size_t pos = 0;
  while (pos < list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view name = list.substr(pos, comma - pos);
    while (!name.empty() && (name.front() == ' ' || name.front() == '\n' || name.front() == '\t'))
      name.remove_prefix(1);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\n' || name.back() == '\t'))
      name.remove_suffix(1);
    if (!name.empty()) names.push_back(name);
    pos = comma + 1;
  }
  return names;
}

std::vector<RecordKindInfo> build_kind_table() {
  std::vector<RecordKindInfo> kinds;
#define LOCKSTEP_RECORD_KIND(Enum, id, name, ...) \
  kinds.push_back({RecordKind::Enum, name, split_field_names(#__VA_ARGS__)});
#include "trace/record_kinds.def"
#undef LOCKSTEP_RECORD_KIND
  return kinds;
}

// Field counts checked against the table at compile time.
#define LOCKSTEP_RECORD_KIND(Enum, id, name, ...) \
  static_assert(fields::Enum::kCount <= kMaxFields, "too many fields in kind " #Enum);
#include "trace/record_kinds.def"
#undef LOCKSTEP_RECORD_KIND

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
