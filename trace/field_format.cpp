// Field values as text, from enum_names.def, field_formats.def and warning_codes.def.
#include "trace/field_format.h"

#include <array>
#include <vector>

#include <fmt/format.h>

#include "trace/writer.h"

namespace lockstep::trace {
namespace {

struct EnumRow {
  Format table;
  int64_t value;
  std::string_view name;
};

constexpr EnumRow kEnumRows[] = {
#define LOCKSTEP_ENUM(Table, Type)
#define LOCKSTEP_ENUM_VALUE(Table, value, Identifier) {Format::Table, value, #Identifier},
#include "trace/enum_names.def"
#undef LOCKSTEP_ENUM
#undef LOCKSTEP_ENUM_VALUE
};

// A value has one name per table: a second row would make the printed name depend on row order.
consteval bool enum_values_unique() {
  for (size_t i = 0; i < std::size(kEnumRows); ++i)
    for (size_t j = i + 1; j < std::size(kEnumRows); ++j)
      if (kEnumRows[i].table == kEnumRows[j].table && kEnumRows[i].value == kEnumRows[j].value)
        return false;
  return true;
}
static_assert(enum_values_unique(), "enum_names.def: a value has two rows in one table");

// field_formats.def as a table indexed by wire id and field; the compiler checks each row's field
// is a field of its kind (fields::Kind::field).
constexpr int kKindIds = 256;
constexpr auto kFieldFormats = [] {
  std::array<std::array<FieldFormat, kMaxFields>, kKindIds> formats{};
#define LOCKSTEP_FIELD_FORMAT(Kind, field, format, shown)                    \
  formats[static_cast<uint8_t>(RecordKind::Kind)][fields::Kind::field] = {   \
      Format::format, Shown::shown};
#include "trace/field_formats.def"
#undef LOCKSTEP_FIELD_FORMAT
  return formats;
}();

constexpr WarningInfo kWarnings[] = {
#define LOCKSTEP_WARNING(source, code, Identifier, count, one, many) \
  {WarningSource::source, code, #Identifier, std::string_view(#count) == "Summed", one, many},
#include "trace/warning_codes.def"
#undef LOCKSTEP_WARNING
};
static_assert(kWarningRecordsDropped == 1, "warning_codes.def: the writer's RecordsDropped is 1");

// cuBLASLt's algorithm configuration as collectors/gemm.cpp packs it: config id | tile << 16 |
// stages << 32 | split-k << 48, 16 bits each.
std::string lt_algo_text(uint64_t code) {
  return fmt::format("id{}/tile{}/stages{}/splitk{}", code & 0xffff, (code >> 16) & 0xffff,
                     (code >> 32) & 0xffff, (code >> 48) & 0xffff);
}

std::string gemm_algo_text(uint64_t value, std::string_view api) {
  const bool lt = api.starts_with("cublasLt");
  if (value == UINT64_MAX) {
    if (lt) return "heuristic";  // no algorithm passed: cuBLASLt's heuristic chose
    if (api.empty()) return "default";
  }
  if (lt) return lt_algo_text(value);
  // Without the API (the diff's short text) a number could be either kind: left a number.
  if (api.empty()) return std::to_string(value);
  if (auto name = enum_name(Format::CublasGemmAlgo, static_cast<int64_t>(value)))
    return std::string(*name);
  return std::to_string(value);
}

std::string named_or_number(Format table, uint64_t value) {
  if (auto name = enum_name(table, static_cast<int64_t>(value))) return std::string(*name);
  return std::to_string(value);
}

}  // namespace

FieldFormat field_format(RecordKind kind, int field) {
  if (field < 0 || field >= kMaxFields) return {};
  return kFieldFormats[static_cast<uint8_t>(kind)][field];
}

std::optional<std::string_view> enum_name(Format table, int64_t value) {
  for (const EnumRow& row : kEnumRows)
    if (row.table == table && row.value == value) return row.name;
  return std::nullopt;
}

std::string field_text(RecordKind kind, int field, uint64_t value, const FieldContext& context) {
  const FieldFormat format = field_format(kind, field);
  switch (format.format) {
    case Format::Decimal:
      return std::to_string(value);
    case Format::Hex:
      return fmt::format("{:#018x}", value);
    case Format::Bool:
      return value ? "true" : "false";
    case Format::DType:
      return value <= 0xff && dtype_bits(static_cast<DType>(value)) > 0
                 ? std::string(dtype_name(static_cast<DType>(value)))
                 : std::to_string(value);
    case Format::RecordKind: {
      const RecordKindInfo* info = value <= 0xff ? find_record_kind(static_cast<uint8_t>(value))
                                                 : nullptr;
      return info ? std::string(info->name) : std::to_string(value);
    }
    case Format::ComputeType:
      // cublasComputeType_t starts at 64; below it typed APIs record their cudaDataType.
      return named_or_number(value >= 64 ? Format::CublasComputeType : Format::CudaDataType, value);
    case Format::GemmAlgo:
      return gemm_algo_text(value, context.name);
    case Format::WarningCode: {
      const WarningInfo* info = find_warning(warning_source(context.seq), value);
      return info ? std::string(info->identifier) : std::to_string(value);
    }
    default:
      return named_or_number(format.format, value);
  }
}

bool field_shown(RecordKind kind, int field, uint64_t value) {
  switch (field_format(kind, field).shown) {
    case Shown::Always:
      return true;
    case Shown::NotMax:
      return value != UINT64_MAX;
    case Shown::NonZero:
      break;
  }
  return value != 0;
}

const WarningInfo* find_warning(WarningSource source, uint64_t code) {
  for (const WarningInfo& w : kWarnings)
    if (w.source == source && w.code == code) return &w;
  return nullptr;
}

std::string warning_text(WarningSource source, uint64_t code, uint64_t count,
                         std::string_view detail) {
  const WarningInfo* info = find_warning(source, code);
  if (!info) return fmt::format("{} (code {}, count {})", detail, code, count);
  return fmt::format(fmt::runtime(count == 1 ? info->one : info->many), fmt::arg("count", count),
                     fmt::arg("detail", detail));
}

// Declared in record.h next to the table it reads; defined here so that its fields read as
// field_text says (the diff's context lines: "gemm cublasLtMatmul algo heuristic").
std::string short_text(RecordKind kind, std::span<const uint64_t> fields) {
  const RecordKindInfo* info = find_record_kind(static_cast<uint8_t>(kind));
  if (!info) return {};
  std::string_view text = info->diff.short_text;
  std::string out;
  for (size_t pos = 0; pos < text.size(); ++pos) {
    size_t close = text[pos] == '{' ? text.find('}', pos) : std::string_view::npos;
    if (close == std::string_view::npos) {
      out += text[pos];
      continue;
    }
    std::string_view field = text.substr(pos + 1, close - pos - 1);
    for (size_t i = 0; i < info->field_names.size(); ++i)
      if (info->field_names[i] == field)
        out += field_text(kind, static_cast<int>(i), i < fields.size() ? fields[i] : 0);
    pos = close;
  }
  return out;
}

}  // namespace lockstep::trace
