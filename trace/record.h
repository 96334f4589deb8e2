// The in-memory model of one trace record, shared by the shim (which writes) and the tools
// (which read). Generated from record_kinds.def and dtypes.def.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::trace {

inline constexpr int kMaxFields = 24;  // Gemm has 21 (record_kinds.def)

// ---- record kinds ----------------------------------------------------------------------
enum class RecordKind : uint8_t {
#define LOCKSTEP_RECORD_KIND(Enum, id, name, ...) Enum = id,
#include "trace/record_kinds.def"
#undef LOCKSTEP_RECORD_KIND
};

// What a kind means to the diff: the diff columns of record_kinds.def (see there).
enum class DiffRole : uint8_t { Compared, Ignored };
enum class Regions : uint8_t { ExactExtents, GuessedRegions };
inline constexpr int kMaxIdentityFields = 2;

struct KindDiff {
  DiffRole role = DiffRole::Compared;
  Regions regions = Regions::ExactExtents;
  uint32_t volatile_mask = 0;  // bit i: field i may differ between two identical runs
  uint8_t identity_count = 0;  // 0: the k-th record of its (kind, name) on the stream
  std::array<uint8_t, kMaxIdentityFields> identity{};  // field indices, in the row's order
  std::string_view short_text;                         // "{field}" stands for the field's value

  bool ignored() const { return role == DiffRole::Ignored; }
  bool guessed_regions() const { return regions == Regions::GuessedRegions; }
  bool is_volatile(int field) const {
    return field >= 0 && field < 32 && ((volatile_mask >> field) & 1u);
  }
};

namespace detail {
// The identity(...) and volatile_fields(...) columns, as values of distinct types so that two
// columns written in each other's place do not compile.
struct IdentityColumn {
  uint8_t count = 0;
  std::array<uint8_t, kMaxIdentityFields> fields{};
};
struct VolatileColumn {
  uint32_t mask = 0;
};
consteval IdentityColumn identity_column(std::initializer_list<int> fields) {
  IdentityColumn column;
  // More fields than kMaxIdentityFields: not a constant expression (a compile error).
  for (int f : fields) column.fields.at(column.count++) = static_cast<uint8_t>(f);
  return column;
}
consteval VolatileColumn volatile_column(std::initializer_list<int> fields) {
  VolatileColumn column;
  for (int f : fields) column.mask |= 1u << f;
  return column;
}
consteval KindDiff make_kind_diff(DiffRole role, Regions regions, IdentityColumn identity,
                                  VolatileColumn noisy, std::string_view short_text) {
  return KindDiff{role, regions, noisy.mask, identity.count, identity.fields, short_text};
}
}  // namespace detail

// Expanded inside fields::<Kind>, where the row's field names are enumerators.
#define LOCKSTEP_KIND_COLUMN_identity(...) ::lockstep::trace::detail::identity_column({__VA_ARGS__})
#define LOCKSTEP_KIND_COLUMN_volatile_fields(...) \
  ::lockstep::trace::detail::volatile_column({__VA_ARGS__})

// Per-kind field indices: fields::Kernel::grid_x, fields::Gemm::m, ... and fields::X::kCount;
// fields::X::kDiff is the row's diff columns.
namespace fields {
#define LOCKSTEP_RECORD_KIND(Enum, id, name, diff, regions, identity, noisy, short_text, ...)     \
  struct Enum {                                                                                   \
    enum : uint8_t { __VA_ARGS__, kCount };                                                       \
    static constexpr KindDiff kDiff =                                                             \
        detail::make_kind_diff(DiffRole::diff, Regions::regions, LOCKSTEP_KIND_COLUMN_##identity, \
                               LOCKSTEP_KIND_COLUMN_##noisy, short_text);                         \
  };
#include "trace/record_kinds.def"
#undef LOCKSTEP_RECORD_KIND
}  // namespace fields

// Every kind in id order, with its CLI name, field names and diff columns.
struct RecordKindInfo {
  RecordKind kind;
  std::string_view name;
  std::vector<std::string_view> field_names;
  KindDiff diff;
};
const std::vector<RecordKindInfo>& record_kinds();
// The kind's short text (record_kinds.def) with each {field} replaced by that field's value of
// `fields` (the record's fields in table order), each as trace::field_text prints it; "" for a
// kind without one. Defined in field_format.cpp (library lockstep_trace_text).
std::string short_text(RecordKind kind, std::span<const uint64_t> fields);
// Kinds the writer makes itself, in blocks of their own type (StepSummary in Summary blocks,
// Scope in Scopes blocks): TraceWriter::append refuses them.
inline bool writers_own_kind(RecordKind kind) {
  return kind == RecordKind::StepSummary || kind == RecordKind::Scope;
}
// nullptr for an unknown wire id (a newer writer); the reader reports it.
const RecordKindInfo* find_record_kind(uint8_t wire_id);
const RecordKindInfo* find_record_kind(std::string_view name);
std::string_view record_kind_name(RecordKind kind);
int field_count(RecordKind kind);

// field_count as a table lookup for hot paths (0 for unknown kinds).
namespace detail {
inline constexpr auto kFieldCounts = [] {
  std::array<uint8_t, 256> counts{};
#define LOCKSTEP_RECORD_KIND(Enum, id, name, ...) counts[id] = fields::Enum::kCount;
#include "trace/record_kinds.def"
#undef LOCKSTEP_RECORD_KIND
  return counts;
}();
}  // namespace detail
inline int fast_field_count(RecordKind kind) {
  return detail::kFieldCounts[static_cast<uint8_t>(kind)];
}

// A kind's diff columns as a table lookup for the diff's per-record paths; an unknown kind gets
// the defaults (compared, by occurrence, exact extents, nothing volatile).
namespace detail {
inline constexpr auto kKindDiffs = [] {
  std::array<KindDiff, 256> diffs{};
#define LOCKSTEP_RECORD_KIND(Enum, id, name, ...) diffs[id] = fields::Enum::kDiff;
#include "trace/record_kinds.def"
#undef LOCKSTEP_RECORD_KIND
  return diffs;
}();
}  // namespace detail
inline const KindDiff& kind_diff(RecordKind kind) {
  return detail::kKindDiffs[static_cast<uint8_t>(kind)];
}

// ---- element types -----------------------------------------------------------------------
enum class DType : uint8_t {
#define LOCKSTEP_DTYPE(Enum, id, name, bits) Enum = id,
#include "trace/dtypes.def"
#undef LOCKSTEP_DTYPE
};
std::string_view dtype_name(DType dtype);
int dtype_bits(DType dtype);  // 0 for unknown ids

// ---- strings -------------------------------------------------------------------------------
// Strings (kernel names can be a kilobyte of templates) are stored once per file and referenced
// by id. Id 0 is the empty string. Ids are per file: compare the strings, never the ids.
using StringId = uint32_t;
// A record's name not looked up yet: TraceWriter's name resolver gives it (writer.h).
inline constexpr StringId kDeferredName = 0xffffffffu;

// ---- scopes --------------------------------------------------------------------------------
// The stack of ranges (NVTX push/pop, lockstep_scope_push, a PyTorch module's forward) open on
// the calling thread when the call was made: interned once per file as a Scope record (parent
// scope, name) in a Scopes block, and referenced by id from every record. Id 0 is no scope (the
// outermost level); a scope's parent id is always smaller than its own. Ids are per file:
// compare the paths, never the ids.
using ScopeId = uint32_t;

// ---- buffer fingerprints -------------------------------------------------------------------
enum class Role : uint8_t { In = 0, Out = 1 };

enum BufferFlags : uint8_t {
  kFingerprintValid = 1 << 0,    // fingerprint holds a value
  kFingerprintDropped = 1 << 1,  // the hash ring overflowed: no value, counted
  kExtentClamped = 1 << 2,       // region cut at the mapped range or LOCKSTEP_MAX_REGION
  kExtentExact = 1 << 3,         // extent from API semantics (GEMM, NCCL), not a guess
  // Level full: no traced op wrote the region since its allocation was made, so it was not
  // hashed (its bytes are whatever the allocator left there; no value).
  kNotWrittenSinceAlloc = 1 << 4,
  // Level full, a kernel's input region: the kernel's launches were seen not to write it
  // (collectors/pointer_roles.h), so no output entry was taken after this launch.
  kLearnedReadOnly = 1 << 5,
  // Level full, a known fill's output: not read; the digest of an earlier fill of the same value
  // and size, which wrote the same bytes (collectors/fill_digests.h).
  kFingerprintRecalled = 1 << 6,
  // Level full, a kernel's region inside a larger region of the same allocation hashed at the
  // same point of the stream (a q/k/v view of one qkv tensor): the fingerprint, bytes and
  // alloc_offset are that enclosing region's. Equal fingerprints mean equal bytes here too.
  kDigestOfEnclosing = 1 << 7,
};

// The label of a Memcpy record's input buffer that holds a host-to-device copy's source,
// fingerprinted on the CPU while the source is valid (collectors/memory_ops.cpp): a difference
// there entered from the host, and the diff classifies it so (tools/diff/compare.cpp).
inline constexpr std::string_view kHostSourceLabel = "host src";

struct BufferFingerprint {
  Role role = Role::In;
  DType dtype = DType::Unknown;
  uint8_t flags = 0;
  StringId label = 0;  // "A", "B", "D", "A_scale", "send", "recv", "arg3", ...
  uint64_t bytes = 0;
  uint64_t fingerprint = 0;    // hashing/ fingerprint of exactly `bytes` bytes
  uint32_t alloc_ordinal = 0;  // allocation the pointer fell in (order of allocation), 0 = unknown
  uint64_t alloc_offset = 0;   // byte offset of the pointer inside that allocation
  bool operator==(const BufferFingerprint&) const = default;
};

// ---- records -------------------------------------------------------------------------------
// Aligned to a cache line: a broad launch writes its record's first 168 bytes (identity and 16
// fields) into the writer's staging batch, and the collector's thread reads them on another
// core; at 280 bytes a record those bytes spanned 3 or 4 lines by where the record started
// (3.5 on average), aligned always 3 (bench/collectors/launch_lines.py: 14.2 against 14.6 lines
// written a cold launch). Each is a line taken back from the collector's core.
struct alignas(64) Record {
  RecordKind kind = RecordKind::Kernel;
  ScopeId scope = 0;    // the ranges open on the calling thread (above); 0 = none
  uint64_t seq = 0;     // order of the API call in the process (1-based, gap-free unless dropped)
  uint32_t stream = 0;  // stable stream ordinal: order of first use in the process, 0 = none
  uint32_t step = 0;    // step counter when the call was made
  uint32_t thread = 0;  // thread ordinal: order of first record in the process
  StringId name = 0;
  std::array<uint64_t, kMaxFields> fields{};  // index with fields::<Kind>::<field>
  std::vector<BufferFingerprint> buffers;
  std::vector<uint8_t> payload;  // Metric bytes; empty for other kinds

  // Keeps capacity so that a thread-local Record can be reused without allocating.
  void clear() {
    kind = RecordKind::Kernel;
    scope = 0;
    seq = 0, stream = 0, step = 0, thread = 0, name = 0;
    clear_fields();
    buffers.clear();
    payload.clear();
  }
  // Sixteen-byte stores: fields.fill(0) compiles to a rep stos, whose start-up is most of what
  // clearing 128 bytes costs (the shim clears a record on every traced call).
  void clear_fields() { clear_fields_below(kMaxFields); }
  // Fields [0, count) only (rounded up to even): a record whose kind has fewer fields leaves the
  // lines of the rest untouched (encoding and digests read the kind's fields only).
  void clear_fields_below(int count) {
    static constexpr uint64_t kZero[2] = {0, 0};
    static_assert(kMaxFields % 2 == 0);
#pragma GCC unroll 8
    for (int i = 0; i < kMaxFields && i < count; i += 2) std::memcpy(&fields[i], kZero, sizeof kZero);
  }
  // `*this = other`, but a record without buffers or payload (a launch at broad: most records)
  // is copied without the two vector assignments, whose code is most of what the copy would run;
  // this record's vectors are emptied, their capacity kept.
  void copy_from(const Record& other) {
    if (!other.buffers.empty() || !other.payload.empty()) {
      *this = other;
      return;
    }
    copy_identity(other);
    buffers.clear();
    payload.clear();
  }
  // `*this = std::move(other)` with no allocation on either side from then on: this record
  // takes other's identity, fields, buffers and payload, and other keeps this one's vectors,
  // emptied (their capacity kept). A std::swap would copy the fields three times.
  void take_from(Record& other) {
    copy_identity(other);
    buffers.swap(other.buffers);
    payload.swap(other.payload);
    other.buffers.clear();
    other.payload.clear();
  }
  bool operator==(const Record&) const = default;

  // Every member but the two vectors (one list for copy_from and take_from; the records a held
  // State record stands for take its identity so).
  void copy_identity(const Record& other) {
    kind = other.kind;
    scope = other.scope;
    seq = other.seq, stream = other.stream, step = other.step, thread = other.thread;
    name = other.name;
    fields = other.fields;
  }
};

}  // namespace lockstep::trace
