// What a run directory holds, rank by rank: counts for `stats`, `verify` and `run`'s summary.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tools/run_set.h"
#include "trace/field_format.h"

namespace lockstep::tools {

struct RankFacts {
  int rank = 0;
  std::string path;
  uint64_t file_bytes = 0;
  uint64_t blocks = 0;
  uint64_t records = 0;  // decoded (or from block headers when not decoding)
  bool truncated = false;
  uint64_t truncation_offset = 0;
  std::string corruption;  // first checksum / decoding error, when verifying
  // Filled when decoding:
  std::map<std::string, uint64_t> by_kind;
  std::map<std::string, uint64_t> kernels;  // kernel and GEMM names -> launches
  uint64_t buffers = 0, buffers_fingerprinted = 0, bytes_fingerprinted = 0;
  // Records the writer dropped: the sum of its own Warning records (RecordsDropped, seq 0), or
  // the total the shim counted at exit, whichever is larger.
  uint64_t dropped_records = 0;
  uint64_t fingerprints_dropped = 0;  // buffers the shim recorded without a fingerprint
  struct Warning {
    trace::WarningSource source;
    uint64_t code, count;
    std::string detail;  // the record's name: the writer's or the shim's own text
  };
  std::vector<Warning> warnings;  // every Warning record, in file order
  std::vector<uint32_t> record_steps;        // steps that have records, ascending
  std::vector<uint32_t> summary_steps;       // steps that have a summary, ascending
  // Decoding: steps whose records (every kind, as the writer counts them) are not as many as
  // their summaries say (blocks lost, added or rewritten with valid checksums), and the first.
  uint64_t steps_miscounted = 0;
  std::string first_miscount;  // "step S: N records, its summary says M"
};

struct ScanOptions {
  bool decode = true;   // decode every record (else block headers and summaries only)
  bool verify = false;  // check every block's checksum first (corruption is recorded, not thrown)
};

// One rank per worker, all cores. Throws TraceError only for files that cannot be opened.
std::vector<RankFacts> scan_run(const RunSet& run, const ScanOptions& options);

}  // namespace lockstep::tools
