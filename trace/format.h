// On-disk layout of a lockstep trace file. Little-endian throughout.
//
//   FileHeader (24 bytes) | JSON header (json_bytes) | Block | Block | ...
//   Block = BlockHeader (40 bytes) | payload (payload_bytes)
//
// A block's checksum covers its header fields (checksum zeroed) and its payload, so a reader
// detects flipped bytes anywhere and a cut-off tail (the last block is short). Blocks never
// depend on later blocks: the valid prefix of a killed job's file is a usable trace.
//
// Partial StepSummary records of one step (late records, close) add up: the reader sums their
// counts and digests.
//
// Block types:
//   Records   varint-encoded records (encoding.h)
//   Strings   string definitions (id, bytes); always written before any block that uses them
//   Summary   StepSummary records, one per finished step; a diff reads only these to skip
//             equal steps without decoding their record blocks
//   Scopes    Scope records (record_kinds.def), one per scope, each defined before the first
//             block whose records carry its id (as Strings); header: min_step = max_step = 0,
//             first_seq 0. The tools read them all at once to turn a record's scope id into
//             its path of range names (TraceReader::scope_path).
//   End       the end-of-trace block (EndPayload below), the last thing the writer writes: at
//             close (reason "exit", or "exec" before an exec), or from a fatal signal's handler
//             (clean = 0, reason "signal N"). A file without one was not finished (the job was
//             killed, the disk filled, or an older writer): it is a readable prefix, never a
//             complete trace. Nothing may follow an End block (a reader treats it as corruption).
//             Header fields: record_count 0, min_step = max_step = last_step, first_seq 0.
//             Older readers skip unknown block types, so adding End kept kFormatVersion at 1.
//   Index     the step index (step_index.h): every earlier block's header fields and every
//             step's merged summary, written at close just before the End block, whose payload
//             then ends with an EndIndexTrailer pointing at it. A reader finds it from the last
//             16 bytes of the file and, when the End block and the index check out, needs no
//             walk over the blocks; any other file (killed, cut off, older writer, an index
//             that fails its checks) is walked block by block as before. Header: record_count
//             = entries, min_step/max_step = the summarized steps (0 when none), first_seq 0.
//             Added without a version bump: older readers skip the unknown block type and the
//             bytes after the End block's reason.
//
// Bounds a reader enforces before it uses a number (a hostile or corrupt file can claim any):
// payload_bytes <= kMaxBlockPayload and within the file, record_count <= what payload_bytes can
// hold (one byte per record, two per string), a string <= kMaxStringBytes, min_step <= max_step,
// JSON header <= 16 MiB and within the file; JSON keys rank / world_size / local_rank, when not
// null, integers with 0 <= rank < world_size <= kMaxWorldSize and 0 <= local_rank < world_size.
//
// JSON header keys of note (header.h builds them): rank, world_size, local_rank (null when
// unknown), run_id (the run directory's id, as in its manifest.json; absent in files written
// outside a run directory), host, pid, start_time, lockstep_version, format_version; gpu (the
// shim's: ordinal, name, uuid, pci_bus_id; null before a CUDA context), which `lockstep audit`
// names a suspected GPU by.
#pragma once

#include <cstdint>

namespace lockstep::trace {

inline constexpr char kFileMagic[8] = {'L', 'O', 'C', 'K', 'S', 'T', 'E', 'P'};
// Version 2: every record's context may carry its scope id (encoding.h, context bit 3), and
// Scopes blocks define them. A version-1 reader would stop at the first such record in the
// middle of a file ("bad context mask"): the version makes it refuse the file up front, in one
// line. Version-1 files read as before (every record in no scope).
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr uint32_t kOldestFormatVersion = 1;  // the oldest this reader still reads
inline constexpr uint32_t kBlockMagic = 0x4b42534cu;  // "LSBK"
inline constexpr const char* kTraceFileSuffix = ".lstrace";
inline constexpr const char* kManifestName = "manifest.json";

#pragma pack(push, 1)
struct FileHeader {
  char magic[8];
  uint32_t format_version;
  uint32_t json_bytes;
  uint64_t json_checksum;  // XXH64 of the JSON bytes, seed 0
};
static_assert(sizeof(FileHeader) == 24);

// Adding a type: give it the next number, document its payload above, write it in writer.cpp and
// read it in reader.cpp (blocks() lists every known type; unknown types are skipped there).
enum class BlockType : uint8_t {
  Records = 1,
  Strings = 2,
  Summary = 3,
  End = 4,
  Scopes = 5,
  Index = 6
};
inline constexpr uint8_t kLastBlockType = 6;  // a reader skips types above (a newer writer)

struct BlockHeader {
  uint32_t magic;       // kBlockMagic
  uint8_t type;         // BlockType
  uint8_t reserved[3];  // 24-bit check of this header alone (block_frame.h): a reader
                        // tells a corrupt length from a cut-off tail without the payload
  uint32_t payload_bytes;
  uint32_t record_count;  // records or strings in the payload
  uint32_t min_step;      // steps covered by the records (Summary: summarized steps)
  uint32_t max_step;
  uint64_t first_seq;  // smallest seq in the block (0 for Strings)
  uint64_t checksum;   // XXH64 over this header with checksum = 0, then the payload
};
static_assert(sizeof(BlockHeader) == 40);
// Payload of an End block: this fixed part, then reason_bytes bytes of reason (ASCII, no NUL).
// A later writer may append fields after the reason: readers ignore bytes past it.
struct EndPayload {
  uint64_t records;       // records in Records blocks: encoded ones (WriterStats::appended) plus
                          // the writer's own drop Warnings; a complete file holds exactly these
  uint64_t dropped;       // records dropped (memory budget, disk too slow)
  uint64_t steps;         // StepSummary records written (a step summarized in parts counts
                          // once per part)
  uint64_t write_errors;  // failed writes: the file may lack blocks
  uint32_t last_step;     // the highest step summarized (the step current at the end)
  uint8_t clean;          // 1: closed normally with no failed write; 0 otherwise
  uint8_t reason_bytes;   // <= kMaxEndReason
};
static_assert(sizeof(EndPayload) == 38);
// The last 16 bytes of an End block written right after an Index block (so the last 16 bytes of
// the file): where the index is, and how far back the End block starts.
struct EndIndexTrailer {
  uint64_t index_offset;     // of the Index block's header
  uint32_t end_block_bytes;  // the End block's header and payload
  uint32_t magic;            // kIndexTrailerMagic
};
static_assert(sizeof(EndIndexTrailer) == 16);
#pragma pack(pop)
inline constexpr uint32_t kIndexTrailerMagic = 0x5849534cu;  // "LSIX"

inline constexpr uint32_t kMaxBlockPayload = 64u << 20;  // a reader refuses larger blocks
inline constexpr uint32_t kMaxEndReason = 64;            // bytes of an End block's reason
inline constexpr uint32_t kMaxEndPayload = 4096;         // a reader refuses larger End blocks
// Bytes of one string (a kernel's name, a scope's, a call stack's): the writer cuts longer text
// here (StringTable), and a reader refuses a longer definition as corruption.
inline constexpr uint32_t kMaxStringBytes = 1u << 20;
// Largest world size a header may claim (and the shim takes from the environment): far above
// any job, far below what would make a tool's per-rank tables a memory bomb.
inline constexpr int kMaxWorldSize = 1 << 20;

}  // namespace lockstep::trace
