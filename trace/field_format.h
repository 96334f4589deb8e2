// Record fields as people read them: enum values by name (CUDA_R_16BF, CUBLAS_COMPUTE_32F,
// ncclSum), GEMM algorithms decoded, digests in hex, warnings as sentences. The tables are
// enum_names.def (names), field_formats.def (which field reads which) and warning_codes.def;
// this is the one decoder `show`, `stats`, `export` and the diff's text call.
//
// A library of its own (lockstep_trace_text): the tools link it, the shim does not need it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "trace/record.h"

namespace lockstep::trace {

// The tables of enum_names.def, and the other ways a field can read (field_formats.def).
enum class Format : uint8_t {
  Decimal,
  Hex,
  Bool,
  DType,
  RecordKind,
  ComputeType,
  GemmAlgo,
  WarningCode,
#define LOCKSTEP_ENUM(Table, Type) Table,
#define LOCKSTEP_ENUM_VALUE(Table, value, Identifier)
#include "trace/enum_names.def"
#undef LOCKSTEP_ENUM
#undef LOCKSTEP_ENUM_VALUE
};

// When `show` prints a field (field_formats.def).
enum class Shown : uint8_t { NonZero, Always, NotMax };

struct FieldFormat {
  Format format = Format::Decimal;
  Shown shown = Shown::NonZero;
};
FieldFormat field_format(RecordKind kind, int field);

// The name of `value` in an enum table ("CUDA_R_16BF"); nullopt when the table has no row for it.
std::optional<std::string_view> enum_name(Format table, int64_t value);

// What a field's text needs to know about its record besides the value.
struct FieldContext {
  std::string_view name;  // the record's name: cublasLtMatmul or a classic GEMM (algo)
  uint64_t seq = 1;       // 0: written by the trace writer itself (a Warning's code)
};

// The field's value as text: the enum name, "heuristic", "0x00ab...", or the number where the
// table has no name for it. Never contains a space (show prints name=value pairs).
std::string field_text(RecordKind kind, int field, uint64_t value, const FieldContext& context = {});
// Whether `show` prints the field at all (its Shown column).
bool field_shown(RecordKind kind, int field, uint64_t value);

// ---- warnings (warning_codes.def) ----------------------------------------------------------
enum class WarningSource : uint8_t { Writer, Shim };
// A Warning record's source: the trace writer's own records carry no seq.
inline WarningSource warning_source(uint64_t seq) {
  return seq == 0 ? WarningSource::Writer : WarningSource::Shim;
}

struct WarningInfo {
  WarningSource source;
  uint64_t code;
  std::string_view identifier;  // "RecordsDropped"
  bool summed;                  // the count is a number of things (else a detail, not summed)
  std::string_view one, many;   // the sentences ({count}, {detail})
};
// nullptr for a code this build does not know (a newer shim).
const WarningInfo* find_warning(WarningSource source, uint64_t code);

// The warning as a sentence: "3 records were dropped: ...". `detail` is the record's name (the
// shim's own text); an unknown code reads "<detail> (code N, count C)".
std::string warning_text(WarningSource source, uint64_t code, uint64_t count,
                         std::string_view detail);

}  // namespace lockstep::trace
