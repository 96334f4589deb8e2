// TraceReader: the tools' side of the format. Streaming, bounded memory.
//
// Every error names the file and the byte offset. A file cut off mid-block yields its valid
// prefix and sets truncated(); a checksum mismatch or bad magic in the middle is corruption.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/format.h"
#include "trace/record.h"

namespace lockstep::trace {

// Thrown for any input that is not a valid trace: message is one line, "FILE: problem".
struct TraceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct BlockInfo {
  uint64_t offset = 0;  // of the block header in the file
  BlockType type = BlockType::Records;
  uint32_t payload_bytes = 0;
  uint32_t record_count = 0;
  uint32_t min_step = 0, max_step = 0;
  uint64_t first_seq = 0;
};

// What an End block says (format.h, EndPayload).
struct TraceEnd {
  uint64_t records = 0;       // records the writer encoded into blocks (WriterStats::appended),
                              // its own drop Warning records included: a complete file holds these
  uint64_t dropped = 0;       // records dropped (memory, disk)
  uint64_t steps = 0;         // step summaries written
  uint32_t last_step = 0;     // the step current at close
  uint64_t write_errors = 0;  // failed writes (the file may lack blocks)
  bool clean = false;         // true: closed normally (exit, exec) with no write error
  std::string reason;         // "exit", "exec", "signal 15", ...
};

struct StepSummary {
  uint32_t step = 0;
  uint64_t record_count = 0;
  uint64_t digest = 0;
  // The job's own number of this step (its StepMarker said "step 12", lockstep_step_number):
  // nullopt for an unnumbered step and for traces written before numbers were recorded.
  std::optional<uint64_t> job_step;
};

class TraceReader {
 public:
  // Opens and validates the file header and JSON header. Throws TraceError (missing, not a
  // regular file, empty, foreign, newer format version, bad JSON, rank / world_size / local_rank
  // out of bounds: format.h). Never blocks: FIFOs, devices and sockets are refused unopened.
  static std::unique_ptr<TraceReader> open(const std::string& path);
  virtual ~TraceReader() = default;

  virtual const std::string& path() const = 0;
  virtual uint32_t format_version() const = 0;
  virtual const nlohmann::json& header() const = 0;

  // Block index from headers only (payloads skipped, checksums not verified). Stops at a cut-off
  // tail (sets truncated()); throws TraceError on a bad block header in the middle, on a header
  // whose numbers are out of bounds (format.h) and on anything after an End block. The End
  // block, when there is one, is the last entry.
  virtual const std::vector<BlockInfo>& blocks() = 0;

  // True when the file ends with a step index (format.h, Index) that checks out: blocks(),
  // end() and step_summaries() then come from it, with no walk over the blocks. False for a
  // file without one (killed, cut off, an older writer), which is walked as always.
  virtual bool indexed() = 0;

  // After blocks(): the End block when it is the file's last block and its checksum holds;
  // nullopt for a trace whose writer did not finish (killed, cut off) or an older writer. A block
  // after an End block is corruption (TraceError), and so is an End block whose checksum fails
  // or whose payload is malformed.
  virtual const std::optional<TraceEnd>& end() = 0;

  // Step summaries from Summary blocks only, one per step in step order (partial summaries of
  // a step merged). Their job_step is the trace's map from trace steps to the job's numbers.
  virtual std::vector<StepSummary> step_summaries() = 0;

  // Decodes records, in file order, of the Records blocks whose step range meets
  // [first_step, last_step], verifying each block's checksum, and passes those whose step lies
  // in the range. Strings are resolved as needed. The callback returns false to stop early.
  // File order is per-thread seq order; records of different threads interleave by block, so
  // sort by seq where process order matters.
  virtual void for_each_record(uint32_t first_step, uint32_t last_step,
                               const std::function<bool(const Record&)>& callback) = 0;
  void for_each_record(const std::function<bool(const Record&)>& callback) {
    for_each_record(0, UINT32_MAX, callback);
  }

  // Reads every block and checks every checksum; throws TraceError at the first bad one.
  // `records`, when given, sees every record of the Records blocks as they are checked, in file
  // order (a tool that wants both needs one decode, not two).
  virtual void verify_all(const std::function<void(const Record&)>& records) = 0;
  void verify_all() { verify_all(nullptr); }

  virtual std::string_view string(StringId id) = 0;  // throws TraceError for an undefined id

  // A scope (record.h, ScopeId) as its path of range names, outermost first; empty for scope 0.
  // The first call reads every Scopes block (format.h). Throws TraceError for an id no Scopes
  // block defines, or a definition whose parent is not an earlier scope.
  virtual std::vector<std::string_view> scope_path(ScopeId id) = 0;
  // The enclosing scope of `id` (0: outermost); throws as scope_path.
  virtual ScopeId scope_parent(ScopeId id) = 0;

  // True once a cut-off tail was seen; truncation_offset() is where the valid prefix ends.
  virtual bool truncated() const = 0;
  virtual uint64_t truncation_offset() const = 0;
};

}  // namespace lockstep::trace
